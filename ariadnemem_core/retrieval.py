"""Phase II, step 1: hybrid retrieval of terminal nodes.

Small separate functions, fused at the end: dense top-k_sem (chromadb, the user's
partition) union lexical top-k_lex (SQLite FTS5 BM25), every candidate scored by its
cosine to the query (blended with its cosine to the question without the persons it
names, ``Config.nameless_query_weight``) plus a normalized BM25 bonus, then downweighted
when it lacks every entity the query names (a question about Caroline should not be
answered from a fact that never mentions her), and downweighted when it only asks a
question.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import Config
from .models import Entry, Scope
from .periods import question_period
from .store import Store
from .text import query_entities

#: Most memories a named period is scanned for (~30 MB of 384-d vectors read and scored).
MAX_PERIOD_SCAN = 20_000


@dataclass(slots=True)
class Candidate:
    entry: Entry
    score: float
    dense: float
    lexical: float = 0.0
    dense_rank: int | None = None
    lexical_rank: int | None = None
    has_entity: bool = True


def mentions_any(entry: Entry, entities: list[str]) -> bool:
    hay = " ".join([entry.text, *entry.persons, *entry.entities, entry.speaker or ""]).lower()
    return any(e in hay for e in entities)


def fuse(
    entries: dict[str, Entry],
    dense: list[tuple[str, float]],
    lexical: list[tuple[str, float]],
    qvec: np.ndarray,
    entities: list[str],
    config: Config,
    period: tuple[float, float] | None = None,
    nameless_vec: np.ndarray | None = None,
) -> list[Candidate]:
    """Union of both lists, scored and sorted (best first); memories said within the
    question's ``period`` (POSIX seconds) rank ``period_bonus`` higher. With
    ``nameless_vec`` (the question without the persons it names), a candidate's dense
    score blends its cosine to both (``nameless_query_weight``) and ``dense`` is re-ranked
    by it."""
    if nameless_vec is not None:
        dense = _blend(entries, dense, qvec, nameless_vec, config.nameless_query_weight)
    cands: dict[str, Candidate] = {}
    for rank, (eid, sim) in enumerate(dense):
        if eid in entries:
            cands[eid] = Candidate(entries[eid], sim, sim, dense_rank=rank)
    top_lex = max((s for _, s in lexical), default=0.0) or 1.0
    for rank, (eid, bm25) in enumerate(lexical):
        if eid not in entries:
            continue
        cand = cands.get(eid)
        if cand is None:
            emb = entries[eid].embedding
            sim = _cosine(emb, qvec, nameless_vec, config.nameless_query_weight)
            cand = cands[eid] = Candidate(entries[eid], sim, sim)
        cand.lexical = bm25 / top_lex
        cand.lexical_rank = rank
    for cand in cands.values():
        cand.score = cand.dense + config.lexical_weight * cand.lexical
        if entities and not mentions_any(cand.entry, entities):
            cand.has_entity = False
            cand.score *= config.entity_miss_penalty
        if cand.entry.text.rstrip().rstrip('"').endswith("?"):
            cand.score *= config.question_penalty
        if config.is_assistant(cand.entry.speaker):
            cand.score *= config.assistant_weight
        ts = cand.entry.timestamp
        if period is not None and ts is not None and period[0] <= ts.timestamp() < period[1]:
            cand.score *= 1.0 + config.period_bonus
    return sorted(cands.values(), key=lambda c: -c.score)


def hybrid_search(store: Store, scope: Scope, query: str, qvec: np.ndarray, config: Config,
                  known_persons: set[str], nameless_vec: np.ndarray | None = None,
                  ) -> tuple[list[Candidate], list[str]]:
    """Terminals for a query: (scored candidates best first, the query's entities).

    When an assistant takes part in the conversation, ``k_sem_assistant`` more dense
    candidates are fetched: the assistant's entries fill dense top-k lists and are then
    downweighted (``assistant_weight``), so without them fewer candidates would compete.
    ``nameless_vec``, the question embedded without the persons it names, draws its own
    dense candidates and blends into every candidate's dense score.
    """
    k_sem = config.k_sem
    if config.k_sem_assistant and any(config.is_assistant(p) for p in store.participants(scope.user_id)):
        k_sem += config.k_sem_assistant
    queries = qvec[None, :] if nameless_vec is None else np.stack([qvec, nameless_vec])
    hits = store.dense_search(scope, queries, k_sem)
    dense = hits[0] if hits else []
    if len(hits) > 1:
        seen = {i for i, _ in dense}
        dense = dense + [(i, s) for i, s in hits[1] if i not in seen]
    period = question_period(query) if config.k_period else None
    if period is not None:
        dense = dense + _period_hits(store, scope, qvec, period, config.k_period, {i for i, _ in dense})
    lexical = store.lexical_search(scope, query, config.k_lex)
    entries = store.get([i for i, _ in dense] + [i for i, _ in lexical], scope.user_id, cached=True)
    entities = query_entities(query, known_persons)
    return fuse(entries, dense, lexical, qvec, entities, config, period, nameless_vec), entities


def _cosine(emb: np.ndarray | None, qvec: np.ndarray, nameless_vec: np.ndarray | None, weight: float) -> float:
    """An entry's dense score: its cosine to the question, blended with its cosine to the
    question without its persons when there is one."""
    if emb is None:
        return 0.0
    sim = float(emb @ qvec)
    return sim if nameless_vec is None else (1.0 - weight) * sim + weight * float(emb @ nameless_vec)


def _blend(entries: dict[str, Entry], dense: list[tuple[str, float]], qvec: np.ndarray,
           nameless_vec: np.ndarray, weight: float) -> list[tuple[str, float]]:
    """The dense hits re-scored with :func:`_cosine`, best first."""
    scored = [(i, _cosine(entries[i].embedding, qvec, nameless_vec, weight)) for i, _ in dense if i in entries]
    return sorted(scored, key=lambda x: -x[1])


def _period_hits(store: Store, scope: Scope, qvec: np.ndarray, period: tuple[float, float], k: int,
                 seen: set[str]) -> list[tuple[str, float]]:
    """The ``k`` memories said within ``period`` most similar to the query, not already in
    the dense list (a range scan on the time index, then one matrix product). A period
    holding more than :data:`MAX_PERIOD_SCAN` memories draws none: the scan would cost
    more than the dense search it complements (the bonus still ranks them)."""
    ids, ts, mat = store.vectors_in_window(scope, period[0], period[1], limit=MAX_PERIOD_SCAN + 1)
    if not ids or len(ids) > MAX_PERIOD_SCAN:
        return []
    sims = mat @ qvec
    best = np.argsort(-sims, kind="stable")
    # The scan's window is closed; a period ends before its end (as the bonus in fuse reads it).
    return [(ids[i], float(sims[i])) for i in best if ts[i] < period[1] and ids[i] not in seen][:k]
