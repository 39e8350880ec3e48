"""LoCoMo loading: timestamps, order, captions, evidence-id repair; the real dev file's counts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ariadnemem_core.bench.locomo import (
    load_conversation,
    load_locomo,
    parse_session_time,
    repair_evidence_id,
    sample_ids,
    validate_evidence,
)

DEV = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo-dev.json"


def tiny_sample() -> dict:
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            # session 2 appears before session 1 in the dict and session 10 sorts after 2
            "session_2_date_time": "9:05 am on 3 June, 2023",
            "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "Back from Rome!"}],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo!"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Look at my dog.", "img_url": ["http://x"],
                 "blip_caption": "a photo of a dog on a couch", "query": "dog"},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "So cute."},
            ],
            "session_10_date_time": "10:00 pm on 1 July, 2023",
            "session_10": [{"speaker": "Ann", "dia_id": "D10:1", "text": "Good night."}],
            # a date without a session list: ignored
            "session_11_date_time": "10:00 pm on 2 July, 2023",
        },
        "qa": [
            {"question": "What did Bo show?", "answer": "a dog", "evidence": ["D1:2"], "category": 4},
            {"question": "Where was Bo?", "answer": "Rome", "evidence": ["D:2:1", "D1:1; D1:3"], "category": 1},
            {"question": "Broken?", "answer": "x", "evidence": ["D", "D9:9"], "category": 2},
            {"question": "Adversarial?", "adversarial_answer": "y", "evidence": [" D10:1 "], "category": 5},
        ],
    }


def test_parse_session_time() -> None:
    assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56)
    assert parse_session_time("12:06 am on 11 November, 2022") == datetime(2022, 11, 11, 0, 6)
    assert parse_session_time("  9:05  am on 3 June, 2023 ") == datetime(2023, 6, 3, 9, 5)
    assert parse_session_time("not a date at all ???") is None


@pytest.mark.parametrize(("raw", "expected"), [
    ("D1:3", ["D1:3"]),
    (" D1:3 ", ["D1:3"]),
    ("D:11:26", ["D11:26"]),
    ("D8:6; D9:17", ["D8:6", "D9:17"]),
    ("D8:6,D9:17", ["D8:6", "D9:17"]),
    ("D8:6 D9:17", ["D8:6", "D9:17"]),
    ("D", None),
    ("", None),
    ("D8:6; nonsense", None),
])
def test_repair_evidence_id(raw: str, expected: list[str] | None) -> None:
    assert repair_evidence_id(raw) == expected


def test_validate_evidence_counts() -> None:
    valid = {"D1:3", "D11:26", "D8:6", "D9:17"}
    ids, c = validate_evidence(["D1:3", "D:11:26", "D8:6; D9:17", "D", " D1:3", "D4:4"], valid)
    assert ids == ["D1:3", "D11:26", "D8:6", "D9:17"]  # deduped, order kept
    assert c.malformed_strings == 4  # D:11:26, the split one, D, and the whitespace one
    assert c.repaired_strings == 3
    assert c.split_strings == 1
    assert c.skipped_malformed == 1
    assert c.skipped_nonexistent == 1  # D4:4


def test_loader_on_synthetic_conversation() -> None:
    conv = load_conversation(tiny_sample())
    assert conv.user_id == "conv-x"
    assert conv.speakers == ("Ann", "Bo")
    assert [t.turn_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D10:1"]
    stamps = [t.timestamp for t in conv.turns]
    assert stamps == sorted(stamps)
    assert stamps[0] == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert stamps[2] == datetime(2023, 5, 8, 13, 56, 10, tzinfo=UTC)  # + 5 s per turn index
    assert stamps[3] == datetime(2023, 6, 3, 9, 5, tzinfo=UTC)
    assert conv.turns[1].metadata == {"blip_caption": "a photo of a dog on a couch"}
    assert conv.turns[0].metadata == {}

    qs = conv.questions
    assert [q.qid for q in qs] == ["conv-x:q0", "conv-x:q1", "conv-x:q2", "conv-x:q3"]
    assert qs[1].evidence == ["D2:1", "D1:1", "D1:3"]
    assert qs[2].evidence == [] and not qs[2].scored
    assert qs[3].evidence == ["D10:1"] and qs[3].category == 5
    assert conv.repair.questions_without_evidence == 1
    assert conv.repair.skipped_malformed == 1
    assert conv.repair.skipped_nonexistent == 1


def test_load_locomo_filters_and_rejects_unknown_ids(tmp_path: Path) -> None:
    other = tiny_sample() | {"sample_id": "conv-y"}
    path = tmp_path / "mini.json"
    path.write_text(json.dumps([tiny_sample(), other]))
    assert sample_ids(path) == ["conv-x", "conv-y"]
    ds = load_locomo(path, ["conv-y"])
    assert [c.sample_id for c in ds.conversations] == ["conv-y"]
    assert ds.n_turns == 5 and ds.n_questions == 4
    assert load_locomo(path).repair.questions_without_evidence == 2
    with pytest.raises(ValueError, match="unknown conversation"):
        load_locomo(path, ["conv-z"])


@pytest.mark.skipif(not DEV.is_file(), reason="LoCoMo dev file not present")
def test_real_dev_file_repair_counts() -> None:
    ds = load_locomo(DEV)
    assert len(ds.conversations) == 7
    assert ds.n_turns == 4124
    assert ds.n_questions == 1347
    r = ds.repair
    assert r.malformed_strings == 3
    assert r.repaired_strings == 2  # "D:11:26" and the split "D8:6; D9:17"
    assert r.split_strings == 1
    assert r.skipped_malformed == 1  # "D"
    assert r.skipped_nonexistent == 2  # D10:19 (conv-42), D4:36 (conv-47)
    by_id = {c.sample_id: c for c in ds.conversations}
    split = [q for q in by_id["conv-26"].questions if "D8:6; D9:17" in q.raw_evidence]
    assert len(split) == 1 and {"D8:6", "D9:17"} <= set(split[0].evidence)
    fixed = [q for q in by_id["conv-43"].questions if "D:11:26" in q.raw_evidence]
    assert len(fixed) == 1 and "D11:26" in fixed[0].evidence
    # every kept id is a real dia_id and order inside a conversation is time order
    for c in ds.conversations:
        ids = c.turn_ids
        assert all(e in ids for q in c.questions for e in q.evidence)
        stamps = [t.timestamp for t in c.turns]
        assert stamps == sorted(stamps)
