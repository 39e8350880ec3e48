"""A LangGraph ``BaseStore`` backed by AriadneMemory.

``create_agent(..., store=AriadneMemStore(memory))`` hands it to tools as
``runtime.store``; LangMem's memory tools and any code written against ``BaseStore``
then keep their long-term memory in AriadneMem.

Namespaces map to memory scopes (after an optional fixed ``prefix``, e.g.
``("memories",)`` for LangMem's ``("memories", user_id)``):

=================================  ====================================
namespace (after the prefix)       scope
=================================  ====================================
``(user,)``                        user, any agent, any session
``(user, agent)``                  user and agent
``(user, agent, session)``         user, agent and session
``(user, "_", session)``           user and session, no agent
=================================  ====================================

``(user, "_")`` is refused as a namespace (it would be stored as ``(user,)``); as a
search prefix it finds the sessions without agent. A ``put`` is gated and coarsened
against its own scope only: the same fact under ``(user, "agentA")`` neither drops nor
absorbs a ``put`` to ``(user,)``.

What differs from a key-value store (``InMemoryStore``), by design:

* ``put`` *adds*: the value's text (``content``, ``text`` or ``memory``, else its JSON)
  is one dialogue turn that goes through gating, extraction and coarsening. What ``get``
  and ``search`` return is the extracted facts (``value["content"]``), not the value
  verbatim (that is kept under ``value["put_value"]`` as provenance). A value the gate
  finds uninformative may leave no fact, and then ``get`` returns None.
* ``put`` on an existing key replaces the facts extracted from that key; ``delete``
  removes them (a fact MERGEd from several puts stays while another of its keys holds
  it). Writes of one store take turns: puts to one key from several threads leave the
  last one, and deleting a key twice at once raises nothing. A put
  replaces in one transaction (a crash leaves the old value or the new one), and the
  operations of one store object take turns (a read waits for a put to finish). Ops
  handed to ``batch`` directly meet the namespace rules ``put`` checks.
* ``search(query=...)`` runs AriadneMem's retrieval (hybrid search, bridges, node
  budget) in one user's memory, so the namespace prefix must name the user; results are
  one item per key, best first, ``score`` being the best fact's score. Facts that did not
  come from a ``put`` (added with ``memory.add``) are items keyed by their entry id.
* ``index`` is ignored (everything is indexed) and TTLs are not supported.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import threading
import weakref
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ariadnemem_core import AriadneMemory, Entry, InvalidInputError, NotFoundError, Scope, Turn

from .._compat import flush_scope, require, said, scope_kwargs

require("langgraph.store.base", "langchain", "AriadneMemStore")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from .filters import matches_filter, matches_namespace  # noqa: E402

#: The agent label of a namespace whose scope has a session but no agent.
NO_AGENT = "_"
#: Turn-id prefix of the turns written by ``put`` (the key follows).
TURN_PREFIX = "langgraph:"
#: Value fields read as the text of a put, in this order.
TEXT_FIELDS = ("content", "text", "memory")


class AriadneMemStore(BaseStore):
    """LangGraph ``BaseStore`` over an :class:`~ariadnemem_core.AriadneMemory`.

    Args:
        memory: The memory (the caller opens and closes it).
        prefix: Leading namespace labels that are not part of the scope (LangMem:
            ``("memories",)``). Every namespace must start with them.
        speaker: Speaker of the turns written by ``put`` (a value's ``speaker`` field wins).
            A value without one is a note the agent keeps: its facts are stored as written,
            not prefixed "The user: ..."; first-person words in it stand for this speaker.
        flush: Extract each put at once, so the next search sees it.
    """

    supports_ttl = False

    def __init__(self, memory: AriadneMemory, *, prefix: tuple[str, ...] = (), speaker: str = "user",
                 flush: bool = True) -> None:
        self.memory = memory
        self.prefix = tuple(prefix)
        self.speaker = speaker
        self.flush = flush
        #: A put reads a key's facts, deletes them and adds the new value: two puts (or a
        #: put and a delete) of one store take turns, so the last write wins whole.
        self._writing = threading.RLock()
        #: One asyncio lock per event loop, so that ``abatch`` calls keep their order.
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = \
            weakref.WeakKeyDictionary()
        self._loops_guard = threading.Lock()

    # ------------------------------------------------------------------ mapping
    def scope_of(self, namespace: tuple[str, ...], *, partial: bool = False) -> Scope:
        """The scope a namespace names (``partial``: a search prefix, agent/session optional)."""
        ns = tuple(namespace)
        if ns[: len(self.prefix)] != self.prefix:
            raise InvalidNamespaceError(f"namespace {ns} does not start with this store's prefix {self.prefix}")
        labels = ns[len(self.prefix):]
        if not 1 <= len(labels) <= 3:
            what = "a search prefix" if partial else "a namespace"
            raise InvalidNamespaceError(
                f"{what} must be prefix + (user[, agent[, session]]), got {ns} (prefix {self.prefix}): "
                "the memory's scopes are user, agent and session")
        if not partial and len(labels) == 2 and labels[1] == NO_AGENT:
            # Stored as (user,): a get or delete on the namespace written would see nothing.
            raise InvalidNamespaceError(
                f"namespace {ns}: {NO_AGENT!r} stands for 'no agent' before a session only; "
                f"write to {self.prefix + labels[:1]} for the user's memory without agent or session")
        agent = labels[1] if len(labels) > 1 and labels[1] != NO_AGENT else None
        session = labels[2] if len(labels) > 2 else None
        return Scope(labels[0], agent, session)

    def namespace_of(self, entry: Entry) -> tuple[str, ...]:
        """The namespace an entry lives in (the inverse of :meth:`scope_of`)."""
        labels: tuple[str, ...] = (entry.user_id,)
        if entry.agent_id or entry.session_id:
            labels += (entry.agent_id or NO_AGENT,)
        if entry.session_id:
            labels += (entry.session_id,)
        return self.prefix + labels

    @staticmethod
    def _key_of(entry: Entry) -> str:
        """The put key an entry came from (the first, if MERGEd from several), else its id."""
        for tid in entry.source_turn_ids:
            if tid.startswith(TURN_PREFIX):
                return tid[len(TURN_PREFIX):]
        return entry.id

    @staticmethod
    def _put_fact(entry: Entry) -> bool:
        """Whether the entry came from a put (it holds a put key's turn)."""
        return any(tid.startswith(TURN_PREFIX) for tid in entry.source_turn_ids)

    @classmethod
    def _has_key(cls, entry: Entry, key: str) -> bool:
        """Whether ``key`` addresses the entry: a put key's turn it holds, or its own id for
        a fact added with ``memory.add`` (no put key). A put's fact is never addressed by
        its id, which every reader sees in ``value["facts"]``: a key equal to it would
        read, overwrite or delete another key's value."""
        if TURN_PREFIX + key in entry.source_turn_ids:
            return True
        return entry.id == key and not cls._put_fact(entry)

    def _entries(self, scope: Scope) -> list[Entry]:
        return self.memory.entries(scope.user_id, agent_id=scope.agent_id, session_id=scope.session_id)

    def _item(self, namespace: tuple[str, ...], key: str, entries: list[Entry],
              score: float | None = None, search: bool = False) -> Item:
        stamps = [ts for e in entries if (ts := e.timestamp)]
        firsts = [ts for e in entries if (ts := e.first_timestamp or e.timestamp)]
        now = datetime.now(UTC)
        put_value = next((e.metadata.get("langgraph_value") for e in entries if "langgraph_value" in e.metadata),
                         None)
        value = {
            "content": "\n".join(e.text for e in entries),
            "facts": [{"id": e.id, "text": e.text, "timestamp": e.timestamp.isoformat() if e.timestamp else None,
                       "source_turn_ids": list(e.source_turn_ids)} for e in entries],
            "put_value": put_value,
        }
        created, updated = (min(firsts) if firsts else now), (max(stamps) if stamps else now)
        if search:
            return SearchItem(namespace, key, value, created, updated, score=score)
        return Item(value=value, key=key, namespace=namespace, created_at=created, updated_at=updated)

    def _grouped(self, entries: Iterable[Entry]) -> dict[tuple[tuple[str, ...], str], list[Entry]]:
        groups: dict[tuple[tuple[str, ...], str], list[Entry]] = {}
        for e in entries:
            groups.setdefault((self.namespace_of(e), self._key_of(e)), []).append(e)
        return groups

    # ------------------------------------------------------------------ operations
    def _get(self, op: GetOp) -> Item | None:
        scope = self.scope_of(op.namespace)
        ns = tuple(op.namespace)
        found = [e for e in self._entries(scope) if self.namespace_of(e) == ns and self._has_key(e, op.key)]
        return self._item(ns, op.key, found) if found else None

    def _put(self, op: PutOp) -> None:
        if op.ttl is not None:
            raise NotImplementedError("AriadneMemStore does not support TTLs")
        scope = self.scope_of(op.namespace)
        ns = tuple(op.namespace)
        old = [e for e in self._entries(scope) if self.namespace_of(e) == ns and self._has_key(e, op.key)]
        if op.value is not None:
            # Validate (and build) the turn before deleting anything it replaces.
            if not isinstance(op.value, Mapping):
                raise InvalidInputError("value", f"a put's value must be a dict, got {type(op.value).__name__}")
            value = dict(op.value)
            meta: dict[str, Any] = {"langgraph_key": op.key, "langgraph_value": value}
            if not value.get("speaker"):
                # A put is a note the agent keeps ("Maya is vegetarian"), not a line the user
                # said: stored as written, not as "The user: Maya is vegetarian".
                meta["note"] = True
            try:
                text = _text_of(value)
            except RecursionError:  # the Turn refuses metadata this deep; say so, not crash
                raise InvalidInputError("value", "nested too deeply") from None
            turn = Turn(str(value.get("speaker") or self.speaker), text, datetime.now(UTC),
                        TURN_PREFIX + op.key, meta)
        # One transaction: the key's facts (by the key's turn id, so a value extracted since
        # ``old`` was read goes too), its value still waiting for extraction (a put replaced
        # before extraction, or deleted, never reaches the memory) and the new value. A crash
        # leaves the old value or the new one, never neither.
        # By id only the facts keyed by their own id (added with ``memory.add``); a fact of
        # this key MERGEd with another key's put stays for that key.
        self.memory.replace([e.id for e in old if e.id == op.key and not self._put_fact(e)],
                            [] if op.value is None else [turn],
                            user_id=scope.user_id,
                            agent_id=scope.agent_id, session_id=scope.session_id,
                            turn_ids=[TURN_PREFIX + op.key])
        if op.value is not None and self.flush:
            flush_scope(self.memory, scope_kwargs(scope.user_id, scope.agent_id, scope.session_id))

    def _search(self, op: SearchOp) -> list[SearchItem]:
        scope = self.scope_of(op.namespace_prefix, partial=True)
        prefix = tuple(op.namespace_prefix)
        ranked: list[tuple[tuple[str, ...], str, list[Entry], float | None]] = []
        if op.query:
            # Items are built from entries (a put's key and value ride on them): a turn still
            # waiting for its window has none, so it would only take an item's place.
            graph = self.memory.retrieve(op.query, user_id=scope.user_id, agent_id=scope.agent_id,
                                         session_id=scope.session_id,
                                         config=dataclasses.replace(self.memory.config, pending_turns=0))
            scores = {f.id: f.score for f in graph.facts}
            facts = sorted(_still_there(self.memory, scores, scope.user_id), key=lambda e: -scores[e.id])
            for (ns, key), group in self._grouped(facts).items():
                ranked.append((ns, key, group, max(scores[e.id] for e in group)))
        else:
            for (ns, key), group in self._grouped(self._entries(scope)).items():
                ranked.append((ns, key, group, None))
        items = [self._item(ns, key, group, score, search=True) for ns, key, group, score in ranked
                 if ns[: len(prefix)] == prefix]
        if op.filter:
            if not isinstance(op.filter, Mapping):
                raise InvalidInputError("filter", f"give a dict of key -> value, not {type(op.filter).__name__}")
            items = [it for it in items if matches_filter(it.value, op.filter)]
        return items[op.offset: op.offset + op.limit]  # type: ignore[return-value]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces: set[tuple[str, ...]] = set()
        for user in self.memory.users():
            for e in self.memory.entries(user):
                spaces.add(self.namespace_of(e))
        found = sorted(ns for ns in spaces if all(matches_namespace(c, ns) for c in op.match_conditions or ()))
        if op.max_depth is not None:
            found = sorted({ns[: op.max_depth] for ns in found})
        return found[op.offset: op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations like ``InMemoryStore`` does: reads see the store as it was
        before the batch, then the writes are applied (the last write to a key wins).
        Batches of one store take turns, reads included (a read never sees a put half
        done); another store object over the same memory is not held back."""
        ops = list(ops)
        results: list[Result] = []
        writes: dict[tuple[tuple[str, ...], str], PutOp] = {}
        with self._writing:
            for op in ops:
                _check_labels(op)
                if isinstance(op, GetOp):
                    results.append(self._get(op))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op))
                elif isinstance(op, PutOp):
                    writes.pop((tuple(op.namespace), op.key), None)
                    writes[(tuple(op.namespace), op.key)] = op
                    results.append(None)
                else:
                    raise ValueError(f"unknown operation type: {type(op).__name__}")
            for op in writes.values():
                self._put(op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread (embedding and extraction are CPU work). Batches
        awaited on one event loop run in the order they were awaited, as with
        ``InMemoryStore``: ``gather(aput(k, v0), aput(k, v1))`` leaves ``v1``. Cancelling
        the await does not undo a batch whose thread has started: it finishes."""
        ops = list(ops)
        async with self._turn():
            return await asyncio.to_thread(self.batch, ops)

    def _turn(self) -> asyncio.Lock:
        """This event loop's lock (FIFO: waiters acquire in the order they asked)."""
        loop = asyncio.get_running_loop()
        with self._loops_guard:
            lock = self._loop_locks.get(loop)
            if lock is None:
                lock = self._loop_locks[loop] = asyncio.Lock()
        return lock


def _still_there(memory: AriadneMemory, ids: Iterable[str], user_id: str) -> list[Entry]:
    """The entries of ``ids`` that still exist: another process may delete a fact between
    the retrieval that found it and this read, and a search does not fail for that."""
    out = []
    for i in ids:
        with contextlib.suppress(NotFoundError):
            out.append(memory.get(i, user_id=user_id))
    return out


def _check_labels(op: Op) -> None:
    """LangGraph's rules for namespace labels, for ops handed to ``batch`` directly
    (``BaseStore.put``, ``get`` and ``delete`` check them before batching): non-empty
    strings without a period, and no ``"langgraph"`` root for a write. A namespace written
    past them could be listed but never read or deleted again."""
    namespace = op.namespace_prefix if isinstance(op, SearchOp) else getattr(op, "namespace", None)
    if namespace is None:
        return
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label:
            raise InvalidNamespaceError(
                f"namespace labels must be non-empty strings without a period ('.'), got {tuple(namespace)!r}")
    if isinstance(op, PutOp) and (not namespace or namespace[0] == "langgraph"):
        raise InvalidNamespaceError(
            f'a namespace cannot be empty or have the root label "langgraph", got {namespace!r}')


def _text_of(value: Mapping[str, Any]) -> str:
    """The text a put stores: the first string among the usual fields (LangMem nests its
    content one level: ``{"kind": ..., "content": {"content": ...}}``), else the JSON."""
    for field in TEXT_FIELDS:
        v = value.get(field)
        if isinstance(v, str) and said(v):
            return v
        if isinstance(v, Mapping):
            inner = _text_of(v)
            if inner:
                return inner
    return json.dumps(dict(value), ensure_ascii=False, default=str) if value else ""
