"""LLMExtractor: validation, retry, rule fallback, coverage patching, concurrency.

The invariant checked in every scenario: every input turn is covered by some entry's
``source_turn_ids``, and entries cite only turns of their own window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from fake_openai_server import FakeOpenAIServer, fake_client

from ariadnemem_core.extraction import ExtractionContext, Extractor
from ariadnemem_core.extraction.llm import LLMExtractor, build_messages, validate_output
from ariadnemem_core.models import Entry, Turn

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
SPEAKERS = ("Caroline", "Melanie")
TOPICS = ("pottery class", "camping trip", "new job", "guitar lessons", "marathon", "book club",
          "garden", "adoption agency", "beach day", "painting", "dog walk", "concert")


def make_turns(n: int, start: int = 0, prefix: str = "D1") -> list[Turn]:
    return [
        Turn(SPEAKERS[i % 2], f"I went to the {TOPICS[i % len(TOPICS)]} yesterday, it was number {i}.",
             T0 + timedelta(minutes=7 * i), f"{prefix}:{i + 1}")
        for i in range(start, start + n)
    ]


def assert_covered(entries: Sequence[Entry], turns: Sequence[Turn]) -> None:
    ids = {t.turn_id for t in turns}
    cited = {tid for e in entries for tid in e.source_turn_ids}
    assert ids <= cited, f"uncovered turns: {sorted(ids - cited)}"
    assert cited <= ids, f"entries cite turns outside the window: {sorted(cited - ids)}"
    for e in entries:
        assert e.text and e.id.startswith("e-") and e.source_turn_ids


def test_is_an_extractor(server: FakeOpenAIServer) -> None:
    assert isinstance(LLMExtractor(fake_client(server)), Extractor)


def test_good_window(server: FakeOpenAIServer) -> None:
    ex = LLMExtractor(fake_client(server))
    turns = make_turns(6)
    entries = ex.extract(turns, ExtractionContext())
    assert server.count == 1
    assert_covered(entries, turns)
    assert len(entries) == 6
    by_turn = {t.turn_id: t for t in turns}
    for e in entries:
        src = by_turn[e.source_turn_ids[0]]
        assert e.timestamp == src.timestamp and e.speaker == src.speaker
        assert e.metadata["extractor"] == "llm" and e.keywords
        assert e.persons == [src.speaker]  # empty LLM persons -> the speaker
    assert ex.stats == {**ex.stats, "windows": 1, "llm_ok": 1, "retries": 0, "fallback_windows": 0,
                        "patched_turns": 0}


def test_prompt_has_ids_dates_context_and_quoted_text(server: FakeOpenAIServer) -> None:
    turns = make_turns(3, start=2)
    ctx = ExtractionContext(previous_turns=make_turns(2), participants=list(SPEAKERS))
    LLMExtractor(fake_client(server)).extract(turns, ctx)
    system, user = (m["content"] for m in server.requests[0]["messages"])
    assert "source_turn_ids" in system and "absolute date" in system
    assert "[T1] 2023-05-08 14:10 (Monday) Caroline:" in user
    context_part = user[user.index("<context>"):user.index("</context>")]
    assert '"I went to the camping trip yesterday, it was number 1."' in context_part  # earlier turn
    assert "[T" not in context_part  # earlier turns carry no citable id
    assert user.index("</context>") < user.index("<turns>")
    assert "[T4]" not in user and user.rstrip().endswith("every turn from T1 to T3 needs at least one entry.")


def test_multi_turn_entry_takes_latest_timestamp_and_no_single_speaker(server: FakeOpenAIServer) -> None:
    import json

    server.queue(lambda body: (200, json.dumps({"entries": [
        {"text": "Caroline and Melanie talked about camping.", "source_turn_ids": ["T1", "T2"],
         "keywords": ["Camping"], "persons": "Caroline", "entities": [], "location": "null", "topic": None},
    ]})))
    turns = make_turns(2)
    [entry] = LLMExtractor(fake_client(server)).extract(turns, ExtractionContext())
    assert entry.source_turn_ids == ["D1:1", "D1:2"]
    assert entry.timestamp == turns[1].timestamp and entry.first_timestamp == turns[0].timestamp
    assert entry.speaker is None
    assert entry.keywords == ["camping"] and entry.persons == ["Caroline"] and entry.location is None


@pytest.mark.parametrize("cue", ["fenced", "prose"])
def test_wrapped_json_window(server: FakeOpenAIServer, cue: str) -> None:
    server.queue(cue)
    ex = LLMExtractor(fake_client(server))
    turns = make_turns(4)
    assert_covered(ex.extract(turns, ExtractionContext()), turns)
    assert ex.stats["llm_ok"] == 1 and ex.stats["fallback_windows"] == 0


@pytest.mark.parametrize("bad", ["invalid", "bad_ids", "no_text"])
def test_invalid_reply_is_retried_with_a_note(server: FakeOpenAIServer, bad: str) -> None:
    server.queue(bad, "good")
    ex = LLMExtractor(fake_client(server))
    turns = make_turns(5)
    entries = ex.extract(turns, ExtractionContext())
    assert_covered(entries, turns)
    assert server.count == 2
    assert "previous reply was rejected" in server.requests[1]["messages"][1]["content"]
    s = ex.stats
    assert s["retries"] == 1 and s["llm_ok"] == 1 and s["fallback_windows"] == 0
    assert s["invalid_replies"] + s["failed_calls"] == 1


@pytest.mark.parametrize("bad", ["invalid", "bad_ids", "no_text"])
def test_persistent_invalid_reply_falls_back_to_rules(server: FakeOpenAIServer, bad: str, caplog) -> None:
    server.default = bad
    ex = LLMExtractor(fake_client(server))
    turns = make_turns(5)
    with caplog.at_level("WARNING", logger="ariadnemem_core.extraction.llm"):
        entries = ex.extract(turns, ExtractionContext())
    assert any("fell back to the rule extractor" in r.getMessage() for r in caplog.records)  # an operator sees it
    assert_covered(entries, turns)
    assert server.count == 2  # 1 + retries
    assert ex.stats["fallback_windows"] == 1 and ex.stats["llm_ok"] == 0
    assert all(e.metadata.get("extractor") == "rule-fallback" for e in entries)
    assert ex.last_error


def test_500_forever_falls_back(server: FakeOpenAIServer) -> None:
    server.default = "500"
    ex = LLMExtractor(fake_client(server, max_retries=1), retries=1)
    turns = make_turns(4)
    assert_covered(ex.extract(turns, ExtractionContext()), turns)
    assert server.count == 4  # (1 + 1 HTTP retry) x (1 + 1 window retry)
    assert ex.stats["fallback_windows"] == 1 and ex.stats["failed_calls"] == 2


def test_timeout_falls_back_at_once(server: FakeOpenAIServer) -> None:
    """A call that used its whole deadline is not asked again: the window falls back to
    rules, so the caller waits one deadline, not one per window retry."""
    server.sleep_s = 3.0
    server.queue("timeout", "good")
    ex = LLMExtractor(fake_client(server, timeout=1.0, max_retries=1), retries=1)
    turns = make_turns(3)
    t0 = time.perf_counter()
    assert_covered(ex.extract(turns, ExtractionContext()), turns)
    assert time.perf_counter() - t0 < 1.0 + 1.0
    assert server.count == 1  # the timeout ends the call (a total deadline), no window retry
    assert ex.stats["fallback_windows"] == 1 and ex.stats["retries"] == 0


def test_429_then_good(server: FakeOpenAIServer) -> None:
    server.queue("429")
    client = fake_client(server)
    ex = LLMExtractor(client)
    turns = make_turns(3)
    assert_covered(ex.extract(turns, ExtractionContext()), turns)
    assert server.count == 2 and client.usage["retries"] == 1 and ex.stats["llm_ok"] == 1


def test_400_response_format_window(server: FakeOpenAIServer) -> None:
    server.default = "400_rf"
    ex = LLMExtractor(fake_client(server))
    turns = make_turns(3)
    assert_covered(ex.extract(turns, ExtractionContext()), turns)
    assert ex.stats["llm_ok"] == 1 and ex.client.json_mode is False


def test_uncovered_turns_are_patched(server: FakeOpenAIServer) -> None:
    server.default = "partial"
    ex = LLMExtractor(fake_client(server))
    turns = make_turns(8)
    entries = ex.extract(turns, ExtractionContext())
    assert_covered(entries, turns)
    assert ex.stats["patched_turns"] == 4 and ex.stats["llm_ok"] == 1
    patched = [e for e in entries if e.metadata.get("extractor") == "rule-patch"]
    assert sorted(t for e in patched for t in e.source_turn_ids) == [t.turn_id for t in turns[4:]]


def test_no_turn_ever_dropped_across_all_cues(server: FakeOpenAIServer) -> None:
    server.sleep_s = 0.6
    cues = ["good", "fenced", "prose", "text", "invalid", "bad_ids", "partial", "no_text", "429", "500",
            "timeout", "400_rf"]
    server.queue(*cues * 3)
    ex = LLMExtractor(fake_client(server, timeout=0.3, max_retries=1))
    windows = [make_turns(4, start=4 * i, prefix=f"D{i}") for i in range(len(cues))]
    with ThreadPoolExecutor(max_workers=4) as pool:  # windows of several threads at once
        results = list(pool.map(lambda w: ex.extract(w, ExtractionContext()), windows))
    for turns, entries in zip(windows, results, strict=True):
        assert_covered(entries, turns)
    s = ex.stats
    assert s["windows"] == len(cues) and s["llm_ok"] + s["fallback_windows"] == len(cues)


def test_one_extractor_serves_several_threads(server: FakeOpenAIServer) -> None:
    """Ingest of several scopes at once shares one extractor: calls overlap, and each
    window gets its own entries and every counter is kept."""
    server.default = lambda body: (__import__("time").sleep(0.05) or 200,
                                   __import__("json").dumps(server.good_json(body)))
    ex = LLMExtractor(fake_client(server))
    windows = [make_turns(3, start=3 * i, prefix=f"W{i}") for i in range(9)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(ex.extract, windows))
    for turns, entries in zip(windows, results, strict=True):
        assert_covered(entries, turns)
    assert 1 < server.max_in_flight <= 3
    assert ex.stats["windows"] == 9 and ex.stats["llm_ok"] == 9


def test_aextract_concurrent_windows(server: FakeOpenAIServer) -> None:
    server.queue("invalid", "500", "500", "500", "500")
    ex = LLMExtractor(fake_client(server))
    windows = [make_turns(5, start=5 * i, prefix=f"A{i}") for i in range(10)]

    async def run() -> list[list[Entry]]:
        return list(await asyncio.gather(*(ex.aextract(w, ExtractionContext()) for w in windows)))

    results = asyncio.run(run())
    for turns, entries in zip(windows, results, strict=True):
        assert_covered(entries, turns)
    assert ex.stats["windows"] == 10
    assert ex.client.usage["calls"] >= 10


def test_empty_window_makes_no_call(server: FakeOpenAIServer) -> None:
    ex = LLMExtractor(fake_client(server))
    assert ex.extract([], ExtractionContext()) == []
    assert server.count == 0


def test_validate_output_schema() -> None:
    turns = make_turns(2)
    ok = validate_output({"entries": [{"text": "x", "source_turn_ids": ["T1", "D1:2", 2]}]}, turns)
    assert ok[0]["positions"] == [0, 1]
    assert validate_output([{"text": "x", "source_turn_ids": "t2"}], turns)[0]["positions"] == [1]
    assert validate_output({"text": "x", "source_turn_ids": ["[T2]"], "keywords": []}, turns)[0]["positions"] == [1]
    assert validate_output({"facts": [{"text": "x", "source_turn_ids": [1]}]}, turns)[0]["positions"] == [0]
    for bad in ({"entries": []}, {"foo": 1}, {"entries": [{"text": "", "source_turn_ids": ["T1"]}]},
                {"entries": [{"text": "x", "source_turn_ids": []}]},
                {"entries": [{"text": "x", "source_turn_ids": ["T3"]}]},
                {"entries": [{"text": "x", "source_turn_ids": ["T1"], "keywords": [{"k": 1}]}]},
                {"entries": [{"text": "x", "source_turn_ids": ["T1"], "location": 5}]}, "text",
                # thousands of entries for two short turns: a runaway reply, not an extraction
                {"entries": [{"text": f"fact {i}", "source_turn_ids": ["T1"]} for i in range(2_000)]}):
        with pytest.raises(ValueError):
            validate_output(bad, turns)
    # A year given as a number is the same keyword, not a reason to drop the window's entries.
    kept = validate_output({"entries": [{"text": "x", "source_turn_ids": ["T1"], "keywords": ["lisbon", 2024, None]}]},
                           turns)
    assert kept[0]["keywords"] == ["lisbon", "2024"]


def test_image_caption_in_prompt() -> None:
    turn = Turn("Caroline", "Look at this!", T0, "D1:1", {"blip_caption": "a photo of a red vase"})
    user = build_messages([turn], ExtractionContext())[1]["content"]
    assert 'shared image: "a photo of a red vase"' in user


def test_turns_in_other_offsets_show_their_offset_in_the_prompt() -> None:
    """Two turns a minute apart in two offsets read as a minute apart, each in its own
    speaker's calendar (the model grounds "tomorrow" in it)."""
    turns = [Turn("Maya", "See you tomorrow!", "2024-03-01T23:30:00-05:00", "a"),
             Turn("Leo", "Yes, tomorrow.", "2024-03-02T04:31:00+00:00", "b")]
    user = build_messages(turns, ExtractionContext())[1]["content"]
    assert "2024-03-01 23:30 UTC-0500 (Friday) Maya" in user and "2024-03-02 04:31 (Saturday) Leo" in user


