"""The ``AriadneMemory`` facade: a small surface over the two phases.

Writes: ``add`` validates every turn first (a bad turn raises before anything is stored),
persists the turns as *pending* (acknowledged = durable), and processes full windows of
``Config.window_size`` turns per scope: gate -> extract -> embed -> coarsen -> commit (one
transaction per window). ``flush`` processes partial windows. Reads: ``retrieve`` builds
the query's EvidenceGraph (Phase II, no LLM call); ``answer`` adds one LLM call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .config import Config
from .embedding import Embedder, MiniLMEmbedder, checked
from .errors import AriadneMemError, ExtractionError, InvalidInputError, NotFoundError, StoreError
from .extraction import Extractor
from .files import atomic_open
from .ingest import Ingestor
from .limits import check_metadata, check_vector, load_json, replace_surrogates
from .models import Entry, Scope, Turn, UpdateEdge, check_unicode, clean_text
from .storage_view import StorageView
from .store import Store, open_store
from .store.locking import MAX_LOCK_TIMEOUT_S

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

    from .evidence import EvidenceGraph
    from .llm import LLMClient
    from .synthesis import Answer

#: What ``add`` accepts: one turn (a :class:`Turn` or a dict of its fields) or an iterable of them.
TurnsInput = Turn | Mapping[str, Any] | Iterable[Turn | Mapping[str, Any]]

log = logging.getLogger(__name__)

#: Longest query used, in characters; a longer question is cut to its *last* part for
#: retrieval (a long prompt usually ends with the actual question) so retrieval time stays
#: bounded whatever the caller sends. The question itself is never stored.
MAX_QUERY_CHARS = 4000


class AriadneMemory:
    """Graph-structured long-term memory for one or many users.

    ``path=None`` gives an ephemeral memory in a temporary directory (removed on close);
    a path gives a persistent one that reopens to exactly the same memory.

    The dense index is embedded (chromadb under ``path``) unless ``chroma_host`` (and
    ``chroma_port``, default 8000) names a Chroma server (``chroma run``) or
    ``chroma_client`` injects a configured ``chromadb`` client (``HttpClient`` with auth
    headers, TLS, ...). In that mode the vectors live on the server, in collections named
    after this store's id, and the records, BM25 index, edges and counters stay in the
    SQLite file at ``path``, the source of truth the server is reconciled with on open.
    Opening an existing embedded store with a server moves its vectors there.

    A ``postgresql://`` URL instead of a path keeps the whole memory (records, full-text
    and vectors) in one Postgres database with pgvector, which any number of processes
    on any number of hosts share (the ``postgres`` extra; see the deployment guide).

    Args:
        path: the store's directory (created if missing), None for an ephemeral memory,
            or a ``postgresql://user:password@host/db`` URL (the password is never printed).
        config: thresholds and switches (default :class:`Config`).
        embedder: the embedding model (default: the offline all-MiniLM-L6-v2). A store
            refuses to open with another embedder than the one it was built with.
        extractor: Phase I atomic extraction (default: the LLM-free
            :class:`RuleExtractor`); an LLM-backed one falls back to rules per window.
        llm: the client :meth:`answer` calls (default: from the environment on first
            use, and none when no LLM is configured: answers are then extractive).
        chroma_host: a Chroma server's host, to keep the vectors there.
        chroma_port: the server's port (default 8000).
        chroma_client: a configured ``chromadb`` client instead of host and port.

    Raises:
        StoreError: the store cannot be opened, was built with another embedder, or the
            Chroma server cannot be reached.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        config: Config | None = None,
        *,
        embedder: Embedder | None = None,
        extractor: Extractor | None = None,
        llm: LLMClient | None = None,
        chroma_host: str | None = None,
        chroma_port: int | None = None,
        chroma_client: ClientAPI | None = None,
        lock_timeout: float | None = None,
    ) -> None:
        _check_opening(path, config, lock_timeout)
        self.config = config or Config()
        self.embedder: Embedder = embedder or MiniLMEmbedder()
        #: What ingest and retrieval embed with: a caller's model with every batch checked
        #: (shape, finite values) before anything is stored or searched.
        self._embedder: Embedder = checked(self.embedder)
        self._store: Store = open_store(path, dim=self.embedder.dim, embedder_name=self.embedder.name,
                                        chroma_client=chroma_client, chroma_host=chroma_host,
                                        chroma_port=chroma_port, lock_timeout=lock_timeout)
        self._ingest = Ingestor(self._store, self._embedder, self.config, extractor)
        #: Whole-store operations (import, export, clear, doctor) take turns with each other.
        self._write_lock = threading.RLock()
        #: Writes of one user take turns (a window is extracted once, in order); writes of
        #: different users never wait for each other's extraction. Commits are serialized
        #: by the store itself, across threads and processes.
        self._user_locks = _UserLocks()
        self._llm = llm
        self._llm_checked = llm is not None

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> AriadneMemory:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self.close()
            return
        # The block's own error is the one the caller must see: a flush failing on the way
        # out (its turns stay pending, durable) is logged, not raised in its place. An
        # interrupt (Ctrl-C, a cancelled task) closes without extracting: with an LLM
        # extractor that is one call per pending window, minutes on a slow model, and the
        # turns are durable as they are.
        interrupted = isinstance(exc, KeyboardInterrupt | asyncio.CancelledError)
        try:
            self.close(flush=not interrupted)
        except AriadneMemError as close_error:
            log.warning("closing after %s: %s (the turns stay pending)", type(exc).__name__, close_error)

    def close(self, *, flush: bool = True) -> None:
        """Extract partial windows, then close the store (idempotent).

        Args:
            flush: extract the pending turns of partial windows first. ``False`` closes
                without writing (a read-only command); the turns stay pending, durable,
                for the next ``flush`` or ``close``.
        """
        if self._store.closed:
            return
        try:
            if flush:
                self.flush()
        finally:
            self._store.close()

    @property
    def extractor(self) -> Extractor:
        """The extractor Phase I uses (the rule extractor unless one was passed)."""
        return self._ingest.extractor

    @extractor.setter
    def extractor(self, extractor: Extractor) -> None:
        self._ingest.extractor = extractor

    @property
    def path(self) -> Path:
        """The store's directory (a temporary one for an ephemeral memory).

        Raises:
            StoreError: the memory lives on a server (see :attr:`location`).
        """
        if self._store.path is None:
            raise StoreError(f"the memory at {self._store.location} has no directory")
        return self._store.path

    @property
    def storage(self) -> StorageView:
        """A read-only view of the storage: pending turns, each index searched alone, vector
        counts and export records (see :class:`~ariadnemem_core.storage_view.StorageView`).

        For benchmarks, diagnostics and tests; the store object itself is private.
        """
        return StorageView(self._store)

    @property
    def location(self) -> str:
        """Where the memory lives, safe to print: its directory, or its URL without the password."""
        return self._store.location

    # ------------------------------------------------------------------ writes
    def add(
        self,
        turns: TurnsInput,
        *,
        user_id: str = "default",
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> int:
        """Store turns; returns how many were accepted (all, or an exception and none).

        Turns are durable when this returns. Full windows are extracted now, the rest on
        the next ``add`` that fills the window, on ``flush()`` or on ``close()``.

        Every turn of the batch is validated before anything is stored, and a bad one
        raises :class:`InvalidInputError` naming it (``turns[3].text``), so the store is
        never left with part of a batch or with a pending turn that can never be
        processed. What is accepted (see :class:`Turn`):

        * ``text``: a ``str`` of at most ``MAX_TEXT_CHARS`` (200,000) characters. Longer
          text (a pasted 1 MB log) is *rejected*, not truncated, so nothing is silently
          lost; split it into several turns. Within the limit, ingest is bounded by the
          atomic sentence split. Empty or whitespace-only text, ``bytes`` and lone
          surrogates are rejected; control characters (NUL included) are stripped, tab
          and newline kept, CR/VT/FF made newlines.
        * ``timestamp``: ``datetime`` (naive = UTC, not local time; give an offset, and
          "tomorrow" is grounded in the speaker's calendar), ISO 8601 string or None;
          any year from 1 to 9999; turns may arrive out of time order (entries are
          read back in timestamp order). Unparseable strings are rejected.
        * dicts: the keys of ``Turn``; unknown keys are rejected (put extras in
          ``metadata``), and ``metadata`` must be JSON-serializable.

        Args:
            turns: one :class:`Turn` (or a dict of its fields) or an iterable of them.
            user_id: whose memory; one user's memories never reach another's reads.
            agent_id: optional agent scope inside the user.
            session_id: optional session scope inside the user.

        Returns:
            How many turns were accepted (all of them).

        Raises:
            InvalidInputError: a turn is invalid (named by index and field); nothing is stored.
        """
        scope = Scope(user_id, agent_id, session_id)
        batch = _normalize_turns(turns)
        if not batch:
            return 0
        with self._user_locks.hold(scope.user_id):
            # One transaction: the turns and their count are stored together or not at all.
            self._store.add_pending(scope, batch)
            try:
                self._ingest.process(scope, full_only=True)
            except Exception as exc:  # the turns are durable: the batch is accepted
                # Raising now would tell the caller "not stored" about stored turns (a
                # retry would store them twice). They stay pending and the next add,
                # flush or close extracts them; flush raises if the cause persists.
                log.warning("turns of %r stored; extraction deferred: %s: %s", scope.user_id,
                            type(exc).__name__, exc)
        return len(batch)

    def flush(self, *, user_id: str | None = None, agent_id: str | None = None,
              session_id: str | None = None) -> None:
        """Extract pending turns now, including partial windows: every user's, or one scope's.

        A host serving one user (an MCP server's scope, a framework's memory block) flushes
        that user's turns only: it neither waits for another user's extraction (held by
        another worker of a shared store) nor hears of its failure.

        Args:
            user_id: only this user's pending turns (default: every user's).
            agent_id: only turns of this agent (default: any agent).
            session_id: only turns of this session (default: any session).

        Raises:
            InvalidInputError: an id is malformed, or an agent or session is given without
                its user.
            AriadneMemError: extraction failed (embedder or store error); the turns stay
                pending, nothing is lost, and a later ``flush`` retries. A turn that can
                never be processed is quarantined instead (see :meth:`doctor`).
        """
        if user_id is None and (agent_id is not None or session_id is not None):
            raise InvalidInputError("user_id", "an agent or session to flush belongs to a user: give its user_id")
        wanted = Scope(_user(user_id), agent_id, session_id) if user_id is not None else None
        found = self._store.pending(user_id=wanted.user_id if wanted else None)  # one user's rows, not all
        scopes = {s for _, s, _ in found if wanted is None or (
            agent_id in (None, s.agent_id) and session_id in (None, s.session_id))}
        errors: list[BaseException] = []
        for scope in sorted(scopes, key=lambda s: (s.user_id, s.agent_id or "", s.session_id or "")):
            try:
                with self._user_locks.hold(scope.user_id):  # one user at a time, never all
                    self._ingest.process(scope, full_only=False)
            except Exception as exc:  # one scope's failure must not block the others
                errors.append(exc)
        if errors:
            first = errors[0]
            if isinstance(first, AriadneMemError):
                raise first
            raise ExtractionError(f"extraction failed for {len(errors)} scope(s); the turns stay pending: "
                                  f"{type(first).__name__}: {first}") from first

    # ------------------------------------------------------------------ reads
    def entries(self, user_id: str = "default", *, agent_id: str | None = None,
                session_id: str | None = None) -> list[Entry]:
        """Every stored entry of a scope, in time order (timestamp-less last, by arrival).

        Args:
            user_id: whose entries.
            agent_id: only this agent's entries (None: every agent's).
            session_id: only this session's entries (None: every session's).

        Returns:
            The entries, embeddings included.
        """
        return self._store.entries(Scope(user_id, agent_id, session_id))

    def get(self, entry_id: str, *, user_id: str = "default") -> Entry:
        """One entry by id, in ``user_id``'s memory.

        Args:
            entry_id: the entry's id.
            user_id: whose memory (like every read, scoped to one user: another user's
                entry is not found, as if it did not exist).

        Returns:
            The entry.

        Raises:
            NotFoundError: no such entry for that user.
        """
        user_id, entry_id = _user(user_id), _entry_id(entry_id, "entry_id")
        found = self._store.get([entry_id], user_id)
        if entry_id not in found:
            raise NotFoundError.for_entry(entry_id, f"for user {user_id!r}")
        return found[entry_id]

    def edges(self, user_id: str = "default") -> list[UpdateEdge]:
        """Persisted update edges (old -> new) of a user, oldest first.

        Args:
            user_id: whose edges.

        Returns:
            The update edges (LINKs recorded by coarsening).
        """
        return self._store.edges(_user(user_id))

    def history(self, entry_id: str, *, user_id: str = "default") -> list[Entry]:
        """The update chain through ``entry_id``, oldest state first.

        Args:
            entry_id: any state of the chain.
            user_id: whose memory (another user's entry is not found).

        Returns:
            Every state linked to it by update edges, the entry itself included.

        Raises:
            NotFoundError: no such entry for that user.
        """
        entry = self.get(entry_id, user_id=user_id)
        edges = [e for e in self._store.edges(entry.user_id) if e.kind == "update"]
        # Each state's successor is its ``superseded_by`` (the earliest newer state, as
        # entries() reports it), so the chain and every entry's valid-until agree.
        sources = self._store.get({e.src for e in edges}, entry.user_id)
        succs = {i: e.superseded_by for i, e in sources.items() if e.superseded_by}
        preds: dict[str, str] = {}
        for e in edges:
            if succs.get(e.src) == e.dst:
                preds.setdefault(e.dst, e.src)
        chain = [entry_id]
        seen = {entry_id}
        while chain[0] in preds and preds[chain[0]] not in seen:
            chain.insert(0, preds[chain[0]])
            seen.add(chain[0])
        while chain[-1] in succs and succs[chain[-1]] not in seen:
            chain.append(succs[chain[-1]])
            seen.add(chain[-1])
        found = self._store.get(chain, entry.user_id)
        return [found[i] for i in chain if i in found]

    def users(self) -> dict[str, int]:
        """Every user id in this memory with its number of entries (pending-only users: 0).

        Returns:
            User id -> entry count, sorted by user id.
        """
        return self._store.users()

    def stats(self, user_id: str | None = None) -> dict[str, int]:
        """Counters: turns seen, gate kept/dropped, MERGE/LINK/ADD, entries, edges, ...

        Args:
            user_id: one user's counters (None: summed over every user).

        Returns:
            Counter name -> value; every known counter is present (0 when nothing happened).

        Raises:
            InvalidInputError: ``user_id`` is not None and no valid user id.
        """
        return self._store.stats(None if user_id is None else _user(user_id))

    # ------------------------------------------------------------------ lifecycle
    def delete(self, entry_id: str, *, user_id: str = "default") -> None:
        """Delete one entry from every index (update chains through it are repaired).

        Args:
            entry_id: the entry's id.
            user_id: whose memory (another user's entry is not deleted, and not found).

        Raises:
            NotFoundError: no such entry for that user.
        """
        user_id, entry_id = _user(user_id), _entry_id(entry_id, "entry_id")
        with self._user_locks.hold(user_id):
            if not self._store.delete(entry_id, user_id):
                raise NotFoundError.for_entry(entry_id, f"for user {user_id!r}")

    def replace(self, entry_ids: Iterable[str], turns: TurnsInput = (), *, user_id: str = "default",
                agent_id: str | None = None, session_id: str | None = None,
                turn_ids: Iterable[str] = ()) -> int:
        """Replace what the memory holds with new turns in one step: delete entries, take
        back earlier turns and store ``turns`` (as :meth:`add` does) in one transaction.

        An edit of a memory ("the key 'city' now says Lisbon") is a delete and an add; done
        as two calls, a crash between them loses both the old facts and the new turn. Here
        the store holds the old state or the new one, never neither. What reads see of the
        new turns waits for their extraction, as after :meth:`add` (at once when a window
        fills, else at :meth:`flush`). Entries already gone are skipped (deleting twice
        deletes once).

        Args:
            entry_ids: entries of ``user_id`` to delete (update chains through them are
                repaired, as :meth:`delete` does).
            turns: what replaces them, validated as :meth:`add` validates (none: a delete
                of several entries at once).
            user_id: whose memory.
            agent_id: scope of the new turns and of the turns taken back.
            session_id: scope of the new turns and of the turns taken back.
            turn_ids: earlier turns of exactly this scope to take back, by turn id: a turn
                still waiting for extraction is dropped, and the entries extracted from one
                are deleted, whichever it is by the time the transaction runs (an entry
                MERGEd from several turns stays while one of them is kept, without the
                turns taken back).

        Returns:
            How many turns were accepted.

        Raises:
            InvalidInputError: a turn or an id is invalid; nothing is deleted or stored.
        """
        scope = Scope(_user(user_id), agent_id, session_id)
        for name, value in (("entry_ids", entry_ids), ("turn_ids", turn_ids)):
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise InvalidInputError(name, f"give an iterable of ids, not {type(value).__name__}")
        ids = [_entry_id(i, "entry_ids") for i in entry_ids]
        taken_back = [_entry_id(i, "turn_ids") for i in turn_ids]
        batch = _normalize_turns(turns)
        with self._user_locks.hold(scope.user_id):
            self._store.replace(scope, ids, taken_back, batch)
            if batch:
                try:
                    self._ingest.process(scope, full_only=True)
                except Exception as exc:  # stored: as in add, extraction is deferred, not failed
                    log.warning("turns of %r stored; extraction deferred: %s: %s", scope.user_id,
                                type(exc).__name__, exc)
        return len(batch)

    def link(self, old_id: str, new_id: str, *, user_id: str = "default") -> None:
        """Record a change the memory missed: ``new_id`` is the newer state of ``old_id``.

        The update detector reads wording, and a change said in passing ("marcus is my boss
        now" after "my manager priya ...") is often not read as one. An agent that
        understood it, or a user, records it here: ``old_id`` gets a valid-until,
        ``history()`` runs old -> new, and retrieval and answers treat the old fact as
        superseded, exactly as for a link the detector made. Both entries are kept (the
        older state still answers "what was it before?"); :meth:`unlink` undoes it.

        One truth per fork, as the detector keeps it: an entry has at most one newer
        state, so an ``old_id`` that already has another must be unlinked from it first.
        Linking the same pair again changes nothing.

        Args:
            old_id: the entry that no longer holds.
            new_id: the entry that replaces it; said at the same time or later.
            user_id: whose memory (another user's entries are not found).

        Raises:
            NotFoundError: either entry does not exist for that user.
            InvalidInputError: the two are one entry, ``new_id`` was said before
                ``old_id``, ``old_id`` already has another newer state, or ``new_id``
                leads back to ``old_id`` (a loop).
        """
        user_id, old_id, new_id = _user(user_id), _entry_id(old_id, "old_id"), _entry_id(new_id, "new_id")
        if old_id == new_id:
            raise InvalidInputError("new_id", "an entry cannot be its own newer state")
        with self._user_locks.hold(user_id):
            self.get(old_id, user_id=user_id)  # a NotFoundError naming the id
            self.get(new_id, user_id=user_id)
            # Checked again and written in one transaction of the store: another process's
            # link or delete of these entries waits for it, or is waited for.
            why = self._store.link(user_id, old_id, new_id)
        if why is None:
            return
        if why == "missing":
            raise NotFoundError(f"{old_id!r} or {new_id!r} was deleted meanwhile for user {user_id!r}")
        if why.startswith("forked:"):
            raise InvalidInputError("old_id", f"{old_id!r} already has the newer state {why.partition(':')[2]!r}; "
                                              "unlink it first (one newer state per entry)")
        if why == "order":
            raise InvalidInputError("new_id", f"{new_id!r} was said before {old_id!r}: the newer state is the "
                                              "later one (swap them)")
        raise InvalidInputError("new_id", f"{new_id!r} already leads to {old_id!r}: the link would loop")

    def unlink(self, old_id: str, new_id: str, *, user_id: str = "default") -> None:
        """Remove an update link the memory got wrong: ``new_id`` does not replace ``old_id``.

        The update detector reads wording, and a statement about another thing that shares
        a word and changes a value can be linked as a newer state ("the flights came to
        $1,180" after "the budget is $4,000"). Unlinking makes the old fact current again:
        ``entries()`` no longer gives it a valid-until, ``history()`` ends the chain there,
        and retrieval and answers no longer treat it as superseded. Both entries are kept.

        Args:
            old_id: the entry the link marked superseded.
            new_id: the entry it named as the newer state.
            user_id: whose memory (another user's link is not touched, and not found).

        Raises:
            NotFoundError: no update link ``old_id -> new_id`` for that user.
        """
        user_id, old_id, new_id = _user(user_id), _entry_id(old_id, "old_id"), _entry_id(new_id, "new_id")
        with self._user_locks.hold(user_id):
            if not self._store.unlink(user_id, old_id, new_id):
                raise NotFoundError(f"no update link {old_id!r} -> {new_id!r} for user {user_id!r}")

    def forget(self, user_id: str, *, agent_id: str | None = None, session_id: str | None = None) -> int:
        """Delete every memory (and pending turn) of a scope.

        Args:
            user_id: whose memories.
            agent_id: only this agent's (None: the whole user, counters and edges included).
            session_id: only this session's.

        Returns:
            How many entries were removed.
        """
        scope = Scope(user_id, agent_id, session_id)  # checked before a lock is keyed by it
        with self._user_locks.hold(scope.user_id):
            return self._store.forget(scope)

    def clear(self) -> None:
        """Delete everything, for every user."""
        with self._write_lock:
            self._store.clear()

    def doctor(self, *, repair: bool = True) -> dict[str, Any]:
        """Check the store and repair what can be repaired (see :meth:`Store.doctor`):
        unreadable entries and pending turns are quarantined with their reason (kept,
        never read back), and the dense index is rebuilt where it drifted from the
        records.

        Args:
            repair: quarantine and rebuild (True) or only report (False).

        Returns:
            The report: entries checked, problems found, repairs made, and every
            quarantined row (kind, scope, reason).
        """
        with self._write_lock:
            return self._store.doctor(repair=repair)

    def export(self, path: str | Path, *, user_id: str | None = None) -> int:
        """Write the whole memory, or one user's part of it, to a JSONL file (embeddings
        included).

        A regular file is replaced atomically (a reader sees the old export or the new
        one) and keeps its permissions; a new file is created owner-only (0600), since
        an export holds memories. A symlink is followed (its target is replaced, the
        link stays); a file with several hard links is rewritten in place, after the
        whole export was written aside, so its links are not split. A special file
        (``/dev/stdout``, a FIFO, a device) is written through in place, never replaced
        by a regular file, and a failed write (``/dev/full``) is an error. A directory, a
        path whose directory does not exist, or a path inside the store's own directory is
        an :class:`InvalidInputError`; any other write failure a :class:`StoreError`.

        Args:
            path: the file to write.
            user_id: only this user's records (a per-user data export).

        Returns:
            How many lines were written.
        """
        import json
        import stat

        if user_id is not None:
            user_id = _user(user_id)
        target = Path(path)
        try:
            mode: int | None = target.stat().st_mode
        except FileNotFoundError:
            mode = None
        except OSError as exc:
            raise StoreError(f"cannot export to {target}: {exc.strerror or exc}") from None
        home = self._store.path
        if home is not None and target.resolve().is_relative_to(Path(home).resolve()):
            # Replacing the records file (or an index) with the export would destroy every
            # user's memory.
            raise InvalidInputError("path", f"{target} is inside the store's directory {home}; export elsewhere")
        if mode is not None and stat.S_ISDIR(mode):
            raise InvalidInputError("path", f"{target} is a directory; name a file inside it")
        if mode is None and not target.parent.is_dir():
            raise InvalidInputError("path", f"directory {target.parent} does not exist")
        special = mode is not None and not stat.S_ISREG(mode)
        n = 0
        try:
            # The store's write guard too: a window committed between reading the entries
            # and reading the pending turns would otherwise be in neither (an embedded
            # store; a server store reads the export in one snapshot).
            with self._write_lock, self._store.write_guard(), (open(target, "w", encoding="utf-8") if special
                                                               else atomic_open(target, new_mode=0o600)) as fh:
                for row in self._store.export_rows(user_id):
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                    n += 1
        except OSError as exc:
            raise StoreError(f"cannot export to {target}: {exc.strerror or exc}") from None
        return n

    def import_(self, path: str | Path) -> int:
        """Load a JSONL export (into this memory); returns the entries imported.

        One transaction: a malformed line (named with its number), an export of another
        embedder, or entries this memory already holds raise and import nothing.

        Args:
            path: a file written by :meth:`export`.

        Returns:
            How many entries were imported.

        Raises:
            InvalidInputError: the file is not an export or has a malformed line.
            StoreError: another embedder's export, or entries this memory already holds.
        """
        with self._write_lock:
            return self._store.import_rows(read_export_lines(path))

    # ------------------------------------------------------------------ Phase II
    def retrieve(self, query: str, *, user_id: str = "default", agent_id: str | None = None,
                 session_id: str | None = None, query_vector: np.ndarray | None = None,
                 config: Config | None = None) -> EvidenceGraph:
        """The query's connected evidence graph (no LLM call). See :mod:`.reasoning`.

        The query is cleaned like turn text (control characters stripped, lone surrogates
        replaced with U+FFFD since it is never stored) and cut to its last
        ``MAX_QUERY_CHARS`` characters, so a 100 KB prompt costs what a 4 KB one does.
        Empty or non-``str`` queries raise :class:`InvalidInputError` (field ``query``).

        Args:
            query: the question.
            user_id: whose memories are searched (nothing of another user is ever read).
            agent_id: only this agent's memories.
            session_id: only this session's memories.
            query_vector: the query's embedding, when the caller has it already.
            config: read-path settings for this call only (a tighter budget, a stage
                switched off for an ablation); the memory's own ``config`` otherwise.
                What was stored is not changed by it.

        Returns:
            The evidence graph: facts in time order, typed edges, reasoning paths, and
            ``to_text()`` for a prompt.
        """
        from .reasoning import build_evidence_graph

        query = check_query(query)
        scope = Scope(user_id, agent_id, session_id)
        if query_vector is not None:
            query_vector = check_vector(query_vector, self.embedder.dim, "query_vector")
        if config is not None and not isinstance(config, Config):
            raise InvalidInputError("config", f"expected a Config, got {type(config).__name__}")
        with self._store.reading(user_id):  # one consistent view (a server backend's snapshot cache)
            return build_evidence_graph(self._store, self._embedder, config or self.config, query, scope,
                                        query_vector=query_vector)

    async def aadd(self, turns: TurnsInput, **kwargs: Any) -> int:
        """:meth:`add` in a worker thread (embedding is CPU work; the event loop stays free).

        A thread cannot be stopped: cancelling this await (or a timeout around it, as
        ``asyncio.wait_for`` sets) does not undo the write, which finishes and stores the
        turns. Retrying after a cancellation stores them again; give the timeout to the
        caller of the whole step instead, or check ``stats()["turns_seen"]`` first.

        Args:
            turns: as for :meth:`add`.
            **kwargs: ``user_id``, ``agent_id``, ``session_id``.

        Returns:
            How many turns were accepted.
        """
        return await asyncio.to_thread(self.add, turns, **kwargs)

    async def aretrieve(self, query: str, **kwargs: Any) -> EvidenceGraph:
        """:meth:`retrieve` in a worker thread.

        Args:
            query: the question.
            **kwargs: as for :meth:`retrieve`.

        Returns:
            The evidence graph.
        """
        return await asyncio.to_thread(self.retrieve, query, **kwargs)

    # ------------------------------------------------------------------ answers
    @property
    def llm(self) -> LLMClient | None:
        """The configured LLM client (from the environment on first use), or None."""
        if not self._llm_checked:
            self._llm_checked = True
            try:
                from .llm import LLMClient

                self._llm = LLMClient.from_env()
            except ImportError:  # pragma: no cover
                self._llm = None
        return self._llm

    def answer(self, question: str, *, user_id: str = "default", agent_id: str | None = None,
               session_id: str | None = None, query_vector: np.ndarray | None = None,
               config: Config | None = None) -> Answer[EvidenceGraph]:
        """Answer from the evidence graph with one LLM call (extractive without an LLM).

        Args:
            question: the question.
            user_id: whose memories.
            agent_id: only this agent's memories.
            session_id: only this session's memories.
            query_vector: the question's embedding, if the caller has it (as for
                :meth:`retrieve`).
            config: this call's read settings (as for :meth:`retrieve`).

        Returns:
            The answer, with the evidence graph it was generated from and its cost.

        Raises:
            LLMError: the LLM call failed after its retries.
        """
        from .synthesis import synthesize

        graph = self.retrieve(question, user_id=user_id, agent_id=agent_id, session_id=session_id,
                              query_vector=query_vector, config=config)
        return synthesize(question, graph, self.llm)

    async def aanswer(self, question: str, **kwargs: Any) -> Answer[EvidenceGraph]:
        """Async :meth:`answer` (retrieval in a worker thread, the LLM call on the loop).

        Args:
            question: the question.
            **kwargs: as for :meth:`answer`.

        Returns:
            The answer.
        """
        from .synthesis import asynthesize

        graph = await self.aretrieve(question, **kwargs)
        return await asynthesize(question, graph, self.llm)


# ---------------------------------------------------------------------- helpers
class _UserLocks:
    """One reentrant lock per user id, dropped when nobody holds or waits for it (a
    server with a million users keeps only the locks in use)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.RLock, int]] = {}

    @contextmanager
    def hold(self, user_id: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(user_id) or (threading.RLock(), 0)
            self._locks[user_id] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[user_id]
                if users == 1:
                    del self._locks[user_id]
                else:
                    self._locks[user_id] = (lock, users - 1)


def read_export(path: str | Path) -> Generator[dict[str, Any], None, None]:
    """The records of a JSONL export, checked as they are read: a malformed line raises
    :class:`InvalidInputError` naming it, and so does a file whose first record is not the
    export's meta record (not an export at all). An empty file yields nothing."""
    for _, row in read_export_lines(path):
        yield row


def _check_opening(path: object, config: object, lock_timeout: object) -> None:
    """Refuse constructor arguments of the wrong kind with the library's own error, before
    a default model loads or a directory is made (``AriadneMemory(123)`` was a TypeError
    from deep inside, ``config={...}`` an AttributeError at the first add)."""
    if path is not None and not (isinstance(path, str | os.PathLike) and isinstance(os.fspath(path), str)):
        raise InvalidInputError("path", f"give a directory, a postgresql:// URL or None, not {type(path).__name__}")
    if path is not None and "\x00" in os.fspath(path):
        raise InvalidInputError("path", "a path cannot hold a NUL character")
    if config is not None and not isinstance(config, Config):
        raise InvalidInputError("config", f"give a Config (ariadnemem_core.Config), not {type(config).__name__}")
    if lock_timeout is not None and (isinstance(lock_timeout, bool) or not isinstance(lock_timeout, int | float)
                                     or not 0 < lock_timeout <= MAX_LOCK_TIMEOUT_S):
        raise InvalidInputError("lock_timeout", f"give a number of seconds in (0, {MAX_LOCK_TIMEOUT_S:g}] or None, "
                                                f"not {lock_timeout!r}")


def _user(user_id: object) -> str:
    """A user id as every read and write takes it: a non-empty string. None never means
    "any user" here (the store's internal reads use it so): another user's entry is not
    found, not returned."""
    return Scope(user_id).user_id  # type: ignore[arg-type]


def _entry_id(value: object, field_name: str) -> str:
    """An entry id as a non-empty string that encodes as UTF-8 (it is a key of every index)."""
    if not isinstance(value, str) or not value:
        raise InvalidInputError(field_name, f"expected a non-empty string, got {type(value).__name__}")
    check_unicode(value, field_name)
    if "\x00" in value:  # no id holds one; Postgres refused it as a broken read, SQLite found nothing
        raise InvalidInputError(field_name, "an id cannot hold a NUL character")
    return value


def read_export_lines(path: str | Path) -> Generator[tuple[int, dict[str, Any]], None, None]:
    """:func:`read_export` with each record's line number (for error messages)."""
    if not Path(path).is_file():
        raise InvalidInputError(str(path), "no such export file" if not Path(path).exists() else "not a file")
    with Path(path).open(encoding="utf-8") as fh:
        first = True
        try:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                row = load_json(line, f"{path} line {lineno}")
                if first and not (isinstance(row, dict) and row.get("type") == "meta"):
                    raise InvalidInputError(str(path), "not an ariadnemem export (no meta record first)")
                if not isinstance(row, dict):
                    raise InvalidInputError(f"{path} line {lineno}", "expected a JSON object")
                first = False
                yield lineno, row
        except UnicodeDecodeError as exc:
            raise InvalidInputError(str(path), f"not UTF-8 text ({exc.reason})") from None
    if first:
        # Every export holds its meta record: an empty file is a failed copy, never "0 entries".
        raise InvalidInputError(str(path), "not an ariadnemem export (it is empty)")


def _normalize_turns(turns: Any) -> list[Turn]:
    """Validate a whole batch up front (see ``add``): every problem is an
    :class:`InvalidInputError` naming the turn and field, raised before anything is stored."""
    if isinstance(turns, Turn | Mapping):
        turns = [turns]
    elif isinstance(turns, str | bytes | bytearray):
        raise InvalidInputError("turns", "expected Turn objects or dicts, got a string")
    elif not isinstance(turns, Iterable):
        raise InvalidInputError("turns", f"expected a Turn, a dict or an iterable of them, got {type(turns).__name__}")
    out: list[Turn] = []
    for i, t in enumerate(turns):
        if isinstance(t, Turn):
            # Re-validated as a copy: a Turn's fields may have been reassigned after it was
            # built, and a bad value persisted as pending would fail every later flush.
            try:
                out.append(Turn(t.speaker, t.text, t.timestamp, t.turn_id, t.metadata))
            except InvalidInputError as exc:
                raise InvalidInputError(f"turns[{i}].{exc.field}", exc.problem) from exc
        elif isinstance(t, Mapping):
            try:
                out.append(Turn.from_dict(t))
            except InvalidInputError as exc:
                raise InvalidInputError(f"turns[{i}].{exc.field}", exc.problem) from exc
            except TypeError as exc:
                raise InvalidInputError(f"turns[{i}]", str(exc)) from exc
        else:
            raise InvalidInputError(f"turns[{i}]", f"expected Turn or dict, got {type(t).__name__}")
        check_metadata(out[-1].metadata, f"turns[{i}].metadata", new=True)
    return out


def check_query(query: Any) -> str:
    """A question as ``retrieve`` takes it, or a clear error (the CLI checks its input with
    it before any work).

    Validate and bound a question (see ``retrieve``): cut first, so a huge query costs
    no more than ``MAX_QUERY_CHARS`` of cleaning; lone surrogates are replaced rather than
    rejected because the query is never stored, but a tokenizer would choke on them."""
    if not isinstance(query, str):
        raise InvalidInputError("query", f"expected str, got {type(query).__name__}")
    text: str = query.strip()
    if len(text) > MAX_QUERY_CHARS:
        text = text[-MAX_QUERY_CHARS:]
    text = replace_surrogates(clean_text(text)).strip()
    if not text:
        raise InvalidInputError("query", "is empty or whitespace only")
    return text
