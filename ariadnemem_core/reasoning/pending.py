"""Read-your-writes: the turns still waiting for their window join the candidates.

``add`` stores turns at once (durable) but extracts them a window at a time
(``Config.window_size``), so up to a window of what was just said has no entry yet. A read
that ignored those turns would not find what the user said a moment ago, nor what another
host sharing the store just added. Here each of the scope's latest ``Config.pending_turns``
pending turns becomes one provisional candidate: the whole turn, not yet gated, extracted
or coarsened, embedded as it stands and scored like any dense hit (its cosine to the
question; the ranking weights and the relevance floor apply). A turn the low-information
gate would drop ("Haha okay.") is left out, as extraction would leave it. Its fact has the role
``"pending"`` and an id of the form ``pending:<seq>`` that no stored entry has; once the
window is extracted, the entries replace it.
"""

from __future__ import annotations

from ..config import Config
from ..embedding import Embedder
from ..extraction import embedding_text
from ..gating import low_information
from ..models import Entry, Scope, Turn
from ..store import Store
from ..text import keywords
from .channels import Hit
from .query import Question

#: Prefix of a pending turn's provisional entry id (``pending:<seq>``).
PENDING_PREFIX = "pending:"


def pending_entries(store: Store, embedder: Embedder, scope: Scope, config: Config) -> dict[str, Entry]:
    """The scope's latest ``Config.pending_turns`` pending turns as provisional entries,
    embedded, by id; the ones the low-information gate would drop are left out.

    Args:
        store: the memory's store.
        embedder: embeds each turn as it stands (as ingest embeds an entry: a long one by
            its beginning); the library's embedder caches by text, so a turn is embedded
            once however often it is read.
        scope: whose turns; nothing of another user is read.
        config: ``pending_turns`` (most turns read, the latest ones; 0: none) and the gate's
            settings.

    Returns:
        ``pending:<seq>`` -> the turn as an entry ("speaker: text"), in arrival order.
    """
    if config.pending_turns <= 0:
        return {}
    rows = store.pending(user_id=scope.user_id, limit=config.pending_turns)
    entries = [e for e in (_as_entry(seq, row_scope, turn) for seq, row_scope, turn in rows) if scope.matches(e)]
    if not entries:
        return {}
    for entry, vector in zip(entries, embedder.embed([embedding_text(e) for e in entries]), strict=True):
        entry.embedding = vector
    phatic = low_information(entries, embedder, config)
    return {e.id: e for e, drop in zip(entries, phatic, strict=True) if not drop}


def _as_entry(seq: int, row_scope: Scope, turn: Turn) -> Entry:
    """A pending turn as a provisional entry: "speaker: text", as the turn was said."""
    return Entry(id=f"{PENDING_PREFIX}{seq}", text=f"{turn.speaker}: {turn.text}",
                 keywords=keywords(turn.text, exclude=[turn.speaker]), persons=[turn.speaker],
                 timestamp=turn.timestamp, first_timestamp=turn.timestamp, source_turn_ids=[str(turn.turn_id)],
                 speaker=turn.speaker, user_id=row_scope.user_id, agent_id=row_scope.agent_id,
                 session_id=row_scope.session_id)


def hits(entries: dict[str, Entry], q: Question) -> list[Hit]:
    """Each provisional entry's cosine to the question, best first."""
    scored = [Hit(i, float(e.embedding @ q.vector)) for i, e in entries.items() if e.embedding is not None]
    return sorted(scored, key=lambda h: -h.score)
