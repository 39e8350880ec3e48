"""End-to-end QA inside the LoCoMo bench: AriadneMem and flat hybrid top-k answered by the
same LLM in the same run, scored per category.

Why here and not in :mod:`.qa`: :mod:`.qa` answers and scores a list of items; this module
decides *which* questions (a deterministic stratified sample), collects each system's
context while the recall bench retrieves (so the QA context is exactly the one whose
tokens the recall table counts), keeps the golds apart from everything sent to the model,
and turns the results into ``qa.json`` / ``qa.md``.

Gold answers enter only :func:`~.qa.score_items`; ``qa.json`` holds predictions and
scores but no gold text (the dataset has them; the bench never copies them).
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlparse

from ..errors import LLMError
from ..tokens import count_tokens
from .locomo import CATEGORIES, Dataset, Question
from .metrics import BOOTSTRAP_SAMPLES, CI_LEVEL, percentile, stratified_bootstrap
from .qa import CATEGORY_NAMES, AnswerCache, answer_items, score_items
from .qa_ablations import QA_ABLATIONS, ablated_context, parse_qa_ablations
from .qa_metrics import is_abstention
from .report import fmt, markdown_table

#: Categories answered by default; 5 (adversarial) only on request.
QA_CATEGORIES = (1, 2, 3, 4)
#: Flat baseline answered next to AriadneMem: hybrid RRF over raw turns, top 30.
QA_FLAT_METHOD = "hybrid"
QA_FLAT_K = 30
#: Default sample: 50 questions per category (200 for categories 1-4). With 30, one
#: question moved a category by ~3 F1 points and no difference of a few points was real.
QA_PER_CATEGORY = 50
#: The system every other one is compared with (paired differences).
QA_REFERENCE = "AriadneMem"
#: Failed answer calls a system may have (after one re-ask) and still get a score. Zero:
#: a failed call would be scored as a wrong answer, and a server that fails some calls
#: often fails them for a reason (context too long, a crash) that is not random, so any
#: failure withholds the system's scores ("n/a (k of n calls failed)").
QA_MAX_FAILED_CALLS = 0
#: Default split of extraction windows for the LLM extractor: small local models cover
#: a 10-turn window but stop after a few entries of a 20-turn one (see LLMExtractor).
LLM_TURNS_PER_CALL = 10


@dataclass(slots=True)
class QASettings:
    """What ``--qa`` asked for. ``per_category=None``: every question of the categories.
    ``ablations``: names of :data:`~.qa_ablations.QA_ABLATIONS` answered as extra systems."""

    per_category: int | None = QA_PER_CATEGORY
    seed: int = 0
    concurrency: int = 2
    include_adversarial: bool = False
    flat_k: int = QA_FLAT_K
    ablations: tuple[str, ...] = ()
    #: An :class:`~.qa.AnswerCache` file: answers to the same prompt are replayed, so a run
    #: that stopped resumes (None: ask every question).
    cache: str | None = None
    #: Only replay the cache (report a stopped run so far; nothing is asked).
    replay_only: bool = False

    def __post_init__(self) -> None:
        self.ablations = parse_qa_ablations(self.ablations)
        if self.per_category is not None and self.per_category < 1:
            raise ValueError("per_category must be >= 1 (or None for every question)")
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if self.flat_k < 1:
            raise ValueError("flat_k must be >= 1")

    @property
    def categories(self) -> tuple[int, ...]:
        return (*QA_CATEGORIES, 5) if self.include_adversarial else QA_CATEGORIES

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"categories": list(self.categories), "flat_method": QA_FLAT_METHOD,
                               "ablations": list(self.ablations), "bootstrap_samples": BOOTSTRAP_SAMPLES,
                               "ci_level": CI_LEVEL, "max_failed_calls": QA_MAX_FAILED_CALLS}


def flat_system_name(k: int = QA_FLAT_K) -> str:
    """Same naming as the recall bench's flat systems (``flat-hybrid@30``)."""
    return f"flat-{QA_FLAT_METHOD}@{k}"


def gold_of(q: Question) -> Any:
    """The gold a question is scored against: the adversarial answer for category 5
    (its official score only checks abstention, so None is fine), else the answer."""
    return q.adversarial_answer if q.category == 5 else q.answer


