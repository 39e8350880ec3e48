"""Writing bench results: JSON (everything), Markdown (the table), JSONL (diagnostics).

Also records the environment (library versions, CPU count, command line) so a number in
the README can be traced back to the run that produced it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from ..files import atomic_open

DEFAULT_OUT = Path("bench-results") / "locomo"
VERSIONED = ("ariadnemem", "chromadb", "onnxruntime", "torch", "sentence-transformers", "numpy", "tiktoken")


def environment() -> dict[str, Any]:
    """Python and library versions, CPU count and platform of this run."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "versions": versions,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "command": list(sys.argv),
    }


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf -> None, tuples/sets -> lists, unknown objects -> str."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as fh:
        fh.write(json.dumps(_clean(data), indent=2, ensure_ascii=False) + "\n")


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(_clean(row), ensure_ascii=False) + "\n")
            n += 1
    return n


def fmt(value: Any, kind: str = "pct") -> str:
    """Table cell: ``pct`` -> 0.734 as ``73.4``; ``int`` -> rounded; ``ms`` -> one decimal."""
    if value is None:
        return "–"
    if kind == "pct":
        return f"{100.0 * value:.1f}"
    if kind == "int":
        return f"{value:.0f}"
    if kind == "ms":
        return f"{value:.1f}"
    if kind == "rate":
        return f"{value:.2f}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    align = ["---"] + ["---:"] * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


LOCOMO_HEADERS = (
    "system",
    "cat1 multi-hop R / all",
    "cat2 temporal R / all",
    "cat3 open-domain R / all",
    "cat4 single-hop R / all",
    "cat1-4 R / all",
    "cat5 adv. R",
    "mean tokens",
    "p50 ms",
)


def locomo_rows(systems: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for name, sys_ in systems.items():
        cats = sys_["summary"]["categories"]
        row = [name]
        for c in ("1", "2", "3", "4"):
            g = cats.get(c)
            row.append(f"{fmt(g['recall'])} / {fmt(g['all_hit'])}" if g else "–")
        ov = sys_["summary"]["overall"]
        row.append(f"{fmt(ov['recall'])} / {fmt(ov['all_hit'])}")
        g5 = cats.get("5")
        row.append(fmt(g5["recall"]) if g5 else "–")
        row.append(fmt(sys_["summary"]["all"]["tokens_mean"], "int"))
        row.append(fmt(sys_["summary"]["all"]["latency_p50_ms"], "ms"))
        rows.append(row)
    return rows


def locomo_markdown(results: Mapping[str, Any]) -> str:
    """results.md: the comparison table plus the facts needed to read it."""
    ds = results["dataset"]
    rep = ds["evidence_repair"]
    env = results["environment"]
    lines = [
        "# LoCoMo evidence recall",
        "",
        f"Dataset: `{Path(ds['path']).name}` — {len(ds['conversations'])} conversations, "
        f"{ds['turns']} turns, {ds['questions']} questions "
        f"({ds['questions_scored']} with valid evidence).",
        "",
        "R = evidence recall (share of gold evidence turns covered by the context), all = share of "
        "questions with every evidence turn covered, both in %, over questions with valid evidence. "
        "Tokens: cl100k_base tokens of the context handed to the generator. Latency: retrieval only, "
        "query embedding excluded (pre-embedded for every system).",
        "",
        markdown_table(LOCOMO_HEADERS, locomo_rows(results["systems"])),
        "",
    ]
    ing = [(n, s["ingest"]) for n, s in results["systems"].items() if s.get("ingest")]
    if ing:
        lines += ["## Ingest", ""]
        rows = []
        for n, i in ing:
            rows.append([n, str(i["turns"]), fmt(i["seconds"], "ms"), fmt(i["turns_per_s"], "int"),
                         str(i["entries"]), fmt(i["gate_drop_rate"]), str(i["merge"]), str(i["link"]),
                         str(i["add"])])
        lines += [markdown_table(("system", "turns", "s", "turns/s", "entries", "gate drop %", "MERGE",
                                  "LINK", "ADD"), rows), ""]
    extra = []
    for n, s in results["systems"].items():
        if s.get("kind") == "ariadnemem":
            a = s["summary"]["all"]
            fps = s["summary"].get("fast_paths", {})
            fired = "; ".join(f"{name} {f['fired']}x, evidence R {fmt(f['evidence_recall'])} / all "
                              f"{fmt(f['evidence_all_hit'])}" for name, f in fps.items()) or "none fired"
            extra.append([n, fmt(a["fast_path_rate"]), fired, fmt(a["bridges_mean"], "rate"),
                          fmt(a["latency_p95_ms"], "ms")])
    if extra:
        lines += ["## Phase II", "", markdown_table(
            ("system", "fast-path %", "fast paths: fired, evidence right (%)", "bridges / question", "p95 ms"),
            extra), ""]
    lines += [
        "## Run",
        "",
        f"- evidence ids: {rep['malformed_strings']} malformed strings "
        f"({rep['repaired_strings']} repaired, {rep['split_strings']} of them split, "
        f"{rep['skipped_malformed']} skipped), {rep['skipped_nonexistent']} ids not in the conversation "
        f"skipped, {rep['questions_without_evidence']} questions without valid evidence",
        f"- peak RSS: {results['peak_rss'].get('ru_maxrss_mb')} MB; wall time {results['elapsed_s']:.1f} s; "
        f"{env['cpu_count']} CPUs",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v),
        "",
    ]
    return "\n".join(lines)
