"""Atomic extraction: a window of gated turns -> context-independent entries.

The :class:`Extractor` protocol is what the memory calls; :class:`RuleExtractor` is the
default, LLM-free implementation (see :mod:`.grounding` and :mod:`.dates` for the pronoun
and relative-time rules it applies). Extractors return entries without embeddings or scope: the memory
embeds all new entries of a window in one batch and stamps the scope itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from .. import text as lex
from ..limits import MAX_METADATA_CHARS, MAX_NAME_CHARS, MAX_TEXT_CHARS, bounded_list, split_text
from ..models import Entry, Turn, new_id, offset_of, to_utc
from . import grounding as g
from .segment import Segment, segment


@dataclass(slots=True)
class ExtractionContext:
    """What an extractor may know beyond the window itself.

    ``previous_turns``: the last few turns before the window in the same scope (oldest
    first), so "you" in the first turn of a window still resolves to the other party.
    ``participants``: speakers seen in this scope, in order of first appearance.
    """

    previous_turns: list[Turn] = field(default_factory=list)
    participants: list[str] = field(default_factory=list)


@runtime_checkable
class Extractor(Protocol):
    """Turns a window of gated turns into atomic entries.

    Every returned entry must list in ``source_turn_ids`` the ids of the window turns it
    came from (ids outside the window are a bug). Implementations must be thread-safe.
    """

    def extract(self, turns: Sequence[Turn], context: ExtractionContext) -> list[Entry]: ...


def other_party_for(turn: Turn, turns_before: Sequence[Turn], participants: Sequence[str]) -> str | None:
    """Who "you" is in ``turn``: the most recent different speaker before it (in the window
    or the context's previous turns), else another known participant, else None.

    In a two-party dialogue this is always the other person; in a group it is the one
    being answered, which is the best a rule can do without reading the content.
    """
    for prev in reversed(turns_before):
        if prev.speaker != turn.speaker:
            return prev.speaker
    return next((p for p in participants if p != turn.speaker), None)


#: An assistant's paragraphs, lists and tables are packed into chunks of at most this
#: many characters.
CHUNK_CHARS = 900
#: Characters of a block entry (list, table, code, chunk) that are embedded: its heading
#: or lead-in and first lines. Embedding whole blocks cost more than embedding every
#: message once several times over; the beginning of a block says what it is about, and
#: lexical retrieval (BM25) still indexes the whole text.
EMBED_CHARS = 200
#: Any embedded text is cut here: MiniLM reads at most 256 word pieces, so longer text
#: changes nothing in the vector and only costs tokenization.
MAX_EMBED_CHARS = 1000
#: Block kinds (``Entry.metadata["segment"]``) whose embedded text is cut to ``EMBED_CHARS``.
BLOCK_KINDS = frozenset({"list", "table", "code", "chunk"})


def is_note(turn: Turn) -> bool:
    """Whether a turn is a note written about the conversation (``metadata["note"] is True``,
    as the LangGraph store's ``put`` writes them), not something its speaker said: its
    entries are not prefixed with the speaker ("The user: Maya is vegetarian" would read as
    a transcript line) and are shown as restated, never as the speaker's own words."""
    return turn.metadata.get("note") is True


def is_block(entry: Entry) -> bool:
    """Whether an entry is a list, table, code block or assistant chunk (not a sentence)."""
    return entry.metadata.get("segment") in BLOCK_KINDS


def embedding_text(entry: Entry) -> str:
    """What is embedded for an entry (its text is stored and shown whole).

    Args:
        entry: A freshly extracted entry.

    Returns:
        The beginning of a block entry (see ``EMBED_CHARS``), else the text itself, at
        most ``MAX_EMBED_CHARS`` characters.
    """
    if is_block(entry):
        return entry.text[:EMBED_CHARS]
    return entry.text[:MAX_EMBED_CHARS]


#: Longest question quoted as embedding context (characters).
QUESTION_CONTEXT_CHARS = 200


def question_context(turns: Sequence[Turn], before: Turn | None = None) -> list[str | None]:
    """Per turn, the question it answers: the last sentence ending in "?" of the turn just
    before it when another speaker said it, else None.

    Why: a reply such as "Thanks! It's a mix of drama and romance!" names neither the
    screenplay nor its genre, so a question about the genre cannot find it by meaning.
    The memory embeds such an entry together with the question it answers ("What genre
    is your screenplay?"). Only the vector sees that context: the entry's text stays what
    was said, and nothing is invented.
    """
    out: list[str | None] = []
    prev = before
    for turn in turns:
        asked = None
        if prev is not None and prev.speaker != turn.speaker and "?" in prev.text:
            questions = [s.strip() for s in lex.SENTENCE_END.split(prev.text) if s.strip().endswith("?")]
            if questions:
                asked = questions[-1][:QUESTION_CONTEXT_CHARS]
        out.append(asked)
        prev = turn
    return out


#: Words that make a sentence an answer whatever else it says: yes, no and their kin.
ANSWER_WORDS = lex.NEGATIONS | {"yes", "yeah", "yep", "nope", "both", "either"}


def _answers(sentence: str) -> bool:
    """Whether a sentence says yes, no, both, either or neither ("No, never.", "Both.")."""
    return not ANSWER_WORDS.isdisjoint(lex.index_words(sentence))


def _chunk_body(seg: Segment, index: dict[str, str]) -> str | None:
    """What a segment adds to an assistant's chunk: a paragraph's content sentences (None
    when it is all chit-chat), any other block as it is."""
    if seg.kind != "prose":
        return seg.text
    sentences = [s for s in g.split_atomic(lex.normalize_text(seg.text)) if not g.is_chitchat(s, index)]
    return " ".join(sentences) if sentences else None


def cover(entries: list[Entry], turns: Sequence[Turn], context: ExtractionContext,
          rule: RuleExtractor) -> tuple[list[Entry], int]:
    """``entries`` plus rule entries for every window turn that no entry cites, so that
    every turn is covered by some entry's provenance (the safety net of any extractor).

    The rule extractor runs over the whole window, so "you" in a patched turn still
    resolves from the turns before it; its entries of covered turns are dropped.

    Args:
        entries: what an extractor returned for ``turns``.
        turns: the window.
        context: the window's context.
        rule: the rule extractor that patches.

    Returns:
        (the entries with the patch appended, how many turns were patched).
    """
    covered = {tid for e in entries for tid in e.source_turn_ids}
    missing = [t for t in turns if t.turn_id not in covered]
    if not missing:
        return entries, 0
    missing_ids = {t.turn_id for t in missing}
    patch = [e for e in rule.extract(list(turns), context)
             if e.source_turn_ids and set(e.source_turn_ids) <= missing_ids]
    got = {tid for e in patch for tid in e.source_turn_ids}
    if got != missing_ids:  # defensive: a rule entry spanning covered turns
        patch.extend(rule.extract([t for t in missing if t.turn_id not in got], context))
    return entries + patch, len(missing)


#: Metadata names the library reads on an entry: self-stated ``attributes``, the speaker's
#: own words (``said``) and the ids MERGEd into it (``merged_from``).
RESERVED_METADATA = ("attributes", "said", "merged_from")


def callers_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """A turn's metadata for its entries: a caller's value under a reserved name is kept
    as ``turn_<name>``, never read as the library's own (any extractor uses this)."""
    out = {k: v for k, v in metadata.items() if k not in RESERVED_METADATA}
    out.update({f"turn_{k}": metadata[k] for k in RESERVED_METADATA if k in metadata})
    return out


class RuleExtractor:
    """The default, LLM-free extractor of Phase I atomic extraction.

    One entry per turn, in input order: the memory gates each turn on its entries' vector
    and reuses these embeddings by text for an LLM extractor's output, so the entry text is
    exactly the turn's restatement (with the other party from :func:`other_party_for`).
    The restatement is lossless (every word of the turn is kept) but context-independent:
    pronouns resolved to names ("I'm at the park with my kids" said by Melanie becomes
    "Melanie is at the park with Melanie's kids"), relative time grounded to absolute
    dates, an attached image caption folded in (" [shared image: ...]"), and the speaker
    named ("Caroline: That's awesome!" when the grounded text does not name her).

    ``split_sentences=True`` instead gives one entry per content sentence (a sentence that
    opens on "it"/"that"/... stays with the one before it; chit-chat sentences are left
    out unless the turn has nothing else) plus one entry for an image caption.

    Stateless, hence thread-safe; about 0.1 ms per turn (precompiled regular expressions).
    """

    def __init__(self, *, split_sentences: bool = False,
                 assistant_speakers: Sequence[str] = ("assistant",)) -> None:
        self.split_sentences = split_sentences
        self.assistant_speakers = frozenset(s.lower() for s in assistant_speakers)

    def extract(self, turns: Sequence[Turn], context: ExtractionContext) -> list[Entry]:
        history = list(context.previous_turns)
        participants = list(context.participants)
        for t in (*history, *turns):
            if t.speaker not in participants:
                participants.append(t.speaker)
        index = lex.participant_index(participants)
        out: list[Entry] = []
        for turn in turns:
            other = other_party_for(turn, history, participants)
            if self.split_sentences:
                out.extend(self._sentence_entries(turn, other, index))
            else:
                out.append(self._entry(turn, lex.normalize_text(turn.text), other, index, whole_turn=True))
            history.append(turn)
        return [part for e in out for part in _within_limits(e)]

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _caption(turn: Turn) -> str | None:
        caption = turn.metadata.get("blip_caption") or turn.metadata.get("image_caption")
        if isinstance(caption, str):
            caption = lex.normalize_text(caption)
            return caption or None
        return None

    def _ground(self, turn: Turn, text: str, other: str | None) -> str:
        """Pronouns and relative time grounded, no speaker prefix (lines of a block)."""
        if not text:
            return ""
        grounded = g.ground_pronouns_ex(text, turn.speaker, other, assistant_speakers=self.assistant_speakers)[0]
        return g.ground_time(grounded, turn.timestamp)

    def _restate(self, turn: Turn, text: str, other: str | None, *, whole_turn: bool) -> tuple[str, bool]:
        """(restated text, whether "you" was resolved to ``other``)."""
        grounded, used_other = g.ground_pronouns_ex(text, turn.speaker, other,
                                                    assistant_speakers=self.assistant_speakers)
        grounded = g.ground_time(grounded, turn.timestamp)
        if not is_note(turn):
            grounded = g.name_speaker(grounded, turn.speaker, self.assistant_speakers)
        caption = self._caption(turn) if whole_turn else None
        if caption:
            grounded = f"{grounded} [shared image: {caption}]"
        return grounded, used_other

    def _entry(self, turn: Turn, text: str, other: str | None, index: dict[str, str], *,
               whole_turn: bool, caption_only: bool = False) -> Entry:
        caption = self._caption(turn) if whole_turn or caption_only else None
        if caption_only:
            restated, used_other = f"{turn.speaker} [shared image: {caption}]", False
            text = ""
        else:
            restated, used_other = self._restate(turn, text, other, whole_turn=whole_turn)
        found_persons, entities, surfaces = lex.scan_names(text, index) if text else ([], [], set())
        persons = [turn.speaker]
        if used_other and other:
            persons.append(other)
        persons.extend(p for p in found_persons if p not in persons)
        # Names are already in ``persons``; as keywords they would only add noise.
        names = surfaces.union(*(p.lower().split() for p in persons))
        words = lex.keywords(f"{text} {caption}" if caption else text, names)
        metadata = callers_metadata(turn.metadata)
        attributes = g.find_attributes(text) if text else {}
        if attributes:
            metadata["attributes"] = attributes
        # The speaker's own words, relative time grounded, kept when the restatement differs:
        # a reader answers from "Nate: I tried my hand at ..." as well as from "Nate tried
        # Nate's hand at ...", and echoes fewer rewritten fragments (Config.own_words).
        said = g.ground_time(text, turn.timestamp) if text else ""
        if said and caption:
            said = f"{said} [shared image: {caption}]"
        if said and restated not in (said, f"{turn.speaker}: {said}") and not is_note(turn):
            metadata["said"] = said
        return Entry(
            id=new_id("e-"),
            text=restated,
            keywords=words,
            persons=persons,
            entities=entities,
            location=g.find_location(text, persons, index) if text else None,
            topic=g.find_topic(words),
            # Stored in UTC, as every entry is read back; the speaker's offset is kept
            # for the calendar its dates were grounded in (``models.local_time``).
            timestamp=to_utc(turn.timestamp),
            first_timestamp=to_utc(turn.timestamp),
            embedding=None,
            source_turn_ids=[turn.turn_id or ""],
            speaker=turn.speaker,
            metadata=metadata | offset_of(turn.timestamp),
        )

    def _sentence_entries(self, turn: Turn, other: str | None, index: dict[str, str]) -> list[Entry]:
        segments = segment(turn.text)
        if len(segments) > 1 or (segments and segments[0].kind != "prose"):
            entries = self._block_entries(turn, segments, other, index)
        else:
            entries = self._prose_entries(turn, lex.normalize_text(turn.text), other, index, fallback=True)
        if self._caption(turn):
            entries.append(self._entry(turn, "", None, index, whole_turn=False, caption_only=True))
        return entries

    def _prose_entries(self, turn: Turn, text: str, other: str | None, index: dict[str, str], *,
                       fallback: bool) -> list[Entry]:
        """One entry per content sentence (``fallback``: the whole text when none is). A
        sentence with no content word that answers yes or no ("Great plan, thanks. No,
        never.", "Both.") is content: the answer, beside a courtesy that has a keyword."""
        sentences = [s for s in g.split_atomic(text) if not g.is_chitchat(s, index) or _answers(s)]
        if not sentences and fallback:
            sentences = [text]
        return [self._entry(turn, s, other, index, whole_turn=False) for s in sentences]

    def _block_entries(self, turn: Turn, segments: list[Segment], other: str | None,
                       index: dict[str, str]) -> list[Entry]:
        """Entries of a structured (multi-line, markdown) message.

        A person's (or the user's) paragraphs still give one entry per sentence: that is
        where people state facts about themselves; their lists and tables are one entry
        each. An assistant's replies are long and derived: their paragraphs, lists and
        tables are packed in order into chunks of up to ``CHUNK_CHARS`` (a sub-heading
        inlined where it changes), since sentence entries would multiply the embedding
        work and crowd the user's own statements out of every candidate list. A code
        block is always one entry, never cut. Every block entry starts with the heading
        path or lead-in it sits under, so it reads on its own.
        """
        if turn.speaker.lower() in self.assistant_speakers:
            out = self._assistant_chunks(turn, segments, other, index)
        else:
            out = []
            for seg in segments:
                if seg.kind == "prose":
                    out.extend(self._prose_entries(turn, lex.normalize_text(seg.text), other, index, fallback=False))
                else:
                    out.append(self._block_entry(turn, seg.kind, seg.context, seg.text, other, index, lang=seg.lang))
        if not out:  # nothing but chit-chat: keep the message as one entry (never lose a turn)
            out.append(self._entry(turn, lex.normalize_text(turn.text), other, index, whole_turn=False))
        return out

    def _assistant_chunks(self, turn: Turn, segments: list[Segment], other: str | None,
                          index: dict[str, str]) -> list[Entry]:
        """An assistant's blocks packed in order into chunks of up to ``CHUNK_CHARS`` (see
        :meth:`_block_entries`); a code block is its own entry and closes the chunk."""
        out: list[Entry] = []
        chunk: list[str] = []
        chunk_ctx = ""

        def close_chunk() -> None:
            if chunk:
                out.append(self._block_entry(turn, "chunk", chunk_ctx, "\n".join(chunk), other, index))
                chunk.clear()

        for seg in segments:
            if seg.kind == "code":
                close_chunk()
                out.append(self._block_entry(turn, seg.kind, seg.context, seg.text, other, index, lang=seg.lang))
                continue
            body = _chunk_body(seg, index)
            if body is None:
                continue
            if chunk and sum(map(len, chunk)) + len(body) > CHUNK_CHARS:
                close_chunk()
            if not chunk:
                chunk_ctx = seg.context
            elif seg.context != chunk_ctx and seg.context:
                body = f"{seg.context.rsplit(' > ', 1)[-1]}: {body}"
            chunk.append(body)
        close_chunk()
        return out

    def _block_entry(self, turn: Turn, kind: str, context: str, body: str, other: str | None,
                     index: dict[str, str], *, lang: str | None = None) -> Entry:
        """One entry for a list, table, code block or prose chunk (see ``_block_entries``).

        Code is kept verbatim (no pronoun or date rewriting: ``for i in range`` must stay
        code); other kinds are grounded like sentences, one line per item or row.
        """
        ctx = lex.normalize_text(context)
        if kind == "code":
            # The entry's vocabulary comes from the context and the code's first lines.
            entry = self._entry(turn, f"{ctx} {body[:EMBED_CHARS]}".strip(), other, index, whole_turn=False)
            lines = [f"```{lang or ''}", body, "```"]
        else:
            lines = [self._ground(turn, lex.normalize_text(ln), other) for ln in body.split("\n")]
            lines = [ln for ln in lines if ln]
            entry = self._entry(turn, f"{ctx}: {' '.join(lines)}" if ctx else " ".join(lines), other, index,
                                whole_turn=False)
        head = self._ground(turn, ctx, other)
        entry.text = f"{turn.speaker} ({kind}), {head}:\n" if head else f"{turn.speaker} ({kind}):\n"
        entry.text += "\n".join(lines)
        entry.metadata["segment"] = kind
        entry.metadata.pop("said", None)  # a block is shown as laid out above, never re-worded
        return entry


def _within_limits(entry: Entry) -> list[Entry]:
    """``entry`` within the limits every stored entry meets, split into consecutive
    entries if its text outgrew the text limit.

    A turn may be exactly at the limit, and restating it adds to it (the speaker prefix,
    "I" grounded as the speaker's name): the pieces keep every word, where cutting would
    lose the end and storing it whole would make an entry no import accepts. Keywords
    longer than a name (a 200,000-character "word") are dropped, and the speaker's own
    words (``said``) are kept only where they fit the metadata limit.
    """
    for name in ("keywords", "persons", "entities"):
        items = [x for x in getattr(entry, name) if len(x) <= MAX_NAME_CHARS]
        setattr(entry, name, bounded_list(items))
    if len(entry.text) <= MAX_TEXT_CHARS and len(json.dumps(entry.metadata, ensure_ascii=False)) <= MAX_METADATA_CHARS:
        return [entry]
    if len(json.dumps(entry.metadata, ensure_ascii=False)) > MAX_METADATA_CHARS:
        entry.metadata.pop("said", None)
    pieces = split_text(entry.text)
    entry.text = pieces[0]
    rest = [replace(entry, id=new_id("e-"), text=piece, metadata=dict(entry.metadata), keywords=list(entry.keywords),
                    persons=list(entry.persons), entities=list(entry.entities),
                    source_turn_ids=list(entry.source_turn_ids)) for piece in pieces[1:]]
    return [entry, *rest]
