"""End-to-end QA in the LoCoMo bench (``--qa``, ``--llm-extract``) against the scripted
OpenAI-compatible server: no network, a tiny LoCoMo-shaped file."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer, fake_client, prompt_text
from test_bench_runner import write_fixture

from ariadnemem_core import HashEmbedder, MiniLMEmbedder
from ariadnemem_core.bench.locomo import load_locomo
from ariadnemem_core.bench.qa_run import QASettings, flat_system_name, stratified_sample
from ariadnemem_core.bench.runner import run_locomo
from ariadnemem_core.cli import main

#: Every gold answer carries this marker, so a leak into any prompt is easy to spot.
GOLD = "GOLDMARK"
EXTRA_QA = [
    ("What did Bo sell at a fair?", "sunset painting", ["D2:14"], 1),
    ("Who lives in Lisbon?", "Tom", ["D1:7"], 1),
    ("When was Ann promoted?", "September 2023", ["D2:7"], 2),
    ("When did Bo run a half marathon?", "late July 2023", ["D1:8"], 2),
    ("What might Ann enjoy cooking?", "pastries", ["D1:1"], 3),
    ("What color is Miso?", "orange with white paws", ["D1:4"], 4),
    ("What food did Ann like in Lisbon?", "sardines", ["D2:3"], 4),
    ("What song does Ann like most?", "Let It Be", ["D1:13"], 4),
    ("What is Bo training for?", None, ["D2:12"], 4),  # no gold: never sampled
    ("What did Ann's cat paint?", None, ["D1:14"], 5),
]


def write_qa_fixture(path: Path) -> Path:
    """The runner tests' two-session conversation with more questions per category; every
    gold is marked with GOLD (the recall fixture's golds carry "SECRET")."""
    write_fixture(path)
    data = json.loads(path.read_text())
    for qa in data[0]["qa"]:
        for key in ("answer", "adversarial_answer"):
            if key in qa:
                qa[key] = f"{GOLD} {qa[key]}"
    for question, answer, evidence, cat in EXTRA_QA:
        qa = {"question": question, "evidence": evidence, "category": cat}
        if cat == 5:
            qa["adversarial_answer"] = f"{GOLD} adversarial"
        elif answer is not None:
            qa["answer"] = f"{GOLD} {answer}"
        data[0]["qa"].append(qa)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def server(server: FakeOpenAIServer) -> FakeOpenAIServer:
    server.answer = "not mentioned"
    return server


def assert_no_gold_in_prompts(server: FakeOpenAIServer) -> None:
    assert server.requests
    for body in server.requests:
        text = prompt_text(body)
        assert GOLD not in text and "SECRET" not in text


def test_stratified_sample_is_deterministic_and_per_category(tmp_path: Path) -> None:
    ds = load_locomo(write_qa_fixture(tmp_path / "qa.json"))
    cat_of = {q.qid: q.category for c in ds.conversations for q in c.questions}
    order = list(cat_of)

    one = stratified_sample(ds, 2, seed=0)
    assert one == stratified_sample(ds, 2, seed=0)  # deterministic
    assert Counter(cat_of[q] for q in one) == {1: 2, 2: 2, 3: 2, 4: 2}
    assert one == sorted(one, key=order.index)  # dataset order
    seeds = {tuple(stratified_sample(ds, 2, seed=s)) for s in range(6)}
    assert len(seeds) > 1  # the seed matters

    every = stratified_sample(ds, None)
    assert Counter(cat_of[q] for q in every) == {1: 3, 2: 3, 3: 2, 4: 4}  # cat 4: the answerless one is out
    assert "mini-1:q13" not in every  # "What is Bo training for?" has no gold
    assert stratified_sample(ds, 50) == every  # more than a category holds: all of it
    with_adv = stratified_sample(ds, 1, seed=3, categories=(1, 2, 3, 4, 5))
    assert Counter(cat_of[q] for q in with_adv) == {1: 1, 2: 1, 3: 1, 4: 1, 5: 1}


def test_run_locomo_qa_with_llm_extraction(tmp_path: Path, server: FakeOpenAIServer) -> None:
    data = write_qa_fixture(tmp_path / "qa.json")
    out = tmp_path / "out"
    settings = QASettings(per_category=2, seed=1, concurrency=2, include_adversarial=True)
    # The hashing embedder keeps this fast; the CLI test below runs the MiniLM path.
    res = run_locomo(data, out=out, embedder=HashEmbedder(), progress=False, ks=(10,), llm=fake_client(server),
                     qa=settings, llm_extract=True)

    qa = json.loads((out / "qa.json").read_text())
    flat = flat_system_name(30)
    assert list(qa["systems"]) == ["AriadneMem", flat]
    assert qa["model"] == "fake-model" and qa["base_url_host"].startswith("127.0.0.1:")
    n = qa["sample"]["n"]
    assert qa["sample"]["by_category"] == {"1": 2, "2": 2, "3": 2, "4": 2, "5": 2}
    assert qa["sample"]["qids"] == stratified_sample(load_locomo(data), 2, 1, (1, 2, 3, 4, 5))
    for name, s in qa["systems"].items():
        assert s["n"] == n and s["errors"] == 0
        assert set(s["categories"]) == {"1", "2", "3", "4", "5"}
        for block in (*s["categories"].values(), s["overall"]):
            for key in ("n", "f1", "f1_simple", "bleu1", "context_tokens_mean", "answer_latency_p50_s",
                        "answer_latency_p95_s", "retrieval_latency_p50_ms"):
                assert key in block, (name, key)
        assert s["overall"]["n"] == n - 2  # categories 1-4
        assert s["categories"]["5"]["f1"] == 1.0  # "not mentioned" abstains
        assert s["answer_llm"]["calls"] == n and s["answer_llm"]["prompt_tokens"] > 0
    # The flat block is the recall bench's hybrid top-30: here the whole 30-turn conversation.
    assert qa["systems"][flat]["overall"]["context_tokens_mean"] > qa["systems"]["AriadneMem"]["overall"][
        "context_tokens_mean"] > 0
    assert {(i["system"], i["qid"]) for i in qa["items"]} == {(s, q) for s in qa["systems"]
                                                               for q in qa["sample"]["qids"]}
    # Construction with the LLM extractor: 30 turns, windows of 20 split in parts of 10.
    cons = qa["construction"]["AriadneMem"]
    assert cons["turns"] == 30 and cons["llm_calls"] == 3 and cons["calls_per_100_turns"] == 10.0
    assert cons["prompt_tokens"] > 0 and cons["fallback_windows"] == 0
    assert res["systems"]["AriadneMem"]["extractor"] == "llm"
    assert server.count == 3 + 2 * n  # extraction calls + one answer per question per system

    # Gold answers reach neither a prompt nor a file.
    assert_no_gold_in_prompts(server)
    for name in ("qa.json", "qa.md", "results.json", "results.md", "diagnostics.jsonl"):
        assert GOLD not in (out / name).read_text()
    answer_prompts = [prompt_text(b) for b in server.requests if "QUESTION:" in prompt_text(b)]
    assert len(answer_prompts) == 2 * n
    assert sum("] Ann: Hi Bo!" in p for p in answer_prompts) == n  # the flat raw-turn block

    md = (out / "qa.md").read_text()
    assert "| AriadneMem |" in md and f"| {flat} |" in md and "cat5 adversarial F1" in md
    assert "## Construction (LLM extraction)" in md
    summary = json.loads((out / "results.json").read_text())
    assert summary["qa"]["file"] == "qa.json" and "items" not in summary["qa"]


def test_cli_qa_and_usage_error_without_llm(tmp_path: Path, minilm: MiniLMEmbedder, server: FakeOpenAIServer,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    data = write_qa_fixture(tmp_path / "qa.json")
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ARIADNEMEM_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    out = tmp_path / "cli"
    with pytest.raises(SystemExit) as exc:
        main(["bench", "locomo", str(data), "--qa", "--out", str(out), "--quiet"])
    assert exc.value.code == 2
    assert "needs an LLM" in capsys.readouterr().err
    assert not out.exists()  # refused before any work
    with pytest.raises(SystemExit):
        main(["bench", "locomo", str(data), "--llm-extract", "--out", str(out), "--quiet"])
    with pytest.raises(SystemExit):
        main(["bench", "locomo", str(data), "--qa", "--qa-per-category", "0", "--base-url", server.url, "--quiet"])
    assert server.count == 0

    assert main(["bench", "locomo", str(data), "--qa", "--qa-per-category", "1", "--base-url", server.url,
                 "--model", "fake-model", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "QA (fake-model" in printed and "| AriadneMem |" in printed and "| flat-hybrid@30 |" in printed
    assert "avg F1 (1-4)" in printed and "qa.json" in printed
    qa = json.loads((out / "qa.json").read_text())
    assert qa["sample"]["by_category"] == {"1": 1, "2": 1, "3": 1, "4": 1}
    assert qa["construction"] == {}
    assert server.count == 2 * 4
    assert_no_gold_in_prompts(server)
