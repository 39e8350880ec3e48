"""Phase II orchestration: question -> EvidenceGraph, with no LLM call.

fast paths -> hybrid terminals -> base graph -> bridges -> paths -> node budget ->
latest state -> EvidenceGraph. Each step is a small function in its own module; this one
only wires them and records per-step timings in ``graph.stats``.
"""

from __future__ import annotations

import time
from collections.abc import Container, Iterable

import networkx as nx
import numpy as np

from . import bridges as bridges_mod
from . import paths as paths_mod
from .config import Config
from .embedding import Embedder
from .evidence import EvidenceGraph, Fact
from .excerpt import excerpt, query_terms
from .fastpaths import try_fast_paths
from .models import Entry, Scope
from .retrieval import Candidate, hybrid_search
from .serialize import date_line, fact_line
from .store import Store
from .text import STOPWORDS, without_persons
from .tokens import count_tokens

#: Most newer states pulled in to show the latest value of kept facts.
MAX_UPDATE_FOLLOW = 4
#: Most latest states shown with a fact updated along several branches (``_unit``).
MAX_LATEST_STATES = 2
#: Tokens reserved inside the token budget for the header and one path line. Path lines
#: beyond that are shown only if they still fit (``_fit_paths``): reserving room for three
#: (45 tokens) left ~40 tokens unused on most LoCoMo dev questions; with the facts that
#: now fill it (and exact marker costs) single-hop evidence recall rose from 80.9 to 82.3%
#: and multi-hop from 54.7 to 55.6%, mean context 457 -> 480 tokens.
OVERHEAD_TOKENS = 20
#: Fewest tokens a fact line costs ("[F1] " plus a few words): below this much room left,
#: the budget stops looking.
MIN_FACT_TOKENS = 6
#: Score of a candidate's previous state (pulled in by ``_older_states``) relative to it.
OLDER_STATE_WEIGHT = 0.9
#: Tokens of the " (superseded by F12)" and " (latest)" markers an update pair adds.
UPDATE_MARKER_TOKENS = 11
#: Tokens of one more " (latest)" marker (a fork: two latest states of one fact).
LATEST_MARKER_TOKENS = 3


