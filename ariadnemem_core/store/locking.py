"""Who may write, and when a reader must look again: the store's concurrency layer.

Threads: one ``RLock``. Processes: SQLite in WAL mode with a busy timeout serializes the
records, an exclusive ``flock`` on ``write.lock`` serializes writers across the SQLite
transaction *and* the chromadb write that follows it, and a generation counter in
``meta`` (bumped by every write) tells a process that another one wrote: its chromadb
client, which caches the vector index in memory, is then reopened before the next dense
read or write, and its read cache is emptied. Readers never take the file lock; they see
whole entries (SQLite snapshots), at worst without the vectors of a write that is still
in flight.
"""

from __future__ import annotations

import fcntl
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any

from ..errors import StoreError

#: The records file inside a store directory.
DB_FILENAME = "memory.sqlite3"


class Guarded:
    """The SQLite connection with its locks, transactions, generation counter and read cache.

    The base of :class:`~ariadnemem_core.store.Store`; it knows nothing of the tables
    beyond ``meta.generation``.
    """

    CACHE_SIZE = 4096

    path: Path
    _db: sqlite3.Connection
    _lockfile: IO[str]

    def _init_guard(self) -> None:
        self._lock = threading.RLock()
        self._closed = False
        self._guard_depth = 0
        self._gen = -1
        self._stale = False
        # Read cache for the hot retrieval path, valid for one store generation: any
        # write, by this process or another, bumps the generation and empties it.
        self._cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._cache_gen = -1

    def _connect(self) -> None:
        """Open the writer lock file and the SQLite connection (WAL, busy timeout)."""
        # Cross-process writer lock (see ``_write_guard``).
        self._lockfile = (self.path / "write.lock").open("a+")
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
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            if self._guard_depth == 0:
                fcntl.flock(self._lockfile.fileno(), fcntl.LOCK_EX)
            self._guard_depth += 1
            try:
                yield
            finally:
                self._guard_depth -= 1
                if self._guard_depth == 0:
                    fcntl.flock(self._lockfile.fileno(), fcntl.LOCK_UN)

    def write_guard(self) -> AbstractContextManager[None]:
        """Hold the cross-process writer lock across several store calls (reentrant)."""
        return self._write_guard()

    def _generation(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0


    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._write_guard():
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
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    CACHE_SIZE = 4096

    def _fresh_cache(self) -> OrderedDict[tuple[Any, ...], Any]:
        """The read cache, emptied first if any process wrote since it was filled."""
        gen = self._generation()
        if gen != self._cache_gen:
            self._cache.clear()
            self._cache_gen = gen
        return self._cache

    def _remember(self, key: tuple[Any, ...], value: Any) -> Any:
        self._cache[key] = value
        if len(self._cache) > self.CACHE_SIZE:
            self._cache.popitem(last=False)
        return value

    def _cached(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """``compute()`` once per store generation (bounded LRU). Only for values the
        retrieval path treats as read-only; the public facade reads bypass it."""
        with self._lock:
            cache = self._fresh_cache()
            if key in cache:
                cache.move_to_end(key)
                return cache[key]
            return self._remember(key, compute())

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            return self._db.execute(sql, params).fetchall()

