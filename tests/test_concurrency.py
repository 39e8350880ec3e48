"""8 concurrent writers (4 threads + 4 processes) and readers on one store path."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ariadnemem_core import AriadneMemory, Config, HashEmbedder, Turn

N = 20
CFG = dict(window_size=4, enable_gating=False, enable_coarsening=False)
WRITER = r'''
import sys
from ariadnemem_core import AriadneMemory, Config, HashEmbedder, Turn
mem = AriadneMemory(sys.argv[1], Config(window_size=4, enable_gating=False, enable_coarsening=False),
                    embedder=HashEmbedder())
w = sys.argv[2]
for i in range(int(sys.argv[3])):
    mem.add(Turn("W" + w, f"Writer {w} logged item {i} of batch {w}x{i} in ledger {w}.", None, f"{w}-{i}"),
            user_id="shared")
mem.close()
'''


def _write(mem: AriadneMemory, k: int, errors: list[BaseException]) -> None:
    """Thread ``k``'s N turns, one add each."""
    try:
        for i in range(N):
            mem.add(Turn(f"T{k}", f"Thread {k} logged item {i} of batch t{k}x{i}.", None, f"t{k}-{i}"),
                    user_id="shared")
    except BaseException as exc:
        errors.append(exc)


def _read(mem: AriadneMemory, stop: threading.Event, bad: list[str], errors: list[BaseException]) -> None:
    """Read and retrieve until ``stop``; an entry missing its text, turns or vector is ``bad``."""
    try:
        while not stop.is_set():
            for e in mem.entries("shared"):
                if not e.text or not e.source_turn_ids or e.embedding is None:
                    bad.append(e.id)
            mem.retrieve("which items were logged in the ledger?", user_id="shared")
    except BaseException as exc:
        errors.append(exc)


@pytest.mark.slow
def test_eight_writers_and_readers(tmp_path: Path):
    store = tmp_path / "store"
    mem = AriadneMemory(store, Config(**CFG), embedder=HashEmbedder())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(store), f"p{k}", str(N)], env=env)
             for k in range(4)]
    errors: list[BaseException] = []
    bad: list[str] = []
    stop = threading.Event()
    writers = [threading.Thread(target=_write, args=(mem, k, errors)) for k in range(4)]
    readers = [threading.Thread(target=_read, args=(mem, stop, bad, errors)) for _ in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    for p in procs:
        assert p.wait(timeout=300) == 0
    stop.set()
    for t in readers:
        t.join()
    assert not errors and not bad
    mem.flush()
    expected = {f"t{k}-{i}" for k in range(4) for i in range(N)} | {f"p{k}-{i}" for k in range(4) for i in range(N)}
    entries = mem.entries("shared")
    seen = [t for e in entries for t in e.source_turn_ids]
    assert sorted(seen) == sorted(expected)  # every acknowledged turn exactly once
    assert len({e.id for e in entries}) == len(entries)
    # The dense index of this process sees what the other processes wrote.
    assert mem.storage.dense_count("shared") == len(entries)
    hits = mem.storage.dense_search(HashEmbedder().embed(["Writer p3 logged item 7 of batch p3x7"])[0], 3,
                                    user_id="shared")
    assert any(e.id == hits[0][0] and "p3-7" in e.source_turn_ids for e in entries)
    mem.close()
