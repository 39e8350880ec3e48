"""The Postgres backend: records, full-text and vectors in one database, for many hosts.

Opened by URL (``AriadneMemory("postgresql://user:pw@host/db")``). Everything the
embedded store keeps in SQLite + FTS5 + chromadb lives in one Postgres schema (default
``ariadnemem``; ``?schema=name`` in the URL picks another): entries carry their vector
(pgvector, HNSW cosine index) and their lexemes (``tsvector``, GIN index), so a window's
records and vectors commit in **one transaction** and there is nothing to reconcile.

Many hosts: every connection comes from a ``psycopg_pool`` pool; the extraction of one
scope's pending turns is claimed with a Postgres advisory lock (one worker per scope,
released by the server if the worker dies), and a window's commit still checks that its
pending turns are there (a stale window is rolled back, never written twice). Writers of
different users never wait on each other (no shared counter row: statistics are per user).
There is no read cache, so what another host wrote is visible to the next read.

Tenancy: every statement that reads or writes user data carries the user (and, where the
caller gives them, the agent and session) in its ``WHERE`` clause.

Credentials: the URL's password never appears in ``repr``, ``location``, messages or
errors (:func:`~ariadnemem_core.store.opening.redact_url`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
import psycopg
from pgvector import Vector
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from ..errors import InvalidInputError, StoreError
from ..models import Entry, Scope, Turn, UpdateEdge, from_epoch, to_epoch
from . import lexical
from .locking import lock_timeout_from_env
from .opening import check_url_secret, redact_url
from .pg_schema import MIGRATIONS, PG_SCHEMA_VERSION, check_schema_name
from .records import (
    EXPORT_TABLES,
    RECENT_TURNS,
    STAT_KEYS,
    PendingConflict,
    WindowCommit,
    admitted_links,
    imported_recent,
    link_refused,
    message_rows,
    pending_of,
    pending_rows,
    waiting_params,
    waiting_sql,
    waiting_turns,
)
from .rows import ENTRY_COLUMNS, entry_params, entry_row_problem, fts_body, readable, turn_from_json, turn_like

log = logging.getLogger(__name__)

#: The Postgres schema that holds the tables unless the URL says ``?schema=...``.
DEFAULT_SCHEMA = "ariadnemem"
#: Connections per process (each thread holds one while it runs a statement or a claim).
DEFAULT_POOL_SIZE = 8
_K1, _B = 1.2, 0.75
_MISSING = object()
_E_COLUMNS = ", ".join(f"e.{c}" for c in ENTRY_COLUMNS.split(", "))

_INSERT_ENTRY = (
    "INSERT INTO entries (id, user_id, agent_id, session_id, text, keywords, persons, entities, location, "
    "topic, ts, first_ts, speaker, source_turn_ids, metadata, embedding, lexemes, doc_len) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::tsvector, %s) RETURNING seq"
)
_IMPORT_SQL = {
    "edge": "INSERT INTO edges (src, dst, kind, user_id, similarity, overlap, created_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
    "mention": "INSERT INTO mentions (user_id, person, term, entry_id) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
    "attribute": "INSERT INTO attributes (user_id, subject, attribute, value, entry_id, ts) "
                 "VALUES (%s, %s, %s, %s, %s, %s)",
    "pending": "INSERT INTO pending_turns (user_id, agent_id, session_id, turn) VALUES (%s, %s, %s, %s)",
    "recent": "INSERT INTO recent_turns (user_id, agent_id, session_id, seq, turn) VALUES (%s, %s, %s, %s, %s)",
}
_BUMP = ("INSERT INTO stats (user_id, key, value) VALUES (%s, %s, %s) "
         "ON CONFLICT (user_id, key) DO UPDATE SET value = stats.value + excluded.value")
# BM25 exactly as FTS5's bm25(): idf = ln((N - n + 0.5) / (n + 0.5)), at least 1e-6; the
# statistics are the user's (lex_totals, and document frequencies through the GIN index).
_LEXICAL_SQL = """
WITH q AS (SELECT t, tsq FROM unnest(%(terms)s::text[], %(tsqs)s::text[]) AS q(t, tsq)),
tot AS (SELECT n_docs::float8 AS n, total_len::float8 / GREATEST(n_docs, 1) AS avgdl
        FROM lex_totals WHERE user_id = %(user)s),
idf AS (SELECT q.t, GREATEST(ln((GREATEST(tot.n - d.n, 0) + 0.5) / (d.n + 0.5)), 1e-6) AS idf
        FROM q CROSS JOIN tot CROSS JOIN LATERAL (
            SELECT count(*)::float8 AS n FROM entries e
            WHERE e.user_id = %(user)s AND e.lexemes @@ q.tsq::tsquery) d),
cand AS (SELECT seq, id, lexemes, doc_len FROM entries
         WHERE user_id = %(user)s {scope} AND lexemes @@ %(match)s::tsquery)
