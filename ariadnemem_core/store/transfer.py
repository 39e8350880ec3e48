"""Export and import: every record of a store (or of one user) as JSON-able rows.

The export is the records, embeddings included, so an import re-creates the dense index
from them and needs no embedding model; the meta row names the embedder, and an export of
another embedder is refused (two models' vectors share no space).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import networkx as nx

from ..errors import InvalidInputError, StoreError
from ..limits import MAX_TEXT_CHARS, SURROGATE, check_entry, check_int, check_name
from ..models import Entry, Scope, Turn, to_utc
from .records import SCHEMA_VERSION
from .rows import turn_from_json


class Transferable(Protocol):
    """What export and import need of a backend (each keeps its own SQL)."""

    dim: int

    @property
    def embedder_name(self) -> str: ...

    def export_entries(self, user_id: str | None = None) -> Iterator[Entry]: ...

    def export_table(self, kind: str, user_id: str | None = None) -> list[tuple[Any, ...]]: ...

    def pending(self, scope: Scope | None = None) -> list[tuple[int, Scope, Turn]]: ...

    def held_ids(self, ids: Sequence[str]) -> list[str]: ...

    def import_guard(self) -> AbstractContextManager[None]: ...

    def write_imported(self, plan: Sequence[tuple[str, Any]]) -> list[Entry]: ...

    def index_imported(self, entries: Sequence[Entry]) -> None: ...


#: Version of the export's record layout. 2: the file ends with an ``end`` record counting
#: the records (a truncated copy is refused); files without ``format`` (1) are read as
#: before. 3: ``recent`` records, each scope's last extracted turns (the pronoun context of
#: its next window; a memory moved without them extracted its next turn differently).
EXPORT_FORMAT = 3


def export_rows(store: Transferable, user_id: str | None = None) -> Iterator[dict[str, Any]]:
    """Every record as JSON-able dicts (entries with embeddings, edges, counters,
    attributes, statistics, pending turns, recent turns), in a stable order; ``user_id``: only that
    user's records (a per-user data export)."""
    yield {"type": "meta", "schema": SCHEMA_VERSION, "format": EXPORT_FORMAT, "dim": store.dim,
           "embedder": store.embedder_name}
    n = 0
    for row in _records(store, user_id):
        n += 1
        yield row
    # A file cut off at a line break reads as a whole, smaller export: the end record says
    # how many records came before it, and import refuses a file without it.
    yield {"type": "end", "records": n}


def _records(store: Transferable, user_id: str | None) -> Iterator[dict[str, Any]]:
    for entry in store.export_entries(user_id):
        # Validity is filled for readers of the file; import derives it again.
        yield {"type": "entry", **entry.to_dict(with_embedding=True)}
    for src, dst, kind, uid, sim, ov, created in store.export_table("edge", user_id):
        yield {"type": "edge", "src": src, "dst": dst, "kind": kind, "user_id": uid,
               "similarity": sim, "overlap": ov, "created_at": created}
    for uid, person, term, entry_id in store.export_table("mention", user_id):
        yield {"type": "mention", "user_id": uid, "person": person, "term": term, "entry_id": entry_id}
    for row in store.export_table("attribute", user_id):
        yield {"type": "attribute", **dict(zip(("user_id", "subject", "attribute", "value", "entry_id",
                                                 "ts"), row, strict=True))}
    for uid, key, value in store.export_table("stat", user_id):
        yield {"type": "stat", "user_id": uid, "key": key, "value": value}
    for _seq, scope, turn in store.pending():  # every scope of the user (agents, sessions)
        if user_id is not None and scope.user_id != user_id:
            continue
        yield {"type": "pending", "user_id": scope.user_id, "agent_id": scope.agent_id,
               "session_id": scope.session_id, "turn": turn.to_dict()}
    for uid, agent, session, raw in store.export_table("recent", user_id):
        try:
            recent = turn_from_json(raw)
        except InvalidInputError:
            continue  # an unreadable context turn is skipped when read too (recent_turns)
        yield {"type": "recent", "user_id": uid, "agent_id": agent, "session_id": session, "turn": recent.to_dict()}


def import_rows(store: Transferable, rows: Iterable[dict[str, Any] | tuple[int, dict[str, Any]]]) -> int:
    """Load rows from :meth:`export_rows`; returns entries added.

    All or nothing, in two passes: every record is first checked against the same rules
    and limits as live input (turn validation for pending turns, the entry limits, finite
    vectors of the store's dimension, 64-bit counters) and only then written, in one
    transaction, so a hostile or damaged export is refused before anything is committed
    and can never leave a row that fails a later open. ``rows`` may carry line numbers
    (``(line, row)`` pairs, as :func:`~ariadnemem_core.memory.read_export_lines` yields)
    for the error messages.

    Raises:
        InvalidInputError: a malformed record, named by line (or record number) and field.
        StoreError: an export of another embedder or dimension, or entries this memory
            already holds (the same export imported twice).
    """
    # Held from the checks to the commit: an import racing another of the same export must
    # see it held and be refused, not pass the same checks before either commits.
    with store.import_guard():
        plan = _check_rows(store, rows)
        entries = store.write_imported(plan)
        if entries:
            store.index_imported(entries)
        return len(entries)


