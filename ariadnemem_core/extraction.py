"""Atomic extraction: a window of gated turns -> context-independent entries.

The :class:`Extractor` protocol is what the memory calls; :class:`RuleExtractor` is the
default, LLM-free implementation (see ``grounding.py`` for the pronoun and relative-time
rules it applies). Extractors return entries without embeddings or scope: the memory
embeds all new entries of a window in one batch and stamps the scope itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from . import grounding as g
from .models import Entry, Turn, new_id


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


def other_party_for(turn: Turn, before: Sequence[Turn], participants: Sequence[str]) -> str | None:
    """Who "you" is in ``turn``: the most recent other speaker, else another participant."""
    for prev in reversed(before):
        if prev.speaker != turn.speaker:
            return prev.speaker
    return next((p for p in participants if p != turn.speaker), None)


class RuleExtractor:
    """The default, LLM-free extractor: atomic sentences, grounded.

    Each turn becomes one entry per content sentence (a sentence that opens on "it",
    "that", ... stays with the one before it), restated with pronouns resolved to names
    and relative time grounded to absolute dates, plus one entry for an attached image
    caption. Content-free chit-chat sentences ("Wow!", "Thanks, Mel!") are left out,
    except that a turn made only of chit-chat is kept whole: every turn is covered by
    at least one entry's provenance. Deterministic and thread-safe (no state).
    """

    def extract(self, turns: Sequence[Turn], context: ExtractionContext) -> list[Entry]:
        out: list[Entry] = []
        history = list(context.previous_turns)
        participants = list(context.participants)
        for turn in turns:
            if turn.speaker not in participants:
                participants.append(turn.speaker)
            out.extend(self.extract_turn(turn, other_party_for(turn, history, participants), participants))
            history.append(turn)
        return out

    def extract_turn(self, turn: Turn, other: str | None, participants: Sequence[str]) -> list[Entry]:
        text = g.normalize_text(turn.text)
        names = {p.lower() for p in participants}
        sentences = [s for s in g.split_atomic(text) if not g.is_chitchat(s, names)] or [text]
        attributes = g.find_attributes(text)
        entries = [self._entry(turn, s, other, participants) for s in sentences]
        if attributes:
            entries[0].metadata["attributes"] = attributes
        caption = turn.metadata.get("blip_caption") or turn.metadata.get("image_caption")
        if isinstance(caption, str) and caption.strip():
            entries.append(self._entry(turn, f"[shared an image: {g.normalize_text(caption)}]", None,
                                       participants, caption=True))
        return entries

    def restate(self, turn: Turn, other: str | None, sentence: str | None = None) -> str:
        """The context-independent form of a sentence (default: the whole turn)."""
        text = g.normalize_text(sentence if sentence is not None else turn.text)
        grounded = g.ground_time(g.ground_pronouns(text, turn.speaker, other), turn.timestamp)
        if turn.speaker.lower() not in grounded.lower():
            grounded = f"{turn.speaker}: {grounded}"
        return grounded

    def _entry(self, turn: Turn, sentence: str, other: str | None, participants: Sequence[str],
               caption: bool = False) -> Entry:
        text = f"{turn.speaker} {sentence}" if caption else self.restate(turn, other, sentence)
        lowered = f" {sentence.lower()} "
        persons = [turn.speaker]
        if other and not caption and re.search(r"\byou", lowered):
            persons.append(other)
        persons += [p for p in participants if p not in persons and re.search(rf"\b{re.escape(p.lower())}\b", lowered)]
        person_set = set(persons)
        entities = [c for c in g.capitalized_phrases(sentence) if c not in person_set]
        words = g.keywords(sentence)
        return Entry(
            id=new_id("e-"),
            text=text,
            keywords=words,
            persons=persons,
            entities=entities,
            location=g.find_location(sentence, person_set),
            topic=g.find_topic(words),
            timestamp=turn.timestamp,
            first_timestamp=turn.timestamp,
            source_turn_ids=[turn.turn_id or ""],
            speaker=turn.speaker,
            metadata={k: v for k, v in turn.metadata.items() if k != "attributes"},
        )
