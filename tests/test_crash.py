"""Crash safety: SIGKILL a writer mid-ingest, reopen, nothing acknowledged is lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ariadnemem_core import AriadneMemory, Config, HashEmbedder

WRITER = r'''
import sys
from datetime import datetime, timedelta, timezone
from ariadnemem_core import AriadneMemory, Config, HashEmbedder, Turn
mem = AriadneMemory(sys.argv[1], Config(window_size=4), embedder=HashEmbedder())
t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
i = 0
while True:
    tid = f"t{i}"
    mem.add(Turn("Ana", f"Fact {i}: the parcel {i} went to warehouse w{i} on shelf s{i}.",
                 t0 + timedelta(hours=i), tid), user_id="u")
    print(tid, flush=True)  # acknowledged: add() returned
    i += 1
'''


@pytest.mark.slow
@pytest.mark.parametrize("n_acks", [3, 9, 17])
def test_sigkill_mid_ingest_loses_nothing(tmp_path: Path, n_acks: int):
    store = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(store)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    acked: list[str] = []
    deadline = time.time() + 120
    assert proc.stdout is not None
    while len(acked) < n_acks and time.time() < deadline:
        line = proc.stdout.readline()
        if line:
            acked.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(acked) >= n_acks

    mem = AriadneMemory(store, Config(window_size=4), embedder=HashEmbedder())
    try:
        covered = {t for e in mem.entries("u") for t in e.source_turn_ids}
        pending = {t.turn_id for _, _, t in mem.storage.pending("u")}
        assert set(acked) <= covered | pending
        assert not covered & pending  # a turn is either extracted or pending, never both
        n_sql = len(mem.entries("u"))
        assert mem.storage.dense_count("u") == n_sql  # dense index agrees with records
        mem.flush()
        assert set(acked) <= {t for e in mem.entries("u") for t in e.source_turn_ids}
        lexical = {i for i, _ in mem.storage.lexical_search("parcel warehouse", 500, user_id="u")}
        assert lexical == {e.id for e in mem.entries("u")}  # the lexical index agrees too
        from ariadnemem_core import Turn

        mem.add(Turn("Ana", "After the crash the ingest continues with a new fact about kites.",
                     None, "after"), user_id="u")
        mem.flush()
        assert "after" in {t for e in mem.entries("u") for t in e.source_turn_ids}
        assert mem.storage.dense_count("u") == len(mem.entries("u"))
    finally:
        mem.close()
