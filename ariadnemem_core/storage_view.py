"""A read-only view of a memory's storage, for benchmarks, diagnostics and tests.

:class:`~ariadnemem_core.AriadneMemory` reads memories the way an application needs them
(``entries``, ``get``, ``retrieve``). Measuring and checking the memory needs a little
more: the turns still waiting for extraction, the two indexes searched on their own (a
flat baseline on the same storage, a check that a deleted entry left both indexes), the
vector count per user (the dense index agrees with the records), and the export records
as values. :attr:`AriadneMemory.storage <ariadnemem_core.AriadneMemory.storage>` gives
exactly that, and nothing that writes: the store object itself stays private, so its
tables and locks can change without breaking callers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .models import Entry, Scope, Turn

if TYPE_CHECKING:
    from .store import Store

__all__ = ["StorageView"]


class StorageView:
    """Read-only access to one memory's storage (see the module doc).

    Obtained from :attr:`AriadneMemory.storage <ariadnemem_core.AriadneMemory.storage>`;
    valid while the memory is open (afterwards every call raises :class:`StoreError`).
    Every search is scoped like :meth:`AriadneMemory.retrieve`: one user's entries never
    appear in another user's results.

    Args:
        store: the memory's store.
    """

    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        self._store = store

    @property
    def dense_location(self) -> str:
        """Where the vectors are kept: a directory, or the Chroma server's address."""
        return self._store.dense_location

    @property
    def remote(self) -> bool:
        """True when the vectors live on a Chroma server (or an injected client)."""
        return self._store.remote

    def pending(self, user_id: str | None = None, *, agent_id: str | None = None,
                session_id: str | None = None) -> list[tuple[int, Scope, Turn]]:
        """Turns accepted by ``add`` and not extracted yet (durable, processed by the next
        full window, ``flush`` or ``close``), in arrival order.

        A stored row that is no longer a valid turn is quarantined (see
        :meth:`AriadneMemory.doctor`), not returned, as extraction does.

        Args:
            user_id: only this exact scope's turns (None: every scope's).
            agent_id: the scope's agent.
            session_id: the scope's session.

        Returns:
            (arrival number, scope, turn) per pending turn.
        """
        scope = None if user_id is None else Scope(user_id, agent_id, session_id)
        return self._store.pending(scope)

    def recent_turns(self, user_id: str, *, agent_id: str | None = None,
                     session_id: str | None = None) -> list[Turn]:
        """The scope's last extracted turns, oldest first: the context (who "she" is, what
        "it" was) the next window of the scope is extracted with.

        Args:
            user_id: the scope's user.
            agent_id: the scope's agent.
            session_id: the scope's session.
        """
        return self._store.recent_turns(Scope(user_id, agent_id, session_id))

    def dense_search(self, vector: np.ndarray, k: int, *, user_id: str = "default", agent_id: str | None = None,
                     session_id: str | None = None) -> list[tuple[str, float]]:
        """The dense index alone: the ``k`` entries nearest to ``vector``, best first.

        Args:
            vector: a query embedding of the memory's embedder (one vector).
            k: how many entries at most.
            user_id: whose entries.
            agent_id: only this agent's entries.
            session_id: only this session's entries.

        Returns:
            (entry id, cosine similarity) pairs.
        """
        vectors = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        hits = self._store.dense_search(Scope(user_id, agent_id, session_id), vectors, k)
        return hits[0] if hits else []

    def lexical_search(self, query: str, k: int, *, user_id: str = "default", agent_id: str | None = None,
                       session_id: str | None = None) -> list[tuple[str, float]]:
        """The lexical (BM25) index alone: the ``k`` best matches of ``query``'s words.

        Args:
            query: any text; its content words are OR-ed.
            k: how many entries at most.
            user_id: whose entries.
            agent_id: only this agent's entries.
            session_id: only this session's entries.

        Returns:
            (entry id, BM25 score) pairs, best first.
        """
        return self._store.lexical_search(Scope(user_id, agent_id, session_id), query, k)

    def get_many(self, ids: Iterable[str], *, user_id: str = "default") -> dict[str, Entry]:
        """Several entries by id in one read (:meth:`AriadneMemory.get` reads one).

        Args:
            ids: entry ids; unknown ones, and other users' entries, are left out.
            user_id: whose entries.

        Returns:
            Entry id -> entry, for the ids found.
        """
        return self._store.get(ids, user_id)

    def dense_count(self, user_id: str = "default") -> int:
        """Vectors the dense index holds for ``user_id``: its entry count once the index
        has caught up with the records (a check after a crash or a server wipe).

        Args:
            user_id: whose vectors.

        Returns:
            The number of vectors.
        """
        return self._store.dense_count(user_id)

    def export_rows(self, user_id: str | None = None) -> Iterator[dict[str, Any]]:
        """The records :meth:`AriadneMemory.export` writes, one dict per JSONL line (the
        meta record first), without a file.

        Args:
            user_id: only this user's records (None: the whole memory).

        Returns:
            An iterator over the records.
        """
        return self._store.export_rows(user_id)
