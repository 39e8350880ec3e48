"""QA scorers against hand-computed values (LoCoMo official F1, Mem0-style F1 and BLEU-1)."""

from __future__ import annotations

import math

import pytest

from ariadnemem_core.bench.qa import score_items
from ariadnemem_core.bench.qa_metrics import (
    _bleu1_fallback,
    bleu1,
    locomo_f1_score,
    locomo_multi_f1,
    locomo_score,
    normalize_answer,
    simple_f1,
    simple_tokenize,
)


def test_normalize_answer() -> None:
    assert normalize_answer("The Cat, and a Dog!") == "cat dog"
    assert normalize_answer("An apple-pie; THE end.") == "applepie end"
    assert normalize_answer(2022) == "2022"
    assert normalize_answer("theater and band") == "theater band"  # whole words only


@pytest.mark.parametrize("pred, gold, expected", [
    ("The cat sat, on the mat!", "a cat sitting on mat", 0.75),        # stems: sat/sit differ
    ("May 7, 2023", "7 May 2023", 1.0),                                  # multiset, order-free
    ("running marathons", "ran a marathon", 0.5),                        # run != ran, marathon(s) match
    ("dog dog cat", "dog cat cat", 2 / 3),                               # multiset, not set
    ("salt and pepper", "salt pepper", 1.0),                             # "and" is dropped
    ("in 2022", 2022, 2 / 3),
    ("", "anything", 0.0),
    ("the", "the", 0.0),                                                 # nothing left
])
def test_locomo_f1_score(pred: object, gold: object, expected: float) -> None:
    assert locomo_f1_score(pred, gold) == pytest.approx(expected)


def test_locomo_multi_hop_f1() -> None:
    # each gold sub-answer takes its best predicted sub-answer; then the mean
    assert locomo_multi_f1("Porto and Lisbon", "Lisbon, Porto, Faro") == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)
    assert locomo_multi_f1("Porto, Lisbon", "Lisbon, Porto, Faro") == pytest.approx(2 / 3)
    assert locomo_multi_f1("Lisbon", "Lisbon") == 1.0


def test_locomo_score_by_category() -> None:
    assert locomo_score("Porto, Lisbon", "Lisbon, Porto, Faro", 1) == pytest.approx(2 / 3)
    # category 1 splits; 2-4 do not: the same strings score differently
    assert locomo_score("Porto, Lisbon", "Lisbon, Porto, Faro", 4) == pytest.approx(0.8)
    assert locomo_score("psychology", "Psychology; counseling certification", 3) == 1.0
    assert locomo_score("psychology", "Psychology; counseling certification", 2) == pytest.approx(0.5)
    assert locomo_score("Not mentioned in the conversation", "Lisbon", 5) == 1.0
    assert locomo_score("No information available.", None, 5) == 1.0
    assert locomo_score("Lisbon", "Lisbon", 5) == 0.0
    with pytest.raises(ValueError):
        locomo_score("x", "x", 9)


def test_simple_f1_sets_without_stemming() -> None:
    assert simple_tokenize("Hello, World! It's 7 p.m.") == ["hello", "world", "it's", "7", "p", "m"]
    assert simple_f1("The cat sat.", "the cat sat on the mat") == pytest.approx(0.75)  # P=1, R=3/5
    assert simple_f1("dog dog cat", "dog cat cat") == 1.0  # sets
    assert simple_f1("running", "run") == 0.0
    assert simple_f1("Bob's cat", "bob's cat!") == 1.0
    assert simple_f1("", "x") == 0.0


@pytest.mark.parametrize("pred, ref, expected", [
    ("the cat sat", "the cat sat on the mat", math.exp(-1)),  # P1 = 1, BP = exp(1 - 6/3)
    ("a a a b", "a b c d", 0.5),                               # clipped: a once, b once -> 2/4
    ("a b c d e", "a b", 0.4),                                 # longer than ref: no BP
    ("x y", "a b c", 0.0),
    ("", "a", 0.0),
])
def test_bleu1(pred: str, ref: str, expected: float) -> None:
    assert bleu1(pred, ref) == pytest.approx(expected)
    if pred:
        assert _bleu1_fallback(simple_tokenize(pred), simple_tokenize(ref)) == pytest.approx(expected)


def test_score_items_per_category_and_overall() -> None:
    results = [
        {"qid": "a", "category": 4, "prediction": "7 May 2023"},
        {"qid": "b", "category": 4, "prediction": "Lisbon"},
        {"qid": "c", "category": 2, "prediction": "in 2022"},
        {"qid": "d", "category": 5, "prediction": "not mentioned"},
    ]
    golds = {"a": "7 May 2023", "b": "Porto", "c": 2022, "d": "a red car"}
    out = score_items(results, golds)
    assert out["categories"]["4"] == {"name": "single-hop", "n": 2, "f1": 0.5, "f1_simple": 0.5,
                                      "bleu1": pytest.approx(0.5)}
    assert out["categories"]["2"]["f1"] == pytest.approx(2 / 3, abs=1e-6)
    assert out["categories"]["2"]["f1_simple"] == pytest.approx(2 / 3, abs=1e-6)
    assert out["categories"]["5"]["f1"] == 1.0
    assert out["overall"]["n"] == 4
    assert out["overall"]["f1"] == pytest.approx((1 + 0 + 2 / 3 + 1) / 4, abs=1e-6)
    assert out["overall_excl_adversarial"]["f1"] == pytest.approx((1 + 0 + 2 / 3) / 3, abs=1e-6)
    assert [i["qid"] for i in out["items"]] == ["a", "b", "c", "d"]
    # aligned sequence of golds works too
    assert score_items(results, list(golds.values()))["overall"] == out["overall"]
    with pytest.raises(ValueError):
        score_items(results, ["x"])
