"""The gate drops a near-repeat only when what it says is already stored, and the repeat's
turn still counts as said: it joins the provenance of the memory it repeats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ariadnemem_core import Config, Turn

T0 = datetime(2024, 6, 1, 9, tzinfo=UTC)


def _turn(text: str, minutes: float, turn_id: str, speaker: str = "user") -> Turn:
    return Turn(speaker, text, T0 + timedelta(minutes=minutes), turn_id)


def _covering(mem, turn_id: str, user: str = "u") -> list[str]:
    return [e.text for e in mem.entries(user_id=user) if turn_id in e.source_turn_ids]


def test_a_repeat_in_the_same_window_joins_the_provenance_of_what_it_repeats(make_memory) -> None:
    mem = make_memory("window", Config(), hashing=True)
    mem.add([_turn("I am vegetarian and I avoid dairy.", 0, "t1"),
             _turn("I am vegetarian and I avoid dairy.", 5, "t2")], user_id="u")
    mem.flush()
    stats = mem.stats("u")
    assert stats["gate_dropped"] == 1  # no second memory of the same thing
    assert _covering(mem, "t2") and _covering(mem, "t2") == _covering(mem, "t1")


def test_a_repeat_of_a_stored_memory_joins_its_provenance(make_memory) -> None:
    mem = make_memory("stored", Config(), hashing=True)
    mem.add([_turn("My daughter Mia starts school in September.", 0, "a")], user_id="u")
    mem.flush()
    mem.add([_turn("My daughter Mia starts school in September.", 20, "b")], user_id="u")
    mem.flush()
    entries = mem.entries(user_id="u")
    assert len(entries) == 1 and entries[0].source_turn_ids == ["a", "b"]
    assert any("b" in f.source_turn_ids for f in mem.retrieve("When does Mia start school?", user_id="u").facts)


def test_a_message_that_repeats_one_thing_and_adds_another_is_kept(make_memory) -> None:
    # As a whole the second message is close to the first, and its sentences are each near
    # one of the first's (the last one rides with "I cook at home"), but it says a number and
    # words nothing stored says.
    mem = make_memory("adds", Config(lambda_red=0.8))
    mem.add([_turn("I am vegetarian and I avoid dairy. I cook at home most days.", 0, "t1"),
             _turn("I am vegetarian and I avoid dairy. I cook at home most days. Also my budget is $40.",
                   5, "t2")], user_id="u")
    mem.flush()
    assert mem.stats("u")["gate_dropped"] == 0
    assert any("$40" in text for text in _covering(mem, "t2"))


def test_another_users_memory_never_takes_a_repeat(make_memory) -> None:
    mem = make_memory("tenancy", Config(), hashing=True)
    mem.add([_turn("I am vegetarian and I avoid dairy.", 0, "x")], user_id="other")
    mem.flush()
    mem.add([_turn("I am vegetarian and I avoid dairy.", 5, "y")], user_id="u")
    mem.flush()
    assert _covering(mem, "y") and all("y" not in e.source_turn_ids for e in mem.entries(user_id="other"))
