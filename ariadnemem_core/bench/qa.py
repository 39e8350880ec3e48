"""End-to-end QA: answer benchmark questions with one synthesis call each, then score.

Why split in two: :func:`answer_items` never sees a gold answer (items carrying one are
rejected), and :func:`score_items` is the only place golds enter, so no gold text can
reach a prompt by construction.

An item is ``{"qid", "question", "category", "context_text", "graph" (optional)}``. With a
``graph`` (an EvidenceGraph from ``AriadneMemory.retrieve``) the answer is synthesized
from it; otherwise from ``context_text`` (flat baselines: a retrieved text block).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..errors import LLMError
from ..llm import LLMClient
from ..synthesis import ANSWER_MAX_TOKENS, build_messages, spell_out_labels, synthesize
from .qa_metrics import score_answer

#: Keys that would carry a gold answer; :func:`answer_items` refuses items with them.
GOLD_KEYS = ("answer", "gold", "gold_answer", "adversarial_answer", "answers")
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


class TextContext:
    """A flat text block posing as a graph for :func:`~ariadnemem_core.synthesis.synthesize`
    (``to_text`` is the block; no facts, so the offline answer is "not mentioned")."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.facts: list[Any] = []
        self.fast_path: str | None = None

    def to_text(self) -> str:
        return self.text


#: The fields of an answer an :class:`AnswerCache` keeps and hands back.
CACHED_FIELDS = ("prediction", "latency_s", "prompt_tokens", "completion_tokens", "mode", "fact_ids")


class AnswerCache:
    """Answers already given, by the exact prompt they were given to: a QA run that stops
    (a session's end, a crash, a reboot) resumes where it was instead of paying hours of
    CPU generation again, and a system whose prompts did not change is not re-asked.

    Why keyed by the prompt: the key is a hash of the model name, both messages and the
    completion budget, so any change to the context, the question or the prompt text is a
    new key; no gold answer is ever part of it. Only successful LLM answers are kept
    (append-only JSON lines; a torn last line from a killed run is skipped on load). The
    reader must be deterministic (temperature 0) for a replayed answer to be the answer.

    Args:
        path: the JSON-lines file (created with its folder when missing).
        model: the reader's model name (part of every key).
        replay_only: answer from the file only; a prompt it lacks is reported as an
            error (so a system not fully answered yet gets no score), never asked.
    """

    #: The error of an answer a replay-only run did not find.
    MISSING = "not answered yet (replay only: not in the answer cache)"

    def __init__(self, path: str | Path, model: str | None, *, replay_only: bool = False) -> None:
        self.path = Path(path)
        self.model = model or ""
        #: Never ask: report what is answered so far (a missing answer is an error).
        self.replay_only = replay_only
        self.hits = 0
        self._lock = threading.Lock()
        self._answers: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self._answers[str(row["key"])] = {k: row[k] for k in CACHED_FIELDS}
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut by a killed run
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def __len__(self) -> int:
        return len(self._answers)

    def key(self, messages: list[dict[str, str]]) -> str:
        """The cache key of one answer call."""
        blob = json.dumps([self.model, messages, ANSWER_MAX_TOKENS], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._answers.get(key)
            if found is not None:
                self.hits += 1
            return None if found is None else dict(found)

    def put(self, key: str, result: Mapping[str, Any]) -> None:
        row = {k: result[k] for k in CACHED_FIELDS}
        with self._lock:
            self._answers[key] = row
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"key": key, **row}, ensure_ascii=False) + "\n")


def _answer_one(item: Mapping[str, Any], client: LLMClient | None,
                cache: AnswerCache | None = None) -> dict[str, Any]:
    leaked = [k for k in GOLD_KEYS if k in item]
    if leaked:
        raise ValueError(f"item {item.get('qid')!r} carries gold keys {leaked}: pass golds to score_items only")
    graph = item.get("graph")
    if graph is None:
        graph = TextContext(str(item.get("context_text") or ""))
    out = {k: v for k, v in item.items() if k != "graph"}
    key = None
    if cache is not None:
        key = cache.key(build_messages(str(item["question"]), graph))
        found = cache.get(key)
        if found is not None:
            out.update(found, error=None, cached=True)
            out["prediction"] = spell_out_labels(str(found["prediction"]), graph)
            return out
        if cache.replay_only:
            out.update(prediction="", latency_s=0.0, prompt_tokens=0, completion_tokens=0, mode="error",
                       fact_ids=[], error=AnswerCache.MISSING)
            return out
    started = time.perf_counter()
    try:
        ans = synthesize(str(item["question"]), graph, client)
    except LLMError as exc:  # one failed question must not abort a benchmark run
        out.update(prediction="", latency_s=round(time.perf_counter() - started, 6), prompt_tokens=0,
                   completion_tokens=0, mode="error", fact_ids=[], error=str(exc))
        return out
    out.update(
        prediction=ans.text,
        latency_s=round(ans.latency_s, 6),
        prompt_tokens=int(ans.usage.get("prompt_tokens", 0)),
        completion_tokens=int(ans.usage.get("completion_tokens", 0)),
        mode=ans.mode,
        fact_ids=list(ans.fact_ids),
        error=None,
    )
    if cache is not None and key is not None and ans.mode == "llm":
        cache.put(key, out)
    return out


