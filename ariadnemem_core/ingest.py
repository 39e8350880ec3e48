"""Phase I, the write path: pending turns -> gate -> extract -> embed -> coarsen -> commit.

Each full window of ``Config.window_size`` turns of one scope is processed as a unit and
committed in one store transaction (its pending turns, the entries they became, the update
edges, counters and attributes), so a crash leaves either the pending turns or their
entries. The steps live in their own modules (:mod:`.gating`, :mod:`.extraction`,
:mod:`.coarsening`); this one wires them, as :mod:`.reasoning` does for Phase II.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

import numpy as np

from . import coarsening, gating
from .config import Config
from .embedding import Embedder
from .errors import ExtractionError, InvalidInputError, StoreError
from .extraction import ExtractionContext, Extractor, RuleExtractor, embedding_text, is_block, question_context
from .extraction.rules import cover
from .limits import check_entry, replace_surrogates
from .models import Entry, Scope, Turn, UpdateEdge
from .store import PendingConflict, Store, WindowCommit
from .text import says_nothing_new, stem

#: Entries of the current window each new entry is compared with during coarsening (the
#: most recent ones). Comparing with every earlier entry of the window made one long turn
#: quadratic: a 200,000-character turn of short sentences is ~10,000 entries.
MAX_WINDOW_CANDIDATES = 256
#: Neighbours fetched per one kept when gating and coarsening compare within one scope
#: (other agents' and sessions' entries of the user are skipped).
SCOPE_OVERFETCH = 4
#: Times a scope's extraction is redone after another writer committed its turns first.
MAX_CONFLICT_RETRIES = 8


class Ingestor:
    """Runs Phase I for a memory: owns the rule extractor and the extractor in use.

    Args:
        store: where pending turns are read and windows committed.
        embedder: embeds entries (one batch per call of :meth:`process`).
        config: window size, gating and coarsening parameters.
        extractor: the extractor; None for the rule extractor.
    """

    def __init__(self, store: Store, embedder: Embedder, config: Config, extractor: Extractor | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.rule = RuleExtractor(split_sentences=config.atomic_sentences,
                                  assistant_speakers=config.assistant_speakers)
        self.extractor: Extractor = extractor or self.rule

    def process(self, scope: Scope, *, full_only: bool) -> None:
        """Extract the scope's pending turns: every full window, or (``full_only=False``)
        every pending turn, partial window included.

        Extraction and embedding run *without* the store's write lock, which is taken
        only to commit each window (readers and other writers wait for a commit, never
        for an LLM). Two processes may therefore extract the same pending turns; the
        commit checks they are still pending, and the slower one drops its stale window
        and re-reads what is left (:class:`~ariadnemem_core.store.PendingConflict`).

        Args:
            scope: whose pending turns.
            full_only: leave a partial last window pending (``add``) or not (``flush``).
        """
        if full_only and len(self.store.pending(scope)) < self.config.window_size:
            # No full window: nothing to claim (a server backend's claim is two round
            # trips). The add that completes a window sees every turn committed before it.
            return
        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                # A backend shared by several hosts lets one worker at a time extract a
                # scope (the embedded one claims nothing and relies on the commit check).
                with self.store.claim(scope):
                    self._process(scope, full_only=full_only)
                return
            except PendingConflict:
                continue
        raise StoreError(f"gave up extracting the pending turns of {scope.user_id!r} after "
                         f"{MAX_CONFLICT_RETRIES} conflicts with other writers; they stay pending")

    def _process(self, scope: Scope, *, full_only: bool) -> None:
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
        # Turn ids may repeat (callers' message ids): inside this run each turn gets a
        # unique working id, so every entry maps back to exactly one turn; entries are
        # given the caller's ids back before they are committed.
        turns, aliases = _unique_ids([t for _, _, t in rows])
        # The rule extractor runs over every window up front (it is cheap) and all its
        # entries are embedded in one batch: the model is far faster on one large batch
        # than on many small ones. A turn's gate vector is the normalized mean of its
        # atomic entries' vectors, so the rule path embeds each piece of text once.
        context = ExtractionContext(list(previous), list(participants))
        rule_entries, poison = self._rule_extract(turns, context)
        if poison:
            # A turn the rule extractor cannot handle would fail every later flush of
            # every user: it is quarantined with its reason and the others go on.
            self.store.quarantine_pending([(rows[i][0], reason) for i, reason in poison.items()])
            raise PendingConflict("poison turns quarantined; re-reading the pending turns")
        owner = _owners(rule_entries, turns)
        texts = [embedding_text(e) for e in rule_entries]
        # Per turn, the question it answers: embedding context and the gate's exception.
        asked = question_context(turns, previous[-1] if previous else None)
        if self.config.context_embedding:
            # Block entries (lists, code, an assistant's chunks) carry their own heading.
            texts = [f"{asked[j]} {t}" if asked[j] and not is_block(e) else t
                     for e, t, j in zip(rule_entries, texts, owner, strict=True)]
        vectors = self.embedder.embed(texts) if rule_entries else np.zeros((0, 1))
        # Vectors of the plain text, reusable for an LLM entry that says exactly the same.
        plain = {e.id for e, t in zip(rule_entries, texts, strict=True) if t == e.text}
        per_turn: list[list[Entry]] = [[] for _ in turns]
        for e, v, j in zip(rule_entries, vectors, owner, strict=True):
            e.embedding = v
            per_turn[j].append(e)
        empty = {i: "the rule extractor returned no entry for this turn"
                 for i, group in enumerate(per_turn) if not group}
        if empty:
            self.store.quarantine_pending([(rows[i][0], reason) for i, reason in empty.items()])
            raise PendingConflict("turns without entries quarantined; re-reading the pending turns")
        history = list(previous)
        for start in range(0, n, size):
            window = [(seq, sc, t) for (seq, sc, _), t in zip(rows[start : start + size],
                                                                turns[start : start + size], strict=True)]
            before = history[-self.store.RECENT_TURNS :]
            self._process_window(scope, window, per_turn[start : start + size], before, participants, plain,
                                 asked[start : start + size], aliases)
            history.extend(rows[k][2] for k in range(start, min(start + size, n)))

    def _rule_extract(self, turns: list[Turn], context: ExtractionContext) -> tuple[list[Entry], dict[int, str]]:
        """The rule extractor over every turn; if it fails, turn by turn to find the
        poison ones (returned by index with the error) instead of failing them all."""
        try:
            return self.rule.extract(turns, context), {}
        except Exception:
            pass
        entries: list[Entry] = []
        poison: dict[int, str] = {}
        for i, t in enumerate(turns):
            try:
                entries.extend(self.rule.extract([t], context))
            except Exception as exc:
                poison[i] = f"rule extraction failed: {type(exc).__name__}: {exc}"
        if len(poison) == len(turns) > 1:
            # Every turn fails: the extractor is broken, not the turns; keep them pending.
            raise ExtractionError(f"rule extraction fails on every turn: {next(iter(poison.values()))}")
        return entries, poison

    def _process_window(self, scope: Scope, rows: list[tuple[int, Scope, Turn]],
                        per_turn: list[list[Entry]], previous: list[Turn], participants: list[str],
                        plain: set[str], asked: list[str | None], aliases: dict[str, str]) -> None:
        """Gate, extract, embed and coarsen one window, then commit it. ``aliases`` maps
        the working ids of this run back to the caller's turn ids (see ``_unique_ids``);
        it is per call, not per object, because several users' windows may be processed
        at once in one process."""
        cfg = self.config
        turns = [t for _, _, t in rows]
        vectors = np.stack([_mean_vector([e.vector for e in group]) for group in per_turn])
        stats: dict[str, int] = {"extract_windows": 1}
        # The turn each reply answers (never its redundant twin, see gating.gate_window).
        answered = [(turns[i - 1] if i else previous[-1]).turn_id if q else None for i, q in enumerate(asked)]
        stored = self._nearest(scope, vectors, answered) if cfg.enable_gating else [None] * len(turns)
        decisions = gating.gate_window(
            vectors, [t.timestamp for t in turns], [t.turn_id or "" for t in turns], stored, cfg, answered
        )
        keep = [d.keep for d in decisions]
        if not all(keep):
            keep = self._confirm_repeats(scope, per_turn, keep)
        # A repeat that stays out of the memory is still a turn that said it: its id joins
        # the provenance of the memory it repeats (below), so nothing it said is lost.
        echoes = {i: d.nearest.id for i, d in enumerate(decisions)
                  if not keep[i] and d.reason == "redundant" and d.nearest is not None}
        # A reply to a question that ends the turn before it is an answer, never courtesy.
        replies = [bool(q) and _ends_asking((turns[i - 1] if i else previous[-1]).text) for i, q in enumerate(asked)]
        per_turn, keep = gating.drop_low_information(per_turn, keep, self.embedder, cfg, stats, replies)
        kept = [t for t, k in zip(turns, keep, strict=True) if k]
        stats["gate_kept"] = len(kept)
        stats["gate_dropped"] = len(turns) - len(kept)

        rule_kept = [e for group, k in zip(per_turn, keep, strict=True) if k for e in group]
        if self.extractor is self.rule:
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
            e.source_turn_ids = list(dict.fromkeys(aliases.get(t, t) for t in e.source_turn_ids))
        originals = [replace(t, turn_id=aliases[t.turn_id]) if t.turn_id in aliases else t
                     for t in turns]
        commit = WindowCommit(scope=scope, processed_pending=[s for s, _, _ in rows],
                              processed_turns=originals, stats=stats)
        self._coarsen(scope, entries, commit)
        if echoes:
            self._echo(scope, {turns[i].turn_id or "": near for i, near in echoes.items()}, commit, aliases)
        self.store.commit_window(commit)

    def _confirm_repeats(self, scope: Scope, per_turn: list[list[Entry]], keep: list[bool]) -> list[bool]:
        """A turn the gate found redundant as a whole stays out only when what it says is
        already there: every entry of it is a near-repeat (cosine > ``lambda_red``) of a
        stored memory or of an entry of a turn kept in this window that says all it says,
        in the same order, negations included (:func:`~.text.says_nothing_new`). A message
        that repeats one thing and adds another ("... Also my budget is $40.") is kept, and
        so is one that differs by a "not", a letter ("seat 14C"), a sign or a swapped
        order ("Bob owes Alice"), which a cosine above 0.9 does not tell apart."""
        doubtful = [i for i, k in enumerate(keep) if not k and per_turn[i]]
        if not doubtful:
            return keep
        lam = self.config.lambda_red
        kept = [e for j, k in enumerate(keep) if k for e in per_turn[j]]
        mine = [e for i in doubtful for e in per_turn[i]]
        mat = np.stack([e.vector for e in mine])
        hits, found = self._in_scope(scope, mat, 1)  # the write's own scope only
        stored = {h[0][0]: found[h[0][0]] for h in hits if h and h[0][1] > lam}
        near: dict[str, list[Entry]] = {
            e.id: [stored[h[0][0]]] if h and h[0][0] in stored else [] for e, h in zip(mine, hits, strict=True)}
        if kept:
            sims = mat @ np.stack([e.vector for e in kept]).T
            for e, row in zip(mine, sims, strict=True):
                near[e.id] += [kept[j] for j in np.flatnonzero(row > lam)]
        out = list(keep)
        for i in doubtful:
            out[i] = not all(any(says_nothing_new(e.text, n.text) for n in near[e.id]) for e in per_turn[i])
        return out

    def _echo(self, scope: Scope, echoes: dict[str, str], commit: WindowCommit, aliases: dict[str, str]) -> None:
        """Add each gated repeat's turn id to the provenance of the memory it repeats (a
        stored entry, or the entries of the window's turn it repeats)."""
        window = [*commit.added, *commit.merged]
        # The caller's ids, as the window's entries carry them (a repeat of a stored
        # memory names that entry's id, which has no alias).
        pairs = [(aliases.get(turn_id, turn_id), aliases.get(near, near)) for turn_id, near in echoes.items()]
        found = {e.id: e for e in commit.merged}
        in_window = {t for e in window for t in e.source_turn_ids}
        stored_ids = {near for _, near in pairs if near not in found and near not in in_window}
        found.update(self.store.get(stored_ids, scope.user_id))
        for turn_id, near in pairs:
            targets = [e for e in window if near in e.source_turn_ids][:1] or (
                [found[near]] if near in found else [])
            for target in targets:
                if turn_id not in target.source_turn_ids:
                    target.source_turn_ids.append(turn_id)
                    if target not in window:
                        commit.merged.append(target)
                        window.append(target)

    def _in_scope(self, scope: Scope, vectors: np.ndarray, k: int) -> tuple[list[list[tuple[str, float]]],
                                                                             dict[str, Entry]]:
        """The ``k`` nearest stored entries of *exactly* ``scope`` per vector, and the entries.

        A read scope without an agent means "every agent", but a write compares only
        with its own scope: a fact stored for ``agentA`` must neither gate away nor absorb
        the same fact written for the user without agent. When another scope's entries
        come back, the search is repeated for more neighbours and those of the scope are
        kept (a scope alone in its user's memory is searched exactly as before)."""
        for fetch in (k, k * SCOPE_OVERFETCH):
            hits = self.store.dense_search(scope, vectors, fetch)
            found = self.store.get({i for h in hits for i, _ in h}, scope.user_id)
            same = {i: e for i, e in found.items()
                    if (e.agent_id, e.session_id) == (scope.agent_id, scope.session_id)}
            if len(same) == len(found):
                break
        return [[(i, s) for i, s in h if i in same][:k] for h in hits], same

    def _nearest(self, scope: Scope, vectors: np.ndarray,
                 answered: list[str | None]) -> list[gating.Neighbor | None]:
        """Each turn's nearest stored memory, skipping the turn whose question it answers."""
        hits, found = self._in_scope(scope, vectors, 2)
        out: list[gating.Neighbor | None] = []
        for h, skip in zip(hits, answered, strict=True):
            near = [(i, sim) for i, sim in h if i in found and skip not in found[i].source_turn_ids]
            out.append(gating.Neighbor(near[0][0], near[0][1], found[near[0][0]].timestamp) if near else None)
        return out

    def _extract(self, turns: list[Turn], context: ExtractionContext, stats: dict[str, int]) -> list[Entry]:
        """Run the extractor with a safety net: bad provenance is repaired, uncovered turns
        are rule-extracted, and a failing extractor falls back to rules (counted)."""
        if not turns:
            return []
        try:
            entries = list(self.extractor.extract(turns, context))
        except Exception as exc:  # any extractor failure: never lose the window
            if self.extractor is self.rule:
                raise ExtractionError(f"rule extraction failed: {exc}") from exc
            stats["extract_fallbacks"] = stats.get("extract_fallbacks", 0) + 1
            entries = []
        if any(e.metadata.get("extractor") == "rule-fallback" for e in entries if isinstance(e.metadata, dict)):
            # The LLM extractor fell back to rules internally (it does not raise).
            stats["extract_fallbacks"] = stats.get("extract_fallbacks", 0) + 1
        valid, patched = cover(_grounded(entries, turns), turns, context, self.rule)
        if patched and self.extractor is not self.rule:
            stats["extract_patched_turns"] = stats.get("extract_patched_turns", 0) + patched
        return valid

    def _coarsen(self, scope: Scope, entries: list[Entry], commit: WindowCommit) -> None:
        cfg = self.config
        stored_hits: list[list[tuple[str, float]]] = [[] for _ in entries]
        stored: dict[str, Entry] = {}
        if cfg.enable_coarsening and entries:
            stored_hits, stored = self._in_scope(scope, np.stack([e.vector for e in entries]),
                                                 cfg.coarsen_candidates)
        merged: dict[str, Entry] = {}
        window: list[Entry] = []  # entries ADDed or LINKed in this window, in order
        linked: set[str] = set()  # entries given a newer state in this window (one each)
        counts = {"merge": 0, "link": 0, "add": 0}
        around = _surroundings(entries)
        # Every person known in the scope: a shared name is a subject, never a shared slot.
        names = frozenset(self.store.known_persons(scope.user_id)) | frozenset(
            p.lower() for e in entries for p in (*e.persons, *e.entities))
        for entry, hits in zip(entries, stored_hits, strict=True):
            candidates = [(merged.get(i) or stored[i], s) for i, s in hits if i in stored]
            if window and cfg.enable_coarsening:
                # The window's latest entries only: a normal window never has this many,
                # and one 200,000-character turn (10,000 sentences) stays linear.
                recent = window[-MAX_WINDOW_CANDIDATES:]
                sims = np.stack([w.vector for w in recent]) @ entry.vector
                candidates += list(zip(recent, (float(s) for s in sims), strict=True))
            tid = entry.source_turn_ids[0] if entry.source_turn_ids else ""
            decision = coarsening.decide(entry, candidates, cfg, around.get(tid), names, linked)
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
                for older in (decision.target_id or "", *decision.also):
                    commit.edges.append(UpdateEdge(older, entry.id, "update",
                                                   decision.similarity, decision.overlap))
                    linked.add(older)
            window.append(entry)
            commit.mentions.extend(_mentions(entry, entry.id))
            commit.attributes.extend(_attributes(entry, entry.id))
        commit.added = window
        commit.merged = list(merged.values())
        for k, v in counts.items():
            commit.stats[k] = commit.stats.get(k, 0) + v


