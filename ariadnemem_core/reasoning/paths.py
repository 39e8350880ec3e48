"""Phase II, step 4: mining temporally consistent reasoning paths.

The augmented graph is made directed by time (an undirected base edge points from the
earlier to the later memory; bridge and update edges keep their direction). A DFS
enumerates paths of 2..L hops whose timestamps never go backwards and that use at least
one non-temporal edge. Paths are ranked by
length (more hops = more composed evidence), the retrieval scores of their nodes, and
temporal coherence (a chain spread over months is weaker than one within days). Paths
that are sub-sequences of a better path are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import networkx as nx

from ..models import Entry

#: Bounds: out-neighbours followed per node (best-scored first) and paths enumerated at
#: most: keeps the DFS bounded on dense same-session clusters.
BRANCHING = 6
MAX_ENUMERATED = 4000
#: Bound: paths start only from the best-scored nodes: a path's value is its mean score, so one
#: that starts low never ranks among the few kept, and starting from every node of a
#: 100-node agent-conversation graph was half of a query's time.
MAX_STARTS = 20


def directed_graph(entries: dict[str, Entry], edges: Iterable[tuple[str, str, str]]) -> nx.DiGraph[str]:
    d: nx.DiGraph[str] = nx.DiGraph()
    d.add_nodes_from(entries)
    key = {i: order_key(e) for i, e in entries.items()}
    d.add_edges_from((src, dst, {"kind": kind}) if kind in ("bridge", "update") or key[src] <= key[dst]
                     else (dst, src, {"kind": kind}) for src, dst, kind in edges)
    return d


def order_key(e: Entry) -> tuple[float, int]:
    """Time order of entries: by timestamp (undated last), then by arrival (``seq``)."""
    return (e.timestamp.timestamp() if e.timestamp else math.inf, e.seq)


def mine_paths(d: nx.DiGraph[str], entries: dict[str, Entry], scores: dict[str, float],
               max_hops: int, limit: int) -> list[list[str]]:
    """Top ``limit`` temporally consistent paths of 2..max_hops hops.

    The DFS carries the running score sum, time span and edge-kind flags of the current
    path, so extending a path costs O(1) instead of rescanning it (this is the hot loop
    of a query: thousands of partial paths on a dense same-session cluster).
    """
    order = sorted(d.nodes, key=lambda n: -scores.get(n, 0.0))
    succ = {n: sorted(d.successors(n), key=lambda m: -scores.get(m, 0.0))[:BRANCHING] for n in d.nodes}
    stamp = {n: (ts.timestamp() if (ts := entries[n].timestamp) is not None else None) for n in d.nodes}
    score = {n: scores.get(n, 0.0) for n in d.nodes}
    kind: dict[tuple[str, str], str] = {(a, b): str(data["kind"]) for a, b, data in d.edges(data=True)}
    found: list[tuple[float, list[str]]] = []
    path: list[str] = []

    def dfs(node: str, total: float, lo: float | None, hi: float | None, informative: bool,
            structural: bool, last_ts: float | None) -> None:
        if len(found) >= MAX_ENUMERATED:
            return
        hops = len(path) - 1
        if hops >= 2 and informative:
            span_days = (hi - lo) / 86400 if lo is not None and hi is not None else 0.0
            coherence = 1.0 / (1.0 + span_days / 7.0)
            value = (total / len(path)) * (1.0 + 0.25 * (hops - 1)) * (0.5 + 0.5 * coherence)
            found.append((value * (1.2 if structural else 1.0), list(path)))
        if hops >= max_hops:
            return
        for nxt in succ[node]:
            ts = stamp[nxt]
            if nxt in path or (last_ts is not None and ts is not None and ts < last_ts):
                continue
            k = kind[node, nxt]
            path.append(nxt)
            dfs(nxt, total + score[nxt],
                ts if lo is None else (lo if ts is None else min(lo, ts)),
                ts if hi is None else (hi if ts is None else max(hi, ts)),
                informative or k != "temporal", structural or k in ("bridge", "update"),
                ts)
            path.pop()

    for start in order[:MAX_STARTS]:
        path.append(start)
        ts0 = stamp[start]
        dfs(start, score[start], ts0, ts0, False, False, ts0)
        path.pop()
    return _best_distinct(found, limit)


def _best_distinct(found: list[tuple[float, list[str]]], limit: int) -> list[list[str]]:
    """The ``limit`` best-scored paths, skipping any that lies inside one already kept."""
    found.sort(key=lambda sp: -sp[0])
    kept: list[list[str]] = []
    for _, candidate in found:
        if any(_is_subsequence(candidate, k) for k in kept):
            continue
        kept.append(candidate)
        if len(kept) >= limit:
            break
    return kept


def _is_subsequence(short: list[str], long: list[str]) -> bool:
    if len(short) > len(long):
        return False
    it = iter(long)
    return all(x in it for x in short)
