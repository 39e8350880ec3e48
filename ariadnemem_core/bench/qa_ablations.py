"""QA ablations: the same evidence, shown to the same reader with one of its parts changed.

Why in the bench and not in the configuration: evidence recall cannot say whether path
lines, update markers or the graph's structure help a *reader*; only answers can. Each
ablation is built from the full system's retrieval of the same question, in the same run,
so the reader, the question and (except for ``bridges`` and ``messages``, whose switch
changes what the budget keeps) the facts are identical and the only difference is the
one part changed:

``paths``
    the paper's ``PATHS:`` lines put back: a second retrieval with ``Config.path_lines``
    on (off by default since this comparison found they do not help the reader). Paths
    never change which facts are kept (the node budget does not read them), so the facts
    are the same; equal to AriadneMem when the memory already shows them.
``updates``
    the graph without update markers ("(superseded by F3)", "(latest)"): update edges
    dropped, ``superseded_by`` cleared; every fact stays.
``bridges``
    a second retrieval with ``Config.ablate("bridges")`` on the same store: no bridge
    facts, so the node budget may keep other facts instead (as the ablation means).
``turns``
    the same graph with one line per fact instead of one per message
    (``Config.group_by_turn`` off); the facts and markers are the same.
``messages``
    a second retrieval on the same store without the whole messages of the best
    candidates (``Config.message_context`` 0, one line per fact): the sentence entries
    the budget keeps on their own merits, as before those defaults.
``restated``
    a second retrieval on the same store with ``Config.own_words`` off: the same budget
    filled with the context-independent restatements of the sentences instead of the
    speakers' own words ("Nate tried Nate's hand at ..." for "Nate: I tried my hand at
    ..."). The store must have been built by an extractor that keeps own words;
    otherwise the texts do not change.
``relevance``
    a second retrieval on the same store with ``Config.fact_order="relevance"``: the
    message lines ordered by their best fact's score, each under its date, instead of
    oldest first (the budget may keep a fact fewer for the extra date lines).
``flat``
    the same facts as a flat list in retrieval-score order (best first), each with its
    date, without date groups, markers or paths: what a reader gets from plain top-k
    retrieval of the same facts.

Every variant keeps the injection-safe quoting of :mod:`ariadnemem_core.serialize`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..evidence import EvidenceGraph
from ..serialize import RELEVANCE_HEADER, quote

#: Ablation name -> the QA system it adds (next to "AriadneMem" and the flat baseline).
#: Answered in this order, the context defaults first: a long run that stops early (see
#: ``--qa-cache``) has the comparisons that decided a default before the rest.
QA_ABLATIONS = {
    "turns": "AriadneMem one line per fact",
    "messages": "AriadneMem w/o whole messages",
    "paths": "AriadneMem with path lines",
    "restated": "AriadneMem restated (w/o own words)",
    "flat": "AriadneMem facts as a flat list",
    "relevance": "AriadneMem lines most relevant first",
    "bridges": "AriadneMem w/o bridges",
    "updates": "AriadneMem w/o update markers",
}


def parse_qa_ablations(names: Any) -> tuple[str, ...]:
    """Validate ablation names (``"all"`` = every one), in :data:`QA_ABLATIONS` order.

    Raises:
        ValueError: an unknown name.
    """
    wanted = [names] if isinstance(names, str) else list(names or ())
    if "all" in wanted:
        return tuple(QA_ABLATIONS)
    unknown = [n for n in wanted if n not in QA_ABLATIONS]
    if unknown:
        raise ValueError(f"unknown QA ablations {unknown}; choose from {', '.join(QA_ABLATIONS)} or all")
    return tuple(n for n in QA_ABLATIONS if n in wanted)


class FlatFacts:
    """The facts of a graph as one flat, score-ordered list posing as the graph for
    :func:`~ariadnemem_core.synthesis.synthesize` (labels kept, so cited ids still match)."""

    def __init__(self, graph: EvidenceGraph) -> None:
        self.facts = list(graph.facts)
        self.fast_path = graph.fast_path
        self.stats = graph.stats
        ranked = sorted(self.facts, key=lambda f: -float(f.score))
        lines = [RELEVANCE_HEADER]
        for f in ranked:
            day = f.timestamp.strftime("%Y-%m-%d") if f.timestamp else "undated"
            lines.append(f"[{f.label}] {day}: {quote(f.text)}")
        self._text = "\n".join(lines)

    def to_text(self) -> str:
        return self._text


def without_update_markers(graph: EvidenceGraph) -> EvidenceGraph:
    """The graph with every fact but no update edges, so no fact is marked as superseded or latest."""
    facts = [dataclasses.replace(f, superseded_by=None) for f in graph.facts]
    edges = [e for e in graph.edges if e[2] != "update"]
    return dataclasses.replace(graph, facts=facts, edges=edges)


#: Ablations that retrieve again from the same store, and the config they retrieve with.
_RETRIEVE_AGAIN: dict[str, Callable[[Config], Config]] = {
    "bridges": lambda c: c.ablate("bridges"),
    "messages": lambda c: c.replace(message_context=0, group_by_turn=False),
    "paths": lambda c: c.replace(path_lines=True),
    "restated": lambda c: c.replace(own_words=False),
    "relevance": lambda c: c.replace(fact_order="relevance"),
}


def ablated_context(name: str, graph: EvidenceGraph, memory: Any, question: str, user_id: str) -> Any:
    """The context the ablation ``name`` hands to the reader for one question.

    Args:
        name: one of :data:`QA_ABLATIONS`.
        graph: the full system's evidence graph of the question.
        memory: the :class:`~ariadnemem_core.AriadneMemory` it came from (``bridges``,
            ``messages``, ``paths``, ``restated`` and ``relevance`` retrieve again from its
            store with their switch changed).
        question: the question.
        user_id: whose memory.

    Returns:
        An EvidenceGraph, or a :class:`FlatFacts` for ``flat``.
    """
    if name == "updates":
        return without_update_markers(graph)
    if name == "flat":
        return FlatFacts(graph)
    if name == "turns":
        return dataclasses.replace(graph, group_by_turn=False)
    if name in _RETRIEVE_AGAIN:
        return memory.retrieve(question, user_id=user_id, config=_RETRIEVE_AGAIN[name](memory.config))
    raise ValueError(f"unknown QA ablation {name!r}")
