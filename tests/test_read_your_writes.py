"""Read-your-writes: a turn ``add`` stored is found by the next read, before its window is
extracted, by this handle or by another host's handle on the same store, and never by
another user or another session's scoped reader."""

from __future__ import annotations

from ariadnemem_core import Config
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
    latest = mem._store.pending(user_id="maya", limit=2)
    assert [t.turn_id for _, _, t in latest] == ["mid", "new"]  # the latest, in arrival order
    assert [t.turn_id for _, _, t in mem._store.pending(Scope("maya"), limit=1)] == ["new"]
    assert [t.turn_id for _, _, t in mem._store.pending(Scope("maya"))] == ["old", "mid", "new"]


def test_a_pending_courtesy_the_gate_would_drop_is_left_out(make_memory):
    """What extraction would drop as low information is not shown while pending either
    (with the gate off it is: the pending view alone would show it)."""
    for gate, shown in ((True, False), (False, True)):
        mem = make_memory(f"gate-{gate}", Config(enable_low_info_gate=gate))
        mem.add([turn("Ana", "Thanks so much!", 0, "t1"), turn("Maya", PORTO, 1, "t2")], user_id="maya")
        texts = _texts(mem.retrieve("Did Ana say thanks?", user_id="maya"))
        assert any("Porto" in t for t in texts)
        assert any("Thanks" in t for t in texts) is shown
