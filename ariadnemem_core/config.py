"""Every threshold of the AriadneMem method, with the paper's defaults.

The values are grouped by phase. Each field's comment says what it means and where the
default comes from; departures from the paper are marked ``DEPARTURE`` and justified in
``docs/method.md`` and the README (measured with ``ariadnemem bench locomo``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, get_type_hints

from .errors import ConfigError

#: The orders :attr:`Config.fact_order` accepts.
FACT_ORDERS = ("time", "relevance")


#: What each kind of field must hold (see :meth:`Config._check_types`).
_KIND_NAMES = {"int": "a whole number", "int | None": "a whole number or None", "float": "a number (not NaN)",
               "bool": "True or False", "str": "a string", "tuple[str, ...]": "a list of strings"}
_NOT_OK = object()


def _plain(kind: str, value: Any) -> Any:
    """``value`` as the plain Python value of a field of ``kind``, or ``_NOT_OK``."""
    if kind == "int | None" and value is None:
        return None
    if _is_bool(value):
        return bool(value) if kind == "bool" else _NOT_OK
    if kind in ("int", "int | None"):
        if isinstance(value, numbers.Integral):
            return int(value)
        whole = isinstance(value, numbers.Real) and float(value).is_integer()
        return int(float(value)) if whole else _NOT_OK
    if kind == "float":
        number = isinstance(value, numbers.Real) and not math.isnan(value)
        return (value if isinstance(value, int) else float(value)) if number else _NOT_OK
    if kind == "str":
        return value if isinstance(value, str) else _NOT_OK
    if kind == "bool":
        return _NOT_OK
    names = isinstance(value, list | tuple | set | frozenset) and all(isinstance(v, str) for v in value)
    return tuple(value) if names else _NOT_OK  # tuple[str, ...]


def _is_bool(value: Any) -> bool:
    """A bool, Python's or NumPy's (``np.False_`` is no ``bool`` and no number)."""
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))


@dataclass(frozen=True, slots=True)
class Config:
    """Thresholds and switches. Frozen: derive variants with :meth:`replace`.

    Every field is a keyword argument of the constructor; each is documented below with
    its default, the paper's value and what was measured. Invalid values raise
    :class:`ConfigError` at construction.
    """

    # ---------------- Phase I: construction ----------------
    #: Turns buffered before one extraction call (paper: window W = 20).
    window_size: int = 20
    #: Gate redundancy threshold lambda_red: a turn whose nearest stored memory has cosine
    #: similarity above this *and* is younger than ``delta_short_s`` is dropped.
    #: DEPARTURE (paper: 0.6). The paper's value is calibrated for its embedding model; with
    #: all-MiniLM-L6-v2 on grounded dialogue, 0.6 dropped 29.5% of the turns of three LoCoMo
    #: dev conversations and with them 28.3% of the turns that questions cite as evidence
    #: (the gate could not tell redundancy from relevance). At 0.9 it drops 1.9% of turns
    #: and 0.6% of evidence turns: it removes near-repeats only. ``Config.paper()`` restores 0.6.
    lambda_red: float = 0.9
    #: ADDITION (the paper's gate is about information, its published rule only about
    #: redundancy): the low-information gate (``gating.low_information``). An entry with
    #: no specific value (number, date, code, URL, named entity, place), at most
    #: ``low_info_max_content_words`` content words (after stopwords and courtesy words) and
    #: its text, stripped of names, within cosine ``low_info_similarity`` of a phatic
    #: prototype ("Thanks!", "Hope this helps!") is not stored; a turn left with no entry is
    #: gated. Measured with MiniLM on the 7 LoCoMo dev conversations (9,390 rule entries,
    #: 943 evidence turns): at 0.55 it drops 5.5% of entries and gates 1.7% of turns and no
    #: evidence turn; at 0.45 it starts to gate evidence turns (2), at 0.6 it drops 4.0% of
    #: entries. On BEAM conversations 1-2 it drops 1.3% of entries (assistant sign-offs such
    #: as "If the user has any further questions ..., feel free to ask!"), no whole message.
    #: More content words than 2 admit almost nothing more (0.1% of entries) at more risk.
    low_info_similarity: float = 0.55
    low_info_max_content_words: int = 2
    #: Short-term horizon delta_short in seconds (paper: 1 h). Older look-alikes are
    #: long-term recurrence and pass the gate.
    delta_short_s: float = 3600.0
    #: Rule extraction granularity: one entry per content sentence (True) or per turn.
    #: Sentence-level entries are the paper's "atomic" entries; on two LoCoMo dev
    #: conversations they raised evidence recall at the same ~480-token cost (single-hop
    #: 0.63 -> 0.71, multi-hop 0.19 -> 0.34) because short facts pack more evidence into the
    #: budget and embed one statement each. Costs ~2.2x more embeddings at ingest.
    atomic_sentences: bool = True
    #: ADDITION (not in the paper): a rule-extracted entry of a turn that answers the other
    #: speaker's question is embedded together with that question (its text is unchanged;
    #: see ``extraction.question_context``). A reply like "It's a mix of drama and
    #: romance!" otherwise shares no meaning with "What genre is Joanna's screenplay?".
    #: On the LoCoMo dev set single-hop evidence recall rose from 82.3 to 85.1% (multi-hop
    #: 55.6 -> 53.4%, open-domain 54.6 -> 53.4%, temporal 84.0 -> 83.9%) at the same token
    #: cost; ingest slowed from 91 to 83 turns/s (longer texts to embed).
    context_embedding: bool = True
    #: ADDITION: speaker names (case-insensitive) that are an AI assistant rather than a
    #: person. An assistant's long markdown replies are stored as block entries (lists,
    #: tables, code, paragraph chunks) instead of one entry per sentence, and rank below
    #: what people said (``assistant_weight``); grounding calls them "the assistant"
    #: (and "user"/"human" "the user"), so a restatement reads "the user needs", never "user need".
    assistant_speakers: tuple[str, ...] = ("assistant", "ai", "bot", "chatbot")
    #: Coarsening similarity threshold lambda_coal.
    #: DEPARTURE (paper: 0.7). With MiniLM, 0.7 is "same topic": on one LoCoMo dev
    #: conversation 0.7 LINKed 646 of 844 new entries as "state updates", nearly all of them
    #: topical neighbours ("What made Melanie try pottery?" -> "Melanie chose pottery"), and
    #: every spurious update edge spends evidence budget on a "newer state". 0.85 keeps the
    #: real updates ("art show next month (August 2023)" -> "(September 2023)", cos 0.94)
    #: and cuts LINKs to 196; MERGE (cos > 0.9 in practice) is unaffected.
    lambda_coal: float = 0.85
    #: Keyword-overlap threshold lambda_ovlp (the paper gives no value). Overlap is the
    #: Jaccard index of the two entries' stemmed keyword sets (plus persons). A MERGE keeps
    #: only the old text, so it must be reserved for restatements that add nothing: 0.8
    #: means four fifths of the combined vocabulary is shared. Anything similar but less
    #: alike keeps both entries and LINKs them (nothing is lost). "the meeting is at 2 pm" /
    #: "the meeting moved to 3 pm" share {meeting, pm} of {meeting, moved, 2pm, 3pm, ...}:
    #: LINK. "I read chapter 1 about the Roman empire" / "... chapter 2 about the Ottoman
    #: empire" share 5 of 9 words (0.56): LINK, where 0.5 would have merged away "Ottoman".
    lambda_ovlp: float = 0.8
    #: ADDITION (not in the paper): a LINK needs update evidence, a changed value of one
    #: type in the same slot and no sign that both facts are true (``coarsening.
    #: update_evidence``); False is the paper's similarity-only rule. Without it, MiniLM's similarity LINKed small-talk
    #: paraphrases as "updates": 183 of 189 LINKs on dev conversation conv-26, each spending
    #: evidence budget on a "newer state". The pairs it rejects are ADDed: nothing is lost.
    link_requires_value_change: bool = True
    #: ADDITION: cosine floor of an update a change word marks ("instead", "moved to", "now";
    #: see ``coarsening.update_evidence`` and docs/concepts/coarsening.md). A restated fact
    #: with a changed value is usually 0.5-0.8 with MiniLM, far below ``lambda_coal``: on
    #: the hand-written update suite (tests/data/update_dialogues.json) the 0.85 rule
    #: linked 2 of 46 changes. The cued pairs there start at 0.46.
    lambda_link: float = 0.45
    #: ADDITION: cosine floor of an update no change word marks, for a value of which one
    #: holds at a time ("workouts at 7 pm" -> "workouts at 6 am"; a count or a name always
    #: needs a change word). At 0.45 with no cue, LoCoMo dev conv-26 got 61 LINKs, a sample
    #: of 30 across the dev set held no real update: two statements sharing a slot word
    #: and differing in a number or date are mostly two events.
    lambda_link_plain: float = 0.7
    #: ADDITION: floor when no typed value (time, date, amount, number, name) changed and
    #: only state words and a change cue vouch for the update ("the migration is blocked on
    #: the security review" -> "the review passed, the migration is in progress now", 0.80).
    #: The suite's such pairs are 0.72-0.80; LoCoMo small talk with "now" reaches 0.76,
    #: which is why a weak cue also needs a status word ("closed", "delivered").
    lambda_link_untyped: float = 0.65
    #: Dense candidates checked per new entry during coarsening (bounded, never all pairs).
    coarsen_candidates: int = 5

    # ---------------- Phase II: reasoning ----------------
    #: Dense candidates. DEPARTURE (paper: k_sem = 20): entries here are single sentences
    #: (about 2.1 per turn), so 20 dense candidates reach back over fewer turns than the
    #: paper's LLM-written entries do. With 30, evidence recall on the whole dev set rose in
    #: every category 1-4 (multi-hop 53.2 -> 53.8%, temporal 83.5 -> 84.0%, open-domain
    #: 51.4 -> 53.0%, single-hop 80.3 -> 81.3%) at the same token cost (the node and token
    #: budgets still decide what is shown); 40 dense + 20 lexical was worse (79.5% single-hop).
    k_sem: int = 30
    #: ADDITION: extra dense candidates when an assistant (``assistant_speakers``) takes
    #: part in the conversation: its many block entries fill dense top-k lists and are
    #: then downweighted, so fewer of the k_sem candidates would compete. On four BEAM dev
    #: conversations (71 questions) mean evidence recall rose from 59.9 to 66.2% with 20
    #: (65.0% with 40); LoCoMo has no assistant speaker, so it is unaffected there (k_sem
    #: = 50 for everyone cost 0.7 points on LoCoMo).
    k_sem_assistant: int = 20
    #: BM25 candidates. DEPARTURE (paper: k_lex = 5): on LoCoMo, BM25 alone is as strong
    #: as dense retrieval (flat top-30 evidence recall 67.8% vs 66.1%); with 15 lexical
    #: candidates multi-hop recall rose from 55.7% to 58.3% at the same token cost on
    #: three dev conversations (the node and token budgets still decide what is shown).
    k_lex: int = 15
    #: ADDITION: a question naming a known person is also embedded without the name
    #: ("Which TV series does mention watching?"); that vector draws its own ``k_sem``
    #: dense candidates, and every candidate's dense score is (1 - w) x its cosine to the
    #: question + w x its cosine to the nameless one (0: off). Why: a short sentence's
    #: MiniLM embedding is dominated by a name it shares with the question, so chat
    #: filler by that person ("Tim: Can't wait to catch up.") ranked with the evidence.
    #: The name still counts in the question's own vector. Retrieval only, fixed store, LoCoMo dev cat 1-4 recall
    #: 76.9% (off) -> 77.6 (w = 0.1), 78.2 (0.2), 79.4 (0.4), 79.8 (0.5), 79.9 (0.6-0.7),
    #: 79.2 (1.0) at the same tokens; at 0.5 multi-hop 51.8 -> 53.7, open-domain 55.7 ->
    #: 58.9, single-hop 85.1 -> 89.9, temporal 83.9 -> 83.1. BEAM dev unchanged (61.9%;
    #: 20 of its 200 questions name someone: "Have I submitted my cover letter to Greg?").
    #: On answers (QA bench, 200 LoCoMo questions, same local reader): 198 contexts and 89
    #: answers changed, average F1 26.4 -> 28.3 (paired 95% interval -1.7 to +5.3),
    #: multi-hop 22.6 -> 26.0, single-hop 47.4 -> 51.7, temporal 23.1 -> 20.8. Cost: a
    #: second query embedding and twice the dense candidates, latency bench warm p50
    #: 10.4 -> 12.8 ms.
    nameless_query_weight: float = 0.5
    #: ADDITION: the message floor, as a share of the token budget (0: off). The messages a
    #: flat hybrid search over the log would show in that share of the budget (RRF of
    #: cosine and BM25 over whole messages: the message view's mean entry vectors and
    #: words, ``store.message_index`` / ``message_lexical``) are shown first, each through
    #: its fact most similar to the question (so at most the tokens flat spends on it);
    #: the graph spends what is left. Why: flat retrieval over the raw log must be a floor
    #: the memory does not fall below. Retrieval only, fixed stores (LoCoMo dev cat 1-4 /
    #: BEAM 100K tune mean recall): off 79.8 / 61.9; 0.25: 79.8 / 63.9; 0.5: 79.5 / 64.8;
    #: 1.0: 78.5 / 66.3. At 1.0 LoCoMo multi-hop (51.3) and open-domain (51.7) fall below
    #: flat-hybrid@30 (52.0, 51.8): LoCoMo's short turns let flat fill the whole budget,
    #: leaving the graph nothing. 0.5 keeps every LoCoMo category at or above flat-hybrid@30
    #: (multi-hop 52.0, level) and takes BEAM +2.9 (preference_following 75.4 -> 86.0,
    #: information_extraction 59.2 -> 65.0, temporal 85.0 -> 90.0). The best messages by
    #: match alone as extra candidates (no floor) did nothing measurable (80.0 / 61.7).
    #: Held out (BEAM 500K, ten conversations never tuned on, same store): off 45.4, 0.5
    #: 47.8, paired +2.4 [1.1, 3.8]; 0.25 was between them on an earlier store.
    message_floor: float = 0.5
    #: Weight of the max-normalized BM25 score added to a candidate's cosine.
    lexical_weight: float = 0.15
    #: (A penalty for candidates naming none of the question's entities was measured and
    #: is not used: without it, retrieval only on fixed stores, LoCoMo dev cat 1-4 -0.2
    #: [-0.7, +0.4], BEAM 100K tune -0.1 [-0.8, +0.7], as one log -0.5 [-1.9, +0.9], BEAM
    #: 500K held out +0.4 [-0.1, +1.1]: within noise everywhere. The nameless question
    #: above already keeps a name from deciding the match.)
    #: Score multiplier for entries that only ask (``fusion.only_asks``: end with "?" and
    #: open as a question): a question asserts nothing a memory can answer from. On the
    #: LoCoMo dev set 25% of turns end with "?" but only 14% of the turns questions cite as
    #: evidence do. An entry that states before it asks is not lowered: an agent's user
    #: states their facts inside requests ("The user is moving the launch to May 3, can the
    #: assistant update the plan?"). Retrieval only, fixed stores, paired, against lowering
    #: every entry that ends with "?" (together with dropping reply context, which alone
    #: moved nothing: docs/concepts/retrieval.md): BEAM 100K tune +2.3 [+0.8, +4.2], as one
    #: log +1.3 [+0.2, +2.6], BEAM 500K held out +3.3 [+0.4, +6.2], LoCoMo dev cat 1-4 -0.1
    #: [-0.9, +0.7] with every category still at or above flat-hybrid@30. Not lowering
    #: questions at all (1.0) was as good on BEAM but took LoCoMo multi-hop below
    #: flat-hybrid@30 (49.7 against 52.0).
    question_penalty: float = 0.6
    #: ADDITION: the other entries of the same message as each of the ``message_context``
    #: best candidates join the candidates, scored ``message_weight`` x that candidate (0 =
    #: off). A message split into sentence entries can state a fact across two of them
    #: ("I joined a church last week." / "I wanted to feel closer to a community."); recall
    #: cannot see the difference (the turn is covered either way), only a reader can. With
    #: the same local reader on 198 LoCoMo dev questions (the QA bench, 50 per category),
    #: 5 (with ``group_by_turn``) against 0: +4.5 F1 on average (paired 95% interval +1.2
    #: to +7.9), single-hop 23.2 -> 42.2, open-domain 17.8 -> 14.6. What it costs in
    #: evidence recall (0 against 5, retrieval only on fixed stores): LoCoMo dev cat 1-4
    #: +2.1 [+1.4, +2.9] for 0 (477 instead of 459 tokens), BEAM 100K tune +3.0 [+1.4,
    #: +5.0], BEAM 500K held out +1.4 [+0.5, +2.5]: the budget the mates take goes to
    #: other facts. It stays at 5 until the QA bench is run again with 0.
    message_context: int = 5
    #: Score of a message mate relative to the hit whose message it completes: below the
    #: hit, so a mate never outranks the sentence that matched.
    message_weight: float = 0.8
    #: ADDITION: a message is shown whole only when its entries total at most this many
    #: tokens: a chat turn, not a document. Whole long messages filled the budget with
    #: one message: on BEAM dev (user-assistant, median message 460 tokens) recall fell
    #: 65.4 -> 60.5% with no limit, 63.1% at 150; LoCoMo's turns (99% under 75 tokens)
    #: are nearly all short.
    message_context_max_tokens: int = 150
    #: ADDITION (read-your-writes): a read also considers the latest this many turns that
    #: ``add`` stored and that wait for their window (``window_size``) which the reader may
    #: see, each whole turn one candidate scored like a memory (role "pending"), so what
    #: was just said, here or by another host sharing the store, is found before its window
    #: is extracted (0 = reads see extracted memories only). Twice a window: a backlog (an
    #: extractor that keeps failing) costs a read no more than this. No bench figure moves
    #: (every bench reads after the last flush); the cost is one indexed query per read and
    #: one embedding per pending turn (cached).
    pending_turns: int = 40
    #: Base-graph temporal edge: two terminals closer than this are connected (paper: 6 h).
    delta_time_s: float = 6 * 3600.0
    #: Bridge discovery only for disconnected terminal pairs this far apart (paper: 1-168 h).
    bridge_min_gap_s: float = 3600.0
    bridge_max_gap_s: float = 168 * 3600.0
    #: Non-terminal candidates considered per pair (paper: 5).
    bridge_candidates: int = 5
    #: Most terminal pairs bridged per query (keeps the cost bounded).
    max_bridge_pairs: int = 12
    #: Longest mined path in hops (paper: L = 3); paths have 2..L hops.
    max_path_hops: int = 3
    #: Paths kept after ranking.
    max_paths: int = 3
    #: Node budget range (paper: 8-25).
    min_nodes: int = 8
    max_nodes: int = 25
    #: Token budget of the serialized graph (``EvidenceGraph.to_text()``, cl100k): a hard
    #: limit, never exceeded whatever the entries' length; the node range above is a
    #: preference inside it (None: no token limit, max_nodes facts).
    token_budget: int | None = 500
    #: ADDITION: longest fact shown, in tokens. A longer entry (a list, a table, code, an
    #: assistant's paragraph chunk) is shown as a query-focused excerpt (``excerpt.py``)
    #: and stays fetchable whole by its id. Shorter facts fit more evidence into the
    #: budget: at 30 tokens (vs 60) BEAM recall rose 51.1 -> 57.1% (assistant_weight 0.6)
    #: and LoCoMo 75.5 -> 76.2% (three dev conversations); 25 was within a point of 30 on
    #: both and cuts most long sentences mid-clause, so 30 is the default.
    max_fact_tokens: int = 30
    #: ADDITION: serialize the facts drawn from one message on one line (``[F4,F5] "..."``)
    #: so a reader sees a turn's sentences together; off, each fact has its own line.
    #: Evidence recall cannot tell these apart (same facts); only a reader's answers can.
    #: Alone it changed 3 of 197 answers (+0.1 F1): the budget seldom keeps two sentences
    #: of one message; with ``message_context`` it shows the whole messages it brings.
    group_by_turn: bool = True
    #: DEPARTURE (paper: reasoning paths are part of the serialized context): show the
    #: mined paths to the reader as ``PATHS:`` lines. Off by default because a reader
    #: answered no better with them: on the 200-question QA bench (same local reader),
    #: removing them changed 44 contexts and no answer got worse (average F1 +0.5, paired
    #: 95% interval +0.0 to +1.2); they never change which facts are kept, and cost ~5
    #: tokens. The paths are still mined (``enable_paths``) and stay on the graph for
    #: pictures and the adapters' metadata. ``Config.paper()`` shows them.
    path_lines: bool = False
    #: ADDITION: show a sentence in its speaker's own words ("Nate: I tried my hand at the
    #: Street Fighter tournament (2022-05-01)") instead of its context-independent
    #: restatement ("Nate tried Nate's hand at ..."), where the extractor kept them (the
    #: rule extractor does; entries stored before it did are shown restated). Relative
    #: dates stay grounded; retrieval still reads the restatement. On because the reader
    #: answered no worse from them: on the 200-question QA bench (same local reader) the
    #: restatements instead scored 0.8 F1 lower on average (paired 95% interval -3.5 to
    #: +1.9; lower in 3 of 4 categories, single-hop +2.3) with 4 more context tokens, and
    #: a reader echoes a restatement's rewritten fragments ("Nate's hand") in its answers.
    #: Evidence recall costs a little, all of it at the token budget: LoCoMo dev cat 1-4
    #: 75.0% vs 75.3% with restatements, BEAM 61.9% vs 63.1%.
    own_words: bool = True
    #: ADDITION: the order of the serialized lines: "time" (oldest first, under date
    #: headers, as the paper's graph reads) or "relevance" (the line with the best-scored
    #: fact first, each line under its own date). "time" because the reader answered
    #: better from it: on the 200-question QA bench (same local reader) relevance order
    #: scored 1.4 F1 lower on average (paired 95% interval -4.4 to +1.9; single-hop -7.0,
    #: temporal -2.6, multi-hop +2.1) with 24 more context tokens.
    fact_order: str = "time"
    #: ADDITION: a question naming a day or month with its year ("in August 2023",
    #: ``periods.py``) also draws the ``k_period`` memories of that period most similar
    #: to it as candidates (0: off, the bonus too) ...
    k_period: int = 10
    #: ... and every candidate said within that period scores this much higher (x 1.5).
    #: Retrieval only, fixed store: LoCoMo dev cat 1-4 recall 75.1 -> 76.9% at the same
    #: tokens (0.2: 76.1, 0.4: 76.7, 0.6-1.0: 77.0), BEAM dev unchanged (61.9%). On
    #: answers (QA bench): 15 of 200 contexts changed, single-hop F1 41.9 -> 47.4.
    period_bonus: float = 0.5
    #: ADDITION: relevance floor on how well a candidate matches the question (cosine plus
    #: the BM25 bonus, before the ranking weights): candidates below it are left out even
    #: when the budget has room, so a question that little in memory answers gets a
    #: small graph, not filler. 0.15 cost no evidence on LoCoMo (three conversations) or
    #: BEAM (four); 0.2 lost one BEAM knowledge-update question, and a floor relative to
    #: the best score (0.5 x best) cost 9 points of BEAM recall.
    relevance_floor: float = 0.15
    #: ADDITION: score multiplier of entries said by an assistant (``assistant_speakers``):
    #: what the user said about themselves and their work ranks above the assistant's
    #: long derived replies, which stay retrievable. On four BEAM dev conversations, where
    #: 90% of the evidence is the user's own messages, mean recall was 46.4% at 1.0,
    #: 51.1% at 0.8, 57.1% at 0.6, 62.3% at 0.4 and 63.0% at 0.3 (30-token facts); 0.4
    #: keeps the assistant's replies in reach for questions about what it said.
    assistant_weight: float = 0.4

    # ---------------- switches (ablations) ----------------
    enable_gating: bool = True
    enable_low_info_gate: bool = True
    #: MERGE and LINK (``ablate("coarsening")`` ADDs every entry). Recall does not need
    #: it: on minus off -0.5 [-1.1, 0.0] on BEAM 100K tune and -0.2 [-1.0, +0.4] on BEAM
    #: 500K held out (paired, 179 questions each). It stays on for what it is for: a
    #: restated fact stored once (2,230 MERGEs in 10,080 held-out messages) and a changed
    #: one answered with its latest state (the update suites, bench-results/updates).
    enable_coarsening: bool = True
    enable_bridges: bool = True
    enable_paths: bool = True
    enable_fastpaths: bool = True

    def is_assistant(self, speaker: str | None) -> bool:
        """Whether ``speaker`` is one of ``assistant_speakers`` (case-insensitive).

        Args:
            speaker: a speaker name (None: not an assistant).

        Returns:
            True for an AI assistant's name.
        """
        low = (speaker or "").lower()
        return any(low == a.lower() for a in self.assistant_speakers)

    def __post_init__(self) -> None:
        self._check_types()
        # A config read back from JSON holds a list: keep the field hashable and immutable.
        object.__setattr__(self, "assistant_speakers", tuple(self.assistant_speakers))
        self._check_bounds()
        self._check_consistency()

    def _check_types(self) -> None:
        """Each field of its declared kind, stored as the plain Python value: a count a
        whole number (2.5 or NaN candidates crashed retrieval and left every turn pending),
        a weight a number but NaN (an infinite horizon is one), a switch a bool ("no" is
        truthy), the speakers a collection of names (a bare string became its letters).
        NumPy numbers and bools, and 20.0 for a count, are taken as their plain values."""
        for f in fields(self):
            value, kind = getattr(self, f.name), _FIELD_KINDS[f.name]
            plain = _plain(kind, value)
            if plain is _NOT_OK:
                raise ConfigError(f"{f.name} must be {_KIND_NAMES[kind]}, got {value!r:.60}")
            if plain is not value:
                object.__setattr__(self, f.name, plain)

    def _check_bounds(self) -> None:
        """Each numeric field within its own range (none negative, shares in [0, 1],
        counts >= 1)."""
        for name, kind in _FIELD_KINDS.items():
            value = getattr(self, name)
            if kind in ("int", "float", "int | None") and value is not None and value < 0:
                raise ConfigError(f"{name} must not be negative, got {value!r}")
        for name in ("message_floor", "lambda_red", "lambda_coal", "lambda_ovlp", "relevance_floor", "assistant_weight",
                     "low_info_similarity", "lambda_link", "lambda_link_plain", "lambda_link_untyped",
                     "nameless_query_weight"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1], got {value!r}")
        for name in ("window_size", "k_sem", "k_lex", "bridge_candidates", "coarsen_candidates",
                     "min_nodes", "max_nodes", "max_paths"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.max_path_hops < 2:
            raise ConfigError("max_path_hops must be >= 2 (paths have 2..L hops)")
        if self.max_fact_tokens < 8:
            raise ConfigError(f"max_fact_tokens must be >= 8, got {self.max_fact_tokens!r}")
        if self.token_budget is not None and self.token_budget < 1:
            raise ConfigError(f"token_budget must be >= 1 or None, got {self.token_budget!r}")

    def _check_consistency(self) -> None:
        """The remaining fields, alone and against each other (min <= max, known names)."""
        if self.low_info_max_content_words < 0:
            raise ConfigError("low_info_max_content_words must be >= 0")
        if self.message_context < 0 or self.message_context_max_tokens < 1:
            raise ConfigError("need message_context >= 0 and message_context_max_tokens >= 1")
        if self.min_nodes > self.max_nodes:
            raise ConfigError("min_nodes must not exceed max_nodes")
        if not 0 <= self.bridge_min_gap_s <= self.bridge_max_gap_s:
            raise ConfigError("need 0 <= bridge_min_gap_s <= bridge_max_gap_s")
        if self.k_period < 0 or self.period_bonus < 0:
            raise ConfigError("need k_period >= 0 and period_bonus >= 0")
        if self.fact_order not in FACT_ORDERS:
            raise ConfigError(f"fact_order must be one of {', '.join(FACT_ORDERS)}, got {self.fact_order!r}")
        if self.delta_short_s < 0 or self.delta_time_s < 0:
            raise ConfigError("time horizons must be non-negative")

    @classmethod
    def paper(cls, **changes: Any) -> Config:
        """The paper's published thresholds and candidate counts where this project departs
        from them (the additions, such as the question penalty, stay on: switch them off by name).

        Args:
            **changes: fields to set on top of the paper's values.

        Returns:
            The configuration.
        """
        paper = {"lambda_red": 0.6, "lambda_coal": 0.7, "k_sem": 20, "k_lex": 5,
                 "link_requires_value_change": False, "context_embedding": False, "path_lines": True}
        return cls(**(paper | changes))

    def replace(self, **changes: Any) -> Config:
        """A copy with ``changes`` applied (validated).

        Args:
            **changes: fields to change.

        Returns:
            The new configuration.

        Raises:
            ConfigError: an invalid value.
        """
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Every field by name (for result files; :meth:`from_dict` reverses it).

        Returns:
            The fields by name.
        """
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        """A configuration from :meth:`to_dict` output (missing fields take their defaults).

        Args:
            data: fields by name.

        Returns:
            The configuration.

        Raises:
            ConfigError: an unknown field or an invalid value.
        """
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown config fields: {sorted(unknown)}")
        return cls(**data)

    #: Ablation names understood by :meth:`ablate` (and ``ariadnemem bench --ablate``).
    ABLATIONS = ("gating", "low_info_gate", "coarsening", "bridges", "paths", "fastpaths")

    def ablate(self, *names: str) -> Config:
        """Switch components off by name: ``Config().ablate("bridges")``.

        Args:
            *names: components from :attr:`ABLATIONS`.

        Returns:
            The configuration with those components off.

        Raises:
            ConfigError: an unknown name.
        """
        changes: dict[str, bool] = {}
        for name in names:
            if name not in self.ABLATIONS:
                raise ConfigError(f"unknown ablation {name!r}; choose from {self.ABLATIONS}")
            changes[f"enable_{name}"] = False
        return self.replace(**changes)


#: Each field's declared kind, by name (resolved once: the annotations are strings here).
_FIELD_KINDS: dict[str, str] = {name: str(kind).removeprefix("<class '").removesuffix("'>")
                                for name, kind in get_type_hints(Config).items()}
