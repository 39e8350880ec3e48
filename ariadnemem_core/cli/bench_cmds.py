"""``ariadnemem bench ...``: LoCoMo recall (and QA), ingest, latency, scale, startup.

Each bench writes JSON + a markdown table to ``--out``; progress goes to stderr and
stdout gets only the headline numbers, so the output can be piped. Usage errors (unknown
conversation ids or ablation names, a missing LLM for ``--qa``) are reported before any
work starts: not an hour into a run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ._common import HostOpt, PortOpt, fail, handle_errors

bench_app = typer.Typer(help="Benchmarks: write JSON + a markdown table to --out.", no_args_is_help=True)

DataArg = Annotated[Path, typer.Argument(metavar="PATH", help="LoCoMo JSON file (a list of samples).", exists=True,
                                         dir_okay=False)]
QuietOpt = Annotated[bool, typer.Option("--quiet", help="No progress bars.")]
ThreadsOpt = Annotated[int | None, typer.Option("--threads", min=1, help="Embedding CPU threads (default: all).")]


def _require_bench() -> None:
    """Stop with a clear error when the ``bench`` extra is not installed."""
    from ..bench import require_extra

    require_extra()


def _csv(values: list[str] | None) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def _check_ids(path: Path, wanted: list[str]) -> None:
    """The file is a LoCoMo file (read once, so a malformed one is one line, not a
    traceback half-way through a run) and has the conversations asked for."""
    import json

    from ..bench.locomo import load_locomo, sample_ids

    try:
        load_locomo(path)
        known = sample_ids(path)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise typer.BadParameter(f"{path} is not JSON: {exc}") from None
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise typer.BadParameter(f"{path} is not a LoCoMo file (a list of samples with sample_id, "
                                 f"conversation and qa): {type(exc).__name__}: {exc}") from None
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise typer.BadParameter(f"unknown conversation ids {unknown}; the file has {', '.join(known)}")


@bench_app.command("locomo")
@handle_errors
def locomo(
    path: DataArg,
    conversations: Annotated[list[str] | None, typer.Option(
        "--conversations", help="Sample ids, comma-separated (default: all).")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("bench-results/locomo"),
    ablate: Annotated[list[str] | None, typer.Option(
        "--ablate",
        help="Extra systems with a component off: gating,low_info_gate,coarsening,bridges,paths,fastpaths.")] = None,
    store: Annotated[str | None, typer.Option(
        "--store", help="Keep each system's memory under DIR/<system> (reused by later runs), or in a "
                        "postgresql:// database (one schema per system).")] = None,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    qa: Annotated[bool, typer.Option(
        "--qa", help="Also answer questions end to end with the configured LLM (vs flat hybrid@30).")] = False,
    qa_per_category: Annotated[int, typer.Option(
        "--qa-per-category", min=1, metavar="N",
        help="Stratified sample: N questions per category (more than a category holds: all of it).")] = 50,
    qa_seed: Annotated[int, typer.Option("--qa-seed", help="Seed of the stratified sample.")] = 0,
    qa_concurrency: Annotated[int, typer.Option("--qa-concurrency", min=1, help="Answer calls in flight.")] = 2,
    qa_include_adversarial: Annotated[bool, typer.Option(
        "--qa-include-adversarial", help="Also answer category 5.")] = False,
    qa_ablate: Annotated[list[str] | None, typer.Option(
        "--qa-ablate",
        help="QA variants answered by the same reader: "
             "turns,messages,paths,restated,flat,relevance,bridges,updates or all.")] = None,
    qa_cache: Annotated[Path | None, typer.Option(
        "--qa-cache", metavar="FILE",
        help="Answer cache (JSON lines): an unchanged prompt's answer is replayed, so a stopped run resumes.",
    )] = None,
    qa_replay_only: Annotated[bool, typer.Option(
        "--qa-replay-only", help="Report a stopped run so far from --qa-cache; ask nothing.")] = False,
    llm_extract: Annotated[bool, typer.Option(
        "--llm-extract", help="Build AriadneMem's memory with the LLM extractor.")] = False,
    llm_turns_per_call: Annotated[int | None, typer.Option(
        "--llm-turns-per-call", min=0, metavar="N",
        help="LLM extractor: turns per extraction call, 0 = whole window.")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible base URL.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="LLM model name.")] = None,
) -> None:
    """LoCoMo evidence recall of AriadneMem vs flat baselines (--qa: end-to-end QA)."""
    _require_bench()
    from ..bench.qa_ablations import parse_qa_ablations
    from ..bench.qa_run import LLM_TURNS_PER_CALL, QASettings, difference_table, qa_table
    from ..bench.report import LOCOMO_HEADERS, locomo_rows, markdown_table
    from ..bench.runner import parse_ablations, run_locomo

    ids = _csv(conversations) or None
    _check_ids(path, ids or [])
    try:
        ablations = parse_ablations(_csv(ablate))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--ablate") from None
    try:
        qa_ablations = parse_qa_ablations(_csv(qa_ablate))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--qa-ablate") from None
    if qa_replay_only and not qa_cache:
        raise typer.BadParameter("a replay reads the answer cache: add --qa-cache FILE", param_hint="--qa-replay-only")
    if qa_ablations and not qa:
        raise typer.BadParameter("QA ablations are answered by the QA bench: add --qa", param_hint="--qa-ablate")
    llm = _llm(qa or llm_extract, base_url, model)
    turns_per_call = LLM_TURNS_PER_CALL if llm_turns_per_call is None else llm_turns_per_call
    settings = (QASettings(per_category=qa_per_category, seed=qa_seed, concurrency=qa_concurrency,
                           include_adversarial=qa_include_adversarial, ablations=qa_ablations,
                           cache=str(qa_cache) if qa_cache else None, replay_only=qa_replay_only) if qa else None)
    res = run_locomo(path, ids, out_dir, ablations, store=store, progress=not quiet, threads=threads, llm=llm,
                     qa=settings, llm_extract=llm_extract, llm_turns_per_call=turns_per_call or None)
    print(markdown_table(LOCOMO_HEADERS, locomo_rows(res["systems"])))
    qa_files = ""
    if res.get("qa"):
        q = res["qa"]
        print(f"\nQA ({q['model']} at {q['base_url_host']}, {q['sample']['n']} questions, F1 in %):")
        print(qa_table(q))
        if q.get("differences"):
            print(f"\nDifferences from AriadneMem (paired 95% CI, F1 points):\n{difference_table(q)}")
        qa_files = ", qa.md, qa.json, qa.png"
    print(f"\nwrote {Path(res['out']) / 'results.md'}, results.json, diagnostics.jsonl{qa_files} "
          f"({res['elapsed_s']:.0f} s)")
    if res.get("qa") and not res["qa"]["valid"]:
        bad = [f"{n} ({s['invalid_reason']})" for n, s in res["qa"]["systems"].items() if not s["valid"]]
        raise fail(f"QA answer calls failed; scores withheld for {'; '.join(bad)}")


def _llm(needed: bool, base_url: str | None, model: str | None) -> object | None:
    """The LLM client for --qa / --llm-extract, checked before any work."""
    if not needed:
        return None
    from ..llm import ENV_API_KEY, ENV_BASE_URL, LLMClient

    if not (base_url or os.environ.get(ENV_BASE_URL) or os.environ.get(ENV_API_KEY)):
        raise typer.BadParameter(f"--qa/--llm-extract needs an LLM: set {ENV_BASE_URL} (local server) or "
                                 f"{ENV_API_KEY}, or pass --base-url")
    return LLMClient(base_url=base_url, model=model)


@bench_app.command("beam")
@handle_errors
def beam(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="BEAM folder (holding 100K/N/chat.json) or one "
                                         "conversation folder.", exists=True, file_okay=False)],
    conversations: Annotated[list[str] | None, typer.Option(
        "--conversations", help="Conversation folder names, comma-separated (default: all).")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("bench-results/beam"),
    store: Annotated[Path | None, typer.Option(
        "--store", help="Keep the memory under DIR (default: a temporary directory).")] = None,
    as_one_user: Annotated[bool, typer.Option(
        "--one-user", help="Ask every question of all the conversations as one user's log (the long "
        "horizon: ten 100K conversations make ~2,400 messages).")] = False,
    quiet: QuietOpt = False,
) -> None:
    """BEAM evidence recall on user-assistant conversations vs flat baselines at equal token budgets."""
    _require_bench()
    from ..bench.beam import beam_markdown, run_beam

    try:
        res = run_beam(path, conversations=_csv(conversations) or None, out_dir=out_dir, store=store,
                       progress=not quiet, as_one_user=as_one_user)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--conversations") from None
    print(beam_markdown(res))
    print(f"wrote {out_dir / 'results.md'}, results.json, questions.jsonl, diagnostics.jsonl, results.png")


@bench_app.command("chart")
@handle_errors
def chart(
    results: Annotated[Path, typer.Argument(metavar="RESULTS", help="A results.json written by `bench locomo`.",
                                            exists=True, dir_okay=False)],
    out_file: Annotated[Path | None, typer.Option("--out", help="PNG to write (default: results.png beside it).")]
    = None,
) -> None:
    """Draw (again) the recall chart of a `bench locomo` run: recall against tokens, and per category."""
    import json

    from ..bench.charts import recall_chart

    try:
        data = json.loads(results.read_text(encoding="utf-8"))
        target = recall_chart(data, out_file or results.with_name("results.png"))
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise typer.BadParameter(f"not a `bench locomo` results.json ({type(exc).__name__}: {exc})") from None
    print(f"wrote {target}")


@bench_app.command("ingest")
@handle_errors
def ingest(
    path: DataArg,
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("bench-results/ingest"),
    store: Annotated[Path | None, typer.Option("--store", help="Persist the memory in DIR (default: temporary).")]
    = None,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Ingest throughput over a whole LoCoMo file."""
    _require_bench()
    from ..bench.ingest import run_ingest

    res = run_ingest(path, out_dir, store=store, progress=not quiet, threads=threads)
    f = res["ingest"]
    print(f"{f['turns']} turns in {f['seconds']:.1f} s = {f['turns_per_s'] or 0:.0f} turns/s; "
          f"{f['entries']} entries; gate drop {100 * (f['gate_drop_rate'] or 0):.1f} %; "
          f"MERGE {f['merge']} LINK {f['link']} ADD {f['add']}; "
          f"peak RSS {res['peak_rss']['ru_maxrss_mb']} MB")
    print(f"wrote {Path(res['out']) / 'ingest.md'} and ingest.json")


