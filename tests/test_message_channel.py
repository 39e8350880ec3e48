"""The message view and the message floor: a question matched against whole messages as a
flat search over the log would match it, and what flat would show shown first
(Config.message_floor)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from ariadnemem_core import Config, ConfigError, Turn
from ariadnemem_core.models import Scope
from tests.conftest import BOTH_BACKENDS

#: The message view is part of the store contract: SQLite writes it, Postgres derives it.
pytestmark = BOTH_BACKENDS

T0 = datetime(2024, 3, 1, 9, tzinfo=UTC)
QUESTION = "alpha beta gamma delta"

# One message whose sentences each say one word of the question (only the message as a
# whole says them all), and a one-sentence decoy that says three of them.
EVIDENCE = "Alpha qqq came first. Beta rrr came next. Gamma sss was third. Delta ttt was last."
DECOY = "Alpha beta gamma zzz."


def _knobs(**extra) -> Config:
    return Config(**({"k_sem": 1, "k_sem_assistant": 0, "k_lex": 1, "message_context": 0,
                      "enable_bridges": False, "enable_fastpaths": False, "nameless_query_weight": 0.0,
                      "relevance_floor": 0.0} | extra))


def _fill(mem, user: str = "u") -> None:
    mem.add([Turn("Ann", EVIDENCE, T0, "ev"), Turn("Ann", DECOY, T0 + timedelta(days=3), "decoy"),
             Turn("Ann", "Unrelated words about lunch.", T0 + timedelta(days=5), "other")], user_id=user)
    mem.flush()


def _turns(graph) -> set[str]:
    return {t for f in graph.facts for t in f.source_turn_ids}


def test_a_message_that_matches_only_as_a_whole_is_drawn(make_memory) -> None:
    mem = make_memory("whole", _knobs(), hashing=True)
    _fill(mem)
    assert "ev" not in _turns(mem.retrieve(QUESTION, user_id="u", config=_knobs(message_floor=0.0)))
    graph = mem.retrieve(QUESTION, user_id="u", config=_knobs(message_floor=1.0))
    assert "ev" in _turns(graph)
    # Drawn through its sentence most similar to the question, scored as the message matched.
    ev = [f for f in graph.facts if "ev" in f.source_turn_ids]
    assert len(ev) == 1 and ev[0].score > 0


def test_another_users_message_is_never_drawn(make_memory) -> None:
    mem = make_memory("tenancy", _knobs(message_floor=1.0), hashing=True)
    _fill(mem, "someone-else")
    mem.add([Turn("Ann", "Unrelated words about lunch.", T0, "mine")], user_id="u")
    mem.flush()
    graph = mem.retrieve(QUESTION, user_id="u")
    assert _turns(graph) <= {"mine"}
    ids = {f.id for f in graph.facts}
    assert set(mem.storage.get_many(ids, user_id="u")) == ids  # every fact is u's


def _view(mem, user: str = "u") -> dict[str, tuple[list[str], np.ndarray]]:
    # The message view is the store's own index: read on the private store.
    turn_ids, entry_ids, mat = mem._store.message_index(Scope(user))
    return {t: (sorted(ids), mat[i]) for i, (t, ids) in enumerate(zip(turn_ids, entry_ids, strict=True))}


def test_the_view_written_at_commit_is_the_one_rebuilt_from_the_entries(make_memory) -> None:
    mem = make_memory("derive", _knobs(), hashing=True)
    _fill(mem)
    written = _view(mem)
    assert set(written) == {"ev", "decoy", "other"}
    report = mem.doctor()
    assert report["messages"] == 3
    rebuilt = _view(mem)
    assert set(rebuilt) == set(written)
    for turn_id, (ids, vec) in written.items():
        assert rebuilt[turn_id][0] == ids
        assert np.allclose(rebuilt[turn_id][1], vec, atol=1e-6)


def test_deleting_and_forgetting_take_the_message_view_along(make_memory) -> None:
    mem = make_memory("forget", _knobs(), hashing=True)
    _fill(mem)
    _fill(mem, "v")
    decoy = next(e for e in mem.entries(user_id="u") if "decoy" in e.source_turn_ids)
    mem.delete(decoy.id, user_id="u")
    assert "decoy" not in _view(mem)  # its words are gone from the message view too
    mem.forget("u")
    assert _view(mem) == {}
    assert set(_view(mem, "v")) == {"ev", "decoy", "other"}  # the other user keeps theirs


def test_deleting_one_sentence_keeps_the_message_of_the_others(make_memory) -> None:
    """The message of a turn whose other sentences remain is derived again from them: its
    words leave with the deleted sentence, the rest can still be found as a message."""
    mem = make_memory("sibling", _knobs(), hashing=True)
    _fill(mem)
    gamma = next(e for e in mem.entries(user_id="u") if "ev" in e.source_turn_ids and "Gamma" in e.text)
    before = _view(mem)["ev"][0]
    mem.delete(gamma.id, user_id="u")
    after = _view(mem)["ev"][0]
    assert after == sorted(set(before) - {gamma.id}) and after
    turns = {t for t, _ in mem._store.message_lexical(Scope("u"), "alpha delta", 5)}
    assert "ev" in turns
    assert "ev" not in {t for t, _ in mem._store.message_lexical(Scope("u"), "sss", 5)}
    report = mem.doctor()
    assert _view(mem)["ev"][0] == after and report["messages"] == 3  # what a rebuild derives


def test_an_import_carries_the_message_view(make_memory, tmp_path) -> None:
    src = make_memory("src", _knobs(), hashing=True)
    _fill(src)
    src.export(tmp_path / "mem.jsonl")
    dst = make_memory("dst", _knobs(), hashing=True)
    dst.import_(tmp_path / "mem.jsonl")
    a, b = _view(src), _view(dst)
    assert set(a) == set(b)
    assert all(np.allclose(a[t][1], b[t][1], atol=1e-6) for t in a)
    cfg = _knobs(message_floor=1.0)
    assert src.retrieve(QUESTION, user_id="u", config=cfg).to_text() == \
        dst.retrieve(QUESTION, user_id="u", config=cfg).to_text()


def test_message_floor_is_validated() -> None:
    with pytest.raises(ConfigError, match="message_floor"):
        Config(message_floor=-0.1)
    with pytest.raises(ConfigError, match="message_floor"):
        Config(message_floor=1.5)
    assert Config(message_floor=0.0).message_floor == 0.0


def test_the_message_floor_shows_what_a_flat_search_would_show_first(make_memory) -> None:
    from ariadnemem_core.reasoning import read_question
    from ariadnemem_core.reasoning.channels import messages

    topics = ["the garden", "my bike", "the new job", "our trip to Lisbon", "the piano", "my sister's wedding"]
    turns = [Turn("Ann" if i % 2 else "Bo", f"Talking about {topics[i % 6]} again, part {i}: it went fine.",
                  T0 + timedelta(hours=i), f"t{i}") for i in range(36)]
    cfg = Config(token_budget=120, message_floor=1.0)
    mem = make_memory("floor", cfg, hashing=True)
    mem.add(turns, user_id="u")
    mem.flush()
    question = "How did the trip to Lisbon go?"
    # One read-path stage on its own: it takes the (private) store.
    q = read_question(question, Scope("u"), mem._store.known_persons("u"), mem.embedder, cfg)
    hits = messages(mem._store, q, cfg, {})
    pinned = sorted((h for h in hits if h.pin is not None), key=lambda h: h.pin)
    assert pinned and [h.pin for h in pinned] == list(range(len(pinned)))
    shown = {f.id for f in mem.retrieve(question, user_id="u").facts}
    assert {h.entry_id for h in pinned} <= shown  # the floor is shown, whatever the graph adds
    assert not any(h.pin is not None for h in messages(mem._store, q, cfg.replace(message_floor=0.0), {}))