def _owners(entries: list[Entry], turns: list[Turn]) -> list[int]:
    """The index into ``turns`` of each entry's source turn."""
    index = {t.turn_id: i for i, t in enumerate(turns)}
    owner: list[int] = []
    for e in entries:
        j = index.get(e.source_turn_ids[0] if e.source_turn_ids else None)
        if j is None:
            raise ExtractionError("rule extractor returned an entry for a turn it was not given")
        owner.append(j)
    return owner


def _grounded(entries: list[Entry], turns: list[Turn]) -> list[Entry]:
    """The extractor's usable entries, each citing only turns of the window (once each)
    and dated from them when it carries no date; the turns of dropped entries are
    rule-extracted by ``cover``, like any uncovered turn."""
    by_id = {t.turn_id: t for t in turns}
    valid: list[Entry] = []
    for e in entries:
        if not _usable(e):
            continue
        e.source_turn_ids = [tid for tid in dict.fromkeys(e.source_turn_ids) if tid in by_id]
        if not e.source_turn_ids or not e.text.strip():
            continue
        if e.timestamp is None:
            stamps = [ts for t in e.source_turn_ids if (ts := by_id[t].timestamp) is not None]
            e.timestamp = max(stamps) if stamps else None
        if e.first_timestamp is None:
            e.first_timestamp = e.timestamp
        valid.append(e)
    return valid


