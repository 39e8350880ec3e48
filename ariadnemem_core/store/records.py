"""Persistent storage: SQLite is the source of truth, chromadb the dense index.

Why this split:

* **SQLite** (WAL, one file) holds every entry record with its provenance and embedding,
  the update edges, the pending (acknowledged but not yet extracted) turns, the fast-path
  counters and attributes, and the statistics. A window is committed in one transaction,
  so a crash leaves either the pending turns or the entries they became, never both and
  never neither.
* **Lexical index**: SQLite's own FTS5 with ``bm25()`` ranking (Okapi BM25, k1=1.2,
  b=0.75) and the Porter tokenizer. Chosen over ``bm25s`` because it lives in the same
  transaction as the records (no second file to drift), filters by scope inside the index
  (scope tokens in an indexed column), and needs no extra dependency.
* **Dense index**: chromadb ``PersistentClient`` with one collection per user (the scope
  partition: a query can only ever see its own user's vectors; agent and session are
  metadata filters inside the query) and explicit embeddings (chromadb's default embedding
  function would try to download a model). It is derived data: rows not yet confirmed in
  chromadb carry ``indexed = 0`` and are (re)indexed on open, deletions go through a
  tombstone table, and a collection whose count disagrees with SQLite is rebuilt from the
  stored embeddings.

  **Server mode** (``chroma_host`` / ``chroma_port`` or an injected ``chroma_client``): the
  same collections live on a Chroma server instead of under ``path/chroma``. Everything
  else stays in the local SQLite file, which remains the source of truth, so the server
  holds only derived data that ``reconcile()`` re-creates (a wiped server is rebuilt on
  the next open). Collection names then carry this store's id (``meta.store_id``), so
  several stores can share one server without ever reading each other's vectors.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import shutil
import sqlite3
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import AriadneMemError, StoreError
from .models import Entry, Scope, Turn, UpdateEdge, from_epoch, to_epoch

SCHEMA_VERSION = 1
#: Port ``chroma run`` listens on by default.
DEFAULT_CHROMA_PORT = 8000
#: Counters every ``stats()`` reports (zero when nothing happened yet).
STAT_KEYS = ("turns_seen", "gate_kept", "gate_dropped", "merge", "link", "add",
             "extract_windows", "extract_fallbacks", "extract_patched_turns")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    agent_id TEXT,
    session_id TEXT,
    text TEXT NOT NULL,
    keywords TEXT NOT NULL,
    persons TEXT NOT NULL,
    entities TEXT NOT NULL,
    location TEXT,
    topic TEXT,
    ts REAL,
    first_ts REAL,
    speaker TEXT,
    source_turn_ids TEXT NOT NULL,
    metadata TEXT NOT NULL,
    embedding BLOB NOT NULL,
    indexed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS entries_user_ts ON entries(user_id, ts);
CREATE INDEX IF NOT EXISTS entries_unindexed ON entries(indexed) WHERE indexed = 0;
-- (user_id, seq): the reply lookup (``following``) seeks instead of sorting the user's rows.
CREATE INDEX IF NOT EXISTS entries_user_seq ON entries(user_id, seq);
-- (user_id, speaker, seq): ``participants`` is a loose index scan, one seek per speaker.
CREATE INDEX IF NOT EXISTS entries_user_speaker ON entries(user_id, speaker, seq);
CREATE TABLE IF NOT EXISTS edges (
    src TEXT NOT NULL,
    dst TEXT NOT NULL,
    kind TEXT NOT NULL,
    user_id TEXT NOT NULL,
    similarity REAL NOT NULL DEFAULT 0,
    overlap REAL NOT NULL DEFAULT 0,
    created_at REAL,
    PRIMARY KEY (src, dst, kind)
);
CREATE INDEX IF NOT EXISTS edges_dst ON edges(dst);
CREATE TABLE IF NOT EXISTS pending_turns (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    agent_id TEXT,
    session_id TEXT,
    turn TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS recent_turns (
    user_id TEXT NOT NULL,
    agent_id TEXT,
    session_id TEXT,
    seq INTEGER NOT NULL,
    turn TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS recent_turns_user ON recent_turns(user_id, seq);
CREATE TABLE IF NOT EXISTS mentions (
    user_id TEXT NOT NULL,
    person TEXT NOT NULL,
    term TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    PRIMARY KEY (user_id, person, term, entry_id)
);
CREATE INDEX IF NOT EXISTS mentions_entry ON mentions(entry_id);
CREATE TABLE IF NOT EXISTS attributes (
    user_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    attribute TEXT NOT NULL,
    value TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    ts REAL
);
CREATE INDEX IF NOT EXISTS attributes_lookup ON attributes(user_id, subject, attribute);
CREATE INDEX IF NOT EXISTS attributes_entry ON attributes(entry_id);
CREATE TABLE IF NOT EXISTS stats (
    user_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (user_id, key)
);
CREATE TABLE IF NOT EXISTS tombstones (entry_id TEXT PRIMARY KEY, user_id TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(scope, body, tokenize = 'porter unicode61');
"""

