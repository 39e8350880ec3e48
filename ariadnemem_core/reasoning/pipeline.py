"""Phase II, wired: question -> EvidenceGraph, with no LLM call.

fast paths -> read the question -> channels (and the turns waiting for their window)
-> fusion -> relevance floor -> expansion
(message mates, base graph, bridges) -> paths -> states -> budget -> graph. Each stage
is a small function of its own module; this one only wires them, in one direction, and
records per-stage timings in ``graph.stats``. ``Config`` switches the stages.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Container, Iterator, Mapping
from contextlib import contextmanager

import networkx as nx
import numpy as np

from ..config import Config
from ..embedding import Embedder
from ..evidence import EvidenceGraph
from ..models import Entry, Scope
from ..store import Store
from ..text import STOPWORDS
from . import bridges, budget, channels, expansion, fusion, paths, pending
from .excerpt import query_terms
from .fastpaths import try_fast_paths
from .pool import Pool
from .query import read_question


def build_evidence_graph(store: Store, embedder: Embedder, config: Config, query: str, scope: Scope, *,
                         query_vector: np.ndarray | None = None) -> EvidenceGraph:
    """The query's connected evidence graph, with no LLM call.

    Args:
        store: the memory's store (records, lexical and dense indexes).
        embedder: embeds the query when ``query_vector`` is not given, and the query
            without the persons it names (``Config.nameless_query_weight``), in one call.
        config: retrieval, graph and budget parameters; its switches choose the stages.
        query: the (already validated) question.
        scope: whose memories may be used; nothing outside it is ever read into the graph.
        query_vector: the query's embedding, if the caller has it.

    Returns:
        The evidence graph; ``graph.stats`` holds per-stage timings and counts.
    """
    with collector_paused():
        return _build(store, embedder, config, query, scope, query_vector)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the length of one query.

    Why: a query builds a few thousand short-lived objects (candidates, graph nodes and
    edges, partial paths). A young-generation collection in the middle of a query finds
    them alive and promotes them; the promotions then set off full collections, which
    walk every object of the process (about 220,000 with chromadb and networkx loaded:
    ~140 ms each). On a 2,400-message store (~9,100 memories) one query in twenty paid
    for one: warm p95 107 -> 64 ms with the pause, p50 unchanged (200 questions).
    With the collector paused the query's objects die by reference count before any
    collection sees them. Nothing is lost: reference cycles made meanwhile wait for
    the next collection the host's own allocations start.

    Thread-safe in effect: a query that found the collector off (a host that turned it
    off, or a concurrent query) leaves it as it was; one that turned it off turns it on
    again, so it ends on when it started on.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _build(store: Store, embedder: Embedder, config: Config, query: str, scope: Scope,
           query_vector: np.ndarray | None) -> EvidenceGraph:
    cfg = config
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    known_persons = store.known_persons(scope.user_id)
    # What was just said and waits for its window is read too (read-your-writes).
    waiting = pending.pending_entries(store, embedder, scope, cfg)

    if cfg.enable_fastpaths:
        fast_graph = _fast_path_graph(store, scope, query, known_persons, cfg, waiting)
        if fast_graph is not None:
            fast_graph.stats["ms_total"] = _ms(t0)
            return fast_graph

    t = time.perf_counter()
    q = read_question(query, scope, known_persons, embedder, cfg, vector=query_vector)
    timings["ms_embed"] = _ms(t)

    t = time.perf_counter()
    drawn = channels.draw(store, q, cfg)
    found = store.get([h.entry_id for hits in drawn.values() for h in hits], scope.user_id, cached=True)
    waiting = pending.not_extracted(waiting, found)
    if waiting:
        cosine, terms = pending.hits(waiting, q, embedder, cfg)
        drawn, found = {**drawn, "pending": cosine, "pending_terms": terms}, {**found, **waiting.entries}
    # The relevance floor reads the match itself (cosine + BM25 bonus), before the
    # weights that rank candidates against each other (speaker role, entity, question).
    # The message floor is exempt: a flat search would show it, whatever its score.
    cands = [c for c in fusion.fuse(found, drawn, q, cfg) if scope.matches(c.entry)
             and (c.match(cfg.lexical_weight) >= cfg.relevance_floor or c.pin is not None)]
    timings["ms_retrieve"] = _ms(t)
    if not cands:
        graph = EvidenceGraph(query=query)
        graph.stats.update(timings | {"terminals": 0, "ms_total": _ms(t0)})
        return graph

    t = time.perf_counter()
    pool = Pool(cands)
    long_turns: set[str] = set()
    # A pending turn has no place among stored entries yet: it seeds no expansion.
    stored = [c for c in cands if c.role != "pending"]
    if cfg.message_context:
        seeds = [(c.entry, c.score) for c in stored[: cfg.message_context]]
        long_turns = expansion.message_mates(store, scope, seeds, pool, cfg)
    speakers = {s.lower() for s in store.participants(scope.user_id)}
    entries = pool.entries()
    stored_updates = [(e.src, e.dst) for e in store.edges(scope.user_id, entries) if e.kind == "update"]
    g = bridges.base_graph(list(entries.values()), speakers, cfg, stored_updates)
    _link_base_graph(pool, g, stored_updates)
    timings["ms_graph"] = _ms(t)

    n_bridges = 0
    if cfg.enable_bridges:
        t = time.perf_counter()
        n_bridges = expansion.add_bridges(store, scope, g, pool, cfg)
        timings["ms_bridges"] = _ms(t)

    mined: list[list[str]] = []
    if cfg.enable_paths:
        t = time.perf_counter()
        directed = paths.directed_graph(pool.entries(), pool.edges)
        mined = paths.mine_paths(directed, pool.entries(), pool.scores(), cfg.max_path_hops, cfg.max_paths * 3)
        timings["ms_paths"] = _ms(t)

    t = time.perf_counter()
    newer, chains = expansion.add_states(store, scope, pool, stored_updates)
    entries, scores = pool.entries(), pool.scores()
    shown = budget.Shown(q.terms, entries, cfg)
    keep = budget.keep(entries, scores, chains, newer, cfg, shown, long_turns, pool.pinned())
    _link_skipped_states(pool, keep, chains, entries, newer)
    mined = [p for p in mined if all(n in keep for n in p)][: cfg.max_paths]
    timings["ms_budget"] = _ms(t)

    kept = {i: entries[i] for i in keep}
    kept_edges = [(a, b, k) for a, b, k in dict.fromkeys(pool.edges) if a in kept and b in kept]
    graph = budget.fit(query, kept, scores, pool.roles(), kept_edges, mined, cfg, shown)
    graph.stats.update(timings | {
        "terminals": len(cands), "bridges": sum(1 for i in keep if pool[i].role == "bridge"),
        "bridges_found": n_bridges, "query_entities": q.entities, "paths_mined": len(graph.paths),
        # Considered (terminal, message mate, bridge or newer state) but cut by the node/token budget:
        # tells "never retrieved" apart from "retrieved, then pruned" when evidence is missing.
        "pruned": [i for i in entries if i not in kept],
        "ms_total": _ms(t0),
    })
    return graph


def _link_base_graph(pool: Pool, g: nx.Graph[str], stored_updates: list[tuple[str, str]]) -> None:
    """The base graph's edges into the pool; updates only as the store recorded them."""
    for src, dst, data in g.edges(data=True):
        if data["kind"] != "update":
            pool.link(src, dst, data["kind"])
    for s, d in stored_updates:
        if s in pool and d in pool:
            pool.link(s, d, "update")


