"""Agent conversations: long markdown messages, block entries, excerpts, the hard budget."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariadnemem_core import AriadneMemory, Config, HashEmbedder
from ariadnemem_core.extraction import ExtractionContext, RuleExtractor
from ariadnemem_core.extraction.segment import segment
from ariadnemem_core.reasoning.excerpt import excerpt, query_terms, units
from ariadnemem_core.tokens import count_tokens

REPLY = """Great plan! Here is how I would structure the **budget tracker**:

## Sprint 1: Authentication

Set up the Flask app first. Then add the login routes:

- **Task 1:** registration with email. Mind the e.g. case.
- **Task 2:** login and logout
  - sessions expire after 30 minutes

```python
for i in range(3):
    print("I think you should retry. Then stop.")
```

| week | goal |
| --- | --- |
| 1 | auth |
| 2 | transactions |

If you need further details, feel free to let me know!
"""

CODE_USER = """My deploy script fails on the server. Here it is:

```bash
#!/bin/sh
set -e
docker compose up -d
```

I use Ubuntu 22.04 on a Hetzner box in Falkenstein."""


def test_segment_keeps_blocks_whole_with_their_heading() -> None:
    segs = segment(REPLY)
    kinds = [s.kind for s in segs]
    assert kinds == ["prose", "prose", "list", "code", "table", "prose"]
    code = segs[3]
    assert code.lang == "python" and code.text.startswith("for i in range(3):")
    assert "Then stop." in code.text  # never cut into sentences
    assert code.context.startswith("Sprint 1: Authentication")
    lst = segs[2]
    assert lst.context == "Sprint 1: Authentication: Then add the login routes"  # heading + lead-in
    assert lst.text.splitlines()[0] == "Task 1: registration with email. Mind the e.g. case."  # emphasis gone
    assert "  sessions expire after 30 minutes" in lst.text  # sub-item kept, indented
    assert segs[4].text.splitlines() == ["| week | goal |", "| 1 | auth |", "| 2 | transactions |"]


def test_one_line_text_is_one_prose_segment() -> None:
    assert [(s.kind, s.text) for s in segment("  I moved to Berlin - finally! #1 fan  ")] == \
        [("prose", "I moved to Berlin - finally! #1 fan")]
    assert segment("   ") == []


def test_assistant_reply_becomes_chunks_and_verbatim_code() -> None:
    rule = RuleExtractor(split_sentences=True, assistant_speakers=("assistant",))
    entries = rule.extract([turn("assistant", REPLY, turn_id="a1")], ExtractionContext([], ["user", "assistant"]))
    kinds = [e.metadata.get("segment") for e in entries]
    assert "code" in kinds and "chunk" in kinds
    assert all(e.source_turn_ids == ["a1"] for e in entries)
    code = next(e for e in entries if e.metadata.get("segment") == "code")
    # verbatim: no pronoun grounding inside code
    assert 'for i in range(3):\n    print("I think you should retry. Then stop.")' in code.text
    assert code.text.startswith("assistant (code), Sprint 1: Authentication")
    assert len(entries) <= 4  # packed, not one entry per sentence


def test_user_message_keeps_sentences_and_one_code_entry() -> None:
    rule = RuleExtractor(split_sentences=True, assistant_speakers=("assistant",))
    entries = rule.extract([turn("Priya", CODE_USER, turn_id="u1")], ExtractionContext([], ["Priya", "assistant"]))
    kinds = [e.metadata.get("segment") for e in entries]
    assert kinds.count("code") == 1
    assert any("Ubuntu 22.04" in e.text and e.metadata.get("segment") is None for e in entries)
    code = next(e for e in entries if e.metadata.get("segment") == "code")
    assert "docker compose up -d" in code.text and "set -e" in code.text


def test_excerpt_fits_and_picks_the_matching_lines() -> None:
    text = "assistant (list), Plan:\n" + "\n".join(f"Task {i}: write section {i} of the report" for i in range(30))
    text += "\nTask 31: book the flight to Lisbon"
    terms = query_terms("When is the flight to Lisbon booked?", ["when", "is", "the", "to"])
    short = excerpt(text, terms, 30)
    assert count_tokens(short) <= 30
    assert "Lisbon" in short and short.endswith("Task 31: book the flight to Lisbon")
    assert "…" in short
    assert excerpt("A short fact.", terms, 30) == "A short fact."
    # one enormous token-dense word still fits
    assert count_tokens(excerpt("x" * 5000, terms, 20)) <= 20


def test_a_title_ends_no_sentence_of_an_excerpt() -> None:
    """"Ms. Oyelaran" is one name: cut after the title, the excerpt would answer "who tutors
    Eli now?" with "Eli's tutor is Ms." and lose the name."""
    text = ("We spent the whole evening on fractions and negative numbers again. " * 4
            + "mr haddad moved away so Eli's tutor is Ms. Oyelaran starting this week. Dr. Lee agrees.")
    assert units(text)[-2:] == ["mr haddad moved away so Eli's tutor is Ms. Oyelaran starting this week.",
                                "Dr. Lee agrees."]
    short = excerpt(text, query_terms("Who is Eli's tutor now?", ["who", "is", "now"]), 30)
    assert "Ms. Oyelaran" in short


