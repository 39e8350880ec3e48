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

from .locomo import CATEGORIES, Dataset, Question
from .metrics import percentile
from .qa import CATEGORY_NAMES, answer_items, score_items
from .report import fmt, markdown_table

#: Categories answered by default; 5 (adversarial) only on request.
QA_CATEGORIES = (1, 2, 3, 4)
#: Flat baseline answered next to AriadneMem: hybrid RRF over raw turns, top 30.
QA_FLAT_METHOD = "hybrid"
QA_FLAT_K = 30
#: Default split of extraction windows for the LLM extractor: small local models cover
#: a 10-turn window but stop after a few entries of a 20-turn one (see LLMExtractor).
LLM_TURNS_PER_CALL = 10


@dataclass(slots=True)
class QASettings:
    """What ``--qa`` asked for. ``per_category=None``: every question of the categories."""

    per_category: int | None = None
    seed: int = 0
    concurrency: int = 2
    include_adversarial: bool = False
    flat_k: int = QA_FLAT_K

    def __post_init__(self) -> None:
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
        return asdict(self) | {"categories": list(self.categories), "flat_method": QA_FLAT_METHOD}


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

    def __post_init__(self) -> None:
        self._wanted = set(self.qids)

    @classmethod
    def for_sample(cls, dataset: Dataset, qids: Sequence[str], flat_k: int = QA_FLAT_K) -> QACollector:
        wanted = set(qids)
        by_cat: dict[str, int] = {}
        for c in dataset.conversations:
            for q in c.questions:
                if q.qid in wanted:
                    by_cat[str(q.category)] = by_cat.get(str(q.category), 0) + 1
        return cls(list(qids), dict(sorted(by_cat.items())), flat_k)

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
                          advance: Callable[[], None]) -> list[dict[str, Any]]:
    """:func:`answer_items` one item at a time on a pool, so the bar moves per answer.
    (Every item still goes through answer_items' gold-key check.)"""
    def one(item: dict[str, Any]) -> dict[str, Any]:
        result = answer_items([item], client, concurrency=1)[0]
        advance()
        return result

    if concurrency <= 1 or len(items) <= 1:
        return [one(it) for it in items]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(items)), thread_name_prefix="ariadnemem-qa") as pool:
        return list(pool.map(one, items))


def _round(value: float | None, nd: int = 3) -> float | None:
    return None if value is None else round(value, nd)


def _cost_block(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Context size and latency figures of a group of answered items."""
    n = len(rows)
    lat = [float(r["latency_s"]) for r in rows if not r.get("error")]
    ret = [float(r["retrieval_ms"]) for r in rows]
    return {
        "context_tokens_mean": _round(sum(r["context_tokens"] for r in rows) / n, 1) if n else None,
        "answer_latency_p50_s": _round(percentile(lat, 50)),
        "answer_latency_p95_s": _round(percentile(lat, 95)),
        "retrieval_latency_p50_ms": _round(percentile(ret, 50)),
        "retrieval_latency_p95_ms": _round(percentile(ret, 95)),
        "answer_prompt_tokens": sum(int(r["prompt_tokens"]) for r in rows),
        "answer_completion_tokens": sum(int(r["completion_tokens"]) for r in rows),
        "errors": sum(1 for r in rows if r.get("error")),
    }


def _system_figures(results: list[dict[str, Any]], scores: dict[str, Any], usage: Mapping[str, Any],
                    wall_s: float) -> dict[str, Any]:
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_cat.setdefault(str(r["category"]), []).append(r)
    categories = {c: {**block, **_cost_block(by_cat.get(c, []))} for c, block in scores["categories"].items()}
    no_adv = [r for r in results if int(r["category"]) != 5]
    return {
        "n": len(results),
        "overall": {**scores["overall_excl_adversarial"], **_cost_block(no_adv)},
        "overall_incl_adversarial": {**scores["overall"], **_cost_block(results)},
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
    for system, items in collector.items.items():
        task = prog.add_task(f"QA {system}: answers", total=len(items))
        before = dict(client.usage) if client is not None else {}
        t0 = time.perf_counter()
        results = _answer_with_progress(items, client, settings.concurrency, functools.partial(prog.advance, task))
        wall = time.perf_counter() - t0
        usage = usage_delta(client.usage, before) if client is not None else {}
        prog.remove_task(task)
        scores = score_items(results, {r["qid"]: golds[r["qid"]] for r in results})
        systems[system] = _system_figures(results, scores, usage, wall)
        for r, s in zip(results, scores["items"], strict=True):
            predictions.append({
                "system": system, "qid": r["qid"], "category": r["category"], "question": r["question"],
                "prediction": r["prediction"], "f1": s["f1"], "f1_simple": s["f1_simple"], "bleu1": s["bleu1"],
                "context_tokens": r["context_tokens"], "retrieval_ms": r["retrieval_ms"],
                "answer_latency_s": r["latency_s"], "prompt_tokens": r["prompt_tokens"],
                "completion_tokens": r["completion_tokens"], "mode": r["mode"],
                "fast_path": r.get("fast_path"), "fact_ids": r.get("fact_ids"), "error": r.get("error"),
            })
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
        "items": predictions,
    }


def golds_for(dataset: Dataset, qids: Sequence[str]) -> dict[str, Any]:
    """``{qid: gold}`` for the sampled questions (kept apart from the items)."""
    wanted = set(qids)
    return {q.qid: gold_of(q) for c in dataset.conversations for q in c.questions if q.qid in wanted}


# ---------------------------------------------------------------------- report
def qa_headers(categories: Sequence[int]) -> list[str]:
    cats = [f"cat{c} {CATEGORY_NAMES.get(c, c)} F1" for c in categories]
    return ["system", *cats, "avg F1 (1-4)", "F1-simple", "BLEU-1", "context tokens", "answer p50 s"]


def qa_rows(qa: Mapping[str, Any]) -> list[list[str]]:
    cats = qa["settings"]["categories"]
    rows = []
    for name, s in qa["systems"].items():
        row = [name]
        for c in cats:
            block = s["categories"].get(str(c))
            row.append(fmt(block["f1"]) if block else "–")
        ov = s["overall"]
        row += [fmt(ov["f1"]), fmt(ov["f1_simple"]), fmt(ov["bleu1"]), fmt(ov["context_tokens_mean"], "int"),
                fmt(ov["answer_latency_p50_s"], "rate")]
        rows.append(row)
    return rows


def qa_table(qa: Mapping[str, Any]) -> str:
    return markdown_table(qa_headers(qa["settings"]["categories"]), qa_rows(qa))


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
        qa_table(qa),
        "",
        "## Cost",
        "",
    ]
    rows = []
    for name, s in qa["systems"].items():
        ov, llm = s["overall_incl_adversarial"], s["answer_llm"]
        rows.append([name, str(s["n"]), fmt(ov["retrieval_latency_p50_ms"], "ms"),
                     fmt(ov["retrieval_latency_p95_ms"], "ms"), fmt(ov["answer_latency_p50_s"], "rate"),
                     fmt(ov["answer_latency_p95_s"], "rate"), str(llm["calls"]), str(llm["prompt_tokens"]),
                     str(llm["completion_tokens"]), str(s["errors"])])
    lines += [markdown_table(("system", "n", "retrieval p50 ms", "retrieval p95 ms", "answer p50 s",
                              "answer p95 s", "answer calls", "prompt tokens", "completion tokens", "errors"),
                             rows), ""]
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
