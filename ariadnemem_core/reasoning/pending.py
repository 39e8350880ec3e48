"""Read-your-writes: the turns still waiting for their window join the candidates.

``add`` stores turns at once (durable) but extracts them a window at a time
(``Config.window_size``), so up to a window of what was just said has no entry yet. A read
that ignored those turns would not find what the user said a moment ago, nor what another
host sharing the store just added. Here each of the scope's latest ``Config.pending_turns``
pending turns becomes one provisional candidate: the whole turn, not yet gated, extracted
or coarsened, scored like a memory (its cosine to the question plus the lexical bonus, here
the share of the question's terms it says; the ranking weights and the relevance floor
apply). A short turn the low-information gate would drop ("Thanks so much!") is left out,
as extraction would leave it out, and so is a turn whose entries are already drawn (its
window was extracted while the read ran). Its fact has the role ``"pending"`` and an id
``pending:<hash>`` that no entry has; once the window is extracted, the entries replace it.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from cachetools import LRUCache

from ..config import Config
from ..embedding import Embedder
from ..extraction import embedding_text
from ..gating import low_information
from ..models import PENDING_PREFIX, Entry, Scope, Turn, offset_of, to_utc
from ..store import Store
from ..text import STOPWORDS, keywords
from .channels import Hit
from .excerpt import excerpt, query_terms
from .query import Question

#: Bound: a turn longer than this is never judged phatic (the gate's test is for a line of
#: chat), so its words are not listed for it.
PHATIC_MAX_CHARS = 300
#: Bound: provisional entries kept per embedder (a turn is embedded and its words stemmed
#: once, however often it is read, whatever the embedder caches itself).
CACHE_SIZE = 4096

_Built = tuple[Entry, frozenset[str], bool]
_CACHES: weakref.WeakKeyDictionary[Embedder, LRUCache[tuple[Any, ...], _Built]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


@dataclass(slots=True)
class Waiting:
    """The provisional entries of a read by id, and each one's stemmed words."""

    entries: dict[str, Entry] = field(default_factory=dict)
    terms: dict[str, frozenset[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.entries)


def pending_entries(store: Store, embedder: Embedder, scope: Scope, config: Config) -> Waiting:
    """The latest ``Config.pending_turns`` pending turns a reader of ``scope`` may see, as
    provisional entries (embedded), by id; the ones the low-information gate would drop
    are left out.

    Args:
        store: the memory's store (one indexed query, a read only).
        embedder: embeds each turn as ingest embeds an entry (a long one by its beginning).
        scope: whose turns: its user, and its agent and session where it names them.
        config: ``pending_turns`` (0: none) and the gate's settings.

    Returns:
        ``pending:<hash>`` -> the turn as an entry ("speaker: text"), in arrival order.
    """
    if config.pending_turns <= 0:
        return Waiting()
    rows = store.waiting(scope, config.pending_turns)
    if not rows:
        return Waiting()
    kept = [(e, t) for e, t, phatic in _built(embedder, rows, config) if not phatic]
    return Waiting({e.id: e for e, _ in kept}, {e.id: t for e, t in kept})


def _built(embedder: Embedder, rows: list[tuple[int, Scope, Turn]],
           config: Config) -> list[_Built]:
    """The rows as provisional entries with their stemmed words and whether the
    low-information gate would drop them, from the cache where built before (with the
    same gate settings)."""
    cache = _cache(embedder)
    gate = (config.enable_gating, config.enable_low_info_gate, config.low_info_similarity,
            config.low_info_max_content_words)
    keys = [(_entry_id(seq, row_scope, turn), turn.text, gate) for seq, row_scope, turn in rows]
    with _LOCK:
        hit = {k: cache[k] for k in keys if cache is not None and k in cache}
    new = [(k, row) for k, row in zip(keys, rows, strict=True) if k not in hit]
    if new:
        entries = [_as_entry(k[0], *row) for k, row in new]
        vectors = np.asarray(embedder.embed([embedding_text(e) for e in entries]), dtype=np.float32)
        for entry, vector in zip(entries, vectors, strict=True):
            entry.embedding = vector
        short = [e for e in entries if len(e.text) <= PHATIC_MAX_CHARS]
        phatic = {e.id for e, drop in zip(short, low_information(short, embedder, config), strict=True) if drop}
        for (k, _), entry in zip(new, entries, strict=True):
            hit[k] = (entry, query_terms(entry.text, STOPWORDS), entry.id in phatic)
        if cache is not None:
            with _LOCK:
                for k, _ in new:
                    cache[k] = hit[k]
    return [hit[k] for k in keys]


def _cache(embedder: Embedder) -> LRUCache[tuple[Any, ...], _Built] | None:
    """The embedder's cache of built entries (None for an embedder that cannot be weakly
    referenced: its entries are built at every read)."""
    with _LOCK:
        try:
            cache = _CACHES.get(embedder)
            if cache is None:
                cache = _CACHES[embedder] = LRUCache(maxsize=CACHE_SIZE)
            return cache
        except TypeError:
            return None


def _entry_id(seq: int, scope: Scope, turn: Turn) -> str:
    """A stable id for a pending turn that says nothing of the store (the arrival number is
    store-wide: it would tell one user how much the others write)."""
    key = "\x1f".join([scope.user_id, scope.agent_id or "", scope.session_id or "", str(turn.turn_id), str(seq)])
    return PENDING_PREFIX + hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


def _as_entry(entry_id: str, seq: int, scope: Scope, turn: Turn) -> Entry:
    """A pending turn as a provisional entry: "speaker: text", as the turn was said."""
    words = keywords(turn.text, exclude=[turn.speaker]) if len(turn.text) <= PHATIC_MAX_CHARS else []
    when = to_utc(turn.timestamp)  # in UTC, as the entries it stands beside
    return Entry(id=entry_id, text=f"{turn.speaker}: {turn.text}", keywords=words, persons=[turn.speaker],
                 timestamp=when, first_timestamp=when, source_turn_ids=[str(turn.turn_id)], speaker=turn.speaker,
                 metadata=offset_of(turn.timestamp), user_id=scope.user_id, agent_id=scope.agent_id,
                 session_id=scope.session_id)


def not_extracted(waiting: Waiting, found: Mapping[str, Entry]) -> Waiting:
    """``waiting`` without the turns whose entries are among ``found``: a window extracted
    between the two reads would otherwise show one turn twice."""
    done = {(e.agent_id, e.session_id, t) for e in found.values() for t in e.source_turn_ids}
    kept = {i: e for i, e in waiting.entries.items() if (e.agent_id, e.session_id, e.source_turn_ids[0]) not in done}
    return Waiting(kept, {i: waiting.terms[i] for i in kept})


def hits(waiting: Waiting, q: Question, embedder: Embedder, config: Config) -> tuple[list[Hit], list[Hit]]:
    """Each provisional entry's cosine to the question, best first, and the share of the
    question's terms it says (the lexical bonus). A turn longer than its embedded
    beginning is also embedded by its query-focused excerpt (the part the budget would
    show), and the better cosine counts: its answer may lie past that beginning."""
    shares = {i: len(q.terms & waiting.terms[i]) / len(q.terms) for i in waiting.entries} if q.terms else {}
    cos = {i: float(e.embedding @ q.vector) for i, e in waiting.entries.items() if e.embedding is not None}
    long = [i for i, e in waiting.entries.items()
            if i in cos and shares.get(i, 0.0) > 0 and len(embedding_text(e)) < len(e.text)]
    if long:
        parts = [excerpt(waiting.entries[i].text, q.terms, config.max_fact_tokens) for i in long]
        for i, v in zip(long, np.asarray(embedder.embed(parts), dtype=np.float32), strict=True):
            cos[i] = max(cos[i], float(v @ q.vector))
    cosine = sorted((Hit(i, c) for i, c in cos.items()), key=lambda h: -h.score)
    return cosine, [Hit(i, share) for i, share in shares.items() if share > 0]


def relevant(waiting: Waiting, query: str, persons: Iterable[str]) -> bool:
    """Whether a provisional entry says one of the question's words other than the names of
    persons: a fast path's answer (a count, an attribute) may then be stale, and the full
    read runs. Names do not count: every turn of Melanie's names her."""
    names = {t for p in persons for t in query_terms(p)}
    asked = query_terms(query, STOPWORDS) - names
    return any(asked & terms for terms in waiting.terms.values())
