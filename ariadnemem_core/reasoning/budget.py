"""The node and token budget, and the evidence graph it keeps.

The budget keeps the best-scored candidates that fit ``max_nodes`` and ``token_budget``;
what a candidate costs is asked of the serializer (``serialize.fact_cost``, ``day_cost``,
``update_cost``), so a change of the text's format cannot make the budget wrong. A
candidate comes with its newest states (a stale fact is never shown alone), and a long
entry is shown as a query-focused excerpt (``excerpt.py``).
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

from ..config import Config
from ..evidence import EvidenceGraph, Fact, Role
from ..models import Entry
from ..serialize import day_cost, fact_cost, overhead_cost, update_cost
from .excerpt import excerpt
from .expansion import MAX_UPDATE_FOLLOW, short_message
from .paths import order_key
from .pool import Edge

#: Knob: most latest states shown with a fact updated along several branches (:func:`unit`).
MAX_LATEST_STATES = 2
#: Bound: fewest tokens a fact line costs ("[F1] " plus a few words): below this much room
#: left, the budget stops looking (no fact would fit).
MIN_FACT_TOKENS = 6


def unit(node: str, chains: Mapping[str, list[str]], entries: Mapping[str, Entry],
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
    ends.sort(key=lambda n: order_key(entries[n]), reverse=True)
    return [node, ends[0], *[n for n in ends[1:] if n not in pulled][: MAX_LATEST_STATES - 1]]


class Shown(dict[str, str]):
    """Entry id -> the text it is shown with: whole, or a query-focused excerpt of at most
    ``max_fact_tokens`` tokens. Computed on first use: the budget reads only the
    candidates it gets to, so the others cost nothing. ``cut`` holds the ids whose text
    was shortened (their :attr:`Fact.excerpt`); own words shown whole are not."""

    def __init__(self, terms: frozenset[str], entries: Mapping[str, Entry], cfg: Config) -> None:
        super().__init__()
        self._terms = terms
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


def keep(entries: Mapping[str, Entry], scores: Mapping[str, float], chains: Mapping[str, list[str]],
         newer: Container[str], cfg: Config, shown: Shown,
         long_turns: set[str] | frozenset[str] = frozenset(), pinned: Sequence[str] = ()) -> list[str]:
    """Nodes kept, best-scored first, within the token budget (hard) and the node budget
    (at most max_nodes). A node always comes with its newer states (so a stale fact is
    never shown alone). Paths are kept afterwards only if all their nodes made it: giving
    whole paths priority spent the budget on weak links (on the LoCoMo dev set, path
    priority cost 9 points of evidence recall).

    Two passes: first the best-scored node of each source turn, then the rest. A second
    sentence of a turn already shown adds little that the first did not (same speaker,
    same moment); a new turn adds a new piece of evidence. The messages of the
    ``message_context`` best nodes are the exception: shown whole, unless too long.

    Before both passes come the ``pinned`` nodes, in their order: the message floor, what
    a flat search over the log would show in the same budget, each message through one of
    its facts (so at most the tokens flat spends on it)."""
    costs: dict[str, int] = {}

    def cost(i: str) -> int:
        if i not in costs:
            costs[i] = fact_cost(shown[i])
        return costs[i]

    days, day_costs = _days(entries)
    kept: list[str] = []
    kept_days: set[str] = set()
    used = overhead_cost()

    def take(node: str) -> bool:
        nonlocal used
        chain = unit(node, chains, entries, newer)
        new = [n for n in chain if n not in kept]
        if len(kept) + len(new) > cfg.max_nodes:
            return False
        new_days = {days[i] for i in new} - kept_days
        add = sum(cost(i) for i in new) + sum(day_costs[d] for d in new_days)
        if len(chain) > 1:
            add += update_cost(len(chain) - 1)
        if cfg.token_budget is not None and used + add > cfg.token_budget:
            return False
        kept.extend(new)
        kept_days.update(new_days)
        used += add
        return True

    ranked = sorted((n for n in entries if n not in newer), key=lambda n: -scores.get(n, 0.0))
    top = {t for i in ranked[: cfg.message_context] for t in entries[i].source_turn_ids} - long_turns
    # Counted over the message's entries among the candidates, for these few turns only.
    whole = {t for t in top if short_message((e for e in entries.values() if t in e.source_turn_ids[:1]), cfg)}
    for i in [*pinned, *_turn_first(ranked, entries, whole)]:
        if i not in kept and not take(i) and len(kept) >= cfg.max_nodes:
            break
        if cfg.token_budget is not None and cfg.token_budget - used < MIN_FACT_TOKENS:
            break  # no fact fits in what is left
    return kept


def _days(entries: Mapping[str, Entry]) -> tuple[dict[str, str], dict[str, int]]:
    """Each entry's day ("" undated), and what each day's header costs."""
    day_costs: dict[str, int] = {}
    days: dict[str, str] = {}
    for i, e in entries.items():
        days[i] = day = e.timestamp.strftime("%Y-%m-%d") if e.timestamp else ""
        if day not in day_costs:
            day_costs[day] = day_cost(e.timestamp)
    return days, day_costs


def _turn_first(ranked: list[str], entries: Mapping[str, Entry], whole: set[str]) -> list[str]:
    """``ranked`` in :func:`keep`'s two passes: the best node of each source turn first,
    then the rest (except the turns of ``whole`` messages, whose nodes stay first)."""
    seen_turns: set[str] = set()
    first: list[str] = []
    second: list[str] = []
    for i in ranked:
        turns = set(entries[i].source_turn_ids)
        (second if turns and turns <= seen_turns and not turns & whole else first).append(i)
        seen_turns |= turns
    return first + second


def fit(query: str, entries: Mapping[str, Entry], scores: Mapping[str, float], roles: Mapping[str, str],
        edges: list[Edge], paths: list[list[str]], cfg: Config, shown: Shown) -> EvidenceGraph:
    """The graph with as many of the ranked ``paths`` as fit the token budget (the facts
    were budgeted first; a path line that does not fit is dropped, lowest-ranked first).
    Paths the text does not show (``Config.path_lines`` off) cost no token and all stay.

    The budget is a guarantee, not an estimate: should the assembled text still exceed
    it (a date header or marker the estimate did not foresee), the lowest-scored facts go
    until it fits.
    """
    token_budget = cfg.token_budget
    graph = assemble(query, entries, scores, roles, edges, paths, shown, cfg)
    while token_budget is not None and paths and cfg.path_lines and graph.token_count() > token_budget:
        paths = paths[:-1]
        graph = assemble(query, entries, scores, roles, edges, paths, shown, cfg)
    left = dict(entries)
    while token_budget is not None and left and graph.token_count() > token_budget:
        worst = min(left, key=lambda i: (scores.get(i, 0.0), i))
        del left[worst]
        edges = [e for e in edges if worst not in e[:2]]
        graph = assemble(query, left, scores, roles, edges, [], shown, cfg)
    return graph


def assemble(query: str, entries: Mapping[str, Entry], scores: Mapping[str, float], roles: Mapping[str, str],
             edges: list[Edge], paths: list[list[str]], shown: Shown, cfg: Config) -> EvidenceGraph:
    """The evidence graph of the kept entries: facts labelled in time order, each marked
    superseded by its newest kept state."""
    ordered = sorted(entries.values(), key=order_key)
    facts = [_fact(e, scores.get(e.id, 0.0), roles.get(e.id, "terminal"), f"F{n}", shown.get(e.id),
                   e.id in shown.cut) for n, e in enumerate(ordered, 1)]
    newer: dict[str, str] = {}
    for src, dst, kind in edges:
        # Updated along two branches (a store written before forks were refused), a fact is
        # superseded by the state the store names (``Entry.superseded_by``: the earliest), so
        # the markers agree with entries() and history(); else by the earliest shown.
        if kind == "update" and src in entries and dst in entries and newer.get(src) != entries[src].superseded_by \
                and (src not in newer or dst == entries[src].superseded_by
                     or order_key(entries[dst]) < order_key(entries[newer[src]])):
            newer[src] = dst
    for f in facts:
        f.superseded_by = newer.get(f.id)
    return EvidenceGraph(query=query, facts=facts, edges=edges, paths=paths, group_by_turn=cfg.group_by_turn,
                         path_lines=cfg.path_lines, fact_order=cfg.fact_order)


def _fact(e: Entry, score: float, role: str, label: str, text: str | None = None, cut: bool = False) -> Fact:
    r: Role = role if role in ("terminal", "bridge", "update", "pending") else "terminal"  # type: ignore[assignment]
    return Fact(id=e.id, text=e.text if text is None else text, timestamp=e.timestamp,
                source_turn_ids=list(e.source_turn_ids), score=score,
                role=r, label=label, speaker=e.speaker, excerpt=cut,
                persons=tuple(e.persons), entities=tuple(e.entities))
