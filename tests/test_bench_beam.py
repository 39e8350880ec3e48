"""The BEAM bench on a tiny synthetic BEAM-shaped conversation (offline, hashing embedder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ariadnemem_core import HashEmbedder
from ariadnemem_core.bench.beam import (
    BeamQuestion,
    fill_budget,
    load_beam,
    one_user,
    paired_difference,
    recall_intervals,
    run_beam,
    strip_marker,
    update_links,
)
from ariadnemem_core.bench.metrics import make_record
from ariadnemem_core.models import MAX_TEXT_CHARS, UpdateEdge

MESSAGES = [
    ("user", "I'm planning my budget tracker project; the first sprint ends on March 29. ->-> 1,1"),
    ("assistant", "## Plan\n\n- Set up Flask\n- Add login\n\n```python\napp = Flask(__name__)\n```\n->-> 1,1"),
    ("user", "Our team uses PostgreSQL for the database. ->-> 1,2"),
    ("assistant", "Great choice! PostgreSQL works well with SQLAlchemy. ->-> 1,2"),
    ("user", "Update: the first sprint now ends on April 2 instead. ->-> 2,1"),
    ("assistant", "Noted, the sprint end moved to April 2. ->-> 2,1"),
]


def _write(folder: Path, *, long_message: bool = False) -> Path:
    conv = folder / "100K" / "1"
    conv.mkdir(parents=True)
    msgs = []
    for i, (role, text) in enumerate(MESSAGES):
        m = {"role": role, "id": i, "content": text}
        if i in (0, 4):
            m["time_anchor"] = "March-15-2024" if i == 0 else "April-01-2024"
        msgs.append(m)
    if long_message:
        msgs.append({"role": "user", "id": 6, "content": "log line. " * (MAX_TEXT_CHARS // 10 + 50)})
    chat = [{"batch_number": 1, "time_anchor": None, "turns": [msgs[:4]]},
            {"batch_number": 2, "time_anchor": None, "turns": [msgs[4:]]}]
    (conv / "chat.json").write_text(json.dumps(chat), encoding="utf-8")
    questions = {
        "information_extraction": [{"question": "Which database does the team use?", "source_chat_ids": [2, 99]}],
        "knowledge_update": [{"question": "When does the first sprint end?",
                              "source_chat_ids": {"original_info": [0], "updated_info": [4]}}],
        "abstention": [{"question": "What is my cat's name?", "source_chat_ids": None}],
    }
    (conv / "probing_questions.json").write_text(json.dumps(questions), encoding="utf-8")
    return folder


def test_loader_strips_markers_dates_messages_and_counts_bad_ids(tmp_path: Path) -> None:
    [conv] = load_beam(_write(tmp_path, long_message=True))
    assert [t.turn_id for t in conv.turns] == [str(i) for i in range(7)]
    assert conv.turns[0].text.endswith("March 29.")
    assert "->->" not in conv.turns[1].text
    assert conv.turns[0].timestamp is not None and conv.turns[0].timestamp.month == 3
    assert conv.turns[3].timestamp > conv.turns[2].timestamp  # order kept inside a batch
    assert conv.turns[4].timestamp.month == 4  # a new anchor
    assert len(conv.turns[6].text) == MAX_TEXT_CHARS and conv.cut_messages[0][0] == "6"
    ie, ku, ab = conv.questions
    assert ie.evidence == ["2"] and conv.skipped_ids == 1  # id 99 does not exist
    assert ku.evidence == ["0", "4"] and ku.updated == ["4"]
    assert ab.evidence == []


def test_strip_marker_and_greedy_fill() -> None:
    assert strip_marker("Hello there ->-> 3,12") == "Hello there"
    assert strip_marker("a -> b") == "a -> b"
    # rank order 0, 1, 2: 1 does not fit after 0, 2 still does
    assert fill_budget([0, 1, 2], [300, 400, 150], 500) == [0, 2]


def test_run_beam_writes_results_with_targets_and_diagnostics(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = run_beam(_write(tmp_path / "data"), out_dir=out, embedder=HashEmbedder(), progress=False)
    for name in ("results.json", "results.md", "questions.jsonl", "diagnostics.jsonl", "results.png"):
        assert (out / name).is_file()
    systems = res["systems"]
    assert set(systems) == {"AriadneMem", "flat-dense@500", "flat-dense@1500", "flat-hybrid@500",
                            "flat-hybrid@1500"}
    ours = systems["AriadneMem"]
    assert ours["summary"]["overall"]["n"] == 2  # the abstention question has no evidence
    assert ours["summary"]["tokens_max"] <= 500
    assert ours["ingest"]["messages"] == 6 and ours["ingest"]["ingest_over_embed_once"] > 0
    assert ours["latency"]["warm_p50_ms"] is not None
    flat = systems["flat-hybrid@500"]["summary"]
    assert flat["tokens_max"] <= 500 and flat["overall"]["recall"] is not None
    md = (out / "results.md").read_text(encoding="utf-8")
    assert "| AriadneMem |" in md
    # Intervals for every system, and the memory minus flat hybrid@500 on the same questions.
    assert set(res["intervals"]) == set(systems) and res["intervals"]["AriadneMem"]["overall"] is not None
    assert res["paired"]["AriadneMem"]["vs"] == "flat-hybrid@500"
    assert "| AriadneMem - flat-hybrid@500 |" in md and "bootstrap 95% intervals" in md
    links = ours["update_links"]
    assert links["named_updates"] == 1 and links["edges"] >= links["on_named_updates"]
    assert f"Update links: {links['edges']} edges" in md


def _rec(qid: str, cat: str, recall: float):
    rec = make_record(qid, 0, ["a", "b"], ["a", "b"][: round(2 * recall)], 10, 1.0)
    rec.extra["category"] = cat
    return rec


def test_intervals_and_paired_difference_read_per_question() -> None:
    ours = [_rec(f"q{i}", "x" if i < 10 else "y", 1.0 if i % 2 else 0.5) for i in range(20)]
    flat = [_rec(f"q{i}", "x" if i < 10 else "y", 0.5) for i in range(20)]
    ci = recall_intervals(ours)
    assert set(ci) == {"x", "y", "overall"}
    low, high = ci["overall"]
    assert 0.5 <= low < 0.75 < high <= 1.0  # the mean (0.75) inside, not a point
    paired = paired_difference(ours, flat)
    assert paired["diff"]["overall"] == 0.25
    assert paired["ci"]["overall"][0] > 0  # ahead on the same questions beyond the interval
    same = paired_difference(flat, flat)
    assert same["diff"]["overall"] == 0 and same["ci"]["overall"] == [0.0, 0.0]


def test_unknown_conversation_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown conversations"):
        load_beam(_write(tmp_path), ["7"])


def test_update_links_count_only_the_named_change_old_to_new() -> None:
    """A link from the earlier evidence message to the updated one is a named update; a
    link the other way, one inside a message, or one to another message is not."""
    ku = BeamQuestion("q1", "knowledge_update", "When does the sprint end?", ["0", "4"], updated=["4"])
    other = BeamQuestion("q2", "information_extraction", "Which database?", ["2"])
    turns_of = {"a": ["0"], "b": ["4"], "c": ["2"], "d": ["0", "4"]}
    edges = [UpdateEdge("a", "b"), UpdateEdge("b", "a"), UpdateEdge("c", "b"), UpdateEdge("d", "b"),
             UpdateEdge("a", "b", kind="mention")]
    assert update_links([ku, other], edges, turns_of) == {
        "edges": 4, "on_named_updates": 1, "named_updates": 1, "named_updates_linked": 1}
    assert update_links([ku], edges[1:4], turns_of)["named_updates_linked"] == 0
    assert update_links([other], edges, turns_of)["named_updates"] == 0
    assert "across_conversations" not in update_links([ku], edges, turns_of)


def test_a_link_between_two_conversations_of_one_log_is_counted_false() -> None:
    turns_of = {"a": ["1:0"], "b": ["1:4"], "c": ["2:4"], "d": ["1:3", "2:5"]}
    edges = [UpdateEdge("a", "b"), UpdateEdge("a", "c"), UpdateEdge("c", "a"), UpdateEdge("a", "d")]
    links = update_links([], edges, turns_of, merged=True)
    assert links["edges"] == 4 and links["across_conversations"] == 2  # a->c and c->a; d shares conversation 1


def test_one_user_asks_every_question_of_all_conversations(tmp_path: Path) -> None:
    data = _write(tmp_path / "data")
    second = data / "100K" / "2"
    second.mkdir()
    for name in ("chat.json", "probing_questions.json"):
        (second / name).write_text((data / "100K" / "1" / name).read_text(encoding="utf-8"), encoding="utf-8")
    merged = one_user(load_beam(data))
    assert merged.conv_id == "1+2" and merged.user_id == "beam-1+2"
    # Same message ids in both conversations: prefixed, all kept, evidence following them.
    ids = [t.turn_id for t in merged.turns]
    assert len(ids) == len(set(ids)) == 12 and ids[0] == "1:0" and ids[6] == "2:0"
    ku = [q for q in merged.questions if q.category == "knowledge_update"]
    assert [q.evidence for q in ku] == [["1:0", "1:4"], ["2:0", "2:4"]]
    assert [q.updated for q in ku] == [["1:4"], ["2:4"]]
    assert merged.skipped_ids == 2  # id 99, once per conversation

    out = tmp_path / "out"
    res = run_beam(data, out_dir=out, embedder=HashEmbedder(), progress=False, as_one_user=True)
    assert res["dataset"]["conversations"] == ["1+2"] and res["dataset"]["one_user"] is True
    ours = res["systems"]["AriadneMem"]
    assert ours["ingest"]["messages"] == 12 and ours["summary"]["overall"]["n"] == 4
    assert ours["update_links"]["named_updates"] == 2
    across = ours["update_links"]["across_conversations"]
    assert 0 <= across <= ours["update_links"]["edges"]
    assert f"{across} join two of the conversations" in (out / "results.md").read_text(encoding="utf-8")
    # Each question's recall is read on its own conversation's (prefixed) ids.
    assert ours["summary"]["overall"]["recall"] > 0
    assert (out / "results.md").read_text(encoding="utf-8").startswith(
        "# BEAM evidence recall\n\nConversations 1, 2 as one user's log, 12 messages, 6 questions")
