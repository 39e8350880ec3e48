"""The question penalty lowers memories that only ask, not statements that end in a request."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ariadnemem_core import AriadneMemory, Config, Turn
from ariadnemem_core.reasoning.fusion import only_asks

T0 = datetime(2024, 3, 1, 9, tzinfo=UTC)


@pytest.mark.parametrize(("text", "asks"), [
    ("What's Melanie's best camping memory?", True),
    ("Caroline: Did anything happen?", True),
    ("hmm, does the user need to restart the PostgreSQL service?", True),
    ("Can the assistant help the user with that?", True),
    ('Melanie: "Which one is your favourite?"', True),
    # It states before it asks: a fact a question can be answered from.
    ("The user is moving the launch to May 3, can the assistant update the plan?", False),
    ("Books have such an awesome power! Which one has been Caroline's favorite guide?", False),
    ("I moved to Denver in May.", False),
    ("What a day.", False),  # opens like a question, asks nothing
])
def test_only_asks(text: str, asks: bool) -> None:
    assert only_asks(text) is asks


def _score(penalty: float, text: str, question: str) -> float:
    with AriadneMemory(None, Config(question_penalty=penalty)) as mem:
        mem.add([Turn("user", text, T0, "t1"),
                 Turn("assistant", "Sure, I will help you with that.", T0 + timedelta(minutes=1), "t2")])
        mem.flush()
        facts = [f for f in mem.retrieve(question).facts if "t1" in f.source_turn_ids]
        assert facts, "the user's message must be retrieved"
        return max(f.score for f in facts)


def test_a_statement_ending_in_a_request_keeps_its_score() -> None:
    # An agent's user states their facts inside requests: this one is the evidence for
    # "when is the launch?" and must not rank as a mere question.
    text = "I'm moving the product launch to May 3, can you update the launch plan?"
    question = "When is the product launch?"
    assert _score(0.1, text, question) == pytest.approx(_score(1.0, text, question))


def test_a_memory_that_only_asks_is_lowered() -> None:
    text = "When is the product launch happening this year?"
    question = "When is the product launch?"
    assert _score(0.1, text, question) < 0.5 * _score(1.0, text, question)