def answer_items(items: Sequence[Mapping[str, Any]], client: LLMClient | None, *,
                 concurrency: int = 2, cache: AnswerCache | None = None) -> list[dict[str, Any]]:
    """Answer every item (one LLM call each, ``concurrency`` in flight), in input order.

    Each result is the item (minus ``graph``) plus ``prediction, latency_s, prompt_tokens,
    completion_tokens, mode, fact_ids, error``. An LLM failure is recorded in ``error``
    (prediction ""), not raised. Items must not carry gold answers (ValueError). With a
    ``cache``, an answer to the same prompt is replayed (``cached=True``), not asked again.
    """
    items = list(items)
    for item in items:  # validate all before spending any call
        if "question" not in item:
            raise ValueError(f"item {item.get('qid')!r} has no question")
        leaked = [k for k in GOLD_KEYS if k in item]
        if leaked:
            raise ValueError(f"item {item.get('qid')!r} carries gold keys {leaked}: pass golds to score_items only")
    if concurrency <= 1 or len(items) <= 1:
        return [_answer_one(it, client, cache) for it in items]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(items)), thread_name_prefix="ariadnemem-qa") as pool:
        return list(pool.map(lambda it: _answer_one(it, client, cache), items))


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 6) if values else 0.0


def _block(rows: list[dict[str, float]]) -> dict[str, Any]:
    return {
        "n": len(rows),
        "f1": _mean([r["f1"] for r in rows]),
        "f1_simple": _mean([r["f1_simple"] for r in rows]),
        "bleu1": _mean([r["bleu1"] for r in rows]),
    }


def score_items(results: Sequence[Mapping[str, Any]],
                golds: Mapping[Any, Any] | Sequence[Any]) -> dict[str, Any]:
    """Score predictions against golds: per category, overall, and overall without the
    adversarial category 5 (most papers report that one).

    ``golds``: ``{qid: gold answer}`` or a sequence aligned with ``results``. For
    category 5 pass the adversarial answer (or None); its official score only checks
    that the prediction abstains. Returns ``{"overall", "overall_excl_adversarial",
    "categories": {"1": {...}, ...}, "items": [...], "errors"}``; every block has
    ``n, f1`` (LoCoMo official), ``f1_simple`` and ``bleu1``.
    """
    results = list(results)
    if isinstance(golds, Mapping):
        missing = [r.get("qid") for r in results if r.get("qid") not in golds]
        if missing:
            raise KeyError(f"no gold answer for qids {missing[:5]}{'...' if len(missing) > 5 else ''}")
        gold_list = [golds[r.get("qid")] for r in results]
    else:
        gold_list = list(golds)
        if len(gold_list) != len(results):
            raise ValueError(f"{len(results)} results but {len(gold_list)} golds")
    per_item: list[dict[str, Any]] = []
    by_cat: dict[int, list[dict[str, float]]] = {}
    for r, gold in zip(results, gold_list, strict=True):
        cat = int(r["category"])
        s = score_answer(r.get("prediction") or "", "" if gold is None else gold, cat)
        by_cat.setdefault(cat, []).append(s)
        per_item.append({"qid": r.get("qid"), "category": cat, **{k: round(v, 6) for k, v in s.items()}})
    all_rows = [s for rows in by_cat.values() for s in rows]
    no_adv = [s for c, rows in by_cat.items() if c != 5 for s in rows]
    return {
        "overall": _block(all_rows),
        "overall_excl_adversarial": _block(no_adv),
        "categories": {str(c): {"name": CATEGORY_NAMES.get(c, str(c)), **_block(rows)}
                       for c, rows in sorted(by_cat.items())},
        "items": per_item,
        "errors": sum(1 for r in results if r.get("error")),
    }