_STR = "a non-empty string"


def _field(row: dict[str, Any], key: str, where: str, *, optional: bool = False) -> Any:
    if key not in row:
        if optional:
            return None
        raise InvalidInputError(f"{where}.{key}", "is missing")
    return row[key]


def _name(row: dict[str, Any], key: str, where: str, *, optional: bool = False) -> str | None:
    value = _field(row, key, where, optional=optional)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{where}.{key}", f"expected {_STR}, got {value!r:.40}")
    check_name(value, f"{where}.{key}")
    # Verbatim, as ``add`` stores ids: normalizing whitespace here moved a user's counters
    # and edges to another user id than its entries.
    return value


def _number(row: dict[str, Any], key: str, where: str, *, optional: bool = False) -> float | None:
    value = _field(row, key, where, optional=optional)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(float(value)):
        raise InvalidInputError(f"{where}.{key}", f"expected a finite number, got {value!r:.40}")
    return float(value)


def _check_meta(store: Transferable, row: dict[str, Any], where: str) -> None:
    mine = store.embedder_name
    dim = row.get("dim", store.dim)
    if dim != store.dim:
        raise StoreError(f"export has dimension {dim!r}, this store {store.dim}")
    if row.get("embedder", mine) != mine:
        # Same dimension is not enough: two models' vectors share no space.
        raise StoreError(f"export was embedded with {row.get('embedder')!r}, this store uses "
                         f"{mine!r}; open the store with the same embedder")


def _check_entry_row(store: Transferable, row: dict[str, Any], where: str) -> Entry:
    # Validity is derived from the edges on read; an export's copy is informative.
    data = {k: v for k, v in row.items() if k not in ("type", "superseded_by", "valid_until")}
    try:
        for key in ("timestamp", "first_timestamp"):
            data[key] = to_utc(data.get(key), key)
        vector = data.pop("embedding", None)
        entry = Entry.from_dict(data)
        entry.embedding = vector
        check_entry(entry, store.dim)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}.{exc.field}", exc.problem) from None
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise InvalidInputError(where, f"not a valid entry ({exc})") from None
    return entry


def _check_edge(row: dict[str, Any], where: str) -> tuple[Any, ...]:
    return (_name(row, "src", where), _name(row, "dst", where), _name(row, "kind", where),
            _name(row, "user_id", where), _number(row, "similarity", where), _number(row, "overlap", where),
            _number(row, "created_at", where, optional=True))


def _check_mention(row: dict[str, Any], where: str) -> tuple[Any, ...]:
    return (_name(row, "user_id", where), _name(row, "person", where), _name(row, "term", where),
            _name(row, "entry_id", where))


def _check_attribute(row: dict[str, Any], where: str) -> tuple[Any, ...]:
    value = _field(row, "value", where)
    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS or SURROGATE.search(value):
        raise InvalidInputError(f"{where}.value", "expected a string of valid Unicode within the text limit")
    return (_name(row, "user_id", where), _name(row, "subject", where), _name(row, "attribute", where), value,
            _name(row, "entry_id", where), _number(row, "ts", where, optional=True))


def _check_stat(row: dict[str, Any], where: str) -> tuple[Any, ...]:
    value = check_int(_field(row, "value", where), f"{where}.value")
    return (_name(row, "user_id", where), _name(row, "key", where), value)


def _check_scoped_turn(row: dict[str, Any], where: str) -> tuple[Any, ...]:
    """A pending or a recent turn: its scope and the turn, checked as live input."""
    try:
        scope = Scope(_field(row, "user_id", where), row.get("agent_id"), row.get("session_id"))
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}.{exc.field}", exc.problem) from None
    turn = _field(row, "turn", where)
    if not isinstance(turn, dict):
        raise InvalidInputError(f"{where}.turn", f"expected a turn object, got {type(turn).__name__}")
    try:
        checked = Turn.from_dict(turn)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}.turn.{exc.field}", exc.problem) from None
    except TypeError as exc:
        raise InvalidInputError(f"{where}.turn", str(exc)) from None
    return (scope.user_id, scope.agent_id, scope.session_id, json.dumps(checked.to_dict()))


#: The checker of each record type but meta and entry (which need the store).
_CHECKS: dict[str, Callable[[dict[str, Any], str], tuple[Any, ...]]] = {
    "edge": _check_edge, "mention": _check_mention, "attribute": _check_attribute, "stat": _check_stat,
    "pending": _check_scoped_turn, "recent": _check_scoped_turn,
}


