"""The ``AriadneMemory`` facade: a small surface over the two phases.

Writes: ``add`` validates every turn first (a bad turn raises before anything is stored),
persists the turns as *pending* (acknowledged = durable), and processes full windows of
``Config.window_size`` turns per scope: gate -> extract -> embed -> coarsen -> commit (one
transaction per window). ``flush`` processes partial windows. Reads: ``retrieve`` builds
the query's EvidenceGraph (Phase II, no LLM call); ``answer`` adds one LLM call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import coarsening, gating
from .config import Config
from .embedding import Embedder, MiniLMEmbedder
from .errors import ExtractionError, InvalidInputError, NotFoundError
from .extraction import ExtractionContext, Extractor, RuleExtractor, question_context
from .models import _SURROGATE, Entry, Scope, Turn, UpdateEdge, clean_text
from .store import Store, WindowCommit

if TYPE_CHECKING:
    from .evidence import EvidenceGraph

#: Longest query used, in characters; a longer question is cut to its *last* part for
#: retrieval (a long prompt usually ends with the actual question) so retrieval time stays
#: bounded whatever the caller sends. The question itself is never stored.
MAX_QUERY_CHARS = 4000


class AriadneMemory:
    """Graph-structured long-term memory for one or many users.

    ``path=None`` gives an ephemeral memory in a temporary directory (removed on close);
    a path gives a persistent one that reopens to exactly the same memory.

    The dense index is embedded (chromadb under ``path``) unless ``chroma_host`` (and
    ``chroma_port``, default 8000) names a Chroma server (``chroma run``) or
    ``chroma_client`` injects a configured ``chromadb`` client (``HttpClient`` with auth
    headers, TLS, ...). In that mode the vectors live on the server, in collections named
    after this store's id, and the records, BM25 index, edges and counters stay in the
    SQLite file at ``path``, the source of truth the server is reconciled with on open.
    Opening an existing embedded store with a server moves its vectors there.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        config: Config | None = None,
        *,
        embedder: Embedder | None = None,
        extractor: Extractor | None = None,
        llm: Any = None,
        chroma_host: str | None = None,
        chroma_port: int | None = None,
        chroma_client: Any = None,
    ) -> None:
        self.config = config or Config()
        self.embedder: Embedder = embedder or MiniLMEmbedder()
        self._rule = RuleExtractor(split_sentences=self.config.atomic_sentences)
        self.extractor: Extractor = extractor or self._rule
        self.store = Store(path, dim=self.embedder.dim, embedder_name=self.embedder.name,
                           chroma_client=chroma_client, chroma_host=chroma_host, chroma_port=chroma_port)
        self._write_lock = threading.RLock()
        self._llm = llm
        self._llm_checked = llm is not None

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> AriadneMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Extract partial windows, then close the store (idempotent)."""
        if self.store._closed:
            return
        try:
            self.flush()
        finally:
            self.store.close()

    @property
    def path(self) -> Path:
        return self.store.path

    # ------------------------------------------------------------------ writes
    def add(
        self,
        turns: Turn | Mapping[str, Any] | Iterable[Turn | Mapping[str, Any]],
        *,
        user_id: str = "default",
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> int:
        """Store turns; returns how many were accepted (all, or an exception and none).

        Turns are durable when this returns. Full windows are extracted now, the rest on
        the next ``add`` that fills the window, on ``flush()`` or on ``close()``.

        Every turn of the batch is validated before anything is stored, and a bad one
        raises :class:`InvalidInputError` naming it (``turns[3].text``), so the store is
        never left with part of a batch or with a pending turn that can never be
        processed. What is accepted (see :class:`Turn`):

        * ``text``: a ``str`` of at most ``MAX_TEXT_CHARS`` (200,000) characters. Longer
          text (a pasted 1 MB log) is *rejected*, not truncated, so nothing is silently
          lost; split it into several turns. Within the limit, ingest is bounded by the
          atomic sentence split. Empty or whitespace-only text, ``bytes`` and lone
          surrogates are rejected; control characters (NUL included) are stripped, tab
          and newline kept, CR/VT/FF made newlines.
        * ``timestamp``: ``datetime`` (naive = UTC, not local time), ISO 8601 string or
          None; any year from 1 to 9999; turns may arrive out of time order (entries are
          read back in timestamp order). Unparseable strings are rejected.
        * dicts: the keys of ``Turn``; unknown keys are rejected (put extras in
          ``metadata``), and ``metadata`` must be JSON-serializable.
        """
        scope = Scope(user_id, agent_id, session_id)
        batch = _normalize_turns(turns)
        if not batch:
            return 0
        with self._write_lock:
            self.store.add_pending(scope, batch)
            self.store.bump_stats(scope.user_id, {"turns_seen": len(batch)})
            self._process(scope, full_only=True)
        return len(batch)

    def flush(self) -> None:
        """Extract every pending turn now, including partial windows."""
        with self._write_lock, self.store.write_guard():
            scopes = {s for _, s, _ in self.store.pending()}
            for scope in sorted(scopes, key=lambda s: (s.user_id, s.agent_id or "", s.session_id or "")):
                self._process(scope, full_only=False)

    def _process(self, scope: Scope, *, full_only: bool) -> None:
        # The cross-process writer lock spans reading the pending turns to committing
        # their entries: two processes must never extract the same pending turns.
        with self.store.write_guard():
            self._process_locked(scope, full_only=full_only)

    def _process_locked(self, scope: Scope, *, full_only: bool) -> None:
        rows = self.store.pending(scope)
        size = self.config.window_size
        n = len(rows) if not full_only else (len(rows) // size) * size
        if n == 0:
            return
        rows = rows[:n]
        previous = self.store.recent_turns(scope)
        participants = self.store.participants(scope.user_id)
        for _, _, t in rows:
            if t.speaker not in participants:
                participants.append(t.speaker)
        # The rule extractor runs over every window up front (it is cheap) and all its
        # entries are embedded in one batch: the model is far faster on one large batch
        # than on many small ones. A turn's gate vector is the normalized mean of its
        # atomic entries' vectors, so the rule path embeds each piece of text once.
        turns = [t for _, _, t in rows]
        rule_entries = self._rule.extract(turns, ExtractionContext(list(previous), list(participants)))
        owner: list[int] = []  # index into ``turns`` of each entry's source turn
        i = 0
        for e in rule_entries:
            # Entries come in turn order; walk forward (turn ids may repeat across turns).
            while i < len(turns) and e.source_turn_ids[0] != turns[i].turn_id:
                i += 1
            if i == len(turns):
                raise ExtractionError("rule extractor returned entries out of turn order")
            owner.append(i)
        texts = [e.text for e in rule_entries]
        if self.config.context_embedding:
            asked = question_context(turns, previous[-1] if previous else None)
            texts = [f"{asked[j]} {t}" if asked[j] else t for t, j in zip(texts, owner, strict=True)]
        vectors = self.embedder.embed(texts) if rule_entries else np.zeros((0, 1))
        # Vectors of the plain text, reusable for an LLM entry that says exactly the same.
        plain = {e.id for e, t in zip(rule_entries, texts, strict=True) if t == e.text}
        per_turn: list[list[Entry]] = [[] for _ in turns]
        for e, v, j in zip(rule_entries, vectors, owner, strict=True):
            e.embedding = v
            per_turn[j].append(e)
        if any(not group for group in per_turn):
            raise ExtractionError("rule extractor returned no entry for a turn")
        history = list(previous)
        for start in range(0, n, size):
            window = rows[start : start + size]
            before = history[-Store.RECENT_TURNS :]
            self._process_window(scope, window, per_turn[start : start + size], before, participants, plain)
            history.extend(t for _, _, t in window)

    def _process_window(self, scope: Scope, rows: list[tuple[int, Scope, Turn]],
                        per_turn: list[list[Entry]], previous: list[Turn], participants: list[str],
                        plain: set[str]) -> None:
        cfg = self.config
        turns = [t for _, _, t in rows]
        vectors = np.stack([_mean_vector([e.embedding for e in group]) for group in per_turn])
        stats: dict[str, int] = {"extract_windows": 1}
        stored = self._nearest(scope, vectors) if cfg.enable_gating else [None] * len(turns)
        decisions = gating.gate_window(
            vectors, [t.timestamp for t in turns], [t.turn_id or "" for t in turns], stored, cfg
        )
        keep = [d.keep for d in decisions]
        kept = [t for t, k in zip(turns, keep, strict=True) if k]
        stats["gate_kept"] = len(kept)
        stats["gate_dropped"] = len(turns) - len(kept)

        rule_kept = [e for group, k in zip(per_turn, keep, strict=True) if k for e in group]
        if self.extractor is self._rule:
            entries = rule_kept
        else:
            entries = self._extract(kept, ExtractionContext(previous, participants), stats)
            cache = {e.text: e.embedding for e in rule_kept if e.id in plain}
            missing = list(dict.fromkeys(e.text for e in entries if e.text not in cache))
            if missing:
                cache.update(zip(missing, self.embedder.embed(missing), strict=True))
            for e in entries:
                e.embedding = cache[e.text]
        for e in entries:
            e.user_id, e.agent_id, e.session_id = scope.user_id, scope.agent_id, scope.session_id

        commit = WindowCommit(scope=scope, processed_pending=[s for s, _, _ in rows],
                              processed_turns=turns, stats=stats)
        self._coarsen(scope, entries, commit)
        self.store.commit_window(commit)

    def _nearest(self, scope: Scope, vectors: np.ndarray) -> list[gating.Neighbor | None]:
        hits = self.store.dense_search(scope, vectors, 1)
        found = self.store.get([h[0][0] for h in hits if h], scope.user_id)
        out: list[gating.Neighbor | None] = []
        for h in hits:
            if not h or h[0][0] not in found:
                out.append(None)
            else:
                eid, sim = h[0]
                out.append(gating.Neighbor(eid, sim, found[eid].timestamp))
        return out

    def _extract(self, turns: list[Turn], context: ExtractionContext, stats: dict[str, int]) -> list[Entry]:
        """Run the extractor with a safety net: bad provenance is repaired, uncovered turns
        are rule-extracted, and a failing extractor falls back to rules (counted)."""
        if not turns:
            return []
        try:
            entries = list(self.extractor.extract(turns, context))
        except Exception as exc:  # any extractor failure: never lose the window
            if self.extractor is self._rule:
                raise ExtractionError(f"rule extraction failed: {exc}") from exc
            stats["extract_fallbacks"] = stats.get("extract_fallbacks", 0) + 1
            entries = []
        by_id = {t.turn_id: t for t in turns}
        valid: list[Entry] = []
        for e in entries:
            e.source_turn_ids = [tid for tid in dict.fromkeys(e.source_turn_ids) if tid in by_id]
            if not e.source_turn_ids or not e.text.strip():
                continue
            if e.timestamp is None:
                stamps = [by_id[t].timestamp for t in e.source_turn_ids if by_id[t].timestamp]
                e.timestamp = max(stamps) if stamps else None
            if e.first_timestamp is None:
                e.first_timestamp = e.timestamp
            valid.append(e)
        covered = {tid for e in valid for tid in e.source_turn_ids}
        uncovered = [t for t in turns if t.turn_id not in covered]
        if uncovered:
            if self.extractor is not self._rule:
                stats["extract_patched_turns"] = stats.get("extract_patched_turns", 0) + len(uncovered)
            valid.extend(self._rule.extract(uncovered, context))
        return valid

    def _coarsen(self, scope: Scope, entries: list[Entry], commit: WindowCommit) -> None:
        cfg = self.config
        stored_hits: list[list[tuple[str, float]]] = [[] for _ in entries]
        if cfg.enable_coarsening and entries:
            stored_hits = self.store.dense_search(
                scope, np.stack([e.embedding for e in entries]), cfg.coarsen_candidates
            )
        stored = self.store.get({i for h in stored_hits for i, _ in h}, scope.user_id)
        merged: dict[str, Entry] = {}
        window: list[Entry] = []  # entries ADDed or LINKed in this window, in order
        counts = {"merge": 0, "link": 0, "add": 0}
        for entry, hits in zip(entries, stored_hits, strict=True):
            candidates = [(merged.get(i) or stored[i], s) for i, s in hits if i in stored]
            if window and cfg.enable_coarsening:
                sims = np.stack([w.embedding for w in window]) @ entry.embedding
                candidates += list(zip(window, (float(s) for s in sims), strict=True))
            decision = coarsening.decide(entry, candidates, cfg)
            counts[decision.action.value] += 1
            if decision.action is coarsening.Action.MERGE:
                target = next(c for c, _ in candidates if c.id == decision.target_id)
                coarsening.merge_into(target, entry)
                if target not in window:
                    merged[target.id] = target
                commit.mentions.extend(_mentions(entry, target.id))
                commit.attributes.extend(_attributes(entry, target.id))
                continue
            if decision.action is coarsening.Action.LINK:
                commit.edges.append(UpdateEdge(decision.target_id or "", entry.id, "update",
                                               decision.similarity, decision.overlap))
            window.append(entry)
            commit.mentions.extend(_mentions(entry, entry.id))
            commit.attributes.extend(_attributes(entry, entry.id))
        commit.added = window
        commit.merged = list(merged.values())
        for k, v in counts.items():
            commit.stats[k] = commit.stats.get(k, 0) + v

    # ------------------------------------------------------------------ reads
    def entries(self, user_id: str = "default", *, agent_id: str | None = None,
                session_id: str | None = None) -> list[Entry]:
        """Every stored entry of a scope, in time order (timestamp-less last, by arrival)."""
        return self.store.entries(Scope(user_id, agent_id, session_id))

    def get(self, entry_id: str, *, user_id: str | None = None) -> Entry:
        """One entry by id (restricted to ``user_id`` when given)."""
        found = self.store.get([entry_id], user_id)
        if entry_id not in found:
            raise NotFoundError(f"no entry {entry_id!r}" + (f" for user {user_id!r}" if user_id else ""))
        return found[entry_id]

    def edges(self, user_id: str = "default") -> list[UpdateEdge]:
        """Persisted update edges (old -> new) of a user, oldest first."""
        return self.store.edges(user_id)

    def history(self, entry_id: str) -> list[Entry]:
        """The update chain through ``entry_id``, oldest state first."""
        entry = self.get(entry_id)
        edges = self.store.edges(entry.user_id)
        preds: dict[str, str] = {}
        succs: dict[str, str] = {}
        for e in edges:
            if e.kind == "update":
                preds.setdefault(e.dst, e.src)
                succs.setdefault(e.src, e.dst)
        chain = [entry_id]
        seen = {entry_id}
        while chain[0] in preds and preds[chain[0]] not in seen:
            chain.insert(0, preds[chain[0]])
            seen.add(chain[0])
        while chain[-1] in succs and succs[chain[-1]] not in seen:
            chain.append(succs[chain[-1]])
            seen.add(chain[-1])
        found = self.store.get(chain, entry.user_id)
        return [found[i] for i in chain if i in found]

    def users(self) -> dict[str, int]:
        """Every user id in this memory with its number of entries (pending-only users: 0)."""
        return self.store.users()

    def stats(self, user_id: str | None = None) -> dict[str, int]:
        """Counters: turns seen, gate kept/dropped, MERGE/LINK/ADD, entries, edges, ..."""
        return self.store.stats(user_id)

    # ------------------------------------------------------------------ lifecycle
    def delete(self, entry_id: str, *, user_id: str | None = None) -> None:
        """Delete one entry from every index (update chains through it are repaired)."""
        with self._write_lock:
            if not self.store.delete(entry_id, user_id):
                raise NotFoundError(f"no entry {entry_id!r}")

    def forget(self, user_id: str, *, agent_id: str | None = None, session_id: str | None = None) -> int:
        """Delete every memory (and pending turn) of a scope; returns the entries removed."""
        with self._write_lock:
            return self.store.forget(Scope(user_id, agent_id, session_id))

    def clear(self) -> None:
        """Delete everything, for every user."""
        with self._write_lock:
            self.store.clear()

    def export(self, path: str | Path, *, user_id: str | None = None) -> int:
        """Write the whole memory, or one user's part of it (``user_id``: a per-user data
        export), to a JSONL file (embeddings included); returns lines."""
        import json

        n = 0
        target = Path(path)
        tmp = target.with_suffix(target.suffix + ".tmp")
        with self._write_lock, tmp.open("w", encoding="utf-8") as fh:
            for row in self.store.export_rows(user_id):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
        tmp.replace(target)
        return n

    def import_(self, path: str | Path) -> int:
        """Load a JSONL export (into this memory); returns the entries imported.

        One transaction: a malformed line (named with its number), an export of another
        embedder, or entries this memory already holds raise and import nothing.
        """
        with self._write_lock:
            return self.store.import_rows(read_export(path))

    # ------------------------------------------------------------------ Phase II
    def retrieve(self, query: str, *, user_id: str = "default", agent_id: str | None = None,
                 session_id: str | None = None, query_vector: np.ndarray | None = None) -> EvidenceGraph:
        """The query's connected evidence graph (no LLM call). See ``reasoning.build``.

        The query is cleaned like turn text (control characters stripped, lone surrogates
        replaced with U+FFFD since it is never stored) and cut to its last
        ``MAX_QUERY_CHARS`` characters, so a 100 KB prompt costs what a 4 KB one does.
        Empty or non-``str`` queries raise :class:`InvalidInputError` (field ``query``).
        """
        from .reasoning import build_evidence_graph

        query = _check_query(query)
        return build_evidence_graph(self, query, Scope(user_id, agent_id, session_id),
                                    query_vector=query_vector)

    async def aadd(self, turns: Any, **kwargs: Any) -> int:
        """``add`` in a worker thread (embedding is CPU work; the event loop stays free)."""
        return await asyncio.to_thread(self.add, turns, **kwargs)

    async def aretrieve(self, query: str, **kwargs: Any) -> EvidenceGraph:
        return await asyncio.to_thread(self.retrieve, query, **kwargs)

    # ------------------------------------------------------------------ answers
    @property
    def llm(self) -> Any:
        """The configured LLM client (from the environment on first use), or None."""
        if not self._llm_checked:
            self._llm_checked = True
            try:
                from .llm import LLMClient

                self._llm = LLMClient.from_env()
            except ImportError:  # pragma: no cover
                self._llm = None
        return self._llm

    def answer(self, question: str, *, user_id: str = "default", agent_id: str | None = None,
               session_id: str | None = None) -> Any:
        """Answer from the evidence graph with one LLM call (extractive without an LLM)."""
        from .synthesis import synthesize

        graph = self.retrieve(question, user_id=user_id, agent_id=agent_id, session_id=session_id)
        return synthesize(question, graph, self.llm)

    async def aanswer(self, question: str, **kwargs: Any) -> Any:
        from .synthesis import asynthesize

        graph = await self.aretrieve(question, **kwargs)
        return await asynthesize(question, graph, self.llm)


# ---------------------------------------------------------------------- helpers
def read_export(path: str | Path) -> Iterator[dict[str, Any]]:
    """The records of a JSONL export, checked as they are read: a malformed line raises
    :class:`InvalidInputError` naming it, and so does a file whose first record is not the
    export's meta record (not an export at all). An empty file yields nothing."""
    import json

    with Path(path).open(encoding="utf-8") as fh:
        first = True
        try:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InvalidInputError(f"{path} line {lineno}", f"invalid JSON ({exc.msg})") from None
                if first and not (isinstance(row, dict) and row.get("type") == "meta"):
                    raise InvalidInputError(str(path), "not an ariadnemem export (no meta record first)")
                if not isinstance(row, dict):
                    raise InvalidInputError(f"{path} line {lineno}", "expected a JSON object")
                first = False
                yield row
        except UnicodeDecodeError as exc:
            raise InvalidInputError(str(path), f"not UTF-8 text ({exc.reason})") from None