@bench_app.command("reliability")
@handle_errors
def reliability(
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("bench-results/reliability"),
    processes: Annotated[int, typer.Option("--processes", min=2, help="Processes opening one new store.")] = 40,
    cases: Annotated[int, typer.Option("--cases", min=1, help="Hostile import cases.")] = 300,
    quiet: QuietOpt = False,
) -> None:
    """Long turns, concurrent first opens, dripping LLM servers, hostile imports and the review's attacks (offline)."""
    from ..bench.reliability import run_reliability

    res = run_reliability(out_dir, processes=processes, cases=cases, log=(lambda _: None) if quiet else print)
    lt, co, sd, hi = res["long_turns"], res["concurrent_opens"], res["slow_drip"], res["hostile_imports"]
    print(f"long turns: CPU per character max/min {lt['max_over_min_per_char']}x; "
          f"opens: {co['opened_ok']}/{co['processes']} ok, nothing lost {co['nothing_lost']}; "
          f"drip: within deadline {sd['all_within_deadline_plus_1s']}; imports: {hi['outcomes']}, "
          f"raw {hi['raw_exceptions']}, changed {hi['refused_imports_that_changed_the_store']}; "
          f"attacks held {res['attacks']['held']}/{res['attacks']['total']}")
    print(f"wrote {Path(res['out']) / 'reliability.md'} and reliability.json")


