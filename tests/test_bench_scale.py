"""The scale bench end to end at a small size: files, fields, targets, CLI wiring."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

import pytest

from ariadnemem_core.bench.scale import SyntheticDialogue, run_scale
from ariadnemem_core.cli import main


def test_generator_is_deterministic_and_has_repeats_and_updates():
    a = [(t.speaker, t.text, t.timestamp) for t in islice(SyntheticDialogue(seed=3).turns(), 500)]
    b = [(t.speaker, t.text, t.timestamp) for t in islice(SyntheticDialogue(seed=3).turns(), 500)]
    assert a == b
    assert [ts for _, _, ts in a] == sorted(ts for _, _, ts in a)
    texts = [t for _, t, _ in a]
    assert len(set(texts)) < len(texts)  # restated facts
    assert any(" now." in t or t.startswith("I moved to") for t in texts)  # slot updates
    assert len({s for s, _, _ in a}) > 10


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("scale")
    return run_scale(out, entries=2000, seed=0, progress=False, questions=60), out


@pytest.mark.slow
def test_run_scale_writes_json_and_markdown(small_run):
    res, out = small_run
    data = json.loads((out / "scale.json").read_text(encoding="utf-8"))
    assert res["out"] == str(out) and res["entries"] == data["entries"]
    assert data["benchmark"] == "scale"
    assert data["entries_target"] == 2000 and data["entries"] >= 2000
    ing = data["ingest"]
    assert ing["turns"] > 0 and ing["turns_per_s"] > 0 and ing["entries"] == data["entries"]
    assert ing["gate_dropped"] > 0 and ing["merge"] > 0  # the generator's repeats reach gate and coarsening
    r = data["retrieve"]
    assert r["n"] == 60 and 0 < r["p50_ms"] <= r["p95_ms"] and r["includes_query_embedding"] is True
    assert data["peak_rss"]["ru_maxrss_mb"] > 0
    assert set(data["meets_targets"]) == {"p50", "rss"}
    assert data["targets"] == {"p50_ms": 100.0, "peak_rss_mb": 1024.0}
    assert [c["entries"] for c in data["curve"]] == sorted(c["entries"] for c in data["curve"])
    assert len(data["curve"]) == 4 and data["curve"][-1]["retrieve"]["n"] == 60
    assert 0 <= data["evidence_hit_rate"] <= 1
    assert data["embedder"].startswith("hash")
    md = (out / "scale.md").read_text(encoding="utf-8")
    assert md.startswith("# Scale") and "p50" in md and "peak RSS" in md
    assert ("met" in md) and f"{data['entries']:,}" in md


def test_cli_bench_scale(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["bench", "scale", "--entries", "150", "--out", str(out), "--seed", "1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "turns/s" in printed and "p50" in printed and "scale.md" in printed
    assert json.loads((out / "scale.json").read_text(encoding="utf-8"))["generator"]["seed"] == 1


def test_cli_bench_scale_rejects_bad_entries(tmp_path):
    with pytest.raises(SystemExit):
        main(["bench", "scale", "--entries", "0", "--out", str(tmp_path)])


def test_cli_bench_without_the_bench_extra_says_what_to_install(tmp_path, capsys, monkeypatch):
    """Without psutil (the ``bench`` extra) a bench stops before any work with an error
    naming the install command; ``bench chart`` and the memory commands do not need it."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "psutil" else real(name, *a))
    out = tmp_path / "scale"
    with pytest.raises(SystemExit) as info:
        main(["bench", "scale", "--entries", "150", "--out", str(out), "--quiet"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "psutil" in err and 'pip install "ariadnemem[bench]"' in err
    assert not out.exists()
