"""The latency bench: ``retrieve`` per question, with and without query embedding time,
against a flat hybrid top-k over the *same stored entries*, measured in the same run.

Two passes over the questions of one conversation:

1. cold: nothing about the questions is cached, so each ``retrieve`` embeds its query
   (what a first-time question costs); the flat baseline embeds with its own, equally
   cold embedder instance;
2. warm: the questions are pre-embedded with the memory's embedder (its LRU cache then
   serves them) and the baseline gets the vectors, so both measure retrieval alone.

Targets: AriadneMem p50 <= 20 ms and <= 3x the flat hybrid p50 (warm pass).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..reasoning.channels import rrf
from .baselines import FUSION_POOL, FlatIndex
from .ingest import fresh_embedder, ingest_conversation, set_torch_threads, warm_embedder
from .locomo import load_locomo
from .metrics import mean, peak_rss, percentile
from .progress import progress_bar
from .report import environment, fmt, markdown_table, write_json

DEFAULT_OUT = Path("bench-results") / "latency"
TARGET_P50_MS = 20.0
TARGET_RATIO = 3.0
WARMUP_QUERY = "What happened recently?"


def latency_summary(values: Sequence[float]) -> dict[str, float | None]:
    return {"p50_ms": percentile(values, 50), "p95_ms": percentile(values, 95), "mean_ms": mean(values),
            "n": len(values)}


def _stage_summary(stages: list[dict[str, float]]) -> dict[str, dict[str, float | None]]:
    keys = sorted({k for s in stages for k in s})
    return {k: {"p50_ms": percentile([s[k] for s in stages if k in s], 50),
                "mean_ms": mean(s[k] for s in stages if k in s)} for k in keys}


def store_hybrid(mem: Any, user_id: str, query: str, query_vector: np.ndarray, k: int,
                 pool: int = FUSION_POOL) -> tuple[list[str], float]:
    """Flat hybrid top-``k`` through the memory's own indexes (chromadb dense + SQLite FTS5
    BM25, RRF-fused) and the entries fetched back: (ids, ms).

    The in-memory baseline measures the method with the fastest possible indexes; this one
    prices the same flat method on the storage AriadneMem uses, so the ratio isolates the
    cost of the graph stages from the cost of the storage engine.
    """
    t0 = time.perf_counter()
    dense = [i for i, _ in mem.storage.dense_search(query_vector, pool, user_id=user_id)]
    lexical = [i for i, _ in mem.storage.lexical_search(query, pool, user_id=user_id)]
    ids = [i for i, _ in rrf([dense, lexical])[:k]]
    found = mem.storage.get_many(ids, user_id=user_id)
    texts = [found[i].text for i in ids if i in found]
    ms = (time.perf_counter() - t0) * 1000.0
    return ids[: len(texts)], ms


def run_latency(path: str | Path, conversation: str | None = None, out: str | Path | None = None, *,
                config: Config | None = None, embedder: Any = None, k: int = 10, progress: bool = True,
                threads: int | None = None, chroma_host: str | None = None,
                chroma_port: int | None = None) -> dict[str, Any]:
    """Measure retrieval latency on one conversation (default: the file's first); write
    latency.json and latency.md under ``out`` (default ``bench-results/latency``).

    ``chroma_host``: keep the memory's dense index on that Chroma server (server mode), to
    measure what the network round trips cost; the flat baselines stay local."""
    from ..embedding import MiniLMEmbedder
    from ..memory import AriadneMemory

    t_start = time.perf_counter()
    torch_threads = set_torch_threads(threads)
    dataset = load_locomo(path, [conversation] if conversation else None)
    conv = dataset.conversations[0]
    embedder = embedder or MiniLMEmbedder(threads=threads)
    warm_embedder(embedder)
    # The baseline's own instance: same model, separate (cold) query cache.
    flat_embedder = fresh_embedder(embedder)
    cfg = config or Config()
    questions = [q.question for q in conv.questions]
    rows: list[dict[str, Any]] = []
    stages: list[dict[str, float]] = []
    with progress_bar(progress) as prog, AriadneMemory(None, cfg, embedder=embedder, chroma_host=chroma_host,
                                                       chroma_port=chroma_port) as mem:
        dense_index = "chroma server" if mem.storage.remote else "embedded chromadb"
        task = prog.add_task(f"ingest {conv.sample_id}", total=1)
        ingest_s = ingest_conversation(mem, conv)
        prog.advance(task)
        entries = mem.entries(user_id=conv.user_id)
        index = FlatIndex([e.id for e in entries], [e.text for e in entries],
                          embeddings=np.stack([e.vector for e in entries]) if entries else None,
                          embedder=flat_embedder)
        mem.retrieve(WARMUP_QUERY, user_id=conv.user_id)  # untimed: first-query index loads
        try:
            task = prog.add_task("cold pass (with query embedding)", total=len(questions))
            for q in conv.questions:
                t0 = time.perf_counter()
                graph = mem.retrieve(q.question, user_id=conv.user_id)
                cold = (time.perf_counter() - t0) * 1000.0
                flat_cold_ms = index.search("hybrid", q.question, k).latency_ms
                rows.append({"qid": q.qid, "category": q.category, "fast_path": graph.fast_path,
                             "ariadnemem_with_embedding_ms": cold, "flat_hybrid_with_embedding_ms": flat_cold_ms})
                prog.advance(task)
            store_ok, store_error = True, None
            embedder.embed(questions)  # pre-embed: the memory's cache now holds every query
            qvecs = flat_embedder.embed(questions)
            task = prog.add_task("warm pass (query embedding excluded)", total=len(questions))
            for row, q, qvec in zip(rows, conv.questions, qvecs, strict=True):
                t0 = time.perf_counter()
                graph = mem.retrieve(q.question, user_id=conv.user_id)
                row["ariadnemem_ms"] = (time.perf_counter() - t0) * 1000.0
                row["flat_hybrid_ms"] = index.search("hybrid", q.question, k, query_vector=qvec).latency_ms
                if store_ok:
                    try:
                        row["store_hybrid_ms"] = store_hybrid(mem, conv.user_id, q.question, qvec, k)[1]
                    except (AttributeError, TypeError) as exc:  # the store's internals changed
                        store_ok = False
                        store_error = f"{type(exc).__name__}: {exc}"
                stages.append({key: float(v) for key, v in graph.stats.items()
                               if key.startswith("ms_") and isinstance(v, int | float)})
                prog.advance(task)
        finally:
            index.close()
        n_entries = len(entries)

    def col(name: str) -> list[float]:
        return [r[name] for r in rows]

    ours = latency_summary(col("ariadnemem_ms"))
    flat = latency_summary(col("flat_hybrid_ms"))
    ratio = (ours["p50_ms"] / flat["p50_ms"]) if ours["p50_ms"] is not None and flat["p50_ms"] else None
    store_vals = [r["store_hybrid_ms"] for r in rows if "store_hybrid_ms" in r]
    via_store = latency_summary(store_vals) if store_ok and store_vals else None
    ratio_store = (ours["p50_ms"] / via_store["p50_ms"]) \
        if ours["p50_ms"] is not None and via_store and via_store["p50_ms"] else None
    ours_cold = latency_summary(col("ariadnemem_with_embedding_ms"))
    flat_cold = latency_summary(col("flat_hybrid_with_embedding_ms"))
    ratio_cold = (ours_cold["p50_ms"] / flat_cold["p50_ms"]) if ours_cold["p50_ms"] and flat_cold["p50_ms"] else None
    results: dict[str, Any] = {
        "benchmark": "latency",
        "dataset": {"path": str(path), "conversation": conv.sample_id, "turns": len(conv.turns),
                    "questions": len(questions), "entries": n_entries},
        "ingest_s": round(ingest_s, 3),
        "dense_index": dense_index,
        "flat_hybrid_k": k,
        "ariadnemem": {"with_embedding": ours_cold,
                       "without_embedding": ours, "stages_warm": _stage_summary(stages),
                       "fast_path_rate": mean(r["fast_path"] is not None for r in rows)},
        "flat_hybrid": {"with_embedding": flat_cold,
                        "without_embedding": flat},
        "flat_hybrid_store": {"without_embedding": via_store, "error": store_error},
        "ratio_p50": ratio,
        "ratio_p50_vs_store_hybrid": ratio_store,
        "ratio_p50_with_embedding": ratio_cold,
        "targets": {"p50_ms": TARGET_P50_MS, "ratio": TARGET_RATIO},
        "meets_targets": {
            "p50": ours["p50_ms"] is not None and ours["p50_ms"] <= TARGET_P50_MS,
            "ratio": ratio is not None and ratio <= TARGET_RATIO,
            "ratio_vs_store_hybrid": ratio_store is not None and ratio_store <= TARGET_RATIO,
            "ratio_with_embedding": ratio_cold is not None and ratio_cold <= TARGET_RATIO,
        },
        "per_question": rows,
        "config": cfg.to_dict(),
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "environment": environment() | {"torch_threads": torch_threads},
        "peak_rss": peak_rss(),
        "elapsed_s": time.perf_counter() - t_start,
    }
    out_dir = Path(out) if out is not None else DEFAULT_OUT
    write_json(out_dir / "latency.json", results)
    (out_dir / "latency.md").write_text(latency_markdown(results), encoding="utf-8")
    results["out"] = str(out_dir)
    return results


def latency_markdown(results: dict[str, Any]) -> str:
    a, f = results["ariadnemem"], results["flat_hybrid"]
    def cells(d: dict[str, Any]) -> list[str]:
        return [fmt(d["without_embedding"]["p50_ms"], "ms"), fmt(d["without_embedding"]["p95_ms"], "ms"),
                fmt(d["with_embedding"]["p50_ms"], "ms"), fmt(d["with_embedding"]["p95_ms"], "ms")]

    rows = [["AriadneMem retrieve", *cells(a)],
            [f"flat hybrid top-{results['flat_hybrid_k']} (same entries, numpy + in-memory FTS5)", *cells(f)]]
    fs = results["flat_hybrid_store"]["without_embedding"]
    if fs:
        rows.append([f"flat hybrid top-{results['flat_hybrid_k']} via the memory's store (chromadb + FTS5)",
                     fmt(fs["p50_ms"], "ms"), fmt(fs["p95_ms"], "ms"), "–", "–"])
    stage_rows = [[k, fmt(v["p50_ms"], "ms"), fmt(v["mean_ms"], "ms")] for k, v in a["stages_warm"].items()]
    ds = results["dataset"]
    env = results["environment"]
    lines = [
        "# Retrieval latency",
        "",
        f"Conversation `{ds['conversation']}`: {ds['turns']} turns -> {ds['entries']} entries, "
        f"{ds['questions']} questions; the memory's dense index: {results.get('dense_index', 'embedded chromadb')}. "
        "Warm = query embedding excluded (pre-embedded, cache warm); cold = each query embedded at query time.",
        "",
        markdown_table(("system", "warm p50 ms", "warm p95 ms", "cold p50 ms", "cold p95 ms"), rows),
        "",
        f"Ratio of p50s (warm): {fmt(results['ratio_p50'], 'rate')}x (target <= {TARGET_RATIO:g}x); "
        f"vs the store-backed flat hybrid: {fmt(results['ratio_p50_vs_store_hybrid'], 'rate')}x; "
        f"cold (query embedding included in both): {fmt(results['ratio_p50_with_embedding'], 'rate')}x; "
        f"AriadneMem p50 target <= {TARGET_P50_MS:g} ms. Meets: {results['meets_targets']}. "
        f"Fast-path share: {fmt(a['fast_path_rate'])} %.",
        "",
        "Stages (warm pass, from `EvidenceGraph.stats`):",
        "",
        markdown_table(("stage", "p50 ms", "mean ms"), stage_rows) if stage_rows else "(none reported)",
        "",
        f"{env['cpu_count']} CPUs; " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v),
        "",
    ]
    return "\n".join(lines)