def has_gold(q: Question) -> bool:
    """Whether a question can be scored (categories 1-4 need a non-empty answer)."""
    if q.category == 5:
        return True
    return q.answer is not None and str(q.answer).strip() != ""


def stratified_sample(dataset: Dataset, per_category: int | None, seed: int = 0,
                      categories: Sequence[int] = QA_CATEGORIES) -> list[str]:
    """Qids of ``per_category`` questions per category across all conversations of
    ``dataset`` (all of a category when it has fewer, or when ``per_category`` is None).

    Deterministic for a given file, conversation selection and seed: each category draws
    with its own ``random.Random`` seeded by a string (string seeds do not depend on
    PYTHONHASHSEED), so the sample of one category does not change with another's size.
    Questions without a gold answer are never drawn. Returned in dataset order.
    """
    pools: dict[int, list[str]] = {int(c): [] for c in categories}
    for conv in dataset.conversations:
        for q in conv.questions:
            if q.category in pools and has_gold(q):
                pools[q.category].append(q.qid)
    chosen: set[str] = set()
    for cat, pool in pools.items():
        if per_category is None or per_category >= len(pool):
            chosen.update(pool)
        else:
            chosen.update(random.Random(f"ariadnemem-qa:{seed}:{cat}").sample(pool, per_category))
    return [q.qid for c in dataset.conversations for q in c.questions if q.qid in chosen]


@dataclass
class QACollector:
    """Collects, during the recall bench's retrieval, the context each system would hand
    to the generator for the sampled questions (never their golds)."""

    qids: list[str]
    by_category: dict[str, int] = field(default_factory=dict)
    flat_k: int = QA_FLAT_K
    items: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    ablations: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self._wanted = set(self.qids)

    @classmethod
    def for_sample(cls, dataset: Dataset, qids: Sequence[str], flat_k: int = QA_FLAT_K,
                   ablations: Sequence[str] = ()) -> QACollector:
        wanted = set(qids)
        by_cat: dict[str, int] = {}
        for c in dataset.conversations:
            for q in c.questions:
                if q.qid in wanted:
                    by_cat[str(q.category)] = by_cat.get(str(q.category), 0) + 1
        return cls(list(qids), dict(sorted(by_cat.items())), flat_k, ablations=parse_qa_ablations(ablations))

    def add_ablations(self, q: Question, graph: Any, memory: Any, user_id: str, retrieval_ms: float) -> None:
        """The ablated contexts of one sampled question, from the full system's graph
        (see :mod:`.qa_ablations`); tokens are those of each variant's own text, latency
        the full retrieval's plus the variant's own work (``bridges``: its own retrieval)."""
        for name in self.ablations:
            t0 = time.perf_counter()
            context = ablated_context(name, graph, memory, q.question, user_id)
            ms = (time.perf_counter() - t0) * 1000.0
            self.add(QA_ABLATIONS[name], q, tokens=count_tokens(context.to_text()),
                     retrieval_ms=ms if name in ("bridges", "messages") else retrieval_ms + ms, graph=context,
                     fast_path=getattr(context, "fast_path", None))

    def wants(self, qid: str) -> bool:
        return qid in self._wanted

    def add(self, system: str, q: Question, *, tokens: int, retrieval_ms: float, graph: Any = None,
            context_text: str | None = None, fast_path: str | None = None) -> None:
        """One system's context for one sampled question (a graph, or a flat text block)."""
        item: dict[str, Any] = {"qid": q.qid, "question": q.question, "category": q.category,
                                "context_tokens": int(tokens), "retrieval_ms": round(float(retrieval_ms), 3)}
        if graph is not None:
            item["graph"] = graph
            item["fast_path"] = fast_path
        else:
            item["context_text"] = context_text or ""
        self.items.setdefault(system, []).append(item)


