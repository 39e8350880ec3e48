"""``ariadnemem`` command line: ``demo`` and the benches.

    ariadnemem demo
    ariadnemem bench locomo PATH [--conversations ID,...] [--out DIR] [--ablate NAME,...] [--store DIR]
                                 [--qa [--qa-per-category N] [--qa-seed S]] [--llm-extract]
    ariadnemem bench ingest PATH [--out DIR] [--store DIR]
    ariadnemem bench latency PATH [--conversation ID] [--out DIR]
    ariadnemem bench scale [--entries N] [--out DIR] [--seed S] [--quiet]

Progress goes to stderr; stdout gets only the final summary (where the results are and
the headline numbers), so the output can be piped.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    from .bench.qa_run import LLM_TURNS_PER_CALL

    parser = argparse.ArgumentParser(prog="ariadnemem", description="AriadneMem: graph-structured long-term memory.")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("demo", help="run the offline demo dialogue (ariadnemem demo --help for its options)")

    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True)

    loc = bench.add_parser("locomo", help="LoCoMo evidence recall vs flat baselines (--qa: end-to-end QA with an LLM)")
    loc.add_argument("path", type=Path, help="LoCoMo JSON file (a list of samples)")
    loc.add_argument("--conversations", type=_csv, default=None, help="sample ids, comma-separated (default: all)")
    loc.add_argument("--out", type=Path, default=Path("bench-results/locomo"), help="output directory")
    loc.add_argument("--ablate", type=_csv, default=[],
                     help="extra systems with a component off: gating,coarsening,bridges,paths,fastpaths")
    loc.add_argument("--store", type=Path, default=None,
                     help="keep each system's memory under DIR/<system> (reused by later runs)")
    loc.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    loc.add_argument("--quiet", action="store_true", help="no progress bars")
    loc.add_argument("--qa", action="store_true",
                     help="also answer questions end to end with the configured LLM (AriadneMem vs flat hybrid@30)")
    loc.add_argument("--qa-per-category", type=int, default=None, metavar="N",
                     help="stratified sample: N questions per category (default: every question)")
    loc.add_argument("--qa-seed", type=int, default=0, help="seed of the stratified sample (default 0)")
    loc.add_argument("--qa-concurrency", type=int, default=2, help="answer calls in flight (default 2)")
    loc.add_argument("--qa-include-adversarial", action="store_true", help="also answer category 5")
    loc.add_argument("--llm-extract", action="store_true", help="build AriadneMem's memory with the LLM extractor")
    loc.add_argument("--llm-turns-per-call", type=int, default=LLM_TURNS_PER_CALL, metavar="N",
                     help=f"LLM extractor: turns per extraction call, 0 = whole window (default {LLM_TURNS_PER_CALL})")
    loc.add_argument("--base-url", default=None, help="OpenAI-compatible base URL (default: $OPENAI_BASE_URL)")
    loc.add_argument("--model", default=None, help="LLM model name (default: $ARIADNEMEM_LLM_MODEL)")

    ing = bench.add_parser("ingest", help="ingest throughput over a whole LoCoMo file")
    ing.add_argument("path", type=Path)
    ing.add_argument("--out", type=Path, default=Path("bench-results/ingest"))
    ing.add_argument("--store", type=Path, default=None, help="persist the memory in DIR (default: temporary)")
    ing.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ing.add_argument("--quiet", action="store_true")

    lat = bench.add_parser("latency", help="retrieval latency vs flat hybrid over the same entries")
    lat.add_argument("path", type=Path)
    lat.add_argument("--conversation", default=None, help="sample id (default: the file's first)")
    lat.add_argument("--out", type=Path, default=Path("bench-results/latency"))
    lat.add_argument("-k", type=int, default=10, help="flat hybrid top-k (default 10)")
    lat.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    lat.add_argument("--quiet", action="store_true")

    sca = bench.add_parser("scale", help="store and retrieval at 100k entries (synthetic dialogue, no dataset)")
    sca.add_argument("--entries", type=int, default=100_000, help="grow one memory to N entries (default 100000)")
    sca.add_argument("--out", type=Path, default=Path("bench-results/scale"))
    sca.add_argument("--seed", type=int, default=0, help="seed of the synthetic dialogue (default 0)")
    sca.add_argument("--quiet", action="store_true")
    return parser


def _check_path(parser: argparse.ArgumentParser, path: Path) -> None:
    if not path.is_file():
        parser.error(f"no such file: {path}")


def _llm_for_locomo(parser: argparse.ArgumentParser, args: argparse.Namespace) -> object | None:
    """The LLM client for ``--qa`` / ``--llm-extract`` (None if neither is asked for).

    Checked before any work: a missing LLM is a usage error, not a failure an hour into
    the run after every memory has been built.
    """
    import os

    if not (args.qa or args.llm_extract):
        return None
    from .llm import ENV_API_KEY, ENV_BASE_URL, LLMClient

    flags = "--qa/--llm-extract"
    if not (args.base_url or os.environ.get(ENV_BASE_URL) or os.environ.get(ENV_API_KEY)):
        parser.error(f"{flags} needs an LLM: set {ENV_BASE_URL} (local server) or {ENV_API_KEY}, "
                     "or pass --base-url")
    if args.qa_per_category is not None and args.qa_per_category < 1:
        parser.error("--qa-per-category must be >= 1")
    if args.qa_concurrency < 1:
        parser.error("--qa-concurrency must be >= 1")
    if args.llm_turns_per_call < 0:
        parser.error("--llm-turns-per-call must be >= 0")
    from .errors import LLMError

    try:
        return LLMClient(base_url=args.base_url, model=args.model)
    except LLMError as exc:
        parser.error(str(exc))
    return None  # pragma: no cover - parser.error exits


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:  # the demo has its own options (``ariadnemem demo --help``)
        from .demo import main as demo_main

        result = demo_main(argv[1:])
        return result if isinstance(result, int) else 0
    parser = build_parser()
    args = parser.parse_args(argv)

    if args.bench == "scale":  # no dataset path: synthetic turns
        return _bench_scale(parser, args)
    _check_path(parser, args.path)
    # Usage errors (unknown ids or ablation names) are reported before any work starts.
    from .bench.locomo import sample_ids
    from .bench.runner import parse_ablations

    known = sample_ids(args.path)
    wanted = args.conversations if args.bench == "locomo" else ([args.conversation] if args.bench == "latency"
                                                                  and args.conversation else [])
    unknown = [w for w in wanted or [] if w not in known]
    if unknown:
        parser.error(f"unknown conversation ids {unknown}; the file has {', '.join(known)}")
    if args.bench == "locomo":
        try:
            ablate = parse_ablations(args.ablate)
        except ValueError as exc:
            parser.error(str(exc))
        llm = _llm_for_locomo(parser, args)
        from .bench.qa_run import QASettings, qa_table
        from .bench.report import LOCOMO_HEADERS, locomo_rows, markdown_table
        from .bench.runner import run_locomo

        qa = (QASettings(per_category=args.qa_per_category, seed=args.qa_seed, concurrency=args.qa_concurrency,
                         include_adversarial=args.qa_include_adversarial) if args.qa else None)
        res = run_locomo(args.path, args.conversations, args.out, ablate, store=args.store,
                         progress=not args.quiet, threads=args.threads, llm=llm, qa=qa,
                         llm_extract=args.llm_extract, llm_turns_per_call=args.llm_turns_per_call or None)
        print(markdown_table(LOCOMO_HEADERS, locomo_rows(res["systems"])))
        qa_files = ""
        if res.get("qa"):
            q = res["qa"]
            print(f"\nQA ({q['model']} at {q['base_url_host']}, {q['sample']['n']} questions, F1 in %):")
            print(qa_table(q))
            qa_files = ", qa.md, qa.json"
        print(f"\nwrote {Path(res['out']) / 'results.md'}, results.json, diagnostics.jsonl{qa_files} "
              f"({res['elapsed_s']:.0f} s)")
    elif args.bench == "ingest":
        from .bench.ingest import run_ingest

        res = run_ingest(args.path, args.out, store=args.store, progress=not args.quiet, threads=args.threads)
        f = res["ingest"]
        print(f"{f['turns']} turns in {f['seconds']:.1f} s = {f['turns_per_s'] or 0:.0f} turns/s; "
              f"{f['entries']} entries; gate drop {100 * (f['gate_drop_rate'] or 0):.1f} %; "
              f"MERGE {f['merge']} LINK {f['link']} ADD {f['add']}; "
              f"peak RSS {res['peak_rss']['ru_maxrss_mb']} MB")
        print(f"wrote {Path(res['out']) / 'ingest.md'} and ingest.json")
    elif args.bench == "latency":
        from .bench.latency import run_latency

        res = run_latency(args.path, args.conversation, args.out, k=args.k, progress=not args.quiet,
                          threads=args.threads)
        a, f = res["ariadnemem"], res["flat_hybrid"]
        print(f"AriadneMem p50 {a['without_embedding']['p50_ms']:.1f} ms / p95 "
              f"{a['without_embedding']['p95_ms']:.1f} ms (with query embedding: p50 "
              f"{a['with_embedding']['p50_ms']:.1f} ms); flat hybrid p50 "
              f"{f['without_embedding']['p50_ms']:.2f} ms; ratio {res['ratio_p50'] or 0:.1f}x")
        print(f"wrote {Path(res['out']) / 'latency.md'} and latency.json")
    return 0


def _bench_scale(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.entries < 1:
        parser.error("--entries must be >= 1")
    from .bench.scale import run_scale

    res = run_scale(args.out, entries=args.entries, seed=args.seed, progress=not args.quiet)
    f, r, met = res["ingest"], res["retrieve"], res["meets_targets"]
    print(f"{res['entries']} entries from {f['turns']} turns in {f['seconds']:.0f} s = "
          f"{f['turns_per_s'] or 0:.0f} turns/s; retrieve p50 {r['p50_ms'] or 0:.1f} ms / p95 "
          f"{r['p95_ms'] or 0:.1f} ms over {r['n']} questions; peak RSS {res['peak_rss']['ru_maxrss_mb']} MB; "
          f"targets met: p50 {met['p50']}, RSS {met['rss']}")
    print(f"wrote {Path(res['out']) / 'scale.md'} and scale.json")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
