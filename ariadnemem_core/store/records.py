"""The records: SQLite (WAL, one file) is the memory's source of truth, FTS5 its lexical index.

SQLite holds every entry record with its provenance and embedding, the update edges, the
pending (acknowledged but not yet extracted) turns, the fast-path counters and attributes,
and the statistics. A window is committed in one transaction, so a crash leaves either the
pending turns or the entries they became, never both and never neither.

The lexical index is SQLite's own FTS5 with ``bm25()`` ranking (Okapi BM25, k1=1.2,
b=0.75) and the Porter tokenizer. Chosen over ``bm25s`` because it lives in the same
transaction as the records (no second file to drift), filters by scope inside the index
(scope tokens in an indexed column), and needs no extra dependency.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext, suppress
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidInputError, StoreError
from ..models import Entry, Scope, Turn, UpdateEdge, from_epoch, to_epoch
from ..text import QUERY_STOPWORDS, index_words
from .locking import Guarded
from .rows import (
    ENTRY_COLUMNS,
    entry_params,
    entry_row_problem,
    fts_body,
    readable,
    row_to_entry,
    turn_from_json,
    turn_like,
)

SCHEMA_VERSION = 1
#: Turns kept per scope as pronoun context for the next window.
RECENT_TURNS = 4
#: Counters every ``stats()`` reports (zero when nothing happened yet).
STAT_KEYS = ("turns_seen", "gate_kept", "gate_dropped", "gate_low_info", "gate_low_info_entries",
             "merge", "link", "links_refused", "add", "extract_windows", "extract_fallbacks", "extract_patched_turns")

#: The records' tables and indexes (idempotent: run on every open).
SCHEMA = """
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
-- (user_id, seq): the message lookup (``around``) seeks instead of sorting the user's rows.
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
CREATE INDEX IF NOT EXISTS pending_turns_user ON pending_turns(user_id, seq);
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
-- The message view: one row per stored message (turn), derived from the entries that
-- stand for it (their mean vector, their words), so a question can be matched against
-- whole messages as a flat search over the log would (``search_messages``). Derived data:
-- written with the window, dropped with its entries, rebuilt from the entries
-- (``rebuild_messages``) after an import or by doctor().
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    agent_id TEXT,
    session_id TEXT,
    turn_id TEXT NOT NULL,
    entry_ids TEXT NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_user ON messages(user_id, seq);
