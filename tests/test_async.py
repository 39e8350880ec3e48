"""The async API keeps the event loop free and returns what the sync API returns.

Many ``aadd`` / ``aretrieve`` / ``aanswer`` calls run at once through ``asyncio.gather``
while a heartbeat coroutine sleeps 10 ms in a loop and records the longest gap between its
ticks. If the work ran on the event-loop thread the heartbeat would stall for the whole
batch of sync work (well over a second here: ~200 retrievals of several ms each); in
worker threads the loop is only delayed by GIL hand-offs (the 5 ms switch interval). The
bound, 0.5 s, sits far from both, so the test is not flaky on a loaded machine yet fails
when an ``a*`` method blocks (checked by temporarily making ``aretrieve`` call
``retrieve`` directly: max gap ~2 s, test fails).

Two stalls are not ours and are kept out of / noted for the measurement: a full (gen 2)
garbage collection over everything the imports allocated (chromadb, torch, langchain:
~0.2 s measured) stops every thread, the loop included, so the measured phases run after
``gc.collect(); gc.freeze()`` (what a latency-sensitive service would do after start-up);
and chromadb's ``upsert`` holds the GIL while it runs (20-70 ms per window here), which is
the largest remaining delay (max gap ~0.1 s).

Two phases, each under the heartbeat:

1. Mixed: ``aadd`` calls interleaved with ``aretrieve`` / ``aanswer``. Each ``aadd`` writes
   its own user, so the written memory does not depend on which thread wins the write lock
   and must equal a sequential sync run. The reads target a pre-filled user and must only
   ever see that user's entries. They are *not* compared exactly: BM25 statistics come
   from the store-wide FTS5 table, so another user's writes shift lexical scores (and
   occasionally rankings) while they run.
2. Reads only, on the final memory: every ``aretrieve`` / ``aanswer`` result must equal
   the sync ``retrieve`` / ``answer`` result exactly.
"""

from __future__ import annotations

import asyncio
import gc
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ariadnemem_core import AriadneMemory, Config, HashEmbedder, Turn

PEOPLE = ["Ana", "Ben", "Chloe", "Dev", "Emma", "Farid", "Greta", "Hugo"]
HOBBIES = ["hiking", "chess", "pottery", "surfing", "painting", "cycling", "baking", "climbing"]
PLACES = ["Lyon", "Oslo", "Kyoto", "Lima", "Porto", "Quebec", "Hanoi", "Tunis"]
JOBS = ["nurse", "teacher", "pilot", "chef", "lawyer", "plumber", "architect", "farmer"]
T0 = datetime(2023, 1, 2, 9, 0, tzinfo=UTC)
HEARTBEAT_S = 0.01
MAX_GAP_S = 0.5
CFG = Config(window_size=5)


def _turns(n: int, offset: int, prefix: str) -> list[Turn]:
    out = []
    for i in range(n):
        k = i + offset
        who = PEOPLE[k % len(PEOPLE)]
        text = [
            f"I started {HOBBIES[k % 8]} with my friends in {PLACES[(k // 3) % 8]}.",
            f"I work as a {JOBS[(k // 2) % 8]} near {PLACES[k % 8]} since {2010 + k % 12}.",
            f"Last week I visited {PLACES[(k * 5) % 8]} and tried {HOBBIES[(k * 3) % 8]} there.",
        ][k % 3]
        out.append(Turn(who, text, T0 + timedelta(hours=7 * k), f"{prefix}-{k}"))
    return out


def _questions() -> list[str]:
    qs = []
    for p in PEOPLE:
        for h in HOBBIES:
            qs.append(f"When did {p} start {h}?")
        for c in PLACES:
            qs.append(f"Has {p} ever been to {c}?")
        for j in JOBS[:4]:
            qs.append(f"Does {p} work as a {j}?")
    return qs  # 160 distinct questions


def _entry_view(mem: AriadneMemory, user: str) -> list[tuple[Any, ...]]:
    """Entries without their random ids, comparable across two stores."""
    return [(e.text, e.timestamp, tuple(e.source_turn_ids), tuple(e.keywords), tuple(e.persons))
            for e in mem.entries(user)]


