"""Read-your-writes: a turn ``add`` stored is found by the next read, before its window is
extracted, by this handle or by another host's handle on the same store, and never by
another user or another session's scoped reader."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from ariadnemem_core import Config, HashEmbedder, NotFoundError, Turn
from ariadnemem_core.models import Scope
from ariadnemem_core.synthesis import extractive_answer
from tests.conftest import BOTH_BACKENDS, turn

PORTO = "My sister Ana moved to Porto and works there as a nurse."
QUESTION = "Where does Ana live?"


def _texts(graph) -> list[str]:
    return [f.text for f in graph.facts]


@BOTH_BACKENDS
def test_a_turn_is_found_before_its_window_is_extracted(make_memory):
    mem = make_memory()
    mem.add([turn("Maya", "I bought a blue bike for the commute.", 0, "t1"),
             turn("Maya", PORTO, 5, "t2")], user_id="maya")
    assert mem.stats("maya")["entries"] == 0  # nothing extracted yet: the window is not full
    graph = mem.retrieve(QUESTION, user_id="maya")
    porto = [f for f in graph.facts if "Porto" in f.text]
    assert len(porto) == 1
    assert porto[0].role == "pending" and porto[0].id.startswith("pending:")
    assert porto[0].source_turn_ids == ["t2"] and porto[0].speaker == "Maya"
    assert "Porto" in extractive_answer(QUESTION, graph).text

    mem.flush()
    graph = mem.retrieve(QUESTION, user_id="maya")
    assert any("Porto" in t for t in _texts(graph))
    # Once extracted, the entries stand for the turn: no provisional copy beside them.
    assert all(f.role != "pending" for f in graph.facts)


@BOTH_BACKENDS
def test_another_hosts_pending_turn_is_read_and_no_other_scope_sees_it(make_memory):
    writer, reader = make_memory("shared"), make_memory("shared")
    writer.add([turn("Maya", PORTO, 0, "w1")], user_id="maya", session_id="s1")
    writer.add([turn("Bo", "My cousin Ana lives in Lyon.", 0, "b1")], user_id="bo")

    seen = _texts(reader.retrieve(QUESTION, user_id="maya"))
    assert any("Porto" in t for t in seen) and not any("Lyon" in t for t in seen)
    assert any("Lyon" in t for t in _texts(reader.retrieve(QUESTION, user_id="bo")))
    assert not any("Porto" in t for t in _texts(reader.retrieve(QUESTION, user_id="bo")))
    # A reader scoped to another session of the same user does not see it.
    assert not reader.retrieve(QUESTION, user_id="maya", session_id="s2").facts
    assert any("Porto" in t for t in _texts(reader.retrieve(QUESTION, user_id="maya", session_id="s1")))


def test_switched_off_reads_see_extracted_memories_only(make_memory):
    mem = make_memory(config=Config(pending_turns=0))
    mem.add([turn("Maya", PORTO, 0, "t1")], user_id="maya")
    assert not mem.retrieve(QUESTION, user_id="maya").facts
    mem.flush()
    assert any("Porto" in t for t in _texts(mem.retrieve(QUESTION, user_id="maya")))


@BOTH_BACKENDS
def test_only_the_latest_pending_turns_are_read(make_memory):
    """A backlog (an extractor that keeps failing) costs a read at most ``pending_turns``."""
    mem = make_memory(config=Config(pending_turns=2))
    mem.add([turn("Maya", PORTO, 0, "old"),
             turn("Maya", "I adopted a grey cat called Pixel.", 1, "mid"),
             turn("Maya", "My brother Leo plays the cello in Ghent.", 2, "new")], user_id="maya")
    assert not any("Porto" in t for t in _texts(mem.retrieve(QUESTION, user_id="maya")))
    assert any("cello" in t for t in _texts(mem.retrieve("What instrument does Leo play?", user_id="maya")))
    latest = mem._store.waiting(Scope("maya"), 2)
    assert [t.turn_id for _, _, t in latest] == ["mid", "new"]  # the latest, in arrival order


@BOTH_BACKENDS
def test_a_scoped_readers_turns_are_not_crowded_out_by_other_sessions(make_memory):
    """The limit counts the turns the reader may see: 40 newer turns of other sessions of
    the same user do not hide a session's own turn."""
    mem = make_memory()
    mem.add([turn("Maya", PORTO, 0, "s1-1")], user_id="maya", session_id="s1")
    for k in range(45):
        mem.add([turn("Maya", f"Note {k} about the garden shed.", 1 + k, f"o{k}")], user_id="maya", session_id=f"o{k}")
    assert any("Porto" in t for t in _texts(mem.retrieve(QUESTION, user_id="maya", session_id="s1")))
    assert [t.turn_id for _, _, t in mem._store.waiting(Scope("maya", None, "s1"), 40)] == ["s1-1"]


