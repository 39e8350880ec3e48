"""Candidate channels: each draws the memories one kind of search finds for a question.

A channel is a function ``(store, question, config, drawn) -> [(entry id, raw score), ...]``,
best first, switched on and sized by its own ``Config`` entry (0 switches it off);
``drawn`` holds the hits of the channels before it, for a channel whose quota counts only
the memories the others missed.
Fusion (``fusion.py``) turns the union of their hits into scored candidates. A new kind
of search is one more function here and one more ``Config`` entry.

* ``dense``: the ``k_sem`` nearest memories by cosine (chromadb, the user's partition);
  ``k_sem_assistant`` more when an assistant takes part; the question without the persons
  it names draws its own ``k_sem`` (``nameless_query_weight``).
* ``lexical``: the ``k_lex`` best BM25 matches (SQLite FTS5).
* ``period``: the ``k_period`` memories said within the day or month the question names
  that are most similar to it (``periods.py``).
* ``messages``: the message floor: what a flat hybrid search over the log would show
  in ``message_floor`` of the budget, each message through its entry most similar to the
  question, pinned to be shown first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import NamedTuple, TypeVar

import numpy as np

from ..config import Config
from ..models import Entry
from ..serialize import overhead_cost
from ..store import Store
from ..tokens import count_tokens
from .query import Question


class Hit(NamedTuple):
    """One memory a channel drew."""

    #: The entry.
    entry_id: str
    #: A cosine for the dense channels, a BM25 score for lexical, a message's match.
    score: float
    #: Its position among the memories the budget must show first (the message floor).
    pin: int | None = None
Channel = Callable[[Store, Question, Config, Mapping[str, list[Hit]]], list[Hit]]

#: Bound: most memories a named period is scanned for (~30 MB of 384-d vectors read and scored).
MAX_PERIOD_SCAN = 20_000


def dense(store: Store, q: Question, config: Config, drawn: Mapping[str, list[Hit]]) -> list[Hit]:
    """The nearest memories to the question, then those nearest to its nameless form.

    When an assistant takes part in the conversation, ``k_sem_assistant`` more are
    fetched: the assistant's entries fill dense top-k lists and are then downweighted
    (``assistant_weight``), so without them fewer candidates would compete.
    """
    k_sem = config.k_sem
    if config.k_sem_assistant and any(config.is_assistant(p) for p in store.participants(q.scope.user_id)):
        k_sem += config.k_sem_assistant
    queries = q.vector[None, :] if q.nameless_vector is None else np.stack([q.vector, q.nameless_vector])
    hits = store.dense_search(q.scope, queries, k_sem)
    found = hits[0] if hits else []
    if len(hits) > 1:
        seen = {i for i, _ in found}
        found = found + [(i, s) for i, s in hits[1] if i not in seen]
    return [Hit(i, s) for i, s in found]


def lexical(store: Store, q: Question, config: Config, drawn: Mapping[str, list[Hit]]) -> list[Hit]:
    """The best BM25 matches of the question's words."""
    return [Hit(i, s) for i, s in store.lexical_search(q.scope, q.text, config.k_lex)]


def period(store: Store, q: Question, config: Config, drawn: Mapping[str, list[Hit]]) -> list[Hit]:
    """The ``k_period`` memories said within the question's period most similar to it and
    not drawn by the dense channel (a range scan on the time index, then one matrix
    product). A period holding more than
    :data:`MAX_PERIOD_SCAN` memories draws none: the scan would cost more than the dense
    search it complements (fusion's period bonus still ranks them)."""
    if q.period is None or not config.k_period:
        return []
    start, end = q.period
    ids, ts, mat = store.vectors_in_window(q.scope, start, end, limit=MAX_PERIOD_SCAN + 1)
    if not ids or len(ids) > MAX_PERIOD_SCAN:
        return []
    seen = {h.entry_id for h in drawn.get("dense", ())}
    sims = mat @ q.vector
    best = np.argsort(-sims, kind="stable")
    # The scan's window is closed; a period ends before its end (as the bonus reads it).
    return [Hit(ids[i], float(sims[i])) for i in best if ts[i] < end and ids[i] not in seen][: config.k_period]


#: Knob: depth of each of the message channel's two rankings fed into its rank fusion
#: (as the flat hybrid baseline, ``bench.baselines.FUSION_POOL``: reciprocal-rank fusion
#: of the top 50 by cosine and by BM25).
MESSAGE_POOL = 50