# ---------------------------------------------------------------------- construction cost
def usage_delta(after: Mapping[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    """``after - before`` of two ``LLMClient.usage`` snapshots (phases run one at a time)."""
    out: dict[str, Any] = {}
    for key, value in after.items():
        diff = value - before.get(key, 0)
        out[key] = round(diff, 6) if isinstance(diff, float) else diff
    return out


def construction_figures(usage: Mapping[str, Any], extractor_stats: Mapping[str, Any], turns: int,
                         seconds: float, turns_per_call: int | None) -> dict[str, Any]:
    """What building one memory with the LLM extractor cost (calls, tokens, wall time,
    fallbacks). ``turns``/``seconds`` are the ingested (not reused) turns and their time."""
    calls = int(usage.get("calls", 0))
    return {
        "extractor": "llm",
        "turns_per_call": turns_per_call,
        "turns": turns,
        "wall_s": round(seconds, 3),
        "llm_calls": calls,
        "calls_per_100_turns": round(100.0 * calls / turns, 3) if turns else None,
        "prompt_tokens": int(usage.get("prompt_tokens", 0)),
        "completion_tokens": int(usage.get("completion_tokens", 0)),
        "llm_seconds": usage.get("seconds", 0.0),
        "retries": int(usage.get("retries", 0)),
        "failed_calls": int(usage.get("failures", 0)),
        "fallback_windows": int(extractor_stats.get("fallback_windows", 0)),
        "patched_turns": int(extractor_stats.get("patched_turns", 0)),
        "extractor_stats": dict(extractor_stats),
    }


# ---------------------------------------------------------------------- answering
def _answer_with_progress(items: list[dict[str, Any]], client: Any, concurrency: int,
                          advance: Callable[[], None], cache: AnswerCache | None = None) -> list[dict[str, Any]]:
    """:func:`answer_items` one item at a time on a pool, so the bar moves per answer.
    (Every item still goes through answer_items' gold-key check.)"""
    def one(item: dict[str, Any]) -> dict[str, Any]:
        result = answer_items([item], client, concurrency=1, cache=cache)[0]
        advance()
        return result

    if concurrency <= 1 or len(items) <= 1:
        results = [one(it) for it in items]
    else:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(items)),
                                thread_name_prefix="ariadnemem-qa") as pool:
            results = list(pool.map(one, items))
    # One re-ask, one at a time, of the questions whose call failed after the client's own
    # retries (a server restart or an overloaded moment should not void a 2-hour run).
    for i, r in enumerate(results):
        if r.get("error") and r["error"] != AnswerCache.MISSING:
            again = answer_items([items[i]], client, concurrency=1, cache=cache)[0]
            again["reasked"] = True
            results[i] = again
    return results


def check_llm_reachable(client: Any) -> None:
    """One cheap completion (1 token) before any work: an unreachable server, a wrong
    model name or a server that crashes on its first completion stops the run here with
    a clear error, not after an hour of ingestion with every answer call failed.

    Raises:
        LLMError: the call failed (after the client's retries).
    """
    try:
        client.chat([{"role": "user", "content": "Reply with OK."}], max_tokens=1)
    except LLMError as exc:
        where = getattr(client, "base_url", None) or "api.openai.com"
        raise LLMError(f"LLM server not usable at {where} (checked before any work): {exc.args[0]} "
                       "(start a local one with scripts/llm_server.sh)") from exc


def _round(value: float | None, nd: int = 3) -> float | None:
    return None if value is None else round(value, nd)


