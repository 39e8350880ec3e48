"""Persistent storage: the :class:`Store` protocol and its embedded backend.

:class:`Store` (:mod:`.protocol`) is what Phase I, Phase II and the facade call;
:func:`open_store` opens a backend from a path or URL. The embedded default,
:class:`SQLiteStore` (SQLite is the source of truth, chromadb the dense index), is one
object over four modules:

* :mod:`.records` - SQLite (WAL, one file) holds every entry record with its provenance
  and embedding, the update edges, pending turns, fast-path counters, attributes and
  statistics, and SQLite's FTS5 is the lexical (BM25) index, in the same transactions;
* :mod:`.dense` - the chromadb collections (embedded under ``path/chroma``, or on a Chroma
  server), derived data that :meth:`Store.reconcile` re-creates from the records;
* :mod:`.locking` - threads, processes, the generation counter and the read cache;
* :mod:`.transfer` - export and import.

**Server mode** (``chroma_host`` / ``chroma_port`` or an injected ``chroma_client``): the
same collections live on a Chroma server instead of under ``path/chroma``. Everything
else stays in the local SQLite file, which remains the source of truth, so the server
holds only derived data that ``reconcile()`` re-creates (a wiped server is rebuilt on the
next open). Collection names then carry this store's id (``meta.store_id``), so several
stores can share one server without ever reading each other's vectors.
"""

from __future__ import annotations

import fcntl
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..models import Entry, Scope, Turn
from . import transfer
from .dense import DEFAULT_CHROMA_PORT, DenseIndex, chroma_metadata, close_client, collection_name
from .locking import DB_FILENAME, INIT_LOCK
from .opening import is_store_url, open_store, redact_url
from .protocol import Store
from .records import (
    SCHEMA,
    SCHEMA_VERSION,
    STAT_KEYS,
    PendingConflict,
    Records,
    WindowCommit,
    fts_query,
    scope_token,
)

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

#: Created once a store's first set-up (schema, meta, dense index files) has finished.
READY_MARKER = "ready"

__all__ = ["DB_FILENAME", "DEFAULT_CHROMA_PORT", "SCHEMA_VERSION", "STAT_KEYS", "PendingConflict", "SQLiteStore",
           "Store", "WindowCommit", "collection_name", "fts_query", "is_store_url", "open_store", "redact_url",
           "scope_token"]