CREATE INDEX IF NOT EXISTS messages_turn ON messages(user_id, turn_id);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(scope, body, tokenize = 'porter unicode61');
-- Rows that cannot be used (a pending turn that is not a valid turn, an entry whose
-- embedding or fields are broken) are moved here with the reason instead of failing every
-- later operation: kept (nothing is lost), reported by stats()/doctor(), never read back.
CREATE TABLE IF NOT EXISTS quarantine (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    user_id TEXT,
    agent_id TEXT,
    session_id TEXT,
    ref TEXT,
    payload TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at REAL NOT NULL
);
"""

#: Export record kind -> (table, columns, order; None: insertion order). The columns are
#: what :mod:`.transfer` writes per record, so every backend exports the same tuples.
EXPORT_TABLES: dict[str, tuple[str, str, str | None]] = {
    "edge": ("edges", "src, dst, kind, user_id, similarity, overlap, created_at", None),
    "mention": ("mentions", "user_id, person, term, entry_id", None),
    "attribute": ("attributes", "user_id, subject, attribute, value, entry_id, ts", None),
    "stat": ("stats", "user_id, key, value", "user_id, key"),
    # The last extracted turns of each scope: the pronoun context of its next window.
    "recent": ("recent_turns", "user_id, agent_id, session_id, turn", "user_id, agent_id, session_id, seq"),
}
_IMPORT_SQL = {
    "edge": "INSERT OR IGNORE INTO edges(src, dst, kind, user_id, similarity, overlap, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
    "mention": "INSERT OR IGNORE INTO mentions(user_id, person, term, entry_id) VALUES (?, ?, ?, ?)",
    "attribute": "INSERT INTO attributes(user_id, subject, attribute, value, entry_id, ts) VALUES (?, ?, ?, ?, ?, ?)",
    "pending": "INSERT INTO pending_turns(user_id, agent_id, session_id, turn) VALUES (?, ?, ?, ?)",
    "recent": "INSERT INTO recent_turns(user_id, agent_id, session_id, seq, turn) VALUES (?, ?, ?, ?, ?)",
}


def scope_token(kind: str, value: str) -> str:
    """An FTS-safe token naming one scope component (indexed, so filtering is in-index)."""
    return kind + hashlib.sha1(value.encode("utf-8")).hexdigest()[:20]


def fts_query(text: str, max_terms: int = 32) -> str | None:
    """A safe FTS5 MATCH expression: content words quoted and OR-ed (None if none)."""
    words: list[str] = []
    seen: set[str] = set()
    for word in index_words(text):
        if word in QUERY_STOPWORDS or word in seen:
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



class PendingConflict(StoreError):
    """A window's pending turns were committed by another writer while it was extracted
    (the transaction is rolled back; the ingestor re-reads what is still pending)."""


class Records(Guarded):
    """The SQLite side of :class:`~ariadnemem_core.store.SQLiteStore`: every table and its reads."""

    #: Turns kept per scope as pronoun context for the next window.
    RECENT_TURNS = RECENT_TURNS
    dim: int

    def _check_meta(self, embedder_name: str) -> None:
        # Read first: an existing store is opened without the write lock.
        rows = dict(self._read("SELECT key, value FROM meta WHERE key != 'generation'"))
        if not rows:
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


    def _store_id(self) -> str:
        """This store's id (made once, kept in ``meta``): the server-side name prefix."""
        row = self._read("SELECT value FROM meta WHERE key = 'store_id'")
        if row:
            return str(row[0][0])
        with self._tx() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
            if row:
                return str(row[0])
            import uuid

            value = uuid.uuid4().hex[:16]
            db.execute("INSERT INTO meta(key, value) VALUES ('store_id', ?)", (value,))
            return value


    # ------------------------------------------------------------------ pending turns
    def add_pending(self, scope: Scope, turns: Sequence[Turn]) -> None:
        """Persist acknowledged turns before any processing (crash-safe buffering), and
        count them in ``turns_seen`` in the same transaction."""
        self.replace_rows(scope, (), (), turns)

    def claim(self, scope: Scope) -> AbstractContextManager[None]:
        """No claim is taken here: extraction runs unlocked and a window whose pending
        turns another writer committed meanwhile is dropped at commit (:class:`PendingConflict`)."""
        return nullcontext()

    def reading(self, user_id: str) -> AbstractContextManager[None]:
        """Nothing to open: the read cache checks the generation on every cached read
        (one in-process SQLite query)."""
        return nullcontext()

    def pending(self, scope: Scope | None = None, *, user_id: str | None = None) -> list[tuple[int, Scope, Turn]]:
        """The scope's (or, with ``user_id``, every scope of that user's, or every) pending
        turn in arrival order. A row that is not a valid turn (written by an older version,
        or by hand) is quarantined, not returned: one poison row must not stop every user's
        extraction."""
        if scope is None and user_id is not None:
            rows = self._read("SELECT seq, user_id, agent_id, session_id, turn FROM pending_turns WHERE user_id = ? "
                              "ORDER BY seq", (user_id,))
        elif scope is None:
            rows = self._read("SELECT seq, user_id, agent_id, session_id, turn FROM pending_turns ORDER BY seq")
        else:
            rows = self._read(
                "SELECT seq, user_id, agent_id, session_id, turn FROM pending_turns "
                "WHERE user_id = ? AND agent_id IS ? AND session_id IS ? ORDER BY seq",
                (scope.user_id, scope.agent_id, scope.session_id),
            )
        out, bad = pending_rows(rows)
        if bad:
            self.quarantine_pending(bad)
        return out

    def waiting(self, scope: Scope, limit: int) -> list[tuple[int, Scope, Turn]]:
        """See :meth:`Store.waiting` (one indexed query; a read, never a write)."""
        rows = self._read(waiting_sql("?"), waiting_params(scope, limit))
        return waiting_turns(rows)

    def quarantine_pending(self, bad: Sequence[tuple[int, str]]) -> None:
        """Move pending turns (by seq) to the quarantine with their reasons, in one
        transaction (a row another writer already moved is skipped)."""
        with self._tx() as db:
            for seq, reason in bad:
                row = db.execute("SELECT user_id, agent_id, session_id, turn FROM pending_turns WHERE seq = ?",
                                 (seq,)).fetchone()
                if row is None:
                    continue
                db.execute("INSERT INTO quarantine(kind, user_id, agent_id, session_id, ref, payload, reason, "
                           "created_at) VALUES ('pending', ?, ?, ?, ?, ?, ?, ?)",
                           (*row[:3], str(seq), row[3], reason[:1000], time.time()))
                db.execute("DELETE FROM pending_turns WHERE seq = ?", (seq,))

    def quarantine_entries(self, bad: Sequence[tuple[str, str]]) -> int:
        """Move entries (by id) with their edges, mentions and attributes to the
        quarantine, with their reasons; their vectors are dropped from the dense index on
        the next reconcile. Returns how many were moved."""
        moved = 0
        with self._tx() as db:
            for entry_id, reason in bad:
                row = db.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?", (entry_id,)).fetchone()
                if row is None:
                    continue
                record = dict(zip(ENTRY_COLUMNS.split(", "), row, strict=True))
                record["embedding"] = bytes(record["embedding"] or b"").hex() if isinstance(
                    record["embedding"], bytes | memoryview) else record["embedding"]
                record["edges"] = db.execute(
                    "SELECT src, dst, kind, similarity, overlap, created_at FROM edges WHERE src = ? OR dst = ?",
                    (entry_id, entry_id)).fetchall()
                db.execute("INSERT INTO quarantine(kind, user_id, agent_id, session_id, ref, payload, reason, "
                           "created_at) VALUES ('entry', ?, ?, ?, ?, ?, ?, ?)",
                           (record["user_id"], record["agent_id"], record["session_id"], entry_id,
                            json.dumps(record, default=str), reason[:1000], time.time()))
                db.execute("DELETE FROM entries WHERE id = ?", (entry_id,))
                db.execute("DELETE FROM entries_fts WHERE rowid = ?", (record["seq"],))
                db.execute("DELETE FROM edges WHERE src = ? OR dst = ?", (entry_id, entry_id))
                db.execute("DELETE FROM mentions WHERE entry_id = ?", (entry_id,))
                db.execute("DELETE FROM attributes WHERE entry_id = ?", (entry_id,))
                db.execute("INSERT OR REPLACE INTO tombstones(entry_id, user_id) VALUES (?, ?)",
                           (entry_id, record["user_id"]))
                moved += 1
        return moved

    def quarantined(self) -> list[dict[str, Any]]:
        """Every quarantined row: kind ("pending" or "entry"), scope, ref (pending seq or
        entry id), reason and when (epoch seconds); the payload stays in the table."""
        rows = self._read("SELECT seq, kind, user_id, agent_id, session_id, ref, reason, created_at "
                          "FROM quarantine ORDER BY seq")
        keys = ("seq", "kind", "user_id", "agent_id", "session_id", "ref", "reason", "created_at")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def bad_entries(self, *, only_unindexed: bool = False, user_id: str | None = None) -> list[tuple[str, str]]:
        """(entry id, reason) of every stored entry that cannot be read back whole: broken
        JSON fields, a vector of the wrong size or with NaN/Inf, fields over the limits."""
        sql = f"SELECT {ENTRY_COLUMNS} FROM entries"
        clauses, params = [], []
        if only_unindexed:
            clauses.append("indexed = 0")
        if user_id is not None:
            clauses.append("user_id = ?")
            params.append(user_id)
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        bad = []
        for row in self._read(sql, params):
            reason = entry_row_problem(row, self.dim)
            if reason:
                bad.append((str(row[1]), reason))
        return bad

    def recent_turns(self, scope: Scope) -> list[Turn]:
        rows = self._read(
            "SELECT turn FROM recent_turns WHERE user_id = ? AND agent_id IS ? AND session_id IS ? "
            "ORDER BY seq",
            (scope.user_id, scope.agent_id, scope.session_id),
        )
        out = []
        for (raw,) in rows:  # context only: an unreadable one is skipped
            with suppress(InvalidInputError):
                out.append(turn_from_json(raw))
        return out

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
    def write_window(self, commit: WindowCommit) -> None:
        """The records of one window, in one transaction (see :meth:`_write_window`)."""
        with self._tx() as db:
            self._write_window(db, commit)

    def _write_window(self, db: sqlite3.Connection, commit: WindowCommit) -> None:
        """The SQLite part of a window commit, inside the caller's transaction."""
        scope = commit.scope
        if commit.processed_pending:
            # Extraction ran without the write lock: if another process committed some of
            # these turns meanwhile, this window is stale and must not be written twice.
            deleted = 0
            for start in range(0, len(commit.processed_pending), 500):
                chunk = commit.processed_pending[start : start + 500]
                cur = db.execute(f"DELETE FROM pending_turns WHERE seq IN ({','.join('?' * len(chunk))})", chunk)
                deleted += cur.rowcount
            if deleted != len(commit.processed_pending):
                raise PendingConflict(f"{len(commit.processed_pending) - deleted} of the window's pending turns "
                                      "were already processed by another writer")
        for entry in commit.added:
            self._insert_entry(db, entry)
        for entry in commit.merged:
            db.execute(
                "UPDATE entries SET keywords = ?, persons = ?, entities = ?, ts = ?, "
                "source_turn_ids = ?, metadata = ? WHERE id = ?",
                (json.dumps(entry.keywords), json.dumps(entry.persons), json.dumps(entry.entities),
                 to_epoch(entry.timestamp), json.dumps(entry.source_turn_ids),
                 json.dumps(entry.metadata), entry.id),
            )
            db.execute("UPDATE entries_fts SET body = ? WHERE rowid = ?", (fts_body(entry), entry.seq))
        edges = self._admitted(db, scope.user_id, commit)
        db.executemany(
            "INSERT OR IGNORE INTO edges(src, dst, kind, user_id, similarity, overlap, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(e.src, e.dst, e.kind, scope.user_id, e.similarity, e.overlap, time.time())
             for e in edges],
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
        window_turns = {t.turn_id for t in commit.processed_turns if t.turn_id}
        insert_messages(db, [m for m in message_rows([*commit.added, *commit.merged]) if m.turn_id in window_turns])
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
            sql = f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id IN ({marks})"
            params: list[Any] = list(chunk)
            if user_id is not None:
                # "+user_id": never let the planner pick the (user_id, ts) index here; it
                # did, and scanned every entry of the user (35 ms per call at 30k entries)
                # instead of seeking the ids.
                sql += " AND +user_id = ?"
                params.append(user_id)
            for entry in readable(self._read(sql, params)):
                out[entry.id] = entry
        self._fill_validity(out.values())
        return out

    def _fill_validity(self, entries: Iterable[Entry]) -> None:
        """Set ``superseded_by`` / ``valid_until`` from the persisted update edges: the
        earliest newer state of each entry and the time it was first stated. Derived on
        read (not stored twice), so a deleted or re-imported successor never leaves a stale
        validity behind."""
        by_id = {e.id: e for e in entries}
        ids = list(by_id)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._read(
                f"SELECT g.src, g.dst, COALESCE(n.first_ts, n.ts) FROM edges g JOIN entries n ON n.id = g.dst "
                f"WHERE g.kind = 'update' AND g.src IN ({marks}) ORDER BY COALESCE(n.first_ts, n.ts, 1e300), n.seq",
                chunk)
            for src, dst, ts in rows:
                entry = by_id[src]
                if entry.superseded_by is None:
                    entry.superseded_by, entry.valid_until = dst, from_epoch(ts)

    def entries(self, scope: Scope, *, ts_range: tuple[float, float] | None = None) -> list[Entry]:
        sql = f"SELECT {ENTRY_COLUMNS} FROM entries WHERE user_id = ?"
        params: list[Any] = [scope.user_id]
        sql, params = scope_sql(sql, params, scope)
        if ts_range is not None:
            sql += " AND ts >= ? AND ts <= ?"
            params += [ts_range[0], ts_range[1]]
        sql += " ORDER BY COALESCE(ts, 1e300), seq"
        found = readable(self._read(sql, params))
        self._fill_validity(found)
        return found

    def count(self, scope: Scope | None = None) -> int:
        if scope is None:
            return int(self._read("SELECT COUNT(*) FROM entries")[0][0])
        sql, params = scope_sql("SELECT COUNT(*) FROM entries WHERE user_id = ?", [scope.user_id], scope)
        return int(self._read(sql, params)[0][0])

    def around(self, scope: Scope, entry: Entry, n: int) -> list[Entry]:
        """The entries stored up to ``n`` places before and after ``entry`` in its scope
        (insertion order, ``entry`` itself included): the other sentences of its message
        were stored next to it. Read-only shared objects (generation cache)."""
        sql, params = scope_sql("SELECT id FROM entries WHERE user_id = ? AND seq BETWEEN ? AND ?",
                                 [scope.user_id, entry.seq - n, entry.seq + n], scope)
        key = ("around", scope.user_id, scope.agent_id, scope.session_id, entry.seq, n)
        ids = self._cached(key, lambda: [r[0] for r in self._read(sql + " ORDER BY seq", params)])
        found = self.get(ids, scope.user_id, cached=True)
        return [found[i] for i in ids if i in found]

    def vectors_in_window(self, scope: Scope, lo: float, hi: float,
                          limit: int | None = None) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Ids, timestamps and embeddings of the scope's entries with lo <= ts <= hi
        (at most ``limit`` of them, oldest first, when given).

        The time window is pushed into the index (a range scan on ``(user_id, ts)``), so a
        bridge query only ever scores memories that can lie between its two terminals.
        """
        sql, params = scope_sql("SELECT id, ts, embedding FROM entries WHERE user_id = ? AND ts >= ? AND ts <= ?",
                                 [scope.user_id, lo, hi], scope)
        if limit is not None:
            sql += " ORDER BY ts LIMIT ?"
            params.append(int(limit))
        rows = self._read(sql, params)
        if not rows:
            return [], np.zeros(0), np.zeros((0, self.dim), dtype=np.float32)
        ids = [r[0] for r in rows]
        ts = np.array([r[1] for r in rows], dtype=np.float64)
        mat = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), self.dim)
        return ids, ts, mat

    def lexical_search(self, scope: Scope, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` BM25 matches (entry id, positive score) inside the scope."""
        return self._fts_top("entries", "id", scope, query, k)

    def _fts_top(self, table: str, key: str, scope: Scope, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` BM25 matches of ``table`` (``entries`` or ``messages``) inside the scope:
        (its ``key`` column, positive score)."""
        expr = fts_query(query)
        if expr is None:
            return []
        scope_expr = " AND ".join(f'scope : "{tok}"' for tok in _scope_filter_tokens(scope))
        # Top-k inside FTS5 first, then the join: joining before the LIMIT looked up the
        # row of every match (thousands for a common word at 100k entries).
        rows = self._read(
            f"SELECT t.{key}, f.score FROM (SELECT rowid, -bm25({table}_fts, 0.0, 1.0) AS score FROM {table}_fts "
            f"WHERE {table}_fts MATCH ? ORDER BY bm25({table}_fts, 0.0, 1.0) LIMIT ?) f "
            f"JOIN {table} t ON t.seq = f.rowid ORDER BY f.score DESC",
            (f"{scope_expr} AND ({expr})", k),
        )
        return [(r[0], float(r[1])) for r in rows]

    def message_index(self, scope: Scope) -> tuple[list[str], list[list[str]], np.ndarray]:
        """The scope's message view for dense search: (turn ids, the entry ids of each
        message, their vectors as a matrix), cached for the store generation.

        A scan, not an index: one user's messages (a year of chat is ~20,000; 30 MB of
        vectors) are scored with one matrix product in a few milliseconds.
        """
        def load() -> tuple[list[str], list[list[str]], np.ndarray]:
            sql, params = scope_sql("SELECT turn_id, entry_ids, embedding FROM messages WHERE user_id = ?",
                                     [scope.user_id], scope)
            rows = self._read(sql + " ORDER BY seq", params)
            if not rows:
                return [], [], np.zeros((0, self.dim), dtype=np.float32)
            mat = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), self.dim)
            return [r[0] for r in rows], [json.loads(r[1]) for r in rows], mat

        return self._cached(("messages", scope.user_id, scope.agent_id, scope.session_id), load)  # type: ignore[no-any-return]

    def message_lexical(self, scope: Scope, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` BM25 matches among the scope's messages: (turn id, positive score)."""
        return self._fts_top("messages", "turn_id", scope, query, k)

    def rebuild_messages(self, user_id: str | None = None) -> int:
        """Derive the message view again from the entries (all users, or one); returns
        how many messages it holds now. For stores written before the view existed, and
        after an import."""
        with self._tx() as db:
            if user_id is None:
                db.execute("DELETE FROM messages")
                db.execute("DELETE FROM messages_fts")
                users = [r[0] for r in db.execute("SELECT DISTINCT user_id FROM entries")]
            else:
                delete_messages(db, user_id)
                users = [user_id]
            count = 0
            for user in users:
                rows = db.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE user_id = ? ORDER BY seq", (user,))
                messages = message_rows(readable(rows.fetchall()))
                insert_messages(db, messages)
                count += len(messages)
            return count

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
            out["quarantined"] = int(self._read("SELECT COUNT(*) FROM quarantine")[0][0])
        else:
            out["quarantined"] = int(self._read("SELECT COUNT(*) FROM quarantine WHERE user_id = ?",
                                                (user_id,))[0][0])
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


    # ------------------------------------------------------------------ deletion (records side)
    def has_unindexed(self) -> bool:
        """Whether a committed entry still waits for its vector (a writer died in between)."""
        return bool(self._read("SELECT 1 FROM entries WHERE indexed = 0 LIMIT 1"))

    def mark_unindexed(self, ids: Sequence[str]) -> None:
        """Flag entries for the next reconcile (their dense copy is out of date)."""
        with self._tx() as db:
            db.executemany("UPDATE entries SET indexed = 0 WHERE id = ?", [(i,) for i in ids])

    def delete_entry_rows(self, entry: Entry) -> None:
        """Remove one entry's records, bridging update chains through it (``a -> x -> b``
        becomes ``a -> b``), in one transaction; its vector goes through the tombstone."""
        with self._tx() as db:
            self._bridged_delete(db, entry)

    def _bridged_delete(self, db: sqlite3.Connection, entry: Entry) -> None:
        preds = [r[0] for r in db.execute(
            "SELECT src FROM edges WHERE dst = ? AND kind = 'update'", (entry.id,))]
        succs = db.execute(
            "SELECT dst, similarity, overlap FROM edges WHERE src = ? AND kind = 'update'",
            (entry.id,)).fetchall()
        db.executemany(
            "INSERT OR IGNORE INTO edges(src, dst, kind, user_id, similarity, overlap, created_at) "
            "VALUES (?, ?, 'update', ?, ?, ?, ?)",
            [(p, d, entry.user_id, sim, ov, time.time()) for p in preds for d, sim, ov in succs if p != d],
        )
        self._delete_rows(db, [entry])

    def entries_of_turns(self, scope: Scope, turn_ids: Sequence[str]) -> list[Entry]:
        """The entries of exactly ``scope`` extracted from any of ``turn_ids``."""
        wanted = set(turn_ids)
        out: list[Entry] = []
        for turn_id in wanted:
            # A LIKE on the JSON list narrows the scan; the list itself decides.
            rows = self._read(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE user_id = ? AND agent_id IS ? "
                              "AND session_id IS ? AND source_turn_ids LIKE ?",
                              (scope.user_id, scope.agent_id, scope.session_id, turn_like(turn_id)))
            out += [e for e in readable(rows) if wanted & set(e.source_turn_ids)]
        return list({e.id: e for e in out}.values())

    def replace_rows(self, scope: Scope, victims: Sequence[Entry], turn_ids: Sequence[str],
                     turns: Sequence[Turn], kept: Sequence[Entry] = ()) -> None:
        """Remove ``victims`` (one at a time, so a chain through two of them is bridged
        whole), take ``turn_ids`` out of the provenance of ``kept`` (facts other turns
        keep), remove the scope's pending turns with an id in ``turn_ids``, and persist
        ``turns`` as pending (counted in ``turns_seen``), in one transaction."""
        with self._tx() as db:
            if kept:
                self._drop_provenance(db, kept, turn_ids)
            for entry in victims:
                self._bridged_delete(db, entry)
            if turn_ids:
                rows = db.execute("SELECT seq, turn FROM pending_turns WHERE user_id = ? AND agent_id IS ? "
                                  "AND session_id IS ?", (scope.user_id, scope.agent_id, scope.session_id))
                db.executemany("DELETE FROM pending_turns WHERE seq = ?",
                               [(seq,) for seq in pending_of(rows.fetchall(), turn_ids)])
            if turns:
                db.executemany(
                    "INSERT INTO pending_turns(user_id, agent_id, session_id, turn) VALUES (?, ?, ?, ?)",
                    [(scope.user_id, scope.agent_id, scope.session_id, json.dumps(t.to_dict())) for t in turns])
                self._bump(db, scope.user_id, {"turns_seen": len(turns)})

    @staticmethod
    def _admitted(db: sqlite3.Connection, user_id: str, commit: WindowCommit) -> list[UpdateEdge]:
        """The window's edges that still hold now that it holds the write lock
        (:func:`admitted_links`)."""
        def read(ids: list[str]) -> tuple[dict[str, float | None], list[tuple[str, str]]]:
            stamps: dict[str, float | None] = {}
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                stamps.update(db.execute(f"SELECT id, ts FROM entries WHERE user_id = ? AND id IN "
                                         f"({','.join('?' * len(chunk))})", (user_id, *chunk)).fetchall())
            return stamps, db.execute("SELECT src, dst FROM edges WHERE user_id = ? AND kind = 'update'",
                                      (user_id,)).fetchall()

        return admitted_links(commit, read)

    def link(self, user_id: str, src: str, dst: str) -> str | None:
        """See :meth:`Store.link`: checked and written under the store's write lock (a
        ``link``, ``delete`` or window commit of another process waits for it)."""
        with self._tx() as db:
            stamps = dict(db.execute("SELECT id, ts FROM entries WHERE user_id = ? AND id IN (?, ?)",
                                     (user_id, src, dst)).fetchall())
            edges = db.execute("SELECT src, dst FROM edges WHERE user_id = ? AND kind = 'update'",
                               (user_id,)).fetchall()
            why = link_refused(stamps, edges, src, dst)
            if why is None and (src, dst) not in edges:
                db.execute("INSERT INTO edges(src, dst, kind, user_id, similarity, overlap, created_at) "
                           "VALUES (?, ?, 'update', ?, 0, 0, ?)", (src, dst, user_id, time.time()))
        return why

    def unlink(self, user_id: str, src: str, dst: str) -> bool:
        """Remove the update edge ``src -> dst`` of ``user_id``, in one transaction (the
        read cache and other processes see the new generation); False if there was none."""
        with self._tx() as db:
            gone = db.execute("DELETE FROM edges WHERE user_id = ? AND src = ? AND dst = ? AND kind = 'update'",
                              (user_id, src, dst)).rowcount
        return gone > 0

    def forget_rows(self, scope: Scope, victims: Sequence[Entry]) -> None:
        """Remove a scope's entries (``victims``), pending and recent turns, and for a whole
        user their counters, edges, mentions and attributes, in one transaction."""
        with self._tx() as db:
            self._delete_rows(db, victims)
            sql, params = scope_sql("DELETE FROM pending_turns WHERE user_id = ?", [scope.user_id], scope)
            db.execute(sql, params)
            sql, params = scope_sql("DELETE FROM recent_turns WHERE user_id = ?", [scope.user_id], scope)
            db.execute(sql, params)
            delete_messages(db, scope.user_id, scope=scope)
            if scope.agent_id is None and scope.session_id is None:
                for table in ("stats", "edges", "mentions", "attributes"):
                    db.execute(f"DELETE FROM {table} WHERE user_id = ?", (scope.user_id,))

    def clear_rows(self) -> list[str]:
        """Remove every record (all users); returns the users that had entries."""
        users = [r[0] for r in self._read("SELECT DISTINCT user_id FROM entries")]
        with self._tx() as db:
            for table in ("entries", "edges", "pending_turns", "recent_turns", "mentions", "attributes",
                          "stats", "tombstones", "entries_fts", "messages", "messages_fts"):
                db.execute(f"DELETE FROM {table}")
        return users

    def bad_pending(self) -> list[tuple[int, str]]:
        """(seq, reason) of every pending row that is not a valid turn."""
        bad = []
        for seq, raw in self._read("SELECT seq, turn FROM pending_turns ORDER BY seq"):
            try:
                turn_from_json(raw)
            except InvalidInputError as exc:
                bad.append((int(seq), str(exc)))
        return bad

    # ------------------------------------------------------------------ export / import (records side)
    @property
    def embedder_name(self) -> str:
        """The embedder the store was built with (an import of another one is refused)."""
        return str(self._read("SELECT value FROM meta WHERE key = 'embedder'")[0][0])

    def export_entries(self, user_id: str | None = None) -> Iterator[Entry]:
        """Every entry (of ``user_id``, or all) in insertion order, validity filled."""
        where, params = ("WHERE user_id = ?", (user_id,)) if user_id is not None else ("", ())
        rows = self._read(f"SELECT {ENTRY_COLUMNS} FROM entries {where} ORDER BY seq", params)
        for start in range(0, len(rows), 500):
            chunk = [row_to_entry(row) for row in rows[start : start + 500]]
            self._fill_validity(chunk)
            yield from chunk

    def export_table(self, kind: str, user_id: str | None = None) -> list[tuple[Any, ...]]:
        """The rows of one exported record kind (see :data:`EXPORT_TABLES`), in a stable order."""
        table, columns, order = EXPORT_TABLES[kind]
        where, params = ("WHERE user_id = ?", (user_id,)) if user_id is not None else ("", ())
        return self._read(f"SELECT {columns} FROM {table} {where} ORDER BY {order or 'rowid'}", params)

    def held_ids(self, ids: Sequence[str]) -> list[str]:
        """The ids among ``ids`` that this store already holds (all users)."""
        out: list[str] = []
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            out += [r[0] for r in self._read(f"SELECT id FROM entries WHERE id IN ({','.join('?' * len(chunk))})",
                                             chunk)]
        return out

    def write_imported(self, plan: Sequence[tuple[str, Any]]) -> list[Entry]:
        """Write checked import records in one transaction; returns the new entries
        (seq set), which the caller indexes."""
        entries: list[Entry] = []
        with self._tx() as db:
            db.executemany(_IMPORT_SQL["recent"], imported_recent(
                [item for kind, item in plan if kind == "recent"],
                lambda u, a, s: db.execute("SELECT 1 FROM recent_turns WHERE user_id = ? AND agent_id IS ? "
                                           "AND session_id IS ? LIMIT 1", (u, a, s)).fetchone() is not None))
            for kind, item in plan:
                if kind == "recent":
                    continue
                if kind == "entry":
                    self._insert_entry(db, item)
                    entries.append(item)
                elif kind == "stat":
                    user_id, key, value = item
                    row = db.execute("SELECT value FROM stats WHERE user_id = ? AND key = ?",
                                     (user_id, key)).fetchone()
                    if row is not None and int(row[0]) + value > 2**63 - 1:
                        raise InvalidInputError(f"stat {key}", "the sum with the stored counter overflows 64 bits")
                    self._bump(db, user_id, {key: value})
                else:
                    db.execute(_IMPORT_SQL[kind], item)
            # The message view is derived from the entries: made here, as the commit makes it.
            insert_messages(db, message_rows(entries))
        return entries

    def _insert_entry(self, db: sqlite3.Connection, entry: Entry) -> None:
        cur = db.execute(
            "INSERT INTO entries(id, user_id, agent_id, session_id, text, keywords, persons, "
            "entities, location, topic, ts, first_ts, speaker, source_turn_ids, metadata, embedding) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            entry_params(entry),
        )
        entry.seq = int(cur.lastrowid or 0)  # always set after an INSERT
        db.execute("INSERT INTO entries_fts(rowid, scope, body) VALUES (?, ?, ?)",
                   (entry.seq, scope_tokens(entry), fts_body(entry)))

    def _delete_rows(self, db: sqlite3.Connection, entries: Sequence[Entry]) -> None:
        turns = {(e.user_id, t) for e in entries for t in e.source_turn_ids}
        mates = self._message_mates(db, turns)
        for e in entries:
            db.execute("DELETE FROM entries WHERE id = ?", (e.id,))
            db.execute("DELETE FROM entries_fts WHERE rowid = ?", (e.seq,))
            db.execute("DELETE FROM edges WHERE src = ? OR dst = ?", (e.id, e.id))
            db.execute("DELETE FROM mentions WHERE entry_id = ?", (e.id,))
            db.execute("DELETE FROM attributes WHERE entry_id = ?", (e.id,))
            db.execute("INSERT OR REPLACE INTO tombstones(entry_id, user_id) VALUES (?, ?)", (e.id, e.user_id))
        # The message view of its turns goes with it (it holds the message's words), and is
        # derived again from the entries of those turns that remain ("I adopted a parrot. I
        # also bought a kayak.": deleting the parrot keeps the kayak's message).
        self._derive_messages_again(db, turns, mates - {e.id for e in entries})

    @staticmethod
    def _message_mates(db: sqlite3.Connection, turns: set[tuple[str, str]]) -> set[str]:
        """The entries the message view lists for ``turns`` ((user, turn id) pairs)."""
        mates: set[str] = set()
        for user_id, turn_id in turns:
            for (ids,) in db.execute("SELECT entry_ids FROM messages WHERE user_id = ? AND turn_id = ?",
                                     (user_id, turn_id)):
                mates.update(json.loads(ids))
        return mates

    @staticmethod
    def _derive_messages_again(db: sqlite3.Connection, turns: set[tuple[str, str]], rest: set[str]) -> None:
        """Drop the message rows of ``turns`` and derive them again from the entries
        ``rest`` as they are stored now."""
        for user_id, turn_id in turns:
            delete_messages(db, user_id, turn_id)
        ids = sorted(rest)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = db.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id IN ({','.join('?' * len(chunk))})",
                              chunk)
            insert_messages(db, [m for m in message_rows(readable(rows.fetchall())) if (m.user_id, m.turn_id) in turns])

    def _drop_provenance(self, db: sqlite3.Connection, entries: Sequence[Entry], turn_ids: Sequence[str]) -> None:
        """Take ``turn_ids`` out of the provenance of ``entries``, which other turns keep
        (a fact MERGEd from two puts stays while one of them does); the message view of
        those turns is derived again without them."""
        wanted = set(turn_ids)
        turns = {(e.user_id, t) for e in entries for t in e.source_turn_ids if t in wanted}
        mates = self._message_mates(db, turns)
        db.executemany("UPDATE entries SET source_turn_ids = ? WHERE id = ?",
                       [(json.dumps([t for t in e.source_turn_ids if t not in wanted]), e.id) for e in entries])
        self._derive_messages_again(db, turns, mates)


