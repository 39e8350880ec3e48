"""The data model: what flows from turns to entries to the memory graph.

``Turn`` is the input unit (one utterance), ``Entry`` the stored atomic memory, and
``UpdateEdge`` the persisted ``old -> new`` LINK that records a state update.
Timestamps are timezone-aware datetimes inside the library: naive datetimes are read as
UTC (documented; never as the machine's local time, which would make one store order
turns differently on two machines). A turn keeps the offset it was given, its speaker's
calendar for grounding "tomorrow"; entries are stored and read back in UTC (the same
instant). ISO 8601 strings are parsed the same way, so ``Turn.from_dict(turn.to_dict())``
round-trips.

Input hygiene happens here, at construction, because a turn is persisted as *pending*
before it is processed: anything that could later fail to encode (a lone surrogate) or
break a storage layer would otherwise sit in the pending table and fail every later
``flush``. So a ``Turn`` either holds text that every layer (SQLite, FTS5, chromadb
metadata, JSON, LLM prompts) accepts, or it raises :class:`InvalidInputError`.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np

from .errors import InvalidInputError, NotFoundError
from .limits import MAX_TEXT_CHARS as MAX_TEXT_CHARS  # re-exported: part of the documented API
from .limits import SURROGATE, check_metadata, check_name

#: Fields accepted by :meth:`Turn.from_dict`.
TURN_FIELDS = ("speaker", "text", "timestamp", "turn_id", "metadata")

#: Control characters removed from turn text and speaker names: C0 except tab and newline,
#: DEL and C1. They carry no meaning in dialogue, NUL truncates strings in C-level
#: consumers, and escape sequences would reach LLM prompts. CR, VT and FF become newlines
#: (so "a\r\nb" and "a\rb" keep their line break). Tab and newline are kept.
_CONTROL_TABLE: dict[int, str | None] = {
    **{c: None for c in range(0x20) if c not in (0x09, 0x0A)},
    0x0B: "\n", 0x0C: "\n", 0x0D: "\n",
    0x7F: None,
    **{c: None for c in range(0x80, 0xA0)},
}


def clean_text(text: str) -> str:
    """``text`` with control characters removed (see ``_CONTROL_TABLE``); CRLF -> LF.

    Lone surrogates are *not* handled here (see :func:`check_unicode`): they mean the
    caller decoded bytes wrongly, and silently replacing them would hide that.
    """
    return text.replace("\r\n", "\n").translate(_CONTROL_TABLE)


def check_unicode(value: str, field_name: str) -> None:
    """Reject lone surrogates ('\\ud800'): they cannot be encoded as UTF-8, so SQLite would
    refuse them at commit time, long after ``add`` returned (a pending turn that can never
    be committed)."""
    m = SURROGATE.search(value)
    if m:
        raise InvalidInputError(
            field_name,
            f"contains a lone surrogate {m.group()!r} at position {m.start()} (not valid Unicode; "
            "decode your bytes with errors='replace')",
        )


def to_utc(value: Any, field_name: str = "timestamp") -> datetime | None:
    """Normalize a timestamp to an aware UTC datetime; None stays None.

    Accepts a ``datetime`` (naive = UTC, aware = converted) or an ISO 8601 string (the
    form ``Turn.to_dict`` writes; naive = UTC as well). Anything else, an unparseable
    string, or an aware time that leaves datetime's range once moved to UTC (9999-12-31
    23:00-05:00) raises :class:`InvalidInputError` naming ``field_name``. Epoch numbers are
    rejected: seconds vs milliseconds is ambiguous.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidInputError(
                field_name, f"unparseable timestamp {value[:40]!r}; expected ISO 8601 (2023-05-08T13:56:00Z)"
            ) from None
    if not isinstance(value, datetime):
        raise InvalidInputError(
            field_name, f"expected datetime, ISO 8601 string or None, got {type(value).__name__}"
        )
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise InvalidInputError(field_name, f"{value.isoformat()} is out of range in UTC") from None


def to_aware(value: Any, field_name: str = "timestamp") -> datetime | None:
    """Like :func:`to_utc` (naive = UTC, the same checks), but an aware time keeps its own
    offset: a turn's offset is the speaker's calendar, so "tomorrow" said at 23:30 in New
    York (``-05:00``) is the next day there, not the day after next in UTC. It is the same
    instant either way (comparisons and storage, in epoch seconds, are unchanged)."""
    utc = to_utc(value, field_name)  # every check; raises on what it rejects
    if isinstance(value, str):
        value = datetime.fromisoformat(value.strip())
    offset = value.utcoffset() if isinstance(value, datetime) else None
    # A fixed offset, not the zone: the instant and the calendar of that moment are what
    # count, and a zone's time in a DST gap would not round-trip through ISO text.
    return utc if utc is None or offset is None else utc.astimezone(timezone(offset))


#: ``Entry.metadata`` key: the speaker's UTC offset in seconds, when the turn gave one other
#: than UTC (an entry's ``timestamp`` is UTC; its day for the speaker is :func:`local_time`).
UTC_OFFSET_KEY = "utc_offset_s"


