"""Phase II, steps 2-3: the base graph on the terminals and bridge discovery.

Base graph: an edge between two terminals that share an entity (named things and persons
other than the dialogue's own speakers, who occur everywhere and would connect every pair)
or lie closer in time than delta_time; persisted update edges among them are carried over.

Bridge discovery approximates a Steiner tree over the terminals: for disconnected terminal
pairs 1-168 h apart (paper defaults) we look for one non-terminal memory *between* them in
time that is about what they are about (query = the union of their entities and keywords).
Only the top-``bridge_candidates`` such memories are considered and the best connector
(highest summed cosine to the two endpoints) becomes the bridge ``m_i -> b -> m_j``.
The time window goes into the index query (SQL range scans on ``(user_id, ts)`` over the
union of the pairs' intervals, overlapping ones merged; each pair then sees only
candidates inside its own). The union, not the hull: pairs are at most a week apart each,
but a question's terminals can span years, and scanning from the earliest to the latest
pair read every embedding of the user (O(n) per query: ~100 ms at 30k entries).

DEPARTURE: the pair's query vector is the normalized sum of the two terminals' stored
embeddings instead of a fresh embedding of their concatenated entities and keywords. It
encodes the same content, and it costs no model call: embedding the keyword strings (up
to 12 per question) was 85% of retrieval time on a LoCoMo conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import networkx as nx
import numpy as np

from ..config import Config
from ..models import Entry, Scope
from ..store import Store


@dataclass(frozen=True, slots=True)
class Bridge:
    src: str
    bridge: str
    dst: str
    similarity: float
    connect: float


def entity_keys(entry: Entry, speakers: set[str]) -> set[str]:
    keys = {e.lower() for e in entry.entities}
    keys |= {p.lower() for p in entry.persons if p.lower() not in speakers}
    return keys


def base_graph(nodes: Sequence[Entry], speakers: set[str], config: Config,
               update_edges: Sequence[tuple[str, str]] = ()) -> nx.Graph[str]:
    """Undirected base graph; edge attribute ``kind`` is ``entity`` or ``temporal``.

    Every pair of the ~100 candidates is judged at once (an inverted index of the entity
    keys, a matrix of time gaps) and the edges are added in the order of the pairs, so the
    graph is the one a pair-by-pair loop builds; that loop was a fifth of a query's time.
    """
    g: nx.Graph[str] = nx.Graph()
    g.add_nodes_from(e.id for e in nodes)
    n = len(nodes)
    shared = np.zeros((n, n), dtype=bool)
    holders: dict[str, list[int]] = {}
    for i, e in enumerate(nodes):
        for key in entity_keys(e, speakers):
            holders.setdefault(key, []).append(i)
    for members in holders.values():
        if len(members) > 1:
            shared[np.ix_(members, members)] = True
    stamps = np.array([e.timestamp.timestamp() if e.timestamp is not None else np.nan for e in nodes], dtype=float)
    with np.errstate(invalid="ignore"):
        close = np.abs(stamps[:, None] - stamps[None, :]) < config.delta_time_s  # undated: never close
    rows, cols = np.nonzero(np.triu(shared | close, k=1))  # row-major: the order of the pairs
    g.add_edges_from((nodes[i].id, nodes[j].id, {"kind": "entity" if shared[i, j] else "temporal"})
                     for i, j in zip(rows.tolist(), cols.tolist(), strict=True))
    for src, dst in update_edges:
        if src in g and dst in g:
            g.add_edge(src, dst, kind="update")
    return g


def bridge_pairs(g: nx.Graph[str], terminals: Sequence[Entry], scores: dict[str, float],
                 config: Config) -> list[tuple[Entry, Entry]]:
    """Disconnected terminal pairs within the gap range, best-scored first, one per
    pair of components (a Steiner tree needs each component joined once)."""
    comp = {}
    for i, nodes in enumerate(nx.connected_components(g)):
        for n in nodes:
            comp[n] = i
    timed = [t for t in terminals if t.timestamp is not None]
    pairs: list[tuple[float, Entry, Entry]] = []
    for a, b in combinations(timed, 2):
        if comp[a.id] == comp[b.id]:
            continue
        gap = abs((a.timestamp - b.timestamp).total_seconds())  # type: ignore[operator]
        if config.bridge_min_gap_s <= gap <= config.bridge_max_gap_s:
            first, second = (a, b) if a.timestamp <= b.timestamp else (b, a)  # type: ignore[operator]
            pairs.append((scores.get(a.id, 0.0) + scores.get(b.id, 0.0), first, second))
    pairs.sort(key=lambda p: -p[0])
    joined = nx.utils.UnionFind(comp.values())
    chosen: list[tuple[Entry, Entry]] = []
    for _, a, b in pairs:
        if joined[comp[a.id]] == joined[comp[b.id]]:
            continue
        joined.union(comp[a.id], comp[b.id])
        chosen.append((a, b))
        if len(chosen) >= config.max_bridge_pairs:
            break
    return chosen


def _pair_vector(a: Entry, b: Entry) -> np.ndarray:
    v = np.asarray(a.embedding, dtype=np.float32) + np.asarray(b.embedding, dtype=np.float32)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def discover_bridges(store: Store, scope: Scope, pairs: Sequence[tuple[Entry, Entry]],
                     terminal_ids: set[str], config: Config) -> list[Bridge]:
    if not pairs:
        return []
    qvecs = np.stack([_pair_vector(a, b) for a, b in pairs])
    ids, ts, mat = _vectors_in_intervals(
        store, scope, [(a.timestamp.timestamp(), b.timestamp.timestamp()) for a, b in pairs])  # type: ignore[union-attr]
    if not ids:
        return []
    free = np.array([i not in terminal_ids for i in ids])
    out: list[Bridge] = []
    for (a, b), q in zip(pairs, qvecs, strict=True):
        inside = free & (ts > a.timestamp.timestamp()) & (ts < b.timestamp.timestamp())  # type: ignore[union-attr]
        idx = np.flatnonzero(inside)
        if idx.size == 0:
            continue
        sims = mat[idx] @ q
        top = idx[np.argsort(-sims)[: config.bridge_candidates]]
        connect = mat[top] @ a.vector + mat[top] @ b.vector
        best = int(np.argmax(connect))
        k = int(top[best])
        out.append(Bridge(a.id, ids[k], b.id, float(mat[k] @ q), float(connect[best]) / 2))
    return out


def _vectors_in_intervals(store: Store, scope: Scope, intervals: Sequence[tuple[float, float]]
                          ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The scope's (ids, ts, embeddings) with ts in the union of closed ``intervals``, in
    ts order: one range scan per run of overlapping intervals. Every pair's open interval
    lies inside the union, so each pair sees exactly the candidates the hull gave it."""
    merged: list[list[float]] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    parts = [store.vectors_in_window(scope, lo, hi) for lo, hi in merged]
    parts = [p for p in parts if p[0]]
    if len(parts) <= 1:
        return parts[0] if parts else ([], np.zeros(0), np.zeros((0, store.dim), dtype=np.float32))
    return ([i for p in parts for i in p[0]], np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]))
