"""Expansion: the memories around the strongest candidates join the pool.

Each stage is one function over the :class:`~.pool.Pool`, switched by its own ``Config``
entry:

* ``message_mates`` (``message_context``): the other sentences of a strong hit's message,
  when the message is short enough to be shown whole;
* ``add_bridges`` (``enable_bridges``): Steiner-style connectors between disconnected
  terminals (``bridges.py``);
* ``add_states``: the previous state of a candidate that updated one, and the newest
  states of every candidate (persisted update edges, old -> new).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import networkx as nx

from ..config import Config
from ..models import Entry, Scope
from ..store import Store
from ..tokens import count_tokens
from . import bridges as bridges_mod
from .pool import Pool

# The read path's constants outside ``Config`` are listed, with their kind, in
# docs/architecture.md ("Read-path constants"): a bound caps work, a knob shapes quality,
# kept out of ``Config`` because a user has no reason to change it.
#: Bound: most steps along an update chain followed per query (one store read each) to
#: show the latest value of kept facts.
MAX_UPDATE_FOLLOW = 4
#: Knob: score of a candidate's previous state relative to it: it competes for the
#: budget like any fact and never outranks the state that replaced it.
OLDER_STATE_WEIGHT = 0.9
#: Bound: how far (in stored entries) the other sentences of a message are looked for
#: (they are stored next to each other; a message shown whole is short).
MESSAGE_SPAN = 8

#: ``(entry, its fused score)`` of the strongest candidates, taken before expansion.
Seed = tuple[Entry, float]


def in_scope(found: dict[str, Entry], scope: Scope) -> dict[str, Entry]:
    """The memories of ``found`` the scope may read."""
    return {i: e for i, e in found.items() if scope.matches(e)}


def short_message(message: Iterable[Entry], cfg: Config) -> bool:
    """Whether a message's entries total at most ``message_context_max_tokens``: a chat
    turn, shown whole; not a document, which would fill the budget alone."""
    return sum(count_tokens(e.text) for e in message) <= cfg.message_context_max_tokens


def message_mates(store: Store, scope: Scope, seeds: Sequence[Seed], pool: Pool, cfg: Config) -> set[str]:
    """The rest of a strong hit's message: its other sentence entries, stored next to it,
    when the whole message is short (``Config.message_context_max_tokens``); a mate
    already in the pool with a weaker score of its own rises. Returns the turns of the
    hits whose message was too long to show whole."""
    long_turns: set[str] = set()
    for entry, score in seeds:
        turn = set(entry.source_turn_ids)
        # The same speaker too: a caller's message ids may repeat (numbered per session).
        mates = [e for e in store.around(scope, entry, MESSAGE_SPAN)
                 if e.id != entry.id and turn & set(e.source_turn_ids) and e.speaker == entry.speaker
                 and scope.matches(e)]
        if not short_message((entry, *mates), cfg):
            long_turns |= turn
            continue
        for e in mates:
            pool.raise_to(e, max(0.0, score * cfg.message_weight), "terminal")
    return long_turns


def add_bridges(store: Store, scope: Scope, g: nx.Graph[str], pool: Pool, cfg: Config) -> int:
    """Bridge discovery between the terminals; returns how many bridges are new."""
    entries = pool.entries()
    pairs = bridges_mod.bridge_pairs(g, list(entries.values()), pool.scores(), cfg)
    found = bridges_mod.discover_bridges(store, scope, pairs, set(entries), cfg)
    new = in_scope(store.get({b.bridge for b in found}, scope.user_id, cached=True), scope)
    added = 0
    for b in found:
        if b.bridge not in new:
            continue
        if b.bridge not in pool:
            pair_score = min(pool[b.src].score, pool[b.dst].score)
            pool.add(new[b.bridge], pair_score * max(b.similarity, 0.0) ** 0.5, "bridge")
            added += 1
        pool.link(b.src, b.bridge, "bridge")
        pool.link(b.bridge, b.dst, "bridge")
    return added


def add_states(store: Store, scope: Scope, pool: Pool, updates: Sequence[tuple[str, str]]
               ) -> tuple[dict[str, Entry], dict[str, list[str]]]:
    """The candidates' previous states and newest states join the pool (role ``update``);
    returns the newer states and the update chains (old -> its newer states) for the budget.

    A question about a changed fact is best answered from both states: the newer one says
    what holds now, the older one what it replaced ("moved from 2 pm to 3 pm"), and a
    question about the earlier time needs the older one (one step back). A newer state
    scores as its predecessor.
    """
    for e, score in _older_states(store, scope, pool, updates):
        pool.add(e, score, "update")
    newer, chains = _newer_states(store, scope, pool)
    pending: dict[str, float] = {}
    for src, dsts in chains.items():
        for dst in dsts:
            pool.link(src, dst, "update")
            if dst not in pool and dst not in pending:
                pending[dst] = pool[src].score if src in pool else pending.get(src, 0.0)
    for i, e in newer.items():
        pool.add(e, pending.get(i, 0.0), "update")
    return newer, chains


def _older_states(store: Store, scope: Scope, pool: Pool, updates: Sequence[tuple[str, str]]
                  ) -> list[tuple[Entry, float]]:
    """The previous state of every candidate that updated one, scored
    ``OLDER_STATE_WEIGHT`` x its successor."""
    wanted: dict[str, float] = {}
    for src, dst in updates:
        if dst in pool and src not in pool:
            wanted[src] = max(wanted.get(src, 0.0), pool[dst].score * OLDER_STATE_WEIGHT)
    found = in_scope(store.get(wanted, scope.user_id, cached=True), scope)
    return [(e, wanted[i]) for i, e in found.items()]


def _newer_states(store: Store, scope: Scope, pool: Pool) -> tuple[dict[str, Entry], dict[str, list[str]]]:
    """Follow persisted update edges (old -> new) from the candidates, at most
    ``MAX_UPDATE_FOLLOW`` steps: the newer entries not yet in the pool, and the direct
    successors of every node on the way."""
    succ: dict[str, list[str]] = {}
    frontier = set(pool)
    seen = set(pool)
    for _ in range(MAX_UPDATE_FOLLOW):
        ups = [e for e in store.edges(scope.user_id, frontier) if e.kind == "update" and e.src in frontier]
        frontier = set()
        for e in ups:
            if e.dst not in succ.setdefault(e.src, []):
                succ[e.src].append(e.dst)
            if e.dst not in seen:
                seen.add(e.dst)
                frontier.add(e.dst)
        if not frontier:
            break
    newer = in_scope(store.get(seen - set(pool), scope.user_id, cached=True), scope)
    chains = {s: [d for d in ds if d in pool or d in newer] for s, ds in succ.items()}
    return newer, {s: ds for s, ds in chains.items() if ds}
