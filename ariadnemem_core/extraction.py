"""Atomic extraction: a window of gated turns -> context-independent entries.

The :class:`Extractor` protocol is what the memory calls; :class:`RuleExtractor` is the
default, LLM-free implementation (see ``grounding.py`` for the pronoun and relative-time
rules it applies). Extractors return entries without embeddings or scope: the memory
embeds all new entries of a window in one batch and stamps the scope itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .models import Entry, Turn


@dataclass(slots=True)
class ExtractionContext:
    """What an extractor may know beyond the window itself.

    ``previous_turns``: the last few turns before the window in the same scope (oldest
    first), so "you" in the first turn of a window still resolves to the other party.
    ``participants``: speakers seen in this scope, in order of first appearance.
    """

    previous_turns: list[Turn] = field(default_factory=list)
    participants: list[str] = field(default_factory=list)


@runtime_checkable
class Extractor(Protocol):
    """Turns a window of gated turns into atomic entries.

    Every returned entry must list in ``source_turn_ids`` the ids of the window turns it
    came from (ids outside the window are a bug). Implementations must be thread-safe.
    """

    def extract(self, turns: Sequence[Turn], context: ExtractionContext) -> list[Entry]: ...
