"""The dense index: chromadb collections derived from the SQLite records, and reconcile.

One collection per user (the scope partition: a query can only ever see its own user's
vectors; agent and session are metadata filters inside the query) with explicit
embeddings (chromadb's default embedding function would try to download a model). It is
derived data: rows not yet confirmed in chromadb carry ``indexed = 0`` and are (re)indexed
on open, deletions go through a tombstone table, and a collection whose count disagrees
with SQLite is rebuilt from the stored embeddings (:meth:`DenseIndex.reconcile`).

Server mode (``chroma_host`` / ``chroma_port`` or an injected ``chroma_client``): the same
collections live on a Chroma server, named after the store's id so that several stores can
share one server without ever reading each other's vectors.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import StoreError
from ..models import Entry, Scope, to_epoch
from .locking import Guarded
from .records import scope_sql
from .rows import ENTRY_COLUMNS, readable

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

log = logging.getLogger(__name__)

#: Port ``chroma run`` listens on by default.
DEFAULT_CHROMA_PORT = 8000
#: A user with at most this many entries is searched exactly, over the vectors the records
#: hold, instead of through chromadb's approximate (HNSW) index: one matrix product of
#: this size takes well under a millisecond, the result no longer depends on how the
#: index happened to be built, and a process that only reads never imports chromadb
#: (about 40% of a short-lived process's first retrieve). Larger users and server mode
#: go through chromadb.
EXACT_SEARCH_MAX = 5000
#: Scopes whose vectors an exact search keeps in memory (least recently used first out;
#: at most about 7.7 MB each), valid until the store's next write.
VECTOR_CACHE_SCOPES = 8

#: Where a damaged embedded index is moved by :meth:`DenseIndex.rebuild_dense` (the
#: previous one replaced): kept for inspection, never read again.
DAMAGED_DIRNAME = "chroma.damaged"


class DenseUnreadable(StoreError):
    """The embedded dense index cannot be opened or read (a damaged chromadb file)."""


def collection_name(user_id: str, prefix: str = "") -> str:
    """The dense-index collection of one user (``prefix``: the store id in server mode)."""
    return prefix + "u-" + hashlib.sha1(user_id.encode("utf-8")).hexdigest()[:32]


class DenseIndex(Guarded):
    """The chromadb side of :class:`~ariadnemem_core.store.Store` (vectors, search, reconcile)."""

    #: (host, port) of the Chroma server, or None (embedded or injected client).
    _server: tuple[str, int] | None
    #: A caller's configured chromadb client, or None.
    _injected: ClientAPI | None
    #: The chromadb client once opened (see ``_client``), else None.
    _chroma: ClientAPI | None
    #: Whether this process has reconciled the dense index with the records yet.
    _reconciled: bool
    _chroma_prefix: str
    _collections: dict[str, Collection]
    _dense_behind: bool
    dim: int
    #: (what was wrong, entries re-indexed) of each rebuild of a damaged index since open.
    dense_repairs: list[tuple[str, int]]

    if TYPE_CHECKING:  # provided by Records (the two are mixed into Store)
        def bad_entries(self, *, only_unindexed: bool = False,
                        user_id: str | None = None) -> list[tuple[str, str]]: ...

        def quarantine_entries(self, bad: Sequence[tuple[str, str]]) -> int: ...

    @property
    def remote(self) -> bool:
        """True when the dense index lives on a Chroma server (or an injected client)."""
        return self._server is not None or self._injected is not None

    @property
    def dense_location(self) -> str:
        """Where the vectors are, for messages and ``stats``: a path or a server URL."""
        if self._server:
            return f"chroma server {self._server[0]}:{self._server[1]}"
        if self._injected is not None:
            return f"injected chroma client ({type(self._injected).__name__})"
        return str(self.path / "chroma")


    def _client(self) -> ClientAPI:
        """The chromadb client, opened (and chromadb imported) on first use; a closed store has none."""
        if self._chroma is None:
            if self._closed:
                raise StoreError("the store is closed")
            self._chroma = self._open_chroma()
        return self._chroma

    def _open_chroma(self) -> ClientAPI:
        import chromadb
        from chromadb.config import Settings

        if self._injected is not None:
            return self._injected
        if self._server is not None:
            host, port = self._server
            try:
                client = chromadb.HttpClient(host=host, port=port,
                                             settings=Settings(anonymized_telemetry=False))
                client.heartbeat()
                return client
            except Exception as exc:
                raise StoreError(f"cannot reach the Chroma server at {host}:{port} ({type(exc).__name__}: {exc}); "
                                 f"is `chroma run --host {host} --port {port}` running?") from exc
        try:
            return chromadb.PersistentClient(
                path=str(self.path / "chroma"),
                settings=Settings(anonymized_telemetry=False, allow_reset=False),
            )
        except Exception as exc:
            _forget_system(str(self.path / "chroma"))
            raise DenseUnreadable(f"cannot open the dense index at {self.path / 'chroma'}: {exc}") from exc

    def _ensure_reconciled(self) -> None:
        """Reconcile once, before this process's first dense operation (see :meth:`reconcile`)."""
        if self._reconciled:
            return
        self._reconciled = True
        try:
            # on_open: no write lock unless repairs are due, and none at all if a stopped
            # writer holds it (the repairs then wait for the next write).
            self.reconcile(on_open=True)
        except DenseUnreadable as exc:
            # Derived data: rebuilt from the records (under the write lock) rather than
            # failing every read and write until someone deletes the folder by hand.
            log.warning("%s; rebuilding it from the records (the damaged one is kept as %s)", exc,
                        DAMAGED_DIRNAME)
            try:
                self.dense_repairs.append((str(exc), self.rebuild_dense()))
            except BaseException:
                self._reconciled = False
                raise
        except BaseException:
            self._reconciled = False
            raise

    def _collection(self, user_id: str) -> Collection:
        self._ensure_reconciled()
        self._refresh_if_stale()
        col = self._collections.get(user_id)
        if col is None:
            # embedding_function=None is essential: the default one downloads a model.
            col = self._client().get_or_create_collection(
                collection_name(user_id, self._chroma_prefix),
                embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}},
            )
            self._collections[user_id] = col
        return col


    def _refresh_if_stale(self) -> None:
        gen = self._generation()
        if gen == self._gen and not self._stale:
            return
        self._gen = gen
        self._stale = False
        self._collections.clear()
        if self.remote or self._chroma is None:  # a shared server, or nothing opened yet
            return
        close_client(self._chroma)
        self._chroma = self._open_chroma()


    def rebuild_dense(self) -> int:
        """Move the embedded dense index aside (``chroma.damaged``) and rebuild it from
        the records; returns how many entries were indexed.

        Why a move, not a repair: the index is derived data (every vector is also in
        SQLite), and a damaged chromadb file fails every read and write of the store.
        Server mode has no folder to move: its collections are dropped and re-created.
        """
        with self._write_guard():
            with self._lock:
                if self.remote:
                    for (user_id,) in self._read("SELECT DISTINCT user_id FROM entries"):
                        with suppress(Exception):
                            self._client().delete_collection(collection_name(user_id, self._chroma_prefix))
                else:
                    close_client(self._chroma)
                    self._chroma = None
                    folder = self.path / "chroma"
                    _forget_system(str(folder))
                    if folder.exists():
                        aside = self.path / DAMAGED_DIRNAME
                        shutil.rmtree(aside, ignore_errors=True)
                        folder.rename(aside)
                self._collections.clear()
            with self._tx() as db:
                db.execute("UPDATE entries SET indexed = 0")
                db.execute("DELETE FROM tombstones")
            self._reconciled = True  # the reconcile below is this process's first
            report = {"reindexed": 0, "removed": 0, "rebuilt_users": 0, "quarantined": 0}
            self._reconcile(report)
        return report["reindexed"]

    def _drift(self) -> tuple[bool, list[str]]:
        """(tombstones or unindexed rows exist, users whose vector count differs)."""
        dirty = bool(self._read("SELECT 1 FROM tombstones LIMIT 1")
                     or self._read("SELECT 1 FROM entries WHERE indexed = 0 LIMIT 1"))
        drifted = []
        with self._lock:
            for (user_id, n) in self._read("SELECT user_id, COUNT(*) FROM entries GROUP BY user_id"):
                if self._collection(user_id).count() != n:
                    drifted.append(user_id)
        return dirty, drifted

    def reconcile(self, *, on_open: bool = False) -> dict[str, int]:
        """Make the dense index agree with the records (run before a process's first dense
        operation, and on open in server mode; cheap when clean).

        Rows that cannot be indexed (a vector of the wrong size or with NaN/Inf, broken
        fields) are quarantined with their reason instead of failing this and every
        later open. ``on_open``: check without the write lock first, and if repairs are
        needed but the lock stays taken (a stopped writer), leave them to the next write
        rather than refuse to open.
        """
        report = {"reindexed": 0, "removed": 0, "rebuilt_users": 0, "quarantined": 0}
        if on_open:
            dirty, drifted = self._drift()
            if not dirty and not drifted:
                return report
        try:
            guard = self._write_guard()
            guard.__enter__()
        except StoreError:
            if not on_open:
                raise
            self._dense_behind = True
            return report
        try:
            self._reconcile(report)
        finally:
            guard.__exit__(None, None, None)
        return report

    def _reconcile(self, report: dict[str, int]) -> None:
        bad = self.bad_entries(only_unindexed=True)
        if bad:
            report["quarantined"] += self.quarantine_entries(bad)
        with self._lock:
            for entry_id, user_id in self._read("SELECT entry_id, user_id FROM tombstones"):
                self._collection(user_id).delete(ids=[entry_id])
                report["removed"] += 1
        with self._tx() as db:
            db.execute("DELETE FROM tombstones")
        pending = self._read(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE indexed = 0 ORDER BY seq")
        if pending:
            self._index(readable(pending))
            report["reindexed"] = len(pending)
        for user_id in self._drift()[1]:
            report["quarantined"] += self._rebuild_user(user_id)
            report["rebuilt_users"] += 1

    def _rebuild_user(self, user_id: str) -> int:
        """Re-create a user's collection from the records; returns rows quarantined."""
        bad = self.bad_entries(user_id=user_id)
        moved = self.quarantine_entries(bad) if bad else 0
        with self._lock:
            with suppress(Exception):
                self._client().delete_collection(collection_name(user_id, self._chroma_prefix))
            self._collections.pop(user_id, None)
        rows = self._read(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE user_id = ? ORDER BY seq", (user_id,))
        self._index(readable(rows))
        return moved

    @contextmanager
    def _dense(self, what: str) -> Iterator[None]:
        """Turn a dense-index failure (server down, timeout) into a clear StoreError.

        Records are committed to SQLite before any dense write, so a failure here loses
        nothing: the rows stay ``indexed = 0`` and are pushed again by ``reconcile()``,
        which the next dense operation runs first.
        """
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            self._dense_behind = True
            raise StoreError(f"dense index ({self.dense_location}) failed to {what}: {type(exc).__name__}: {exc}. "
                             "Records are safe in SQLite; vectors are re-pushed on the next operation "
                             "or reconcile().") from exc

    def _catch_up(self) -> None:
        """Re-push what a failed dense write left behind (no-op when nothing failed)."""
        if self._dense_behind:
            self._dense_behind = False
            with self._dense("catch up"):
                self.reconcile()

    def _index(self, entries: Sequence[Entry]) -> None:
        """Upsert entries into chromadb, then mark them indexed in SQLite."""
        by_user: dict[str, list[Entry]] = {}
        for entry in entries:
            by_user.setdefault(entry.user_id, []).append(entry)
        for user_id, group in by_user.items():
            with self._lock, self._dense("store vectors"):
                col = self._collection(user_id)
                for start in range(0, len(group), 1000):
                    chunk = group[start : start + 1000]
                    col.upsert(
                        ids=[e.id for e in chunk],
                        embeddings=np.stack([e.vector for e in chunk]).astype(np.float32),
                        metadatas=[chroma_metadata(e) for e in chunk],
                    )
        with self._tx() as db:
            db.executemany("UPDATE entries SET indexed = 1 WHERE id = ?", [(e.id,) for e in entries])


    def _drop_vectors(self, entries: Sequence[Entry]) -> None:
        by_user: dict[str, list[str]] = {}
        for e in entries:
            by_user.setdefault(e.user_id, []).append(e.id)
        with self._lock, self._dense("delete vectors"):
            for user_id, ids in by_user.items():
                col = self._collection(user_id)
                for start in range(0, len(ids), 1000):
                    col.delete(ids=ids[start : start + 1000])
            with self._tx() as db:
                db.executemany("DELETE FROM tombstones WHERE entry_id = ?", [(e.id,) for e in entries])


    def dense_search(
        self, scope: Scope, vectors: np.ndarray, k: int
    ) -> list[list[tuple[str, float]]]:
        """Top-``k`` (entry id, cosine) per query vector, inside the scope's partition."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(vectors) == 0:
            return []
        n = int(self._read("SELECT COUNT(*) FROM entries WHERE user_id = ?", (scope.user_id,))[0][0])
        if 0 < n <= EXACT_SEARCH_MAX and not self.remote:
            return self._exact_search(scope, vectors, k)
        self._catch_up()  # before the connection lock: it may take the writer locks
        with self._lock:
            if n == 0:  # no collection is created for a user who has nothing
                return [[] for _ in range(len(vectors))]
            with self._dense("search"):
                col = self._collection(scope.user_id)
                where = _chroma_where(scope)
                res = col.query(query_embeddings=vectors, n_results=min(k, n), where=where,
                                include=["distances"])
        return [
            [(i, 1.0 - float(d)) for i, d in zip(ids, dists, strict=True)]
            for ids, dists in zip(res["ids"], res["distances"] or [], strict=True)
        ]

    def _exact_search(self, scope: Scope, vectors: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """:meth:`dense_search` by cosine over every vector of the scope (see :data:`EXACT_SEARCH_MAX`)."""
        ids, mat = self._scope_vectors(scope)
        if not ids:
            return [[] for _ in range(len(vectors))]
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        sims = (vectors / np.where(norms > 0, norms, 1.0)) @ mat.T
        k = min(k, len(ids))
        found = []
        for row in sims:
            top = np.argpartition(-row, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
            top = top[np.lexsort((top, -row[top]))]  # best first; ties in storage order
            found.append([(ids[i], float(row[i])) for i in top])
        return found

    def _scope_vectors(self, scope: Scope) -> tuple[list[str], np.ndarray]:
        """:meth:`_unit_vectors`, read once per store generation (see :data:`VECTOR_CACHE_SCOPES`)."""
        key = (scope.user_id, scope.agent_id, scope.session_id)
        with self._lock:
            gen = self._generation()
            cache: OrderedDict[tuple[str | None, ...], tuple[int, list[str], np.ndarray]] = \
                self.__dict__.setdefault("_vector_cache", OrderedDict())
            hit = cache.get(key)
            if hit is None or hit[0] != gen:
                hit = (gen, *self._unit_vectors(scope))
                cache[key] = hit
            cache.move_to_end(key)
            while len(cache) > VECTOR_CACHE_SCOPES:
                cache.popitem(last=False)
            return hit[1], hit[2]

    def _unit_vectors(self, scope: Scope) -> tuple[list[str], np.ndarray]:
        """The scope's entry ids and unit-length vectors, in storage order. A row whose
        vector is unusable is left out (the next reconcile quarantines it)."""
        sql, params = scope_sql("SELECT id, embedding FROM entries WHERE user_id = ? AND length(embedding) = ?",
                                 [scope.user_id, 4 * self.dim], scope)
        rows = self._read(sql + " ORDER BY seq", params)
        if not rows:
            return [], np.zeros((0, self.dim), dtype=np.float32)
        mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), self.dim)
        norms = np.linalg.norm(mat, axis=1)
        keep = np.isfinite(norms) & (norms > 0)
        ids = [r[0] for r, ok in zip(rows, keep, strict=True) if ok]
        return ids, np.ascontiguousarray(mat[keep] / norms[keep, None])

    @property
    def collection_prefix(self) -> str:
        """What this store's collection names start with ("" embedded, the store id on a server)."""
        return self._chroma_prefix

    def dense_collection(self, user_id: str) -> str:
        """The name of ``user_id``'s collection in this store's dense index.

        Args:
            user_id: a user of the store.

        Returns:
            The collection name (it carries this store's id in server mode).
        """
        return collection_name(user_id, self._chroma_prefix)

    def dense_count(self, user_id: str) -> int:
        """Vectors the dense index holds for ``user_id`` (equals its entry count once reconciled)."""
        with self._lock, self._dense("count vectors"):
            return int(self._collection(user_id).count())


def _forget_system(persist_directory: str) -> None:
    """Drop chromadb's cached system for one folder.

    chromadb keeps one system per path for the whole process, even one whose start
    failed, so every later client of that path would get the broken one. Its only public
    reset, ``SharedSystemClient.clear_system_cache()``, drops every path's system, and the
    other stores' open clients look theirs up there (they would fail), so this pops the
    one folder from its private registry: the only reach into chromadb's internals,
    checked on the installed version by ``tests/test_no_hang_no_loss.py``.
    """
    with suppress(Exception):
        from chromadb.api.shared_system_client import SharedSystemClient

        system = SharedSystemClient._identifier_to_system.pop(persist_directory, None)
        SharedSystemClient._identifier_to_refcount.pop(persist_directory, None)
        if system is not None:
            with suppress(Exception):
                system.stop()


def close_client(client: ClientAPI | None) -> None:
    """Close a chromadb client we created, best effort (not every client type can close)."""
    close = getattr(client, "close", None)
    if close is not None:
        with suppress(Exception):
            close()


def chroma_metadata(entry: Entry) -> dict[str, Any]:
    """The metadata the dense index keeps with ``entry``'s vector: its agent, session and
    timestamp, which the scope filter and a merge's refresh need. chromadb metadata values
    cannot be None: "" marks an absent agent or session, -1 an absent timestamp."""
    ts = to_epoch(entry.timestamp)
    return {
        "agent_id": entry.agent_id or "",
        "session_id": entry.session_id or "",
        "ts": float(ts) if ts is not None else -1.0,
    }


def _chroma_where(scope: Scope) -> dict[str, Any] | None:
    clauses: list[dict[str, Any]] = []
    if scope.agent_id is not None:
        clauses.append({"agent_id": scope.agent_id})
    if scope.session_id is not None:
        clauses.append({"session_id": scope.session_id})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}

