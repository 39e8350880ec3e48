"""The benches end to end on one tiny synthetic LoCoMo-shaped conversation (offline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ariadnemem_core import MiniLMEmbedder
from ariadnemem_core.bench.ingest import run_ingest
from ariadnemem_core.bench.latency import run_latency
from ariadnemem_core.bench.runner import parse_ablations, run_locomo
from ariadnemem_core.cli import main

LINES = [
    ("Ann", "Hi Bo! I started a new job at the bakery on Main Street."),
    ("Bo", "Congrats Ann! My sister Lea just adopted a kitten named Miso."),
    ("Ann", "That's lovely. What color is Miso?"),
    ("Bo", "Miso is orange with white paws."),
    ("Ann", "I'm planning a trip to Lisbon in September."),
    ("Bo", "Lisbon is great, try the pastel de nata."),
    ("Ann", "I will! My brother Tom lives there."),
    ("Bo", "I ran a half marathon last weekend."),
    ("Ann", "Wow, what was your time?"),
    ("Bo", "One hour fifty minutes."),
    ("Ann", "I have been learning the guitar for three months."),
    ("Bo", "Which songs do you play?"),
    ("Ann", "Mostly Beatles songs, Let It Be is my favorite."),
    ("Bo", "I painted a sunset over the lake yesterday."),
    ("Ann", "I'd love to see the painting."),
]
SESSION2 = [
    ("Ann", "I'm back from Lisbon, Tom showed me the old town."),
    ("Bo", "How was the food?"),
    ("Ann", "The sardines were amazing."),
    ("Bo", "Lea's kitten Miso knocked over a vase."),
    ("Ann", "Oh no! Is Miso okay?"),
    ("Bo", "Yes, Miso is fine, the vase is not."),
    ("Ann", "The bakery promoted me to head baker."),
    ("Bo", "That's wonderful news, Ann."),
    ("Ann", "I'm playing guitar at an open mic on Friday."),
    ("Bo", "I'll come and cheer for you."),
    ("Ann", "Thanks Bo!"),
    ("Bo", "I'm training for a full marathon in spring."),
    ("Ann", "You'll do great."),
    ("Bo", "I sold my sunset painting at a fair."),
    ("Ann", "Congratulations on the sale!"),
]


def write_fixture(path: Path) -> Path:
    conv: dict = {"speaker_a": "Ann", "speaker_b": "Bo",
                  "session_1_date_time": "10:00 am on 1 August, 2023",
                  "session_2_date_time": "6:30 pm on 20 September, 2023",
                  "session_3_date_time": "6:30 pm on 21 September, 2023"}  # no session_3 list
    for n, lines in ((1, LINES), (2, SESSION2)):
        conv[f"session_{n}"] = [{"speaker": s, "dia_id": f"D{n}:{i + 1}", "text": t} for i, (s, t) in enumerate(lines)]
    conv["session_1"][13]["blip_caption"] = "a painting of a sunset over a lake"
    qa = [
        {"question": "Where does Ann work?", "answer": "SECRET-ANSWER-1", "evidence": ["D1:1", "D2:7"], "category": 1},
        {"question": "When did Ann go to Lisbon?", "answer": "SECRET-ANSWER-2", "evidence": ["D:1:5"], "category": 2},
        {"question": "What is the name of Lea's kitten?", "answer": "SECRET-ANSWER-3",
         "evidence": ["D1:2; D2:4"], "category": 4},
        {"question": "What instrument does Ann play?", "answer": "SECRET-ANSWER-4", "evidence": ["D"], "category": 3},
        {"question": "What did Bo's dog eat?", "adversarial_answer": "SECRET-ADV", "evidence": ["D2:4"], "category": 5},
    ]
    path.write_text(json.dumps([{"sample_id": "mini-1", "conversation": conv, "qa": qa}]))
    return path


def test_parse_ablations() -> None:
    assert parse_ablations("gating, bridges,gating") == ["gating", "bridges"]
    assert parse_ablations(None) == []
    with pytest.raises(ValueError, match="unknown ablation"):
        parse_ablations("gating,telepathy")


@pytest.mark.slow
def test_run_locomo_end_to_end(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    data = write_fixture(tmp_path / "mini.json")
    out = tmp_path / "out"
    res = run_locomo(data, out=out, ablate="bridges", embedder=minilm, progress=False)

    results = json.loads((out / "results.json").read_text())
    assert set(results) >= {"dataset", "systems", "config", "environment", "peak_rss", "elapsed_s"}
    assert results["dataset"]["turns"] == 30 and results["dataset"]["questions"] == 5
    assert results["dataset"]["questions_scored"] == 4
    rep = results["dataset"]["evidence_repair"]
    assert (rep["repaired_strings"], rep["split_strings"], rep["skipped_malformed"]) == (2, 1, 1)
    assert results["environment"]["cpu_count"] >= 1
    assert set(results["environment"]["versions"]) >= {"python", "ariadnemem", "chromadb", "torch",
                                                       "sentence-transformers"}
    names = list(results["systems"])
    assert names == ["AriadneMem", "AriadneMem w/o bridges", "flat-bm25@10", "flat-bm25@30", "flat-dense@10",
                     "flat-dense@30", "flat-hybrid@10", "flat-hybrid@30"]
    main_sys = results["systems"]["AriadneMem"]
    assert main_sys["config"]["enable_bridges"] is True
    assert results["systems"]["AriadneMem w/o bridges"]["config"]["enable_bridges"] is False
    ing = main_sys["ingest"]
    assert ing["turns"] == 30 and ing["entries"] > 0 and ing["turns_per_s"] > 0
    assert ing["merge"] + ing["link"] + ing["add"] > 0
    for sys_ in results["systems"].values():
        s = sys_["summary"]
        assert set(s["categories"]) == {"1", "2", "3", "4", "5"}
        for key in ("recall", "all_hit", "n", "n_scored", "tokens_mean", "latency_p50_ms", "latency_p95_ms",
                    "fast_path_rate"):
            assert key in s["overall"]
        assert s["categories"]["3"]["recall"] is None  # its only evidence id was unrecoverable
        assert s["all"]["n"] == 5
    # the flat top-30 covers the whole 30-turn conversation
    assert results["systems"]["flat-dense@30"]["summary"]["overall"]["recall"] == 1.0
    assert res["systems"]["AriadneMem"]["summary"]["all"]["tokens_mean"] > 0

    md = (out / "results.md").read_text()
    for row in names:
        assert f"| {row} |" in md
    assert "cat5" in md and "p50 ms" in md

    diag = [json.loads(line) for line in (out / "diagnostics.jsonl").read_text().splitlines()]
    assert len(diag) == 5
    assert {d["qid"] for d in diag} == {f"mini-1:q{i}" for i in range(5)}
    for d in diag:
        assert set(d["missed"]) == set(d["evidence"]) - set(d["covered"])
        assert set(d["lost_at"]) == set(d["missed"])
        assert all(v in ("gating", "budget", "retrieval") for v in d["lost_at"].values())
    raw = (out / "diagnostics.jsonl").read_text() + (out / "results.json").read_text() + md
    assert "SECRET" not in raw  # gold answers are never written


@pytest.mark.slow
def test_store_reuse(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    data = write_fixture(tmp_path / "mini.json")
    first = run_locomo(data, store=tmp_path / "store", embedder=minilm, progress=False, write=False, ks=(10,))
    again = run_locomo(data, store=tmp_path / "store", embedder=minilm, progress=False, write=False, ks=(10,))
    assert first["systems"]["AriadneMem"]["ingest"]["turns"] == 30
    assert again["systems"]["AriadneMem"]["ingest"]["reused_conversations"] == ["mini-1"]
    assert again["systems"]["AriadneMem"]["ingest"]["turns"] == 0
    assert (again["systems"]["AriadneMem"]["summary"]["overall"]["recall"]
            == first["systems"]["AriadneMem"]["summary"]["overall"]["recall"])


@pytest.mark.slow
def test_ingest_and_latency_benches(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    data = write_fixture(tmp_path / "mini.json")
    ing = run_ingest(data, tmp_path / "ing", embedder=minilm, progress=False)
    assert ing["ingest"]["turns"] == 30
    assert (tmp_path / "ing" / "ingest.json").is_file() and (tmp_path / "ing" / "ingest.md").is_file()
    assert "turns/s" in (tmp_path / "ing" / "ingest.md").read_text()

    lat = run_latency(data, None, tmp_path / "lat", embedder=minilm, progress=False)
    assert lat["dataset"]["questions"] == 5
    for system in ("ariadnemem", "flat_hybrid"):
        for mode in ("with_embedding", "without_embedding"):
            assert lat[system][mode]["p50_ms"] > 0
    assert lat["ratio_p50"] > 0
    assert lat["flat_hybrid_store"]["without_embedding"]["p50_ms"] > 0  # same flat method on the memory's store
    assert (tmp_path / "lat" / "latency.md").read_text().startswith("# Retrieval latency")


@pytest.mark.slow
def test_cli_locomo_and_usage_errors(tmp_path: Path, minilm: MiniLMEmbedder, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    data = write_fixture(tmp_path / "mini.json")
    out = tmp_path / "cli"
    assert main(["bench", "locomo", str(data), "--out", str(out), "--conversations", "mini-1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "| AriadneMem |" in printed and "results.md" in printed
    assert (out / "results.json").is_file()
    png = (out / "results.png").read_bytes()  # the recall chart
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") > 1000
    (out / "results.png").unlink()
    assert main(["bench", "chart", str(out / "results.json"), "--out", str(out / "again.png")]) == 0
    assert (out / "again.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (out / "junk.json").write_text('{"systems": 3}', encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["bench", "chart", str(out / "junk.json")])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["bench", "locomo", str(data), "--conversations", "nope", "--quiet"])
    with pytest.raises(SystemExit):
        main(["bench", "locomo", str(data), "--ablate", "telepathy", "--quiet"])
    with pytest.raises(SystemExit):
        main(["bench", "ingest", str(tmp_path / "missing.json")])


def test_cli_demo_passes_its_arguments_through(monkeypatch: pytest.MonkeyPatch) -> None:
    import ariadnemem_core.demo as demo

    seen: list[tuple] = []
    monkeypatch.setattr(demo, "run", lambda store=None, picture=None: seen.append((store, picture)) or 0)
    assert main(["demo", "--store", "x"]) == 0
    assert seen == [(Path("x"), None)]


def test_progress_lines_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from ariadnemem_core.bench.progress import progress_bar

    with progress_bar(True) as prog:
        task = prog.add_task("ingest", total=2)
        prog.update(task, description="ingest conv-1")
        prog.advance(task)
        prog.remove_task(task)
    err = capsys.readouterr().err
    assert "ingest (2)..." in err and "ingest conv-1" in err and "ingest: done in" in err


def test_diagnostic_names_the_stage_that_lost_each_evidence_turn() -> None:
    from types import SimpleNamespace

    from ariadnemem_core import Config
    from ariadnemem_core.bench.runner import _diagnostic

    q = SimpleNamespace(qid="c:q0", category=4, question="?", evidence=["D1:1", "D1:2", "D1:3", "D1:4"],
                        raw_evidence=["D1:1", "D1:2", "D1:3", "D1:4"])
    rec = SimpleNamespace(covered=["D1:1"], recall=0.25, tokens=10, latency_ms=1.0, bridges=0)
    graph = SimpleNamespace(facts=[], fast_path=None)
    conv = SimpleNamespace(sample_id="c")
    d = _diagnostic(conv, q, rec, graph, stored={"D1:1", "D1:2", "D1:3"}, pruned_turns={"D1:2"}, cfg=Config())
    assert d["lost_at"] == {"D1:2": "budget", "D1:3": "retrieval", "D1:4": "gating"}
    d = _diagnostic(conv, q, rec, graph, stored={"D1:1"}, pruned_turns=set(), cfg=Config().ablate("gating"))
    assert d["lost_at"]["D1:4"] == "extraction"
