"""Pure metric functions for the benches (tested on hand-made cases with known values).

Evidence recall is measured on provenance: a gold evidence turn counts as covered when
some fact handed to the generator was extracted from it (``Fact.source_turn_ids``); for a
flat baseline, when the turn itself was retrieved. This is what bounds answer quality
without involving an LLM.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Categories averaged into "overall"; 5 (adversarial) is reported on its own because its
#: questions are about things that were never said.
SCORED_CATEGORIES = (1, 2, 3, 4)


def evidence_recall(evidence: Iterable[str], covered: Iterable[str]) -> float | None:
    """``|evidence ∩ covered| / |evidence|``; None when there is no evidence to find."""
    ev = set(evidence)
    if not ev:
        return None
    return len(ev & set(covered)) / len(ev)


def all_hit(evidence: Iterable[str], covered: Iterable[str]) -> bool | None:
    """Every evidence id covered (what a multi-hop answer needs); None without evidence."""
    ev = set(evidence)
    if not ev:
        return None
    return ev <= set(covered)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile with linear interpolation (numpy's default); None if empty."""
    if len(values) == 0:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def mean(values: Iterable[float | int | bool]) -> float | None:
    vals = [float(v) for v in values]
    return sum(vals) / len(vals) if vals else None


def rate(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def covered_turns(graph: Any) -> set[str]:
    """Union of the facts' source turn ids of an EvidenceGraph."""
    return {tid for f in graph.facts for tid in f.source_turn_ids}


def bridges_in(graph: Any) -> int:
    """Bridge facts kept in a graph: the retriever's own count, else facts with role bridge."""
    n = graph.stats.get("bridges") if isinstance(graph.stats, Mapping) else None
    if isinstance(n, int | float):
        return int(n)
    return sum(1 for f in graph.facts if f.role == "bridge")


@dataclass(slots=True)
class QuestionRecord:
    """One system's result on one question (no gold answer, only evidence ids)."""

    qid: str
    category: int
    evidence: list[str]
    covered: list[str]  # evidence ids that were covered
    tokens: int
    latency_ms: float
    fast_path: bool = False
    bridges: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def recall(self) -> float | None:
        return evidence_recall(self.evidence, self.covered)

    @property
    def all_hit(self) -> bool | None:
        return all_hit(self.evidence, self.covered)


def make_record(qid: str, category: int, evidence: Sequence[str], covered_ids: Iterable[str], tokens: int,
                latency_ms: float, *, fast_path: bool = False, bridges: int = 0) -> QuestionRecord:
    """Keep only the covered *evidence* ids (a record stays small, whatever was retrieved)."""
    cov = set(covered_ids)
    return QuestionRecord(qid, category, list(evidence), [e for e in evidence if e in cov], tokens,
                          latency_ms, fast_path, bridges)


def summarize_group(records: Sequence[QuestionRecord]) -> dict[str, Any]:
    """Means over a group of questions. Recall/all-hit average only questions with evidence."""
    scored = [r for r in records if r.evidence]
    lat = [r.latency_ms for r in records]
    return {
        "n": len(records),
        "n_scored": len(scored),
        "recall": mean(r.recall for r in scored),  # type: ignore[misc]
        "all_hit": mean(r.all_hit for r in scored),  # type: ignore[misc]
        "tokens_mean": mean(r.tokens for r in records),
        "latency_p50_ms": percentile(lat, 50),
        "latency_p95_ms": percentile(lat, 95),
        "fast_path_rate": mean(r.fast_path for r in records),
        "bridges_mean": mean(r.bridges for r in records),
    }


def fast_path_summary(records: Sequence[QuestionRecord]) -> dict[str, dict[str, Any]]:
    """Per fast path (name kept in ``record.extra["fast_path"]``): how often it fired and
    how often the evidence it returned was right (recall / every evidence turn covered,
    over the fired questions that have gold evidence)."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted({str(r.extra["fast_path"]) for r in records if r.extra.get("fast_path")}):
        fired = [r for r in records if r.extra.get("fast_path") == name]
        scored = [r for r in fired if r.evidence]
        out[name] = {
            "fired": len(fired),
            "rate": len(fired) / len(records) if records else None,
            "evidence_recall": mean(r.recall for r in scored),  # type: ignore[misc]
            "evidence_all_hit": mean(r.all_hit for r in scored),  # type: ignore[misc]
        }
    return out


def summarize(records: Sequence[QuestionRecord]) -> dict[str, Any]:
    """Per-category figures, ``overall`` (categories 1-4), ``all`` (every question) and
    ``fast_paths`` (per fast path: fires and evidence accuracy)."""
    cats = sorted({r.category for r in records})
    return {
        "categories": {str(c): summarize_group([r for r in records if r.category == c]) for c in cats},
        "overall": summarize_group([r for r in records if r.category in SCORED_CATEGORIES]),
        "all": summarize_group(records),
        "fast_paths": fast_path_summary(records),
    }


def gate_drop_rate(stats: Mapping[str, Any]) -> float | None:
    """Share of processed turns the gate dropped."""
    kept = int(stats.get("gate_kept", 0))
    dropped = int(stats.get("gate_dropped", 0))
    return rate(dropped, kept + dropped)


def ingest_figures(stats: Mapping[str, Any], turns: int, seconds: float) -> dict[str, Any]:
    """The ingest report of one memory: throughput, gate, coarsening decisions."""
    return {
        "turns": turns,
        "seconds": round(seconds, 3),
        "turns_per_s": rate(turns, seconds),
        "entries": int(stats.get("entries", 0)),
        "gate_kept": int(stats.get("gate_kept", 0)),
        "gate_dropped": int(stats.get("gate_dropped", 0)),
        "gate_drop_rate": gate_drop_rate(stats),
        "merge": int(stats.get("merge", 0)),
        "link": int(stats.get("link", 0)),
        "add": int(stats.get("add", 0)),
        "update_edges": int(stats.get("update_edges", 0)),
    }


def peak_rss() -> dict[str, float | None]:
    """Peak resident memory of this process in MB (ru_maxrss), plus psutil's view if present.

    ``ru_maxrss`` is in KiB on Linux and bytes on macOS. psutil has no portable peak, so
    its figure is the current RSS (and the peak where the OS reports one).
    """
    raw = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out: dict[str, float | None] = {
        "ru_maxrss_mb": round(raw / (1024 * 1024) if sys.platform == "darwin" else raw / 1024, 1),
        "psutil_rss_mb": None,
        "psutil_peak_mb": None,
    }
    try:
        import psutil
    except ImportError:
        return out
    info = psutil.Process().memory_info()
    out["psutil_rss_mb"] = round(info.rss / (1024 * 1024), 1)
    peak = getattr(info, "peak_wset", None) or getattr(info, "peak_rss", None)
    if peak:
        out["psutil_peak_mb"] = round(peak / (1024 * 1024), 1)
    return out


#: Bootstrap resamples and confidence level of every interval the QA bench reports.
BOOTSTRAP_SAMPLES = 2000
CI_LEVEL = 0.95


def stratified_bootstrap(groups: Mapping[str, Sequence[float]], *, overall: Sequence[str] | None = None,
                         n_boot: int = BOOTSTRAP_SAMPLES, level: float = CI_LEVEL,
                         seed: int = 0) -> dict[str, tuple[float, float] | None]:
    """Percentile bootstrap intervals of the mean of each group and of the pooled mean.

    Why stratified: the QA sample draws a fixed number of questions per category, so a
    resample draws the same number per category again (with replacement); the pooled
    mean of a resample is the mean over its questions, as the reported average is. Pass
    per-question *differences* of two systems on the same questions for a paired
    interval of the difference (the questions' difficulty cancels out).

    Args:
        groups: per category, one value per question.
        overall: the groups pooled into ``"overall"`` (default: all of them).
        n_boot: resamples.
        level: confidence level (0.95: the 2.5th and 97.5th percentiles).
        seed: the resampling seed (a fixed seed makes the report reproducible).

    Returns:
        ``{group: (low, high)}`` plus ``"overall"``; None for an empty group.
    """
    rng = np.random.default_rng(seed)
    pooled = set(groups) if overall is None else set(overall)
    tail = 100.0 * (1.0 - level) / 2.0
    out: dict[str, tuple[float, float] | None] = {}
    sums = np.zeros(n_boot)
    total = 0
    for name in sorted(groups):
        values = np.asarray(groups[name], dtype=float)
        if values.size == 0:
            out[name] = None
            continue
        draws = values[rng.integers(0, values.size, size=(n_boot, values.size))].sum(axis=1)
        lo, hi = np.percentile(draws / values.size, [tail, 100.0 - tail])
        out[name] = (round(float(lo), 6), round(float(hi), 6))
        if name in pooled:
            sums += draws
            total += values.size
    if total:
        lo, hi = np.percentile(sums / total, [tail, 100.0 - tail])
        out["overall"] = (round(float(lo), 6), round(float(hi), 6))
    else:
        out["overall"] = None
    return out