@bench_app.command("latency")
@handle_errors
def latency(
    path: DataArg,
    conversation: Annotated[str | None, typer.Option("--conversation", help="Sample id (default: the first).")]
    = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("bench-results/latency"),
    k: Annotated[int, typer.Option("-k", min=1, help="Flat hybrid top-k.")] = 10,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
) -> None:
    """Retrieval latency vs flat hybrid over the same entries (--chroma-host: dense index on a server)."""
    _require_bench()
    from ..bench.latency import run_latency

    _check_ids(path, [conversation] if conversation else [])
    res = run_latency(path, conversation, out_dir, k=k, progress=not quiet, threads=threads,
                      chroma_host=chroma_host, chroma_port=chroma_port if chroma_host else None)
    a, f = res["ariadnemem"], res["flat_hybrid"]
    print(f"AriadneMem p50 {a['without_embedding']['p50_ms']:.1f} ms / p95 "
          f"{a['without_embedding']['p95_ms']:.1f} ms (with query embedding: p50 "
          f"{a['with_embedding']['p50_ms']:.1f} ms); flat hybrid p50 "
          f"{f['without_embedding']['p50_ms']:.2f} ms; ratio {res['ratio_p50'] or 0:.1f}x")
    print(f"wrote {Path(res['out']) / 'latency.md'} and latency.json")


