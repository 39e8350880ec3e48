"""The one candidate set every stage of Phase II reads and grows.

Channels draw candidates, fusion scores them, expansion adds the memories around them
(the rest of a message, bridges, older and newer states), the budget chooses
among them. They all work on one :class:`Pool`: an entry, its score and its role per
candidate, in the order they joined (ties in the ranking keep that order), and the typed
edges found between them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..evidence import Role
from ..models import Entry

#: ``(src, dst, kind)`` with kind "entity", "temporal", "bridge" or "update".
Edge = tuple[str, str, str]


@dataclass(slots=True)
class Candidate:
    """One memory considered for the evidence graph.

    Attributes:
        entry: the memory.
        score: its rank score (the budget keeps the best first).
        role: "terminal" (retrieved), "bridge", "update" (an older or newer state) or
            "pending" (a turn waiting for its window, ``pending.py``).
        dense: its cosine to the question (fusion; 0 for an expanded candidate).
        lexical: its BM25 score, normalised by the best of the question's hits.
        message: how well the whole message it stands for matched (message channel).
        pin: its place among the memories the budget shows first (the message floor:
            what a flat search over the log would show), or None.
        channels: the channels that drew it ("dense", "lexical", "period", ...).
    """

    entry: Entry
    score: float
    role: Role = "terminal"
    dense: float = 0.0
    lexical: float = 0.0
    message: float = 0.0
    pin: int | None = None
    channels: set[str] = field(default_factory=set)

    def match(self, lexical_weight: float) -> float:
        """How well the memory itself matches (cosine + BM25 bonus), or the whole message
        it stands for (``message``) when that matched better; before the weights that rank
        candidates against each other."""
        return max(self.dense + lexical_weight * self.lexical, self.message)

    @property
    def id(self) -> str:
        return self.entry.id


class Pool:
    """Candidates by entry id, in the order they joined, plus the edges between them."""

    __slots__ = ("_cands", "edges")

    def __init__(self, candidates: list[Candidate] | None = None) -> None:
        self._cands: dict[str, Candidate] = {}
        self.edges: list[Edge] = []
        for c in candidates or ():
            self._cands.setdefault(c.id, c)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._cands

    def __len__(self) -> int:
        return len(self._cands)

    def __iter__(self) -> Iterator[str]:
        return iter(self._cands)

    def __getitem__(self, entry_id: str) -> Candidate:
        return self._cands[entry_id]

    def candidates(self) -> list[Candidate]:
        """Every candidate, in the order they joined."""
        return list(self._cands.values())

    def entries(self) -> dict[str, Entry]:
        """Entry id -> entry, in the order they joined."""
        return {i: c.entry for i, c in self._cands.items()}

    def scores(self) -> dict[str, float]:
        return {i: c.score for i, c in self._cands.items()}

    def roles(self) -> dict[str, str]:
        return {i: c.role for i, c in self._cands.items()}

    def pinned(self) -> list[str]:
        """The pinned candidates, in pin order."""
        pins = [(c.pin, i) for i, c in self._cands.items() if c.pin is not None]
        return [i for _, i in sorted(pins)]

    def add(self, entry: Entry, score: float, role: Role) -> bool:
        """Add a memory not yet in the pool; returns whether it was new (a memory already
        in keeps its score and role)."""
        if entry.id in self._cands:
            return False
        self._cands[entry.id] = Candidate(entry, score, role)
        return True

    def raise_to(self, entry: Entry, score: float, role: Role) -> None:
        """Add a memory, or lift the score of one already in to at least ``score``."""
        cand = self._cands.get(entry.id)
        if cand is None:
            self._cands[entry.id] = Candidate(entry, score, role)
        else:
            cand.score = max(cand.score, score)

    def link(self, src: str, dst: str, kind: str) -> None:
        self.edges.append((src, dst, kind))