def build_evidence_graph(store: Store, embedder: Embedder, config: Config, query: str, scope: Scope, *,
                         query_vector: np.ndarray | None = None) -> EvidenceGraph:
    """The query's connected evidence graph, with no LLM call.

    Args:
        store: the memory's store (records, lexical and dense indexes).
        embedder: embeds the query when ``query_vector`` is not given, and the query
            without the persons it names (``Config.nameless_query_weight``), in one call.
        config: retrieval, graph and budget parameters.
        query: the (already validated) question.
        scope: whose memories may be used; nothing outside it is ever read into the graph.
        query_vector: the query's embedding, if the caller has it.

    Returns:
        The evidence graph; ``graph.stats`` holds per-step timings and counts.
    """
    cfg = config
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    known_persons = store.known_persons(scope.user_id)

    if cfg.enable_fastpaths:
        fast_graph = _fast_path_graph(store, scope, query, known_persons, cfg)
        if fast_graph is not None:
            fast_graph.stats["ms_total"] = _ms(t0)
            return fast_graph

    t = time.perf_counter()
    nameless = without_persons(query, known_persons) if cfg.nameless_query_weight else query
    texts = ([] if query_vector is not None else [query]) + ([nameless] if nameless != query else [])
    vectors = list(embedder.embed(texts)) if texts else []
    qvec = query_vector if query_vector is not None else vectors.pop(0)
    nameless_vec = vectors[0] if vectors else None
    timings["ms_embed"] = _ms(t)

    t = time.perf_counter()
    cands, q_entities = hybrid_search(store, scope, query, qvec, cfg, known_persons, nameless_vec)
    # The relevance floor reads the match itself (cosine + BM25 bonus), before the
    # weights that rank candidates against each other (speaker role, entity, question).
    cands = [c for c in cands if scope.matches(c.entry)
             and c.dense + cfg.lexical_weight * c.lexical >= cfg.relevance_floor]
    timings["ms_retrieve"] = _ms(t)
    if not cands:
        graph = EvidenceGraph(query=query)
        graph.stats.update(timings | {"terminals": 0, "ms_total": _ms(t0)})
        return graph

    t = time.perf_counter()
    entries = {c.entry.id: c.entry for c in cands}
    scores: dict[str, float] = {c.entry.id: c.score for c in cands}
    roles: dict[str, str] = {c.entry.id: "terminal" for c in cands}
    long_turns: set[str] = set()
    if cfg.message_context:
        long_turns = _add_message_mates(store, scope, cands[: cfg.message_context], entries, scores, roles, cfg)
    if cfg.reply_context:
        _add_replies(store, scope, cands[: cfg.reply_context], entries, scores, roles, cfg)
    speakers = {s.lower() for s in store.participants(scope.user_id)}
    stored_updates = [(e.src, e.dst) for e in store.edges(scope.user_id, entries) if e.kind == "update"]
    g = bridges_mod.base_graph(list(entries.values()), speakers, cfg, stored_updates)
    edges: list[tuple[str, str, str]] = []
    for src, dst, data in g.edges(data=True):
        if data["kind"] == "update":
            continue
        edges.append((src, dst, data["kind"]))
    edges.extend((s, d, "update") for s, d in stored_updates if s in entries and d in entries)
    timings["ms_graph"] = _ms(t)

    n_bridges = 0
    if cfg.enable_bridges:
        t = time.perf_counter()
        n_bridges = _add_bridges(store, scope, g, cfg, entries, scores, roles, edges)
        timings["ms_bridges"] = _ms(t)

    paths: list[list[str]] = []
    if cfg.enable_paths:
        t = time.perf_counter()
        d = paths_mod.directed_graph(entries, edges)
        paths = paths_mod.mine_paths(d, entries, scores, cfg.max_path_hops, cfg.max_paths * 3)
        timings["ms_paths"] = _ms(t)

    t = time.perf_counter()
    newer, chains = _add_states(store, scope, entries, scores, roles, edges, stored_updates)
    shown = _shown(query, entries, cfg)
    keep = _budget(entries, scores, chains, newer, cfg, shown, long_turns)
    for node in list(keep):
        for end in _unit(node, chains, entries, newer)[1:]:
            if end in keep and end not in chains.get(node, ()):
                edges.append((node, end, "update"))  # the intermediate state was left out
    paths = [p for p in paths if all(n in keep for n in p)][: cfg.max_paths]
    timings["ms_budget"] = _ms(t)

    kept_entries = {i: entries[i] for i in keep}
    kept_edges = [(a, b, k) for a, b, k in dict.fromkeys(edges) if a in kept_entries and b in kept_entries]
    graph = _fit(query, kept_entries, scores, roles, kept_edges, paths, cfg, shown)
    graph.stats.update(timings | {
        "terminals": len(cands), "bridges": sum(1 for i in keep if roles.get(i) == "bridge"),
        "bridges_found": n_bridges, "query_entities": q_entities, "paths_mined": len(graph.paths),
        # Considered (terminal, reply, bridge or newer state) but cut by the node/token budget:
        # tells "never retrieved" apart from "retrieved, then pruned" when evidence is missing.
        "pruned": [i for i in entries if i not in kept_entries],
        "ms_total": _ms(t0),
    })
    return graph


def _fast_path_graph(store: Store, scope: Scope, query: str, known_persons: set[str],
                     cfg: Config) -> EvidenceGraph | None:
    """The graph of a confident fast path (see :mod:`.fastpaths`), or None; held to the
    token budget like any other graph."""
    fast = try_fast_paths(store, scope, query, known_persons)
    if fast is None:
        return None
    entries = _in_scope(store.get(fast.entry_ids, scope.user_id, cached=True), scope)
    if not entries:
        return None
    scores = {i: 1.0 for i in entries}
    shown = _shown(query, entries, cfg)
    keep = _budget(entries, scores, {}, {}, cfg, shown)
    graph = _fit(query, {i: entries[i] for i in keep}, scores, {i: "terminal" for i in entries}, [], [],
                 cfg, shown)
    graph.fast_path = fast.name
    graph.stats["fast_path"] = fast.data
    return graph


