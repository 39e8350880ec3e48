"""Who may write, and when a reader must look again: the store's concurrency layer.

Threads: a writer ``RLock`` and a connection ``RLock`` (always taken in that order; the
connection lock is held only while a statement or a dense call runs). Processes: SQLite
in WAL mode with a busy timeout serializes the records, an exclusive ``flock`` on
``write.lock`` serializes writers across the SQLite transaction *and* the chromadb write
that follows it, and a generation counter in ``meta`` (bumped by every write) tells a
process that another one wrote: its chromadb client, which caches the vector index in
memory, is then reopened before the next dense read or write, and its read cache is
emptied. Readers never take the file lock; they see whole entries (SQLite snapshots), at
worst without the vectors of a write that is still in flight.

Every wait is bounded: the writer locks are waited for at most ``lock_timeout`` seconds
(``ARIADNEMEM_LOCK_TIMEOUT``, default 60), then a :class:`StoreError` says the store is
busy. Writers hold the locks only around commits (extraction runs outside them), so a
wait that long means a writer is stuck (stopped, or hung in its commit), not busy.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any

from cachetools import LRUCache

from ..errors import StoreError

#: The records file inside a store directory.
DB_FILENAME = "memory.sqlite3"
#: The lock files a store directory holds: the first set-up's and the writers'. A directory
#: holding only these is a store being created (or whose creation was killed), not
#: someone else's files.
INIT_LOCK = "init.lock"
WRITE_LOCK = "write.lock"
LOCK_FILES = frozenset({INIT_LOCK, WRITE_LOCK})
#: Environment variable overriding :data:`DEFAULT_LOCK_TIMEOUT_S`.
ENV_LOCK_TIMEOUT = "ARIADNEMEM_LOCK_TIMEOUT"
#: Longest wait for a writer lock, in seconds. A commit takes milliseconds to a few
#: seconds (a large import); a lock held for a minute belongs to a stuck process.
DEFAULT_LOCK_TIMEOUT_S = 60.0
#: Longest lock wait accepted, in seconds (a day): ``threading`` and Postgres cannot wait
#: for infinity (an OverflowError from inside at the first write).
MAX_LOCK_TIMEOUT_S = 86_400.0


def lock_timeout_from_env(value: float | None = None) -> float:
    """``value``, else ``ARIADNEMEM_LOCK_TIMEOUT``, else the default (seconds, > 0)."""
    if value is None:
        raw = os.environ.get(ENV_LOCK_TIMEOUT, "")
        try:
            value = float(raw) if raw.strip() else DEFAULT_LOCK_TIMEOUT_S
        except ValueError:
            raise StoreError(f"{ENV_LOCK_TIMEOUT} must be a number of seconds, got {raw!r}") from None
    if not 0 < value <= MAX_LOCK_TIMEOUT_S:
        raise StoreError(f"lock timeout must be a number of seconds in (0, {MAX_LOCK_TIMEOUT_S:g}], got {value}")
    return float(value)


def flock_within(fd: int, timeout: float, what: str) -> None:
    """Take an exclusive ``flock`` on ``fd``, waiting at most ``timeout`` seconds.

    ``flock`` itself cannot time out, so this polls ``LOCK_NB`` with a growing sleep
    (1 ms to 50 ms): the cost of a free lock is one system call.

    Raises:
        StoreError: the lock stayed taken for ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"timed out after {timeout:g} s waiting for the {what} lock: another process holds it "
                    f"(stopped or hung?); retry later, raise {ENV_LOCK_TIMEOUT}, or stop that process"
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


