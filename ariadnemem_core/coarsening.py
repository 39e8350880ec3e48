"""Phase I, step 3: conflict-aware coarsening (MERGE / LINK / ADD).

For each new entry, a bounded set of dense candidates (``Config.coarsen_candidates``
nearest stored entries plus the entries added earlier in the same window; never all
pairs) is checked with the paper's three cases:

* sim > lambda_coal and overlap > lambda_ovlp -> MERGE: the same fact again. The old
  entry stays, its timestamp is refreshed and the new entry's provenance is added to it.
* LINK: the new entry states a newer value of the slot an older one fills (2 pm -> 3 pm).
  Both stay, and a persisted edge old -> new records the update.
* otherwise -> ADD.

The paper LINKs on similarity alone (sim > lambda_coal, low overlap). With MiniLM that is
both too strict and too loose: a restated fact with a changed value is usually 0.5-0.8
cosine (the 0.85 rule linked 2 of 46 changes of the project's update suite), while two
paraphrases of small talk pass 0.85 without updating anything (183 of 189 such LINKs on
LoCoMo dev conv-26). So :func:`update_evidence` decides a LINK from what an update is made
of: the same subject, a shared slot word, a changed value of one type (time, date, amount,
number, contact, name) and, raising confidence, change wording ("instead", "moved to",
"now"); :func:`co_true` rejects pairs that can both be true (two people, two objects of a
kind, a habit and a one-off, two dated episodes). With an LLM extractor the entries'
normalized (subject, attribute, value) states decide instead (:func:`llm_state`). The
rule and its knobs are explained in docs/concepts/coarsening.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from enum import StrEnum

from .config import Config
from .limits import bounded_list
from .models import Entry, local_time
from .text import MONTHS, STOPWORDS, TITLES, WEEKDAY_ABBR, WEEKDAYS, letter_words, says_nothing_new, stem, value_tokens


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
    #: Further older entries the new one supersedes on a LINK (a request and its
    #: confirmation both state the old value: "set my alarm for 6:30" / "alarm set for 6:30").
    also: tuple[str, ...] = ()


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
    # A reporter is the source, not the subject: "Helen said the gala moved" is about the gala.
    reporters = {m.group(1).lower() for m in _REPORTED.finditer(text)}
    return {p.lower() for p in entry.persons if p.lower() in lowered} - _AGENT_ROLES - reporters


#: An agent's own name is never the subject of a fact: "the assistant will use jortiz@contoso.com
#: from now on" is about the user's address, which the assistant only acts on.
#: Ids of merged duplicates kept in an entry's ``merged_from`` (the first and the latest):
#: provenance for a reader, bounded so a fact said thousands of times stays exportable.
MAX_MERGED_FROM = 100
_AGENT_ROLES = frozenset({"assistant", "the assistant", "ai", "bot", "agent"})


def different_subjects(a: Entry, b: Entry) -> bool:
    """Whether each entry is about persons and none of them is the other's. A person one
    entry names is named by the other too when its text says the name untagged, however
    written ("my son Eli has tutoring with Mr. Haddad" / "mr haddad moved away so Eli's
    tutor is Ms. Oyelaran": the extractor tags neither "haddad" nor "Eli's" there)."""
    pa, pb = _subjects(a), _subjects(b)
    return bool(pa) and bool(pb) and not (pa & pb) and not (_said_in(pa, b) or _said_in(pb, a))


def _said_in(persons: set[str], entry: Entry) -> bool:
    """Whether the entry's statement says one of ``persons`` (:func:`_name_said`)."""
    text = _statement(entry)
    return any(_name_said(p, text) for p in persons)


_CALENDAR = frozenset(MONTHS) | frozenset(WEEKDAYS)


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
    values = set(value_tokens(text))
    values |= _CALENDAR.intersection(letter_words(text))
    named = [*entry.entities, *([entry.location] if entry.location else [])]
    values |= {n.lower() for n in named if n and n.lower() in text}
    return frozenset(values - {p.lower() for p in entry.persons})


def value_changed(a: Entry, b: Entry) -> bool:
    """True when the two entries state different values (the symmetric difference of their
    :func:`value_terms` is not empty): what a state update looks like."""
    return bool(value_terms(a) ^ value_terms(b))


# --------------------------------------------------------------------------- update detection
#: Values by type. A state update changes the value of one slot; the type tells which
#: values are comparable (a time is replaced by a time, an amount by an amount).
_CALENDAR_ALT = "|".join(sorted(_CALENDAR, key=len, reverse=True))
_TYPED_VALUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("email", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    ("date", re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?\b|(?:(?<=the )|(?<=on ))\d{1,2}(?:st|nd|rd|th)\b|"
                        r"\b\d{1,2}(?:st|nd|rd|th) of\b|\b(?:" + _CALENDAR_ALT
                        + r")s?\b(?:\s+\d{1,2}\b)?(?:,?\s+\d{4}\b)?|\b(?:spring|summer|fall|autumn|winter) \d{4}\b|"
                          r"\(\d{4}\)")),
    ("time", re.compile(r"\b\d{1,2}(?::\d{2})?\s?(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b|\b(?:noon|midnight)\b|"
                        # a bare hour after "at" ("Mondays at 11"), not a count or an address
                        r"(?<=\bat )\d{1,2}\b(?![\d:]|[.,]\d|\s*(?:%|[a-z]))")),
    ("phone", re.compile(r"(?<![\w-])\+?\d[\d ()-]{5,}\d(?![\w-])")),
    ("money", re.compile(r"[$€£¥]\s?\d[\d,.]*(?:\s?[km]\b)?|\b\d[\d,.]*\s?(?:k|dollars|euros|pounds|bucks|usd|eur)\b")),
    # a version ("v5.3.0", "5.3.1", "v18"): one value however it is written
    ("version", re.compile(r"\bv\d+(?:\.\d+)*\b|\b\d+\.\d+\.\d+\b")),
    # a code: letters then digits ("sunflower22", "UA123", "B12"), a password, plate or id
    ("code", re.compile(r"\b[a-z]{1,12}\d+[a-z0-9]*\b")),
    ("number", re.compile(r"#?\b\d+(?:[.,]\d+)*\b|\b(?:two|three|four|five|six|seven|eight|nine|ten|"
                          r"eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred|dozen)\b")),
)
#: Words that signal a change whatever the slot. A change cue must govern a changed value,
#: not just appear: "moved the reunion to 3 pm" is a change, "it pushed me to try" and
#: "changed the game" are not, so the verbs that take a new value ("moved", "pushed",
#: "raised", "changed", "switched", ...) count only when their "to" introduces a value (a
#: typed value or a capitalised name); the rest say a change happened by themselves
#: ("rescheduled", "no longer", "instead"). "Actually" is left out: it is mostly emphasis
#: ("Nate actually won the tournament"), which made most false LINKs on LoCoMo dev. The verbs
#: governing a value count in every tense ("that moves the deadline to April 4", "Family is
#: going up to $19.99"); the cues that need no value stay in the past ("reduced the"): "is
#: reducing the word count" is an effort, not a change (on BEAM tune, 4 false links).
_CHANGE_VERB = (r"(?:mov(?:e|es|ed|ing)|push(?:es|ed|ing)?|bump(?:s|ed|ing)?|rais(?:e|es|ed|ing)|drop(?:s|ped|ping)?|"
                r"cut(?:s|ting)?|hik(?:e|es|ed|ing)|lower(?:s|ed|ing)?|reduc(?:e|es|ed|ing)|increas(?:e|es|ed|ing)|"
                r"extend(?:s|ed|ing)?|upgrad(?:e|es|ed|ing)|downgrad(?:e|es|ed|ing)|chang(?:e|ed|es|ing)|"
                r"switch(?:ed|es|ing)?|shift(?:s|ed|ing)?|resched\w*|postpon\w*|delay(?:s|ed|ing)?|upped|"
                r"updat(?:e|es|ed|ing)|renam(?:e|es|ed|ing)|brought|adjust(?:s|ed|ing)?|revis(?:e|es|ed|ing)|"
                r"improv(?:e|es|ed|ing)|gr[eo]w(?:n|s|ing)?|r[io]s(?:e|en|es|ing)|f[ae]ll(?:en|s|ing)?|"
                r"(?:go(?:es|ing)?|went|gone) (?:up|down)|set)")
_CHANGE_TO = re.compile(_CHANGE_VERB + r"\b((?: [\w'.,$-]+){0,7}?) (?:back |up |down |over )?(?:to|until|till|through) "
                        r"(?:the |a |an )?", re.I)
_STRONG_CUE = re.compile(
    r"\b(?:instead\b(?! of)|no longer|any ?more(?=\s*(?:[.,;:!?)]|$))|resched\w*|postpon\w*|delayed|renamed|cancel+ed|"
    r"replac(?:ed|ing)|promoted|transferred|turns out|plot twist|correction|"
    # a correction of what was said ("I misread the renewal, it's $156 a month")
    r"misread|misspoke|i was wrong|(?:had|got) (?:it|that|this|the \w+) wrong|"
    r"switch(?:ed|ing)? (?:back|over|from)\b|switch(?:ed|ing)? \w+s\b|"
    r"chang(?:ed|ing) (?:my|our|his|her|their) minds?|(?:pushed|moved|bumped) (?:\w+ ){0,3}(?:back|up|forward|out)\b|"
    r"(?:raised|cut|lowered|reduced|increased|dropped|extended|upgraded|downgraded) "
    r"(?:the|my|our|his|her|their|your) )",
    re.I)
#: "X instead of Y": Y names what was replaced, so it is a change of the entry stating Y,
#: and of no other ("Instead of getting stuck, John worked hard" replaces nothing stated).
_INSTEAD_OF = re.compile(r"\binstead of ((?:[\w'-]+ ){0,3}[\w'-]+)", re.I)
_WEAK_CUE = re.compile(r"\b(?:now|these days|nowadays|update(?=:)|quick update|from now on|as of|latest|currently|"
                       # when a new state begins: "from next Monday", "starting June", "effective the 1st"
                       r"(?:from|starting|effective|beginning) (?:next |this |on |the )?(?:"
                       + "|".join([*WEEKDAYS, *MONTHS]) + r"|week|month|year|\d)"
                       # a range ("editing time from July 16-18", "from May 2 to May 9") is a period
                       r"(?!\w*(?: \d{1,2}(?:st|nd|rd|th)?)?(?:,? \d{4})?\s*(?:-|–|to |through |until |till )\s*\w)|"
                       r"new (?:one|number|address|email|job|place|time|date)|"
                       # when the present state began: "living in Portland since the summer"
                       r"since (?:the |last |early |late |mid-?)?(?:spring|summer|fall|autumn|winter|"
                       + "|".join(MONTHS) + r"|\d{4}))\b", re.I)
