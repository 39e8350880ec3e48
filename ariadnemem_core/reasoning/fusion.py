"""Fusion: the channels' hits become one ranked list of scored candidates.

Every candidate is scored by how well it matches, its cosine to the question (blended
with its cosine to the question without the persons it names, ``nameless_query_weight``)
plus a normalised BM25 bonus (``lexical_weight``), or, when higher, how well the whole
message it stands for matched (the message channel), then by the weights that rank matches
against each other, each a small function of its own (:data:`WEIGHTS`):

* ``question``: a memory that only asks a question (:func:`only_asks`),
* ``assistant``: a memory the assistant said (``assistant_weight``),
* ``period``: a memory said within the period the question names ranks higher.

A reranker is one more function in :data:`WEIGHTS` and one ``Config`` entry.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from ..config import Config
from ..evidence import Role
from ..models import Entry
from .channels import Hit
from .pool import Candidate
from .query import Question

#: The channels whose hits are cosines (their candidates join in this order, then lexical's);
#: "pending" holds the turns that wait for their window (``pending.py``), "pending_terms"
#: the share of the question's terms each says.
COSINE_CHANNELS = ("dense", "period", "pending")

Weight = Callable[[Candidate, Question, Config], float]


#: How a sentence that asks opens, after a speaker's name and an interjection: a question
#: word, an auxiliary or a request's modal ("What's Melanie's best camping memory?", "hmm,
#: does the user need to restart the service?", "Can the assistant help with that?").
_ASKING_OPENER = re.compile(
    r"^(?:[\w .'-]{1,30}: )?[\"“]?"
    r"(?:(?:hmm+|um+|uh+|ok(?:ay)?|so|well|oh|hey|yeah|right|also|and|but|wait|btw)[,.!]?\s+)*"
    r"(?:what(?:'s)?|when|where|who|whom|whose|why|how|which|is|are|was|were|do|does|did|can|could|would|will|"
    r"shall|should|have|has|had|any|anything|care|isn't|aren't|don't|doesn't|didn't|wanna|got)\b", re.I)


def only_asks(text: str) -> bool:
    """Whether a memory only asks: it ends with "?" and opens as a question. One that
    states before it asks ("The user is moving the launch to May 3, can the assistant
    update the plan?", "Books have such power! Which one is your favourite?") states
    something a question can be answered from, and is not lowered."""
    return text.rstrip().rstrip('"').endswith("?") and bool(_ASKING_OPENER.search(text))


def _asks(c: Candidate, q: Question, cfg: Config) -> float:
    return cfg.question_penalty if only_asks(c.entry.text) else 1.0


def _assistant(c: Candidate, q: Question, cfg: Config) -> float:
    return cfg.assistant_weight if cfg.is_assistant(c.entry.speaker) else 1.0


def _period(c: Candidate, q: Question, cfg: Config) -> float:
    ts = c.entry.timestamp
    if q.period is not None and ts is not None and q.period[0] <= ts.timestamp() < q.period[1]:
        return 1.0 + cfg.period_bonus
    return 1.0


#: The weights, applied in this order to every candidate's match score.
WEIGHTS: dict[str, Weight] = {"question": _asks, "assistant": _assistant, "period": _period}


def fuse(entries: Mapping[str, Entry], drawn: Mapping[str, list[Hit]], q: Question,
         config: Config) -> list[Candidate]:
    """The union of the channels' hits, scored and sorted best first (ties keep the order
    in which the hits came: dense, period, then lexical).

    Args:
        entries: the hit memories by id (a hit whose memory is gone is skipped).
        drawn: each channel's hits (``channels.draw``).
        q: the question.
        config: ``lexical_weight``, the weights' knobs.

    Returns:
        The candidates, best first.
    """
    cosine = [h for name in COSINE_CHANNELS for h in drawn.get(name, ())]
    source = {h.entry_id: name for name in reversed(COSINE_CHANNELS) for h in drawn.get(name, ())}
    if q.nameless_vector is not None:
        cosine = _blend(entries, cosine, q, config.nameless_query_weight)
    cands: dict[str, Candidate] = {}
    for eid, sim, _ in cosine:
        if eid in entries:
            role: Role = "pending" if source[eid] == "pending" else "terminal"
            cands[eid] = Candidate(entries[eid], sim, role, dense=sim, channels={source[eid]})
    lexical = drawn.get("lexical", [])
    top_lex = max((h.score for h in lexical), default=0.0) or 1.0
    # BM25 normalised by the best hit; a pending turn (in no BM25 index yet) brings the
    # share of the question's terms it says, already in [0, 1].
    shares = [(h.entry_id, h.score / top_lex) for h in lexical] + [h[:2] for h in drawn.get("pending_terms", ())]
    for eid, share in shares:
        if eid in entries:
            cand = _candidate(cands, entries, eid, q, config)
            cand.lexical = max(cand.lexical, share)
            cand.channels.add("lexical")
    for hit in drawn.get("messages", ()):
        if hit.entry_id not in entries:
            continue
        cand = _candidate(cands, entries, hit.entry_id, q, config)
        cand.message = max(cand.message, hit.score)
        if hit.pin is not None:
            cand.pin = hit.pin if cand.pin is None else min(cand.pin, hit.pin)
        cand.channels.add("messages")
    return sorted(_scored(cands.values(), q, config), key=lambda c: -c.score)


def _candidate(cands: dict[str, Candidate], entries: Mapping[str, Entry], eid: str, q: Question,
               config: Config) -> Candidate:
    """The candidate of memory ``eid``, added (scored by its cosine to the question) when
    no cosine channel drew it."""
    cand = cands.get(eid)
    if cand is None:
        sim = _cosine(entries[eid].embedding, q, config.nameless_query_weight)
        cand = cands[eid] = Candidate(entries[eid], sim, dense=sim)
    return cand


def _scored(cands: Iterable[Candidate], q: Question, config: Config) -> list[Candidate]:
    """``cands`` with their scores: the match score times every weight of :data:`WEIGHTS`."""
    out = []
    for cand in cands:
        cand.score = cand.match(config.lexical_weight)
        for weight in WEIGHTS.values():
            cand.score *= weight(cand, q, config)
        out.append(cand)
    return out


def _cosine(emb: np.ndarray | None, q: Question, weight: float) -> float:
    """A memory's dense score: its cosine to the question, blended with its cosine to the
    question without its persons when there is one."""
    if emb is None:
        return 0.0
    sim = float(emb @ q.vector)
    if q.nameless_vector is None:
        return sim
    return (1.0 - weight) * sim + weight * float(emb @ q.nameless_vector)


def _blend(entries: Mapping[str, Entry], hits: list[Hit], q: Question, weight: float) -> list[Hit]:
    """The cosine hits re-scored with :func:`_cosine`, best first."""
    scored = [Hit(h.entry_id, _cosine(entries[h.entry_id].embedding, q, weight)) for h in hits if h.entry_id in entries]
    return sorted(scored, key=lambda h: -h.score)