SELECT c.id, sum(idf.idf * (tf.f * %(k1p)s) / (tf.f + %(k1)s * (1 - %(b)s + %(b)s * c.doc_len / tot.avgdl))) AS score
FROM cand c CROSS JOIN tot
CROSS JOIN LATERAL (SELECT lexeme, array_length(positions, 1)::float8 AS f FROM unnest(c.lexemes)) tf
JOIN idf ON idf.t = tf.lexeme
GROUP BY c.id, c.seq
ORDER BY score DESC, c.seq
LIMIT %(k)s
"""


def built_with(url: str) -> tuple[str, int] | None:
    """The embedder name and dimension the memory at ``url`` was built with; None when
    there is none yet or it cannot be read (opening it then says why).

    Why: a tool opening an existing memory (the CLI) must pick the embedder it was built
    with, the hashing one included, as it does for a directory.
    """
    try:
        conninfo, schema, _pool = split_url(url)
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
            found = conn.execute("SELECT to_regclass(%s)", (f"{schema}.meta",)).fetchone()
            if not found or found[0] is None:
                return None
            # ``schema`` is a checked name (split_url)
            sql = f"SELECT key, value FROM {schema}.meta WHERE key IN ('embedder', 'dim')"
            rows: dict[str, str] = dict(conn.execute(sql).fetchall())
    except (psycopg.Error, StoreError):
        return None
    name, dim = str(rows.get("embedder", "")), str(rows.get("dim", ""))
    return (name, int(dim)) if name and dim.isdigit() else None


def split_url(url: str) -> tuple[str, str, int]:
    """Split a store URL into what libpq and this backend each need.

    Args:
        url: a ``postgresql://`` store URL, optionally with ``schema`` and ``pool_size``.

    Returns:
        (libpq URL, schema, pool size): this library's own query parameters are removed
        from the URL libpq sees (the benchmarks' host set-up uses it too).

    Raises:
        StoreError: the schema name or the pool size is invalid.
    """
    parts = urlsplit(url)
    schema, pool = DEFAULT_SCHEMA, DEFAULT_POOL_SIZE
    kept = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "schema":
            schema = value
        elif key == "pool_size":
            try:
                pool = int(value)
            except ValueError:
                raise StoreError(f"pool_size must be a whole number, got {value!r}") from None
        else:
            kept.append((key, value))
    try:
        schema = check_schema_name(schema)
    except ValueError as exc:
        raise StoreError(str(exc)) from None
    if pool < 1:
        raise StoreError(f"pool_size must be at least 1, got {pool}")
    return urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(kept, safe="/"), "")), schema, pool


def _scope_sql(scope: Scope, params: list[Any], alias: str = "") -> str:
    sql = ""
    if scope.agent_id is not None:
        sql += f" AND {alias}agent_id = %s"
        params.append(scope.agent_id)
    if scope.session_id is not None:
        sql += f" AND {alias}session_id = %s"
        params.append(scope.session_id)
    return sql


def _in_scope(scope: Scope, agent_id: str | None, session_id: str | None) -> bool:
    return ((scope.agent_id is None or scope.agent_id == agent_id)
            and (scope.session_id is None or scope.session_id == session_id))


def _vector(value: Any) -> np.ndarray:
    """A pgvector value (``pgvector.Vector``, read in binary) as a native float32 array."""
    return np.asarray(value.to_numpy() if isinstance(value, Vector) else value, dtype=np.float32)


def _as_bytes(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row of ``ENTRY_COLUMNS`` with its vector as float32 bytes (the records' decoders' form)."""
    return (*row[:-1], _vector(row[-1]).tobytes())


def _lexical_params(entry: Entry) -> tuple[str, int]:
    toks = lexical.tokens(fts_body(entry))
    # FTS5 counts the scope column's tokens in a document's length: so do we.
    scope_tokens = 1 + (entry.agent_id is not None) + (entry.session_id is not None)
    return lexical.tsvector_literal(toks), len(toks) + scope_tokens


def _ts_query_term(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


class PostgresStore:
    """A memory in a Postgres database (pgvector), shared by any number of processes and hosts.

    Args:
        url: ``postgresql://user:password@host:port/dbname``; optional ``?schema=NAME``
            (default ``ariadnemem``) and ``?pool_size=N`` (default 8); other parameters
            go to libpq (``sslmode=require``, ``host=/socket/dir`` ...).
        dim: the embedding dimension (checked against an existing store).
        embedder_name: the embedder's name (an existing store of another one is refused).
        lock_timeout: longest wait for a lock (a scope claimed by a stuck worker, a row
            lock), in seconds (default ``ARIADNEMEM_LOCK_TIMEOUT`` or 60).

    Raises:
        StoreError: the server cannot be reached, the ``vector`` extension cannot be
            created, the schema is newer than this library, or the store was built with
            another embedder. Messages never contain the password.
    """

    RECENT_TURNS = RECENT_TURNS
    #: Cached reads per user snapshot, and users whose snapshot is kept.
    CACHE_SIZE = 4096
    CACHED_USERS = 64
    #: Largest user whose insertion order and vectors a snapshot holds (a bigger one is queried).
    SNAPSHOT_MAX_ENTRIES = 20000
    #: Largest user searched exactly by the dense search (a larger one goes through HNSW).
    EXACT_SEARCH_MAX = 20000
    #: ANALYZE once this process added at least this many rows since its last one ...
    ANALYZE_MIN_ROWS = 500
    #: ... and this share of the table's rows at that one (autovacuum's default share).
    ANALYZE_SHARE = 0.1

    def __init__(self, url: str, *, dim: int, embedder_name: str, lock_timeout: float | None = None) -> None:
        check_url_secret(url)
        self._safe_url = redact_url(url)
        self._secret = urlsplit(url).password or ""
        conninfo, self.schema, pool_size = split_url(url)
        self._conninfo = conninfo
        self.dim = dim
        self._lock_timeout = lock_timeout_from_env(lock_timeout)
        self._closed = False
        self._local = threading.local()
        self._cache_lock = threading.Lock()
        self._caches: dict[str, tuple[int, dict[tuple[Any, ...], Any]]] = {}
        self._lock_ms = int(self._lock_timeout * 1000)
        self._added = 0  # rows this process added since its last ANALYZE
        self._rows_analyzed = 0.0  # the table's size at that ANALYZE
        with self._errors("connect to"):
            self._migrate(conninfo, embedder_name)
            # ``check``: a pooled connection the server dropped (a restart, a terminated
            # backend) is replaced before use instead of failing the call that draws it.
            self._pool = ConnectionPool(conninfo, min_size=1, max_size=pool_size, open=False, name="ariadnemem",
                                        kwargs={"autocommit": True}, configure=self._configure,
                                        timeout=self._lock_timeout, check=ConnectionPool.check_connection)
            try:
                self._pool.open(wait=True, timeout=min(self._lock_timeout, 30.0))
            except BaseException:
                self._pool.close()
                raise

    # ------------------------------------------------------------------ set-up
    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(f"SET search_path TO {self.schema}, public")
        conn.execute(f"SET lock_timeout = {self._lock_ms}")
        # Filtered vector search (one user's rows among many) keeps scanning the HNSW
        # index until it has k rows of the user instead of returning fewer.
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        register_vector(conn)

    def _migrate(self, conninfo: str, embedder_name: str) -> None:
        """Create the schema or apply the missing migrations (once, whoever opens first)."""
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f"SET lock_timeout = {self._lock_ms}")
            with conn.transaction():
                # One migrator at a time across hosts (released at commit).
                # One lock for the whole database, not per schema: CREATE EXTENSION is
                # database-wide, and two schemas created at once raced on it.
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("ariadnemem-migrate",))
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
                conn.execute(f"SET LOCAL search_path TO {self.schema}, public")
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer PRIMARY KEY, "
                             "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
                row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
                current = int(row[0]) if row and row[0] is not None else 0
                if current > PG_SCHEMA_VERSION:
                    raise StoreError(f"the memory's schema is version {current}, newer than this library's "
                                     f"{PG_SCHEMA_VERSION}: upgrade ariadnemem on this host")
                for version, description, statements in MIGRATIONS:
                    if version > current:
                        for sql in statements(self.dim):
                            conn.execute(sql)  # built from validated names only
                        conn.execute("INSERT INTO schema_version (version, description) VALUES (%s, %s)",
                                     (version, description))
                meta: dict[str, str] = dict(conn.execute("SELECT key, value FROM meta").fetchall())
                if not meta:
                    conn.execute("INSERT INTO meta (key, value) VALUES ('embedder', %s), ('dim', %s)",
                                 (embedder_name, str(self.dim)))
                    meta = {"embedder": embedder_name, "dim": str(self.dim)}
        if meta.get("embedder") != embedder_name or int(meta.get("dim", "0")) != self.dim:
            raise StoreError(f"the memory at {self._safe_url} was built with embedder {meta.get('embedder')!r} "
                             f"(dim {meta.get('dim')}); refusing to mix in {embedder_name!r} (dim {self.dim})")
        self._embedder = str(meta["embedder"])

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Database errors as :class:`StoreError` naming the redacted URL (never the password)."""
        try:
            yield
        except StoreError:
            raise
        except (psycopg.Error, OSError) as exc:  # psycopg_pool.PoolTimeout is a psycopg.Error
            message = str(exc).strip()
            if self._secret:
                message = message.replace(self._secret, "***")
            # ``from None``: the driver's exception (and its connection string) stays out of tracebacks.
            raise StoreError(f"cannot {what} the memory at {self._safe_url}: {type(exc).__name__}: "
                             f"{message}") from None

    @contextmanager
    def _conn(self, what: str = "read") -> Iterator[psycopg.Connection[Any]]:
        if self._closed:
            raise StoreError("the store is closed")
        held = getattr(self._local, "conn", None)
        if held is not None and what == "read":  # inside reading(): its connection
            with self._errors(what):
                yield held
            return
        with self._errors(what), self._pool.connection() as conn:
            yield conn

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Cursor[Any]]:
        with self._conn("write to") as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    def _read(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        with self._conn() as conn, conn.cursor(binary=True) as cur:
            # Binary results: a vector arrives as 1.5 KB of floats, not as text to parse.
            return cur.execute(sql, params).fetchall()

    # ------------------------------------------------------------------ read snapshots
    @contextmanager
    def reading(self, user_id: str) -> Iterator[None]:
        """One retrieval's reads of ``user_id``: one pooled connection, and a cache valid
        for the user's generation read at the start (any write of that user, from any
        host, bumps it, so the next retrieval never sees a stale entry). Reentrant."""
        if getattr(self._local, "snap", None) is not None:
            yield
            return
        with self._conn() as conn:
            self._local.conn = conn
            try:
                row = conn.execute("SELECT gen FROM generations WHERE user_id = %s", (user_id,)).fetchone()
                gen = int(row[0]) if row else 0
                with self._cache_lock:
                    cached = self._caches.get(user_id)
                    if cached is None or cached[0] != gen:
                        cached = (gen, {})
                        self._caches[user_id] = cached
                        while len(self._caches) > self.CACHED_USERS:
                            self._caches.pop(next(iter(self._caches)))
                self._local.snap, self._local.user = cached[1], user_id
                yield
            finally:
                self._local.snap = self._local.user = self._local.conn = None

    def _snapshot(self, user_id: str | None) -> dict[tuple[Any, ...], Any] | None:
        """The open snapshot's cache, if there is one and it is ``user_id``'s (never another user's)."""
        snap: dict[tuple[Any, ...], Any] | None = getattr(self._local, "snap", None)
        if snap is None or user_id is None or user_id != getattr(self._local, "user", None):
            return None
        if len(snap) > self.CACHE_SIZE:
            snap.clear()
        return snap

    def _cached(self, key: tuple[Any, ...], compute: Any) -> Any:
        snap = self._snapshot(key[1])
        if snap is None:
            return compute()
        # .get, not "in" then []: another thread of this process may clear the shared dict.
        value = snap.get(key, _MISSING)
        if value is _MISSING:
            value = snap[key] = compute()
        return value

    @staticmethod
    def _touch(cur: psycopg.Cursor[Any], users: Iterable[str]) -> None:
        """Bump the users' generations (in the writing transaction)."""
        cur.executemany("INSERT INTO generations (user_id, gen) VALUES (%s, 1) ON CONFLICT (user_id) "
                        "DO UPDATE SET gen = generations.gen + 1", [(u,) for u in sorted(set(users))])

    # ------------------------------------------------------------------ identity
    def __repr__(self) -> str:
        return f"PostgresStore({self._safe_url!r}, schema={self.schema!r})"

    @property
    def path(self) -> Path | None:
        """None: a Postgres memory has no directory (see :attr:`location`)."""
        return None

    @property
    def location(self) -> str:
        """The URL without its password."""
        return self._safe_url

    @property
    def dense_location(self) -> str:
        return f"pgvector in {self._safe_url} (schema {self.schema})"

    @property
    def remote(self) -> bool:
        return True

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def embedder_name(self) -> str:
        return self._embedder

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.close()

    def write_guard(self) -> AbstractContextManager[None]:
        """Nothing to hold: every multi-statement write here is one transaction."""
        return nullcontext()

    # ------------------------------------------------------------------ pending turns
    def add_pending(self, scope: Scope, turns: Sequence[Turn]) -> None:
        with self._tx() as cur:
            self._add_pending(cur, scope, turns)

    @staticmethod
    def _add_pending(cur: psycopg.Cursor[Any], scope: Scope, turns: Sequence[Turn]) -> None:
        cur.executemany(_IMPORT_SQL["pending"], [(scope.user_id, scope.agent_id, scope.session_id,
                                                  json.dumps(t.to_dict())) for t in turns])
        cur.execute(_BUMP, (scope.user_id, "turns_seen", len(turns)))

    def pending(self, scope: Scope | None = None, *, user_id: str | None = None) -> list[tuple[int, Scope, Turn]]:
        if scope is None and user_id is not None:
            rows = self._read("SELECT seq, user_id, agent_id, session_id, turn FROM pending_turns WHERE user_id = %s "
                              "ORDER BY seq", (user_id,))
        elif scope is None:
            rows = self._read("SELECT seq, user_id, agent_id, session_id, turn FROM pending_turns ORDER BY seq")
        else:
            rows = self._read(
                "SELECT seq, user_id, agent_id, session_id, turn FROM pending_turns WHERE user_id = %s "
                "AND agent_id IS NOT DISTINCT FROM %s AND session_id IS NOT DISTINCT FROM %s ORDER BY seq",
                (scope.user_id, scope.agent_id, scope.session_id))
        out, bad = pending_rows(rows)
        if bad:
            self.quarantine_pending(bad)
        return out

    def waiting(self, scope: Scope, limit: int) -> list[tuple[int, Scope, Turn]]:
        """See :meth:`Store.waiting` (one indexed query; a read, never a write)."""
        return waiting_turns(self._read(waiting_sql("%s"), waiting_params(scope, limit)))

    @contextmanager
    def claim(self, scope: Scope) -> Iterator[None]:
        """Hold the scope's advisory lock while its pending turns are extracted.

        A session lock on a connection of its own, outside the pool: the extraction it
        guards reads and writes through the pool, so a claim holding a pooled connection
        starved it (a pool of one deadlocked; eight threads flushing waited out
        ``lock_timeout``). Another worker waits (at most ``lock_timeout``) and then reads
        what is still pending; if this process dies, the server drops the lock with its
        connection.
        """
        key = f"ariadnemem:{self.schema}:{json.dumps([scope.user_id, scope.agent_id, scope.session_id])}"
        with self._session_lock(key, "claim a scope in", f"another worker extracting the turns of "
                                f"{scope.user_id!r}; they stay pending"):
            yield

    def import_guard(self) -> AbstractContextManager[None]:
        """One import at a time across hosts, from its checks to its commit: two hosts
        importing one export at once both passed the check that this memory does not hold
        it yet, and its pending turns were stored twice."""
        return self._session_lock(f"ariadnemem-import:{self.schema}", "import into",
                                  "another host's import; nothing was imported")

    @contextmanager
    def _session_lock(self, key: str, doing: str, waiting_for: str) -> Iterator[None]:
        """An advisory lock held on a connection of its own (see :meth:`claim`), waited for
        at most ``lock_timeout``."""
        if self._closed:
            raise StoreError("the store is closed")
        with self._errors(doing), psycopg.connect(self._conninfo, autocommit=True) as conn:
            conn.execute(f"SET lock_timeout = {self._lock_ms}")
            try:
                conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
            except psycopg.errors.LockNotAvailable:
                raise StoreError(f"timed out after {self._lock_timeout:g} s waiting for {waiting_for}") from None
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))

    def quarantine_pending(self, bad: Sequence[tuple[int, str]]) -> None:
        with self._tx() as cur:
            for seq, reason in bad:
                cur.execute("WITH moved AS (DELETE FROM pending_turns WHERE seq = %s "
                            "RETURNING user_id, agent_id, session_id, turn) "
                            "INSERT INTO quarantine (kind, user_id, agent_id, session_id, ref, payload, reason, "
                            "created_at) SELECT 'pending', user_id, agent_id, session_id, %s, turn, %s, %s FROM moved",
                            (seq, str(seq), reason[:1000], time.time()))

    def recent_turns(self, scope: Scope) -> list[Turn]:
        rows = self._read("SELECT turn FROM recent_turns WHERE user_id = %s AND agent_id IS NOT DISTINCT FROM %s "
                          "AND session_id IS NOT DISTINCT FROM %s ORDER BY seq",
                          (scope.user_id, scope.agent_id, scope.session_id))
        out = []
        for (raw,) in rows:
            try:
                out.append(turn_from_json(raw))
            except InvalidInputError:
                continue
        return out

    # ------------------------------------------------------------------ window commit
    def commit_window(self, commit: WindowCommit) -> None:
        """The window's records and vectors in one transaction; a window whose pending
        turns another worker already committed is rolled back (:class:`PendingConflict`)."""
        scope = commit.scope
        with self._tx() as cur:
            self._hold_user(cur, scope.user_id)
            if commit.processed_pending:
                cur.execute("DELETE FROM pending_turns WHERE user_id = %s AND seq = ANY(%s)",
                            (scope.user_id, list(commit.processed_pending)))
                if cur.rowcount != len(commit.processed_pending):
                    raise PendingConflict(f"{len(commit.processed_pending) - cur.rowcount} of the window's pending "
                                          "turns were already processed by another writer")
            for entry in commit.added:
                self._insert_entry(cur, entry)
            for entry in commit.merged:
                lexemes, doc_len = _lexical_params(entry)
                cur.execute("UPDATE entries SET keywords = %s, persons = %s, entities = %s, ts = %s, "
                            "source_turn_ids = %s, metadata = %s, lexemes = %s::tsvector, doc_len = %s "
                            "WHERE id = %s AND user_id = %s",
                            (json.dumps(entry.keywords), json.dumps(entry.persons), json.dumps(entry.entities),
                             to_epoch(entry.timestamp), json.dumps(entry.source_turn_ids),
                             json.dumps(entry.metadata), lexemes, doc_len, entry.id, scope.user_id))
            now = time.time()
            cur.executemany(_IMPORT_SQL["edge"], [(e.src, e.dst, e.kind, scope.user_id, e.similarity, e.overlap, now)
                                                  for e in self._admitted(cur, scope.user_id, commit)])
            cur.executemany(_IMPORT_SQL["mention"], [(scope.user_id, p, t, eid) for p, t, eid in commit.mentions])
            cur.executemany(_IMPORT_SQL["attribute"], [(scope.user_id, *a) for a in commit.attributes])
            if commit.processed_turns:
                cur.execute("DELETE FROM recent_turns WHERE user_id = %s AND agent_id IS NOT DISTINCT FROM %s "
                            "AND session_id IS NOT DISTINCT FROM %s",
                            (scope.user_id, scope.agent_id, scope.session_id))
                cur.executemany(
                    "INSERT INTO recent_turns (user_id, agent_id, session_id, seq, turn) VALUES (%s, %s, %s, %s, %s)",
                    [(scope.user_id, scope.agent_id, scope.session_id, i, json.dumps(t.to_dict()))
                     for i, t in enumerate(commit.processed_turns[-self.RECENT_TURNS :])])
            self._bump(cur, scope.user_id, commit.stats)
            self._touch(cur, [scope.user_id])
        self._analyze_after(len(commit.added))

    @staticmethod
    def _admitted(cur: psycopg.Cursor[Any], user_id: str, commit: WindowCommit) -> list[UpdateEdge]:
        """The window's edges that still hold under the user's lock
        (:func:`~ariadnemem_core.store.records.admitted_links`)."""
        def read(ids: list[str]) -> tuple[dict[str, float | None], list[tuple[str, str]]]:
            cur.execute("SELECT id, ts FROM entries WHERE user_id = %s AND id = ANY(%s)", (user_id, ids))
            stamps = {str(r[0]): r[1] for r in cur.fetchall()}
            cur.execute("SELECT src, dst FROM edges WHERE user_id = %s AND kind = 'update'", (user_id,))
            return stamps, [(str(a), str(b)) for a, b in cur.fetchall()]

        return admitted_links(commit, read)

    def _analyze_after(self, added: int) -> None:
        """Refresh the planner's statistics once this process has added rows worth
        :data:`ANALYZE_SHARE` of the table (at least :data:`ANALYZE_MIN_ROWS`), as
        autovacuum would a minute later: until then a freshly filled memory was searched
        with plans made for an empty table (conv-26 of LoCoMo, 977 entries: warm retrieval
        p50 295 ms right after ingest, 14.5 ms after ``ANALYZE``)."""
        with self._cache_lock:
            self._added += added
            if self._added < max(self.ANALYZE_MIN_ROWS, self.ANALYZE_SHARE * self._rows_analyzed):
                return
            self._added = 0
        with self._conn("analyze") as conn:
            conn.execute("ANALYZE entries, edges")
            row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'entries'::regclass").fetchone()
        self._rows_analyzed = max(0.0, float(row[0])) if row else 0.0

    def _insert_entry(self, cur: psycopg.Cursor[Any], entry: Entry) -> None:
        params = list(entry_params(entry))
        params[-1] = np.asarray(entry.embedding, dtype=np.float32)
        cur.execute(_INSERT_ENTRY, (*params, *_lexical_params(entry)))
        row = cur.fetchone()
        entry.seq = int(row[0]) if row else 0

    @staticmethod
    def _bump(cur: psycopg.Cursor[Any], user_id: str, deltas: dict[str, int]) -> None:
        rows = [(user_id, k, int(v)) for k, v in sorted(deltas.items()) if v]
        if rows:
            cur.executemany(_BUMP, rows)

    def bump_stats(self, user_id: str, deltas: dict[str, int]) -> None:
        """Add ``deltas`` to the user's counters."""
        with self._tx() as cur:
            self._bump(cur, user_id, deltas)

    # ------------------------------------------------------------------ reads
    def get(self, ids: Iterable[str], user_id: str | None = None, *, cached: bool = False) -> dict[str, Entry]:
        """Entries by id; ``cached`` (retrieval, inside :meth:`reading`) shares read-only
        objects from the snapshot's cache."""
        ids = list(dict.fromkeys(ids))
        snap = self._snapshot(user_id) if cached else None
        if snap is None:
            return self._get(ids, user_id)
        hits = {i: e for i in ids if (e := snap.get(("entry", i))) is not None}
        missing = [i for i in ids if i not in hits]
        if missing:
            for i, e in self._get(missing, user_id).items():
                hits[i] = snap[("entry", i)] = e
        return {i: hits[i] for i in ids if i in hits}

    def _get(self, ids: list[str], user_id: str | None) -> dict[str, Entry]:
        if not ids:
            return {}
        where, params = "e.id = ANY(%s)", [cast(Any, ids)]
        if user_id is not None:
            where += " AND e.user_id = %s"
            params.append(user_id)
        return {e.id: e for e in self._entries_where(where, params)}

    def _entries_where(self, where: str, params: Sequence[Any], order: str = "") -> list[Entry]:
        """Entries matching ``where`` (over ``entries e``), validity filled, in one statement.

        ``superseded_by`` / ``valid_until``: the earliest newer state of each entry, from
        the update edges (derived on read, as in the embedded store).
        """
        rows = self._read(
            f"SELECT {_E_COLUMNS}, v.dst, v.ts FROM entries e LEFT JOIN LATERAL ("
            " SELECT g.dst, COALESCE(n.first_ts, n.ts) AS ts FROM edges g"
            " JOIN entries n ON n.id = g.dst AND n.user_id = g.user_id"
            " WHERE g.src = e.id AND g.user_id = e.user_id AND g.kind = 'update'"
            f" ORDER BY COALESCE(n.first_ts, n.ts, 1e300), n.seq LIMIT 1) v ON true WHERE {where} {order}", params)
        out = []
        for row in rows:
            found = readable([_as_bytes(row[:-2])])
            if found:
                entry = found[0]
                if row[-2] is not None:
                    entry.superseded_by, entry.valid_until = row[-2], from_epoch(row[-1])
                out.append(entry)
        return out

    def entries(self, scope: Scope, *, ts_range: tuple[float, float] | None = None) -> list[Entry]:
        params: list[Any] = [scope.user_id]
        where = "e.user_id = %s" + _scope_sql(scope, params, "e.")
        if ts_range is not None:
            where += " AND e.ts >= %s AND e.ts <= %s"
            params += [ts_range[0], ts_range[1]]
        return self._entries_where(where, params, "ORDER BY COALESCE(e.ts, 1e300), e.seq")

    def dense_count(self, user_id: str) -> int:
        """Vectors held for ``user_id``: its entries (the vectors are columns of them)."""
        return self.count(Scope(user_id))

    def count(self, scope: Scope | None = None) -> int:
        if scope is None:
            return int(self._read("SELECT count(*) FROM entries")[0][0])
        params: list[Any] = [scope.user_id]
        return int(self._read("SELECT count(*) FROM entries WHERE user_id = %s" + _scope_sql(scope, params),
                              params)[0][0])

    def around(self, scope: Scope, entry: Entry, n: int) -> list[Entry]:
        table = self._seq_table(scope.user_id)
        if table is not None:
            seqs, ids, agents, sessions = table
            lo = int(np.searchsorted(seqs, entry.seq - n, side="left"))
            hi = int(np.searchsorted(seqs, entry.seq + n, side="right"))
            return self._in_order([ids[k] for k in range(lo, hi) if _in_scope(scope, agents[k], sessions[k])],
                                  scope.user_id)
        params: list[Any] = [scope.user_id, entry.seq - n, entry.seq + n]
        where = "e.user_id = %s AND e.seq BETWEEN %s AND %s" + _scope_sql(scope, params, "e.")
        return self._entries_where(where + " ORDER BY e.seq", params)

    def _in_order(self, ids: list[str], user_id: str) -> list[Entry]:
        found = self.get(ids, user_id, cached=True)
        return [found[i] for i in ids if i in found]

    def _seq_table(self, user_id: str) -> tuple[np.ndarray, list[str], list[str | None], list[str | None]] | None:
        """Inside a snapshot: the user's entries by insertion order (seq, id, agent,
        session), read once per generation, so message mates need no query.
        None outside a snapshot or for a user too large to hold."""
        if self._snapshot(user_id) is None:
            return None

        def load() -> tuple[np.ndarray, list[str], list[str | None], list[str | None]] | None:
            rows = self._read("SELECT seq, id, agent_id, session_id FROM entries WHERE user_id = %s "
                              "ORDER BY seq LIMIT %s", (user_id, self.SNAPSHOT_MAX_ENTRIES + 1))
            if len(rows) > self.SNAPSHOT_MAX_ENTRIES:
                return None
            return (np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows], [r[2] for r in rows],
                    [r[3] for r in rows])

        table: tuple[np.ndarray, list[str], list[str | None], list[str | None]] | None = self._cached(
            ("seq_table", user_id), load)
        return table

    def _vector_table(self, user_id: str) -> tuple[list[str], np.ndarray, list[str | None], list[str | None],
                                                   np.ndarray] | None:
        """Inside a snapshot: the user's entries' (id, ts, agent, session, vector) in
        time order (undated last, ts NaN), read once per generation: bridges and periods
        slice it and the dense search scores it exactly, with no query."""
        if self._snapshot(user_id) is None:
            return None

        def load() -> tuple[list[str], np.ndarray, list[str | None], list[str | None], np.ndarray] | None:
            rows = self._read("SELECT id, ts, agent_id, session_id, embedding FROM entries WHERE user_id = %s "
                              "ORDER BY ts NULLS LAST, seq LIMIT %s", (user_id, self.SNAPSHOT_MAX_ENTRIES + 1))
            if len(rows) > self.SNAPSHOT_MAX_ENTRIES:
                return None
            mat = np.stack([_vector(r[4]) for r in rows]) if rows else np.zeros((0, self.dim), dtype=np.float32)
            ts = np.array([np.nan if r[1] is None else r[1] for r in rows], dtype=np.float64)
            return [r[0] for r in rows], ts, [r[2] for r in rows], [r[3] for r in rows], mat

        table: tuple[list[str], np.ndarray, list[str | None], list[str | None], np.ndarray] | None = self._cached(
            ("vector_table", user_id), load)
        return table

    def vectors_in_window(self, scope: Scope, lo: float, hi: float,
                          limit: int | None = None) -> tuple[list[str], np.ndarray, np.ndarray]:
        table = self._vector_table(scope.user_id)
        if table is not None:
            all_ids, all_ts, agents, sessions, all_mat = table
            start = int(np.searchsorted(all_ts, lo, side="left"))
            stop = int(np.searchsorted(all_ts, hi, side="right"))
            keep = [k for k in range(start, stop) if _in_scope(scope, agents[k], sessions[k])]
            if limit is not None:
                keep = keep[: int(limit)]
            if not keep:
                return [], np.zeros(0), np.zeros((0, self.dim), dtype=np.float32)
            return [all_ids[k] for k in keep], all_ts[keep], all_mat[keep]
        params: list[Any] = [scope.user_id, lo, hi]
        sql = "SELECT id, ts, embedding FROM entries WHERE user_id = %s AND ts >= %s AND ts <= %s"
        sql += _scope_sql(scope, params)
        sql += " ORDER BY ts, seq"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(int(limit))
        rows = self._read(sql, params)
        if not rows:
            return [], np.zeros(0), np.zeros((0, self.dim), dtype=np.float32)
        ids = [r[0] for r in rows]
        ts = np.array([r[1] for r in rows], dtype=np.float64)
        mat = np.stack([_vector(r[2]) for r in rows])
        return ids, ts, mat

    def dense_search(self, scope: Scope, vectors: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` (entry id, cosine) per query vector among the scope's rows (pgvector HNSW)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        out: list[list[tuple[str, float]]] = []
        if len(vectors) == 0:
            return out
        table = self._vector_table(scope.user_id)
        if table is not None:  # inside a snapshot: exact cosine over the held vectors
            ids, _, agents, sessions, mat = table
            keep = np.array([k for k in range(len(ids)) if _in_scope(scope, agents[k], sessions[k])], dtype=np.int64)
            sub = mat[keep]
            norms = np.maximum(np.linalg.norm(sub, axis=1), 1e-12)
            for vec in vectors:
                if not len(keep):
                    out.append([])
                    continue
                sims = (sub @ vec) / (norms * max(float(np.linalg.norm(vec)), 1e-12))
                top = np.argsort(-sims, kind="stable")[:k]
                out.append([(ids[int(keep[j])], float(sims[j])) for j in top])
            return out
        params: list[Any] = [scope.user_id]
        where = "user_id = %s" + _scope_sql(scope, params)
        # A user up to EXACT_SEARCH_MAX entries is searched exactly (its rows through the
        # user index, every distance computed: a ``+ 0`` keeps the planner off the HNSW
        # index); a larger one through HNSW with iterative scans. Measured at 200 users x
        # 200 entries: HNSW filtered to one user returned k rows only with iterative
        # scans, and then 71% of the exact top 10, in 83 ms; the exact scan took 1-2 ms.
        exact = self._user_size(scope.user_id) <= self.EXACT_SEARCH_MAX
        order = "(embedding <=> %s) + 0" if exact else "embedding <=> %s"
        sql = f"SELECT id, embedding <=> %s AS d FROM entries WHERE {where} ORDER BY {order} LIMIT %s"
        with self._conn() as conn, conn.cursor(binary=True) as cur:
            for vec in vectors:
                rows = cur.execute(sql, [vec, *params, vec, int(k)]).fetchall()
                # relaxed_order: the index may return near-ties out of order.
                out.append(sorted(((str(i), 1.0 - float(d)) for i, d in rows), key=lambda x: -x[1]))
        return out

    def _user_size(self, user_id: str) -> int:
        """The user's entry count (kept by the lexical statistics' triggers)."""
        def load() -> int:
            rows = self._read("SELECT n_docs FROM lex_totals WHERE user_id = %s", (user_id,))
            return int(rows[0][0]) if rows else 0

        size: int = self._cached(("size", user_id), load)
        return size

    def lexical_search(self, scope: Scope, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` BM25 matches (entry id, positive score) inside the scope (see :mod:`.pg_schema`)."""
        terms = lexical.query_terms(query)
        if not terms:
            return []
        scope_params: list[Any] = []
        scope_sql = _scope_sql(scope, scope_params).replace("%s", "%(scope{})s")
        named = {f"scope{i}": v for i, v in enumerate(scope_params)}
        scope_sql = scope_sql.format(*range(len(scope_params)))
        tsqs = [_ts_query_term(t) for t in terms]
        params = {"terms": terms, "tsqs": tsqs, "user": scope.user_id, "match": " | ".join(dict.fromkeys(tsqs)),
                  "k": int(k), "k1": _K1, "k1p": _K1 + 1, "b": _B, **named}
        rows = self._read(_LEXICAL_SQL.format(scope=scope_sql), params)
        return [(str(r[0]), float(r[1])) for r in rows]

    # ------------------------------------------------------------------ the message view
    # Derived on read from the scope's entries (the same rows SQLite writes with each
    # window, ``records.message_rows``), cached for the user's generation: nothing to keep
    # in step on delete, forget or import.
    def _message_view(self, scope: Scope) -> tuple[list[str], list[list[str]], np.ndarray, lexical.BM25Index]:
        def build() -> tuple[list[str], list[list[str]], np.ndarray, lexical.BM25Index]:
            rows = message_rows(self.entries(scope))
            mat = (np.stack([r.vector for r in rows]).astype(np.float32) if rows
                   else np.zeros((0, self.dim), dtype=np.float32))
            index = lexical.BM25Index([r.body for r in rows])
            return [r.turn_id for r in rows], [r.entry_ids for r in rows], mat, index

        return self._cached(("messages", scope.user_id, scope.agent_id, scope.session_id), build)  # type: ignore[no-any-return]

    def message_index(self, scope: Scope) -> tuple[list[str], list[list[str]], np.ndarray]:
        """The scope's message view: (turn ids, each message's entry ids, mean vectors)."""
        turn_ids, entry_ids, mat, _ = self._message_view(scope)
        return turn_ids, entry_ids, mat

    def message_lexical(self, scope: Scope, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` BM25 matches among the scope's messages: (turn id, positive score)."""
        turn_ids, _, _, index = self._message_view(scope)
        return [(turn_ids[i], score) for i, score in index.search(query, k)]

    def rebuild_messages(self, user_id: str | None = None) -> int:
        """The message view is derived on read here: nothing to rebuild; returns its size."""
        users = [user_id] if user_id is not None else list(self.users())
        return sum(len(self.message_index(Scope(u))[0]) for u in users)

    def edges(self, user_id: str, ids: Iterable[str] | None = None) -> list[UpdateEdge]:
        if ids is not None and self._snapshot(user_id) is not None:
            every: tuple[UpdateEdge, ...] = self._cached(("edges", user_id), lambda: tuple(self.edges(user_id)))
            asked = set(ids)
            return [e for e in every if e.src in asked or e.dst in asked]
        cols = "src, dst, kind, similarity, overlap, created_at"
        if ids is None:
            rows = self._read(f"SELECT {cols} FROM edges WHERE user_id = %s ORDER BY created_at, seq", (user_id,))
        else:
            wanted = list(ids)
            if not wanted:
                return []
            rows = self._read(f"SELECT {cols} FROM edges WHERE user_id = %s AND (src = ANY(%s) OR dst = ANY(%s)) "
                              "ORDER BY seq", (user_id, wanted, wanted))
        return [UpdateEdge(s, d, k, sim, ov, from_epoch(c)) for s, d, k, sim, ov, c in rows]

    def mentions(self, user_id: str, person: str, terms: Sequence[str]) -> list[str]:
        if not terms:
            return []
        rows = self._read("SELECT entry_id FROM mentions WHERE user_id = %s AND person = %s AND term = ANY(%s) "
                          "GROUP BY entry_id HAVING count(DISTINCT term) = %s",
                          (user_id, person, list(terms), len(set(terms))))
        return [r[0] for r in rows]

    def known_persons(self, user_id: str) -> set[str]:
        return set(self._cached(("persons", user_id), lambda: frozenset(
            r[0] for r in self._read("SELECT DISTINCT person FROM mentions WHERE user_id = %s", (user_id,)))))

    def attribute(self, user_id: str, subject: str, attribute: str) -> list[tuple[str, str, float | None]]:
        return [(v, e, t) for v, e, t in self._read(
            "SELECT value, entry_id, ts FROM attributes WHERE user_id = %s AND subject = %s AND attribute = %s "
            "ORDER BY COALESCE(ts, 0) DESC, seq DESC", (user_id, subject.lower(), attribute.lower()))]

    def participants(self, user_id: str) -> list[str]:
        return list(self._cached(("participants", user_id), lambda: tuple(self._participants(user_id))))

    def _participants(self, user_id: str) -> list[str]:
        # A loose index scan over (user_id, speaker, seq): one seek per distinct speaker.
        rows = self._read(
            "WITH RECURSIVE s(speaker) AS ("
            " SELECT min(speaker) FROM entries WHERE user_id = %(u)s AND speaker IS NOT NULL"
            " UNION ALL"
            " SELECT (SELECT min(speaker) FROM entries WHERE user_id = %(u)s AND speaker > s.speaker)"
            " FROM s WHERE s.speaker IS NOT NULL) "
            "SELECT speaker, (SELECT min(seq) FROM entries WHERE user_id = %(u)s AND speaker = s.speaker) AS first "
            "FROM s WHERE speaker IS NOT NULL ORDER BY first", {"u": user_id})
        return [r[0] for r in rows]

    def users(self) -> dict[str, int]:
        out = {u: int(n) for u, n in self._read("SELECT user_id, count(*) FROM entries GROUP BY user_id")}
        for (u,) in self._read("SELECT DISTINCT user_id FROM pending_turns"):
            out.setdefault(u, 0)
        return dict(sorted(out.items()))

    def stats(self, user_id: str | None = None) -> dict[str, int]:
        if user_id is None:
            rows = self._read("SELECT key, sum(value) FROM stats GROUP BY key")
            where, params = "", ()  # type: tuple[str, tuple[str, ...]]
        else:
            rows = self._read("SELECT key, value FROM stats WHERE user_id = %s", (user_id,))
            where, params = " WHERE user_id = %s", (user_id,)
        out = dict.fromkeys(STAT_KEYS, 0) | {k: int(v) for k, v in rows}
        counts = self._read(f"SELECT (SELECT count(*) FROM quarantine{where}), (SELECT count(*) FROM entries{where}), "
                            f"(SELECT count(*) FROM edges{where}), (SELECT count(*) FROM pending_turns{where})",
                            params * 4)[0]
        for key, value in zip(("quarantined", "entries", "update_edges", "pending_turns"), counts, strict=True):
            out[key] = int(value)
        return out

    # ------------------------------------------------------------------ deletion
    def delete(self, entry_id: str, user_id: str | None = None) -> bool:
        found = self.get([entry_id], user_id)
        if entry_id not in found:
            return False
        entry = found[entry_id]
        with self._tx() as cur:
            # Under the user's lock: a link of this entry waits for the delete (and finds it
            # gone), or the delete for the link (and bridges its edge), never both at once.
            self._hold_user(cur, entry.user_id)
            self._bridged_delete(cur, entry.user_id, entry_id)
            self._touch(cur, [entry.user_id])
        return True

    def _bridged_delete(self, cur: psycopg.Cursor[Any], user_id: str, entry_id: str) -> None:
        """Delete one entry's rows, bridging update chains through it (``a -> x -> b``
        becomes ``a -> b``)."""
        cur.execute(
            "INSERT INTO edges (src, dst, kind, user_id, similarity, overlap, created_at) "
            "SELECT p.src, s.dst, 'update', %(u)s, s.similarity, s.overlap, %(now)s "
            "FROM edges p JOIN edges s ON s.src = %(id)s AND s.kind = 'update' AND s.user_id = %(u)s "
            "WHERE p.dst = %(id)s AND p.kind = 'update' AND p.user_id = %(u)s AND p.src <> s.dst "
            "ORDER BY p.seq, s.seq ON CONFLICT DO NOTHING",
            {"u": user_id, "id": entry_id, "now": time.time()})
        self._delete_rows(cur, user_id, [entry_id])

    def replace(self, scope: Scope, entry_ids: Sequence[str], turn_ids: Sequence[str],
                turns: Sequence[Turn]) -> int:
        """One transaction under the user's write lock (a window commit of the user does
        not interleave): the entries of ``entry_ids`` that exist and those of exactly the
        scope extracted from ``turn_ids``, the scope's pending turns of ``turn_ids``, then
        ``turns`` as pending."""
        with self._tx() as cur:
            self._hold_user(cur, scope.user_id)
            cur.execute("SELECT id FROM entries WHERE user_id = %s AND id = ANY(%s)",
                        (scope.user_id, list(entry_ids)))
            victims = [str(r[0]) for r in cur.fetchall()]
            wanted = set(turn_ids)
            exact = "user_id = %s AND agent_id IS NOT DISTINCT FROM %s AND session_id IS NOT DISTINCT FROM %s"
            where = (scope.user_id, scope.agent_id, scope.session_id)
            for turn_id in wanted:
                # A LIKE on the JSON list narrows the scan; the list itself decides. A fact
                # MERGEd from another turn too stays for it, without the turns taken back.
                cur.execute(f"SELECT id, source_turn_ids FROM entries WHERE {exact} AND source_turn_ids LIKE %s",
                            (*where, turn_like(turn_id)))
                for i, src in cur.fetchall():
                    sources = json.loads(src)
                    if not wanted & set(sources) or str(i) in victims:
                        continue
                    if set(sources) - wanted:
                        cur.execute("UPDATE entries SET source_turn_ids = %s WHERE user_id = %s AND id = %s",
                                    (json.dumps([t for t in sources if t not in wanted]), scope.user_id, i))
                    else:
                        victims.append(str(i))
            for entry_id in victims:
                self._bridged_delete(cur, scope.user_id, entry_id)
            if wanted:
                cur.execute(f"SELECT seq, turn FROM pending_turns WHERE {exact}", where)
                cur.execute("DELETE FROM pending_turns WHERE seq = ANY(%s)", (pending_of(cur.fetchall(), turn_ids),))
            if turns:
                self._add_pending(cur, scope, turns)
            self._touch(cur, [scope.user_id])
        return len(victims)

    def link(self, user_id: str, src: str, dst: str) -> str | None:
        # Under the user's write lock (links of one user take turns), with the two entries'
        # rows locked: a delete of either waits for the link, or the link finds it gone.
        with self._tx() as cur:
            self._hold_user(cur, user_id)
            cur.execute("SELECT id, ts FROM entries WHERE user_id = %s AND id = ANY(%s) FOR UPDATE",
                        (user_id, [src, dst]))
            stamps = {str(r[0]): r[1] for r in cur.fetchall()}
            cur.execute("SELECT src, dst FROM edges WHERE user_id = %s AND kind = 'update'", (user_id,))
            edges = [(str(a), str(b)) for a, b in cur.fetchall()]
            why = link_refused(stamps, edges, src, dst)
            if why is None and (src, dst) not in edges:
                cur.execute("INSERT INTO edges(src, dst, kind, user_id, similarity, overlap, created_at) "
                            "VALUES (%s, %s, 'update', %s, 0, 0, %s) ON CONFLICT DO NOTHING",
                            (src, dst, user_id, time.time()))
                self._touch(cur, [user_id])
        return why

    def unlink(self, user_id: str, src: str, dst: str) -> bool:
        with self._tx() as cur:
            self._hold_user(cur, user_id)  # a delete bridging the chain waits for it (see link)
            cur.execute("DELETE FROM edges WHERE user_id = %s AND src = %s AND dst = %s AND kind = 'update'",
                        (user_id, src, dst))
            gone = cur.rowcount
            if gone:
                self._touch(cur, [user_id])
        return gone > 0

    @staticmethod
    def _delete_rows(cur: psycopg.Cursor[Any], user_id: str, ids: list[str]) -> None:
        cur.execute("DELETE FROM entries WHERE user_id = %s AND id = ANY(%s)", (user_id, ids))
        cur.execute("DELETE FROM edges WHERE user_id = %s AND (src = ANY(%s) OR dst = ANY(%s))", (user_id, ids, ids))
        cur.execute("DELETE FROM mentions WHERE user_id = %s AND entry_id = ANY(%s)", (user_id, ids))
        cur.execute("DELETE FROM attributes WHERE user_id = %s AND entry_id = ANY(%s)", (user_id, ids))

    def forget(self, scope: Scope) -> int:
        """Every entry and pending turn of the scope, in one transaction that no window
        commit of the user interleaves with: what was stored before it is gone, and a
        flush racing it finds its pending turns gone and commits nothing. The user's
        lexical totals follow the entries (their triggers), never dropped by hand: a
        commit slipping between a read of the victims and their deletion had left
        entries without totals, and BM25 then took the logarithm of a negative number."""
        with self._tx() as cur:
            self._hold_user(cur, scope.user_id)
            for table in ("pending_turns", "recent_turns"):
                params: list[Any] = [scope.user_id]
                cur.execute(f"DELETE FROM {table} WHERE user_id = %s" + _scope_sql(scope, params), params)
            params = [scope.user_id]
            cur.execute("SELECT id FROM entries WHERE user_id = %s" + _scope_sql(scope, params), params)
            victims = [str(r[0]) for r in cur.fetchall()]
            self._delete_rows(cur, scope.user_id, victims)
            if scope.agent_id is None and scope.session_id is None:
                for table in ("stats", "edges", "mentions", "attributes"):
                    cur.execute(f"DELETE FROM {table} WHERE user_id = %s", (scope.user_id,))
            self._touch(cur, [scope.user_id])
        return len(victims)

    def _hold_user(self, cur: psycopg.Cursor[Any], user_id: str) -> None:
        """Take the user's write lock until the transaction ends (window commits and
        forgets of one user take turns, across hosts)."""
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"ariadnemem-user:{self.schema}:{json.dumps(user_id)}",))

    def clear(self) -> None:
        with self._tx() as cur:
            cur.execute("SELECT DISTINCT user_id FROM entries")
            users = [r[0] for r in cur.fetchall()]
            for table in ("entries", "edges", "pending_turns", "recent_turns", "mentions", "attributes", "stats",
                          "lex_totals"):
                cur.execute(f"DELETE FROM {table}")
            self._touch(cur, users)

    # ------------------------------------------------------------------ checks
    def bad_entries(self, *, user_id: str | None = None) -> list[tuple[str, str]]:
        """(entry id, reason) of every stored entry that cannot be read back whole."""
        sql, params = f"SELECT {ENTRY_COLUMNS} FROM entries", []
        if user_id is not None:
            sql += " WHERE user_id = %s"
            params.append(user_id)
        bad = []
        for row in self._read(sql, params):
            reason = entry_row_problem(_as_bytes(row), self.dim)
            if reason:
                bad.append((str(row[1]), reason))
        return bad

    def quarantine_entries(self, bad: Sequence[tuple[str, str]]) -> int:
        """Move entries (by id) to the quarantine with their reasons; returns how many."""
        moved = 0
        with self._tx() as cur:
            for entry_id, reason in bad:
                cur.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = %s", (entry_id,))
                row = cur.fetchone()
                if row is None:
                    continue
                record = dict(zip(ENTRY_COLUMNS.split(", "), row, strict=True))
                record["embedding"] = _vector(record["embedding"]).tobytes().hex()
                cur.execute("INSERT INTO quarantine (kind, user_id, agent_id, session_id, ref, payload, reason, "
                            "created_at) VALUES ('entry', %s, %s, %s, %s, %s, %s, %s)",
                            (record["user_id"], record["agent_id"], record["session_id"], entry_id,
                             json.dumps(record, default=str), reason[:1000], time.time()))
                self._delete_rows(cur, str(record["user_id"]), [entry_id])
                self._touch(cur, [str(record["user_id"])])
                moved += 1
        return moved

    def quarantined(self) -> list[dict[str, Any]]:
        keys = ("seq", "kind", "user_id", "agent_id", "session_id", "ref", "reason", "created_at")
        rows = self._read(f"SELECT {', '.join(keys)} FROM quarantine ORDER BY seq")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def doctor(self, *, repair: bool = True) -> dict[str, Any]:
        """Check every record; with ``repair``, quarantine what cannot be read. There is no
        separate dense index to drift: vectors are columns of the entries."""
        bad = self.bad_entries()
        bad_pending = []
        for seq, raw in self._read("SELECT seq, turn FROM pending_turns ORDER BY seq"):
            try:
                turn_from_json(raw)
            except InvalidInputError as exc:
                bad_pending.append((int(seq), str(exc)))
        report: dict[str, Any] = {"entries": self.count(), "bad_entries": [list(b) for b in bad],
                                  "drifted_users": [], "bad_pending": [list(b) for b in bad_pending],
                                  "reindexed": 0, "removed": 0, "rebuilt_users": 0}
        moved = 0
        if repair:
            moved += self.quarantine_entries(bad) if bad else 0
            if bad_pending:
                self.quarantine_pending(bad_pending)
                moved += len(bad_pending)
        report["quarantined_now"] = moved
        report["quarantined"] = self.quarantined()
        # The lexical totals BM25 reads must count the user's entries (a forget that raced a
        # commit, before forgets and commits took turns, could leave them short).
        report["drifted_users"] = [str(r[0]) for r in self._read(
            "SELECT coalesce(e.user_id, t.user_id) FROM (SELECT user_id, count(*) AS n, coalesce(sum(doc_len), 0) "
            "AS len FROM entries GROUP BY user_id) e FULL JOIN lex_totals t ON t.user_id = e.user_id "
            "WHERE coalesce(e.n, 0) <> coalesce(t.n_docs, 0) OR coalesce(e.len, 0) <> coalesce(t.total_len, 0)")]
        if repair:
            for user in report["drifted_users"]:
                with self._tx() as cur:
                    self._hold_user(cur, user)
                    cur.execute("DELETE FROM lex_totals WHERE user_id = %s", (user,))
                    cur.execute("INSERT INTO lex_totals (user_id, n_docs, total_len) SELECT user_id, count(*), "
                                "coalesce(sum(doc_len), 0) FROM entries WHERE user_id = %s GROUP BY user_id", (user,))
                    self._touch(cur, [user])
            report["messages"] = self.rebuild_messages()
        return report

    # ------------------------------------------------------------------ export / import
    def export_entries(self, user_id: str | None = None) -> Iterator[Entry]:
        where, params = ("e.user_id = %s", [user_id]) if user_id is not None else ("true", [])
        yield from self._entries_where(where, params, "ORDER BY e.seq")

    def export_table(self, kind: str, user_id: str | None = None) -> list[tuple[Any, ...]]:
        table, columns, order = EXPORT_TABLES[kind]
        where, params = ("WHERE user_id = %s", [user_id]) if user_id is not None else ("", [])
        return self._read(f"SELECT {columns} FROM {table} {where} ORDER BY {order or 'seq'}", params)

    def held_ids(self, ids: Sequence[str]) -> list[str]:
        return [r[0] for r in self._read("SELECT id FROM entries WHERE id = ANY(%s)", (list(ids),))]

    def write_imported(self, plan: Sequence[tuple[str, Any]]) -> list[Entry]:
        """The records in one transaction; then each user's recent turns (the context of
        their scopes' next windows) in a transaction of its own under the user's lock, so a
        window another host commits for the scope meanwhile and the import never write two
        contexts side by side. One lock at a time: an import of many users holds no more.
        A crash between the two leaves the memory as an import without context would."""
        entries: list[Entry] = []
        with self._tx() as cur:
            for kind, item in plan:
                if kind == "recent":
                    continue
                if kind == "entry":
                    self._insert_entry(cur, item)
                    entries.append(item)
                elif kind == "stat":
                    user_id, key, value = item
                    cur.execute("SELECT value FROM stats WHERE user_id = %s AND key = %s", (user_id, key))
                    row = cur.fetchone()
                    if row is not None and int(row[0]) + value > 2**63 - 1:
                        raise InvalidInputError(f"stat {key}", "the sum with the stored counter overflows 64 bits")
                    self._bump(cur, user_id, {key: value})
                else:
                    cur.execute(_IMPORT_SQL[kind], item)
            self._touch(cur, {e.user_id for e in entries} | {
                item[3] if kind == "edge" else item[0] for kind, item in plan if kind not in ("entry", "recent")})
        recent: dict[str, list[tuple[Any, ...]]] = {}
        for kind, item in plan:
            if kind == "recent":
                recent.setdefault(item[0], []).append(item)
        for user_id, items in recent.items():
            with self._tx() as cur:
                self._hold_user(cur, user_id)

                def held(user: str, agent: str | None, session: str | None,
                         cur: psycopg.Cursor[Any] = cur) -> bool:
                    cur.execute("SELECT 1 FROM recent_turns WHERE user_id = %s AND agent_id IS NOT DISTINCT FROM %s "
                                "AND session_id IS NOT DISTINCT FROM %s LIMIT 1", (user, agent, session))
                    return cur.fetchone() is not None

                cur.executemany(_IMPORT_SQL["recent"], imported_recent(items, held))
        return entries

    def index_imported(self, entries: Sequence[Entry]) -> None:
        """Nothing to do: the vectors were committed with the records."""

    def export_rows(self, user_id: str | None = None) -> Iterator[dict[str, Any]]:
        """The export read in one snapshot (a repeatable-read transaction on one pooled
        connection): a window another host commits meanwhile is wholly in it or wholly
        out, never in neither its entries nor its pending turns."""
        from . import transfer

        with self._conn() as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            self._local.conn = conn
            try:
                yield from transfer.export_rows(self, user_id)
            finally:
                self._local.conn = None
                conn.execute("ROLLBACK")

    def import_rows(self, rows: Iterable[dict[str, Any] | tuple[int, dict[str, Any]]]) -> int:
        from . import transfer

        return transfer.import_rows(self, rows)