class Guarded:
    """The SQLite connection with its locks, transactions, generation counter and read cache.

    The base of :class:`~ariadnemem_core.store.Store`; it knows nothing of the tables
    beyond ``meta.generation``.
    """

    CACHE_SIZE = 4096

    path: Path
    _db: sqlite3.Connection
    _lockfile: IO[str]

    def _init_guard(self, lock_timeout: float | None = None) -> None:
        self._lock_timeout = lock_timeout_from_env(lock_timeout)
        self._lock = threading.RLock()
        self._wlock = threading.RLock()
        self._closed = False
        self._guard_depth = 0
        self._gen = -1
        self._stale = False
        # Read cache for the hot retrieval path, valid for one store generation: any
        # write, by this process or another, bumps the generation and empties it.
        self._cache: LRUCache[tuple[Any, ...], Any] = LRUCache(maxsize=self.CACHE_SIZE)
        self._cache_gen = -1

    def _connect(self) -> None:
        """Open the writer lock file and the SQLite connection (WAL, busy timeout)."""
        # Cross-process writer lock (see ``_write_guard``).
        self._lockfile = (self.path / WRITE_LOCK).open("a+")
        self._db = sqlite3.connect(
            self.path / DB_FILENAME, timeout=60.0, check_same_thread=False,
            isolation_level=None,
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=60000")

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (every later call raises :class:`StoreError`)."""
        return self._closed

    @contextmanager
    def _write_guard(self) -> Iterator[None]:
        if self._closed:
            raise StoreError("the store is closed")
        if not self._wlock.acquire(timeout=self._lock_timeout):
            raise StoreError(f"timed out after {self._lock_timeout:g} s waiting for the write lock held by "
                             "another thread of this process")
        try:
            if self._closed:
                raise StoreError("the store is closed")
            if self._guard_depth == 0:
                flock_within(self._lockfile.fileno(), self._lock_timeout, "store's write")
            self._guard_depth += 1
            try:
                yield
            finally:
                self._guard_depth -= 1
                if self._guard_depth == 0:
                    fcntl.flock(self._lockfile.fileno(), fcntl.LOCK_UN)
        finally:
            self._wlock.release()

    def write_guard(self) -> AbstractContextManager[None]:
        """Hold the cross-process writer lock across several store calls (reentrant)."""
        return self._write_guard()

    def import_guard(self) -> AbstractContextManager[None]:
        """An import's checks and writes as one step: the writer lock (see :meth:`write_guard`)."""
        return self._write_guard()

    def _generation(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0


    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._write_guard(), self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                if self._generation() != self._gen:
                    self._stale = True  # another process wrote since we last looked
                self._db.execute(
                    "INSERT INTO meta(key, value) VALUES ('generation', '1') ON CONFLICT(key) "
                    "DO UPDATE SET value = CAST(value AS INTEGER) + 1")
                yield self._db
                self._db.execute("COMMIT")
                self._gen = self._generation()
            except BaseException as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.IntegrityError):
                    raise StoreError(_write_failed(self.path / DB_FILENAME, exc)) from exc
                raise

    def _fresh_cache(self) -> LRUCache[tuple[Any, ...], Any]:
        """The read cache, emptied first if any process wrote since it was filled."""
        gen = self._generation()
        if gen != self._cache_gen:
            self._cache.clear()
            self._cache_gen = gen
        return self._cache

    def _remember(self, key: tuple[Any, ...], value: Any) -> Any:
        self._cache[key] = value  # the least recently used entry leaves when full
        return value

    def _cached(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """``compute()`` once per store generation (bounded LRU). Only for values the
        retrieval path treats as read-only; the public facade reads bypass it."""
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            cache = self._fresh_cache()
            if key in cache:
                return cache[key]  # marks it recently used
            return self._remember(key, compute())

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            return self._db.execute(sql, params).fetchall()


def _write_failed(records: Path, exc: BaseException) -> str:
    """A write the records file refused, said plainly (nothing of it was stored)."""
    reason = str(exc)
    if "readonly" in reason or "read-only" in reason:
        return (f"cannot write to the store: its records file {records} is read-only ({reason}); nothing was "
                "written. Reads still work; give this process write access to the file and its directory.")
    return f"cannot write to the store's records file {records} ({type(exc).__name__}: {reason}); nothing was written"
