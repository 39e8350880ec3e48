"""The EvidenceGraph: what ``AriadneMemory.retrieve`` returns.

A small, connected, query-specific subgraph of the memory: facts (kept entries, each with
its role), typed edges, and mined reasoning paths. ``to_text()`` is the compact
serialization handed to a generator; ``to_dict()`` is JSON-serializable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from os import PathLike
from pathlib import Path
from typing import Any, Literal

from .serialize import serialize
from .tokens import count_tokens

Role = Literal["terminal", "bridge", "update", "pending"]


@dataclass(slots=True)
class Fact:
    """One kept entry. ``label`` (F1, F2, ...) follows time order inside the graph.

    Attributes:
        id: the entry's id.
        text: the entry's text.
        timestamp: when it was (last) stated.
        source_turn_ids: the turns it stands for.
        score: its retrieval score (a newer state inherits its predecessor's).
        role: "terminal" (retrieved), "bridge" (connects two terminals), "update" (an older or newer state
            of a retrieved fact, pulled in along its update chain) or "pending" (a whole turn stored by
            ``add`` whose window is not extracted yet; its ``id`` is ``pending:<n>``, not an entry's).
        label: F1, F2, ... in time order.
        superseded_by: the id of its newer state in the graph, if any.
        speaker: who stated it.
        persons: the persons the entry names.
        entities: the other names it holds (places, products, organisations): the offline
            answer reads them to tell a value from the words around it.
    """

    id: str
    text: str
    timestamp: datetime | None
    source_turn_ids: list[str]
    score: float
    role: Role
    label: str = ""
    superseded_by: str | None = None
    speaker: str | None = None
    #: True when ``text`` is a query-focused excerpt of a longer entry (``AriadneMemory.get``
    #: returns the whole entry by ``id``).
    excerpt: bool = False
    persons: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The fact as JSON-able fields.

        Returns:
            The fields by name (timestamp in ISO 8601).
        """
        return {
            "id": self.id,
            "label": self.label,
            "text": self.text,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "source_turn_ids": list(self.source_turn_ids),
            "score": round(float(self.score), 6),
            "role": self.role,
            "superseded_by": self.superseded_by,
            "speaker": self.speaker,
            "excerpt": self.excerpt,
        }


@dataclass(slots=True)
class EvidenceGraph:
    """Facts in time order, edges ``(src, dst, kind)``, and reasoning paths (entry ids).

    Attributes:
        query: the question the graph answers.
        facts: the kept entries, in time order.
        edges: ``(src, dst, kind)`` with kind "entity", "temporal", "bridge" or "update".
        paths: reasoning paths, as lists of entry ids, best first.
        fast_path: the fast path that produced the graph ("counter", "attribute"), if any.
        stats: per-query diagnostics: candidate counts, bridges added, pruned ids, timings (ms).
    """

    query: str
    facts: list[Fact] = field(default_factory=list)
    edges: list[tuple[str, str, str]] = field(default_factory=list)
    paths: list[list[str]] = field(default_factory=list)
    fast_path: str | None = None
    #: Per-query diagnostics: candidate counts, bridges added, timings (ms), fast-path data.
    stats: dict[str, Any] = field(default_factory=dict)
    #: Serialize the facts of one message on one line (``Config.group_by_turn``).
    group_by_turn: bool = False
    #: Serialize :attr:`paths` as ``PATHS:`` lines (``Config.path_lines``); off, the
    #: paths stay on the graph (pictures, adapters' metadata) but not in the text.
    path_lines: bool = True
    #: Line order of the text (``Config.fact_order``): "time" or "relevance".
    fact_order: str = "time"

    def fact(self, entry_id: str) -> Fact | None:
        """The fact of an entry.

        Args:
            entry_id: the entry's id.

        Returns:
            The fact, or None when the entry is not in the graph.
        """
        return next((f for f in self.facts if f.id == entry_id), None)

    @property
    def source_turn_ids(self) -> set[str]:
        """Every turn id covered by the facts (what evidence recall is measured on)."""
        return {tid for f in self.facts for tid in f.source_turn_ids}

    def to_text(self) -> str:
        """Compact, injection-safe serialization (see ``serialize.py``).

        Made anew on each call (tens of microseconds), so it always shows the graph as it
        is now, also after its fields were replaced or changed.
        """
        return serialize(self)

    def token_count(self) -> int:
        """cl100k_base tokens of :meth:`to_text` (offline)."""
        return count_tokens(self.to_text())

    # Pictures for people (``picture.py``), imported lazily: matplotlib costs ~0.3 s to import.
    def to_mermaid(self) -> str:
        """A Mermaid ``flowchart LR`` diagram (fact text escaped with Mermaid entity codes)."""
        from .picture import to_mermaid

        return to_mermaid(self)

    def to_png(self, path: str | PathLike[str], *, dpi: float = 150) -> Path:
        """Draw the graph (time left to right, roles, edge kinds, paths) to a PNG.

        Args:
            path: the file to write (atomically; its directory must exist).
            dpi: resolution.

        Returns:
            The path written.
        """
        from .picture import to_png

        return to_png(self, path, dpi=dpi)

    def to_svg(self, path: str | PathLike[str]) -> Path:
        """The same drawing as :meth:`to_png`, as SVG.

        Args:
            path: the file to write.

        Returns:
            The path written.
        """
        from .picture import to_svg

        return to_svg(self, path)

    def to_html(self, path: str | PathLike[str]) -> Path:
        """One self-contained HTML page: drawing, facts, edges and paths.

        Args:
            path: the file to write.

        Returns:
            The path written.
        """
        from .picture import to_html

        return to_html(self, path)

    # Truncation, for callers with a tighter budget than the memory's (a host framework's
    # context window): the same rule as the memory's own node budget.
    def truncation_order(self) -> list[set[str]]:
        """Groups of fact ids to drop one after the other, least relevant first.

        An outdated fact is never shown without its newer state (the rule the memory's
        own node budget follows): a fact ranks by the best score among itself and the
        older states it supersedes, and dropping it drops those older states with it.
        Ties: older facts first.

        Returns:
            Disjoint groups covering every fact; drop a prefix of them with :meth:`without`.
        """
        older: dict[str, list[str]] = {}
        for f in self.facts:
            if f.superseded_by:
                older.setdefault(f.superseded_by, []).append(f.id)

        def chain(fid: str) -> set[str]:
            out, stack = {fid}, [fid]
            while stack:
                for o in older.get(stack.pop(), ()):
                    if o not in out:
                        out.add(o)
                        stack.append(o)
            return out

        score = {f.id: f.score for f in self.facts}
        order = {f.id: i for i, f in enumerate(self.facts)}
        key = {f.id: max(score[i] for i in chain(f.id)) for f in self.facts}
        groups: list[set[str]] = []
        done: set[str] = set()
        for fid in sorted(key, key=lambda i: (key[i], order[i])):
            if fid in done:
                continue
            group = chain(fid) - done
            done |= group
            groups.append(group)
        return groups

    def without(self, drop: set[str]) -> EvidenceGraph:
        """A copy without the facts in ``drop`` (nor the edges and paths through them).

        Args:
            drop: fact ids, usually a prefix of :meth:`truncation_order`'s groups.

        Returns:
            A new graph; labels are kept (F1, F3, ...) so they still match this graph.
        """
        facts = [replace(f, superseded_by=None if f.superseded_by in drop else f.superseded_by)
                 for f in self.facts if f.id not in drop]
        edges = [e for e in self.edges if e[0] not in drop and e[1] not in drop]
        paths = [p for p in self.paths if not drop.intersection(p)]
        return replace(self, facts=facts, edges=edges, paths=paths)

    def to_dict(self) -> dict[str, Any]:
        """The whole graph as JSON-able data, its ``to_text()`` included.

        Returns:
            query, facts, edges, paths, fast_path, stats and text.
        """
        return {
            "query": self.query,
            "facts": [f.to_dict() for f in self.facts],
            "edges": [list(e) for e in self.edges],
            "paths": [list(p) for p in self.paths],
            "fast_path": self.fast_path,
            "stats": _jsonable(self.stats),
            "text": self.to_text(),
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float | int | str | bool) or value is None:
        return value
    return str(value)
