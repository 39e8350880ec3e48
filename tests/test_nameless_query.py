"""A question naming a person also searches without the name (Config.nameless_query_weight)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ariadnemem_core import Config, ConfigError, Turn
from ariadnemem_core.models import Scope
from ariadnemem_core.reasoning import Question
from ariadnemem_core.reasoning.channels import draw
from ariadnemem_core.text import without_persons

T0 = datetime(2023, 5, 1, 18, tzinfo=UTC)


@pytest.mark.parametrize(("question", "asked"), [
    ("Which TV series does Tim mention watching?", "Which TV series does mention watching?"),
    ("What are Melanie's pets' names?", "What are pets' names?"),
    ("What do both JOANNA and Nate appreciate?", "What do both and appreciate?"),
    ("What did Timothy read?", "What did Timothy read?"),  # another name that starts like one
    ("How are you?", "How are you?"),
    ("Tim?", "Tim?"),  # nothing but a name: nothing else to search for
    # Only a name written as one: not a role word or a lowercased word, not part of a
    # hyphenated name ("user", "flask" are known persons of an assistant conversation).
    ("How did the user feedback change the UI?", "How did the user feedback change the UI?"),
    ("Did I set up Flask-Login?", "Did I set up Flask-Login?"),
    ("Does Nate like Flask routes?", "Does like routes?"),
])
def test_without_persons_takes_out_known_names_only(question: str, asked: str) -> None:
    assert without_persons(question, {"tim", "melanie", "joanna", "nate", "x", "user", "flask"}) == asked


def _conversation() -> list[Turn]:
    # Caroline's chat filler, and the one fact about what she attended (no word of the
    # question in it, so only its meaning can find it).
    filler = ["Talk soon, it was lovely.", "It was such a lovely day.", "See you soon, it was great."]
    turns = [Turn("Caroline", text, T0 + timedelta(days=i), f"f{i}") for i, text in enumerate(filler)]
    fact = "I went to a pottery class at the community centre last weekend."
    return [*turns, Turn("Caroline", fact, T0 + timedelta(days=9), "ev")]


def _ranked(make_memory, name: str, **knobs) -> list[str]:
    knobs = {"k_lex": 1, "message_context": 0, "enable_bridges": False} | knobs
    mem = make_memory(name, Config(**knobs))
    mem.add(_conversation(), user_id="u")
    # Another user's memory of the same kind is never drawn by either vector.
    mem.add([Turn("Caroline", "I attended a pottery workshop.", T0, "theirs")], user_id="someone-else")
    mem.flush()
    graph = mem.retrieve("What workshop did Caroline attend?", user_id="u")
    return [t for f in sorted(graph.facts, key=lambda f: -f.score) for t in f.source_turn_ids]


def test_the_name_no_longer_ranks_filler_above_the_fact(make_memory) -> None:
    # Dense scores alone (BM25 also favours the short filler, for the name it repeats).
    off = _ranked(make_memory, "off", k_sem=4, lexical_weight=0.0, nameless_query_weight=0.0)
    on = _ranked(make_memory, "on", k_sem=4, lexical_weight=0.0)
    assert off[0] != "ev" and "ev" in off  # the shared name ranks filler first
    assert on[0] == "ev"
    assert "theirs" not in off + on


def test_the_nameless_question_draws_its_own_candidates(make_memory) -> None:
    mem = make_memory("draw", Config(k_sem=1, k_lex=1))
    mem.add(_conversation(), user_id="u")
    mem.add([Turn("Caroline", "I attended a pottery workshop.", T0, "theirs")], user_id="someone-else")
    mem.flush()
    question = "What workshop did Caroline attend?"
    qvec, nameless = mem.embedder.embed([question, without_persons(question, {"caroline"})])
    # One read-path stage on its own: it takes the (private) store.
    persons = mem._store.known_persons("u")

    def drawn(*vectors) -> list[str]:
        q = Question(question, Scope("u"), vectors[0], *vectors[1:], known_persons=frozenset(persons))
        ids = [h.entry_id for h in draw(mem._store, q, mem.config)["dense"]]
        return [t for e in mem._store.get(ids, "u").values() for t in e.source_turn_ids]

    assert drawn(qvec) == ["f0"]  # one dense candidate: the name's
    assert sorted(drawn(qvec, nameless)) == ["ev", "f0"]  # and the nameless question's own


def test_a_question_naming_no_one_is_embedded_once(make_memory) -> None:
    mem = make_memory("once", Config(), hashing=True)
    mem.add(_conversation(), user_id="u")
    mem.flush()
    calls: list[list[str]] = []
    embed = mem.embedder.embed

    def counting(texts):
        calls.append(list(texts))
        return embed(texts)

    mem.embedder.embed = counting  # type: ignore[method-assign]
    mem.retrieve("What class was at the community centre?", user_id="u")
    mem.retrieve("What workshop did Caroline attend?", user_id="u")
    assert calls == [["What class was at the community centre?"],
                     ["What workshop did Caroline attend?", "What workshop did attend?"]]  # one batch


def test_nameless_query_weight_is_validated() -> None:
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match="nameless_query_weight"):
            Config(nameless_query_weight=bad)