def _answer_view(a: Any) -> tuple[Any, ...]:
    return (a.mode, a.text, a.fast_path, tuple(a.fact_ids), a.graph.to_text())


@pytest.fixture
def no_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LLM configured: ``aanswer`` must return the extractive answer."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


async def _heartbeat(stop: asyncio.Event, gaps: list[float]) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(HEARTBEAT_S)
        gaps.append(loop.time() - t - HEARTBEAT_S)


async def _run_with_heartbeat(calls: list[Any]) -> tuple[list[Any], list[float], float]:
    """Gather ``calls`` while the heartbeat ticks; returns results, tick delays, elapsed s."""
    stop = asyncio.Event()
    gaps: list[float] = []
    gc.collect()
    gc.freeze()  # see the module docstring: a full GC pass would stall the loop for ~0.2 s
    try:
        beat = asyncio.create_task(_heartbeat(stop, gaps))
        await asyncio.sleep(HEARTBEAT_S * 3)
        started = time.perf_counter()
        results = await asyncio.gather(*calls)
        elapsed = time.perf_counter() - started
        stop.set()
        await beat
    finally:
        gc.unfreeze()
    # The loop kept ticking throughout: many beats, none delayed much.
    assert max(gaps) < MAX_GAP_S, f"event loop blocked for {max(gaps):.3f} s (work took {elapsed:.2f} s)"
    assert len(gaps) >= max(5, elapsed / (HEARTBEAT_S * 20)), (len(gaps), elapsed)
    return results, gaps, elapsed


def _read(mem: AriadneMemory, i: int, q: str) -> Any:
    """Every 4th question goes through ``aanswer`` (extractive: no LLM), the rest ``aretrieve``."""
    return mem.aanswer(q, user_id="reader") if i % 4 == 0 else mem.aretrieve(q, user_id="reader")


@pytest.mark.slow
async def test_concurrent_async_calls_keep_the_loop_responsive(tmp_path: Path, no_llm: None) -> None:
    mem = AriadneMemory(tmp_path / "async", CFG, embedder=HashEmbedder())
    mem.add(_turns(120, 0, "r"), user_id="reader")
    mem.flush()
    reader_ids = {e.id for e in mem.entries("reader")}
    questions = _questions()
    write_batches = {f"writer{w}": _turns(12, 1000 + 12 * w, f"w{w}") for w in range(12)}

    # Warm up lazy imports and caches outside the measured window (first retrieve ~2 s).
    await mem.aretrieve("warm up", user_id="reader")
    await mem.aanswer("warm up", user_id="reader")

    # Phase 1: writes and reads at once.
    calls: list[Any] = []
    for i, q in enumerate(questions):
        user = f"writer{i // 12}"
        if i % 12 == 0 and user in write_batches:
            calls.append(mem.aadd(write_batches[user], user_id=user))
        calls.append(_read(mem, i, q))
    results, _, _ = await _run_with_heartbeat(calls)
    assert sorted(r for r in results if isinstance(r, int)) == [12] * len(write_batches)
    reads = [r for r in results if not isinstance(r, int)]
    assert len(reads) == len(questions)
    for i, got in enumerate(reads):
        graph = got.graph if i % 4 == 0 else got
        assert {f.id for f in graph.facts} <= reader_ids
        if i % 4 == 0:
            assert got.mode == "extractive"
    mem.flush()
    sync = AriadneMemory(tmp_path / "sync", CFG, embedder=HashEmbedder())
    for user, batch in write_batches.items():
        sync.add(batch, user_id=user)
    sync.flush()
    for user in write_batches:
        assert _entry_view(mem, user) and _entry_view(mem, user) == _entry_view(sync, user)
        assert mem.stats(user) == sync.stats(user)
    sync.close()

    # Phase 2: reads only on the final memory, compared exactly with the sync API.
    reads, _, _ = await _run_with_heartbeat([_read(mem, i, q) for i, q in enumerate(questions)])
    for i, (q, got) in enumerate(zip(questions, reads, strict=True)):
        if i % 4 == 0:
            assert got.mode == "extractive"
            assert _answer_view(got) == _answer_view(mem.answer(q, user_id="reader"))
        else:
            assert got.to_text() == mem.retrieve(q, user_id="reader").to_text()
    mem.close()