def offset_of(when: datetime | None) -> dict[str, int]:
    """The ``Entry.metadata`` item that keeps ``when``'s UTC offset (none for UTC)."""
    offset = when.utcoffset() if when is not None else None
    return {UTC_OFFSET_KEY: int(offset.total_seconds())} if offset else {}


def local_time(entry: Entry) -> datetime | None:
    """When the entry was said, in its speaker's own offset (``UTC_OFFSET_KEY``): the
    calendar its relative dates were grounded in."""
    if entry.timestamp is None:
        return None
    seconds = entry.metadata.get(UTC_OFFSET_KEY)
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not -86_400 < seconds < 86_400:
        return entry.timestamp
    try:
        return entry.timestamp.astimezone(timezone(timedelta(seconds=seconds)))
    except (OverflowError, ValueError):  # year 1 or 9999 pushed past the calendar's edge
        return entry.timestamp


def to_epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def from_epoch(value: float | None) -> datetime | None:
    """Epoch seconds back to an aware UTC datetime.

    Clamped to datetime's range: a float epoch has ~30 us resolution near year 9999, so
    9999-12-31T23:59:59.999999 is stored as an epoch that rounds *past* datetime.max, and
    an unclamped read would then fail on every access to that entry.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, ValueError, OSError):
        return datetime.max.replace(tzinfo=UTC) if value > 0 else datetime.min.replace(tzinfo=UTC)


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:16]}"


#: Prefix of the id a read gives a turn still waiting for its window (``pending:<hash>``):
#: a fact of the evidence graph, not an entry (defined with the error that explains it).
PENDING_PREFIX = NotFoundError.PENDING_PREFIX


@dataclass(slots=True)
class Turn:
    """One utterance of a dialogue.

    ``timestamp`` may be None: such turns are ordered by arrival, never dropped by the
    gate's recency rule (their age is unknown), and their relative time words are not
    grounded. A naive datetime is read as UTC (not local time); an ISO 8601 string is
    parsed. Any year datetime can hold is accepted (relative time words that would leave
    that range, "tomorrow" on 9999-12-31, are left ungrounded). ``turn_id`` defaults to a
    fresh unique id; give your own to make provenance point into your logs. ``metadata`` is
    kept with the entries extracted from the turn (an ``image_caption`` / ``blip_caption``
    key is folded into the entry text; ``"note": True`` marks a note written about the
    conversation, such as an agent's memory, whose entries are not prefixed with the
    speaker's name); it must be JSON-serializable.

    Validation (:class:`InvalidInputError` naming the field, nothing stored): ``text`` must
    be a ``str`` (``bytes`` are not decoded for you: the encoding is yours to know) of at
    most ``MAX_TEXT_CHARS`` characters, with no lone surrogates, and not empty or
    whitespace-only *after* control characters are removed. Control characters (NUL, ESC,
    BEL, DEL, C1, ...) are silently stripped from ``text`` and ``speaker``; tab and newline
    are kept, CR/VT/FF become newlines.

    Attributes:
        speaker: who said it (a non-empty name; "you" in the text resolves to the other party).
        text: what was said.
        timestamp: when it was said (None: unknown). Naive = UTC; an aware time keeps its
            offset, so relative days ("tomorrow") are grounded in the speaker's calendar.
        turn_id: the provenance id entries cite (default: a fresh unique id).
        metadata: caller data kept with the turn's entries (JSON-serializable).
    """

    speaker: str
    text: str
    timestamp: datetime | None = None
    turn_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.speaker, str):
            raise InvalidInputError("speaker", f"expected str, got {type(self.speaker).__name__}")
        check_unicode(self.speaker, "speaker")
        # One line: a newline in a name would start a forged line wherever it is printed.
        self.speaker = check_name(clean_text(self.speaker), "speaker") or ""
        if not self.speaker:
            raise InvalidInputError("speaker", "must be a non-empty string")
        if not isinstance(self.text, str):
            hint = " (decode it first, e.g. data.decode('utf-8'))" if isinstance(self.text, bytes | bytearray) else ""
            raise InvalidInputError("text", f"expected str, got {type(self.text).__name__}{hint}")
        # Length first: the limit bounds the work of every check below.
        if len(self.text) > MAX_TEXT_CHARS:
            raise InvalidInputError(
                "text", f"is {len(self.text)} characters; the limit is {MAX_TEXT_CHARS} (split it)"
            )
        check_unicode(self.text, "text")
        self.text = clean_text(self.text)
        if not self.text.strip():
            raise InvalidInputError("text", "is empty or whitespace only (after removing control characters)")
        self.timestamp = to_aware(self.timestamp)
        if self.turn_id is None:
            self.turn_id = new_id("t-")
        elif not isinstance(self.turn_id, str) or not self.turn_id.strip():
            raise InvalidInputError("turn_id", "must be a non-empty string or None")
        check_name(self.turn_id, "turn_id")
        check_unicode(self.turn_id, "turn_id")
        if not isinstance(self.metadata, Mapping):
            raise InvalidInputError("metadata", f"expected a dict, got {type(self.metadata).__name__}")
        self.metadata = dict(self.metadata)
        # The turn is persisted as JSON before processing; check it encodes now rather
        # than fail inside the store (or, for a surrogate, at every later commit).
        check_metadata(self.metadata)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Turn:
        """Build a Turn from a dict (``timestamp`` may be an ISO 8601 string).

        Unknown keys are rejected, not moved into ``metadata``: a typo ("timestmap") would
        otherwise silently lose the value's meaning. Extra data belongs under ``metadata``.

        Args:
            data: the turn's fields (``speaker`` and ``text`` required).

        Returns:
            The validated turn.

        Raises:
            InvalidInputError: a missing, unknown or invalid field.
        """
        unknown = sorted(set(data) - set(TURN_FIELDS), key=str)
        if unknown:
            raise InvalidInputError(
                str(unknown[0]), f"unknown turn field(s) {unknown}; known fields are {list(TURN_FIELDS)}, "
                "put extra data under 'metadata'"
            )
        for required in ("speaker", "text"):
            if required not in data:
                raise InvalidInputError(required, "is required")
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        """The turn as JSON-able fields (``timestamp`` in ISO 8601); :meth:`from_dict` reverses it.

        Returns:
            The fields by name.
        """
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

    Attributes:
        id: the entry's id.
        text: the context-independent restatement.
        keywords: lowercased content words (coarsening overlap, counters).
        persons: people the entry involves (the speaker first).
        entities: named things, places, organizations, titles.
        location: where it happened, when stated.
        topic: a coarse topic label, when one fits.
        timestamp: when it was (last) stated.
        first_timestamp: when it was first stated.
        embedding: its vector (None until embedded; every stored entry has one).
        source_turn_ids: the turns it stands for (provenance).
        speaker: who stated it (None for an entry drawn from several speakers).
        metadata: extractor and caller data (self-stated ``attributes``, captions, ...).
        user_id: whose memory it is.
        agent_id: the agent scope, if any.
        session_id: the session scope, if any.
        seq: arrival order in the store (0 before it is stored).
        superseded_by: the entry stating this fact's newer value, or None (current).
        valid_until: when this state stopped being true (the newer statement's first time).

    Validity (bi-temporal): ``timestamp`` / ``first_timestamp`` say when the fact was stated;
    ``superseded_by`` and ``valid_until`` say what replaced it and when, or are None while it
    is the latest state. They are read back from the persisted update edges, so deleting
    the newer entry makes the older one current again.
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
    #: Kept out of ``repr``: 384 numbers would bury the fields a reader prints an entry for.
    embedding: np.ndarray | None = field(default=None, repr=False)
    source_turn_ids: list[str] = field(default_factory=list)
    speaker: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    user_id: str = "default"
    agent_id: str | None = None
    session_id: str | None = None
    #: Monotonic insertion order in the store (ties and timestamp-less ordering).
    seq: int = 0
    #: The entry that states this fact's newer value (an update edge), or None.
    superseded_by: str | None = None
    #: When this state stopped being true: when the newer statement was made (None: current,
    #: or superseded by a statement without a time).
    valid_until: datetime | None = None

    @property
    def vector(self) -> np.ndarray:
        """The embedding, for code that runs after embedding (a stored entry always has one).

        Raises:
            ValueError: the entry has not been embedded yet.
        """
        if self.embedding is None:
            raise ValueError(f"entry {self.id} has no embedding yet")
        return self.embedding

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
            "superseded_by": self.superseded_by,
            "valid_until": self.valid_until.isoformat() if self.valid_until else None,
        }
        if with_embedding and self.embedding is not None:
            out["embedding"] = [float(x) for x in self.embedding]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Entry:
        """An entry from :meth:`to_dict` output (ISO timestamps, an embedding list or none).

        Args:
            data: the entry's fields.

        Returns:
            The entry, timestamps in UTC.
        """
        d = dict(data)
        emb = d.pop("embedding", None)
        for key in ("timestamp", "first_timestamp", "valid_until"):
            if isinstance(d.get(key), str):
                d[key] = datetime.fromisoformat(d[key])
        entry = cls(**d)
        entry.timestamp = to_utc(entry.timestamp)
        entry.first_timestamp = to_utc(entry.first_timestamp)
        entry.valid_until = to_utc(entry.valid_until)
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
    """Who a memory belongs to. Reads filter on ``user_id`` and, when given, the others.

    Attributes:
        user_id: the user (required, non-empty): the hard partition of the memory.
        agent_id: an agent inside the user's memory, or None for every agent.
        session_id: a session inside the user's memory, or None for every session.
    """

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
            if value is not None:
                check_unicode(value, name)  # hashed into index names: must encode as UTF-8
                check_name(value, name)

    def matches(self, entry: Entry) -> bool:
        """Whether ``entry`` belongs to this scope: the same user and, when this scope
        names them, the same agent and session (the filter every read applies).

        Args:
            entry: a stored entry.

        Returns:
            True when the entry may be shown to a reader of this scope.
        """
        return (entry.user_id == self.user_id
                and (self.agent_id is None or entry.agent_id == self.agent_id)
                and (self.session_id is None or entry.session_id == self.session_id))