def test_a_pending_turn_seeds_no_expansion(make_memory):
    """A pending turn is not a stored entry: it has no next reply or message mates in the
    store, so the user's oldest memories never join as its "reply" or "rest of message"."""
    mem = make_memory()
    mem.add([turn("Ben", "I am allergic to penicillin.", 0, "1"),
             turn("Maya", "My bank PIN is 4412, keep it private.", 1, "2")], user_id="maya")
    mem.add([turn("Maya", f"Last spring I spent day {i} walking around Ghent with Leo.", 60 * 24 * 10 + i, f"x{i}")
             for i in range(40)], user_id="maya")
    mem.flush()
    alone = {f.id for f in mem.retrieve(QUESTION, user_id="maya").facts}
    for turn_id in ("n1", "2"):  # a fresh id, and one a caller's per-session numbering repeats
        mem.add([turn("Maya", PORTO, 60 * 24 * 400, turn_id)], user_id="maya")
        graph = mem.retrieve(QUESTION, user_id="maya")
        assert any("Porto" in f.text for f in graph.facts)
        assert not any("penicillin" in f.text or "PIN" in f.text for f in graph.facts), _texts(graph)
        assert {f.id for f in graph.facts if f.role != "pending"} <= alone
        mem.replace([], user_id="maya", turn_ids=[turn_id])


def test_a_turn_extracted_during_the_read_is_shown_once(make_memory, monkeypatch):
    """Another host may extract the window between the read of the pending turns and the
    draw of the entries: the turn is then shown once, as its entry."""
    mem = make_memory()
    mem.add([turn("Maya", PORTO, 0, "t1")], user_id="maya")
    waiting = mem._store.waiting
    monkeypatch.setattr(mem._store, "waiting", lambda scope, limit: [*waiting(scope, limit)] if mem.flush() is None
                        else [])
    facts = mem.retrieve(QUESTION, user_id="maya").facts
    porto = [f for f in facts if "Porto" in f.text]
    assert len(porto) == 1 and porto[0].role == "terminal"


def test_a_read_writes_nothing_and_skips_a_bad_row(make_memory):
    """A read does not quarantine a row that is not a valid turn (a write; a read-only
    store must still be readable): it skips it, and flush quarantines it as before."""
    mem = make_memory()
    mem.add([turn("Maya", PORTO, 0, "t1")], user_id="maya")
    db = sqlite3.connect(mem.path / "memory.sqlite3")
    db.execute("INSERT INTO pending_turns(user_id, agent_id, session_id, turn) VALUES ('maya', NULL, NULL, '{')")
    db.commit()
    db.close()
    before = mem.stats("maya")
    assert any("Porto" in t for t in _texts(mem.retrieve(QUESTION, user_id="maya")))
    assert mem.stats("maya") == before and before["quarantined"] == 0
    mem.flush()
    assert mem.stats("maya")["quarantined"] == 1


def test_a_long_turn_is_found_by_the_words_past_its_embedded_beginning(make_memory):
    filler = "We talked about the weather and the traffic on the way in. " * 200
    mem = make_memory()
    mem.add([turn("Maya", filler + "The door code of the storage unit is 4417. " + filler, 0, "t1")], user_id="maya")
    facts = mem.retrieve("What is the door code of the storage unit?", user_id="maya").facts
    assert any("4417" in f.text for f in facts)  # shown as a query-focused excerpt
    assert all(f.excerpt for f in facts if f.role == "pending")


