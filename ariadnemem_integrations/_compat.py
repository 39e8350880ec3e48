"""Shared helpers of the adapters: optional imports, message -> Turn, graph views.

Everything here is presentation glue. Retrieval, serialization and storage stay in the
core (``memory.retrieve``, ``EvidenceGraph.to_text()``, ``memory.add``).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ariadnemem_core import MAX_TEXT_CHARS, AriadneMemError, Turn, clean_text, quote

if TYPE_CHECKING:
    from ariadnemem_core import AriadneMemory, EvidenceGraph, Fact

#: The two views every retriever offers: the whole graph, or one item per fact.
MODES = ("graph", "facts")


log = logging.getLogger("ariadnemem_integrations")

#: Distribution name of the top-level modules the adapters import (for error messages).
_DISTRIBUTIONS = {"langchain_core": "langchain-core", "langchain_classic": "langchain-classic",
                  "llama_index": "llama-index-core"}


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` or raise an ImportError that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        dist = _DISTRIBUTIONS.get(top, top)
        raise ImportError(
            f"{feature} needs the '{dist}' package, which could not be imported ({exc}). "
            f'Install it with: pip install "ariadnemem[{extra}]"'
        ) from exc


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def check_k(k: int | None) -> int | None:
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k must be a positive integer or None, got {k!r}")
    return k


def iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts else None


def now() -> datetime:
    return datetime.now(UTC)


def said(text: object) -> str:
    """What a framework's message says, as a :class:`Turn` would keep it: control
    characters removed (C0 but tab and newline, DEL, C1), blank ends stripped, a lone
    surrogate replaced by U+FFFD marks; "" for None. A message of nothing else is skipped by the
    adapters rather than rejected: a rejected message would fail the whole batch it came
    in, and a framework that hands over a batch (LlamaIndex's memory flushing its
    short-term window) would lose the others."""
    if text is None:
        return ""
    # The core refuses a lone surrogate (a caller's decoding bug); a framework's message is
    # kept with U+FFFD marks in its place.
    return clean_text(str(text).encode("utf-8", "surrogatepass").decode("utf-8", "replace")).strip()


def make_turn(speaker: str, text: str, *, turn_id: str | None = None,
              timestamp: datetime | None = None, metadata: dict[str, Any] | None = None) -> Turn:
    """A Turn stamped now (relative time words in ``text`` are grounded against it)."""
    return Turn(speaker, text, timestamp or now(), turn_id or None, dict(metadata or {}))


def make_turns(speaker: str, text: str, *, turn_id: str | None = None,
               metadata: dict[str, Any] | None = None) -> list[Turn]:
    """:func:`make_turn`, with a message longer than the library's text limit stored as
    consecutive parts (cut at a space where one is near the limit) rather than rejected:
    a rejected message fails the whole batch it came in (LlamaIndex hands over the
    messages leaving its short-term window at once, an agent's run ends with its
    exchange), and nothing of it would be kept. With ``turn_id`` the first part keeps it
    and the next ones are ``<turn_id>#2``, ``<turn_id>#3``, ..."""
    stamp = now()
    parts: list[str] = []
    while len(text) > MAX_TEXT_CHARS:
        cut = text.rfind(" ", MAX_TEXT_CHARS - 1_000, MAX_TEXT_CHARS)
        cut = cut if cut > 0 else MAX_TEXT_CHARS
        parts.append(text[:cut])
        text = text[cut:].lstrip()
    parts.append(text)
    parts = [part for part in parts if part]
    return [make_turn(speaker, part, turn_id=f"{turn_id}#{n}" if turn_id and n > 1 else turn_id, timestamp=stamp,
                      metadata=metadata) for n, part in enumerate(parts, 1)]


def store_turns(memory: AriadneMemory, turns: list[Turn], *, flush: bool = True, **scope: Any) -> int:
    """``memory.add`` then (by default) a flush of the scope's turns, so they are
    retrievable now. Only this scope's turns are extracted: a host serving one user never
    waits for another user's extraction nor hears of its failure. The turns are stored
    before extraction, so a failed extraction is logged and left for a later flush, as
    ``add`` does, not raised: a caller that retried would store them twice."""
    if not turns:
        return 0
    n = memory.add(turns, **scope)
    if flush:
        flush_scope(memory, scope)
    return n


async def astore_turns(memory: AriadneMemory, turns: list[Turn], *, flush: bool = True, **scope: Any) -> int:
    """:func:`store_turns` for async callers (the flush runs in a worker thread)."""
    if not turns:
        return 0
    n = await memory.aadd(turns, **scope)
    if flush:
        await asyncio.to_thread(flush_scope, memory, scope)
    return n


def flush_scope(memory: AriadneMemory, scope: dict[str, Any]) -> None:
    """Extract the turns of one scope now; a failure is logged and the turns stay pending
    (they are stored: a caller that retried would store them twice)."""
    user = scope.get("user_id") or "default"
    try:
        memory.flush(user_id=user, agent_id=scope.get("agent_id"), session_id=scope.get("session_id"))
    except AriadneMemError as exc:
        log.warning("turns of %r stored; extraction deferred: %s: %s", user, type(exc).__name__, exc)


def scope_kwargs(user_id: str, agent_id: str | None, session_id: str | None) -> dict[str, Any]:
    return {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}


# ---------------------------------------------------------------------- graph views
def graph_metadata(graph: EvidenceGraph) -> dict[str, Any]:
    """JSON-friendly metadata of a whole evidence graph (ids, paths, provenance, times)."""
    return {
        "source": "ariadnemem",
        "kind": "evidence_graph",
        "query": graph.query,
        "fact_ids": [f.id for f in graph.facts],
        "fact_labels": {f.id: f.label for f in graph.facts},
        "paths": [list(p) for p in graph.paths],
        "edges": [list(e) for e in graph.edges],
        "source_turn_ids": sorted(graph.source_turn_ids),
        "timestamps": {f.id: iso(f.timestamp) for f in graph.facts},
        "fast_path": graph.fast_path,
        "num_facts": len(graph.facts),
    }


def fact_metadata(fact: Fact) -> dict[str, Any]:
    """``Fact.to_dict()`` without the text (that is the document/node content)."""
    meta = {k: v for k, v in fact.to_dict().items() if k != "text"}
    meta.update({"source": "ariadnemem", "kind": "fact"})
    return meta


def ranked_facts(graph: EvidenceGraph) -> list[Fact]:
    """Facts most relevant first (score, then the graph's time order): retriever order."""
    order = {f.id: i for i, f in enumerate(graph.facts)}
    return sorted(graph.facts, key=lambda f: (-f.score, order[f.id]))


def paths_text(graph: EvidenceGraph) -> str | None:
    """The reasoning paths written with fact texts (one path per line), or None.

    Fact texts are quoted as in ``to_text()`` (one JSON string literal each), so a stored
    newline or quote cannot start a forged ``[F1] (latest) ...`` line in this document.
    """
    by_id = {f.id: f for f in graph.facts}
    lines = []
    for p in graph.paths:
        if all(i in by_id for i in p):
            lines.append(" -> ".join(f"[{by_id[i].label}] {quote(by_id[i].text)}" for i in p))
    return "\n".join(lines) if lines else None


def paths_metadata(graph: EvidenceGraph) -> dict[str, Any]:
    return {"source": "ariadnemem", "kind": "paths", "query": graph.query,
            "paths": [list(p) for p in graph.paths], "fast_path": graph.fast_path}