def _add_bridges(store: Store, scope: Scope, g: nx.Graph[str], cfg: Config, entries: dict[str, Entry],
                 scores: dict[str, float], roles: dict[str, str], edges: list[tuple[str, str, str]]) -> int:
    """Bridge discovery between the terminals (in place); returns how many bridges are new."""
    pairs = bridges_mod.bridge_pairs(g, list(entries.values()), scores, cfg)
    found = bridges_mod.discover_bridges(store, scope, pairs, set(entries), cfg)
    new = _in_scope(store.get({b.bridge for b in found}, scope.user_id, cached=True), scope)
    added = 0
    for b in found:
        if b.bridge not in new:
            continue
        if b.bridge not in entries:
            entries[b.bridge] = new[b.bridge]
            roles[b.bridge] = "bridge"
            pair_score = min(scores[b.src], scores[b.dst])
            scores[b.bridge] = pair_score * max(b.similarity, 0.0) ** 0.5
            added += 1
        edges.append((b.src, b.bridge, "bridge"))
        edges.append((b.bridge, b.dst, "bridge"))
    return added


def _add_replies(store: Store, scope: Scope, top: list[Candidate], entries: dict[str, Entry],
                 scores: dict[str, float], roles: dict[str, str], cfg: Config) -> None:
    """Dialogue adjacency: the turn that answers a strong hit often holds the evidence
    ("How does Jon feel about the opening?" -> the reply "I'm excited!")."""
    for cand in top:
        src = cand.entry
        turn = set(src.source_turn_ids)
        nxt_turn: set[str] | None = None
        for e in store.following(scope, src, 6):
            ids = set(e.source_turn_ids)
            if ids & turn:
                continue
            if nxt_turn is None:
                nxt_turn = ids
            elif not ids & nxt_turn:
                break
            if e.speaker == src.speaker:
                break
            if e.id not in entries and scope.matches(e):
                entries[e.id] = e
                weight = cfg.assistant_weight if cfg.is_assistant(e.speaker) else 1.0
                scores[e.id] = cand.score * cfg.reply_weight * weight
                roles[e.id] = "terminal"


#: How far (in stored entries) the other sentences of a message are looked for.
MESSAGE_SPAN = 8


def _add_message_mates(store: Store, scope: Scope, top: list[Candidate], entries: dict[str, Entry],
                       scores: dict[str, float], roles: dict[str, str], cfg: Config) -> set[str]:
    """The rest of a strong hit's message: its other sentence entries, stored next to it,
    when the whole message is short (``Config.message_context_max_tokens``). Returns the
    turns of the hits whose message was too long to show whole."""
    long_turns: set[str] = set()
    for cand in top:
        turn = set(cand.entry.source_turn_ids)
        mates = [e for e in store.around(scope, cand.entry, MESSAGE_SPAN)
                 if e.id != cand.entry.id and turn & set(e.source_turn_ids) and scope.matches(e)]
        if not _short_message((cand.entry, *mates), cfg):
            long_turns |= turn
            continue
        for e in mates:
            # A mate already among the candidates with a weaker match of its own rises too.
            scores[e.id] = max(scores.get(e.id, 0.0), cand.score * cfg.reply_weight)
            entries.setdefault(e.id, e)
            roles.setdefault(e.id, "terminal")
    return long_turns


def _short_message(message: Iterable[Entry], cfg: Config) -> bool:
    """Whether a message's entries total at most ``message_context_max_tokens``: a chat
    turn, shown whole; not a document, which would fill the budget alone."""
    return sum(count_tokens(e.text) for e in message) <= cfg.message_context_max_tokens