_ENTRY_COLUMNS = (
    "seq, id, user_id, agent_id, session_id, text, keywords, persons, entities, location, topic, "
    "ts, first_ts, speaker, source_turn_ids, metadata, embedding"
)
_FTS_WORD = re.compile(r"[^\W_]+", re.UNICODE)
#: Words never worth a lexical match (the FTS index keeps them; queries drop them).
_QUERY_STOPWORDS = frozenset(
    "a an the and or but of to in on at for with by from as is are was were be been being do "
    "does did has have had what when where which who whom whose why how did i you he she it "
    "we they me him her them my your his its our their this that these those there here not "
    "no yes any some can could would should will shall may might must about into than then so "
    "if".split()
)


def scope_token(kind: str, value: str) -> str:
    """An FTS-safe token naming one scope component (indexed, so filtering is in-index)."""
    return kind + hashlib.sha1(value.encode("utf-8")).hexdigest()[:20]


def collection_name(user_id: str, prefix: str = "") -> str:
    """The dense-index collection of one user (``prefix``: the store id in server mode)."""
    return prefix + "u-" + hashlib.sha1(user_id.encode("utf-8")).hexdigest()[:32]


def fts_query(text: str, max_terms: int = 32) -> str | None:
    """A safe FTS5 MATCH expression: content words quoted and OR-ed (None if none)."""
    words: list[str] = []
    seen: set[str] = set()
    for word in _FTS_WORD.findall(text.lower()):
        if word in _QUERY_STOPWORDS or word in seen:
            continue
        seen.add(word)
        words.append(f'"{word}"')
        if len(words) >= max_terms:
            break
    return " OR ".join(words) if words else None


@dataclass(slots=True)
class WindowCommit:
    """Everything one processed window changes, applied in one transaction."""

    scope: Scope
    processed_pending: list[int] = field(default_factory=list)
    processed_turns: list[Turn] = field(default_factory=list)
    added: list[Entry] = field(default_factory=list)
    merged: list[Entry] = field(default_factory=list)
    edges: list[UpdateEdge] = field(default_factory=list)
    mentions: list[tuple[str, str, str]] = field(default_factory=list)
    attributes: list[tuple[str, str, str, str, float | None]] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)