#: A state that holds at present, said of something that used to be a habit or a lasting
#: state ("I take my coffee black, always have" -> "these days I take it with oat milk").
_CURRENT = re.compile(r"\b(?:these days|nowadays|lately|any ?more(?=\s*(?:[.,;:!?)]|$)))", re.I)
#: An ongoing state expected to end ("my mom is still in the hospital", "still open").
_STILL = re.compile(r"\bstill\b", re.I)
#: Habitual vs one-off wording: "I usually run 5 km" and "today I ran 12 km" are both true.
_HABIT = re.compile(r"\b(?:usually|always|normally|typically|often|every|each|most days|weekly|daily|"
                    # "on Sundays", "Sunday mornings": a weekday in the plural is a habit
                    r"(?:" + "|".join(WEEKDAYS) + r")(?:s| (?:mornings|afternoons|evenings|nights)))\b", re.I)
_EPISODE = re.compile(r"\b(?:today|yesterday|tonight|this (?:morning|afternoon|evening|week|weekend)|last (?:night|"
                      r"week|weekend|month|year|summer|spring|fall|autumn|winter|"
                      + "|".join([*WEEKDAYS, *WEEKDAY_ABBR])
                      + r")|ago|the other day|(?:week|weekend) of \d{4})\b", re.I)
#: "my new number", "the new April 25 deadline": a possessive or definite "new" on one
#: thing replaces it; "some new teammates", "a new city" add one more.
_NEW_SLOT = re.compile(r"\b(?:my|our|his|her|their|your|the|this) new ((?:[\w'-]+ ){0,2}[a-z]+)")
#: The reporter of a reported statement is its source, not its subject ("Helen said the
#: gala moved": the gala changed, not Helen).
_REPORTED = re.compile(r"(\w+) (?:said|says|told|tells|mentioned|announced|texted|emailed|wrote|confirmed)\b", re.I)
#: A first-person plural: the speakers share what they talk about ("our table").
_GROUP = re.compile(r"\b(?:we|our|us|we're|we've)\b", re.I)
_CAPTION = re.compile(r"\[shared image:[^\]]*\]")
_AGAIN = re.compile(r"\b(?:again|another|(?<![.!?:] )(?<!^)also(?!,)|once more|one more|as well|"
                    # "me too", "that one too" ("too tart" is a degree, not one more)
                    r"too(?!\s+[a-z]))\b", re.I)
#: Status words: with "now" / "as of" they mark a changed state without a typed value.
_STATUS = re.compile(r"\b(?:open|closed|blocked|unblocked|done|finished|completed?|in progress|pending|approved|"
                     r"rejected|cancel+ed|passed|failed|delivered|shipped|resolved|fixed|live|launched|paused|"
                     r"on hold|active|inactive|single|married|engaged|divorced|separated|retired|hired|fired|"
                     r"laid off|unemployed|sold|available|unavailable|sick|recovered|discharged|home)\b", re.I)
#: Nouns that make a different subject of the same person ("Quinn's husband" is not Quinn).
_RELATION = frozenset(
    "husband wife partner boyfriend girlfriend fiance fiancee son daughter kid kids child children baby "
    "brother sister mom mum mother dad father parents grandma grandpa grandmother grandfather aunt uncle "
    "cousin niece nephew friend friends colleague coworker boss manager neighbor neighbour roommate "
    "teacher coach".split()
)
#: Words that say nothing about *which* slot a statement fills (generic verbs, time and
#: change words, politeness); two entries sharing only these share no attribute.
_LIGHT = frozenset(
    "be is are was were am have has had get got go goes going went do does did make made take took "
    "use used say said tell told think know want need like love really just now new still also already "
    "again today tomorrow tonight yesterday week weekend month year day days time times thing things "
    "good great nice big small news update updated change changed switch switched moved move instead "
    "actually due set remind reminder let please thanks thank sure okay ok heads same usual usually "
    "always next last first back plan plans planning morning evening afternoon night soon "
    # a request's own words ("the user is trying to ... and wants to make sure ..."): they
    # frame what is asked, they name no slot
    "try tries trying tried want wants wanted help helps helping assistant figure figuring trouble using "
    "implement implementing implemented "
    # verbs of effort: what someone does to a slot, not which slot ("optimize the load time")
    "optimize optimizing optimized improve improving improved reduce reducing reduced increase increasing "
    "achieve achieving achieved working handle handling".split()
)
#: A statement that asks: opens on a question word or an auxiliary other than a polite
#: request's modal ("Can you move it to 7:15?" asks for a value, so it states one).
_QUESTION = re.compile(r"^(?:[\w ]{1,24}: )?"
                       r"(?:(?:hmm+|um+|uh+|ok(?:ay)?|so|well|oh|hey|yeah|right|also|and|but)[,.!]?\s+)*"
                       r"(?:what|when|where|who|whom|whose|why|how|which|is|are|was|were|do|does|"
                       r"did|shall|should|have|has|had|any|anything)\b", re.I)
#: A request to the other speaker ("Can the assistant review this?", "Could you explain ...").
#: It asks for something; it states a value only when a change word governs one ("Can you
#: move it to 7:15?").
_REQUEST = re.compile(r"^(?:[\w ]{1,24}: )?(?:\w+,?\s+){0,2}(?:can|could|would|will) (?:you|the assistant)\b", re.I)
#: A noun owned by someone ("Quinn's husband", "my mom"): the owner's relative is its subject.
_OWNED = re.compile(r"(?:'s|\b(?:my|our|his|her|their|your))\s+([a-z]+)(?:\s+([a-z]+))?")
#: The token stream slot detection reads (not a word tokenizer, see text.words): inner
#: punctuation kept (emails, decimals, "Jean-Luc's") and the "|" left where a value was cut out.
_WORDS = re.compile(r"[a-z0-9][a-z0-9'@.+-]*|\|")
_FIRST_SENTENCE = re.compile(r"[^.!?]*[.!?]?")
#: A sentence's end; a title's period ("Ms. Okafor") ends none.
_SENTENCE_END = re.compile("".join(rf"(?<!\b{t})" for t in TITLES) + r"[.!?]+(?:\s|$)", re.I)


@dataclass(frozen=True, slots=True)
class _Profile:
    """What update detection reads from an entry's statement."""

    values: dict[str, frozenset[str]]
    slots: frozenset[str]
    before: dict[str, str]  # slot stem -> the content word just before it
    after: dict[str, str]  # slot stem -> the content word of an "of"/"for" phrase after it
    relations: frozenset[str]  # relatives the statement is about ("my mom", "Quinn's husband")
    kin: frozenset[str]  # every relative it mentions
    subjects: frozenset[str]
    habit: bool
    episode: bool  # a one-off event: "yesterday", "last summer", a grounded date before the statement
    again: bool
    question: bool
    strong: bool  # a change cue governing a value ("moved it to 3 pm", "rescheduled", "no longer")
    governed: frozenset[str]  # value types a change verb's "to" introduces; "*": a cue of any value
    weak: bool  # "now", "from now on", "currently": a present state, not necessarily a new one
    replaced: frozenset[str]  # slot stems of "instead of Y": what the statement replaces
    new_slots: frozenset[str]  # "my new number": the slot a possessive "new" renews
    current: bool  # "these days", "nowadays"
    still: bool  # "still": a state expected to end
    status: frozenset[str]  # status words ("closed", "in progress", "home")
    group: bool  # "we", "our": the speakers share the thing talked about
    sentences: int


_CLOCK = re.compile(r"(\d{1,2})(?::(\d{2}))?\s?([ap])?")
#: The number words the "number" type reads, as digits.
_NUMBER_WORDS = {w: str(n) for n, w in (
    (2, "two"), (3, "three"), (4, "four"), (5, "five"), (6, "six"), (7, "seven"), (8, "eight"), (9, "nine"),
    (10, "ten"), (11, "eleven"), (12, "twelve"), (15, "fifteen"), (20, "twenty"), (30, "thirty"), (40, "forty"),
    (50, "fifty"), (100, "hundred"), (12, "dozen"))}
#: A supposition or an example, from its opening word to the end of its sentence ("if the
#: user drew two kings instead, would ...", "For example, with a first term of 3 ..."):
#: the values of a worked exercise or a what-if are not anyone's state.
_SUPPOSED = re.compile(r"(?:^|(?<=[.!?;:,])\s*)(?:(?:and|so|but|hmm|ok|okay),?\s+)*(?:if|suppose|supposing|let's say|"
                       r"say|imagine|what if|for example|for instance|e\.g\.)\b[^.!?]*", re.I)


def _normal(kind: str, value: str) -> str:
    """A value in a comparable form: "7:15 am" and "7:15" are one time, "7 pm" is 19:00."""
    value = re.sub(r"[\s,]+|\.$", "", value.lower())
    if kind == "version":
        return value.removeprefix("v")
    if kind == "number" and value in _NUMBER_WORDS:
        return _NUMBER_WORDS[value]  # "five" and "5" are one count
    if kind == "date" and value.endswith("s") and value[:-1] in _CALENDAR:
        return value[:-1]  # "every Monday" and "Mondays" are one day
    if kind == "time" and (m := _CLOCK.match(value.replace(".", ""))):
        hour, minute = int(m.group(1)), int(m.group(2) or 0)
        if m.group(3) == "p" and hour < 12:
            hour += 12
        elif m.group(3) == "a" and hour == 12:
            hour = 0
        return f"{hour}:{minute:02d}"
    return value


def _profile(entry: Entry) -> _Profile:
    """The entry's profile, cached: coarsening compares one entry with many candidates."""
    return _profile_of(entry.text, entry.speaker, tuple(entry.persons), tuple(entry.entities), entry.location,
                       day.date() if (day := local_time(entry)) else None)


#: Grounded dates the extractor writes next to relative ones: "(2024-04-20)", "(week of
#: 2023-06-19)", "(June 2023)", "(summer 2023)", "(2022)".
_GROUNDED = re.compile(r"\((?:the )?(?:(week of )?(\d{4})-(\d{2})-(\d{2})|(" + "|".join(MONTHS)
                       + r"|spring|summer|fall|autumn|winter) (\d{4})|(\d{4}))\)", re.I)
_SEASON_END = {"spring": 5, "summer": 8, "fall": 11, "autumn": 11, "winter": 14}


