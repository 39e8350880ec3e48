"""Phase I, step 1: the entropy-aware gate (the paper's Phi_gate).

Two kinds of content carry no new information. *Low-information* entries (thanks,
acknowledgements, sign-offs, "hope this helps") are dropped before storage by
:func:`low_information`, and a turn whose entries are all such is gated. *Redundant* turns
are dropped by :func:`gate_window`:
a turn is dropped only when its *nearest* stored memory is both semantically redundant
(cosine > lambda_red) and recent (less than delta_short apart). A near-identical statement
made long ago passes: long-term recurrence is information (a habit, a repeated event).
Turns already accepted earlier in the same window count as stored memories, so a
repetition inside one window is caught too. A turn or memory without a timestamp has an
unknown age and is never dropped (nothing is lost on missing data).
"""

from __future__ import annotations

import contextlib
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from .config import Config
from .embedding import Embedder
from .models import Entry
from .text import COURTESY_WORDS


@dataclass(frozen=True, slots=True)
class Neighbor:
    """The nearest stored memory of a turn: its id, cosine and timestamp."""

    id: str
    similarity: float
    timestamp: datetime | None


@dataclass(frozen=True, slots=True)
class GateDecision:
    keep: bool
    reason: str  # "novel" | "long-term recurrence" | "no timestamp" | "redundant" | "gating off"
    nearest: Neighbor | None = None


def decide(turn_ts: datetime | None, nearest: Neighbor | None, config: Config) -> GateDecision:
    """Phi_gate for one turn given its nearest stored memory."""
    if nearest is None or nearest.similarity <= config.lambda_red:
        return GateDecision(True, "novel", nearest)
    if turn_ts is None or nearest.timestamp is None:
        return GateDecision(True, "no timestamp", nearest)
    age = abs((turn_ts - nearest.timestamp).total_seconds())
    if age < config.delta_short_s:
        return GateDecision(False, "redundant", nearest)
    return GateDecision(True, "long-term recurrence", nearest)


def gate_window(
    vectors: np.ndarray,
    timestamps: Sequence[datetime | None],
    turn_ids: Sequence[str],
    stored_nearest: Sequence[Neighbor | None],
    config: Config,
    answered: Sequence[str | None] | None = None,
) -> list[GateDecision]:
    """Decide a whole window: stored neighbours plus turns kept earlier in the window.

    ``answered[i]``: the id of the turn whose question turn ``i`` answers, if any. A
    reply is never redundant with the question it answers (its vector carries that
    question, see ``context_embedding``, and "Where?" / "In Lisbon." are two pieces of
    information), so that turn is not compared with it.
    """
    if not config.enable_gating:
        return [GateDecision(True, "gating off") for _ in turn_ids]
    decisions: list[GateDecision] = []
    kept: list[int] = []
    for i, ts in enumerate(timestamps):
        best = stored_nearest[i]
        others = [k for k in kept if answered is None or turn_ids[k] != answered[i]]
        if others:
            sims = vectors[others] @ vectors[i]
            j = int(np.argmax(sims))
            if best is None or float(sims[j]) > best.similarity:
                k = others[j]
                best = Neighbor(turn_ids[k], float(sims[j]), timestamps[k])
        decision = decide(ts, best, config)
        decisions.append(decision)
        if decision.keep:
            kept.append(i)
    return decisions


# --------------------------------------------------------------------------- low information
#: What phatic talk sounds like: acknowledgements, thanks, praise without content, offers of
#: further help and sign-offs, in both chat and assistant register. Only their meaning is
#: used (an entry close to *any* of them, with no content of its own, is phatic), so they
#: are general forms rather than phrases taken from a data set.
PHATIC_PROTOTYPES: tuple[str, ...] = (
    "Thanks!", "Thank you so much, I really appreciate it.", "You're welcome.", "No problem at all.",
    "Okay, got it.", "Noted.", "Sure, sounds good.", "That's great to hear!", "Wow, that's awesome!",
    "That's so cool!", "Haha, yeah, totally.", "I agree, absolutely.", "What a coincidence!",
    "Good luck!", "Take care, talk to you soon!", "Bye, have a great day!", "Hi! How are you doing?",
    "Great question!", "I hope this helps!", "Happy to help!", "Glad I could help.",
    "Let me know if you have any other questions.", "Feel free to ask if you need anything else.",
    "If you need more details, just let me know!",
    "If you have any further questions or need more help, feel free to ask!",
    "Let me know if you need any adjustments or additional details.",
    "Feel free to reach out if you need further assistance.", "Good luck with your project!",
)
_PROTOTYPE_CACHE: weakref.WeakKeyDictionary[Embedder, np.ndarray] = weakref.WeakKeyDictionary()
#: A value a fact hangs on: a digit (numbers, dates, times, grounded dates), code, a URL.
_SPECIFIC_RE = re.compile(r"\d|`|https?://|[{}<>=_]")


def phatic_prototypes(embedder: Embedder) -> np.ndarray:
    """The prototypes' vectors for ``embedder``, embedded once per embedder object."""
    try:
        return _PROTOTYPE_CACHE[embedder]
    except (KeyError, TypeError):
        pass
    vectors = np.asarray(embedder.embed(list(PHATIC_PROTOTYPES)), dtype=np.float32)
    # An embedder that cannot be weakly referenced is not cached: embed every time.
    with contextlib.suppress(TypeError):
        _PROTOTYPE_CACHE[embedder] = vectors
    return vectors