class Store:
    """The on-disk memory. Thread-safe (one lock; SQLite in WAL mode with a busy timeout)."""

    #: Turns kept per scope as pronoun context for the next window.
    RECENT_TURNS = 4

    def __init__(self, path: str | Path | None, *, dim: int, embedder_name: str,
                 chroma_client: Any = None, chroma_host: str | None = None, chroma_port: int | None = None) -> None:
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
        self.path = Path(tempfile.mkdtemp(prefix="ariadnemem-")) if path is None else Path(path)
        self.dim = dim
        self._lock = threading.RLock()
        self._closed = False
        self._guard_depth = 0
        self._gen = -1
        self._stale = False
        # Read cache for the hot retrieval path, valid for one store generation: any
        # write, by this process or another, bumps the generation and empties it.
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        self._cache_gen = -1
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            # Cross-process writer lock (see ``_write_guard``).
            self._lockfile = (self.path / "write.lock").open("a+")
            self._db = sqlite3.connect(
                self.path / "memory.sqlite3", timeout=60.0, check_same_thread=False,
                isolation_level=None,
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=60000")
            self._db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc
        try:
            self._check_meta(embedder_name)
            if self.remote:
                self._chroma_prefix = f"am{self._store_id()}-"
            self._chroma = self._open_chroma()
        except BaseException:
            self._db.close()
            self._lockfile.close()
            if self._temp:
                shutil.rmtree(self.path, ignore_errors=True)
            raise
        self._collections: dict[str, Any] = {}
        self._gen = self._generation()
        self.reconcile()

    # ------------------------------------------------------------------ set-up
    def _check_meta(self, embedder_name: str) -> None:
        with self._tx() as db:
            rows = dict(db.execute("SELECT key, value FROM meta WHERE key != 'generation'").fetchall())
            if not rows:
                db.executemany(
                    "INSERT INTO meta(key, value) VALUES (?, ?)",
                    [("schema", str(SCHEMA_VERSION)), ("embedder", embedder_name), ("dim", str(self.dim))],
                )
                return
        if int(rows.get("schema", "0")) != SCHEMA_VERSION:
            raise StoreError(f"store schema {rows.get('schema')} is not supported (need {SCHEMA_VERSION})")
        if rows.get("embedder") != embedder_name or int(rows.get("dim", "0")) != self.dim:
            raise StoreError(
                f"store at {self.path} was built with embedder {rows.get('embedder')!r} "
                f"(dim {rows.get('dim')}); refusing to mix in {embedder_name!r} (dim {self.dim})"
            )

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

    def _store_id(self) -> str:
        """This store's id (made once, kept in ``meta``): the server-side name prefix."""
        with self._tx() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
            if row:
                return row[0]
            import uuid

            value = uuid.uuid4().hex[:16]
            db.execute("INSERT INTO meta(key, value) VALUES ('store_id', ?)", (value,))
            return value

    def _open_chroma(self):
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
            raise StoreError(f"cannot open the dense index at {self.path / 'chroma'}: {exc}") from exc

    def _collection(self, user_id: str):
        self._refresh_if_stale()
        col = self._collections.get(user_id)
        if col is None:
            # embedding_function=None is essential: the default one downloads a model.
            col = self._chroma.get_or_create_collection(
                collection_name(user_id, self._chroma_prefix),
                embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}},
            )
            self._collections[user_id] = col
        return col

    # ------------------------------------------------------------------ concurrency
    # Threads: one RLock. Processes: SQLite in WAL mode with a busy timeout serializes
    # the records, an exclusive ``flock`` on ``write.lock`` serializes writers across
    # the SQLite transaction *and* the chromadb write that follows it, and a generation
    # counter in ``meta`` (bumped by every write) tells a process that another one wrote:
    # its chromadb client, which caches the vector index in memory, is then reopened
    # before the next dense read or write. Readers never take the file lock; they see
    # whole entries (SQLite snapshots), at worst without the vectors of a write that is
    # still in flight.
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

    def write_guard(self):
        """Hold the cross-process writer lock across several store calls (reentrant)."""
        return self._write_guard()

    def _generation(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    def _refresh_if_stale(self) -> None:
        gen = self._generation()
        if gen == self._gen and not self._stale:
            return
        self._gen = gen
        self._stale = False
        self._collections.clear()
        if self.remote:  # the server is shared: only our collection handles can be stale
            return
        with suppress(Exception):
            self._chroma.close()
        self._chroma = self._open_chroma()

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

    def _fresh_cache(self) -> OrderedDict[tuple, Any]:
        """The read cache, emptied first if any process wrote since it was filled."""
        gen = self._generation()
        if gen != self._cache_gen:
            self._cache.clear()
            self._cache_gen = gen
        return self._cache

    def _remember(self, key: tuple, value: Any) -> Any:
        self._cache[key] = value
        if len(self._cache) > self.CACHE_SIZE:
            self._cache.popitem(last=False)
        return value

    def _cached(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per store generation (bounded LRU). Only for values the
        retrieval path treats as read-only; the public facade reads bypass it."""
        with self._lock:
            cache = self._fresh_cache()
            if key in cache:
                cache.move_to_end(key)
                return cache[key]
            return self._remember(key, compute())

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            return self._db.execute(sql, params).fetchall()

    # ------------------------------------------------------------------ consistency
    def reconcile(self) -> dict[str, int]:
        """Make the dense index agree with the records (run on open; cheap when clean)."""
        report = {"reindexed": 0, "removed": 0, "rebuilt_users": 0}
        with self._write_guard():
            for entry_id, user_id in self._read("SELECT entry_id, user_id FROM tombstones"):
                self._collection(user_id).delete(ids=[entry_id])
                report["removed"] += 1
            with self._tx() as db:
                db.execute("DELETE FROM tombstones")
            pending = self._read(
                f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE indexed = 0 ORDER BY seq"
            )
            if pending:
                self._index([self._row_to_entry(r) for r in pending])
                report["reindexed"] = len(pending)
            for (user_id, n) in self._read("SELECT user_id, COUNT(*) FROM entries GROUP BY user_id"):
                if self._collection(user_id).count() != n:
                    self._rebuild_user(user_id)
                    report["rebuilt_users"] += 1
        return report

    def _rebuild_user(self, user_id: str) -> None:
        with suppress(Exception):
            self._chroma.delete_collection(collection_name(user_id, self._chroma_prefix))
        self._collections.pop(user_id, None)
        rows = self._read(f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE user_id = ? ORDER BY seq", (user_id,))
        self._index([self._row_to_entry(r) for r in rows])

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
            with self._dense("store vectors"):
                col = self._collection(user_id)
                for start in range(0, len(group), 1000):
                    chunk = group[start : start + 1000]
                    col.upsert(
                        ids=[e.id for e in chunk],
                        embeddings=np.stack([e.embedding for e in chunk]).astype(np.float32),
                        metadatas=[_chroma_meta(e) for e in chunk],
                    )
        with self._tx() as db:
            db.executemany("UPDATE entries SET indexed = 1 WHERE id = ?", [(e.id,) for e in entries])

    # ------------------------------------------------------------------ pending turns
    def add_pending(self, scope: Scope, turns: Sequence[Turn]) -> None:
        """Persist acknowledged turns before any processing (crash-safe buffering)."""
        with self._tx() as db:
            db.executemany(
                "INSERT INTO pending_turns(user_id, agent_id, session_id, turn) VALUES (?, ?, ?, ?)",
                [(scope.user_id, scope.agent_id, scope.session_id, json.dumps(t.to_dict())) for t in turns],
            )

    def pending(self, scope: Scope | None = None) -> list[tuple[int, Scope, Turn]]:
        if scope is None:
            rows = self._read("SELECT seq, user_id, agent_id, session_id, turn FROM pending_turns ORDER BY seq")
        else:
            rows = self._read(
                "SELECT seq, user_id, agent_id, session_id, turn FROM pending_turns "
                "WHERE user_id = ? AND agent_id IS ? AND session_id IS ? ORDER BY seq",
                (scope.user_id, scope.agent_id, scope.session_id),
            )
        return [(seq, Scope(u, a, s), _turn_from_json(t)) for seq, u, a, s, t in rows]

    def recent_turns(self, scope: Scope) -> list[Turn]:
        rows = self._read(
            "SELECT turn FROM recent_turns WHERE user_id = ? AND agent_id IS ? AND session_id IS ? "
            "ORDER BY seq",
            (scope.user_id, scope.agent_id, scope.session_id),
        )
        return [_turn_from_json(r[0]) for r in rows]

    def participants(self, user_id: str) -> list[str]:
        return list(self._cached(("participants", user_id), lambda: self._participants(user_id)))

    def _participants(self, user_id: str) -> list[str]:
        # Speakers in order of first appearance. A loose index scan (one seek on
        # entries_user_speaker per distinct speaker) instead of GROUP BY over every entry
        # of the user: this runs once per ``add`` and per retrieval after a write, and the
        # GROUP BY cost ~60 ms at 30k entries (O(n)); this is O(speakers * log n).
        rows = self._read(
            "WITH RECURSIVE s(speaker) AS ("
            " SELECT (SELECT MIN(speaker) FROM entries WHERE user_id = ?1 AND speaker IS NOT NULL)"
            " UNION ALL"
            " SELECT (SELECT MIN(speaker) FROM entries WHERE user_id = ?1 AND speaker > s.speaker)"
            " FROM s WHERE s.speaker IS NOT NULL) "
            "SELECT speaker, (SELECT MIN(seq) FROM entries WHERE user_id = ?1 AND speaker = s.speaker) AS first "
            "FROM s WHERE speaker IS NOT NULL ORDER BY first",
            (user_id,),
        )
        return [r[0] for r in rows]

    # ------------------------------------------------------------------ window commit
    def commit_window(self, commit: WindowCommit) -> None:
        """Apply one window atomically, then index its new vectors."""
        with self._write_guard():
            self._commit_window(commit)

    def _commit_window(self, commit: WindowCommit) -> None:
        scope = commit.scope
        if self._read("SELECT 1 FROM entries WHERE indexed = 0 LIMIT 1"):
            self.reconcile()  # a writer died between its commit and its vector write
        with self._tx() as db:
            if commit.processed_pending:
                db.executemany("DELETE FROM pending_turns WHERE seq = ?",
                               [(s,) for s in commit.processed_pending])
            for entry in commit.added:
                cur = db.execute(
                    "INSERT INTO entries(id, user_id, agent_id, session_id, text, keywords, persons, "
                    "entities, location, topic, ts, first_ts, speaker, source_turn_ids, metadata, embedding) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    _entry_params(entry),
                )
                entry.seq = int(cur.lastrowid)
                db.execute("INSERT INTO entries_fts(rowid, scope, body) VALUES (?, ?, ?)",
                           (entry.seq, _scope_tokens(entry), _fts_body(entry)))
            for entry in commit.merged:
                db.execute(
                    "UPDATE entries SET keywords = ?, persons = ?, entities = ?, ts = ?, "
                    "source_turn_ids = ?, metadata = ? WHERE id = ?",
                    (json.dumps(entry.keywords), json.dumps(entry.persons), json.dumps(entry.entities),
                     to_epoch(entry.timestamp), json.dumps(entry.source_turn_ids),
                     json.dumps(entry.metadata), entry.id),
                )
                db.execute("UPDATE entries_fts SET body = ? WHERE rowid = ?", (_fts_body(entry), entry.seq))
            db.executemany(
                "INSERT OR IGNORE INTO edges(src, dst, kind, user_id, similarity, overlap, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(e.src, e.dst, e.kind, scope.user_id, e.similarity, e.overlap, time.time())
                 for e in commit.edges],
            )
            db.executemany(
                "INSERT OR IGNORE INTO mentions(user_id, person, term, entry_id) VALUES (?, ?, ?, ?)",
                [(scope.user_id, p, t, eid) for p, t, eid in commit.mentions],
            )
            db.executemany(
                "INSERT INTO attributes(user_id, subject, attribute, value, entry_id, ts) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(scope.user_id, *a) for a in commit.attributes],
            )
            if commit.processed_turns:
                last = commit.processed_turns[-self.RECENT_TURNS :]
                db.execute(
                    "DELETE FROM recent_turns WHERE user_id = ? AND agent_id IS ? AND session_id IS ?",
                    (scope.user_id, scope.agent_id, scope.session_id),
                )
                db.executemany(
                    "INSERT INTO recent_turns(user_id, agent_id, session_id, seq, turn) VALUES (?, ?, ?, ?, ?)",
                    [(scope.user_id, scope.agent_id, scope.session_id, i, json.dumps(t.to_dict()))
                     for i, t in enumerate(last)],
                )
            self._bump(db, scope.user_id, commit.stats)
        self._catch_up()
        if commit.added:
            self._index(commit.added)
        if commit.merged:
            # A MERGE refreshes the timestamp, which the dense index carries as metadata.
            try:
                with self._dense("update metadata"):
                    col = self._collection(scope.user_id)
                    col.update(ids=[e.id for e in commit.merged], metadatas=[_chroma_meta(e) for e in commit.merged])
            except StoreError:
                # Mark them for reconcile(), whose upsert carries the fresh metadata.
                with self._tx() as db:
                    db.executemany("UPDATE entries SET indexed = 0 WHERE id = ?", [(e.id,) for e in commit.merged])
                raise

    def bump_stats(self, user_id: str, deltas: dict[str, int]) -> None:
        with self._tx() as db:
            self._bump(db, user_id, deltas)

    @staticmethod
    def _bump(db: sqlite3.Connection, user_id: str, deltas: dict[str, int]) -> None:
        db.executemany(
            "INSERT INTO stats(user_id, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT(user_id, key) DO UPDATE SET value = value + excluded.value",
            [(user_id, k, int(v)) for k, v in deltas.items() if v],
        )

    # ------------------------------------------------------------------ reads
    def get(self, ids: Iterable[str], user_id: str | None = None, *, cached: bool = False) -> dict[str, Entry]:
        """Entries by id (missing ids are absent). ``cached=True`` (retrieval only) may
        return shared objects from the generation cache: the caller must not mutate them."""
        ids = list(dict.fromkeys(ids))
        if cached:
            with self._lock:
                cache = self._fresh_cache()
                found = {i: cache[("entry", i)] for i in ids if ("entry", i) in cache}
                missing = [i for i in ids if i not in found]
                for i, e in (self.get(missing) if missing else {}).items():
                    found[i] = self._remember(("entry", i), e)
            return {i: found[i] for i in ids if i in found and (user_id is None or found[i].user_id == user_id)}
        out: dict[str, Entry] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE id IN ({marks})"
            params: list[Any] = list(chunk)
            if user_id is not None:
                # "+user_id": never let the planner pick the (user_id, ts) index here; it
                # did, and scanned every entry of the user (35 ms per call at 30k entries)
                # instead of seeking the ids.
                sql += " AND +user_id = ?"
                params.append(user_id)
            for row in self._read(sql, params):
                entry = self._row_to_entry(row)
                out[entry.id] = entry
        return out

    def entries(self, scope: Scope, *, ts_range: tuple[float, float] | None = None) -> list[Entry]:
        sql = f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE user_id = ?"
        params: list[Any] = [scope.user_id]
        sql, params = _scope_sql(sql, params, scope)
        if ts_range is not None:
            sql += " AND ts >= ? AND ts <= ?"
            params += [ts_range[0], ts_range[1]]
        sql += " ORDER BY COALESCE(ts, 1e300), seq"
        return [self._row_to_entry(r) for r in self._read(sql, params)]

    def count(self, scope: Scope | None = None) -> int:
        if scope is None:
            return int(self._read("SELECT COUNT(*) FROM entries")[0][0])
        sql, params = _scope_sql("SELECT COUNT(*) FROM entries WHERE user_id = ?", [scope.user_id], scope)
        return int(self._read(sql, params)[0][0])

    def dense_search(
        self, scope: Scope, vectors: np.ndarray, k: int
    ) -> list[list[tuple[str, float]]]:
        """Top-``k`` (entry id, cosine) per query vector, inside the scope's partition."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(vectors) == 0:
            return []
        n = int(self._read("SELECT COUNT(*) FROM entries WHERE user_id = ?", (scope.user_id,))[0][0])
        with self._lock:
            self._catch_up()
            if n == 0:  # no collection is created for a user who has nothing
                return [[] for _ in range(len(vectors))]
            with self._dense("search"):
                col = self._collection(scope.user_id)
                where = _chroma_where(scope)
                res = col.query(query_embeddings=vectors, n_results=min(k, n), where=where,
                                include=["distances"])
        return [
            [(i, 1.0 - float(d)) for i, d in zip(ids, dists, strict=True)]
            for ids, dists in zip(res["ids"], res["distances"], strict=True)
        ]

    def following(self, scope: Scope, entry: Entry, n: int) -> list[Entry]:
        """The next ``n`` entries stored after ``entry`` in its scope (insertion order):
        in a dialogue, the reply to it. Read-only shared objects (generation cache)."""
        sql, params = _scope_sql("SELECT id FROM entries WHERE user_id = ? AND seq > ?",
                                 [scope.user_id, entry.seq], scope)
        key = ("following", scope.user_id, scope.agent_id, scope.session_id, entry.seq, n)
        ids = self._cached(key, lambda: [r[0] for r in self._read(sql + " ORDER BY seq LIMIT ?", [*params, n])])
        found = self.get(ids, scope.user_id, cached=True)
        return [found[i] for i in ids if i in found]

    def vectors_in_window(self, scope: Scope, lo: float, hi: float) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Ids, timestamps and embeddings of the scope's entries with lo <= ts <= hi.

        The time window is pushed into the index (a range scan on ``(user_id, ts)``), so a
        bridge query only ever scores memories that can lie between its two terminals.
        """
        sql, params = _scope_sql("SELECT id, ts, embedding FROM entries WHERE user_id = ? AND ts >= ? AND ts <= ?",
                                 [scope.user_id, lo, hi], scope)
        rows = self._read(sql, params)
        if not rows:
            return [], np.zeros(0), np.zeros((0, self.dim), dtype=np.float32)
        ids = [r[0] for r in rows]
        ts = np.array([r[1] for r in rows], dtype=np.float64)
        mat = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), self.dim)
        return ids, ts, mat

    def lexical_search(self, scope: Scope, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` BM25 matches (entry id, positive score) inside the scope."""
        expr = fts_query(query)
        if expr is None:
            return []
        scope_expr = " AND ".join(f'scope : "{tok}"' for tok in _scope_filter_tokens(scope))
        # Top-k inside FTS5 first, then the join: joining before the LIMIT looked up the
        # entry row of every match (thousands for a common word at 100k entries).
        rows = self._read(
            "SELECT e.id, f.score FROM (SELECT rowid, -bm25(entries_fts, 0.0, 1.0) AS score FROM entries_fts "
            "WHERE entries_fts MATCH ? ORDER BY bm25(entries_fts, 0.0, 1.0) LIMIT ?) f "
            "JOIN entries e ON e.seq = f.rowid ORDER BY f.score DESC",
            (f"{scope_expr} AND ({expr})", k),
        )
        return [(r[0], float(r[1])) for r in rows]

    def edges(self, user_id: str, ids: Iterable[str] | None = None) -> list[UpdateEdge]:
        if ids is None:
            rows = self._read(
                "SELECT src, dst, kind, similarity, overlap, created_at FROM edges WHERE user_id = ? "
                "ORDER BY created_at, rowid", (user_id,))
        else:
            ids = list(ids)
            if not ids:
                return []
            marks = ",".join("?" * len(ids))
            rows = self._read(
                f"SELECT src, dst, kind, similarity, overlap, created_at FROM edges WHERE user_id = ? "
                f"AND (src IN ({marks}) OR dst IN ({marks}))", (user_id, *ids, *ids))
        return [UpdateEdge(s, d, k, sim, ov, from_epoch(c)) for s, d, k, sim, ov, c in rows]

    def mentions(self, user_id: str, person: str, terms: Sequence[str]) -> list[str]:
        """Entry ids in which ``person`` is involved and every term occurs (fast-path counter)."""
        if not terms:
            return []
        marks = ",".join("?" * len(terms))
        rows = self._read(
            f"SELECT entry_id FROM mentions WHERE user_id = ? AND person = ? AND term IN ({marks}) "
            f"GROUP BY entry_id HAVING COUNT(DISTINCT term) = ?",
            (user_id, person, *terms, len(set(terms))),
        )
        return [r[0] for r in rows]

    def known_persons(self, user_id: str) -> set[str]:
        persons = self._cached(("persons", user_id), lambda: frozenset(
            r[0] for r in self._read("SELECT DISTINCT person FROM mentions WHERE user_id = ?", (user_id,))))
        return set(persons)

    def attribute(self, user_id: str, subject: str, attribute: str) -> list[tuple[str, str, float | None]]:
        """(value, entry id, ts) for a stored self-stated attribute, newest first."""
        return [
            (v, e, t)
            for v, e, t in self._read(
                "SELECT value, entry_id, ts FROM attributes WHERE user_id = ? AND subject = ? "
                "AND attribute = ? ORDER BY COALESCE(ts, 0) DESC, rowid DESC",
                (user_id, subject.lower(), attribute.lower()),
            )
        ]

    def users(self) -> dict[str, int]:
        """Every user with entries or pending turns, mapped to their entry count."""
        rows = self._read("SELECT user_id, COUNT(*) FROM entries GROUP BY user_id")
        out = {u: int(n) for u, n in rows}
        for (u,) in self._read("SELECT DISTINCT user_id FROM pending_turns"):
            out.setdefault(u, 0)
        return dict(sorted(out.items()))

    def stats(self, user_id: str | None = None) -> dict[str, int]:
        if user_id is None:
            rows = self._read("SELECT key, SUM(value) FROM stats GROUP BY key")
        else:
            rows = self._read("SELECT key, value FROM stats WHERE user_id = ?", (user_id,))
        out = dict.fromkeys(STAT_KEYS, 0) | {k: int(v) for k, v in rows}
        if user_id is None:
            out["entries"] = self.count()
            out["update_edges"] = int(self._read("SELECT COUNT(*) FROM edges")[0][0])
            out["pending_turns"] = int(self._read("SELECT COUNT(*) FROM pending_turns")[0][0])
        else:
            out["entries"] = self.count(Scope(user_id))
            out["update_edges"] = int(self._read("SELECT COUNT(*) FROM edges WHERE user_id = ?",
                                                 (user_id,))[0][0])
            out["pending_turns"] = int(self._read("SELECT COUNT(*) FROM pending_turns WHERE user_id = ?",
                                                  (user_id,))[0][0])
        return out

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
        entry = found[entry_id]
        with self._tx() as db:
            preds = [r[0] for r in db.execute(
                "SELECT src FROM edges WHERE dst = ? AND kind = 'update'", (entry_id,))]
            succs = db.execute(
                "SELECT dst, similarity, overlap FROM edges WHERE src = ? AND kind = 'update'",
                (entry_id,)).fetchall()
            db.executemany(
                "INSERT OR IGNORE INTO edges(src, dst, kind, user_id, similarity, overlap, created_at) "
                "VALUES (?, ?, 'update', ?, ?, ?, ?)",
                [(p, d, entry.user_id, sim, ov, time.time()) for p in preds for d, sim, ov in succs if p != d],
            )
            self._delete_rows(db, [entry])
        self._drop_vectors([entry])
        return True

    def forget(self, scope: Scope) -> int:
        """Remove every entry (and pending turn) of a scope; returns how many entries."""
        with self._write_guard():
            return self._forget(scope)

    def _forget(self, scope: Scope) -> int:
        victims = self.entries(scope)
        with self._tx() as db:
            self._delete_rows(db, victims)
            sql, params = _scope_sql("DELETE FROM pending_turns WHERE user_id = ?", [scope.user_id], scope)
            db.execute(sql, params)
            sql, params = _scope_sql("DELETE FROM recent_turns WHERE user_id = ?", [scope.user_id], scope)
            db.execute(sql, params)
            if scope.agent_id is None and scope.session_id is None:
                db.execute("DELETE FROM stats WHERE user_id = ?", (scope.user_id,))
                db.execute("DELETE FROM edges WHERE user_id = ?", (scope.user_id,))
                db.execute("DELETE FROM mentions WHERE user_id = ?", (scope.user_id,))
                db.execute("DELETE FROM attributes WHERE user_id = ?", (scope.user_id,))
        self._drop_vectors(victims)
        if scope.agent_id is None and scope.session_id is None:
            # The user is gone: drop the (now empty) collection too, so nothing of theirs,
            # not even a name, is left on a shared server.
            with self._lock, suppress(Exception):
                self._chroma.delete_collection(collection_name(scope.user_id, self._chroma_prefix))
            self._collections.pop(scope.user_id, None)
        return len(victims)

    def clear(self) -> None:
        """Remove everything (all users)."""
        with self._write_guard():
            self._clear()

    def _clear(self) -> None:
        users = [r[0] for r in self._read("SELECT DISTINCT user_id FROM entries")]
        with self._tx() as db:
            for table in ("entries", "edges", "pending_turns", "recent_turns", "mentions", "attributes",
                          "stats", "tombstones", "entries_fts"):
                db.execute(f"DELETE FROM {table}")
        with self._lock:
            for user_id in users:
                with suppress(Exception):
                    self._chroma.delete_collection(collection_name(user_id, self._chroma_prefix))
            self._collections.clear()

    def _delete_rows(self, db: sqlite3.Connection, entries: Sequence[Entry]) -> None:
        for e in entries:
            db.execute("DELETE FROM entries WHERE id = ?", (e.id,))
            db.execute("DELETE FROM entries_fts WHERE rowid = ?", (e.seq,))
            db.execute("DELETE FROM edges WHERE src = ? OR dst = ?", (e.id, e.id))
            db.execute("DELETE FROM mentions WHERE entry_id = ?", (e.id,))
            db.execute("DELETE FROM attributes WHERE entry_id = ?", (e.id,))
            db.execute("INSERT OR REPLACE INTO tombstones(entry_id, user_id) VALUES (?, ?)", (e.id, e.user_id))

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

    # ------------------------------------------------------------------ export / import
    def export_rows(self, user_id: str | None = None) -> Iterator[dict[str, Any]]:
        """Every record as JSON-able dicts (entries with embeddings, edges, counters,
        attributes, statistics, pending turns), in a stable order; ``user_id``: only that
        user's records (a per-user data export)."""
        where, params = ("WHERE user_id = ?", (user_id,)) if user_id is not None else ("", ())
        yield {"type": "meta", "schema": SCHEMA_VERSION, "dim": self.dim,
               "embedder": self._read("SELECT value FROM meta WHERE key = 'embedder'")[0][0]}
        for row in self._read(f"SELECT {_ENTRY_COLUMNS} FROM entries {where} ORDER BY seq", params):
            yield {"type": "entry", **self._row_to_entry(row).to_dict(with_embedding=True)}
        for src, dst, kind, uid, sim, ov, created in self._read(
                f"SELECT src, dst, kind, user_id, similarity, overlap, created_at FROM edges {where} ORDER BY rowid",
                params):
            yield {"type": "edge", "src": src, "dst": dst, "kind": kind, "user_id": uid,
                   "similarity": sim, "overlap": ov, "created_at": created}
        for uid, person, term, entry_id in self._read(
                f"SELECT user_id, person, term, entry_id FROM mentions {where} ORDER BY rowid", params):
            yield {"type": "mention", "user_id": uid, "person": person, "term": term, "entry_id": entry_id}
        for row in self._read(f"SELECT user_id, subject, attribute, value, entry_id, ts FROM attributes {where} "
                              "ORDER BY rowid", params):
            yield {"type": "attribute", **dict(zip(("user_id", "subject", "attribute", "value", "entry_id",
                                                     "ts"), row, strict=True))}
        for uid, key, value in self._read(f"SELECT user_id, key, value FROM stats {where} ORDER BY user_id, key",
                                          params):
            yield {"type": "stat", "user_id": uid, "key": key, "value": value}
        for _seq, scope, turn in self.pending():  # every scope of the user (agents, sessions)
            if user_id is not None and scope.user_id != user_id:
                continue
            yield {"type": "pending", "user_id": scope.user_id, "agent_id": scope.agent_id,
                   "session_id": scope.session_id, "turn": turn.to_dict()}

    def import_rows(self, rows: Iterable[dict[str, Any]]) -> int:
        """Load rows from :meth:`export_rows` (one transaction); returns entries added.

        All or nothing: an entry id this memory already holds (the same export imported
        twice) or a malformed record raises and rolls the whole import back.
        """
        with self._write_guard():
            try:
                return self._import_rows(rows)
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"this memory already holds entries of the export ({exc}); nothing was "
                                 "imported: import into another store, or forget those users first") from exc
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                if isinstance(exc, AriadneMemError):
                    raise
                raise StoreError(f"malformed export record ({type(exc).__name__}: {exc}); nothing was "
                                 "imported") from exc

    def _import_rows(self, rows: Iterable[dict[str, Any]]) -> int:
        entries: list[Entry] = []
        with self._tx() as db:
            for row in rows:
                kind = row.get("type")
                if kind == "meta":
                    if int(row.get("dim", self.dim)) != self.dim:
                        raise StoreError(f"export has dimension {row.get('dim')}, this store {self.dim}")
                    mine = self._read("SELECT value FROM meta WHERE key = 'embedder'")[0][0]
                    if row.get("embedder", mine) != mine:
                        # Same dimension is not enough: two models' vectors share no space.
                        raise StoreError(f"export was embedded with {row.get('embedder')!r}, this store uses "
                                         f"{mine!r}; open the store with the same embedder")
                elif kind == "entry":
                    data = {k: v for k, v in row.items() if k != "type"}
                    entry = Entry.from_dict(data)
                    if entry.embedding is None:
                        raise StoreError(f"exported entry {entry.id} has no embedding")
                    cur = db.execute(
                        "INSERT INTO entries(id, user_id, agent_id, session_id, text, keywords, persons, "
                        "entities, location, topic, ts, first_ts, speaker, source_turn_ids, metadata, "
                        "embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        _entry_params(entry))
                    entry.seq = int(cur.lastrowid)
                    db.execute("INSERT INTO entries_fts(rowid, scope, body) VALUES (?, ?, ?)",
                               (entry.seq, _scope_tokens(entry), _fts_body(entry)))
                    entries.append(entry)
                elif kind == "edge":
                    db.execute("INSERT OR IGNORE INTO edges(src, dst, kind, user_id, similarity, overlap, "
                               "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                               (row["src"], row["dst"], row["kind"], row["user_id"], row["similarity"],
                                row["overlap"], row["created_at"]))
                elif kind == "mention":
                    db.execute("INSERT OR IGNORE INTO mentions(user_id, person, term, entry_id) "
                               "VALUES (?, ?, ?, ?)", (row["user_id"], row["person"], row["term"], row["entry_id"]))
                elif kind == "attribute":
                    db.execute("INSERT INTO attributes(user_id, subject, attribute, value, entry_id, ts) "
                               "VALUES (?, ?, ?, ?, ?, ?)", (row["user_id"], row["subject"], row["attribute"],
                                                             row["value"], row["entry_id"], row["ts"]))
                elif kind == "stat":
                    self._bump(db, row["user_id"], {row["key"]: int(row["value"])})
                elif kind == "pending":
                    db.execute("INSERT INTO pending_turns(user_id, agent_id, session_id, turn) VALUES (?, ?, ?, ?)",
                               (row["user_id"], row["agent_id"], row["session_id"], json.dumps(row["turn"])))
                else:
                    raise StoreError(f"unknown export record type {kind!r}")
        if entries:
            self._index(entries)
        return len(entries)

    # ------------------------------------------------------------------ life cycle
    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._db.close()
            self._collections.clear()
            if self._injected is None:  # an injected client belongs to the caller
                with suppress(Exception):
                    self._chroma.close()
            self._chroma = None
            self._lockfile.close()
        if self._temp:
            shutil.rmtree(self.path, ignore_errors=True)

    # ------------------------------------------------------------------ helpers
    def _row_to_entry(self, row: tuple) -> Entry:
        (seq, eid, user_id, agent_id, session_id, text, keywords, persons, entities, location, topic,
         ts, first_ts, speaker, source, metadata, emb) = row
        return Entry(
            id=eid, text=text, keywords=json.loads(keywords), persons=json.loads(persons),
            entities=json.loads(entities), location=location, topic=topic,
            timestamp=from_epoch(ts), first_timestamp=from_epoch(first_ts),
            embedding=np.frombuffer(emb, dtype=np.float32).copy(),
            source_turn_ids=json.loads(source), speaker=speaker, metadata=json.loads(metadata),
            user_id=user_id, agent_id=agent_id, session_id=session_id, seq=seq,
        )


# ---------------------------------------------------------------------- module helpers
def _turn_from_json(raw: str) -> Turn:
    from datetime import datetime

    data = json.loads(raw)
    if data.get("timestamp"):
        data["timestamp"] = datetime.fromisoformat(data["timestamp"])
    return Turn(**data)


def _entry_params(entry: Entry) -> tuple:
    if entry.embedding is None:
        raise StoreError(f"entry {entry.id} has no embedding")
    return (
        entry.id, entry.user_id, entry.agent_id, entry.session_id, entry.text,
        json.dumps(entry.keywords), json.dumps(entry.persons), json.dumps(entry.entities),
        entry.location, entry.topic, to_epoch(entry.timestamp), to_epoch(entry.first_timestamp),
        entry.speaker, json.dumps(entry.source_turn_ids), json.dumps(entry.metadata, default=str),
        np.asarray(entry.embedding, dtype=np.float32).tobytes(),
    )


def _fts_body(entry: Entry) -> str:
    return " ".join([entry.text, " ".join(entry.keywords)])


def _scope_tokens(entry: Entry) -> str:
    toks = [scope_token("u", entry.user_id)]
    if entry.agent_id is not None:
        toks.append(scope_token("a", entry.agent_id))
    if entry.session_id is not None:
        toks.append(scope_token("s", entry.session_id))
    return " ".join(toks)


def _scope_filter_tokens(scope: Scope) -> list[str]:
    toks = [scope_token("u", scope.user_id)]
    if scope.agent_id is not None:
        toks.append(scope_token("a", scope.agent_id))
    if scope.session_id is not None:
        toks.append(scope_token("s", scope.session_id))
    return toks


def _scope_sql(sql: str, params: list[Any], scope: Scope) -> tuple[str, list[Any]]:
    if scope.agent_id is not None:
        sql += " AND agent_id = ?"
        params.append(scope.agent_id)
    if scope.session_id is not None:
        sql += " AND session_id = ?"
        params.append(scope.session_id)
    return sql, params


def _chroma_meta(entry: Entry) -> dict[str, Any]:
    # chromadb metadata values cannot be None: "" marks an absent agent/session.
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