def _normalize_turns(turns: Any) -> list[Turn]:
    """Validate a whole batch up front (see ``add``): every problem is an
    :class:`InvalidInputError` naming the turn and field, raised before anything is stored."""
    if isinstance(turns, Turn | Mapping):
        turns = [turns]
    elif isinstance(turns, str | bytes | bytearray):
        raise InvalidInputError("turns", "expected Turn objects or dicts, got a string")
    elif not isinstance(turns, Iterable):
        raise InvalidInputError("turns", f"expected a Turn, a dict or an iterable of them, got {type(turns).__name__}")
    out: list[Turn] = []
    for i, t in enumerate(turns):
        if isinstance(t, Turn):
            # Re-validated as a copy: a Turn's fields may have been reassigned after it was
            # built, and a bad value persisted as pending would fail every later flush.
            try:
                out.append(Turn(t.speaker, t.text, t.timestamp, t.turn_id, t.metadata))
            except InvalidInputError as exc:
                raise InvalidInputError(f"turns[{i}].{exc.field}", exc.problem) from exc
        elif isinstance(t, Mapping):
            try:
                out.append(Turn.from_dict(t))
            except InvalidInputError as exc:
                raise InvalidInputError(f"turns[{i}].{exc.field}", exc.problem) from exc
            except TypeError as exc:
                raise InvalidInputError(f"turns[{i}]", str(exc)) from exc
        else:
            raise InvalidInputError(f"turns[{i}]", f"expected Turn or dict, got {type(t).__name__}")
    return out


