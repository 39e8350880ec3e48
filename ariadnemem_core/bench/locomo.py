"""Loading LoCoMo: conversations -> ``Turn`` lists, questions -> validated evidence ids.

Each conversation becomes its own user scope (``user_id = sample_id``) so memories of
different conversations never see each other. A turn's timestamp is its session's
date-time plus 5 s per position in the session: LoCoMo gives one time per session, and
strictly increasing timestamps keep the turn order visible to time-ordered retrieval.

The evidence annotations are not all well-formed (the dev set has ``"D:11:26"``,
``"D8:6; D9:17"`` and ``"D"``) and a few point at turns that do not exist. Ids are repaired
where the intent is unambiguous and skipped otherwise; both are counted and reported, so
recall is never silently computed against ids that cannot be retrieved.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..models import Turn

#: Categories of LoCoMo questions (5 = adversarial, reported separately).
CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
#: Seconds added per turn index inside a session (keeps the order in the timestamps).
TURN_STEP_S = 5
#: The format of ``session_N_date_time`` values, e.g. ``"1:56 pm on 8 May, 2023"``.
SESSION_TIME_FORMAT = "%I:%M %p on %d %B, %Y"

_CANONICAL = re.compile(r"D\d+:\d+")
#: ``D:11:26`` / ``D 11 : 26`` / ``d11:26``: a dialogue id with stray separators.
_LOOSE = re.compile(r"[Dd]\s*:?\s*(\d+)\s*:\s*(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")


@dataclass(slots=True)
class RepairCounts:
    """What evidence validation did. Strings are the raw annotation entries."""

    #: Raw strings that were not a canonical ``D<s>:<t>`` id.
    malformed_strings: int = 0
    #: Malformed strings turned into one or more canonical ids (``D:11:26``, ``"a; b"``).
    repaired_strings: int = 0
    #: Of those, strings that held several ids and were split.
    split_strings: int = 0
    #: Malformed strings with no recoverable id (e.g. ``"D"``): skipped.
    skipped_malformed: int = 0
    #: Well-formed (or repaired) ids that are not a dia_id of the conversation: skipped.
    skipped_nonexistent: int = 0
    #: Questions left with no valid evidence id (excluded from recall means).
    questions_without_evidence: int = 0

    def add(self, other: RepairCounts) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(slots=True)
class Question:
    """One LoCoMo question. ``answer`` is kept for answer-level benches only; the
    retrieval benches never write it anywhere."""

    qid: str
    question: str
    category: int
    evidence: list[str]
    raw_evidence: list[str]
    answer: Any = field(default=None, repr=False)
    adversarial_answer: Any = field(default=None, repr=False)

    @property
    def scored(self) -> bool:
        """Whether the question counts in recall means (it has valid evidence)."""
        return bool(self.evidence)


@dataclass(slots=True)
class Conversation:
    """One LoCoMo sample: its turns in order and its questions."""

    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]
    repair: RepairCounts = field(default_factory=RepairCounts)

    @property
    def user_id(self) -> str:
        return self.sample_id

    @property
    def turn_ids(self) -> set[str]:
        return {t.turn_id for t in self.turns if t.turn_id}


@dataclass(slots=True)
class Dataset:
    path: str
    conversations: list[Conversation]
    repair: RepairCounts

    @property
    def n_turns(self) -> int:
        return sum(len(c.turns) for c in self.conversations)

    @property
    def n_questions(self) -> int:
        return sum(len(c.questions) for c in self.conversations)


def parse_session_time(value: str) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` -> naive datetime (read as UTC by ``Turn``).

    Falls back to dateutil's fuzzy parser for other spellings; None if unparseable (the
    turns then carry no timestamp rather than a wrong one).
    """
    text = " ".join(str(value).split())
    try:
        return datetime.strptime(text, SESSION_TIME_FORMAT)
    except ValueError:
        pass
    try:
        from dateutil import parser as dateparser

        return dateparser.parse(text.replace(" on ", " "), fuzzy=True)
    except (ValueError, OverflowError):
        return None


def repair_evidence_id(raw: str) -> list[str] | None:
    """Canonical ids in one raw evidence string, or None if none is recoverable.

    ``"D1:3"`` -> ``["D1:3"]``; ``" D1:3 "`` / ``"D:11:26"`` -> one id; ``"D8:6; D9:17"``
    -> two ids; ``"D"`` -> None. Splitting happens on ``;``, ``,`` and whitespace between
    ids; a piece that is not an id makes the whole string unrecoverable (ambiguous).
    """
    text = str(raw).strip()
    if _CANONICAL.fullmatch(text):
        return [text]
    pieces = [p for p in re.split(r"[;,]|\s+(?=[Dd])", text) if p.strip()]
    out: list[str] = []
    for piece in pieces:
        m = _LOOSE.fullmatch(piece.strip())
        if m is None:
            return None
        out.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return out or None