def _newer_states(store: Store, scope: Scope, entries: dict[str, Entry]
                  ) -> tuple[dict[str, Entry], dict[str, list[str]]]:
    """Latest state: follow persisted update edges (old -> new) from the candidates.

    Returns the newer entries not yet among the candidates and the direct successors of
    every node on the way (bounded by MAX_UPDATE_FOLLOW steps)."""
    succ: dict[str, list[str]] = {}
    frontier = set(entries)
    seen = set(entries)
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
    newer = _in_scope(store.get(seen - set(entries), scope.user_id, cached=True), scope)
    chains = {s: [d for d in ds if d in entries or d in newer] for s, ds in succ.items()}
    return newer, {s: ds for s, ds in chains.items() if ds}


def _add_states(store: Store, scope: Scope, entries: dict[str, Entry], scores: dict[str, float],
                roles: dict[str, str], edges: list[tuple[str, str, str]], updates: list[tuple[str, str]]
                ) -> tuple[dict[str, Entry], dict[str, list[str]]]:
    """The candidates' previous states and newest states join the graph (in place, role
    ``update``); returns the newer states and the update chains for the budget."""
    for i, (e, score) in _older_states(store, scope, entries, updates, scores).items():
        entries[i] = e
        roles[i] = "update"
        scores[i] = score
    newer, chains = _newer_states(store, scope, entries)
    for i, e in newer.items():
        if i not in entries:
            entries[i] = e
            roles[i] = "update"
    for src, dsts in chains.items():
        for dst in dsts:
            edges.append((src, dst, "update"))
            scores.setdefault(dst, scores.get(src, 0.0))
    return newer, chains


def _older_states(store: Store, scope: Scope, entries: dict[str, Entry], updates: list[tuple[str, str]],
                  scores: dict[str, float]) -> dict[str, tuple[Entry, float]]:
    """The previous state of every candidate that updated one (one step back).

    A question about a changed fact is best answered from both states: the newer one
    says what holds now, the older one what it replaced ("moved from 2 pm to 3 pm"), and
    a question about the earlier time needs the older one. Each scores
    ``OLDER_STATE_WEIGHT`` x its successor, so it competes for the budget like any fact
    and never outranks the state that replaced it.
    """
    wanted: dict[str, float] = {}
    for src, dst in updates:
        if dst in entries and src not in entries:
            wanted[src] = max(wanted.get(src, 0.0), scores.get(dst, 0.0) * OLDER_STATE_WEIGHT)
    found = _in_scope(store.get(wanted, scope.user_id, cached=True), scope)
    return {i: (e, wanted[i]) for i, e in found.items()}


def _unit(node: str, chains: dict[str, list[str]], entries: dict[str, Entry],
          pulled: Container[str] = ()) -> list[str]:
    """A node together with its latest states, kept or dropped as one.

    Intermediate states of a chain (2 pm -> 3 pm -> 4 pm) are not needed to read the
    latest one and would spend the budget. A fact updated twice independently is a fork
    ("targeting 1,200 words a week" -> "adjusted to 1,350 words" and -> "wrote 1,500 words
    a week by April 9"): neither newer statement supersedes the other. The newest branch
    end always comes along; another branch end (at most ``MAX_LATEST_STATES`` in all) only
    when the question retrieved it itself, not when it was merely ``pulled`` in as a newer
    state: on BEAM dev, every end of every fork cost other questions more evidence than
    it brought."""
    reach = [node]
    for cur in reach:
        for nxt in chains.get(cur, ()):
            if nxt not in reach and len(reach) <= MAX_UPDATE_FOLLOW:
                reach.append(nxt)
    if len(reach) == 1:
        return reach
    ends = [n for n in reach[1:] if not any(d in reach for d in chains.get(n, ()))] or reach[1:]
    ends.sort(key=lambda n: paths_mod.order_key(entries[n]), reverse=True)
    return [node, ends[0], *[n for n in ends[1:] if n not in pulled][: MAX_LATEST_STATES - 1]]