def test_fast_paths_step_aside_only_for_a_pending_turn_that_matches(make_memory):
    mem = make_memory()
    mem.add([turn("Melanie", f"I went to the beach with the kids on day {i}.", 60 * 24 * i, f"b{i}") for i in range(3)]
            + [turn("Melanie", f"I painted a sunset on canvas number {i}.", 60 * 24 * (10 + i), f"p{i}")
               for i in range(5)], user_id="u")
    mem.flush()
    question = "How many times did Melanie go to the beach?"
    assert mem.retrieve(question, user_id="u").fast_path == "counter"
    mem.add([turn("Melanie", "Caroline said the support group meets on Tuesday.", 60 * 24 * 30, "x")], user_id="u")
    assert mem.retrieve(question, user_id="u").fast_path == "counter"  # unrelated: the fast path holds
    mem.add([turn("Melanie", "I went to the beach again with the kids today.", 60 * 24 * 31, "y")], user_id="u")
    graph = mem.retrieve(question, user_id="u")
    assert graph.fast_path is None and any(f.role == "pending" and "again" in f.text for f in graph.facts)


def test_a_pending_facts_id_is_explained_and_its_picture_drawn(make_memory, tmp_path):
    mem = make_memory()
    mem.add([turn("Maya", PORTO, 0, "t1")], user_id="maya")
    mem.add([turn("Bo", "Hello there, I like tea.", 0, "b1")], user_id="bo")
    graph = mem.retrieve(QUESTION, user_id="maya")
    (fact,) = graph.facts
    # The id says nothing of the store (not the store-wide arrival number) ...
    assert fact.id.startswith("pending:") and fact.id != "pending:1"
    # ... and a lookup by it says what it is.
    with pytest.raises(NotFoundError, match="waits for its window"):
        mem.get(fact.id, user_id="maya")
    for draw in (graph.to_png, graph.to_svg, graph.to_html):
        assert draw(tmp_path / f"g.{draw.__name__}").stat().st_size > 0
    assert "pending" in graph.to_mermaid()


def test_a_pending_courtesy_the_gate_would_drop_is_left_out(make_memory):
    """What extraction would drop as low information is not shown while pending either
    (with the gate off it is: the pending view alone would show it)."""
    for gate, shown in ((True, False), (False, True)):
        mem = make_memory(f"gate-{gate}", Config(enable_low_info_gate=gate))
        mem.add([turn("Ana", "Thanks so much!", 0, "t1"), turn("Maya", PORTO, 1, "t2")], user_id="maya")
        texts = _texts(mem.retrieve("Did Ana say thanks?", user_id="maya"))
        assert any("Porto" in t for t in texts)
        assert any("Thanks" in t for t in texts) is shown


def test_a_pending_turn_said_in_another_offset_is_dated_in_utc_like_the_entries(make_memory):
    mem = make_memory()
    mem.add([turn("Maya", "I bought a kayak last week.", 0, "k")], user_id="maya")
    mem.flush()
    mem.add([Turn("Maya", "I sold the kayak to Leo.", "2024-03-01T23:30:00-05:00", "s")], user_id="maya")
    (sold,) = [f for f in mem.retrieve("What happened to the kayak?", user_id="maya").facts if f.role == "pending"]
    assert sold.timestamp is not None and sold.timestamp.utcoffset() == timedelta(0)
    assert sold.timestamp == datetime(2024, 3, 2, 4, 30, tzinfo=UTC)


def test_a_pending_turn_is_embedded_once_however_often_it_is_read(make_memory):
    """An embedder that caches nothing (an API's) is not called again for the pending turns
    on every read: their vectors and the gate's verdict are kept."""

    class Counting(HashEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def embed(self, texts):  # type: ignore[no-untyped-def]
            self.seen += list(texts)
            return super().embed(texts)

    embedder = Counting()
    mem = make_memory(embedder=embedder)
    mem.add([turn("Ana", "Thanks so much!", 0, "t1"), turn("Maya", PORTO, 1, "t2")], user_id="maya")
    mem.retrieve(QUESTION, user_id="maya")
    assert any("Porto" in t for t in embedder.seen)
    embedder.seen.clear()
    mem.retrieve(QUESTION, user_id="maya")
    assert embedder.seen and not any("Porto" in t or "Thanks" in t for t in embedder.seen), embedder.seen