def _link_skipped_states(pool: Pool, keep: list[str], chains: Mapping[str, list[str]],
                         entries: Mapping[str, Entry], newer: Container[str]) -> None:
    """An update edge from a kept state straight to a newer kept one when the
    intermediate state was left out by the budget."""
    for node in list(keep):
        for end in budget.unit(node, chains, entries, newer)[1:]:
            if end in keep and end not in chains.get(node, ()):
                pool.link(node, end, "update")


def _fast_path_graph(store: Store, scope: Scope, query: str, known_persons: set[str], cfg: Config,
                     waiting: pending.Waiting) -> EvidenceGraph | None:
    """The graph of a confident fast path (see :mod:`.fastpaths`), or None; held to the
    token budget like any other graph. A fast path reads extracted memories only: when a
    turn waiting for its window says what the question asks about, the full read runs instead."""
    fast = try_fast_paths(store, scope, query, known_persons)
    if fast is None or (waiting and pending.relevant(waiting, query, known_persons)):
        return None
    entries = expansion.in_scope(store.get(fast.entry_ids, scope.user_id, cached=True), scope)
    if not entries:
        return None
    scores = {i: 1.0 for i in entries}
    shown = budget.Shown(query_terms(query, STOPWORDS), entries, cfg)
    keep = budget.keep(entries, scores, {}, {}, cfg, shown)
    graph = budget.fit(query, {i: entries[i] for i in keep}, scores, {i: "terminal" for i in entries}, [], [],
                       cfg, shown)
    graph.fast_path = fast.name
    graph.stats["fast_path"] = fast.data
    return graph


def _ms(t: float) -> float:
    return (time.perf_counter() - t) * 1000.0
