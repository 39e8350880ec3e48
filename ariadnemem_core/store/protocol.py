"""The storage interface: what Phase I, Phase II and the facade call on a store, no more.

Two backends implement it: the embedded :class:`~ariadnemem_core.store.SQLiteStore`
(SQLite + FTS5 + chromadb under one directory, the default) and
:class:`~ariadnemem_core.store.postgres.PostgresStore` (records, full-text and vectors in
one Postgres database, for several app hosts sharing one memory). Both pass the same
contract tests (``tests/test_store_contract.py`` and the store tests parametrized over
both backends).

The protocol is structural (:class:`typing.Protocol`): the pipeline modules are typed
against it, so a third backend needs no change to them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..models import Entry, Scope, Turn, UpdateEdge
from .records import WindowCommit


class Store(Protocol):
    """A memory's storage: records, lexical index and dense index behind one interface.

    Every read and write is scoped by user (and, where given, agent and session): a
    backend must never return one user's rows to a call made for another.
    """

    #: Turns kept per scope as pronoun context for the next window.
    RECENT_TURNS: int
    #: The embedding dimension the store was built with.
    dim: int

    # ------------------------------------------------------------------ identity
    @property
    def path(self) -> Path | None:
        """The store's directory (embedded backend), None for a server backend."""

    @property
    def location(self) -> str:
        """Where the memory lives, safe to print: a directory, or a URL without credentials."""

    @property
    def dense_location(self) -> str:
        """Where the vectors live, safe to print (messages and ``stats``)."""

    @property
    def remote(self) -> bool:
        """True when the vectors are held by a server rather than under a local directory."""

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""

    # ------------------------------------------------------------------ Phase I
    def add_pending(self, scope: Scope, turns: Sequence[Turn]) -> None:
        """Persist acknowledged turns (durable before any processing)."""

    def pending(self, scope: Scope | None = None, *, user_id: str | None = None) -> list[tuple[int, Scope, Turn]]:
        """The scope's (or, with ``user_id``, every scope of that user's, or every) pending
        turn in arrival order, as (seq, scope, turn)."""

    def waiting(self, scope: Scope, limit: int) -> list[tuple[int, Scope, Turn]]:
        """The latest ``limit`` pending turns a reader of ``scope`` may see (its user; its
        agent and session where it names them, any where it does not), in arrival order,
        as (seq, scope, turn): what waits for its window, for a read. Read only: a row that
        is not a valid turn is skipped, not quarantined (``pending`` does that)."""

    def claim(self, scope: Scope) -> AbstractContextManager[None]:
        """Hold the right to extract ``scope``'s pending turns (one worker per scope at a time)."""

    def write_guard(self) -> AbstractContextManager[None]:
        """Hold off other writers across several calls (an export reading a consistent
        store; nothing to hold where every write is one server transaction)."""

    def import_guard(self) -> AbstractContextManager[None]:
        """Hold off other imports (and, where writes are not one transaction, other writers)
        from an import's checks to its commit, across processes and hosts."""

    def recent_turns(self, scope: Scope) -> list[Turn]:
        """The last turns extracted in the scope (context for the next window)."""

    def quarantine_pending(self, bad: Sequence[tuple[int, str]]) -> None:
        """Move pending turns (by seq) to the quarantine with their reasons."""

    def commit_window(self, commit: WindowCommit) -> None:
        """Apply one processed window atomically (its pending turns leave, its entries arrive)."""

    def participants(self, user_id: str) -> list[str]:
        """The user's speakers in order of first appearance."""

    def known_persons(self, user_id: str) -> set[str]:
        """Persons the user's mention counters know."""

    # ------------------------------------------------------------------ Phase II
    def reading(self, user_id: str) -> AbstractContextManager[None]:
        """One retrieval's reads of ``user_id``: a consistent view its cached reads may share."""

    def get(self, ids: Iterable[str], user_id: str | None = None, *, cached: bool = False) -> dict[str, Entry]:
        """Entries by id (missing ids are absent); ``cached`` may share read-only objects."""

    def dense_search(self, scope: Scope, vectors: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` (entry id, cosine) per query vector inside the scope."""

    def lexical_search(self, scope: Scope, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` BM25 matches (entry id, positive score) inside the scope."""

    def vectors_in_window(self, scope: Scope, lo: float, hi: float,
                          limit: int | None = None) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Ids, timestamps and embeddings of the scope's entries with lo <= ts <= hi."""

    def dense_count(self, user_id: str) -> int:
        """Vectors the dense index holds for ``user_id`` (its entries, once caught up)."""

    def message_index(self, scope: Scope) -> tuple[list[str], list[list[str]], np.ndarray]:
        """The scope's message view: (turn ids, each message's entry ids, their mean vectors)."""

    def message_lexical(self, scope: Scope, query: str, k: int) -> list[tuple[str, float]]:
        """Top-``k`` BM25 matches among the scope's messages: (turn id, positive score)."""

    def around(self, scope: Scope, entry: Entry, n: int) -> list[Entry]:
        """The entries stored up to ``n`` places before and after ``entry`` in its scope."""

    def edges(self, user_id: str, ids: Iterable[str] | None = None) -> list[UpdateEdge]:
        """The user's update edges (touching ``ids`` when given)."""

    def mentions(self, user_id: str, person: str, terms: Sequence[str]) -> list[str]:
        """Entry ids in which ``person`` is involved and every term occurs."""

    def attribute(self, user_id: str, subject: str, attribute: str) -> list[tuple[str, str, float | None]]:
        """(value, entry id, ts) of a stored self-stated attribute, newest first."""

    # ------------------------------------------------------------------ facade
    def entries(self, scope: Scope, *, ts_range: tuple[float, float] | None = None) -> list[Entry]:
        """Every entry of the scope in time order."""

    def users(self) -> dict[str, int]:
        """Every user with entries or pending turns, mapped to their entry count."""

    def stats(self, user_id: str | None = None) -> dict[str, int]:
        """Counters and sizes, of one user or of the whole store."""

    def delete(self, entry_id: str, user_id: str | None = None) -> bool:
        """Remove one entry (update chains through it are repaired)."""

    def replace(self, scope: Scope, entry_ids: Sequence[str], turn_ids: Sequence[str],
                turns: Sequence[Turn]) -> int:
        """In one transaction: remove the scope user's entries ``entry_ids`` (those already
        gone are skipped; chains repaired), take back ``turn_ids`` (the scope's pending
        turns of those ids and its entries extracted from them), and persist ``turns`` as
        pending. Returns how many entries went."""

    def link(self, user_id: str, src: str, dst: str) -> str | None:
        """Persist the update edge ``src -> dst`` of a user (a change recorded by hand), its
        checks and its write in one transaction that other writers wait for. Returns None
        when the edge is there (added, or already), else why not: ``"missing"`` (an entry
        is gone), ``"forked:<id>"`` (``src`` has the newer state ``<id>``), ``"order"``
        (``dst`` was said before ``src``) or ``"loop"`` (``dst`` leads back to ``src``)."""

    def unlink(self, user_id: str, src: str, dst: str) -> bool:
        """Remove the update edge ``src -> dst`` of a user; False if there was none."""

    def forget(self, scope: Scope) -> int:
        """Remove every entry and pending turn of a scope; returns how many entries."""

    def clear(self) -> None:
        """Remove everything (all users)."""

    def doctor(self, *, repair: bool = True) -> dict[str, Any]:
        """Check every record (and index); with ``repair``, quarantine and rebuild."""

    def export_rows(self, user_id: str | None = None) -> Iterator[dict[str, Any]]:
        """Every record as JSON-able dicts (see :mod:`.transfer`)."""

    def import_rows(self, rows: Iterable[dict[str, Any] | tuple[int, dict[str, Any]]]) -> int:
        """Load rows of :meth:`export_rows`, all or nothing; returns entries added."""

    def close(self) -> None:
        """Release connections and files (idempotent)."""