def test_memory_facade_with_llm_extractor(server: FakeOpenAIServer) -> None:
    try:
        from ariadnemem_core import AriadneMemory, HashEmbedder
    except ImportError:  # pragma: no cover - the facade is optional for this module
        pytest.skip("AriadneMemory not importable")
    server.queue("partial", "invalid", "invalid")  # patching and fallback inside the memory too
    ex = LLMExtractor(fake_client(server))
    turns = make_turns(25)
    with AriadneMemory(extractor=ex, embedder=HashEmbedder()) as mem:
        mem.add(turns)
        mem.flush()
        cited = {tid for e in mem.entries() for tid in e.source_turn_ids}
        stats = mem.stats()
    missing = {t.turn_id for t in turns} - cited
    assert len(missing) <= stats.get("gate_dropped", 0), f"turns lost: {sorted(missing)}"
    assert ex.stats["windows"] >= 2 and server.count >= 2


def test_shifted_citations_are_reanchored(server: FakeOpenAIServer) -> None:
    import json

    texts = ["I adopted a grey cat named Pixel last week.", "Wow, love that painting of the lighthouse!",
             "The pottery class at the community center starts on Monday.",
             "My sister Jane is visiting Lisbon in June with her kids."]
    turns = [Turn(SPEAKERS[i % 2], t, T0 + timedelta(minutes=i), f"S:{i + 1}") for i, t in enumerate(texts)]
    # the model skipped T2 and cited every later turn one off
    server.queue(lambda body: (200, json.dumps({"entries": [
        {"text": "Caroline adopted a grey cat named Pixel last week.", "source_turn_ids": ["T1"]},
        {"text": "The pottery class at the community center starts on Monday.", "source_turn_ids": ["T2"]},
        {"text": "Melanie's sister Jane is visiting Lisbon in June with her kids.", "source_turn_ids": ["T3"]},
        {"text": "Caroline likes it.", "source_turn_ids": ["T4"]},  # too few words to judge: kept
    ]})))
    ex = LLMExtractor(fake_client(server))
    entries = ex.extract(turns, ExtractionContext())
    assert_covered(entries, turns)
    cites = {e.text: e.source_turn_ids for e in entries}
    assert cites["The pottery class at the community center starts on Monday."] == ["S:3"]
    assert cites["Melanie's sister Jane is visiting Lisbon in June with her kids."] == ["S:4"]
    assert cites["Caroline likes it."] == ["S:4"]
    assert ex.stats["reanchored"] == 2 and ex.stats["patched_turns"] == 1  # T2 rule-extracted