def _mean_vector(vectors: list[np.ndarray]) -> np.ndarray:
    v = np.mean(np.stack(vectors), axis=0) if len(vectors) > 1 else vectors[0]
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _check_query(query: Any) -> str:
    """Validate and bound a question (see ``retrieve``): cut first, so a huge query costs
    no more than ``MAX_QUERY_CHARS`` of cleaning; lone surrogates are replaced rather than
    rejected because the query is never stored, but a tokenizer would choke on them."""
    if not isinstance(query, str):
        raise InvalidInputError("query", f"expected str, got {type(query).__name__}")
    query = query.strip()
    if len(query) > MAX_QUERY_CHARS:
        query = query[-MAX_QUERY_CHARS:]
    query = _SURROGATE.sub("\ufffd", clean_text(query)).strip()
    if not query:
        raise InvalidInputError("query", "is empty or whitespace only")
    return query


def _mentions(entry: Entry, target_id: str) -> list[tuple[str, str, str]]:
    persons = {p.lower() for p in entry.persons}
    stems = {coarsening.stem(k) for k in entry.keywords}
    return [(p, s, target_id) for p in persons for s in stems]


def _attributes(entry: Entry, target_id: str) -> list[tuple[str, str, str, str, float | None]]:
    attrs = entry.metadata.get("attributes") or {}
    subject = (entry.speaker or "").lower()
    if not subject or not isinstance(attrs, Mapping):
        return []
    ts = entry.timestamp.timestamp() if isinstance(entry.timestamp, datetime) else None
    return [(subject, str(a).lower(), str(v), target_id, ts) for a, v in attrs.items()]
