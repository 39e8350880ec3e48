"""Export and import: every record of a store (or of one user) as JSON-able rows.

The export is the records, embeddings included, so an import re-creates the dense index
from them and needs no embedding model; the meta row names the embedder, and an export of
another embedder is refused (two models' vectors share no space).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import AriadneMemError, StoreError
from ..models import Entry
from .records import ENTRY_COLUMNS, SCHEMA_VERSION, _entry_params, _fts_body, _scope_tokens, row_to_entry

if TYPE_CHECKING:
    from . import Store


def export_rows(store: Store, user_id: str | None = None) -> Iterator[dict[str, Any]]:
    """Every record as JSON-able dicts (entries with embeddings, edges, counters,
    attributes, statistics, pending turns), in a stable order; ``user_id``: only that
    user's records (a per-user data export)."""
    where, params = ("WHERE user_id = ?", (user_id,)) if user_id is not None else ("", ())
    yield {"type": "meta", "schema": SCHEMA_VERSION, "dim": store.dim,
           "embedder": store._read("SELECT value FROM meta WHERE key = 'embedder'")[0][0]}
    for row in store._read(f"SELECT {ENTRY_COLUMNS} FROM entries {where} ORDER BY seq", params):
        yield {"type": "entry", **row_to_entry(row).to_dict(with_embedding=True)}
    for src, dst, kind, uid, sim, ov, created in store._read(
            f"SELECT src, dst, kind, user_id, similarity, overlap, created_at FROM edges {where} ORDER BY rowid",
            params):
        yield {"type": "edge", "src": src, "dst": dst, "kind": kind, "user_id": uid,
               "similarity": sim, "overlap": ov, "created_at": created}
    for uid, person, term, entry_id in store._read(
            f"SELECT user_id, person, term, entry_id FROM mentions {where} ORDER BY rowid", params):
        yield {"type": "mention", "user_id": uid, "person": person, "term": term, "entry_id": entry_id}
    for row in store._read(f"SELECT user_id, subject, attribute, value, entry_id, ts FROM attributes {where} "
                          "ORDER BY rowid", params):
        yield {"type": "attribute", **dict(zip(("user_id", "subject", "attribute", "value", "entry_id",
                                                 "ts"), row, strict=True))}
    for uid, key, value in store._read(f"SELECT user_id, key, value FROM stats {where} ORDER BY user_id, key",
                                      params):
        yield {"type": "stat", "user_id": uid, "key": key, "value": value}
    for _seq, scope, turn in store.pending():  # every scope of the user (agents, sessions)
        if user_id is not None and scope.user_id != user_id:
            continue
        yield {"type": "pending", "user_id": scope.user_id, "agent_id": scope.agent_id,
               "session_id": scope.session_id, "turn": turn.to_dict()}

def import_rows(store: Store, rows: Iterable[dict[str, Any]]) -> int:
    """Load rows from :meth:`export_rows` (one transaction); returns entries added.

    All or nothing: an entry id this memory already holds (the same export imported
    twice) or a malformed record raises and rolls the whole import back.
    """
    with store.write_guard():
        try:
            return _import_rows(store, rows)
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"this memory already holds entries of the export ({exc}); nothing was "
                             "imported: import into another store, or forget those users first") from exc
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, AriadneMemError):
                raise
            raise StoreError(f"malformed export record ({type(exc).__name__}: {exc}); nothing was "
                             "imported") from exc

def _import_rows(store: Store, rows: Iterable[dict[str, Any]]) -> int:
    entries: list[Entry] = []
    with store._tx() as db:
        for row in rows:
            kind = row.get("type")
            if kind == "meta":
                if int(row.get("dim", store.dim)) != store.dim:
                    raise StoreError(f"export has dimension {row.get('dim')}, this store {store.dim}")
                mine = store._read("SELECT value FROM meta WHERE key = 'embedder'")[0][0]
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
                entry.seq = int(cur.lastrowid or 0)  # always set after an INSERT
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
                store._bump(db, row["user_id"], {row["key"]: int(row["value"])})
            elif kind == "pending":
                db.execute("INSERT INTO pending_turns(user_id, agent_id, session_id, turn) VALUES (?, ?, ?, ?)",
                           (row["user_id"], row["agent_id"], row["session_id"], json.dumps(row["turn"])))
            else:
                raise StoreError(f"unknown export record type {kind!r}")
    if entries:
        store._index(entries)
    return len(entries)

