"""The gate drops a near-repeat only when what it says is already stored, and the repeat's
turn still counts as said: it joins the provenance of the memory it repeats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ariadnemem_core import Config, Turn
from ariadnemem_core.text import says_nothing_new

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


# A cosine above 0.93 between each pair (MiniLM), and the same keywords: what tells them
# apart is a negation, an order, a letter or a sign, which the "nothing new" test must read.
DIFFERENT_BUT_CLOSE = [
    ("My landlord lets me keep a cat in the flat.", "My landlord never lets me keep a cat in the flat.", "never"),
    ("Pick me up before the concert on Saturday.", "Pick me up after the concert on Saturday.", "after"),
    ("The train to Leeds leaves from platform A.", "The train to Leeds leaves from platform D.", "platform D"),
    ("Transfer $300 from my savings to my current account.",
     "Transfer $300 from my current account to my savings.", "current account to"),
    ("Maria owes Tom $20 for lunch.", "Tom owes Maria $20 for lunch.", "Tom owes"),
    ("The forecast says 5 degrees tomorrow.", "The forecast says -5 degrees tomorrow.", "-5"),
    # "my day was good" / "my donation was good": only a vowel sign differs ("दिन" / "दान")
    ("मेरा दिन अच्छा था।", "मेरा दान अच्छा था।", "दान"),
]


@pytest.mark.parametrize(("first", "second", "marker"), DIFFERENT_BUT_CLOSE,
                         ids=["negation", "before-after", "letter", "direction", "who-owes", "sign", "vowel-sign"])
def test_a_close_message_that_says_something_else_is_kept(make_memory, first, second, marker) -> None:
    mem = make_memory("close", Config())
    mem.add([_turn(first, 0, "t1"), _turn(second, 5, "t2")], user_id="u")
    mem.flush()
    assert mem.stats("u")["gate_dropped"] == 0
    # Kept as its own memory, not merged into the first one's text either.
    assert any(marker in text for text in _covering(mem, "t2")), _covering(mem, "t2")


def test_a_merge_never_drops_a_negation(make_memory) -> None:
    # With the gate off, coarsening alone decides: a cosine above 0.85 and the same keywords
    # would MERGE the two and keep only the first text.
    mem = make_memory("merge", Config(enable_gating=False))
    mem.add([_turn(DIFFERENT_BUT_CLOSE[0][0], 0, "t1"), _turn(DIFFERENT_BUT_CLOSE[0][1], 5, "t2")], user_id="u")
    mem.flush()
    assert mem.stats("u")["merge"] == 0
    assert any("never" in text for text in _covering(mem, "t2"))


def test_a_true_repeat_in_other_words_order_aside_is_still_dropped(make_memory) -> None:
    # Fewer words, same order: nothing new (and "the" changes nothing).
    mem = make_memory("fewer", Config())
    mem.add([_turn("I swim at the lake every Sunday morning with my sister.", 0, "t1"),
             _turn("I swim at the lake every Sunday morning.", 5, "t2")], user_id="u")
    mem.flush()
    stats = mem.stats("u")
    assert stats["gate_dropped"] + stats["merge"] == 1  # one memory of it, by the gate or a MERGE
    assert len(mem.entries(user_id="u")) == 1 and _covering(mem, "t2") == _covering(mem, "t1")


@pytest.mark.parametrize(("new", "old", "expected"), [
    ("I swim at the lake.", "I swim at the lake every day.", True),
    ("I swim at a lake.", "I swim at the lake.", True),  # articles say nothing
    ("I can't swim.", "I cannot swim.", False),  # "ca not" against "cannot": kept, never lost
    ("I do not swim.", "I do swim.", False),  # adds a negation
    ("I swim.", "I never swim.", False),  # leaves one out
    ("Gate 4B.", "Gate 4C.", False),
    ("I chose option A.", "I chose option B.", False),  # "A" is a letter here, not an article
    ("Costs €40.", "Costs $40.", False),
    ("It is 40%.", "It is 40.", False),
    ("Мы едем в Москву.", "Мы едем в Казань.", False),
    ("The verdict: 👍", "The verdict: 👎", False),
    ("मेरा दान अच्छा था।", "मेरा दिन अच्छा था।", False),  # a vowel sign is part of its word
    ("தமிழ் பேசுவேன்.", "தமிழ் பேசுவேன்.", True),
    ("I love it ❤️", "I love it ❤", True),  # an emoji's variation selector is no word
    ("Approved 👍🏿", "Approved 👍🏻", False),  # a skin tone is part of its sign
    ("The flag was 🇺🇦", "The flag was 🇺🇸🇦🇹", False),  # a flag is one sign, not two letters
    ("My favourite is 🩷", "My favourite is 💙", False),  # an emoji newer than the interpreter's data
    ("Ich komme zur Party.", "Ich komme nicht zur Party.", False),  # negations of other languages
    ("Je viens demain.", "Je ne viens pas demain.", False),
    ("मैं आऊँगा।", "मैं नहीं आऊँगा।", False),
])
def test_says_nothing_new(new: str, old: str, expected: bool) -> None:
    assert says_nothing_new(new, old) is expected


def test_a_dash_is_punctuation_and_a_sign_before_a_number_is_its_sign() -> None:
    from ariadnemem_core.text import said_tokens

    assert said_tokens("Lunch - at noon, -12 degrees") == said_tokens("Lunch at noon -12 degrees")
    assert "-12" in said_tokens("Lunch - at noon, -12 degrees")
