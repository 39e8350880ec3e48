"""Phase II orchestration: question -> EvidenceGraph, with no LLM call.

fast paths -> hybrid terminals -> base graph -> bridges -> paths -> node budget ->
latest state -> EvidenceGraph. Each step is a small function in its own module; this one
only wires them and records per-step timings in ``graph.stats``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from . import bridges as bridges_mod
from . import paths as paths_mod
from .evidence import EvidenceGraph, Fact
from .fastpaths import try_fast_paths
from .models import Entry, Scope
from .retrieval import hybrid_search
from .serialize import fact_line
from .tokens import count_tokens

if TYPE_CHECKING:
    from .memory import AriadneMemory

#: Most newer states pulled in to show the latest value of kept facts.
MAX_UPDATE_FOLLOW = 4
#: Tokens of the header and path lines reserved inside the token budget.
OVERHEAD_TOKENS = 40


def build_evidence_graph(mem: AriadneMemory, query: str, scope: Scope, *,
                         query_vector: np.ndarray | None = None) -> EvidenceGraph:
    cfg = mem.config
    store = mem.store
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    known_persons = store.known_persons(scope.user_id)

    if cfg.enable_fastpaths:
        fast = try_fast_paths(store, scope, query, known_persons)
        if fast is not None:
            entries = _in_scope(store.get(fast.entry_ids, scope.user_id), scope)
            if entries:
                graph = _assemble(query, entries, {i: 1.0 for i in entries}, {i: "terminal" for i in entries},
                                  [], [])
                graph.fast_path = fast.name
                graph.stats.update({"fast_path": fast.data, "ms_total": _ms(t0)})
                return graph

    t = time.perf_counter()
    qvec = query_vector if query_vector is not None else mem.embedder.embed([query])[0]
    timings["ms_embed"] = _ms(t)

    t = time.perf_counter()
    cands, q_entities = hybrid_search(store, scope, query, qvec, cfg, known_persons)
    cands = [c for c in cands if _scope_ok(c.entry, scope)]
    timings["ms_retrieve"] = _ms(t)
    if not cands:
        graph = EvidenceGraph(query=query)
        graph.stats.update(timings | {"terminals": 0, "ms_total": _ms(t0)})
        return graph

    t = time.perf_counter()
    entries: dict[str, Entry] = {c.entry.id: c.entry for c in cands}
    scores: dict[str, float] = {c.entry.id: c.score for c in cands}
    roles: dict[str, str] = {c.entry.id: "terminal" for c in cands}
    speakers = {s.lower() for s in store.participants(scope.user_id)}
    stored_updates = [(e.src, e.dst) for e in store.edges(scope.user_id, entries) if e.kind == "update"]
    g = bridges_mod.base_graph(list(entries.values()), speakers, cfg, stored_updates)
    edges: list[tuple[str, str, str]] = []
    for a, b, data in g.edges(data=True):
        if data["kind"] == "update":
            continue
        edges.append((a, b, data["kind"]))
    edges.extend((s, d, "update") for s, d in stored_updates if s in entries and d in entries)
    timings["ms_graph"] = _ms(t)

    n_bridges = 0
    if cfg.enable_bridges:
        t = time.perf_counter()
        pairs = bridges_mod.bridge_pairs(g, list(entries.values()), scores, cfg)
        found = bridges_mod.discover_bridges(store, scope, mem.embedder, pairs, set(entries), cfg)
        new = _in_scope(store.get({b.bridge for b in found}, scope.user_id), scope)
        for b in found:
            if b.bridge not in new:
                continue
            if b.bridge not in entries:
                entries[b.bridge] = new[b.bridge]
                roles[b.bridge] = "bridge"
                pair_score = min(scores[b.src], scores[b.dst])
                scores[b.bridge] = pair_score * max(b.similarity, 0.0) ** 0.5
                n_bridges += 1
            edges.append((b.src, b.bridge, "bridge"))
            edges.append((b.bridge, b.dst, "bridge"))
        timings["ms_bridges"] = _ms(t)

    paths: list[list[str]] = []
    if cfg.enable_paths:
        t = time.perf_counter()
        d = paths_mod.directed_graph(entries, edges)
        paths = paths_mod.mine_paths(d, entries, scores, cfg.max_path_hops, cfg.max_paths * 3)
        timings["ms_paths"] = _ms(t)

    t = time.perf_counter()
    keep = _budget(entries, scores, paths, mem)
    paths = [p for p in paths if all(n in keep for n in p)][: cfg.max_paths]
    _follow_updates(store, scope, keep, entries, scores, roles, edges)
    timings["ms_budget"] = _ms(t)

    kept_entries = {i: entries[i] for i in keep}
    kept_edges = [(a, b, k) for a, b, k in dict.fromkeys(edges) if a in kept_entries and b in kept_entries]
    graph = _assemble(query, kept_entries, scores, roles, kept_edges, paths)
    graph.stats.update(timings | {
        "terminals": len(cands), "bridges": sum(1 for i in keep if roles.get(i) == "bridge"),
        "bridges_found": n_bridges, "query_entities": q_entities, "paths_mined": len(paths),
        "ms_total": _ms(t0),
    })
    return graph


def _budget(entries: dict[str, Entry], scores: dict[str, float], paths: list[list[str]],
            mem: AriadneMemory) -> list[str]:
    """Nodes kept: whole top paths first, then the best-scored rest, within the node
    budget [min_nodes, max_nodes] and, past min_nodes, the token budget."""
    cfg = mem.config
    cost = {i: count_tokens(fact_line(_fact(e, 0.0, "terminal", "F00"))) for i, e in entries.items()}
    keep: list[str] = []
    used = OVERHEAD_TOKENS

    def fits(ids: list[str]) -> bool:
        new = [i for i in ids if i not in keep]
        if len(keep) + len(new) > cfg.max_nodes:
            return False
        if cfg.token_budget is None or len(keep) + len(new) <= cfg.min_nodes:
            return True
        return used + sum(cost[i] for i in new) + 4 * (len(ids) if len(ids) > 1 else 0) <= cfg.token_budget

    for path in paths[: cfg.max_paths]:
        if fits(path):
            for i in path:
                if i not in keep:
                    keep.append(i)
                    used += cost[i]
            used += 4 * len(path)
    for i in sorted(entries, key=lambda n: -scores.get(n, 0.0)):
        if i in keep:
            continue
        if fits([i]):
            keep.append(i)
            used += cost[i]
        elif len(keep) >= cfg.max_nodes:
            break
    return keep


def _follow_updates(store, scope: Scope, keep: list[str], entries: dict[str, Entry],  # noqa: ANN001
                    scores: dict[str, float], roles: dict[str, str],
                    edges: list[tuple[str, str, str]]) -> None:
    """Latest state: a kept fact with a newer state (update edge) brings that state in."""
    frontier = list(keep)
    added = 0
    while frontier and added < MAX_UPDATE_FOLLOW:
        ups = [e for e in store.edges(scope.user_id, frontier) if e.kind == "update" and e.src in frontier]
        frontier = []
        newer = _in_scope(store.get({e.dst for e in ups if e.dst not in keep}, scope.user_id), scope)
        for e in ups:
            edges.append((e.src, e.dst, "update"))
            if e.dst in keep or e.dst not in newer or added >= MAX_UPDATE_FOLLOW:
                continue
            entries[e.dst] = newer[e.dst]
            scores[e.dst] = scores.get(e.src, 0.0)
            roles[e.dst] = "update"
            keep.append(e.dst)
            frontier.append(e.dst)
            added += 1


def _assemble(query: str, entries: dict[str, Entry], scores: dict[str, float], roles: dict[str, str],
              edges: list[tuple[str, str, str]], paths: list[list[str]]) -> EvidenceGraph:
    ordered = sorted(entries.values(), key=paths_mod._order_key)
    facts = [_fact(e, scores.get(e.id, 0.0), roles.get(e.id, "terminal"), f"F{n}")
             for n, e in enumerate(ordered, 1)]
    newer = {}
    for src, dst, kind in edges:
        if kind == "update" and src in entries and dst in entries:
            newer[src] = dst
    for f in facts:
        f.superseded_by = newer.get(f.id)
    return EvidenceGraph(query=query, facts=facts, edges=edges, paths=paths)


def _fact(e: Entry, score: float, role: str, label: str) -> Fact:
    return Fact(id=e.id, text=e.text, timestamp=e.timestamp, source_turn_ids=list(e.source_turn_ids),
                score=score, role=role, label=label, speaker=e.speaker)  # type: ignore[arg-type]


def _scope_ok(entry: Entry, scope: Scope) -> bool:
    return (entry.user_id == scope.user_id
            and (scope.agent_id is None or entry.agent_id == scope.agent_id)
            and (scope.session_id is None or entry.session_id == scope.session_id))


def _in_scope(found: dict[str, Entry], scope: Scope) -> dict[str, Entry]:
    return {i: e for i, e in found.items() if _scope_ok(e, scope)}


def _ms(t: float) -> float:
    return (time.perf_counter() - t) * 1000.0