def test_large_windows_can_be_split_per_call(server: FakeOpenAIServer) -> None:
    ex = LLMExtractor(fake_client(server), max_turns_per_call=4)
    turns = make_turns(10)
    entries = ex.extract(turns, ExtractionContext())
    assert_covered(entries, turns)
    assert server.count == 3 and ex.stats["windows"] == 3 and ex.stats["llm_ok"] == 3
    last = server.requests[2]["messages"][1]["content"]
    assert "<context>" in last and "[T3]" not in last  # earlier parts are context, not citable
    assert [e.source_turn_ids[0] for e in entries] == [t.turn_id for t in turns]  # order kept
    entries = asyncio.run(ex.aextract(turns, ExtractionContext()))
    assert_covered(entries, turns)
    assert [e.source_turn_ids[0] for e in entries] == [t.turn_id for t in turns]
    with pytest.raises(ValueError):
        LLMExtractor(fake_client(server), max_turns_per_call=0)


def test_a_callers_reserved_metadata_is_kept_aside(server: FakeOpenAIServer) -> None:
    """Turn metadata under a name the library reads (``attributes``, ``said``,
    ``merged_from``) is the caller's: kept as ``turn_<name>``, as the rule extractor keeps
    it, never read as self-stated attributes, own words or MERGEd ids."""
    [source] = make_turns(1)
    turn = Turn(source.speaker, source.text, source.timestamp, source.turn_id,
                {"attributes": {"x": "y"}, "said": "forged words", "merged_from": "crm-17", "crm": 7})
    [entry] = LLMExtractor(fake_client(server)).extract([turn], ExtractionContext())
    assert entry.metadata["extractor"] == "llm" and entry.metadata["crm"] == 7
    assert (entry.metadata["turn_attributes"], entry.metadata["turn_said"], entry.metadata["turn_merged_from"]) == \
        ({"x": "y"}, "forged words", "crm-17")
    assert "said" not in entry.metadata and "merged_from" not in entry.metadata
