"""Flat baselines on a tiny corpus: BM25 ranking, dense ranking, RRF math, formatting."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from ariadnemem_core import HashEmbedder, Turn
from ariadnemem_core.bench.baselines import FlatIndex, format_turn_doc, fts_query
from ariadnemem_core.reasoning.channels import rrf
from ariadnemem_core.tokens import count_tokens

T = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def corpus() -> list[Turn]:
    return [
        Turn("Ann", "I had pasta for dinner yesterday.", T, "D1:1"),
        Turn("Bo", "My sister adopted a kitten named Miso.", T, "D1:2"),
        Turn("Ann", "We went hiking in the Alps last summer.", T, "D1:3", {"blip_caption": "mountains at dawn"}),
        Turn("Bo", "The weather is nice today.", T, "D1:4"),
    ]


def test_format_turn_doc() -> None:
    turns = corpus()
    assert format_turn_doc(turns[0]) == "[2023-05-08] Ann: I had pasta for dinner yesterday."
    assert format_turn_doc(turns[2]).endswith("last summer. [shared image: mountains at dawn]")
    assert format_turn_doc(Turn("Cy", "hello")) == "[????-??-??] Cy: hello"


def test_fts_query_quotes_everything() -> None:
    expected = '"what" OR "s" OR "bo" OR "cat" OR "name" OR "and" OR "or" OR "not"'
    assert fts_query("What's Bo's cat-name? AND OR NOT") == expected
    assert fts_query("?!") is None


def test_bm25_ranks_the_turn_with_the_query_word_first() -> None:
    index = FlatIndex.from_turns(corpus())
    try:
        assert index.bm25("Who adopted a kitten?", 2)[0] == 1
        assert index.bm25("hiking", 5) == [2]
        assert index.bm25("mountains", 5) == [2]  # the caption is part of the document
        assert index.bm25("hikes", 5) == [2]  # porter stemming
        assert index.bm25('weird "quotes" AND (parens) NEAR*', 5) == []  # no syntax error
        res = index.search("bm25", "kitten", 10)
        assert res.ids == ["D1:2"]
        assert res.context == "[2023-05-08] Bo: My sister adopted a kitten named Miso."
        assert res.tokens == count_tokens(res.context)
        assert res.latency_ms >= 0
    finally:
        index.close()


def test_dense_and_hybrid() -> None:
    emb = HashEmbedder()
    index = FlatIndex.from_turns(corpus(), emb)
    try:
        qvec = emb.embed(["adopted a kitten named Miso"])[0]
        assert index.dense(qvec, 1) == [1]
        assert len(index.dense(qvec, 10)) == 4  # k larger than the corpus
        res = index.search("hybrid", "adopted a kitten named Miso", 2)  # embeds with the index's embedder
        assert res.ids[0] == "D1:2" and len(res.ids) == 2
        assert index.search("dense", "x", 3, query_vector=qvec).ids[0] == "D1:2"
        with pytest.raises(ValueError, match="unknown method"):
            index.search("nope", "x", 3, query_vector=qvec)
    finally:
        index.close()


def test_dense_without_embedder_needs_a_vector() -> None:
    index = FlatIndex.from_turns(corpus())
    with pytest.raises(ValueError, match="query vector"):
        index.search("dense", "kitten", 3)


def test_rrf_math() -> None:
    fused = rrf([["a", "b", "c"], ["b", "d"]], k_rrf=60)
    scores = dict(fused)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["d"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63)
    # b first (in both lists); a and d... a has 1/61 > d 1/62
    assert [d for d, _ in fused] == ["b", "a", "d", "c"]
    # exact ties: the better single rank wins, then first appearance
    assert [d for d, _ in rrf([["x", "y"], ["y", "x"]])] == ["x", "y"]


def test_dense_ties_are_deterministic() -> None:
    index = FlatIndex(["a", "b", "c"], ["one", "two", "three"], embeddings=np.eye(3, dtype=np.float32))
    assert index.dense(np.array([1, 1, 0], dtype=np.float32), 3) == [0, 1, 2]