def _cost_block(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Context size and latency figures of a group of answered items."""
    n = len(rows)
    ok = [r for r in rows if not r.get("error")]
    lat = [float(r["latency_s"]) for r in ok]
    ret = [float(r["retrieval_ms"]) for r in rows]
    return {
        "context_tokens_mean": _round(sum(r["context_tokens"] for r in rows) / n, 1) if n else None,
        "answer_latency_p50_s": _round(percentile(lat, 50)),
        "answer_latency_p95_s": _round(percentile(lat, 95)),
        "retrieval_latency_p50_ms": _round(percentile(ret, 50)),
        "retrieval_latency_p95_ms": _round(percentile(ret, 95)),
        "answer_prompt_tokens": sum(int(r["prompt_tokens"]) for r in rows),
        "prompt_tokens_mean": _round(sum(int(r["prompt_tokens"]) for r in ok) / len(ok), 1) if ok else None,
        "answer_completion_tokens": sum(int(r["completion_tokens"]) for r in rows),
        "errors": sum(1 for r in rows if r.get("error")),
        # Answers that give up ("not mentioned"): right on adversarial questions, a miss
        # elsewhere; a context the reader cannot use shows here before it shows in F1.
        "abstained_pct": _round(100.0 * sum(1 for r in ok if is_abstention(r["prediction"])) / len(ok), 1)
        if ok else None,
    }


METRICS = ("f1", "f1_simple", "bleu1")


def _metric_groups(items: Sequence[Mapping[str, Any]], metric: str) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = {}
    for it in items:
        groups.setdefault(str(it["category"]), []).append(float(it[metric]))
    return groups


def _with_ci(block: dict[str, Any], ci: Mapping[str, tuple[float, float] | None] | None) -> dict[str, Any]:
    return {**block, "ci": None if ci is None else {m: None if v is None else list(v) for m, v in ci.items()}}


def _withhold(block: dict[str, Any]) -> dict[str, Any]:
    """A score block of a system whose calls failed: no score, no interval."""
    return {**block, **dict.fromkeys(METRICS), "ci": None}


def _system_figures(results: list[dict[str, Any]], scores: dict[str, Any], usage: Mapping[str, Any],
                    wall_s: float, seed: int) -> dict[str, Any]:
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_cat.setdefault(str(r["category"]), []).append(r)
    failed = sum(1 for r in results if r.get("error"))
    missing = sum(1 for r in results if r.get("error") == AnswerCache.MISSING)
    valid = failed <= QA_MAX_FAILED_CALLS
    # Intervals per metric: categories 1-4 pooled into "overall" (as the reported average).
    cis = {m: stratified_bootstrap(_metric_groups(scores["items"], m), seed=seed,
                                   overall=[c for c in by_cat if c != "5"]) for m in METRICS}
    categories = {c: _with_ci({**block, **_cost_block(by_cat.get(c, []))}, {m: cis[m].get(c) for m in METRICS})
                  for c, block in scores["categories"].items()}
    no_adv = [r for r in results if int(r["category"]) != 5]
    overall = _with_ci({**scores["overall_excl_adversarial"], **_cost_block(no_adv)},
                       {m: cis[m].get("overall") for m in METRICS})
    incl = _with_ci({**scores["overall"], **_cost_block(results)}, None)
    if not valid:
        categories = {c: _withhold(b) for c, b in categories.items()}
        overall, incl = _withhold(overall), _withhold(incl)
    return {
        "n": len(results),
        "valid": valid,
        "failed_calls": failed,
        "invalid_reason": None if valid else (
            f"{missing} of {len(results)} not answered yet" if missing
            else f"{failed} of {len(results)} calls failed"),
        "reasked": sum(1 for r in results if r.get("reasked")),
        # Answers replayed from the answer cache (asked in an earlier run with the same prompt).
        "cached": sum(1 for r in results if r.get("cached")),
        "overall": overall,
        "overall_incl_adversarial": incl,
        "categories": categories,
        "answer_llm": {
            "calls": int(usage.get("calls", 0)),
            "prompt_tokens": int(usage.get("prompt_tokens", 0)),
            "completion_tokens": int(usage.get("completion_tokens", 0)),
            "retries": int(usage.get("retries", 0)),
            "failures": int(usage.get("failures", 0)),
            "seconds": usage.get("seconds", 0.0),
            "wall_s": round(wall_s, 3),
        },
        "errors": scores["errors"],
    }


def paired_differences(item_scores: Mapping[str, Sequence[Mapping[str, Any]]], systems: Mapping[str, Any],
                       reference: str = QA_REFERENCE, seed: int = 0) -> dict[str, Any]:
    """Each system minus ``reference`` on the same questions, with paired bootstrap 95%
    intervals (per category and for the 1-4 average, per metric).

    A difference whose interval excludes 0 is one this sample can tell; one whose interval
    straddles 0 is not. Systems with withheld scores (failed calls) get None.

    Args:
        item_scores: per system, the scored items (``qid``, ``category``, metrics).
        systems: per system, its figures (``valid``).
        reference: the system subtracted.
        seed: the resampling seed.

    Returns:
        ``{system: {"vs", "categories": {c: {m: {"diff", "ci"}}}, "overall": {...}} | None}``.
    """
    if reference not in item_scores:
        return {}
    ref = {it["qid"]: it for it in item_scores[reference]}
    out: dict[str, Any] = {}
    for name, items in item_scores.items():
        if name == reference:
            continue
        if not (systems[name]["valid"] and systems[reference]["valid"]):
            out[name] = None
            continue
        pairs = [(it, ref[it["qid"]]) for it in items if it["qid"] in ref]
        cats = sorted({str(a["category"]) for a, _ in pairs})
        block: dict[str, Any] = {"vs": reference, "n": len(pairs), "categories": {c: {} for c in cats},
                                 "overall": {}}
        for m in METRICS:
            groups: dict[str, list[float]] = {}
            for a, b in pairs:
                groups.setdefault(str(a["category"]), []).append(float(a[m]) - float(b[m]))
            pooled = [c for c in groups if c != "5"]
            ci = stratified_bootstrap(groups, overall=pooled, seed=seed)
            for c in cats:
                interval = ci[c]
                block["categories"][c][m] = {"diff": round(sum(groups[c]) / len(groups[c]), 6),
                                             "ci": list(interval) if interval else None}
            flat = [v for c in pooled for v in groups[c]]
            interval = ci["overall"]
            block["overall"][m] = {"diff": round(sum(flat) / len(flat), 6) if flat else None,
                                   "ci": list(interval) if interval else None}
        out[name] = block
    return out


def _system_order(names: Sequence[str], flat: str) -> list[str]:
    """Reference first, then the flat baseline, then the ablations in their order."""
    rank = {QA_REFERENCE: 0, flat: 1} | {v: 2 + i for i, v in enumerate(QA_ABLATIONS.values())}
    return sorted(names, key=lambda n: rank.get(n, 99))


def base_url_host(client: Any) -> str:
    """Where the answers came from, without any key or path (``api.openai.com`` default)."""
    url = getattr(client, "base_url", None)
    if not url:
        return "api.openai.com"
    return urlparse(str(url)).netloc or str(url)


def run_qa(collector: QACollector, golds: Mapping[str, Any], client: Any, settings: QASettings, prog: Any,
           construction: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Answer every collected item of every system with ``client`` (one system after the
    other, so each system's LLM usage is the exact difference of the client's totals),
    then score against ``golds`` (``{qid: gold}``, used by nothing but the scorer)."""
    systems: dict[str, Any] = {}
    predictions: list[dict[str, Any]] = []
    item_scores: dict[str, list[dict[str, Any]]] = {}
    cache = (AnswerCache(settings.cache, getattr(client, "model", None), replay_only=settings.replay_only)
             if settings.cache else None)
    flat = flat_system_name(settings.flat_k)
    # Answered with the flat baseline last: its long contexts make it the slowest system,
    # and its answers do not depend on AriadneMem's code, so a run that stops early (see
    # ``--qa-cache``) has every AriadneMem variant first. Reported in the usual order.
    order = _system_order(list(collector.items), flat)
    for system in sorted(order, key=lambda n: n == flat):  # stable: the rest keep their order
        items = collector.items[system]
        task = prog.add_task(f"QA {system}: answers", total=len(items))
        before = dict(client.usage) if client is not None else {}
        t0 = time.perf_counter()
        results = _answer_with_progress(items, client, settings.concurrency, functools.partial(prog.advance, task),
                                        cache)
        wall = time.perf_counter() - t0
        usage = usage_delta(client.usage, before) if client is not None else {}
        prog.remove_task(task)
        scores = score_items(results, {r["qid"]: golds[r["qid"]] for r in results})
        item_scores[system] = scores["items"]
        systems[system] = _system_figures(results, scores, usage, wall, settings.seed)
        for r, s in zip(results, scores["items"], strict=True):
            # A failed call has no answer: no per-question score either.
            metrics = dict.fromkeys(METRICS) if r.get("error") else {m: s[m] for m in METRICS}
            predictions.append({
                "system": system, "qid": r["qid"], "category": r["category"], "question": r["question"],
                "prediction": r["prediction"], **metrics,
                "context_tokens": r["context_tokens"], "retrieval_ms": r["retrieval_ms"],
                "answer_latency_s": r["latency_s"], "prompt_tokens": r["prompt_tokens"],
                "completion_tokens": r["completion_tokens"], "mode": r["mode"],
                "fast_path": r.get("fast_path"), "fact_ids": r.get("fact_ids"), "error": r.get("error"),
                "reasked": bool(r.get("reasked")), "cached": bool(r.get("cached")),
            })
    systems = {n: systems[n] for n in order}
    item_scores = {n: item_scores[n] for n in order}
    return {
        "benchmark": "locomo-qa",
        "settings": settings.to_dict(),
        "model": getattr(client, "model", None),
        "base_url_host": base_url_host(client),
        "sample": {"qids": list(collector.qids), "n": len(collector.qids), "by_category": collector.by_category},
        "scoring": "f1 = LoCoMo official (stemmed token F1; multi-answer F1 for cat 1; cat 5 = abstains); "
                   "f1_simple = Mem0/SimpleMem token-set F1; bleu1 = nltk sentence BLEU-1. "
                   "'overall' = mean over the questions of categories 1-4.",
        "construction": dict(construction or {}),
        "systems": systems,
        "differences": paired_differences(item_scores, systems, seed=settings.seed),
        "failed_calls": sum(s["failed_calls"] for s in systems.values()),
        "valid": all(s["valid"] for s in systems.values()),
        "items": predictions,
    }


def golds_for(dataset: Dataset, qids: Sequence[str]) -> dict[str, Any]:
    """``{qid: gold}`` for the sampled questions (kept apart from the items)."""
    wanted = set(qids)
    return {q.qid: gold_of(q) for c in dataset.conversations for q in c.questions if q.qid in wanted}


# ---------------------------------------------------------------------- report
def qa_headers(categories: Sequence[int]) -> list[str]:
    cats = [f"cat{c} {CATEGORY_NAMES.get(c, c)} F1" for c in categories]
    return ["system", *cats, "avg F1 (1-4) [95% CI]", "F1-simple", "BLEU-1", "not mentioned % (1-4)",
            "context tokens", "prompt tokens", "answer p50 s", "failed calls"]


def _with_interval(value: float | None, ci: Sequence[float] | None, *, signed: bool = False) -> str:
    """``22.4 [18.0, 26.9]`` (percent); ``+1.8 [-3.0, +6.5]`` for a difference."""
    if value is None:
        return "–"
    form = "{:+.1f}" if signed else "{:.1f}"
    text = form.format(100.0 * value)
    if ci:
        text += " [" + ", ".join(form.format(100.0 * v) for v in ci) + "]"
    return text


def _ci(block: Mapping[str, Any], metric: str = "f1") -> Sequence[float] | None:
    return (block.get("ci") or {}).get(metric)


def qa_rows(qa: Mapping[str, Any]) -> list[list[str]]:
    """One row per system: scores with intervals, or ``n/a (k of n calls failed)``."""
    cats = qa["settings"]["categories"]
    rows = []
    for name, s in qa["systems"].items():
        ov = s["overall"]
        failed = f"{s.get('failed_calls', s['errors'])} of {s['n']}"
        if not s.get("valid", True):
            na = f"n/a ({s['invalid_reason']})"
            rows.append([name, *(["n/a"] * len(cats)), na, "n/a", "n/a", "n/a", fmt(ov["context_tokens_mean"], "int"),
                         fmt(ov.get("prompt_tokens_mean"), "int"), fmt(ov["answer_latency_p50_s"], "rate"),
                         failed])
            continue
        row = [name]
        for c in cats:
            block = s["categories"].get(str(c))
            row.append(_with_interval(block["f1"], _ci(block)) if block else "–")
        row += [_with_interval(ov["f1"], _ci(ov)), fmt(ov["f1_simple"]), fmt(ov["bleu1"]),
                fmt(ov.get("abstained_pct"), "ms"),  # already a percentage: one decimal, not scaled
                fmt(ov["context_tokens_mean"], "int"),
                fmt(ov.get("prompt_tokens_mean"), "int"),
                fmt(ov["answer_latency_p50_s"], "rate"), failed]
        rows.append(row)
    return rows


def qa_table(qa: Mapping[str, Any]) -> str:
    return markdown_table(qa_headers(qa["settings"]["categories"]), qa_rows(qa))


def difference_table(qa: Mapping[str, Any]) -> str:
    """Each system minus the reference, official F1 points with paired 95% intervals."""
    cats = qa["settings"]["categories"]
    rows = []
    for name, d in (qa.get("differences") or {}).items():
        if d is None:
            rows.append([name, *(["n/a"] * len(cats)), "n/a (failed calls)"])
            continue
        row = [name]
        for c in cats:
            cell = d["categories"].get(str(c), {}).get("f1")
            row.append(_with_interval(cell["diff"], cell["ci"], signed=True) if cell else "–")
        ov = d["overall"]["f1"]
        row.append(_with_interval(ov["diff"], ov["ci"], signed=True))
        rows.append(row)
    headers = ["system", *[f"cat{c} {CATEGORY_NAMES.get(c, c)} ΔF1" for c in cats], "avg ΔF1 (1-4)"]
    return markdown_table(headers, rows)


def qa_markdown(qa: Mapping[str, Any]) -> str:
    """qa.md: the side-by-side table, then cost and sample details."""
    st = qa["settings"]
    sample = qa["sample"]
    per = f"{st['per_category']} per category" if st["per_category"] else "every question"
    lines = [
        "# LoCoMo end-to-end QA",
        "",
        f"Model `{qa['model']}` at `{qa['base_url_host']}`, the same client for every system, one answer call "
        f"per question. Sample: {per} (seed {st['seed']}), {sample['n']} questions "
        f"({', '.join(f'cat{c} {n}' for c, n in sample['by_category'].items())}).",
        "",
        "F1 = LoCoMo's official scoring (in %); F1-simple and BLEU-1 as in Mem0/SimpleMem. Averages are over "
        "the questions of categories 1-4. Context tokens: cl100k_base tokens of the context handed to the "
        f"model (AriadneMem: the serialized evidence graph; {flat_system_name(st['flat_k'])}: the top "
        f"{st['flat_k']} raw turns, the block the recall bench counts). Retrieval latency excludes query "
        "embedding (as in the recall bench); answer latency is one LLM call.",
        "",
        *([f"Ablations (from the same retrieval, answered by the same reader): "
            f"{', '.join(QA_ABLATIONS[a] for a in st['ablations'])}.", ""] if st.get("ablations") else []),
        f"Brackets: {100 * st['ci_level']:.0f}% bootstrap confidence intervals ({st['bootstrap_samples']} "
        f"resamples of the questions, stratified by category, seed {st['seed']}). Failed calls: answer calls that "
        f"still failed after the client's retries and one re-ask; a system with more than "
        f"{st['max_failed_calls']} gets no score (n/a).",
        "",
        qa_table(qa),
        "",
    ]
    if qa.get("differences"):
        lines += [f"## Differences from {QA_REFERENCE}", "",
                  f"Each system minus {QA_REFERENCE} on the same questions (official F1 points), with paired "
                  "bootstrap 95% intervals: a difference is one this sample can tell only when its interval "
                  "excludes 0.", "", difference_table(qa), ""]
    if not qa.get("valid", True):
        lines += [f"**{qa['failed_calls']} answer calls failed: the scores of the systems marked n/a are "
                  "withheld.**", ""]
    lines += [
        "## Cost",
        "",
    ]
    rows = []
    for name, s in qa["systems"].items():
        ov, llm = s["overall_incl_adversarial"], s["answer_llm"]
        rows.append([name, str(s["n"]), fmt(ov["retrieval_latency_p50_ms"], "ms"),
                     fmt(ov["retrieval_latency_p95_ms"], "ms"), fmt(ov["answer_latency_p50_s"], "rate"),
                     fmt(ov["answer_latency_p95_s"], "rate"), str(llm["calls"]), str(s.get("cached", 0)),
                     str(ov["answer_prompt_tokens"]), str(ov["answer_completion_tokens"]), str(s["errors"])])
    lines += [markdown_table(("system", "n", "retrieval p50 ms", "retrieval p95 ms", "answer p50 s",
                              "answer p95 s", "answer calls", "replayed", "prompt tokens", "completion tokens",
                              "errors"), rows), "",
              "Replayed: answers taken from the answer cache (`--qa-cache`), asked with the same prompt by an "
              "earlier run that stopped; their latency and tokens are those of that call.", ""]
    cons = qa.get("construction") or {}
    if cons:
        lines += ["## Construction (LLM extraction)", ""]
        crow = [[name, str(c["turns"]), str(c["llm_calls"]), fmt(c["calls_per_100_turns"], "ms"),
                 str(c["prompt_tokens"]), str(c["completion_tokens"]), fmt(c["wall_s"], "ms"),
                 str(c["fallback_windows"]), str(c["patched_turns"])] for name, c in cons.items()]
        lines += [markdown_table(("system", "turns", "LLM calls", "calls / 100 turns", "prompt tokens",
                                  "completion tokens", "wall s", "fallback windows", "patched turns"), crow), ""]
    else:
        lines += ["Construction: rule extractor (no LLM calls).", ""]
    lines += [f"Categories: {', '.join(f'{k} = {v}' for k, v in CATEGORIES.items() if k in st['categories'])}.",
              ""]
    return "\n".join(lines)
