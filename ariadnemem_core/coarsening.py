"""Phase I, step 3: conflict-aware coarsening (MERGE / LINK / ADD).

For each new entry, a bounded set of dense candidates (``Config.coarsen_candidates``
nearest stored entries plus the entries added earlier in the same window; never all
pairs) is checked with the paper's three cases:

* sim > lambda_coal and overlap > lambda_ovlp -> MERGE: the same fact again. The old
  entry stays, its timestamp is refreshed and the new entry's provenance is added to it.
* sim > lambda_coal and overlap <= lambda_ovlp -> LINK: the same slot with a different
  value (2 pm -> 3 pm). Both stay, and a persisted edge old -> new records the update.
* otherwise -> ADD.

Overlap is the Jaccard index of the two entries' stemmed keyword sets plus their persons.
Two guards the paper leaves implicit:

* two entries about *different* people (both name persons in their statement, none
  shared) are never a conflict, so they are ADDed ("Caroline loves painting" does not
  update "Melanie loves painting");
* a LINK needs a changed *value* (``Config.link_requires_value_change``): a number, time,
  date, weekday, month, named entity or place that one entry states and the other does
  not. A state update changes a slot's value (2 pm -> 3 pm, Boston -> Denver); two
  paraphrases of small talk ("Melanie, that's a great pic!" / "that photo's amazing!")
  are similar without updating anything, and are ADDed. On LoCoMo dev conversation
  conv-26, 183 of 189 LINKs made without this guard were such pairs, and every spurious
  edge spends evidence budget on a "newer state" (coarsening then cost 1.3 points of
  evidence recall in the ablation).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from .config import Config
from .models import Entry
from .text import MONTHS, WEEKDAYS, stem


class Action(StrEnum):
    MERGE = "merge"
    LINK = "link"
    ADD = "add"


@dataclass(frozen=True, slots=True)
class CoarsenDecision:
    action: Action
    target_id: str | None = None
    similarity: float = 0.0
    overlap: float = 0.0


def terms(entry: Entry) -> frozenset[str]:
    """The comparable vocabulary of an entry: stemmed keywords and lowercased persons."""
    return frozenset(stem(k) for k in entry.keywords) | frozenset(p.lower() for p in entry.persons)


def keyword_overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard index; two empty vocabularies overlap fully (nothing tells them apart)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _subjects(entry: Entry) -> set[str]:
    """Persons the entry's statement is about: named in its text, not merely its speaker
    ("Leo: the meeting is at 2 pm" is about the meeting, not about Leo)."""
    text = entry.text
    if entry.speaker and text.startswith(f"{entry.speaker}: "):
        text = text[len(entry.speaker) + 2 :]
    lowered = text.lower()
    return {p.lower() for p in entry.persons if p.lower() in lowered}


def different_subjects(a: Entry, b: Entry) -> bool:
    pa, pb = _subjects(a), _subjects(b)
    return bool(pa) and bool(pb) and not (pa & pb)


_VALUE_TOKEN = re.compile(r"\b\w*\d\w*\b")
_CALENDAR = frozenset(MONTHS) | frozenset(WEEKDAYS)
_WORD = re.compile(r"[a-z]+")


def _statement(entry: Entry) -> str:
    """The entry's text without a leading ``"Speaker: "``, lowercased."""
    text = entry.text
    if entry.speaker and text.startswith(f"{entry.speaker}: "):
        text = text[len(entry.speaker) + 2 :]
    return text.lower()


def value_terms(entry: Entry) -> frozenset[str]:
    """The values an entry states: tokens with digits (times, dates, amounts, numbers),
    weekday and month names, and the named entities and location that appear in its text.
    Persons are excluded: who the entry is about is its subject, not a value."""
    text = _statement(entry)
    values = set(_VALUE_TOKEN.findall(text))
    values |= _CALENDAR.intersection(_WORD.findall(text))
    named = [*entry.entities, *([entry.location] if entry.location else [])]
    values |= {n.lower() for n in named if n and n.lower() in text}
    return frozenset(values - {p.lower() for p in entry.persons})


def value_changed(a: Entry, b: Entry) -> bool:
    """True when the two entries state different values (the symmetric difference of their
    :func:`value_terms` is not empty): what a state update looks like."""
    return bool(value_terms(a) ^ value_terms(b))


def decide(new: Entry, candidates: Sequence[tuple[Entry, float]], config: Config) -> CoarsenDecision:
    """The paper's three cases against bounded candidates ``(entry, cosine)``.

    A duplicate anywhere among the similar candidates wins (MERGE); otherwise the most
    similar conflicting candidate is LINKed.
    """
    if not config.enable_coarsening:
        return CoarsenDecision(Action.ADD)
    new_terms = terms(new)
    similar = sorted(
        ((c, s) for c, s in candidates if s > config.lambda_coal and c.id != new.id
         and not different_subjects(new, c)),
        key=lambda cs: -cs[1],
    )
    if not similar:
        return CoarsenDecision(Action.ADD)
    scored = [(c, s, keyword_overlap(new_terms, terms(c))) for c, s in similar]
    for cand, sim, ovl in scored:
        # A MERGE drops the new text, so it needs the same values too: "Parcel p1x5
        # arrived" and "Parcel p2x5 arrived" share every keyword but state different ids.
        if ovl > config.lambda_ovlp and not value_changed(cand, new):
            return CoarsenDecision(Action.MERGE, cand.id, sim, ovl)
    if config.link_requires_value_change:
        scored = [(c, s, o) for c, s, o in scored if value_changed(c, new)]
        if not scored:
            return CoarsenDecision(Action.ADD)
    cand, sim, ovl = scored[0]
    return CoarsenDecision(Action.LINK, cand.id, sim, ovl)


def merge_into(old: Entry, new: Entry) -> Entry:
    """MERGE: keep ``old``, refresh its timestamp, add ``new``'s provenance and vocabulary."""
    for tid in new.source_turn_ids:
        if tid not in old.source_turn_ids:
            old.source_turn_ids.append(tid)
    for name in ("keywords", "persons", "entities"):
        have = getattr(old, name)
        seen = {x.lower() for x in have}
        have.extend(x for x in getattr(new, name) if x.lower() not in seen)
    if new.timestamp is not None and (old.timestamp is None or new.timestamp > old.timestamp):
        old.timestamp = new.timestamp
    if old.first_timestamp is None:
        old.first_timestamp = new.first_timestamp or new.timestamp
    merged_from = old.metadata.setdefault("merged_from", [])
    merged_from.append(new.id)
    return old