def messages(store: Store, q: Question, config: Config, drawn: Mapping[str, list[Hit]]) -> list[Hit]:
    """The message floor: the messages a flat hybrid search over the log would show in
    ``message_floor`` x the room the budget leaves beside the text's header, in flat's
    order, each as ``(its entry most similar to the question, the message's match)`` and
    pinned (``Hit.pin``) so the budget shows them first.

    The flat order is the flat hybrid baseline's: reciprocal-rank fusion of the best
    :data:`MESSAGE_POOL` messages by cosine (of the message view's mean entry vector,
    blended with the nameless question's as for entries) and by BM25 over the message's
    words, filled greedily with whole messages at flat's cost (``[day] Speaker: text``).
    A message's match, its score as a candidate, is its cosine plus ``lexical_weight`` x
    its max-normalised BM25.
    """
    if config.message_floor <= 0 or config.token_budget is None:
        return []
    turn_ids, entry_ids, mat = store.message_index(q.scope)
    if not turn_ids:
        return []
    sims = mat @ q.vector
    if q.nameless_vector is not None:
        w = config.nameless_query_weight
        sims = (1.0 - w) * sims + w * (mat @ q.nameless_vector)
    row_of: dict[str, int] = {}
    for i, t in enumerate(turn_ids):
        row_of.setdefault(t, i)
    lex = {row_of[t]: score for t, score in store.message_lexical(q.scope, q.text, MESSAGE_POOL) if t in row_of}
    top_lex = max(lex.values(), default=0.0) or 1.0
    k = min(MESSAGE_POOL, len(turn_ids))
    dense_rows = sorted(np.argpartition(-sims, k - 1)[:k].tolist(), key=lambda i: (-sims[i], i))
    flat = [row for row, _ in rrf([dense_rows, list(lex)])]
    members = store.get({e for i in flat for e in entry_ids[i]}, q.scope.user_id, cached=True)
    room = (config.token_budget - overhead_cost()) * config.message_floor
    used = 0
    hits: list[Hit] = []
    for i in flat:
        own = [members[e] for e in entry_ids[i] if e in members and members[e].embedding is not None]
        cost = _flat_cost(own)
        if not own or used + cost > room:
            continue
        used += cost
        rep = max(own, key=lambda e: float(e.vector @ q.vector))
        match = float(sims[i]) + config.lexical_weight * lex.get(i, 0.0) / top_lex
        hits.append(Hit(rep.id, match, len(hits)))
    return hits


def _flat_cost(message: list[Entry]) -> int:
    """What a flat search pays to show a message: its line ``[day] Speaker: text``."""
    if not message:
        return 0
    first = message[0]
    day = first.timestamp.strftime("%Y-%m-%d") if first.timestamp else "????-??-??"
    words = " ".join(str(e.metadata.get("said") or e.text) for e in message)
    return _line_tokens(f"[{day}] {first.speaker or ''}: {words}")


@functools.lru_cache(maxsize=4096)
def _line_tokens(line: str) -> int:
    """Tokens of a message's flat line. Every question prices the same messages again
    (up to 100 per question, whole assistant replies among them); counted afresh, they
    were a third of a BEAM retrieval's time (profiled on 60 questions), and the floor
    roughly doubled its p50 (about 40 -> 85 ms on a loaded machine; with this cache,
    about +10 ms)."""
    return count_tokens(line)


#: Knob: the reciprocal-rank fusion constant (Cormack et al. 2009; the usual default,
#: shared with the flat hybrid baseline).
K_RRF = 60
_T = TypeVar("_T", bound=Hashable)


def rrf(rankings: Sequence[Sequence[_T]], k_rrf: int = K_RRF) -> list[tuple[_T, float]]:
    """Reciprocal-rank fusion: ``score(d) = sum over lists of 1 / (k_rrf + rank)``, rank from 1.

    Ties are broken by the best single rank, then by first appearance (deterministic).
    The flat hybrid baseline ranks raw messages with it; the message floor ranks the
    message view with it, so the floor shows what that baseline would.

    Args:
        rankings: lists of items, best first.
        k_rrf: the fusion constant.

    Returns:
        ``(item, fused score)``, best first.
    """
    scores: dict[_T, float] = {}
    best: dict[_T, int] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k_rrf + rank)
            best[doc] = min(best.get(doc, rank), rank)
    order = {doc: i for i, doc in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], best[kv[0]], order[kv[0]]))


#: The channels, in the order fusion reads them: cosine channels first, then lexical,
#: then whole messages.
CHANNELS: dict[str, Channel] = {"dense": dense, "period": period, "lexical": lexical, "messages": messages}


def draw(store: Store, q: Question, config: Config) -> dict[str, list[Hit]]:
    """Every channel's hits for the question (a switched-off channel draws none)."""
    drawn: dict[str, list[Hit]] = {}
    for name, channel in CHANNELS.items():
        drawn[name] = channel(store, q, config, drawn)
    return drawn