class _Shown(dict[str, str]):
    """Entry id -> the text it is shown with: whole, or a query-focused excerpt of at most
    ``max_fact_tokens`` tokens (``excerpt.py``). Computed on first use: the budget reads
    only the candidates it gets to, so the others cost nothing. ``cut`` holds the ids
    whose text was shortened (their :attr:`Fact.excerpt`); own words shown whole are not."""

    def __init__(self, query: str, entries: dict[str, Entry], cfg: Config) -> None:
        super().__init__()
        self._terms = query_terms(query, STOPWORDS)
        self._entries = entries
        self._max = cfg.max_fact_tokens
        self._own_words = cfg.own_words
        self.cut: set[str] = set()

    def __missing__(self, key: str) -> str:
        entry = self._entries[key]
        said = entry.metadata.get("said") if self._own_words else None
        own = isinstance(said, str) and bool(said) and bool(entry.speaker)
        source = str(said) if own else entry.text
        body = excerpt(source, self._terms, self._max)
        if body != source:
            self.cut.add(key)
        text = f"{entry.speaker}: {body}" if own else body
        self[key] = text
        return text

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self[key] if key in self._entries else default


def _shown(query: str, entries: dict[str, Entry], cfg: Config) -> _Shown:
    return _Shown(query, entries, cfg)


