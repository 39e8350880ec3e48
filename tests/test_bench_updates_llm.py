"""The update bench with an LLM: the suites read with the model's extraction and answers,
next to the rules on the same dialogues. The model is faked at the HTTP boundary."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fake_openai_server import FakeOpenAIServer, fake_client

from ariadnemem_core.bench import updates
from ariadnemem_core.bench.updates import (
    LLM_VARIANTS,
    load_suite,
    rescore_llm_result,
    run_llm_update_suite,
    run_update_suite,
)

VALIDATION = load_suite(updates.SUITES["validation"])
#: One change (Todoist -> Things 3, sharing no word the rules could use) and one look-alike.
CHANGE = next(d for d in VALIDATION if d["id"] == "v01-task-app")
LOOKALIKE = next(d for d in VALIDATION if d["id"] == "vn01-budget-vs-flights")
TURN = re.compile(r"^\[(T\d+)\] .*?(user|assistant): \"(.*)\"$", re.M)


def _model(dialogues: list[dict[str, Any]]) -> Any:
    """A scripted model: extraction windows get one entry per turn, the user's statements of
    the task app carrying a normalized state; questions get the dialogue's right answer."""
    answers = {d["question"]: d["latest"] for d in dialogues if d.get("question")}
    answers |= {d["question_original"]: d["original"] for d in dialogues if d.get("question_original")}

    def reply(body: dict[str, Any]) -> tuple[int, str]:
        user = "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")
        turns = TURN.findall(user)
        if not turns:
            question = next(q for q in answers if q in user)
            return 200, json.dumps({"answer": answers[question], "fact_ids": ["F1"]})
        entries = []
        for tid, speaker, text in turns:
            value = next((v for v in ("Things 3", "Todoist") if v in text), None)
            state = {"subject": "user", "attribute": "task app", "value": value} \
                if value and speaker == "user" else None
            entries.append({"text": text, "source_turn_ids": [tid], "state": state})
        return 200, json.dumps({"entries": entries})
    return reply


def test_the_llm_run_reads_the_same_dialogues_four_ways(server: FakeOpenAIServer, minilm: Any) -> None:
    dialogues = [CHANGE, LOOKALIKE]
    server.default = _model(dialogues)
    seen: list[tuple[int, int]] = []
    res = run_llm_update_suite(dialogues, fake_client(server), embedder=minilm,
                               on_progress=lambda r: seen.append((r["built"], r["answered"])))
    v = res["variants"]
    assert list(v) == list(LLM_VARIANTS)
    # the rules row is the offline bench on the same dialogues, and asks the model nothing
    offline = run_update_suite(dialogues, embedder=minilm)
    for key in ("linked", "false_links", "negatives_clean", "latest_answered", "original_answered",
                "negatives_answered"):
        assert v["rules"][key] == offline[key], key
    assert v["rules"]["llm_calls"] == 0
    assert v["LLM extraction + LLM answers"]["linked"] == 100.0  # the model's states link it
    assert v["LLM extraction + LLM answers"]["negatives_clean"] == 100.0
    for name in ("rules + LLM answers", "LLM extraction + LLM answers"):
        assert v[name]["latest_answered"] == v[name]["original_answered"] == 100.0
        assert v[name]["negatives_answered"] == 100.0
    # every request is counted: 2 extraction windows, 3 questions per LLM-answering variant
    assert res["extraction"]["llm"]["llm_calls"] == 2 and res["extraction"]["rules"]["llm_calls"] == 0
    assert v["LLM extraction + LLM answers"]["llm_calls"] == 2 + 3
    assert v["rules + LLM answers"]["llm_calls"] == 3
    assert server.count == 2 + 3 + 3
    assert res["extraction"]["llm"]["extractor_stats"]["llm_ok"] == 2
    # per-dialogue outcomes: what each variant was asked and answered
    asked = res["dialogues"]["v01-task-app"]["answers"]["rules + LLM answers"]["asked"]
    assert [a["answer"] for a in asked] == ["Things 3", "Todoist"]
    assert res["dialogues"]["v01-task-app"]["links"]["llm"]["linked"] is True
    states = [e["state"] for e in res["dialogues"]["v01-task-app"]["llm_entries"] if e["state"]]
    assert [(s["value"], s["attribute"]) for s in states] == [("Todoist", "task app"), ("Things 3", "task app")]
    assert "v01-task-app" not in v["LLM extraction + LLM answers"]["failures"]
    # partial figures after every dialogue: built first, then answered
    assert seen == [(1, 0), (2, 0), (2, 1), (2, 2)] and res["complete"]


def test_failing_llm_answers_fall_back_and_are_counted(server: FakeOpenAIServer, minilm: Any) -> None:
    model = _model([CHANGE])

    def broken(body: dict[str, Any]) -> tuple[int, Any]:
        user = "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")
        if "originally" in user:
            return 200, "I am not sure {"  # garbled: no JSON at all
        if not TURN.search(user):
            return 500, {"error": {"message": "internal server error"}}
        return model(body)

    server.default = broken
    res = run_llm_update_suite([CHANGE], fake_client(server, max_retries=0), embedder=minilm)
    v = res["variants"]
    for name in ("rules + LLM answers", "LLM extraction + LLM answers"):
        assert v[name]["answer_fallbacks"] == 1 and v[name]["unparsed_answers"] == 1
    assert v["rules"]["answer_fallbacks"] == 0
    # the failed call fell back to the extractive answer of the same memory; the garbled
    # reply is what the library shows (its prose), and neither is counted right
    by = res["dialogues"]["v01-task-app"]["answers"]
    assert by["rules + LLM answers"]["asked"][0] == by["rules"]["asked"][0]
    assert by["LLM extraction + LLM answers"]["asked"][1]["answer"] == "I am not sure {"
    assert v["LLM extraction + LLM answers"]["original_answered"] == 0.0