def validate_evidence(raw: Sequence[Any], valid_ids: set[str]) -> tuple[list[str], RepairCounts]:
    """Repair, dedupe and check a question's evidence list against the conversation."""
    counts = RepairCounts()
    out: list[str] = []
    for item in raw:
        text = str(item)
        ids = repair_evidence_id(text)
        if not _CANONICAL.fullmatch(text):
            counts.malformed_strings += 1
            if ids is None:
                counts.skipped_malformed += 1
            else:
                counts.repaired_strings += 1
                if len(ids) > 1:
                    counts.split_strings += 1
        for tid in ids or []:
            if tid not in valid_ids:
                counts.skipped_nonexistent += 1
            elif tid not in out:
                out.append(tid)
    return out, counts


def _session_numbers(conv: Mapping[str, Any]) -> list[int]:
    nums = []
    for key, value in conv.items():
        m = _SESSION_KEY.fullmatch(key)
        if m and isinstance(value, list):
            nums.append(int(m.group(1)))
    return sorted(nums)


def load_turns(conv: Mapping[str, Any]) -> list[Turn]:
    """The conversation's turns in session order, with per-turn timestamps and captions.

    Sessions that have a ``session_N_date_time`` but no ``session_N`` list are ignored.
    """
    turns: list[Turn] = []
    for n in _session_numbers(conv):
        start = parse_session_time(conv.get(f"session_{n}_date_time", "") or "")
        for i, raw in enumerate(conv[f"session_{n}"]):
            text = str(raw.get("text") or "").strip()
            caption = raw.get("blip_caption")
            metadata: dict[str, Any] = {}
            if caption:
                metadata["blip_caption"] = str(caption)
            if not text:
                if not caption:
                    continue  # nothing to remember
                text = f"[shared image: {caption}]"
            ts = start + timedelta(seconds=TURN_STEP_S * i) if start is not None else None
            turns.append(Turn(str(raw["speaker"]), text, ts, str(raw["dia_id"]).strip(), metadata))
    return turns


def load_conversation(sample: Mapping[str, Any]) -> Conversation:
    conv = sample["conversation"]
    sample_id = str(sample["sample_id"])
    turns = load_turns(conv)
    valid = {t.turn_id for t in turns if t.turn_id}
    repair = RepairCounts()
    questions: list[Question] = []
    for i, qa in enumerate(sample.get("qa", [])):
        evidence, counts = validate_evidence(qa.get("evidence") or [], valid)
        repair.add(counts)
        if not evidence:
            repair.questions_without_evidence += 1
        questions.append(Question(
            qid=f"{sample_id}:q{i}",
            question=str(qa["question"]),
            category=int(qa["category"]),
            evidence=evidence,
            raw_evidence=[str(e) for e in qa.get("evidence") or []],
            answer=qa.get("answer"),
            adversarial_answer=qa.get("adversarial_answer"),
        ))
    return Conversation(sample_id, (str(conv.get("speaker_a", "")), str(conv.get("speaker_b", ""))),
                        turns, questions, repair)


def sample_ids(path: str | Path) -> list[str]:
    """The sample ids in a LoCoMo file, in file order (for validating user input early)."""
    with Path(path).open(encoding="utf-8") as fh:
        data = json.load(fh)
    return [str(s["sample_id"]) for s in ([data] if isinstance(data, dict) else data)]


def load_locomo(path: str | Path, conversations: Iterable[str] | None = None) -> Dataset:
    """Read a LoCoMo JSON file (a list of samples); optionally keep only some sample ids.

    Unknown ids in ``conversations`` raise ValueError (a typo should not run an empty bench).
    """
    with Path(path).open(encoding="utf-8") as fh:
        data = json.load(fh)
    if isinstance(data, dict):  # a single sample
        data = [data]
    wanted = list(conversations) if conversations else None
    if wanted is not None:
        known = {str(s["sample_id"]) for s in data}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise ValueError(f"unknown conversation ids {unknown}; the file has {sorted(known)}")
        order = {w: i for i, w in enumerate(wanted)}
        data = sorted((s for s in data if str(s["sample_id"]) in order), key=lambda s: order[str(s["sample_id"])])
    convs = [load_conversation(s) for s in data]
    total = RepairCounts()
    for c in convs:
        total.add(c.repair)
    return Dataset(str(path), convs, total)