class SQLiteStore(Records, DenseIndex):
    """The on-disk memory. Thread-safe (one lock; SQLite in WAL mode with a busy timeout).

    Args:
        path: the store's directory (created if missing); None for a temporary one that
            :meth:`close` removes.
        dim: the embedding dimension (checked against an existing store).
        embedder_name: the embedder's name (an existing store of another embedder is refused).
        chroma_client: a configured ``chromadb`` client to hold the vectors (server mode).
        chroma_host: a Chroma server's host (server mode); not together with ``chroma_client``.
        chroma_port: the server's port (default 8000).
        lock_timeout: longest wait for a writer lock in seconds (default
            ``ARIADNEMEM_LOCK_TIMEOUT`` or 60); a longer wait raises :class:`StoreError`.

    Opening never needs the write lock of a healthy store (a stopped writer cannot keep
    others from reading), and several processes may open a brand-new directory at once:
    the first-time set-up (schema, meta, the chromadb files) runs under ``init.lock``.
    """

    def __init__(self, path: str | Path | None, *, dim: int, embedder_name: str,
                 chroma_client: ClientAPI | None = None, chroma_host: str | None = None,
                 chroma_port: int | None = None, lock_timeout: float | None = None) -> None:
        self._temp = path is None
        if chroma_client is not None and chroma_host is not None:
            raise StoreError("pass either chroma_client or chroma_host, not both")
        #: (host, port) of the Chroma server, the injected client, or neither (embedded).
        self._server = (chroma_host, int(chroma_port or DEFAULT_CHROMA_PORT)) if chroma_host else None
        self._injected = chroma_client
        self._chroma_prefix = ""
        #: Set when a dense write failed after its SQLite commit: the rows are safe (they
        #: carry ``indexed = 0``) and the next write or dense read reconciles first.
        self._dense_behind = False
        self.dense_repairs = []
        self.path = Path(tempfile.mkdtemp(prefix="ariadnemem-")) if path is None else Path(path)
        self.dim = dim
        self._init_guard(lock_timeout)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            init = (self.path / INIT_LOCK).open("a+")
        except OSError as exc:
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc
        if chroma_client is None and not (self.path / READY_MARKER).exists():
            # A store being set up: chromadb is imported before the set-up lock, not while
            # holding it. A ready store imports it only at its first dense operation, so
            # commands that only read records (stats, entries, export) never load it.
            import chromadb  # noqa: F401
        try:
            # Serializes the *first* set-up across processes: SQLite's schema script and
            # chromadb's first migration both fail ("table ... already exists", "database
            # is locked") when several processes create the same store at once. Once one
            # process has set the store up (the READY marker), opens take no lock at all.
            if self._set_up_or_ready(init.fileno()):
                self._open(embedder_name, ready=True)
            else:
                self._open(embedder_name)
                (self.path / READY_MARKER).touch()
        finally:
            init.close()  # releases the flock
        self._collections: dict[str, Collection] = {}
        self._gen = self._generation()
        self._reconciled = False
        if self.remote:
            self._ensure_reconciled()

    def _set_up_or_ready(self, fd: int) -> bool:
        """Wait until this process holds the set-up lock (False: set the store up) or the
        store is ready (True: open it without the lock), at most ``lock_timeout``."""
        ready = self.path / READY_MARKER
        deadline = time.monotonic() + self._lock_timeout
        pause = 0.005
        while not ready.exists():
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreError(f"timed out after {self._lock_timeout:g} s waiting for another process to set "
                                     f"up the new store at {self.path}") from None
                time.sleep(pause)
                pause = min(pause * 2, 0.1)
                continue
            return ready.exists()  # it may have become ready just before we got the lock
        return True

    def _open(self, embedder_name: str, *, ready: bool = False) -> None:
        self._open_records(ready)
        try:
            self._check_meta(embedder_name)
            if self.remote:
                self._chroma_prefix = f"am{self._store_id()}-"
            # A Chroma server is reached now, so an unreachable one fails the open; the embedded
            # index opens (and is reconciled) on the first dense operation, so a process that
            # only reads records (stats, entries, export) never imports chromadb.
            self._chroma = self._open_chroma() if self.remote else None
        except BaseException:
            self._db.close()
            self._lockfile.close()
            if self._temp:
                shutil.rmtree(self.path, ignore_errors=True)
            raise

    def _open_records(self, ready: bool) -> None:
        """Connect to the records file and set up its schema. A store that was set up
        (``ready``) must still have its records: a missing or empty file is refused, and
        so is a file SQLite cannot read; both with what to do."""
        records = self.path / DB_FILENAME
        if ready:  # checked before connecting, which would create (or set up) an empty database
            if not records.exists():
                raise StoreError(_lost_records(records, "is missing"))
            if records.stat().st_size == 0:  # a set-up records file holds at least its header page
                raise StoreError(_lost_records(records, "is empty"))
        try:
            self._connect()
            if ready and not self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchall():
                raise StoreError(_lost_records(records, "is empty"))
            self._db.executescript(SCHEMA)
        except BaseException as exc:
            for handle in ("_db", "_lockfile"):
                with suppress(Exception):
                    getattr(self, handle).close()
            if getattr(exc, "sqlite_errorname", "") in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
                raise StoreError(_damaged_records(records, exc)) from exc
            if isinstance(exc, sqlite3.Error | OSError):
                raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc
            raise

    @property
    def location(self) -> str:
        """The store's directory, for messages."""
        return str(self.path)

    @staticmethod
    def exists(path: str | Path) -> bool:
        """Whether ``path`` holds a store (so a reader can refuse to create an empty one).

        Args:
            path: a store directory.

        Returns:
            True when the directory holds a store's records file, or the marker of a
            store that was set up (its records lost: opening it then says so).
        """
        return (Path(path) / DB_FILENAME).is_file() or (Path(path) / READY_MARKER).exists()

    # ------------------------------------------------------------------ writes
    def commit_window(self, commit: WindowCommit) -> None:
        """Apply one window atomically, then index its new vectors."""
        with self._write_guard():
            self._commit_window(commit)

    def _commit_window(self, commit: WindowCommit) -> None:
        scope = commit.scope
        # This process's first reconcile must run *before* the window's rows exist: run
        # lazily from inside ``_index`` it would see them unindexed and push every vector
        # of the window twice (measured: half the CPU of a 10,000-entry window).
        self._ensure_reconciled()
        if self.has_unindexed():
            self.reconcile()  # a writer died between its commit and its vector write
        self.write_window(commit)
        self._catch_up()
        if commit.added:
            self._index(commit.added)
        if commit.merged:
            # A MERGE refreshes the timestamp, which the dense index carries as metadata.
            try:
                with self._dense("update metadata"):
                    col = self._collection(scope.user_id)
                    col.update(ids=[e.id for e in commit.merged], metadatas=[chroma_metadata(e) for e in commit.merged])
            except StoreError:
                # Mark them for reconcile(), whose upsert carries the fresh metadata.
                self.mark_unindexed([e.id for e in commit.merged])
                raise

    # ------------------------------------------------------------------ deletion
    def delete(self, entry_id: str, user_id: str | None = None) -> bool:
        """Remove one entry from every index; update chains through it are repaired
        (``a -> x -> b`` becomes ``a -> b``). Returns False if it did not exist."""
        with self._write_guard():
            return self._delete(entry_id, user_id)

    def _delete(self, entry_id: str, user_id: str | None) -> bool:
        found = self.get([entry_id], user_id)
        if entry_id not in found:
            return False
        self.delete_entry_rows(found[entry_id])
        self._drop_vectors([found[entry_id]])
        return True

    def replace(self, scope: Scope, entry_ids: Sequence[str], turn_ids: Sequence[str],
                turns: Sequence[Turn]) -> int:
        """Remove entries (by id, and those of exactly ``scope`` extracted from
        ``turn_ids`` only; one MERGEd from another turn too stays, without them) and the
        scope's pending turns of ``turn_ids``, and persist new turns, in one transaction (a
        crash leaves the old state or the new one, never neither); the vectors of the
        removed entries go through the tombstones after it."""
        with self._write_guard():  # no other writer commits until the rows are replaced
            found = self.get(list(entry_ids), scope.user_id)
            taken_back = set(turn_ids)
            kept: list[Entry] = []
            for e in self.entries_of_turns(scope, turn_ids) if turn_ids else []:
                if not set(e.source_turn_ids) - taken_back:
                    found[e.id] = e
                elif e.id not in found:
                    kept.append(e)  # MERGEd from another turn too: it stays for that one
            victims = list(found.values())
            self.replace_rows(scope, victims, turn_ids, turns, kept)
            self._drop_vectors(victims)
        return len(victims)

    def forget(self, scope: Scope) -> int:
        """Remove every entry (and pending turn) of a scope; returns how many entries."""
        with self._write_guard():
            return self._forget(scope)

    def _forget(self, scope: Scope) -> int:
        victims = self.entries(scope)
        self.forget_rows(scope, victims)
        self._drop_vectors(victims)
        if scope.agent_id is None and scope.session_id is None:
            # The user is gone: drop the (now empty) collection too, so nothing of theirs,
            # not even a name, is left on a shared server.
            with self._lock, suppress(Exception):
                self._client().delete_collection(collection_name(scope.user_id, self._chroma_prefix))
            self._collections.pop(scope.user_id, None)
        return len(victims)

    def clear(self) -> None:
        """Remove everything (all users)."""
        with self._write_guard():
            self._clear()

    def _clear(self) -> None:
        users = self.clear_rows()
        with self._lock:
            for user_id in users:
                with suppress(Exception):
                    self._client().delete_collection(collection_name(user_id, self._chroma_prefix))
            self._collections.clear()

    # ------------------------------------------------------------------ checks
    def doctor(self, *, repair: bool = True) -> dict[str, Any]:
        """Check every record and the dense index; with ``repair``, fix what can be fixed.

        Unreadable entries (broken fields, a vector of the wrong size or with NaN/Inf)
        and pending turns that are not valid turns are moved to the quarantine with their
        reason, and the dense index is rebuilt wherever it disagrees with the records
        (index drift). A damaged embedded dense index (chromadb cannot open or read it)
        is moved aside to ``chroma.damaged`` and rebuilt from the records; this happens
        at the first dense operation of any open too, so ``doctor`` may find it already
        rebuilt, and says so. Nothing is deleted: quarantined rows stay in the
        ``quarantine`` table.

        Args:
            repair: quarantine and rebuild (True) or only report (False).

        Returns:
            ``entries`` checked, ``bad_entries`` found (id, reason), ``bad_pending``
            found, the reconcile counts (``reindexed``, ``removed``, ``rebuilt_users``,
            ``quarantined_now``), ``drifted_users``, ``dense_damaged`` (what was wrong
            with the dense index, or None) with ``dense_rebuilt`` (entries re-indexed),
            every ``quarantined`` row and, after a repair, how many ``messages`` the
            rebuilt message view holds.
        """
        bad = self.bad_entries()
        report: dict[str, Any] = {"entries": self.count(), "bad_entries": [list(b) for b in bad],
                                  "dense_damaged": None, "dense_rebuilt": 0}
        try:
            report["drifted_users"] = self._drift()[1]
        except StoreError as exc:  # a damaged dense index: rebuilt from the records below
            report["dense_damaged"] = str(exc)
            report["drifted_users"] = []
        if self.dense_repairs:  # found damaged (and rebuilt) by this process's first dense operation
            report["dense_damaged"], report["dense_rebuilt"] = self.dense_repairs[-1]
            if repair:
                self.dense_repairs.clear()
        bad_pending = self.bad_pending()
        report["bad_pending"] = [list(b) for b in bad_pending]
        counts = {"reindexed": 0, "removed": 0, "rebuilt_users": 0, "quarantined": 0}
        if repair:
            with self._write_guard():
                if report["dense_damaged"]:
                    report["dense_rebuilt"] = self.rebuild_dense()
                if bad:
                    counts["quarantined"] += self.quarantine_entries(bad)
                if bad_pending:
                    self.quarantine_pending(bad_pending)
                    counts["quarantined"] += len(bad_pending)
                counts = {k: counts[k] + v for k, v in self.reconcile().items()}
                # Derived from the entries: rebuilt whole (a store written before the message
                # view existed gets it here; a quarantined entry leaves it).
                report["messages"] = self.rebuild_messages()
        report.update({k: v for k, v in counts.items() if k != "quarantined"})
        report["quarantined_now"] = counts["quarantined"]
        report["quarantined"] = self.quarantined()
        return report

    # ------------------------------------------------------------------ export / import
    def export_rows(self, user_id: str | None = None) -> Iterator[dict[str, Any]]:
        """Every record as JSON-able dicts (see :func:`.transfer.export_rows`)."""
        return transfer.export_rows(self, user_id)

    def import_rows(self, rows: Iterable[dict[str, Any] | tuple[int, dict[str, Any]]]) -> int:
        """Load rows of :meth:`export_rows`, all or nothing (see :func:`.transfer.import_rows`)."""
        return transfer.import_rows(self, rows)

    def index_imported(self, entries: Sequence[Entry]) -> None:
        """Push imported entries' vectors to the dense index (after their records commit)."""
        self._index(entries)

    def close(self) -> None:
        # Wait (bounded) for a commit in flight in another thread; close regardless.
        owned = self._wlock.acquire(timeout=self._lock_timeout)
        try:
            self._close()
        finally:
            if owned:
                self._wlock.release()

    def _close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._db.close()
            self._collections.clear()
            if self._injected is None:  # an injected client belongs to the caller
                close_client(self._chroma)
            self._chroma = None
            self._lockfile.close()
        if self._temp:
            shutil.rmtree(self.path, ignore_errors=True)


def _lost_records(records: Path, state: str) -> str:
    """Why a set-up store whose records file is gone is refused, and what to do."""
    return (f"the records file {records} {state}, but this store was set up before (its set-up marker "
            f"{records.parent / READY_MARKER} is there): opening it would start an empty memory over the "
            "lost one, and the next write would make the loss final, so it is refused. The records are "
            "the source of truth and the dense index cannot rebuild them (it holds vectors, not texts): "
            f"restore {records.name} from a backup, or import an export into a new store. To start over "
            "on purpose, move the directory away.")


def _damaged_records(records: Path, exc: BaseException) -> str:
    """Why a store whose records file SQLite cannot read is refused, and what to do."""
    return (f"the records file {records} is damaged ({exc}); the store is refused rather than opened "
            f"without its records. Restore {records.name} from a backup, or import an export into a new "
            "store; the dense index is rebuilt from the records on the next open or `doctor`.")