def test_a_garbled_extraction_falls_back_to_the_rules(server: FakeOpenAIServer, minilm: Any) -> None:
    server.queue("invalid", "invalid")  # the window and its retry
    server.default = _model([CHANGE])
    res = run_llm_update_suite([CHANGE], fake_client(server), embedder=minilm)
    stats = res["extraction"]["llm"]["extractor_stats"]
    assert stats["fallback_windows"] == 1 and stats["failed_calls"] + stats["invalid_replies"] == 2
    # both attempts were counted as calls of the LLM extraction, and the dialogue still scored
    assert res["extraction"]["llm"]["llm_calls"] == 2
    assert res["extraction"]["llm"]["n_updates"] == 1 and res["complete"]


def test_the_command_writes_each_suite_and_keeps_the_others(server: FakeOpenAIServer, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    heldout = load_suite(updates.SUITES["held-out"])
    server.default = _model([*VALIDATION[:2], *heldout[::20]])
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit, match="--llm needs an LLM"):
        updates.main(["--llm", "--suites", "validation", "--limit", "1", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="unknown nope"):
        updates.main(["--llm", "--suites", "nope"])
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("ARIADNEMEM_LLM_MODEL", "fake-model")
    updates.main(["--llm", "--suites", "validation", "--limit", "2", "--out", str(tmp_path)])
    updates.main(["--llm", "--suites", "held-out", "--every", "20", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "results.json").read_text())
    assert list(data) == ["held-out", "validation"]  # the earlier suite is kept
    assert data["validation"]["n_dialogues"] == 2 and data["validation"]["complete"]
    assert data["validation"]["model"] == "fake-model"
    assert data["held-out"]["variants"]["rules + LLM answers"]["llm_calls"] >= 1
    assert list(data["held-out"]["dialogues"]) == [heldout[0]["id"], heldout[20]["id"]]  # a change, a look-alike
    md = (tmp_path / "results.md").read_text()
    assert "## validation: 2 changes, 0 look-alikes" in md and "| LLM extraction + LLM answers |" in md
    assert "--suites held-out --every 20" in md


def test_recorded_answers_are_scored_again_without_the_model(server: FakeOpenAIServer, minilm: Any,
                                                             tmp_path: Path) -> None:
    server.default = _model([CHANGE, LOOKALIKE])
    res = run_llm_update_suite([CHANGE, LOOKALIKE], fake_client(server), embedder=minilm)
    calls = server.count
    recorded = copy.deepcopy(res)
    answers = recorded["dialogues"]
    answers["vn01-budget-vs-flights"]["answers"]["rules + LLM answers"]["asked"][0]["answer"] = "4000"  # "4,000"
    answers["v01-task-app"]["answers"]["rules + LLM answers"]["asked"][0]["answer"] = "Todoist"  # the old value
    again = rescore_llm_result(recorded, VALIDATION)
    v = again["variants"]["rules + LLM answers"]
    assert v["negatives_answered"] == 100.0 and v["latest_answered"] == 0.0
    assert v["failures"]["v01-task-app"] == ["answer: 'Todoist'"]  # linked, answered with the old value
    assert v["linked"] == res["variants"]["rules + LLM answers"]["linked"]  # links kept as recorded
    assert again["variants"]["LLM extraction + LLM answers"] == res["variants"]["LLM extraction + LLM answers"]
    assert server.count == calls  # no model was asked
    # the command: --rescore rewrites the recorded suite in --out
    (tmp_path / "results.json").write_text(json.dumps({"validation": recorded}))
    with pytest.raises(SystemExit, match="no recorded --llm run of held-out"):
        updates.main(["--rescore", "--suites", "held-out", "--out", str(tmp_path)])
    updates.main(["--rescore", "--suites", "validation", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["validation"]["variants"]["rules + LLM answers"]["latest_answered"] == 0.0
    assert "answers scored again by `python -m ariadnemem_core.bench.updates --rescore" in (
        tmp_path / "results.md").read_text()


def test_the_offline_command_answers_each_suite_with_and_without_coarsening(tmp_path: Path) -> None:
    """The offline table is followed by the same answers with no MERGE and no LINK: a change
    the rules link is answered with its latest value only when coarsening is on."""
    gym = next(i for i, d in enumerate(VALIDATION) if d["id"] == "v04-gym")
    updates.main(["--suites", "validation", "--every", str(gym), "--limit", "2", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "results.json").read_text())["validation"]
    # Todoist -> Things 3 is answered either way (the later statement says it changed); the
    # gym's new membership only through the link.
    assert data["latest_answered"] == 100.0 and data["coarsening_off"]["latest_answered"] == 50.0
    md = (tmp_path / "results.md").read_text()
    assert "| validation | 100.0 / 50.0 |" in md and 'Config().ablate("coarsening")' in md