LONG = ("## Options\n\n" + "\n".join(f"- Option {i}: a long description of approach number {i} with many "
                                     f"words about databases, caching and deployment trade-offs" for i in range(40)))


@pytest.mark.parametrize("budget", [60, 150, 500])
def test_retrieve_never_exceeds_the_token_budget(make_memory: Callable[..., AriadneMemory], budget: int) -> None:
    mem = make_memory(config=Config(token_budget=budget), hashing=True)
    turns = []
    for i in range(6):
        turns.append(turn("user", f"Which database should I use for project {i}? I need caching too.", 2 * i,
                          turn_id=f"u{i}"))
        turns.append(turn("assistant", LONG + f"\n\nFor project {i} I recommend PostgreSQL.", 2 * i + 1,
                          turn_id=f"a{i}"))
    mem.add(turns)
    mem.flush()
    for q in ("Which database for project 3?", "caching trade-offs", "deployment", "What did I ask about?"):
        g = mem.retrieve(q)
        assert g.token_count() <= budget
        for f in g.facts:
            if f.excerpt:
                whole = mem.get(f.id)
                assert len(whole.text) > len(f.text)  # the full entry is fetchable by id
    assert any(f.excerpt for f in mem.retrieve("caching trade-offs").facts) or budget < 100


def test_relevance_floor_keeps_filler_out(make_memory: Callable[..., AriadneMemory]) -> None:
    lines = ["My sister Lea adopted a kitten named Miso.", "The weather is nice today.",
             "I bought new running shoes.", "We watched a movie yesterday.", "The bakery opens at 7 am."]
    # Hashing embedder: sentences that share no word with the question score ~0. The graph's
    # own candidates only: the message floor shows what a flat search would (all five here).
    for floor, expect_small in ((0.0, False), (Config().relevance_floor, True)):
        mem = make_memory(f"s{floor}", Config(relevance_floor=floor, message_floor=0.0), hashing=True)
        mem.add([turn("Ana", t, i, turn_id=f"t{i}") for i, t in enumerate(lines)])
        mem.flush()
        g = mem.retrieve("What is the name of Lea's kitten Miso?")
        assert any("Miso" in f.text for f in g.facts)
        assert (len(g.facts) <= 2) is expect_small


MARKDOWNISH = st.lists(st.sampled_from([
    "# Title", "## Sub", "- item", "  - nested", "1. first", "```python", "```", "| a | b |", "| --- | --- |",
    "> quote", "plain sentence. Another one!", "https://example.com/x?y=1", "Traceback (most recent call last):",
    '  File "x.py", line 1, in <module>', "Ünïcödé 日本語のテキスト。",
    "    indented code", "", "***", "<div>html</div>",
]), min_size=1, max_size=25).map("\n".join)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(MARKDOWNISH, st.sampled_from(["user", "assistant", "Ana"]))
def test_markdown_code_tables_never_crash_extraction(text: str, speaker: str) -> None:
    if not text.strip():
        return
    rule = RuleExtractor(split_sentences=True, assistant_speakers=("assistant",))
    entries = rule.extract([turn(speaker, text, turn_id="x")], ExtractionContext([], [speaker]))
    assert entries and all(e.source_turn_ids == ["x"] and e.text.strip() for e in entries)


def test_long_message_stays_retrievable() -> None:
    body = "\n\n".join(f"## Part {i}\n\nThe service {i} runs on port {8000 + i}." for i in range(2000))
    assert len(body) > 50_000
    with AriadneMemory(None, Config(), embedder=HashEmbedder()) as mem:
        mem.add(turn("assistant", body, turn_id="big"))
        mem.flush()
        g = mem.retrieve("Which port does service 1234 run on?")
        assert "big" in g.source_turn_ids and g.token_count() <= 500


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(min_size=1, max_size=3000), st.text(max_size=80), st.integers(min_value=8, max_value=80))
def test_excerpt_never_exceeds_its_token_limit(text: str, question: str, limit: int) -> None:
    out = excerpt(text, query_terms(question), limit)
    assert count_tokens(out) <= limit
    if count_tokens(text) <= limit:
        assert out == text


def test_a_reply_is_never_gated_as_a_repeat_of_the_question(make_memory: Callable[..., AriadneMemory]) -> None:
    # The reply's vector carries the question it answers; the gate must not read that as
    # a near-repeat of the question (one minute apart, well inside the redundancy horizon).
    mem = make_memory()
    mem.add([
        turn("user", "Can you help me create a sprint plan for the budget tracker?", 0, turn_id="q1"),
        turn("assistant", "Yes, I can help you create a sprint plan for the budget tracker.", 1, turn_id="a1"),
        turn("Ana", "What did you name the kitten?", 10, turn_id="q2"),
        turn("Bo", "Miso.", 11, turn_id="a2"),
    ])
    mem.flush()
    covered = {t for e in mem.entries() for t in e.source_turn_ids}
    assert {"a1", "a2"} <= covered
    assert mem.stats()["gate_dropped"] == 0
