"""How fast a waiting writer gets the store's cross-process lock once it is released.

``python scripts/lock_handoff.py`` compares the store's own timed ``flock``
(``store.locking.flock_within``: non-blocking attempts, 1 ms growing to 50 ms between
them) with ``filelock.FileLock`` (installed with the default dependencies, through
``tokenizers``) at its default 50 ms poll interval and at a 1 ms one. A child process holds
the lock for a random time in each range (a window commit takes milliseconds, a large
import seconds) and notes when it releases it; the parent, waiting from the start, notes
when it gets it. Writes bench-results/lock-handoff/lock-handoff.json and .md.
"""

from __future__ import annotations

import fcntl
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import filelock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ariadnemem_core.store.locking import flock_within  # noqa: E402

OUT = REPO / "bench-results" / "lock-handoff"
HOLDS_MS = ((2, 10), (10, 40), (50, 150), (200, 400))
TRIALS = 20
LOCKS = ("ariadnemem flock_within", "filelock (50 ms poll)", "filelock (1 ms poll)")


def _hold(path: str, seconds: float, ready: Any, released: Any) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    ready.set()
    time.sleep(seconds)
    t = time.time()
    fcntl.flock(fd, fcntl.LOCK_UN)
    released.put(t)


def _acquire(kind: str, path: str) -> float:
    if kind == LOCKS[0]:
        with open(path, "a+") as fh:
            flock_within(fh.fileno(), 60.0, "bench")
            t = time.time()
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return t
    lock = filelock.FileLock(path, poll_interval=0.05 if kind == LOCKS[1] else 0.001)
    lock.acquire(timeout=60)
    t = time.time()
    lock.release()
    return t


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(), "write.lock")
    rng = random.Random(0)
    rows: list[dict[str, Any]] = []
    for lo, hi in HOLDS_MS:
        for kind in LOCKS:
            waits = []
            for _ in range(TRIALS):
                ready, released = mp.Event(), mp.Queue()
                child = mp.Process(target=_hold, args=(path, rng.uniform(lo, hi) / 1000, ready, released))
                child.start()
                ready.wait()
                got = _acquire(kind, path)
                waits.append((got - released.get()) * 1000)
                child.join()
            rows.append({"hold_ms": [lo, hi], "lock": kind, "median_ms": statistics.median(waits),
                         "mean_ms": statistics.mean(waits), "max_ms": max(waits), "trials": TRIALS})
            print(f"hold {lo}-{hi} ms, {kind}: median {rows[-1]['median_ms']:.1f} ms", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "lock-handoff.json").write_text(json.dumps({"rows": rows, "cpus": os.cpu_count()}, indent=2) + "\n")
    lines = ["# Lock hand-off: wait after release (ms)", "",
             f"`python scripts/lock_handoff.py`, {TRIALS} trials per cell, {os.cpu_count()} CPUs.", "",
             "| lock held | " + " | ".join(LOCKS) + " |", "|---|" + "---|" * len(LOCKS)]
    for lo, hi in HOLDS_MS:
        cells = [r for r in rows if r["hold_ms"] == [lo, hi]]
        lines.append(f"| {lo}-{hi} ms | " + " | ".join(
            f"median {r['median_ms']:.1f}, max {r['max_ms']:.1f}" for r in cells) + " |")
    (OUT / "lock-handoff.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
