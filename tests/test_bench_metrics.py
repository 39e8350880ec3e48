"""Metric functions on hand-made cases with known values."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ariadnemem_core.bench.metrics import (
    all_hit,
    bridges_in,
    covered_turns,
    evidence_recall,
    gate_drop_rate,
    ingest_figures,
    make_record,
    peak_rss,
    percentile,
    summarize,
)


def test_recall_and_all_hit() -> None:
    assert evidence_recall(["a", "b"], {"a", "x"}) == 0.5
    assert evidence_recall(["a", "b", "c", "d"], {"a", "b", "c"}) == 0.75
    assert evidence_recall(["a"], set()) == 0.0
    assert evidence_recall([], {"a"}) is None
    assert all_hit(["a", "b"], {"a", "b", "z"}) is True
    assert all_hit(["a", "b"], {"a"}) is False
    assert all_hit([], {"a"}) is None


def test_percentile_linear() -> None:
    assert percentile([1, 2, 3, 4, 100], 50) == 3.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([0, 10], 95) == pytest.approx(9.5)
    assert percentile([], 50) is None


def _fact(ids: list[str], role: str = "terminal") -> SimpleNamespace:
    return SimpleNamespace(source_turn_ids=ids, role=role)


def test_graph_helpers() -> None:
    g = SimpleNamespace(facts=[_fact(["D1:1", "D1:2"]), _fact(["D2:1"], "bridge"), _fact(["D1:2"], "bridge")],
                        stats={})
    assert covered_turns(g) == {"D1:1", "D1:2", "D2:1"}
    assert bridges_in(g) == 2  # counted from roles
    g.stats["bridges"] = 5
    assert bridges_in(g) == 5  # the retriever's own count wins


def test_summarize_per_category() -> None:
    recs = [
        make_record("q1", 1, ["a", "b"], {"a"}, 100, 10.0, bridges=2),
        make_record("q2", 1, ["c"], {"c", "zz"}, 200, 20.0, fast_path=True),
        make_record("q3", 2, ["d"], set(), 300, 30.0),
        make_record("q4", 2, [], {"d"}, 400, 40.0),  # no evidence: not in recall means
        make_record("q5", 5, ["e"], {"e"}, 500, 50.0),
    ]
    assert recs[0].covered == ["a"] and recs[1].covered == ["c"]  # only evidence ids kept
    s = summarize(recs)
    c1 = s["categories"]["1"]
    assert c1["n"] == 2 and c1["n_scored"] == 2
    assert c1["recall"] == pytest.approx(0.75)
    assert c1["all_hit"] == pytest.approx(0.5)
    assert c1["tokens_mean"] == 150
    assert c1["latency_p50_ms"] == 15.0
    assert c1["fast_path_rate"] == 0.5
    assert c1["bridges_mean"] == 1.0
    c2 = s["categories"]["2"]
    assert c2["n"] == 2 and c2["n_scored"] == 1 and c2["recall"] == 0.0
    assert c2["tokens_mean"] == 350  # token cost counts every question
    # overall = categories 1-4 only, micro-averaged over scored questions
    assert s["overall"]["n"] == 4 and s["overall"]["n_scored"] == 3
    assert s["overall"]["recall"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert s["categories"]["5"]["recall"] == 1.0
    assert s["all"]["latency_p50_ms"] == 30.0
    assert s["all"]["n"] == 5


def test_ingest_figures_and_gate_rate() -> None:
    stats = {"gate_kept": 90, "gate_dropped": 10, "merge": 3, "link": 4, "add": 80, "entries": 84}
    assert gate_drop_rate(stats) == 0.1
    assert gate_drop_rate({}) is None
    f = ingest_figures(stats, 100, 0.25)
    assert f["turns_per_s"] == 400.0
    assert (f["merge"], f["link"], f["add"], f["entries"]) == (3, 4, 80, 84)
    assert ingest_figures(stats, 0, 0.0)["turns_per_s"] is None


def test_peak_rss_positive() -> None:
    rss = peak_rss()
    assert rss["ru_maxrss_mb"] > 10


def test_fast_path_summary_counts_fires_and_evidence_accuracy() -> None:
    from ariadnemem_core.bench.metrics import fast_path_summary

    recs = [
        make_record("q1", 4, ["a", "b"], {"a", "b"}, 10, 1.0, fast_path=True),  # right
        make_record("q2", 4, ["c", "d"], {"c"}, 10, 1.0, fast_path=True),  # half right
        make_record("q3", 1, ["e"], set(), 10, 1.0, fast_path=True),  # other path, wrong
        make_record("q4", 1, ["f"], {"f"}, 10, 1.0),  # no fast path
    ]
    for rec, name in zip(recs, ["counter", "counter", "attribute", None], strict=True):
        if name:
            rec.extra["fast_path"] = name
    out = fast_path_summary(recs)
    assert set(out) == {"counter", "attribute"}
    assert out["counter"]["fired"] == 2 and out["counter"]["rate"] == 0.5
    assert out["counter"]["evidence_recall"] == 0.75 and out["counter"]["evidence_all_hit"] == 0.5
    assert out["attribute"]["evidence_all_hit"] == 0.0
    assert summarize(recs)["fast_paths"] == out