@bench_app.command("scale")
@handle_errors
def scale(
    entries: Annotated[int, typer.Option("--entries", min=1, help="Grow one memory to N entries.")] = 100_000,
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("bench-results/scale"),
    seed: Annotated[int, typer.Option("--seed", help="Seed of the synthetic dialogue.")] = 0,
    quiet: QuietOpt = False,
) -> None:
    """Store and retrieval at 100k entries (synthetic dialogue, hashing embedder; no dataset)."""
    _require_bench()
    from ..bench.scale import run_scale

    res = run_scale(out_dir, entries=entries, seed=seed, progress=not quiet)
    f, r, met = res["ingest"], res["retrieve"], res["meets_targets"]
    print(f"{res['entries']} entries from {f['turns']} turns in {f['seconds']:.0f} s = "
          f"{f['turns_per_s'] or 0:.0f} turns/s; retrieve p50 {r['p50_ms'] or 0:.1f} ms / p95 "
          f"{r['p95_ms'] or 0:.1f} ms over {r['n']} questions; peak RSS {res['peak_rss']['ru_maxrss_mb']} MB; "
          f"targets met: p50 {met['p50']}, RSS {met['rss']}")
    print(f"wrote {Path(res['out']) / 'scale.md'} and scale.json")



@bench_app.command("startup")
@handle_errors
def startup(
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("bench-results/startup"),
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Timed runs of each process (medians).")] = 5,
    torch: Annotated[bool | None, typer.Option(
        "--torch/--no-torch", help="Also time the torch embedder (default: when sentence-transformers is installed).",
        show_default=False)] = None,
    quiet: QuietOpt = False,
) -> None:
    """Start-up cost as ratios to a bare interpreter: stats, a fresh first retrieve, peak RSS,
    install size, embedding texts/s by length (no dataset)."""
    from ..bench.startup import run_startup

    res = run_startup(out_dir, repeats=repeats, progress=not quiet, torch=torch)
    p, met = res["processes"], res["meets_targets"]
    through = res["throughput"]["onnxruntime"]
    print(f"stats {p['stats']['ratio']:.1f}x bare, first retrieve {p['first_retrieve']['ratio']:.1f}x "
          f"({p['first_retrieve']['peak_rss_mb']:.0f} MB peak), demo {res['demo']['peak_rss_mb']:.0f} MB peak; "
          f"default install {res['install']['total_mb']:.0f} MB (torch: {res['install']['has_torch']}); "
          f"texts/s short {through['short']['texts_per_s']:.0f} / long {through['long']['texts_per_s']:.0f}"
          + (f" ({res['throughput_ratio']['short']:.2f}x / {res['throughput_ratio']['long']:.2f}x torch)"
             if res["throughput_ratio"] else ""))
    print(f"targets met: {', '.join(k for k, v in met.items() if v)}; missed: "
          f"{', '.join(k for k, v in met.items() if v is False) or 'none'} -> {out_dir}")


@bench_app.command("hosts")
@handle_errors
def hosts(
    path: DataArg,
    store: Annotated[str, typer.Option("--store", help="A postgresql:// URL (each run uses a fresh schema).")],
    writers: Annotated[int, typer.Option("--writers", min=1, help="Writer processes of the main run.")] = 4,
    readers: Annotated[int, typer.Option("--readers", min=0, help="Reader processes of the main run.")] = 4,
    seconds: Annotated[float, typer.Option("--seconds", min=1, help="Length of the main run.")] = 60.0,
    curve: Annotated[str, typer.Option("--curve", help="Writer counts of the throughput curve.")] = "1,2,4",
    curve_seconds: Annotated[float, typer.Option("--curve-seconds", min=1, help="Length of each curve run.")] = 20.0,
    embedder: Annotated[str, typer.Option("--embedder", help="minilm or hash.")] = "minilm",
    no_sqlite: Annotated[bool, typer.Option("--no-sqlite", help="Skip the embedded-store run.")] = False,
    warm: Annotated[str, typer.Option(
        "--warm", help="Conversation for the warm-latency comparison of the backends ('' skips it).")] = "conv-26",
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("bench-results/hosts"),
    quiet: QuietOpt = False,
) -> None:
    """N writer + M reader processes on one Postgres memory: turns/s, p50/p95, lost/duplicated/cross-user."""
    _require_bench()
    from ..bench.hosts import run_hosts
    from ..store import is_store_url

    if not is_store_url(store):
        raise typer.BadParameter("give a postgresql:// URL", param_hint="--store")
    if embedder not in ("minilm", "hash"):
        raise typer.BadParameter("minilm or hash", param_hint="--embedder")
    counts = [int(c) for c in _csv([curve])]
    res = run_hosts(path, store, out_dir, writers=writers, readers=readers, seconds=seconds, curve=counts,
                    curve_seconds=curve_seconds, embedder=embedder, sqlite=not no_sqlite,
                    warm_conversation=warm or None, log=(lambda _: None) if quiet else print)
    from ..bench.hosts import hosts_markdown

    print(hosts_markdown(res), end="")
    print(f"wrote {out_dir / 'hosts.md'} and hosts.json")