def _budget(entries: dict[str, Entry], scores: dict[str, float],
            chains: dict[str, list[str]], newer: dict[str, Entry], cfg: Config,
            shown: _Shown, long_turns: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Nodes kept, best-scored first, within the token budget (hard) and the node budget
    (at most max_nodes). A node always comes with its newer states (so a stale fact is
    never shown alone). Candidates under the relevance floor are left out even when
    there is room. Paths are kept afterwards only if all their nodes made it: giving
    whole paths priority spent the budget on weak links (on the LoCoMo dev set, path
    priority cost 9 points of evidence recall)."""
    # No token for the joining newline: cl100k merges it into the previous line's last token.
    costs: dict[str, int] = {}

    def cost(i: str) -> int:
        if i not in costs:
            costs[i] = count_tokens(fact_line(_fact(entries[i], 0.0, "terminal", "F00", shown[i])))
        return costs[i]

    days = {i: date_line(_fact(e, 0.0, "terminal", "F00")) for i, e in entries.items()}
    day_cost = {d: count_tokens(d) + 1 for d in set(days.values())}
    keep: list[str] = []
    kept_days: set[str] = set()
    used = OVERHEAD_TOKENS

    def take(node: str) -> bool:
        nonlocal used
        chain = _unit(node, chains, entries, newer)
        unit = [n for n in chain if n not in keep]
        if len(keep) + len(unit) > cfg.max_nodes:
            return False
        new_days = {days[i] for i in unit} - kept_days
        add = sum(cost(i) for i in unit) + sum(day_cost[d] for d in new_days)
        if len(chain) > 1:  # "(superseded by Fn)" and a "(latest)" per latest state
            add += UPDATE_MARKER_TOKENS + LATEST_MARKER_TOKENS * (len(chain) - 2)
        if cfg.token_budget is not None and used + add > cfg.token_budget:
            return False
        keep.extend(unit)
        kept_days.update(new_days)
        used += add
        return True

    # Two passes: first the best-scored node of each source turn, then the rest. A second
    # sentence of a turn already shown adds little that the first did not (same speaker,
    # same moment); a new turn adds a new piece of evidence.
    # The messages of the ``message_context`` best nodes are shown whole (the exception),
    # unless too long to be shown whole.
    ranked = sorted((n for n in entries if n not in newer), key=lambda n: -scores.get(n, 0.0))
    top = {t for i in ranked[: cfg.message_context] for t in entries[i].source_turn_ids} - long_turns
    # Counted over the message's entries among the candidates, for these few turns only.
    whole = {t for t in top if _short_message((e for e in entries.values() if t in e.source_turn_ids[:1]), cfg)}
    seen_turns: set[str] = set()
    first: list[str] = []
    second: list[str] = []
    for i in ranked:
        turns = set(entries[i].source_turn_ids)
        (second if turns and turns <= seen_turns and not turns & whole else first).append(i)
        seen_turns |= turns
    for i in first + second:
        if i not in keep and not take(i) and len(keep) >= cfg.max_nodes:
            break
        if cfg.token_budget is not None and cfg.token_budget - used < MIN_FACT_TOKENS:
            break  # no fact fits in what is left
    return keep


def _fit(query: str, entries: dict[str, Entry], scores: dict[str, float], roles: dict[str, str],
         edges: list[tuple[str, str, str]], paths: list[list[str]], cfg: Config,
         shown: _Shown) -> EvidenceGraph:
    """The graph with as many of the ranked ``paths`` as fit the token budget (the facts
    were budgeted first; a path line that does not fit is dropped, lowest-ranked first).
    Paths the text does not show (``Config.path_lines`` off) cost no token and all stay.

    The budget is a guarantee, not an estimate: should the assembled text still exceed
    it (a date header or marker the estimate did not foresee), the lowest-scored facts go
    until it fits.
    """
    token_budget = cfg.token_budget
    graph = _assemble(query, entries, scores, roles, edges, paths, shown, cfg)
    while token_budget is not None and paths and cfg.path_lines and graph.token_count() > token_budget:
        paths = paths[:-1]
        graph = _assemble(query, entries, scores, roles, edges, paths, shown, cfg)
    entries = dict(entries)
    while token_budget is not None and entries and graph.token_count() > token_budget:
        worst = min(entries, key=lambda i: (scores.get(i, 0.0), i))
        del entries[worst]
        edges = [e for e in edges if worst not in e[:2]]
        graph = _assemble(query, entries, scores, roles, edges, [], shown, cfg)
    return graph


def _assemble(query: str, entries: dict[str, Entry], scores: dict[str, float], roles: dict[str, str],
              edges: list[tuple[str, str, str]], paths: list[list[str]],
              shown: _Shown, cfg: Config) -> EvidenceGraph:
    ordered = sorted(entries.values(), key=paths_mod.order_key)
    facts = [_fact(e, scores.get(e.id, 0.0), roles.get(e.id, "terminal"), f"F{n}", shown.get(e.id),
                   e.id in shown.cut) for n, e in enumerate(ordered, 1)]
    newer: dict[str, str] = {}
    for src, dst, kind in edges:
        # Updated along two branches (a store written before forks were refused), a fact is
        # superseded by the state the store names (``Entry.superseded_by``: the earliest), so
        # the markers agree with entries() and history(); else by the earliest shown.
        if kind == "update" and src in entries and dst in entries and newer.get(src) != entries[src].superseded_by \
                and (src not in newer or dst == entries[src].superseded_by
                     or paths_mod.order_key(entries[dst]) < paths_mod.order_key(entries[newer[src]])):
            newer[src] = dst
    for f in facts:
        f.superseded_by = newer.get(f.id)
    return EvidenceGraph(query=query, facts=facts, edges=edges, paths=paths, group_by_turn=cfg.group_by_turn,
                         path_lines=cfg.path_lines, fact_order=cfg.fact_order)


def _fact(e: Entry, score: float, role: str, label: str, text: str | None = None, cut: bool = False) -> Fact:
    return Fact(id=e.id, text=e.text if text is None else text, timestamp=e.timestamp,
                source_turn_ids=list(e.source_turn_ids), score=score,
                role=role, label=label, speaker=e.speaker, excerpt=cut)  # type: ignore[arg-type]


def _in_scope(found: dict[str, Entry], scope: Scope) -> dict[str, Entry]:
    return {i: e for i, e in found.items() if scope.matches(e)}


def _ms(t: float) -> float:
    return (time.perf_counter() - t) * 1000.0