def _dated_past(text: str, day: date | None) -> bool:
    """Whether the statement grounds an event before the day it was made ("last week (week
    of 2023-06-19)", "yesterday (2024-04-20)"): a dated past event, not a state or a plan."""
    if day is None:
        return False
    for m in _GROUNDED.finditer(text):
        week, y, mo, d, named, named_year, year = m.groups()
        if y:
            end = date(int(y), int(mo), int(d)) + timedelta(days=6 if week else 0)
            if end < day:
                return True
        elif named:
            last = MONTHS.index(named.lower()) + 1 if named.lower() in MONTHS else _SEASON_END[named.lower()]
            if (int(named_year) + (last - 1) // 12, (last - 1) % 12 + 1) < (day.year, day.month):
                return True
        elif year and int(year) < day.year:
            return True
    return False


_CAPITALISED = re.compile(r"[A-Z][\w'-]*(?: [A-Z][\w'-]*)*")


def _capitalised(rest: str) -> str:
    """The run of capitalised words ``rest`` opens on ("" if none)."""
    m = _CAPITALISED.match(rest)
    return m.group() if m else ""


#: A lowercase thing after a change verb's "to": one or two words that close the clause
#: ("switched my major to data science, the form...", "moved the team over to linear last
#: sprint", "moved to apple music since..."). Chat is often typed in lowercase, so a name is
#: not always capitalised; an infinitive runs on ("switch to make sure it lands").
_LOWER_THING = re.compile(r"([a-z][\w'&-]*)(?: [a-z][\w'&-]*)?(?=\s*(?:[^\w\s]|$)|\s+(?:now|instead|since|last|this|"
                          r"for|because|and|so|but|after|starting|anyway|lol|haha)\b)")


def _value_follows(rest: str, named: set[str], *, lowercase: bool = False) -> bool:
    """Whether ``rest`` (original case) opens on a value: a typed value, a capitalised name,
    one of the entry's named values ("... to 8:45", "... to Lighthouse") or, in a statement
    typed in ``lowercase``, a lowercase thing that closes the clause (:data:`_LOWER_THING`).
    Where names are capitalised a lowercase word after "to" is a common word: "set up a
    GitHub Actions pipeline to automate linting, ..." (an infinitive, on BEAM tune)."""
    if not rest:
        return False
    low = rest.lower()
    if rest[0].isupper() or rest[0].isdigit() or rest[0] in "$€£¥#" or any(low.startswith(n) for n in named):
        return True
    if lowercase and (m := _LOWER_THING.match(rest)) and m.group(1) not in STOPWORDS:
        return True
    return any(p.match(low) for _, p in _TYPED_VALUES)


#: A capital that opens the text or a sentence, or the grounded speaker ("The user"): not
#: one its writer chose.
_OPENING_CAPITAL = re.compile(r"(?:^|[.!?:]\s+)[A-Z]|\b(?:The user|I)\b")
#: A sentence opened in lowercase, or a lowercase "i": the mark of chat typed without capitals.
_LOWERCASE_OPENER = re.compile(r"(?:^|[.!?:]\s+)[a-z]|(?<![\w'])i(?![\w'])")


def _typed_lowercase(text: str) -> bool:
    """Whether ``text`` was typed without capitals: a sentence opens in lowercase (or "i"
    stands for "I") and no capital but an opener's is left ("ok so we moved the team over
    to linear"). A capitalised sentence without a name ("I pushed myself to run faster")
    is not: its lowercase words after "to" are common words."""
    return bool(_LOWERCASE_OPENER.search(text)) and not any(c.isupper() for c in _OPENING_CAPITAL.sub("", text))


_QUANTITIES = frozenset({"date", "time", "money", "number", "version", "phone"})


def _governed(text: str, named: set[str]) -> frozenset[str]:
    """The value types a change verb governs in ``text`` ("reduced it to 300ms": number;
    "upgraded to Node.js": name); "*" when a cue says a change by itself ("rescheduled",
    "instead", "raised the rent"). A cue governing an amount says nothing of the tool or
    place named beside it."""
    if _STRONG_CUE.search(text):
        return frozenset({"*"})
    kinds: set[str] = set()
    lowercase = _typed_lowercase(text)
    for m in _CHANGE_TO.finditer(text):
        rest = text[m.end():]
        low = rest.lower()
        kind = next((k for k, p in _TYPED_VALUES if p.match(low)), None)
        if kind is None and rest[:1].isdigit():
            kinds |= _QUANTITIES  # a number, "the 5th", "300ms": some quantity, not a name
        elif kind is None and _value_follows(rest, named, lowercase=lowercase):
            kinds.add("name")
            if rest[len(_capitalised(rest)):].lstrip()[:1].isdigit():
                kinds |= _QUANTITIES  # "upgraded to Python 3.12": the name and its number
        elif kind:
            kinds.add(kind)
    return frozenset(kinds)


def _replaced(text: str) -> frozenset[str]:
    """Slot stems of an "instead of Y" in ``text``."""
    return frozenset(stem(w) for m in _INSTEAD_OF.finditer(text) for w in letter_words(m.group(1))
                     if w not in STOPWORDS and w not in _LIGHT)


def _slot_walk(tokens: list[str], persons: set[str], value_words: set[str]
               ) -> tuple[set[str], dict[str, str], dict[str, str]]:
    """The slot words of a statement's tokens (values cut out as "|"), with the content word
    just before each (a modifier or owner) and the content word of an "of"/"for" phrase
    after it."""
    slots: set[str] = set()
    before: dict[str, str] = {}
    after: dict[str, str] = {}
    prev = ""
    last_slot, linking = "", False
    for tok in tokens:
        word = tok.strip(".'").removesuffix("'s")
        if word in ("", "|"):
            prev, last_slot, linking = "", "", False
            continue
        content = (word not in STOPWORDS and word not in _LIGHT and word not in value_words
                   and word not in persons and not word.isdigit() and len(word) > 1)
        if content:
            s = stem(word)
            slots.add(s)
            if prev and s not in before:
                before[s] = prev
            if linking and last_slot and last_slot not in after:
                after[last_slot] = s
            last_slot, linking = s, False
        elif word in ("of", "for") and last_slot:
            linking = True
        elif word not in ("the", "a", "an", "my", "our", "your", "his", "her", "their") and not word.isdigit():
            last_slot, linking = "", False
        # The word a slot noun follows: a modifier ("blue jacket") or an owner ("Nadia's
        # birthday"); a name there is the slot's value ("the Shoreditch office"), not a modifier.
        possessive = tok.endswith("'s")
        prev = tok.strip(".") if (possessive or (word not in STOPWORDS and word not in persons)) \
            and word not in _LIGHT and word not in value_words else ""
    return slots, before, after


#: What introduces an example ("games like RPGs", "such as Civilization"): the name after it
#: is not the slot's value. One pattern, the name compared after it: a pattern per name
#: was compiled again for every entry naming something new (an eighth of profiling time).
_EXAMPLE = re.compile(r"\b(?:like|such as|including|e\.g\.,?) ")


#: Marks that part a statement's words: the word before one modifies nothing after it.
_PUNCTUATION = re.compile(r"[,:;()\[\]]")


def _states_beside(text: str, named: set[str]) -> bool:
    """Whether a sentence of ``text`` that does not ask states a value: "How much should a
    beagle eat? She's on Purina Pro Plan." states what she eats, and "Tomás is captain now.
    Can you make the schedule look nice?" who the captain is, however the entry ends. "Has
    Audrey ever volunteered? It can be so rewarding." states no value: it asks."""
    start = 0
    for m in [*_SENTENCE_END.finditer(text), None]:
        end = m.end() if m else len(text)
        sentence = text[start:end]
        start = end
        if "?" in sentence or not sentence.strip():
            continue
        if any(pattern.search(sentence) for _, pattern in _TYPED_VALUES) or any(n in sentence for n in named):
            return True
    return False


@functools.lru_cache(maxsize=8192)
def _profile_of(text: str, speaker: str | None, persons_: tuple[str, ...], entities: tuple[str, ...],
                location: str | None, day: date | None = None) -> _Profile:
    entry = Entry("", text, persons=list(persons_), entities=list(entities), location=location, speaker=speaker)
    # What an attached picture shows is an event of its own, never a slot's value.
    original = _CAPTION.sub(" ", text[len(speaker) + 2:] if speaker and text.startswith(f"{speaker}: ") else text)
    text = original.lower().strip()
    values: dict[str, set[str]] = {}
    rest = text
    stated = _SUPPOSED.sub(" | ", text)
    for kind, pattern in _TYPED_VALUES:
        found = {_normal(kind, m.group()) for m in pattern.finditer(stated)}
        if found:
            values[kind] = found
            stated = pattern.sub(" | ", stated)
        rest = pattern.sub(" | ", rest)  # a value ends a modifier run ("runs 5 km")
    persons = {p.lower() for p in entry.persons}
    named = {n.lower() for n in [*entry.entities, *([entry.location] if entry.location else [])]
             if n and n.lower() in text and n.lower() not in persons
             and not _CALENDAR.intersection(w.removesuffix("s") for w in letter_words(n))
             and not _CALENDAR.intersection(letter_words(n))}
    # The target of a change verb is a value even when the extractor did not tag it:
    # "switch your replies back to English".
    named |= {t for m in _CHANGE_TO.finditer(original)
              if (t := _capitalised(original[m.end():]).lower()) and t not in persons and t not in _CALENDAR}
    value_words = {w for v in named for w in v.split()}
    # A name given as an example is not the slot's value: "games like RPGs" / "a strategy
    # game like Civilization" state a taste, not a replaced game.
    examples = [text[m.end():] for m in _EXAMPLE.finditer(text)]
    named = {n for n in named if not any(rest.startswith(n) or (rest.startswith("the ") and rest[4:].startswith(n))
                                         for rest in examples)}
    if named:
        values["name"] = named
    # A change cue governs a value exactly when ``_governed`` finds a type it governs.
    governed = _governed(original, named)
    strong, replaced = bool(governed), _replaced(original)
    # Punctuation parts words: "(starter:flour:water)" / "cold water" name one water, and
    # "every morning, water it" has no "morning water".
    slots, before, after = _slot_walk(_WORDS.findall(_PUNCTUATION.sub(" | ", rest)), persons, value_words)
    return _Profile(
        values={k: frozenset(v) for k, v in values.items()},
        slots=frozenset(slots),
        before=before,
        after=after,
        relations=frozenset(w for m in _OWNED.finditer(text) for w in m.groups() if w in _RELATION),
        kin=frozenset(w.strip(".,;:!?'").removesuffix("'s") for w in text.split()) & _RELATION,
        subjects=frozenset(_subjects(entry)),
        habit=bool(_HABIT.search(text)),
        episode=bool(_EPISODE.search(text)) or _dated_past(text, day),
        again=bool(_AGAIN.search(text)),
        # A question states nothing, unless it is a request carrying a value ("My flight
        # lands at 4:40, can you pick me up?"); a name alone is what it asks about. A
        # question opening the entry asks too ("Has Audrey ever volunteered? It can be so
        # rewarding.").
        question=((text.rstrip().rstrip('"').endswith("?") and (bool(_QUESTION.match(text))
                                                                 or not set(values) - {"name"}
                                                                 or (bool(_REQUEST.match(text))
                                                                     and not governed - {"*"})))
                  or (bool(_QUESTION.match(text)) and (m := _FIRST_SENTENCE.match(text)) is not None
                      and m.group().endswith("?")))
        and not _states_beside(text, named),
        strong=strong,
        governed=governed,
        weak=bool(_WEAK_CUE.search(text)),
        replaced=replaced,
        new_slots=frozenset(stem(w) for m in _NEW_SLOT.findall(text) for w in m.split()
                            if not w.endswith("s") or w.endswith("ss")),
        current=bool(_CURRENT.search(text)),
        still=bool(_STILL.search(text)),
        status=frozenset(m.group().lower() for m in _STATUS.finditer(text)),
        group=bool(_GROUP.search(text)),
        sentences=len(_SENTENCE_END.findall(text.rstrip(" .!?\"'") + ".")),
    )


def changed_types(old: Entry, new: Entry) -> list[str]:
    """Value types both entries state where the new entry brings a value the old one does
    not have (2 pm -> 3 pm: ``["time"]``). A type only one of them states is not a change:
    "moved to 3 pm" leaves the day it does not repeat as it was."""
    a, b = _profile(old).values, _profile(new).values
    return [k for k in b if k in a and not b[k] <= a[k]]


#: Markdown and code: an assistant's explanation, plan or program is a document, not a
#: statement of one slot's value. Its numbers (list items, versions, ports) and words
#: ("Updated code") would otherwise look like updates: on a BEAM dev conversation, 77 LINKs
#: in 80 messages, nearly all between such passages.
_MARKUP = re.compile(r"```|'{3}|^\s*# |#{2,6} |\*\*|^\s*(?:[-*+]|\d+[.)]) |\|\s*-{3}", re.M)
#: Longer than this (characters) an entry is a passage rather than one fact.
_MAX_FACT_CHARS = 400


#: A worked computation ("P = 4/52 = 1/13", "\\frac{3}{9}", "3 × (1/2)^2", "then subtracting
#: from 1"): its numbers are steps of an exercise, not the value of anything the speaker
#: holds. On a BEAM tune conversation of probability exercises, 11 of its 13 LINKs were
#: between such statements.
_COMPUTATION = re.compile(r"\d\s*[=≈×÷^]\s*[\d(\\]|[=≈]\s*\d+\s*/\s*\d|\\(?:frac|binom|times|cdot)|\\[\[(]|"
                          r"\b(?:subtract\w*|(?:divid|multipl)\w* (?:\w+ ){0,2}by|rais\w* (?:\w+ ){0,2}to the power of)"
                          r"(?: (?:it|that|this|them))?(?: from)? \d")


@functools.lru_cache(maxsize=8192)
def _document(text: str) -> bool:
    """Cached: coarsening asks it of a candidate once per later entry it is compared with."""
    return len(text) > _MAX_FACT_CHARS or bool(_MARKUP.search(text)) or bool(_COMPUTATION.search(text))


def _passage(entry: Entry) -> bool:
    """A document or a block of one (:func:`co_true`: both true, never an update)."""
    return _document(entry.text) or _segment(entry)


#: Value types, or distinct values, from which a statement is a compound of several facts
#: (an address is a number and a name: one fact).
_COMPOUND_TYPES = 3
_COMPOUND_VALUES = 5


#: Slot words up to which a statement is one fact: "the team has 8 engineers", not "the user
#: is optimizing the dashboard API response time, which was 800ms, by caching ...".
_BRIEF_SLOTS = 8


def _brief(p: _Profile) -> bool:
    return len(p.slots) <= _BRIEF_SLOTS


def _many(values: dict[str, frozenset[str]]) -> bool:
    return len(values) >= _COMPOUND_TYPES or sum(_count(v) for v in values.values()) >= _COMPOUND_VALUES


def _compound_about(entry: Entry, shared: frozenset[str]) -> bool:
    """Whether ``entry`` states many values about the shared attribute (a plan, a progress
    report): several types in the clauses that hold it (values of its other clauses are about
    other things: "from next Monday standup starts at 9:45, so the Berlin team can join" is a
    day and a time), or many values anywhere (an exercise, a list)."""
    values = _profile(entry).values
    return _many(_clause_values(entry, shared) or values) \
        or sum(_count(v) for v in values.values()) >= _COMPOUND_VALUES


def _segment(entry: Entry) -> bool:
    """A block of a long message (a list, table, code or prose chunk the extractor cut out of
    it): part of a document, whatever its length."""
    return isinstance(entry.metadata, dict) and bool(entry.metadata.get("segment"))


def _count(values: frozenset[str]) -> int:
    """Distinct values, an ISO date written next to the weekday it grounds counted once."""
    plain = [v for v in values if not re.fullmatch(r"\d{4}-\d{2}(?:-\d{2})?", v)]
    return len(plain) if plain else len(values)


def _speakers_only(entry: Entry, subjects: frozenset[str]) -> bool:
    """Whether the only person the statement names is its own speaker (the extractor's
    third person for "I")."""
    return bool(entry.speaker) and subjects <= {(entry.speaker or "").lower()}


#: Size and position words pick one object of a kind ("the small pizza" / "the large pizza",
#: "the first floor" / "the second floor"); they are too common to be slot words.
_SIZE = re.compile(r"\b(small|medium|large|big|little|regular|mini|first|second|third|upper|lower|front|back)"
                   r"\s+([a-z]+)")


def _sized(text: str) -> dict[str, str]:
    """Slot stem -> the size or position word before it."""
    return {stem(noun): size for size, noun in _SIZE.findall(text) if noun not in STOPWORDS}


#: A value stated as a goal ("the goal is 100% coverage", "my weekly target is 1,200 words")
#: and one stated as reached ("achieved 85% coverage", "wrote 1,500 words") are two
#: attributes of one thing: a target and a measurement.
_TARGET = re.compile(r"\b(?:goals?|target(?:s|ed|ing)?|aim(?:s|ed|ing)?|objectives?|quotas?|limits?|budget(?:s|ed)?)\b",
                     re.I)


def _targets(entry: Entry) -> bool:
    """Whether a clause holding a quantity states it as a goal or limit. A date or a time
    is a schedule, not a quantity to reach: "the first sprint now targets completion by
    March 31" moves the sprint's end."""
    return any(_TARGET.search(c) for c in _CLAUSE.split(_statement(entry))
               if set(_profile_of(c, None, tuple(entry.persons), tuple(entry.entities), entry.location).values)
               - {"name", "date", "time"})


def co_true(old: Entry, new: Entry, *, changed: bool = False) -> str | None:
    """Why two entries can both be true (so neither updates the other), or None.

    * different subjects: different persons named, or a relative of one of them
      ("Quinn's husband works at Boeing" / "Quinn works at the library");
    * different objects of one kind: the shared slot noun has a different modifier or
      owner in each ("the blue jacket" / "the black jacket", "my birthday" / "Nadia's
      birthday", "my flight" / "the return flight", "the small pizza" / "the large pizza");
    * a habit and a one-off ("I usually run 5 km" / "today I ran 12 km"), or two dated
      episodes ("went climbing yesterday" / "tonight");
    * a document: markdown, code or a passage longer than a fact (an assistant's
      explanation holds many numbers and "updated" headings, and fills no single slot);
    * a question: it asks, it states no value.

    ``changed``: the new statement's wording says it changes something. Two speakers are
    then one subject when the newer one speaks for both ("Noah reserved a table" / "Emma
    pushed our table to 8:45"): the table is theirs, not one person's.
    """
    if _passage(old) or _passage(new):
        return "a document"
    pa, pb = _profile(old), _profile(new)
    if different_subjects(old, new) and not (changed and pb.group and _speakers_only(old, pa.subjects)
                                             and _speakers_only(new, pb.subjects)):
        return "different subjects"
    if pa.question or pb.question:
        return "question"
    if not (pa.relations <= pb.kin and pb.relations <= pa.kin):
        return "different relatives"
    if why := _different_objects(old, new, pa, pb):
        return why
    if _targets(old) != _targets(new) and not changed:
        return "a target and a measurement"
    # A new statement that says what holds now dates a change, it is no one-off: "quit
    # coffee a month ago and drink green tea in the mornings now".
    if (pa.habit and pb.episode and not pb.habit and not (pb.weak or pb.current)) \
            or (pb.habit and pa.episode and not pa.habit):
        return "habit and one-off"
    if pa.episode and pb.episode:
        return "two episodes"  # "went climbing yesterday" / "went climbing tonight": two events
    return None


def _different_objects(old: Entry, new: Entry, pa: _Profile, pb: _Profile) -> str | None:
    """Why the slot both statements share is two objects of one kind (a different modifier,
    owner, "of" phrase or size), or None."""
    for slot in pa.slots & pb.slots:
        x, y = pa.before.get(slot), pb.before.get(slot)
        if not (x and y):
            continue
        if _ENDED.fullmatch(x) or _ENDED.fullmatch(y):
            continue  # a verb of ending is no modifier: "dropped Italian" is the Italian it ends
        sx, sy = stem(x.removesuffix("'s")), stem(y.removesuffix("'s"))
        # A modifier the other entry also uses elsewhere is not a contrast ("the dentist
        # appointment" / "the dentist moved my appointment").
        if sx != sy and sx not in pb.slots and sy not in pa.slots:
            return f"different {slot}: {x} / {y}"
    for slot in pa.slots & pb.slots:
        x, y = pa.after.get(slot), pb.after.get(slot)
        if x and y and x != y and x not in pb.slots and y not in pa.slots:
            return f"different {slot}: of {x} / of {y}"
    sized_a, sized_b = _sized(_statement(old)), _sized(_statement(new))
    for slot in set(sized_a) & set(sized_b):
        if sized_a[slot] != sized_b[slot]:
            return f"different {slot}: {sized_a[slot]} / {sized_b[slot]}"
    return None


_ARTICLES = frozenset({"the", "a", "an", "my", "our", "his", "her", "their", "your", "its"})


def _slot_words(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in letter_words(text) if w not in _ARTICLES)


def llm_state(old: Entry, new: Entry) -> bool | None:
    """What the LLM extractor's normalized states say about an update, or None when one
    of the entries has none (rule-extracted, or an event the model gave no state).

    True: same subject and attribute (compared as stemmed word sets, so "home city" and
    "the home city" match), different value. False: both have states and they name
    different slots, or the same value: the model read them as two facts, and that
    overrides the rules' reading of the words.
    """
    sa, sb = old.metadata.get("state"), new.metadata.get("state")
    if not (isinstance(sa, dict) and isinstance(sb, dict)):
        return None
    try:
        same_slot = (_slot_words(sa["subject"]) == _slot_words(sb["subject"])
                     and _slot_words(sa["attribute"]) == _slot_words(sb["attribute"]))
        return same_slot and _slot_words(sa["value"]) != _slot_words(sb["value"])
    except (KeyError, AttributeError, TypeError):
        return None


#: Entries from which a turn is a long message rather than a remark: a change word somewhere
#: in a long message ("upgraded", "moved to") is about one of its many sentences, and on
#: user-assistant chat it lent a cue to most false links.
_LENDING_TURN = 4


def _lenders(turn: Sequence[Entry]) -> tuple[Entry, ...]:
    """The entries of a turn that may lend a cue to its neighbours: none of a long message
    (more than :data:`_LENDING_TURN` entries), and no document or message block."""
    if len(turn) > _LENDING_TURN:
        return ()
    return tuple(e for e in turn if not _passage(e))


class Surroundings:
    """What was said around a new entry: the turn before it and its own turn.

    A change cue there ("Plot twist:", "Laura left the agency.") vouches for the sentence
    that carries the value; only the own turn vouches for a change of state without a typed
    value or without a shared slot word. One object serves every entry of a turn, and each
    reading is computed on first use: most entries are never close enough to a candidate
    for the rules to ask, and an assistant's turn can hold dozens of entries and thousands
    of characters. The new entry's own sentence may be part of it; every rule that reads
    the surroundings checks the entry's own cue and slots first, so its presence changes
    no decision.

    Args:
        turn: the entries of the own turn, in order.
        previous: the entries of the turn before it.
    """

    def __init__(self, turn: Sequence[Entry] = (), previous: Sequence[Entry] = ()) -> None:
        self._turn = tuple(turn)
        # Only statements of brief turns lend a cue: a worked computation's "\\left(" or a
        # document's "Updated" heading says nothing of a change, nor does one sentence of a
        # long reply (on user-assistant chat these lent most false cues).
        self._lend_turn = _lenders(self._turn)
        self._lend_previous = _lenders(previous)

    @functools.cached_property
    def turn_strong(self) -> bool:
        """A change word governs a value in the own turn, a brief one (:data:`_LENDING_TURN`)."""
        return any(_profile(e).strong for e in self._lend_turn)

    @functools.cached_property
    def strong(self) -> bool:
        """A change word governs a value in the turn before or in the own turn (brief ones)."""
        return self.turn_strong or any(_profile(e).strong for e in self._lend_previous)

    @functools.cached_property
    def turn_slots(self) -> frozenset[str]:
        """Slot words of the own turn."""
        return frozenset().union(*(_profile(e).slots for e in self._turn))

    @functools.cached_property
    def ended(self) -> tuple[str, ...]:
        """Clauses of both turns with an ending word ("Sakura is closed")."""
        return tuple(c for e in (*self._lend_previous, *self._lend_turn) for c in _ended_clauses(_statement(e)))

    @property
    def turn_entries(self) -> tuple[Entry, ...]:
        """The entries of the own turn."""
        return self._turn

    @functools.cached_property
    def turn_ended(self) -> tuple[str, ...]:
        """Clauses of the own turn with an ending word."""
        return tuple(c for e in self._lend_turn for c in _ended_clauses(_statement(e)))


def may_replace(old: Entry, new: Entry) -> bool:
    """Whether the later ``new`` can state a newer value of what ``old`` states at all: not
    when :func:`co_true` finds them both true (another relative's boss, a savings account
    beside a checking account, a measurement after a target, a one-off beside a habit), nor
    when ``new`` adds one more of a kind ("just got another wedding invite"). A relative the
    old statement names and the new one leaves out is still the same subject ("my sister
    Jess lives in Denver" / "Jess took the job at OHSU, she's in Portland now"); one the
    new statement brings in is not ("my wife's new boss is Karen")."""
    pa, pb = _profile(old), _profile(new)
    why = co_true(old, new)
    if why == "different relatives" and pb.relations <= pa.kin:
        why = None
    return why is None and not pb.again


def says_change(old: Entry, new: Entry) -> bool:
    """Whether the later ``new`` says, in its own wording, that something changed or what
    holds now, and :func:`may_replace` ``old``: a change word governing a value ("the
    defense got pushed to June 28"), "now" / "these days" ("I'm on night shift now"), or
    something ended ("moved the family off LastPass"). A one-off ("went to Crissy Field this
    Saturday instead") says nothing of what holds now. The offline answer reads it: of two
    statements answering "what is it now?", the later one that says so is the present
    state, linked or not."""
    p = _profile(new)
    text = _statement(new)
    # A correction says what holds even when it dates the old value ("the $142 was last
    # year's rate").
    corrected = bool(_CORRECTED.search(text)) or (bool(_ACTUALLY.search(text)) and bool(changed_types(old, new)))
    # A change verb governing a value dates the change, it is no one-off: "switched my major
    # to data science, the form went thru today".
    dated = bool(p.governed - {"*"})
    if not may_replace(old, new) or p.question or (p.episode and not (p.weak or p.current or corrected or dated)):
        return False
    return p.strong or p.weak or p.current or corrected or bool(_ENDED.search(text)) \
        or _changed_to_thing(new.text)


#: A correction of what was said: "I misread the renewal, it's $156 a month", "she had the
#: time wrong".
_CORRECTED = re.compile(r"\b(?:misread|misspoke|mistyped|typo|mixed up|my (?:bad|mistake)|i was wrong|"
                        r"(?:had|got) (?:it|that|this|the \w+) wrong)\b", re.I)
#: "Actually" beside a changed value corrects it ("HelloFresh is actually charging us
#: $71.92 a week"); alone it is mostly emphasis ("Nate actually won the tournament").
_ACTUALLY = re.compile(r"\bactually\b", re.I)


def _changed_to_thing(text: str) -> bool:
    """Whether a change verb's "to" introduces a thing ("moved practices to the new Lakeside
    pool", "pushed to June 28"), not an infinitive ("keep an eye on it after the switch to
    make sure it lands"). ``text`` in its original case."""
    lowercase = _typed_lowercase(text)
    for m in _CHANGE_TO.finditer(text):
        rest = text[m.end():]
        if m.group().lower().endswith(("the ", "a ", "an ")) or _value_follows(rest, set(), lowercase=lowercase):
            return True
    return False


def update_evidence(old: Entry, new: Entry, similarity: float, config: Config,
                    around: Surroundings | None = None, names: frozenset[str] = frozenset()) -> bool:
    """Whether ``new`` states a newer value of the slot ``old`` fills (see the module doc).

    ``around``: what was said around the new entry (:class:`Surroundings`).
    ``names``: persons known in the memory (lowercased). A shared name is who the two
    statements are about, not what: "Ana should give me tips for Lisbon" and "Ana
    suggested a hotel in Alfama" share Ana and fill no common slot.
    """
    return update_reason(old, new, similarity, config, around, names) is not None


#: A clause that names a value only to deny it: "the surgery is on the 11th, not the 9th",
#: "not the 10K anymore".
_DENIAL = r"\s*not (?:the |a |an |on |at |in )?(?=\S*\d)"
_NOT_VALUE = re.compile(_DENIAL, re.I)
#: Words that end what a clause names: "Sakura is closed", "Laura left the agency", "we
#: sold the old car". A value or name said in a clause with one of them is being replaced.
_ENDED = re.compile(r"(?<!\\)\b(?:closed|closing|(?<!the )left|quit|sold|cancel+ed|overbooked|double-booked|"
                    r"moved out|fell through|moved off|moving off|moved away|bailed|backed out|pulled out|"
                    r"shut down|ended|broke up|retired|stepped down|stepping down|resigned|no longer|scratch|"
                    r"(?<!get )(?<!got )(?<!getting )(?<!was )(?<!were )(?<!be )(?<!been )used to|"
                    r"g[ai]ve up|giving up|stopped(?! by)|dropped(?! off| by)|ditched|got rid of|switched from|"
                    r"replaced|not \w+ (?:\w+ )?any ?more)\b"
                    # a correction naming the old value (:data:`_DENIAL`)
                    r"|^" + _DENIAL, re.I)
#: A clause ends at punctuation, not inside a value ("7:15", "$4,000", "78.5 kg", "a.m.").
_CLAUSE = re.compile(r"(?:,(?!\d)(?!\s\d{4}\b)|[;!?\n]|[.:](?=\s|$))+|\s+(?:so|but|and|because)\s+")


#: Words that measure a value rather than say what it is of: "50 minutes", "82 kg", "$35 a
#: month", "$4,000 per person". Two values in the same unit are not values of one attribute
#: ("the budget is $4,000 per person" / "the flights came to $1,180 per person").
_UNITS = frozenset(stem(w) for w in (
    "second seconds minute minutes min mins hour hours hr hrs day days week weeks month months year years "
    "night nights time times percent pct kg kgs kilo kilos kilogram kilograms g gram grams lb lbs pound pounds "
    "oz ounce ounces km kms kilometer kilometers kilometre kilometres mile miles m meter meters metre metres "
    "cm mm ft foot feet inch inches l liter liters litre litres ml gallon gallons dollar dollars euro euros "
    "buck bucks cent cents usd eur gbp k person people head each piece pieces unit units way ways").split())
#: Physical units: a quantity in one of them is one measure (a weight, a distance, a size).
_MEASURES = frozenset(stem(w) for w in (
    "kg kgs kilo kilos kilogram kilograms lb lbs km kms kilometer kilometers kilometre kilometres mile miles "
    "cm mm inch inches ft feet meter meters metre metres liter liters litre litres gallon gallons").split())
#: A rate or distribution after a value: "per person", "a month", "each way", "every week".
_RATE = re.compile(r"\bper\s+([a-z]+)|(?<=\d)\s*(?:[a-z]+\s+)?(?:a|an|each|every)\s+([a-z]+)")


#: Slot words on each side of a value that say what it is *of*: "the first sprint now targets
#: completion by March 31" (sprint, targets, completion), not the rest of a long sentence.
_VALUE_REACH = 3
#: Slot words up to which a value-less clause is a lead-in naming the attribute ("Small change
#: for book club: we start at 6:30 now"); a longer one is another thought of a long statement.
_LEAD_IN_SLOTS = 4


def _near_values(clause: str, kind: str, p: _Profile, only: frozenset[str] | None) -> set[str]:
    """Slot words within :data:`_VALUE_REACH` slot words of a value of ``kind`` in ``clause``
    (of one of ``only``, in normal form, when given)."""
    def mark(m: re.Match[str], k: str) -> str:
        hit = k == kind and (only is None or _normal(k, m.group()) in only)
        return " \x00 " if hit else " | "

    marked = clause
    for k, pattern in _TYPED_VALUES:
        marked = pattern.sub(functools.partial(mark, k=k), marked)
    if kind == "name":
        for name in sorted(p.values.get("name", ()), key=len, reverse=True):
            if only is None or name in only:
                marked = re.sub(r"\b" + re.escape(name) + r"\b", " \x00 ", marked)
    # The value's own attribute words are slot words of this clause; anything else (stopwords,
    # light words, other values) is skipped, so the reach counts words that name things.
    words = [stem(w.strip(".'").removesuffix("'s")) if w != "\x00" else w
             for w in re.findall(r"\x00|[a-z0-9][a-z0-9'@.+-]*", marked)]
    slots = [w for w in words if w == "\x00" or w in p.slots]
    out: set[str] = set()
    for i, w in enumerate(slots):
        if w == "\x00":
            out.update(x for x in slots[max(0, i - _VALUE_REACH):i + _VALUE_REACH + 1] if x != "\x00")
    return out


@functools.lru_cache(maxsize=8192)
def _attribute_of(text: str, kind: str | None, persons: tuple[str, ...], entities: tuple[str, ...],
                  location: str | None, only: frozenset[str] | None = None) -> frozenset[str]:
    """What the values of ``kind`` in ``text`` are *of*: the slot words next to such a value
    (:data:`_VALUE_REACH`) and those of a short value-less lead-in ("Small change for book
    club: we start at 6:30 now"), without units and rates ("Our total budget is $4,000 per
    person": total, budget; "The flights came to $1,180 each": flight, came). A clause holding
    only other values is about something else ("the Austin heat got to me" beside "living in
    Portland"), and so is the rest of a long sentence ("The user is trying to update the
    resume to include the certification, like the user did on September 7": the date is of
    what the user did, not of the resume). ``kind`` None: every clause (what the whole
    statement is about). ``only``: the values (normal form) whose attribute is asked."""
    out: set[str] = set()
    for clause in _CLAUSE.split(text):
        p = _profile_of(clause, None, persons, entities, location)
        rates = {stem(w) for m in _RATE.findall(clause) for w in m if w}
        if kind is None or (not p.values and len(p.slots) <= _LEAD_IN_SLOTS):
            out |= p.slots - _UNITS - rates
        elif kind in p.values:
            out |= _near_values(clause, kind, p, only) - _UNITS - rates
    return frozenset(out)


def _rates(entry: Entry) -> frozenset[str]:
    """The rates an entry's values are given at ("a week", "per person")."""
    return frozenset(stem(w) for m in _RATE.findall(_statement(entry)) for w in m if w)


def _attribute(entry: Entry, kind: str | None, only: frozenset[str] | None = None) -> frozenset[str]:
    return _attribute_of(_statement(entry), kind, tuple(entry.persons), tuple(entry.entities), entry.location, only)


def _said(name: str, entry: Entry, shared: frozenset[str]) -> bool:
    """Whether every word of ``name`` is in a clause of the entry holding a shared slot word
    ("GitHub Pages" in "the github-pages package for the custom domain"): the name is said
    again for the same attribute, however it is written."""
    for clause in _CLAUSE.split(_statement(entry)):
        if _profile_of(clause, None, tuple(entry.persons), tuple(entry.entities), entry.location).slots & shared:
            words = set(letter_words(clause.replace("-", " ")))
            if all(w in words for w in letter_words(name)):
                return True
    return False


def _clause_values(entry: Entry, shared: frozenset[str]) -> dict[str, frozenset[str]]:
    """The values of the clauses of ``entry`` that hold a shared slot word: what the
    attribute is said to be, not every value around it ("living in Portland since the
    summer, the Austin heat got to me": Portland, not Austin)."""
    held: dict[str, frozenset[str]] = {}
    for clause in _CLAUSE.split(_statement(entry)):
        p = _profile_of(clause, None, tuple(entry.persons), tuple(entry.entities), entry.location)
        if p.slots & shared:
            for k, v in p.values.items():
                held[k] = held.get(k, frozenset()) | v
    return held


@functools.lru_cache(maxsize=8192)
def _ended_clauses(text: str) -> tuple[str, ...]:
    """The clauses of ``text`` with an ending word (cached: an entry is read as part of its
    own turn and of the turn after it)."""
    return tuple(c for c in _CLAUSE.split(text) if _ENDED.search(c))


def _both_true_or_ended(old: Entry, new: Entry, changed: bool) -> str | None:
    """"" when both statements can be true (:func:`co_true`, or a change the new one names
    of another value), "held value ended" when the new one ends what the old one holds
    (:func:`_ended_held`), None when the rules must read on."""
    ended = _ended_held(old, new)
    if co_true(old, new, changed=changed or ended) or _replaced_elsewhere(old, new):
        return ""
    return "held value ended" if ended else None


def _ended_held(old: Entry, new: Entry) -> bool:
    """Whether the new statement's own sentence ends a value the old one says holds: "I
    gave up on Todoist" after "I track my tasks in Todoist", "cancelled the YMCA
    membership" after "I work out at the Riverside YMCA", "not the 10K anymore" after
    "training for a 10K". Ending what was stated is the plainest way of replacing it,
    whatever the new state is and however it is worded. A dated past event is not a state
    that holds ("we went to Paris in May"), so it is never ended."""
    ended = _ended_clauses(_statement(new))
    if not ended:
        return False  # before profiling the old statement: most pairs hold no ending word
    pa = _profile(old)
    if pa.episode:
        return False
    if _person_gone(old, new, ended) or _name_ended(pa, new, ended):
        return True
    live = _live_slots(new)
    for clause in ended:
        given_up = [stem(m.group(1).lower()) for m in _GIVEN_UP.finditer(clause)]
        if any(w in pa.slots and w not in live for w in given_up):
            return True  # "scratch the lasagna" after "I signed up to bring lasagna"
        if (given_up or _NOT_VALUE.match(clause)) and _value_named(pa, new, clause):
            return True
    return False


def _name_ended(pa: _Profile, new: Entry, ended: tuple[str, ...]) -> bool:
    """Whether a name the old statement holds is said in a clause of the new one that ends
    something, and in no clause that says what holds: its owner ended it, whatever the
    verb's object is called ("closed my Chase account", "we dropped Spotify")."""
    live = " ".join(c for c in _CLAUSE.split(_statement(new)) if not _ENDED.search(c))
    return any(_name_said(v, c) and not _name_said(v, live) for c in ended for v in pa.values.get("name", ()))


def _name_said(name: str, text: str) -> bool:
    """Whether ``text`` says ``name`` by one of its words of three letters or more that is
    no stopword nor title ("Laura" for "Laura Chen", "chase" for "Chase", "haddad" for "Mr.
    Haddad", never "the" for "The Home Depot"), however cased."""
    said = set(letter_words(text.lower()))
    return any(w in said for w in letter_words(name)
               if len(w) > 2 and w not in STOPWORDS and w not in _LIGHT and w.title() not in TITLES)


def _value_named(pa: _Profile, new: Entry, clause: str) -> bool:
    """Whether an ending clause names a value the old statement holds (a name by its words,
    any other type but a date by its normal form)."""
    for kind, values in _profile_of(clause, None, (), tuple(new.entities), None).values.items():
        held = pa.values.get(kind, frozenset())
        if kind == "name":
            words = {w for v in held for w in v.split() if len(w) > 2}
            if any(set(v.split()) <= words for v in values):
                return True
        elif kind != "date" and values & held:
            return True
    return False


#: A person's going, said with no object: "leo quit", "Rosa retired last month", "mr haddad
#: moved away" (not "Tom left the party", "she quit smoking").
_PERSON_GONE = re.compile(r"\b([a-z][\w'-]*)(?:'s| has| had| just)? (?:quit|retired|resigned|stepped down|"
                          r"moved away|left)"
                          r"(?=\s*(?:[.,;:!?)]|$|(?:last|this|in|after|so|and|because|he|she|to move)\b))", re.I)


def _person_gone(old: Entry, new: Entry, ended: tuple[str, ...]) -> bool:
    """Whether a person the old statement is about goes in an ending clause of the new one
    ("leo quit", "Mr. Alvarez retired", "mr haddad moved away"): what the old statement
    says of them ends. The speakers are never gone this way."""
    gone = {w for c in ended for m in _PERSON_GONE.finditer(c) for w in letter_words(m.group(1))}
    speakers = {w for x in (old.speaker, new.speaker, "user", *_AGENT_ROLES) if x for w in letter_words(x)}
    return bool(gone & {w for p in _subjects(old) for w in letter_words(p)} - speakers)


def _retracted(pa: _Profile, ended: tuple[str, ...], kinds: list[str]) -> list[str]:
    """Changed value types whose *old* value the new turn names as ended ("Sakura is closed,
    so I booked Olive Garden", "Laura left the agency. My contact there is Marcus Webb now"):
    saying what is replaced is the plainest way of replacing it. Only a clause with an
    ending word counts: chit-chat names the same brands and places again and again."""
    if not ended:
        return []
    out = []
    for k in kinds:
        olds = pa.values[k]
        if k == "name":
            # "Laura left the agency" names "Laura Chen" by her first name.
            hit = any(_name_said(v, c) for v in olds for c in ended)
        else:
            hit = any(_profile_of(c, None, (), (), None).values.get(k, frozenset()) & olds for c in ended)
        if hit:
            out.append(k)
    return out


def update_reason(old: Entry, new: Entry, similarity: float, config: Config, around: Surroundings | None = None,
                  names: frozenset[str] = frozenset()) -> str | None:
    """Why ``new`` updates ``old`` (a short label naming the rule), or None when it does not;
    :func:`update_evidence` with the reason kept for tests and diagnostics."""
    if (early := _early_verdict(old, new, similarity, config)) is not None:
        return early or None
    if _reported_before(old, new):
        return None
    pa, pb = _profile(old), _profile(new)
    around = around or Surroundings()
    # "instead of Y" is a change of the entry stating Y only.
    changed = changed_types(old, new)
    # A change word counts for the value type it governs ("reduced it to 300ms" changes an
    # amount, not the tool named beside it); one that says a change by itself counts for all.
    own_strong = (pb.strong and ("*" in pb.governed or not changed or bool(pb.governed & set(changed)))) \
        or bool(pb.replaced & (pa.slots | {stem(w) for v in pa.values.get("name", ()) for w in v.split()}))
    retracted = _retracted(pa, around.ended + _ended_clauses(_statement(new)), changed)
    if (verdict := _both_true_or_ended(old, new, own_strong or bool(retracted))) is not None:
        return verdict or None
    shared = (pa.slots & pb.slots) - {stem(n) for n in names}
    # Cues of the entry's own sentence; the rest of its turn lends only strong ones
    # ("Plot twist: ..."), since "now" or "update" somewhere in a long turn says little.
    strong = own_strong or around.strong or bool(retracted)
    # "my new number", "the new venue": "new" on the slot both statements share. "Now" or
    # "new" marks the value of its own clause: "... won 2 awards, but now the user is
    # wondering ..." says nothing new of the awards.
    cued = strong or _marked_present(new, changed, shared)
    if pb.again and not strong:
        return None  # "again", "also", "another": one more of the kind, not a replacement
    if not own_strong and not around.strong:
        # Without a word of change the old value must be gone: "10 engineers" -> "10
        # engineers, one week in ten" adds a number, it replaces none. A value the turn
        # names as replaced ("the Austin heat got to me") is gone all the same.
        held = _clause_values(new, shared)
        changed = [k for k in changed if k in retracted or not pa.values[k] & held.get(k, pb.values[k])]
    # Only the entry's own turn vouches for a change without a value ("I got promoted! I'm a
    # senior product manager now") or without a shared slot word; the turn before is too far.
    if not changed:
        return _untyped_change(pa, pb, around, shared, similarity, config) or _given_up(old, new, around, names)
    if len(changed) > 1 and not cued:
        # Several values differ at once: another event of the same kind ("planning on March
        # 4 at 10 am" / "on March 18 at 2 pm") unless the wording says it changed.
        return None
    kind = _changed_kind(pb, changed)
    if _another_change(old, new, changed, shared, own_strong=own_strong, retracted=bool(retracted), strong=strong):
        return None
    if not shared:
        # With no word in common only the own turn may name the old value as ended: the turn
        # before is the statement's context, not part of it.
        own_turn = bool(_retracted(pa, around.turn_ended + _ended_clauses(_statement(new)), changed))
        return _unshared_change(pa, pb, around, changed, own_strong, names, own_turn)
    return _shared_change(old, new, kind, shared, similarity, config, own_strong=own_strong,
                          retracted=bool(retracted), cued=cued)


@functools.lru_cache(maxsize=8192)
def _change_targets(text: str) -> frozenset[str]:
    """What a statement's change verbs change to: the first two words after their "to"
    ("improved it to 220ms after caching": "220ms after"). Cached: a new entry is compared
    with every candidate, and an old one with every later entry."""
    return frozenset(" ".join(_WORDS.findall(_CLAUSE.split(text[m.end():])[0])[:2])
                     for m in _CHANGE_TO.finditer(text)) - {""}


def _reported_before(old: Entry, new: Entry) -> bool:
    """Whether every change the new statement reports the old one reports too ("improved
    the response time to 220ms after caching", said twice): the same change told again,
    not a newer one."""
    targets = _change_targets(_statement(new))
    return bool(targets) and targets <= _change_targets(_statement(old))


def _early_verdict(old: Entry, new: Entry, similarity: float, config: Config) -> str | None:
    """What is decided before the statements are read: "" (no update) for two sentences of
    one turn, a passage (:func:`co_true`'s first case) or a pair below ``lambda_link`` (but
    for the ending of a held name, down to :data:`_ENDING_FLOOR`), the LLM states' verdict
    when both have one; None when the rules must read them.

    The passage is judged here, before the profiles are built: on agent conversations most
    compared pairs hold an assistant's passage, and profiling them was most of coarsening's
    time (BEAM 100K: 5.8 of 7.2 s of reading pairs, none of them linked)."""
    if set(old.source_turn_ids) & set(new.source_turn_ids):
        return ""
    by_llm = llm_state(old, new)
    if by_llm is not None:
        return "llm state" if by_llm else ""
    if _passage(old) or _passage(new):
        return ""
    # Ending a name the old statement holds needs less closeness: "ditched the Brooks" is
    # far from "been running in Brooks Ghost for 3 years" in wording (0.35), and the name is
    # the tie; unrelated statements sharing a word and an ending word stay below the floor.
    if similarity < config.lambda_link and not (similarity >= _ENDING_FLOOR and _ended_held(old, new)):
        return ""
    return None


#: Cosine floor of an ending of a held name (below ``lambda_link``): the ending pairs of the
#: read suites start at 0.35; at 0.1-0.2 any ending word beside a shared word linked.
_ENDING_FLOOR = 0.3


def _marked_present(entry: Entry, kinds: list[str], shared: frozenset[str]) -> bool:
    """Whether a clause of ``entry`` holding a value of a type in ``kinds`` (any clause when
    ``kinds`` is empty) marks it as the present state: "now", "from now on", "currently",
    or "new" on a slot word in ``shared`` ("the new daily quota of 1,200 calls")."""
    for clause in _CLAUSE.split(_statement(entry)):
        p = _profile_of(clause, None, tuple(entry.persons), tuple(entry.entities), entry.location)
        if kinds and not set(kinds) & set(p.values):
            continue
        if p.weak or p.new_slots & shared:
            return True
    return False


def _changed_kind(pb: _Profile, changed: list[str]) -> str:
    """The value type whose change is judged: the one a change word governs ("adjusted the
    manuscript to MLA style on May 28" changes a name, not the date beside it), else the
    first that changed."""
    return next((k for k in changed if k in pb.governed), changed[0])


def _another_change(old: Entry, new: Entry, changed: list[str], shared: frozenset[str], *, own_strong: bool,
                    retracted: bool, strong: bool) -> bool:
    """Whether the changed value is not a replacement of the old one after all."""
    pa, pb = _profile(old), _profile(new)
    kind = _changed_kind(pb, changed)
    if pb.strong and not own_strong and not retracted:
        return True  # its change word governs another value: that one is what changed
    if kind == "name" and not own_strong and not retracted \
            and all(_said(n, new, shared) for n in pa.values["name"]):
        # Every name of the old statement is said again: a tool, place or person added to
        # the ones in use ("using Python and Flask" / "a REST API using Flask and Postgres"),
        # not one replaced, unless a change word of this sentence says so ("switched from
        # SQLite to PostgreSQL").
        return True
    if (pa.episode or pb.episode) and not strong and "date" in changed:
        # A dated past event is not rescheduled by a later date unless the wording says so,
        # nor does it reschedule anything: it is an event of its own ("Nate has a tournament
        # next month" / "Nate won a tournament on Friday").
        return True
    # A newer statement listing several dates ("Thursday for the report and Sunday for
    # the slides") is a plan of several things, not one replaced value.
    return len(changed) == 1 and not strong and kind in ("date", "time") \
        and _count(pb.values[kind] - pa.values[kind]) > 1


#: A change that names the value it replaces: "moved from November 15 to November 22",
#: "rescheduled from 3 PM to 5 PM", "switched from Microsoft Word to Scrivener".
_CHANGED_FROM = re.compile(_CHANGE_VERB + r"\b(?: [\w'.,$-]+){0,6}? from ((?:[\w'.,:$%-]+ ?){1,4}?) "
                           r"(?:to|into|until|till) ", re.I)


_NUMBER = re.compile(r"\d[\d,.]*\d|\d")


def _replaced_elsewhere(old: Entry, new: Entry) -> bool:
    """Whether ``new`` names the value it replaces and ``old`` does not state it: the change
    is of another statement ("the book launch moved from November 15 to November 22" does not
    replace "the festival on September 22"). Values are compared in their normal form."""
    text = _statement(new)
    said = _statement(old)
    olds = _profile(old).values
    for m in _CHANGED_FROM.finditer(text):
        named = _profile_of(m.group(1), None, (), tuple(new.entities), None).values
        typed = {k: v for k, v in named.items() if k != "name"}
        if typed:
            if not any(v & olds.get(k, frozenset()) for k, v in typed.items()):
                return True
        elif numbers := _NUMBER.findall(m.group(1)):
            # a quantity with its unit glued on ("from 300KB to 180KB", "from 250ms")
            if not {n.replace(",", "") for n in numbers} & {n.replace(",", "") for n in _NUMBER.findall(said)}:
                return True
        elif (word := m.group(1).strip(" .,")) and word[:1].isalpha() and word.lower() not in said:
            return True
    return False


#: Value types of which one holds at a time, so that a close restatement with another
#: value replaces the old one even without a change word. Counts and names are left out:
#: no tuning conversation linked one this way but the reunion head count of the update
#: suite, while on long user-assistant conversations they linked measurements of different
#: runs and tools named side by side.
_SINGLE_VALUED = frozenset({"time", "date", "money", "phone", "email"})


def _shared_change(old: Entry, new: Entry, kind: str, shared: frozenset[str], similarity: float, config: Config, *,
                   own_strong: bool, retracted: bool, cued: bool) -> str | None:
    """A changed value of ``kind`` in statements sharing slot words ``shared``."""
    pa, pb = _profile(old), _profile(new)
    # A value of another attribute never supersedes: the slot words the two statements share
    # must be what the changed value is *of*, not its unit or the rest of a long sentence
    # ("the budget is $4,000 per person" / "the flights came to $1,180 per person" share
    # "person" only as a rate). A change verb governing the new value names its object
    # ("the first sprint got moved to March 31"): a brief old statement need only be about it.
    # A physical unit is one attribute of one subject when the wording marks a change ("I
    # weigh 82 kg" / "my weight is 78.5 kg now") at the same rate ("10 km a week" is not "a
    # 12 km hike"); a rate, a duration or a currency alone is not.
    measured = shared & _MEASURES if kind == "number" and cued and _rates(old) == _rates(new) else frozenset()
    # The new side is read next to the values it brings (not the ones it repeats: "the flight
    # is booked for August 20" beside "orientation on September 2" is about the orientation).
    brought = pb.values[kind] - pa.values[kind]
    shared = shared & _attribute(old, None if own_strong and _brief(pa) else kind) & _attribute(new, kind, brought)
    if not shared and not retracted and not measured:
        return None
    if kind == "name" and len(shared) < 2 and not (_brief(pa) and _brief(pb)) and not retracted:
        # Long statements naming other tools or places and sharing one word ("faster")
        # share a topic, not an attribute.
        return None
    # A shared slot and a new value: a cue suffices; without one, only a close restatement
    # of a value that holds one at a time is an update: a clock time, an amount or a contact
    # ("workouts at 7 pm" / "workouts at 6 am"), or a date sharing two slot words. A count or
    # a name said again differently is most often another measurement, example or tool
    # ("8 workers" in one test run, "12" in the next); the offline answer still takes the
    # later of two close statements (``synthesis``), without the link.
    if _compound_about(old, shared) or _compound_about(new, shared):
        # A statement of many values (a plan, a progress report) changes one of them only
        # when a change word governs it ("moved the call to April 22 at 11 AM"): "now" or
        # a close wording does not say which value is new.
        # A cue that says a change by itself ("rescheduled", "correction") says which value
        # changed only in a statement of one value ("Flight got delayed, now landing at 7:10").
        governs = own_strong and (bool(pb.governed & set(changed_types(old, new))) or not _compound_about(new, shared))
        return f"{kind} changed, shared slot, governed" if governs or retracted else None
    if cued:
        return f"{kind} changed, shared slot, {'retracted' if retracted else 'cue'}"
    if not (_brief(pa) and _brief(pb)):
        return None  # a long statement restated with another number is a progress report, not one fact
    if similarity >= config.lambda_link_plain and kind in _SINGLE_VALUED and (len(shared) >= 2 or kind != "date"):
        return f"{kind} changed, shared slot, close"
    return None


#: Value types that name their attribute by themselves: a person has one phone number or
#: email address in use, so a new one with a change cue replaces the old even when the two
#: statements share no word. A date, an amount, a count or a name does not: "the conference
#: is on April 18" / "I signed up for a workshop in April instead" are two events.
_CONTACTS = frozenset({"phone", "email"})


def _unshared_change(pa: _Profile, pb: _Profile, around: Surroundings, changed: list[str], own_strong: bool,
                     names: frozenset[str], retracted: bool = False) -> str | None:
    """A changed value with nothing but its type in common ("my number is 555-0199" / "use
    555-0733 from now on"): only a contact (:data:`_CONTACTS`) with a change cue or a "new"
    on the old statement's slot ("my new number"; of a date or a count, "this new role"
    ties two plans of one profile: on the BEAM tuning conversations asked as one log, 4 of
    7 links across two conversations and no link of any update suite), an old value the
    turn names as ended ("The Hilton overbooked, so we switched to the Marriott"), or a
    turn whose change cue names the slot ("The landlord raised the rent. Starting June we
    pay $1,600 a month.": the cue and the slot word in one sentence, the value in the
    next)."""
    if len(changed) != 1:
        return None
    if changed[0] in _CONTACTS and (own_strong or pb.weak or bool(pb.new_slots & pa.slots)):
        return f"{changed[0]} changed, cue"
    if retracted:
        return f"{changed[0]} changed, retracted"
    if around.turn_strong and (pa.slots & around.turn_slots) - {stem(n) for n in names}:
        return f"{changed[0]} changed, cue and slot in the turn"
    return None


#: Giving something up, with what was given up as its object ("quit coffee", "gave up on
#: Todoist", "stopped taking the bus"); never negated ("not gonna give up on my dreams").
_GIVEN_UP = re.compile(r"(?<!not )(?<!n't )(?<!never )\b(?:quit|gave up|given up|giving up|stopped|dropped|ditched|"
                       r"scratch|got rid of|switched from|cancel+ed|moved off(?: of)?|bailed on|backed out of|"
                       r"pulled out of)\s+(?:(?:on|my|the|our|his|her|their|taking|using|"
                       r"drinking|eating|going to|playing|doing)\s+)*([a-z][\w-]*)", re.I)


def _given_up(old: Entry, new: Entry, around: Surroundings, names: frozenset[str]) -> str | None:
    """A replacement with no typed value: the new turn gives up something the old statement
    says holds ("I quit coffee", "I gave up on Todoist", "I stopped taking the bus") and the
    new statement, marked as the present state ("now", "these days", "instead"), fills the
    same attribute with something else ("... and drink green tea in the mornings now").
    Only the own turn counts; the attribute is a word both say outside the giving up."""
    pb = _profile(new)
    if not (pb.weak or pb.current or "*" in pb.governed):
        return None
    texts = [_statement(e) for e in around.turn_entries] + [_statement(new)]
    objects = frozenset(stem(m.group(1).lower()) for t in texts for m in _GIVEN_UP.finditer(t))
    if not objects:
        return None
    held, live = _live_slots(old), _live_slots(new)
    gone = (held - live) & objects
    same = (held & live) - {stem(n) for n in names}
    return "state changed, given up" if gone and same and live - held else None


def _live_slots(entry: Entry) -> frozenset[str]:
    """Slot words of the entry's clauses that end nothing: what it says holds."""
    return frozenset().union(*(_profile_of(c, None, tuple(entry.persons), tuple(entry.entities), entry.location).slots
                               for c in _CLAUSE.split(_statement(entry))
                               if not _ENDED.search(c) and not _GIVEN_UP.search(c)))


def _untyped_change(pa: _Profile, pb: _Profile, around: Surroundings, shared: frozenset[str],
                    similarity: float, config: Config) -> str | None:
    """No typed value changed: a changed state word ("blocked on the review" -> "in progress
    now") counts only when the two statements are close, share at least two slot words, each
    says something the other does not, and the wording marks the change: a change cue (of
    this sentence or its turn: "I got promoted! I'm a senior product manager now"), a new
    status word with "now" / "as of" ("closed as of today") or after a "still" ("still in
    the hospital" -> "came home"), or "these days" said of a habit ("I take my coffee black,
    always have" -> "these days I take it with oat milk")."""
    if not (len(shared) >= 2 and similarity >= config.lambda_link_untyped and pb.slots - shared
            and pa.slots - shared and pa.sentences == 1 and pb.sentences == 1 and _brief(pa) and _brief(pb)):
        # With no typed value to point at, the whole statement is the value: only a single
        # fact can change it, never talk of several sentences.
        return None
    new_status = bool(pb.status - pa.status)
    if pb.strong or around.turn_strong:
        return "state changed, cue"
    if new_status and (pb.weak or pa.still):
        return "state changed, status word"
    if pb.current and pa.habit and not pb.episode:
        return "habit changed"
    return None


def decide(new: Entry, candidates: Sequence[tuple[Entry, float]], config: Config,
           around: Surroundings | None = None, names: frozenset[str] = frozenset(),
           superseded: frozenset[str] | set[str] = frozenset()) -> CoarsenDecision:
    """The paper's three cases against bounded candidates ``(entry, cosine)``.

    A duplicate anywhere among the similar candidates wins (MERGE); otherwise a candidate
    that ``new`` updates is LINKed (:func:`update_evidence`): one stating a single value of
    the changed type before one stating several, then the most similar.

    A candidate said after ``new`` is never its older state (turns may arrive out of time
    order; the later statement stays current).

    One truth per fork: a candidate that already has a newer state (its ``superseded_by``,
    or an id in ``superseded``: linked earlier in the same window) is never LINKed again. A
    later statement updates the chain through its latest state, or not at all: "the budget
    is $4,000" -> "cut the budget to $3,200" stands, and "the flights came to $1,180" is
    compared with the $3,200, not with the $4,000 it would otherwise also replace. So every
    entry has at most one successor, and ``history()``, ``entries()``' valid-until and the
    evidence graph's markers name the same one.
    """
    if not config.enable_coarsening:
        return CoarsenDecision(Action.ADD)
    new_terms = terms(new)
    pool = [(c, s) for c, s in candidates if c.id != new.id]
    similar = sorted(((c, s) for c, s in pool if s > config.lambda_coal and not different_subjects(new, c)),
                     key=lambda cs: -cs[1])
    for cand, sim in similar:
        ovl = keyword_overlap(new_terms, terms(cand))
        # A MERGE drops the new text, so the old must say all it says: the same values
        # ("Parcel p1x5 arrived" and "Parcel p2x5 arrived" share every keyword but state
        # different ids), and the same words in the same order, negations included ("does
        # cover" / "does not cover", "size M" / "size L", "$5,000" / "€5,000"), which
        # keywords and a cosine above 0.85 do not tell apart.
        if ovl > config.lambda_ovlp and not value_changed(cand, new) and says_nothing_new(new.text, cand.text):
            return CoarsenDecision(Action.MERGE, cand.id, sim, ovl)
    if not config.link_requires_value_change:  # the paper's rule
        if similar:
            cand, sim = similar[0]
            return CoarsenDecision(Action.LINK, cand.id, sim, keyword_overlap(new_terms, terms(cand)))
        return CoarsenDecision(Action.ADD)
    # A statement said before a stored one never supersedes it, whatever order the turns
    # arrived in: the latest state is the one said last.
    updated = [(c, s) for c, s in sorted(pool, key=lambda cs: -cs[1])
               if not c.superseded_by and c.id not in superseded and not _said_after(c, new)
               and update_evidence(c, new, s, config, around, names)]
    if not updated:
        return CoarsenDecision(Action.ADD)
    # The statement of one value of the changed type is the better old state than one
    # stating several ("targeting 1,200 words per week" over "logged 3,600 words, 72% of
    # the weekly target"), then the most similar.
    updated.sort(key=lambda cs: _ambiguous(cs[0], new))
    cand, sim = updated[0]
    # Further old entries are superseded too only when they state the same old value as
    # the target (a request and its confirmation); anything else keeps its own state.
    first = _profile(cand).values
    also = tuple(c.id for c, _ in updated[1:]
                 if any(v & first.get(k, frozenset()) for k, v in _profile(c).values.items()))
    return CoarsenDecision(Action.LINK, cand.id, sim, keyword_overlap(new_terms, terms(cand)), also)


def _said_after(a: Entry, b: Entry) -> bool:
    """Whether ``a`` was said after ``b`` (False when either has no time)."""
    try:
        return a.timestamp is not None and b.timestamp is not None and a.timestamp > b.timestamp
    except TypeError:  # a naive and an aware time (entries built by hand): no order known
        return False


def _ambiguous(old: Entry, new: Entry) -> bool:
    """Whether ``old`` states several values of every type ``new`` changes in it."""
    values = _profile(old).values
    kinds = changed_types(old, new)
    return bool(kinds) and all(_count(values[k]) > 1 for k in kinds)


def merge_into(old: Entry, new: Entry) -> Entry:
    """MERGE: keep ``old``, refresh its timestamp, add ``new``'s provenance and vocabulary."""
    # Every list stays within the limits every stored entry meets (a fact repeated in
    # thousands of turns would otherwise outgrow them and fail its export or doctor):
    # the first item (where it began) and the latest ones are kept.
    for tid in new.source_turn_ids:
        if tid not in old.source_turn_ids:
            old.source_turn_ids.append(tid)
    old.source_turn_ids = bounded_list(old.source_turn_ids)
    for name in ("keywords", "persons", "entities"):
        have = getattr(old, name)
        seen = {x.lower() for x in have}
        have.extend(x for x in getattr(new, name) if x.lower() not in seen)
        setattr(old, name, bounded_list(have))
    if new.timestamp is not None and (old.timestamp is None or new.timestamp > old.timestamp):
        old.timestamp = new.timestamp
    if old.first_timestamp is None:
        old.first_timestamp = new.first_timestamp or new.timestamp
    merged_from = old.metadata.get("merged_from")
    if not isinstance(merged_from, list):
        # Not this library's list (a caller's value under the same name, from a store
        # written before such values were renamed): a crash here wedged the user's ingest.
        merged_from = []
    merged_from.append(new.id)
    old.metadata["merged_from"] = bounded_list(merged_from, MAX_MERGED_FROM) \
        if len(merged_from) > MAX_MERGED_FROM else merged_from
    return old