_ROLE_RE = re.compile(r"\b[Tt]he (?:user|assistant)(?:'s)?\b")
_SPACES_RE = re.compile(r"\s+")
_SPACE_BEFORE_PUNCT_RE = re.compile(r"\s+([,.!?;:])")


def bare_text(entry: Entry) -> str:
    """The entry's text without who said it: the "Speaker: " prefix, the participants'
    names and role labels removed. Names weigh heavily in a sentence vector ("Tim: No
    problem!" is only 0.52 from "No problem at all."), and phatic talk is phatic whoever
    says it, so the phatic test embeds this form."""
    text = entry.text
    head, sep, rest = text.partition(": ")
    if sep and (head in entry.persons or _ROLE_RE.fullmatch(head)):
        text = rest
    for name in sorted(entry.persons, key=len, reverse=True):
        text = re.sub(r"\b" + re.escape(name) + r"(?:'s)?\b", "", text)
    text = _ROLE_RE.sub("", text)
    return _SPACE_BEFORE_PUNCT_RE.sub(r"\1", _SPACES_RE.sub(" ", text)).strip()


def content_words(entry: Entry) -> list[str]:
    """The entry's keywords (names and stopwords already out) less courtesy words."""
    return [k for k in entry.keywords if k not in COURTESY_WORDS]


def is_specific(entry: Entry) -> bool:
    """True when the entry names a value: a number or date, code or a URL, a named entity
    or place beyond the speakers, an attribute, or an attached image."""
    return bool(entry.entities or entry.location or entry.metadata.get("attributes")
                or "[shared image:" in entry.text or _SPECIFIC_RE.search(entry.text))


#: Where a sentence splits into clauses for the phatic test: "Bye, I quit!" is two.
_CLAUSE_SPLIT_RE = re.compile(r"\s*(?:[,;:.!?\u2026]+|\s[-\u2013\u2014]+)\s*")


def clauses(text: str) -> list[str]:
    """The clauses of a short text, split at punctuation and dashes, empty ones left out."""
    return [c for c in _CLAUSE_SPLIT_RE.split(text) if c.strip()]


def low_information(entries: Sequence[Entry], embedder: Embedder, config: Config,
                    answers: Sequence[bool] | None = None) -> list[bool]:
    """Per entry, whether it is phatic: no specific value (:func:`is_specific`), at most
    ``Config.low_info_max_content_words`` content words (:func:`content_words`), and every
    clause of its :func:`bare_text` within ``Config.low_info_similarity`` (cosine) of a
    phatic prototype.

    All must hold, so a short statement with content ("I'm excited!", "Yes, twice.") stays:
    it is far from every prototype. Each clause is judged on its own: a courtesy joined to
    a fact by a comma ("No problem, I'm a nurse.", "Bye, I quit!") reads as phatic as a
    whole sentence, and the fact is in the other clause. An entry of a reply to a question
    (``answers``: "Okay, go ahead." to "Transfer the deposit?") is never phatic: it is
    the answer. Only the few candidates that pass the lexical tests are embedded (one
    batch); their stored vectors are not used, because names and a question's context
    (``Config.context_embedding``) dominate them.
    """
    if not (config.enable_gating and config.enable_low_info_gate) or not entries:
        return [False] * len(entries)
    candidates = [i for i, e in enumerate(entries)
                  if len(content_words(e)) <= config.low_info_max_content_words and not is_specific(e)
                  and not (answers is not None and answers[i])]
    out = [False] * len(entries)
    parts = {i: clauses(bare_text(entries[i])) for i in candidates}
    candidates = [i for i in candidates if parts[i]]
    if not candidates:
        return out
    flat = [c for i in candidates for c in parts[i]]
    protos = phatic_prototypes(embedder)
    best = iter((np.asarray(embedder.embed(flat), dtype=np.float32) @ protos.T).max(axis=1))
    for i in candidates:
        out[i] = all([float(next(best)) >= config.low_info_similarity for _ in parts[i]])
    return out


def drop_low_information(per_turn: list[list[Entry]], keep: list[bool], embedder: Embedder,
                         config: Config, stats: dict[str, int],
                         answers: Sequence[bool] | None = None) -> tuple[list[list[Entry]], list[bool]]:
    """Phase I hook: remove phatic entries from each kept turn; a turn left with none is
    gated (``keep`` False). Counts ``gate_low_info`` (turns) and ``gate_low_info_entries``.
    ``answers``: per turn, whether it replies to a question; such a reply is the answer
    when it is a single entry (see :func:`low_information`).

    Returns:
        The turns' remaining entries and the updated keep flags.
    """
    flat = [e for group, k in zip(per_turn, keep, strict=True) if k for e in group]
    # A reply that says one thing is the answer; in a longer one the answer is in its
    # content, and a courtesy that opens or closes it is not.
    replies = None if answers is None else [
        a and len(group) == 1 for group, k, a in zip(per_turn, keep, answers, strict=True) if k for _ in group]
    phatic = iter(low_information(flat, embedder, config, replies))
    groups: list[list[Entry]] = []
    flags: list[bool] = []
    dropped_entries = dropped_turns = 0
    for group, k in zip(per_turn, keep, strict=True):
        if not k:
            groups.append(group)
            flags.append(False)
            continue
        rest = [e for e in group if not next(phatic)]
        dropped_entries += len(group) - len(rest)
        dropped_turns += not rest
        groups.append(rest)
        flags.append(bool(rest))
    stats["gate_low_info"] = dropped_turns
    stats["gate_low_info_entries"] = dropped_entries
    return groups, flags
