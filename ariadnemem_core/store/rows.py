"""The row codec: how an entry and a turn are laid out in a row, shared by every backend.

The SQLite records, the Postgres backend and the dense index's exact search all store an
entry as the same columns (``ENTRY_COLUMNS``, the vector as float32 bytes) and a pending
or recent turn as its JSON, so encoding and decoding live here once; each backend keeps
its own SQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import InvalidInputError, StoreError
from ..limits import check_entry, load_json
from ..models import Entry, Turn, from_epoch, to_epoch

#: The columns of an entry row, in the order :func:`row_to_entry` reads them.
ENTRY_COLUMNS = (
    "seq, id, user_id, agent_id, session_id, text, keywords, persons, entities, location, topic, "
    "ts, first_ts, speaker, source_turn_ids, metadata, embedding"
)


def row_to_entry(row: tuple[Any, ...]) -> Entry:
    """An :class:`Entry` from one ``SELECT {ENTRY_COLUMNS}`` row."""
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


def readable(rows: Iterable[tuple[Any, ...]]) -> list[Entry]:
    """The entries of ``rows`` that can be decoded; a broken row is skipped, never fatal
    to a read (``doctor()`` and the next open quarantine it with its reason)."""
    out = []
    for row in rows:
        try:
            out.append(row_to_entry(row))
        except (ValueError, TypeError, RecursionError):
            continue
    return out


def entry_row_problem(row: tuple[Any, ...], dim: int) -> str | None:
    """Why a ``SELECT {ENTRY_COLUMNS}`` row cannot be used, or None when it is whole."""
    emb = row[-1]
    if not isinstance(emb, bytes | memoryview) or len(emb) != 4 * dim:
        size = len(emb) if isinstance(emb, bytes | memoryview) else type(emb).__name__
        return f"embedding has {size} bytes, expected {4 * dim} ({dim} float32 values)"
    if not np.isfinite(np.frombuffer(emb, dtype=np.float32)).all():
        return "embedding contains NaN or infinite values"
    try:
        entry = row_to_entry(row)
        check_entry(entry)
    except (InvalidInputError, ValueError, TypeError, RecursionError, OverflowError) as exc:
        return f"unreadable entry: {exc}"
    return None


def turn_from_json(raw: str) -> Turn:
    """A stored turn, validated exactly as :meth:`Turn.from_dict` validates input."""
    if not isinstance(raw, str):
        raise InvalidInputError("turn", f"expected JSON text, got {type(raw).__name__}")
    data = load_json(raw, "turn")
    if not isinstance(data, dict):
        raise InvalidInputError("turn", f"expected an object, got {type(data).__name__}")
    try:
        return Turn.from_dict(data)
    except TypeError as exc:
        raise InvalidInputError("turn", str(exc)) from None


def entry_params(entry: Entry) -> tuple[Any, ...]:
    """The values of an ``entries`` row for ``entry``, in ``ENTRY_COLUMNS`` order without
    ``seq`` (the backend assigns it); the vector as float32 bytes, which :func:`row_to_entry`
    reads back.

    Raises:
        StoreError: ``entry`` has no embedding (every stored entry has one).
    """
    if entry.embedding is None:
        raise StoreError(f"entry {entry.id} has no embedding")
    return (
        entry.id, entry.user_id, entry.agent_id, entry.session_id, entry.text,
        json.dumps(entry.keywords), json.dumps(entry.persons), json.dumps(entry.entities),
        entry.location, entry.topic, to_epoch(entry.timestamp), to_epoch(entry.first_timestamp),
        entry.speaker, json.dumps(entry.source_turn_ids), json.dumps(entry.metadata, default=str),
        np.asarray(entry.embedding, dtype=np.float32).tobytes(),
    )


def fts_body(entry: Entry) -> str:
    """The words a lexical index holds for ``entry``: its text and its keywords."""
    return " ".join([entry.text, " ".join(entry.keywords)])


def turn_like(turn_id: str) -> str:
    """A LIKE pattern matching the ``source_turn_ids`` JSON lists that may hold ``turn_id``:
    its letters and digits, any run of other characters a wildcard ("café" is stored as
    ``caf\\u00e9``, a quote as ``\\"``, and a backslash escapes in Postgres' LIKE). It may
    match more: the caller checks the list itself."""
    return "%" + re.sub(r"[^A-Za-z0-9]+", "%", turn_id) + "%"