def _surroundings(entries: list[Entry]) -> dict[str, coarsening.Surroundings]:
    """What was said around each entry, read once per turn: a change cue in its turn or
    the turn before ("Plot twist:", "Laura left the agency." before "invoices will go to
    Marcus Webb") vouches for the sentence that carries the new value."""
    said: dict[str, list[Entry]] = {}
    for entry in entries:
        for tid in entry.source_turn_ids[:1]:
            said.setdefault(tid, []).append(entry)
    previous = dict(zip(list(said)[1:], list(said), strict=False))
    return {tid: coarsening.Surroundings(own, said.get(previous.get(tid, ""), ())) for tid, own in said.items()}


def _unique_ids(turns: list[Turn]) -> tuple[list[Turn], dict[str, str]]:
    """``turns`` with repeated ids made unique (``msg-1``, ``msg-1#2``), and the map from
    each working id back to the caller's id."""
    seen: set[str] = {t.turn_id or "" for t in turns}
    counts: dict[str, int] = {}
    out: list[Turn] = []
    aliases: dict[str, str] = {}
    for t in turns:
        tid = t.turn_id or ""
        counts[tid] = counts.get(tid, 0) + 1
        if counts[tid] == 1:
            out.append(t)
            continue
        k = counts[tid]
        alias = f"{tid}#{k}"
        while alias in seen:
            k += 1
            alias = f"{tid}#{k}"
        seen.add(alias)
        aliases[alias] = tid
        out.append(replace(t, turn_id=alias))
    return out, aliases


