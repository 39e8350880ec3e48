"""``run_locomo``: AriadneMem, its ablations and the flat baselines on LoCoMo, in one run.

Every system sees the same conversations, the same embedding model and the same
questions; each memory gets its own embedder instance (empty text cache), so no system's
timings benefit from texts an earlier one embedded. Query embedding is excluded from every
latency (questions are embedded in one batch per conversation first; the memory's embedder
serves them from its cache and the baselines get the vectors), so the latencies compare the
retrieval methods themselves — ``ariadnemem bench latency`` reports the figures with
embedding included.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..config import Config
from ..store.opening import is_store_url, redact_url, with_schema
from .baselines import METHODS, FlatIndex
from .charts import qa_chart, recall_chart
from .ingest import fresh_embedder, ingest_all, set_torch_threads, warm_embedder
from .locomo import CATEGORIES, Conversation, Dataset, load_locomo
from .metrics import QuestionRecord, bridges_in, covered_turns, make_record, peak_rss, summarize
from .progress import progress_bar
from .qa_run import (
    LLM_TURNS_PER_CALL,
    QACollector,
    QASettings,
    check_llm_reachable,
    construction_figures,
    flat_system_name,
    golds_for,
    qa_markdown,
    run_qa,
    stratified_sample,
    usage_delta,
)
from .report import DEFAULT_OUT, environment, locomo_markdown, write_json, write_jsonl

MAIN = "AriadneMem"
WARMUP_QUERY = "What happened recently?"
BASELINE_KS = (10, 30)


def parse_ablations(value: str | Iterable[str] | None) -> list[str]:
    """``"gating,bridges"`` or a list -> validated, de-duplicated names (ValueError if unknown)."""
    if not value:
        return []
    names = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for raw in names:
        name = raw.strip().lower()
        if not name:
            continue
        if name not in Config.ABLATIONS:
            raise ValueError(f"unknown ablation {name!r}; choose from {', '.join(Config.ABLATIONS)}")
        if name not in out:
            out.append(name)
    return out


def system_name(ablation: str | None) -> str:
    return MAIN if ablation is None else f"{MAIN} w/o {ablation}"


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _memory_system(name: str, cfg: Config, ablation: str | None, dataset: Dataset, embedder: Any,
                   store: str | Path | None,
                   prog: Any, diagnostics: list[dict[str, Any]] | None, *, llm: Any = None,
                   llm_turns_per_call: int | None = LLM_TURNS_PER_CALL,
                   collector: QACollector | None = None) -> dict[str, Any]:
    """Build one memory over every conversation, then ask every question.

    ``llm``: build the memory with an :class:`~ariadnemem_core.extraction.llm.LLMExtractor`
    on this client (its usage during ingest is this system's construction cost; the
    store directory gets a ``-llm`` suffix so rule- and LLM-built stores never mix).
    ``collector``: keep the evidence graphs of the sampled QA questions.
    """
    from ..memory import AriadneMemory

    extractor = None
    if llm is not None:
        from ..extraction.llm import LLMExtractor

        extractor = LLMExtractor(llm, max_turns_per_call=llm_turns_per_call)
    path = _system_store(store, name, llm is not None)
    records: list[QuestionRecord] = []
    embedder = fresh_embedder(embedder)
    with AriadneMemory(path, cfg, embedder=embedder, extractor=extractor) as mem:
        usage_before = dict(llm.usage) if llm is not None else {}
        ingest = ingest_all(mem, dataset.conversations, prog, label=f"{name}: ingest")
        construction = None
        if llm is not None and extractor is not None:
            construction = construction_figures(usage_delta(llm.usage, usage_before), extractor.stats,
                                                ingest["turns"], ingest["seconds"], llm_turns_per_call)
            construction["reused_conversations"] = ingest.get("reused_conversations", [])
        if dataset.conversations:  # untimed: first-query costs (index loads) are not retrieval
            mem.retrieve(WARMUP_QUERY, user_id=dataset.conversations[0].user_id)
        task = prog.add_task(f"{name}: questions", total=dataset.n_questions)
        for conv in dataset.conversations:
            questions = [q.question for q in conv.questions]
            embedder.embed(questions)  # warm the cache: latency below excludes query embedding
            # entry id -> its source turns, read once per conversation (diagnostics only)
            turns_of = ({e.id: e.source_turn_ids for e in mem.entries(user_id=conv.user_id)}
                        if diagnostics is not None else {})
            stored = {tid for tids in turns_of.values() for tid in tids}
            for q in conv.questions:
                t0 = time.perf_counter()
                graph = mem.retrieve(q.question, user_id=conv.user_id)
                latency = (time.perf_counter() - t0) * 1000.0
                covered = covered_turns(graph)
                rec = make_record(q.qid, q.category, q.evidence, covered, graph.token_count(), latency,
                                  fast_path=graph.fast_path is not None, bridges=bridges_in(graph))
                if graph.fast_path:
                    rec.extra["fast_path"] = graph.fast_path
                records.append(rec)
                if collector is not None and collector.wants(q.qid):
                    collector.add(name, q, tokens=rec.tokens, retrieval_ms=latency, graph=graph,
                                  fast_path=graph.fast_path)
                    collector.add_ablations(q, graph, mem, conv.user_id, latency)
                if diagnostics is not None:
                    pruned_turns = {t for i in graph.stats.get("pruned", []) for t in turns_of.get(i, ())}
                    diagnostics.append(_diagnostic(conv, q, rec, graph, stored, pruned_turns, cfg))
                prog.advance(task)
        prog.remove_task(task)
    return {
        "kind": "ariadnemem",
        "ablation": ablation,
        "config": cfg.to_dict(),
        "store": (redact_url(path) if isinstance(path, str) else str(path)) if path is not None else None,
        "ingest": ingest,
        "extractor": "llm" if llm is not None else "rule",
        "construction": construction,
        "summary": summarize(records),
        "peak_rss_mb_so_far": peak_rss()["ru_maxrss_mb"],
    }


def _system_store(store: str | Path | None, name: str, llm_built: bool) -> str | Path | None:
    """Where one system's memory lives under ``store``: its own schema of a
    ``postgresql://`` URL, or its own directory (``-llm`` / ``_llm`` for LLM-built ones,
    so rule- and LLM-built stores never mix); None for an ephemeral memory."""
    if isinstance(store, str):  # a postgresql:// URL: one schema per system
        return with_schema(store, slug(name).replace("-", "_") + ("_llm" if llm_built else ""))
    if store is not None:
        return store / (slug(name) + ("-llm" if llm_built else ""))
    return None


def _diagnostic(conv: Conversation, q: Any, rec: QuestionRecord, graph: Any, stored: set[str],
                pruned_turns: set[str], cfg: Config) -> dict[str, Any]:
    """Where each missed evidence turn was lost: ``gating``/``extraction`` (no stored entry
    holds it), ``budget`` (an entry holding it was considered, then pruned by the node or
    token budget) or ``retrieval`` (stored, never considered). Never includes the gold answer."""
    missed = [e for e in q.evidence if e not in rec.covered]
    # With the gate off a turn missing from the store can only have been lost by extraction.
    absent = "gating" if cfg.enable_gating else "extraction"
    return {
        "qid": q.qid,
        "sample_id": conv.sample_id,
        "category": q.category,
        "category_name": CATEGORIES.get(q.category),
        "question": q.question,
        "evidence": q.evidence,
        "raw_evidence": q.raw_evidence if q.raw_evidence != q.evidence else None,
        "covered": rec.covered,
        "missed": missed,
        "lost_at": {m: (absent if m not in stored else "budget" if m in pruned_turns else "retrieval")
                    for m in missed},
        "recall": rec.recall,
        "tokens": rec.tokens,
        "latency_ms": round(rec.latency_ms, 3),
        "facts": len(graph.facts),
        "bridges": rec.bridges,
        "fast_path": graph.fast_path,
    }


def _baselines(dataset: Dataset, embedder: Any, ks: Sequence[int], prog: Any,
               collector: QACollector | None = None) -> dict[str, dict[str, Any]]:
    """Flat BM25 / dense / hybrid top-k over the raw turns of each conversation.

    ``collector``: keep the flat hybrid top-``collector.flat_k`` block (the exact text whose
    tokens the recall table counts) of each sampled QA question.
    """
    records: dict[tuple[str, int], list[QuestionRecord]] = {(m, k): [] for m in METHODS for k in ks}
    task = prog.add_task("flat baselines", total=dataset.n_questions)
    for conv in dataset.conversations:
        index = FlatIndex.from_turns(conv.turns, embedder)  # one embedding batch per conversation
        try:
            qvecs = embedder.embed([q.question for q in conv.questions])
            for q, qvec in zip(conv.questions, qvecs, strict=True):
                for method in METHODS:
                    for k in ks:
                        res = index.search(method, q.question, k, query_vector=qvec)
                        records[(method, k)].append(
                            make_record(q.qid, q.category, q.evidence, res.ids, res.tokens, res.latency_ms))
                if collector is not None and collector.wants(q.qid):
                    res = index.search("hybrid", q.question, collector.flat_k, query_vector=qvec)
                    collector.add(flat_system_name(collector.flat_k), q, tokens=res.tokens,
                                  retrieval_ms=res.latency_ms, context_text=res.context)
                prog.advance(task)
        finally:
            index.close()
    prog.remove_task(task)
    return {
        f"flat-{m}@{k}": {"kind": "baseline", "method": m, "k": k, "ingest": None, "summary": summarize(recs)}
        for (m, k), recs in records.items()
    }


def run_locomo(path: str | Path, conversations: Sequence[str] | None = None, out: str | Path | None = None,
               ablate: str | Iterable[str] = (), *, store: str | Path | None = None, config: Config | None = None,
               embedder: Any = None, ks: Sequence[int] = BASELINE_KS, progress: bool = True,
               write: bool = True, threads: int | None = None, llm: Any = None,
               qa: QASettings | None = None, llm_extract: bool = False,
               llm_turns_per_call: int | None = LLM_TURNS_PER_CALL) -> dict[str, Any]:
    """Run the LoCoMo evidence-recall bench; returns the results dict (and writes files).

    ``out=None`` writes to ``bench-results/locomo`` (``write=False``: nothing written).
    ``ablate`` adds one system per name, built with ``Config().ablate(name)`` and ingested
    again. ``store`` keeps each system's memory under ``store/<system>`` (a later run with
    the same store reuses complete conversations instead of ingesting them again).
    ``threads`` pins torch's CPU threads (see :func:`set_torch_threads`).

    ``qa``: also answer a stratified sample of questions end to end with ``llm`` (an
    :class:`~ariadnemem_core.llm.LLMClient`), AriadneMem from its evidence graph and flat
    hybrid top-``qa.flat_k`` from its raw-turn block, and write ``qa.json`` / ``qa.md``
    (``results["qa"]``). ``llm_extract``: build every AriadneMem memory with the LLM
    extractor on ``llm`` (``llm_turns_per_call`` turns per call).
    """
    from ..embedding import MiniLMEmbedder

    if (qa is not None or llm_extract) and llm is None:
        raise ValueError("qa and llm_extract need an LLM client (llm=)")
    replaying = qa is not None and qa.replay_only and not llm_extract  # asks nothing
    if llm is not None and (qa is not None or llm_extract) and not replaying:
        check_llm_reachable(llm)  # raises LLMError before any work
    t_start = time.perf_counter()
    torch_threads = set_torch_threads(threads)
    names = parse_ablations(ablate)
    dataset = load_locomo(path, conversations)
    collector = None
    if qa is not None:
        collector = QACollector.for_sample(
            dataset, stratified_sample(dataset, qa.per_category, qa.seed, qa.categories), qa.flat_k, qa.ablations)
    build_llm = llm if llm_extract else None
    embedder = embedder or MiniLMEmbedder(threads=threads)
    load_s = warm_embedder(embedder)
    base = config or Config()
    store_dir: str | Path | None = None
    if store is not None:
        store_dir = str(store) if is_store_url(store) else Path(store)
    diagnostics: list[dict[str, Any]] = []
    systems: dict[str, dict[str, Any]] = {}
    with progress_bar(progress) as prog:
        systems[MAIN] = _memory_system(MAIN, base, None, dataset, embedder, store_dir, prog, diagnostics,
                                       llm=build_llm, llm_turns_per_call=llm_turns_per_call, collector=collector)
        for name in names:
            sname = system_name(name)
            systems[sname] = _memory_system(sname, base.ablate(name), name, dataset, embedder, store_dir, prog, None,
                                            llm=build_llm, llm_turns_per_call=llm_turns_per_call)
        systems.update(_baselines(dataset, embedder, ks, prog, collector))
        qa_results = None
        if qa is not None and collector is not None:
            construction = {n: s["construction"] for n, s in systems.items() if s.get("construction")}
            qa_results = run_qa(collector, golds_for(dataset, collector.qids), llm, qa, prog, construction)

    results: dict[str, Any] = {
        "benchmark": "locomo",
        "metric": "evidence recall over Fact.source_turn_ids (AriadneMem) / retrieved turn ids (flat)",
        "dataset": {
            "path": str(path),
            "conversations": [c.sample_id for c in dataset.conversations],
            "turns": dataset.n_turns,
            "questions": dataset.n_questions,
            "questions_scored": sum(1 for c in dataset.conversations for q in c.questions if q.scored),
            "questions_by_category": _questions_by_category(dataset),
            "categories": {str(k): v for k, v in CATEGORIES.items()},
            "evidence_repair": dataset.repair.to_dict(),
        },
        "config": base.to_dict(),
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "model_load_s": round(load_s, 3),
        "latency_note": "retrieval only; query embedding excluded for every system",
        "systems": systems,
        "environment": environment() | {"torch_threads": torch_threads},
        "peak_rss": peak_rss(),
        "elapsed_s": time.perf_counter() - t_start,
    }
    if qa_results is not None:
        qa_results["dataset"] = {"path": str(path), "conversations": results["dataset"]["conversations"]}
        qa_results["elapsed_s"] = results["elapsed_s"]
        results["qa"] = qa_results
    if write:
        out_dir = Path(out) if out is not None else DEFAULT_OUT
        _write_locomo(out_dir, results, diagnostics)
        results["out"] = str(out_dir)
    return results


def _questions_by_category(dataset: Dataset) -> dict[str, int]:
    by_cat: dict[str, int] = {}
    for c in dataset.conversations:
        for q in c.questions:
            by_cat[str(q.category)] = by_cat.get(str(q.category), 0) + 1
    return dict(sorted(by_cat.items()))


def _write_locomo(out_dir: Path, results: dict[str, Any], diagnostics: list[dict[str, Any]]) -> None:
    """The bench's files: results (json, md, chart), diagnostics and, with QA, qa.json / qa.md / qa.png."""
    qa_results = results.get("qa")
    summary = {k: v for k, v in results.items() if k != "qa"}
    if qa_results is not None:  # predictions live in qa.json only
        summary["qa"] = {k: v for k, v in qa_results.items() if k != "items"} | {"file": "qa.json"}
    write_json(out_dir / "results.json", summary)
    (out_dir / "results.md").write_text(locomo_markdown(results), encoding="utf-8")
    recall_chart(summary, out_dir / "results.png")
    write_jsonl(out_dir / "diagnostics.jsonl", diagnostics)
    if qa_results is not None:
        write_json(out_dir / "qa.json", qa_results)
        (out_dir / "qa.md").write_text(qa_markdown(qa_results), encoding="utf-8")
        qa_chart(qa_results, out_dir / "qa.png")