class _Ending:
    """Counts an export's records and reads its ``end`` record (format 2 and later)."""

    def __init__(self) -> None:
        self.format = 1
        self.records = 0
        self.ended = False

    def read(self, row: dict[str, Any], where: str) -> bool:
        """Whether ``row`` was the meta or end record's bookkeeping only (True: skip it)."""
        if self.ended:
            raise InvalidInputError(where, "a record after the export's end record")
        kind = row.get("type")
        if kind == "meta":
            fmt = row.get("format", 1)
            if isinstance(fmt, bool) or not isinstance(fmt, int) or not 1 <= fmt <= EXPORT_FORMAT:
                raise InvalidInputError(f"{where}.format", f"unknown export format {fmt!r:.40}; upgrade ariadnemem")
            self.format = fmt
            return False
        if kind == "end":
            count = row.get("records")
            if count != self.records:
                raise InvalidInputError(where, f"the end record counts {count!r:.20} records, the file holds "
                                               f"{self.records}: a damaged export")
            self.ended = True
            return True
        self.records += 1
        return False

    def check(self) -> None:
        if self.format >= 2 and not self.ended:
            raise InvalidInputError("export", f"the file ends after {self.records} records without its end "
                                              "record: a truncated copy (nothing was imported)")


def _check_edges_own(edges: list[tuple[str, tuple[Any, ...]]], owner: dict[str, str]) -> None:
    """An edge joins two entries of its own user in the same export: one between two
    users' entries would mark one user's fact superseded by another's."""
    for where, (src, dst, _kind, user, *_rest) in edges:
        if owner.get(src) != user or owner.get(dst) != user:
            raise InvalidInputError(where, f"edge {src!r} -> {dst!r} does not join two entries of user {user!r} "
                                           "in this export")
    # Update edges that run in a circle leave no state of it current (each fact marked
    # superseded by the next): no store writes them (``link`` refuses a loop).
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_edges_from((src, dst, {"where": where}) for where, (src, dst, kind, *_rest) in edges if kind == "update")
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return
    loop = [a for a, _b in cycle] + [cycle[0][0]]
    raise InvalidInputError(graph.edges[cycle[-1]]["where"], f"update edges run in a loop "
                                                             f"({' -> '.join(map(repr, loop))}): no state of it "
                                                             "would be current")


def _check_rows(store: Transferable, rows: Iterable[Any]) -> list[tuple[str, Any]]:
    """Every record checked and converted to what ``_write_rows`` writes (pass one)."""
    plan: list[tuple[str, Any]] = []
    ids: set[str] = set()
    owner: dict[str, str] = {}  # entry id -> its user
    edges: list[tuple[str, tuple[Any, ...]]] = []
    ending = _Ending()
    for n, item in enumerate(rows, start=1):
        lineno, row = item if isinstance(item, tuple) else (None, item)
        where = f"line {lineno}" if lineno is not None else f"record {n}"
        if not isinstance(row, dict):
            raise InvalidInputError(where, f"expected a JSON object, got {type(row).__name__}")
        kind = row.get("type")
        if ending.read(row, where):
            continue
        if kind == "meta":
            _check_meta(store, row, where)
        elif kind == "entry":
            entry = _check_entry_row(store, row, where)
            if entry.id in ids:
                raise InvalidInputError(f"{where}.id", f"entry {entry.id!r} appears twice in the export")
            ids.add(entry.id)
            owner[entry.id] = entry.user_id
            plan.append(("entry", entry))
        elif isinstance(kind, str) and kind in _CHECKS:
            plan.append((kind, _CHECKS[kind](row, where)))
            if kind == "edge":
                edges.append((where, plan[-1][1]))
        else:
            raise InvalidInputError(f"{where}.type", f"unknown export record type {kind!r:.40}")
    ending.check()
    _check_edges_own(edges, owner)
    _check_not_held(store, plan, ids)
    return plan


def _check_not_held(store: Transferable, plan: list[tuple[str, Any]], ids: set[str]) -> None:
    """Refuse an export this memory already holds part of (the same export imported twice)."""
    held = store.held_ids(sorted(ids))
    if held:
        raise StoreError(f"this memory already holds entries of the export ({len(held)}, e.g. {held[0]!r}); "
                         "nothing was imported: import into another store, or forget those users first")
    # An export without entries passes the check above, and would double its pending turns
    # and counters: its pending turns must not be pending here already.
    pending = {(item[0], json.loads(item[3]).get("turn_id")) for k, item in plan if k == "pending"}
    if pending and pending & {(scope.user_id, turn.turn_id) for _seq, scope, turn in store.pending()}:
        raise StoreError("this memory already holds pending turns of the export; nothing was imported: "
                         "the same export imported twice?")