def _usable(entry: Entry) -> bool:
    """Whether an extractor's entry is within the limits every stored entry must meet
    (an LLM can return a 5 MB "fact" or a lone surrogate): the same check as imports.
    Lone surrogates are replaced first, since the model, not the caller, wrote them."""
    entry.text = replace_surrogates(entry.text) if isinstance(entry.text, str) else entry.text
    for name in ("keywords", "persons", "entities"):
        value = getattr(entry, name)
        if isinstance(value, list):
            setattr(entry, name, replace_surrogates(value))
    try:
        check_entry(entry)
    except InvalidInputError:
        return False
    return True


def _mean_vector(vectors: list[np.ndarray]) -> np.ndarray:
    v = np.mean(np.stack(vectors), axis=0) if len(vectors) > 1 else vectors[0]
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


#: Bound: longest word (characters) kept in the mention index. A script written without
#: spaces makes one word of a whole run (1,000 Han characters: 3,000 bytes), which no
#: counter question names and which a server's index cannot hold (Postgres refuses a
#: key over 2,704 bytes: the window would fail at every flush).
MAX_MENTION_CHARS = 100


def _mentions(entry: Entry, target_id: str) -> list[tuple[str, str, str]]:
    persons = {p.lower() for p in entry.persons if len(p) <= MAX_MENTION_CHARS}
    stems = {s for k in entry.keywords if len(s := stem(k)) <= MAX_MENTION_CHARS}
    return [(p, s, target_id) for p in persons for s in stems]


def _attributes(entry: Entry, target_id: str) -> list[tuple[str, str, str, str, float | None]]:
    attrs = entry.metadata.get("attributes") or {}
    subject = (entry.speaker or "").lower()
    if not subject or not isinstance(attrs, Mapping):
        return []
    ts = entry.timestamp.timestamp() if isinstance(entry.timestamp, datetime) else None
    return [(subject, str(a).lower(), str(v), target_id, ts) for a, v in attrs.items()]


def _ends_asking(text: str) -> bool:
    """Whether a text ends by asking: its last "?" is followed only by spaces, punctuation
    or emoji. A walk back from the end (linear: a regex anchored at the end re-scanned a
    run of "?" from each of them, minutes on a 200,000-character turn)."""
    end = len(text)
    while end and not text[end - 1].isalnum():
        end -= 1
    return "?" in text[end:]
