"""The data model: what flows from turns to entries to the memory graph.

``Turn`` is the input unit (one utterance), ``Entry`` the stored atomic memory, and
``UpdateEdge`` the persisted ``old -> new`` LINK that records a state update.
Timestamps are timezone-aware UTC datetimes inside the library: naive datetimes are read
as UTC (documented), aware ones are converted.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from .errors import InvalidInputError

#: Longest accepted turn text in characters. Longer texts are rejected with a clear error
#: rather than silently truncated (nothing is lost without the caller knowing).
MAX_TEXT_CHARS = 200_000
#: Fields accepted by :meth:`Turn.from_dict`.
TURN_FIELDS = ("speaker", "text", "timestamp", "turn_id", "metadata")


def to_utc(value: Any, field_name: str = "timestamp") -> datetime | None:
    """Normalize a timestamp to an aware UTC datetime (naive = UTC); None stays None."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInputError(field_name, f"expected datetime or None, got {type(value).__name__}")
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def to_epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def from_epoch(value: float | None) -> datetime | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return datetime.fromtimestamp(value, tz=UTC)


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:16]}"


@dataclass(slots=True)
class Turn:
    """One utterance of a dialogue.

    ``timestamp`` may be None: such turns are ordered by arrival, never dropped by the
    gate's recency rule (their age is unknown), and their relative time words are not
    grounded. ``turn_id`` defaults to a fresh unique id; give your own to make provenance
    point into your logs. ``metadata`` is kept with the entries extracted from the turn
    (an ``image_caption`` / ``blip_caption`` key is folded into the entry text).
    """

    speaker: str
    text: str
    timestamp: datetime | None = None
    turn_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.speaker, str) or not self.speaker.strip():
            raise InvalidInputError("speaker", "must be a non-empty string")
        if not isinstance(self.text, str):
            raise InvalidInputError("text", f"expected str, got {type(self.text).__name__}")
        if "\x00" in self.text:
            raise InvalidInputError("text", "contains a NUL character")
        if not self.text.strip():
            raise InvalidInputError("text", "is empty or whitespace only")
        if len(self.text) > MAX_TEXT_CHARS:
            raise InvalidInputError(
                "text", f"is {len(self.text)} characters; the limit is {MAX_TEXT_CHARS} (split it)"
            )
        self.speaker = self.speaker.strip()
        self.timestamp = to_utc(self.timestamp)
        if self.turn_id is None:
            self.turn_id = new_id("t-")
        elif not isinstance(self.turn_id, str) or not self.turn_id.strip():
            raise InvalidInputError("turn_id", "must be a non-empty string or None")
        if not isinstance(self.metadata, Mapping):
            raise InvalidInputError("metadata", f"expected a dict, got {type(self.metadata).__name__}")
        self.metadata = dict(self.metadata)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        """Build a Turn from a dict; unknown keys are rejected (a typo would lose data)."""
        unknown = set(data) - set(TURN_FIELDS)
        if unknown:
            raise InvalidInputError(
                "turn", f"unknown fields {sorted(unknown)}; put extra data under 'metadata'"
            )
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        return {
            "speaker": self.speaker,
            "text": self.text,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "turn_id": self.turn_id,
            "metadata": self.metadata,
        }


@dataclass(slots=True)
class Entry:
    """An atomic, context-independent memory extracted from one or more turns.

    ``text`` is the restatement (pronouns resolved to names, relative time grounded to
    absolute dates). ``source_turn_ids`` is the provenance: every turn this entry stands
    for, including turns MERGEd into it later. ``timestamp`` is refreshed on MERGE (paper);
    ``first_timestamp`` keeps when the fact was first stated.
    """

    id: str
    text: str
    keywords: list[str] = field(default_factory=list)
    persons: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    location: str | None = None
    topic: str | None = None
    timestamp: datetime | None = None
    first_timestamp: datetime | None = None
    embedding: np.ndarray | None = None
    source_turn_ids: list[str] = field(default_factory=list)
    speaker: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    user_id: str = "default"
    agent_id: str | None = None
    session_id: str | None = None
    #: Monotonic insertion order in the store (ties and timestamp-less ordering).
    seq: int = 0

    def to_dict(self, *, with_embedding: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "keywords": list(self.keywords),
            "persons": list(self.persons),
            "entities": list(self.entities),
            "location": self.location,
            "topic": self.topic,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "first_timestamp": self.first_timestamp.isoformat() if self.first_timestamp else None,
            "source_turn_ids": list(self.source_turn_ids),
            "speaker": self.speaker,
            "metadata": dict(self.metadata),
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "seq": self.seq,
        }
        if with_embedding and self.embedding is not None:
            out["embedding"] = [float(x) for x in self.embedding]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Entry:
        d = dict(data)
        emb = d.pop("embedding", None)
        for key in ("timestamp", "first_timestamp"):
            if isinstance(d.get(key), str):
                d[key] = datetime.fromisoformat(d[key])
        entry = cls(**d)
        entry.timestamp = to_utc(entry.timestamp)
        entry.first_timestamp = to_utc(entry.first_timestamp)
        if emb is not None:
            entry.embedding = np.asarray(emb, dtype=np.float32)
        return entry


@dataclass(frozen=True, slots=True)
class UpdateEdge:
    """A persisted LINK: ``dst`` is a newer state of the fact in ``src`` (old -> new)."""

    src: str
    dst: str
    kind: str = "update"
    similarity: float = 0.0
    overlap: float = 0.0
    created_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "dst": self.dst,
            "kind": self.kind,
            "similarity": self.similarity,
            "overlap": self.overlap,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


@dataclass(frozen=True, slots=True)
class Scope:
    """Who a memory belongs to. Reads filter on ``user_id`` and, when given, the others."""

    user_id: str = "default"
    agent_id: str | None = None
    session_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("user_id", "agent_id", "session_id"):
            value = getattr(self, name)
            if name == "user_id" and (not isinstance(value, str) or not value):
                raise InvalidInputError("user_id", "must be a non-empty string")
            if value is not None and not isinstance(value, str):
                raise InvalidInputError(name, f"expected str or None, got {type(value).__name__}")