def link_refused(stamps: dict[str, float | None], edges: Sequence[tuple[str, str]], src: str,
                 dst: str) -> str | None:
    """Why the update edge ``src -> dst`` may not be added (see :meth:`Store.link`), from
    the two entries' timestamps (``stamps``, by id; one missing: gone) and the user's
    update edges; None when it may (or is there already)."""
    newer = [b for a, b in edges if a == src]
    if src not in stamps or dst not in stamps:
        return "missing"
    if dst in newer:
        return None
    if newer:
        return f"forked:{newer[0]}"
    said, later = stamps[src], stamps[dst]
    if said is not None and later is not None and later < said:
        return "order"
    succ: dict[str, list[str]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    seen, todo = {dst}, [dst]
    while todo:
        for nxt in succ.get(todo.pop(), ()):
            if nxt == src:
                return "loop"
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return None


def imported_recent(items: Sequence[tuple[Any, ...]], held: Callable[[str, str | None, str | None], bool],
                    ) -> list[tuple[Any, ...]]:
    """The rows of an import's recent turns ``(user, agent, session, turn JSON)``, numbered
    per scope in file order, for the scopes that hold none yet (``held``): a scope of this
    memory keeps its own context, which follows what it extracted last."""
    rows: list[tuple[Any, ...]] = []
    seq: dict[tuple[str, str | None, str | None], int] = {}
    skipped: set[tuple[str, str | None, str | None]] = set()
    for user, agent, session, turn in items:
        scope = (user, agent, session)
        if scope in skipped:
            continue
        if scope not in seq:
            if held(*scope):
                skipped.add(scope)
                continue
            seq[scope] = 0
        rows.append((user, agent, session, seq[scope], turn))
        seq[scope] += 1
    return rows


def admitted_links(commit: WindowCommit,
                   read: Callable[[list[str]], tuple[dict[str, float | None], Sequence[tuple[str, str]]]],
                   ) -> list[UpdateEdge]:
    """The window's edges to write: its update edges that still hold when it commits (a
    dropped one is counted in the ``links_refused`` stat), and any other edges.

    The detector read the candidates before the commit, without the write lock: another
    process may have given the same old fact a newer state meanwhile, or deleted it. The
    first committed link wins (one truth per fork, as :meth:`Store.link` keeps it), and an
    edge to a deleted fact is not written; the new fact itself is kept, as a plain ADD.

    Args:
        commit: the window.
        read: the backend's read, inside the commit's transaction, of the timestamps of
            the given entries (by id; one missing: gone) and the user's update edges.
    """
    updates = [e for e in commit.edges if e.kind == "update"]
    if not updates:
        return list(commit.edges)
    stamps, stored = read(sorted({i for e in updates for i in (e.src, e.dst)}))
    known = list(stored)
    kept: list[UpdateEdge] = []
    for edge in updates:
        # Not the order rule: the detector read the order before this window's MERGEs,
        # which refresh a restated fact's time ("at 2 pm" -> "moved to 3 pm" -> "at 2 pm,
        # right?" in one window); only what another writer did can void a decision here.
        if link_refused(stamps, known, edge.src, edge.dst) in (None, "order"):
            kept.append(edge)
            known.append((edge.src, edge.dst))
    if len(kept) < len(updates):
        commit.stats["links_refused"] = commit.stats.get("links_refused", 0) + len(updates) - len(kept)
    return [e for e in commit.edges if e.kind != "update"] + kept


def pending_of(rows: Iterable[tuple[int, str]], turn_ids: Sequence[str]) -> list[int]:
    """The seqs of the pending rows ``(seq, turn JSON)`` whose turn id is one of
    ``turn_ids``. A row that is not valid JSON is nobody's turn here (:meth:`pending`
    quarantines it): it must not stop a replace."""
    wanted = set(turn_ids)
    out = []
    for seq, raw in rows:
        try:
            turn_id = json.loads(raw).get("turn_id")
        except (ValueError, AttributeError):
            continue
        if turn_id in wanted:
            out.append(int(seq))
    return out


# ---------------------------------------------------------------------- waiting turns
def waiting_sql(mark: str) -> str:
    """The query of the latest pending turns a reader of a scope may see, newest first: its
    user, and its agent and session where it names them (``mark``: the driver's placeholder)."""
    return (f"SELECT seq, user_id, agent_id, session_id, turn FROM pending_turns WHERE user_id = {mark} "
            f"AND (CAST({mark} AS TEXT) IS NULL OR agent_id = {mark}) "
            f"AND (CAST({mark} AS TEXT) IS NULL OR session_id = {mark}) "
            f"ORDER BY seq DESC LIMIT {mark}")


def waiting_params(scope: Scope, limit: int) -> tuple[Any, ...]:
    """The parameters of :func:`waiting_sql` for ``scope``."""
    return (scope.user_id, scope.agent_id, scope.agent_id, scope.session_id, scope.session_id, int(limit))


def pending_rows(rows: Iterable[tuple[Any, ...]]) -> tuple[list[tuple[int, Scope, Turn]], list[tuple[int, str]]]:
    """``pending_turns`` rows ``(seq, user, agent, session, turn JSON)`` as (seq, scope,
    turn), and the rows that are not a valid turn as (seq, why), each in the rows' order."""
    out: list[tuple[int, Scope, Turn]] = []
    bad: list[tuple[int, str]] = []
    for seq, u, a, s, t in rows:
        try:
            out.append((int(seq), Scope(u, a, s), turn_from_json(t)))
        except InvalidInputError as exc:
            bad.append((int(seq), str(exc)))
    return out, bad


def waiting_turns(rows: Iterable[tuple[Any, ...]]) -> list[tuple[int, Scope, Turn]]:
    """:func:`waiting_sql`'s rows (newest first) as (seq, scope, turn) in arrival order; a
    row that is not a valid turn is skipped here (a read writes nothing: flush quarantines it)."""
    return pending_rows(rows)[0][::-1]


# ---------------------------------------------------------------------- the message view
@dataclass(slots=True)
class MessageRow:
    """One message as the message view holds it (see ``messages`` in the schema)."""

    user_id: str
    agent_id: str | None
    session_id: str | None
    turn_id: str
    entry_ids: list[str]
    body: str
    vector: np.ndarray


def message_rows(entries: Iterable[Entry]) -> list[MessageRow]:
    """The message view of ``entries``: per (scope, turn), the entries that stand for the
    turn, their words (own words where kept, else the restatement) and the normalised
    mean of their vectors. The same rows whether derived at commit or rebuilt later."""
    groups: dict[tuple[str, str | None, str | None, str], list[Entry]] = {}
    for e in entries:
        for turn_id in e.source_turn_ids:
            groups.setdefault((e.user_id, e.agent_id, e.session_id, turn_id), []).append(e)
    rows: list[MessageRow] = []
    for (user_id, agent_id, session_id, turn_id), group in groups.items():
        vecs = [e.embedding for e in group if e.embedding is not None]
        if not vecs:
            continue
        mean = np.mean(np.stack(vecs), axis=0).astype(np.float32)
        norm = float(np.linalg.norm(mean))
        said = [e.metadata.get("said") for e in group]
        body = " ".join(s if isinstance(s, str) and s else e.text for s, e in zip(said, group, strict=True))
        rows.append(MessageRow(user_id, agent_id, session_id, turn_id, [e.id for e in group], body,
                               mean / norm if norm > 0 else mean))
    return rows


def insert_messages(db: sqlite3.Connection, rows: Sequence[MessageRow]) -> None:
    for m in rows:
        cur = db.execute(
            "INSERT INTO messages(user_id, agent_id, session_id, turn_id, entry_ids, embedding) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (m.user_id, m.agent_id, m.session_id, m.turn_id, json.dumps(m.entry_ids),
             np.asarray(m.vector, dtype=np.float32).tobytes()),
        )
        toks = [scope_token("u", m.user_id)]
        if m.agent_id is not None:
            toks.append(scope_token("a", m.agent_id))
        if m.session_id is not None:
            toks.append(scope_token("s", m.session_id))
        db.execute("INSERT INTO messages_fts(rowid, scope, body) VALUES (?, ?, ?)",
                   (cur.lastrowid, " ".join(toks), m.body))


