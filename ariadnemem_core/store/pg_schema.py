"""The Postgres backend's schema, created and migrated by the library.

``schema_version`` records every migration applied (version, description, when). Opening
a store applies the missing ones in order, in one transaction, under an advisory lock, so
several hosts starting at once migrate exactly once; a database migrated by a newer
library is refused rather than written with an older layout. A later schema change is a
new entry at the end of :data:`MIGRATIONS`, never an edit of an applied one.

Lexical index: each entry's body (text + keywords) is tokenized and Porter-stemmed in
Python exactly as SQLite FTS5's ``porter unicode61`` tokenizer does, stored as a
``tsvector`` literal with positions (so term frequencies are exact) behind a GIN index,
and ranked with the same Okapi BM25 (k1 = 1.2, b = 0.75) as FTS5's ``bm25()``. Document
frequencies are counted through the GIN index at query time and the document count and
total length are kept per user in ``lex_totals`` by triggers, so the statistics are the
user's own (no other user's text shapes a ranking) and never drift from the rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: Schema versions this library knows, in order: (version, description, statements(dim)).
Migration = tuple[int, str, Callable[[int], list[str]]]

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def check_schema_name(name: str) -> str:
    """A Postgres schema name this library will interpolate into SQL (validated, never quoted input)."""
    if not _IDENT.match(name):
        raise ValueError(f"schema name must match {_IDENT.pattern}, got {name!r}")
    return name


def _v1(dim: int) -> list[str]:
    return [
        "CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)",
        f"""CREATE TABLE entries (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            user_id text NOT NULL,
            agent_id text,
            session_id text,
            text text NOT NULL,
            keywords text NOT NULL,
            persons text NOT NULL,
            entities text NOT NULL,
            location text,
            topic text,
            ts double precision,
            first_ts double precision,
            speaker text,
            source_turn_ids text NOT NULL,
            metadata text NOT NULL,
            embedding vector({int(dim)}) NOT NULL,
            lexemes tsvector NOT NULL,
            doc_len integer NOT NULL
        )""",
        "CREATE INDEX entries_user_ts ON entries (user_id, ts)",
        "CREATE INDEX entries_user_seq ON entries (user_id, seq)",
        "CREATE INDEX entries_user_speaker ON entries (user_id, speaker, seq)",
        "CREATE INDEX entries_lexemes ON entries USING gin (lexemes)",
        "CREATE INDEX entries_embedding ON entries USING hnsw (embedding vector_cosine_ops)",
        """CREATE TABLE edges (
            seq bigint GENERATED ALWAYS AS IDENTITY,
            src text NOT NULL, dst text NOT NULL, kind text NOT NULL, user_id text NOT NULL,
            similarity double precision NOT NULL DEFAULT 0, overlap double precision NOT NULL DEFAULT 0,
            created_at double precision,
            PRIMARY KEY (src, dst, kind)
        )""",
        "CREATE INDEX edges_dst ON edges (dst)",
        "CREATE INDEX edges_user ON edges (user_id, seq)",
        """CREATE TABLE pending_turns (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            user_id text NOT NULL, agent_id text, session_id text, turn text NOT NULL
        )""",
        "CREATE INDEX pending_turns_user ON pending_turns (user_id, seq)",
        """CREATE TABLE recent_turns (
            user_id text NOT NULL, agent_id text, session_id text, seq integer NOT NULL, turn text NOT NULL
        )""",
        "CREATE INDEX recent_turns_user ON recent_turns (user_id, seq)",
        """CREATE TABLE mentions (
            seq bigint GENERATED ALWAYS AS IDENTITY,
            user_id text NOT NULL, person text NOT NULL, term text NOT NULL, entry_id text NOT NULL,
            PRIMARY KEY (user_id, person, term, entry_id)
        )""",
        "CREATE INDEX mentions_entry ON mentions (entry_id)",
        """CREATE TABLE attributes (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            user_id text NOT NULL, subject text NOT NULL, attribute text NOT NULL, value text NOT NULL,
            entry_id text NOT NULL, ts double precision
        )""",
        "CREATE INDEX attributes_lookup ON attributes (user_id, subject, attribute)",
        "CREATE INDEX attributes_entry ON attributes (entry_id)",
        "CREATE TABLE stats (user_id text NOT NULL, key text NOT NULL, value bigint NOT NULL, "
        "PRIMARY KEY (user_id, key))",
        "CREATE TABLE lex_totals (user_id text PRIMARY KEY, n_docs bigint NOT NULL, total_len bigint NOT NULL)",
        # Bumped by every transaction that changes a user's entries, edges, counters or
        # attributes: a reader's cache of that user is valid for one generation.
        "CREATE TABLE generations (user_id text PRIMARY KEY, gen bigint NOT NULL)",
        """CREATE TABLE quarantine (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kind text NOT NULL, user_id text, agent_id text, session_id text, ref text,
            payload text NOT NULL, reason text NOT NULL, created_at double precision NOT NULL
        )""",
        # BM25 statistics per user, kept by the database itself: no code path can forget them.
        """CREATE FUNCTION lex_totals_add() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO lex_totals (user_id, n_docs, total_len)
            SELECT user_id, count(*), sum(doc_len) FROM new_rows GROUP BY user_id
            ON CONFLICT (user_id) DO UPDATE SET n_docs = lex_totals.n_docs + excluded.n_docs,
                                                total_len = lex_totals.total_len + excluded.total_len;
            RETURN NULL;
        END $$""",
        """CREATE FUNCTION lex_totals_remove() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE lex_totals t SET n_docs = t.n_docs - o.n, total_len = t.total_len - o.len
            FROM (SELECT user_id, count(*) AS n, sum(doc_len) AS len FROM old_rows GROUP BY user_id) o
            WHERE t.user_id = o.user_id;
            RETURN NULL;
        END $$""",
        """CREATE FUNCTION lex_totals_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE lex_totals t SET total_len = t.total_len + d.delta
            FROM (SELECT n.user_id, sum(n.doc_len - o.doc_len) AS delta
                  FROM new_rows n JOIN old_rows o ON o.seq = n.seq GROUP BY n.user_id) d
            WHERE t.user_id = d.user_id AND d.delta <> 0;
            RETURN NULL;
        END $$""",
        "CREATE TRIGGER entries_lex_add AFTER INSERT ON entries REFERENCING NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION lex_totals_add()",
        "CREATE TRIGGER entries_lex_remove AFTER DELETE ON entries REFERENCING OLD TABLE AS old_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION lex_totals_remove()",
        "CREATE TRIGGER entries_lex_change AFTER UPDATE ON entries REFERENCING OLD TABLE AS old_rows "
        "NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lex_totals_change()",
    ]


#: Every schema version, oldest first. Append; never edit an applied migration.
MIGRATIONS: list[Migration] = [
    (1, "entries, edges, pending turns, counters, attributes, quarantine; pgvector HNSW and GIN lexemes", _v1),
]
#: The newest schema this library writes.
PG_SCHEMA_VERSION = MIGRATIONS[-1][0]
