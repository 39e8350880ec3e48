"""Questions that name a period: parsed (periods.py) and used by retrieval."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ariadnemem_core import Config, Turn
from ariadnemem_core.models import Scope
from ariadnemem_core.reasoning import Question
from ariadnemem_core.reasoning.channels import period as period_channel
from ariadnemem_core.reasoning.periods import question_period


def _days(question: str) -> list[str] | None:
    period = question_period(question)
    return None if period is None else [datetime.fromtimestamp(t, UTC).date().isoformat() for t in period]


@pytest.mark.parametrize(("question", "days"), [
    ("What did Maria start in December 2023?", ["2023-12-01", "2024-01-01"]),
    ("What did Gina find on 1 February, 2023?", ["2023-01-31", "2023-02-03"]),  # a day, a day's slack
    ("What did Mel show on October 13th, 2023?", ["2023-10-12", "2023-10-15"]),
    ("Plans for Sept. 2024?", ["2024-09-01", "2024-10-01"]),
    ("What did John build by 7 November, 2022?", ["2022-10-30", "2022-11-09"]),  # the week before
    ("What changed after March 2024?", ["2024-03-01", "2024-04-08"]),  # the week after
    ("What happened in 2023?", None),  # a bare year spans most conversations
    ("What was said at the June 14 call?", None),  # no year: ambiguous
    ("What did we decide on February 30, 2023?", None),  # no such day
    ("How are you?", None),
])
def test_question_period_reads_a_named_day_or_month(question: str, days: list[str] | None) -> None:
    assert _days(question) == days


def test_a_named_period_brings_its_memories_into_the_graph_and_first(make_memory) -> None:
    def at(month: int, day: int) -> datetime:
        return datetime(2023, month, day, 18, tzinfo=UTC)

    december = ["I started learning Spanish with an app.", "I started learning to cook Thai curries.",
                "I started learning how to knit scarves.", "I started learning to skate at the rink."]
    turns = [Turn("Tim", "The piano is a new hobby of mine, scales every evening.", at(8, 21), "aug"),
             *(Turn("Tim", text, at(12, 1 + i), f"dec{i}") for i, text in enumerate(december))]
    question = "What did Tim start learning in August 2023?"
    found = {}
    for name, knobs in {"off": {"k_period": 0}, "drawn": {"period_bonus": 0.0}, "on": {}}.items():
        # The period channel alone: no whole-message channel (it would draw "aug" too).
        mem = make_memory(name, Config(k_sem=2, k_lex=1, message_floor=0.0, **knobs))
        mem.add(turns, user_id="tim")
        mem.add([Turn("Tim", "I started learning the violin.", at(8, 22), "other")], user_id="someone-else")
        mem.flush()
        graph = mem.retrieve(question, user_id="tim")
        found[name] = {t: f.score for f in graph.facts for t in f.source_turn_ids}
        assert "other" not in found[name]  # another user's August is never read
    assert "aug" not in found["off"]  # plain similarity ranks December's "started learning" first
    assert "aug" in found["drawn"]  # drawn from the period as a candidate
    assert found["on"]["aug"] == pytest.approx(1.5 * found["drawn"]["aug"])  # and ranked higher
    assert found["on"]["dec0"] == pytest.approx(found["drawn"]["dec0"])  # outside the period: unchanged


def test_a_period_ends_before_the_first_moment_of_the_next(make_memory) -> None:
    turns = [Turn("Tim", "The piano is a new hobby of mine.", datetime(2023, 8, 31, 23, 59, tzinfo=UTC), "aug"),
             Turn("Tim", "The piano is my new hobby, said at midnight.", datetime(2023, 9, 1, tzinfo=UTC), "sep")]
    mem = make_memory("edge", Config(k_sem=1, k_lex=1, relevance_floor=0.0), hashing=True)
    mem.add(turns, user_id="tim")
    mem.flush()
    period = question_period("Which hobby did Tim pick up in August 2023?")
    assert period is not None
    qvec = mem.embedder.embed(["hobby"])[0]
    # The period's own candidates, before fusion: the one said at midnight of September is not one.
    # One read-path stage on its own: it takes the (private) store.
    q = Question("Which hobby did Tim pick up in August 2023?", Scope("tim"), qvec, period=period)
    hits = [h.entry_id for h in period_channel(mem._store, q, mem.config, {})]
    assert [mem.get(i, user_id="tim").source_turn_ids for i in hits] == [["aug"]]


def test_a_crowded_period_is_not_scanned(make_memory, monkeypatch) -> None:
    import ariadnemem_core.reasoning.channels as channels

    at = datetime(2023, 8, 10, tzinfo=UTC)
    turns = [Turn("Tim", text, at, f"t{i}") for i, text in enumerate(
        ["The piano is a new hobby of mine.", "I repaired the garden fence.", "We cooked a big paella."])]
    mem = make_memory("crowded", Config(k_sem=1, k_lex=1, message_floor=0.0, relevance_floor=0.0), hashing=True)
    mem.add(turns, user_id="tim")
    mem.flush()
    question = "Which hobby did Tim pick up in August 2023?"
    assert len(mem.retrieve(question, user_id="tim").facts) == 3  # period candidates join
    monkeypatch.setattr(channels, "MAX_PERIOD_SCAN", 2)
    assert len(mem.retrieve(question, user_id="tim").facts) < 3  # more than 2 in the period: not scanned


def test_period_knobs_are_validated() -> None:
    from ariadnemem_core import ConfigError

    with pytest.raises(ConfigError, match="k_period"):
        Config(k_period=-1)
    with pytest.raises(ConfigError, match="period_bonus"):
        Config(period_bonus=-0.5)