def delete_messages(db: sqlite3.Connection, user_id: str, turn_id: str | None = None,
                     scope: Scope | None = None) -> None:
    """Drop message rows of a user (one turn of theirs, or those of a scope)."""
    sql, params = "SELECT seq FROM messages WHERE user_id = ?", [user_id]
    if turn_id is not None:
        sql += " AND turn_id = ?"
        params.append(turn_id)
    if scope is not None:
        sql, params = scope_sql(sql, params, scope)
    seqs = [r[0] for r in db.execute(sql, params)]
    for start in range(0, len(seqs), 500):
        chunk = seqs[start : start + 500]
        marks = ",".join("?" * len(chunk))
        db.execute(f"DELETE FROM messages WHERE seq IN ({marks})", chunk)
        db.execute(f"DELETE FROM messages_fts WHERE rowid IN ({marks})", chunk)


def scope_tokens(entry: Entry) -> str:
    """The scope tokens an indexed row of ``entry`` carries (see :func:`scope_token`)."""
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


def scope_sql(sql: str, params: list[Any], scope: Scope) -> tuple[str, list[Any]]:
    """``sql`` (a SQLite query already filtered by user) narrowed to ``scope``'s agent and
    session, with their values appended to ``params``."""
    if scope.agent_id is not None:
        sql += " AND agent_id = ?"
        params.append(scope.agent_id)
    if scope.session_id is not None:
        sql += " AND session_id = ?"
        params.append(scope.session_id)
    return sql, params


