"""Rule-based grounding: what makes one turn's text readable without the dialogue around it.

The memory stores each turn as a context-independent restatement, because an entry is
later retrieved alone, days of dialogue away from the turns that explained its "I", "you"
and "yesterday". Everything here is precompiled regular expressions and set look-ups, so
the whole restatement costs a small fraction of a millisecond per turn (ingest must stay
well above 300 turns/s); heavy NLP (spaCy, dateparser) is deliberately avoided.

* :func:`ground_pronouns` - first person -> the speaker ("I'm" -> "Caroline is"), second
  person -> the other party ("your" -> "Melanie's").
* :func:`ground_time` (in :mod:`.dates`) - relative time -> absolute dates from the turn's
  timestamp, appended in parentheses so the original wording is kept ("yesterday (2023-05-07)").
* :func:`find_location`, :func:`find_topic`, :func:`find_attributes` - entry fields used by
  coarsening, counters and retrieval (keywords and names come from :mod:`ariadnemem_core.text`).
* :func:`split_atomic`, :func:`is_chitchat` - optional sentence-level atomization.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

from ..text import (
    COMMON_CAPS,
    FAMILY_NAMES,
    NAME_PHRASE,
    STOPWORDS,
    TITLES,
    keywords,
    participant,
    previous_word,
    strip_possessive,
)
from .dates import ground_time

__all__ = ["find_attributes", "find_location", "find_topic", "ground_pronouns", "ground_pronouns_ex",
           "ground_time", "is_chitchat", "name_speaker", "speaker_label", "split_atomic", "third_person"]

# --------------------------------------------------------------------------- topics
#: Coarse topic lexicon; ties are broken by this order (most specific first).
TOPICS: dict[str, frozenset[str]] = {
    "family": frozenset("kids kid children child son daughter mom dad mother father family husband wife "
                        "sister brother parents parent grandma grandpa grandmother grandfather baby "
                        "siblings cousin niece nephew aunt uncle adoption adopt".split()),
    "work": frozenset("job work career boss office colleague coworker company project meeting promotion "
                      "interview business client salary startup manager hired fired shift "
                      "internship".split()),
    "health": frozenset("health doctor hospital sick illness injury injured surgery medicine diet sleep "
                        "pain disease diagnosis recovery clinic nurse".split()),
    "art": frozenset("painting paint painted art drawing draw sculpture pottery artist gallery canvas "
                     "photography mural craft crafts sketch museum".split()),
    "music": frozenset("music song songs guitar piano concert band sing singing violin album musician "
                       "playlist drums".split()),
    "sports": frozenset("running run marathon gym yoga climbing swim swimming soccer football "
                        "basketball tennis workout race training game match team tournament fitness "
                        "exercise volleyball baseball".split()),
    "travel": frozenset("trip travel traveling travelling vacation flight hotel abroad journey tour "
                        "visit visited visiting country city road".split()),
    "pets": frozenset("dog dogs cat cats puppy puppies kitten pet pets horse vet shelter".split()),
    "education": frozenset("school college university class classes course degree study studying exam "
                           "exams teacher student students education homework semester".split()),
    "food": frozenset("cook cooking recipe recipes dinner lunch breakfast bake baking restaurant food "
                      "meal cake dish cafe".split()),
    "relationships": frozenset("friend friends friendship girlfriend boyfriend date dating partner "
                               "relationship marriage married breakup love".split()),
    "events": frozenset("party birthday wedding festival celebration celebrate anniversary parade "
                        "graduation holiday conference".split()),
    "identity": frozenset("lgbtq transgender trans pride identity gender queer counseling therapy "
                          "mental anxiety depression stress self-care".split()),
    "nature": frozenset("nature garden gardening park forest mountain mountains lake river camping "
                        "hike hiking beach outdoors trail sunset".split()),
    "books": frozenset("book books reading read novel novels author library poetry story".split()),
    "home": frozenset("house home apartment room kitchen moved move renovation furniture".split()),
}
_TOPIC_ORDER = {t: i for i, t in enumerate(TOPICS)}
_TOPIC_OF: dict[str, str] = {}
for _topic, _words in TOPICS.items():
    for _w in _words:
        _TOPIC_OF.setdefault(_w, _topic)


# --------------------------------------------------------------------------- pronouns
#: Speaker names that are a role, not a person: written "the user" / "the assistant".
USER_SPEAKERS = frozenset({"user", "human"})
#: Default assistant speaker names (``Config.assistant_speakers`` overrides them).
DEFAULT_ASSISTANT_SPEAKERS: tuple[str, ...] = ("assistant", "ai", "bot", "chatbot")


def speaker_label(name: str, assistant_speakers: Iterable[str] = DEFAULT_ASSISTANT_SPEAKERS) -> str:
    """How a restatement names a speaker: "the user" / "the assistant" for a role speaker
    (a bare "user need" or "assistant know" reads as broken English), the name otherwise."""
    low = name.strip().lower()
    if low in USER_SPEAKERS:
        return "the user"
    if low in {a.lower() for a in assistant_speakers}:
        return "the assistant"
    return name


def name_speaker(grounded: str, speaker: str,
                 assistant_speakers: Iterable[str] = DEFAULT_ASSISTANT_SPEAKERS) -> str:
    """``grounded`` prefixed with "Speaker: " unless it already names the speaker, so an
    entry says who said it ("Caroline: That's awesome!", "The assistant: Here is a plan")."""
    label = speaker_label(speaker, assistant_speakers)
    if label.lower() in grounded.lower():
        return grounded
    return f"{label[:1].upper()}{label[1:]}: {grounded}".rstrip()


#: Lowercased form -> (replacement template, verb part). ``{S}`` is the speaker, ``{O}`` the
#: other party. After an inverted auxiliary the verb part is kept as written and the
#: auxiliary carries the agreement instead ("do you have" -> "does Melanie have").
_FIRST: dict[str, tuple[str, str]] = {
    "i'm": ("{S} is", ""), "i am": ("{S} is", " am"), "i've": ("{S} has", ""), "i have": ("{S} has", " have"),
    "i haven't": ("{S} hasn't", " haven't"), "i don't": ("{S} doesn't", " don't"),
    "i'll": ("{S} will", ""), "i'd": ("{S} would", ""), "i": ("{S}", ""), "me": ("{S}", ""),
    "myself": ("{S}", ""), "my": ("{S}'s", ""), "mine": ("{S}'s", ""),
}
_SECOND: dict[str, tuple[str, str]] = {
    "you're": ("{O} is", ""), "you are": ("{O} is", " are"), "you've": ("{O} has", ""),
    "you have": ("{O} has", " have"), "you haven't": ("{O} hasn't", " haven't"),
    "you don't": ("{O} doesn't", " don't"), "you were": ("{O} was", " were"), "you'll": ("{O} will", ""),
    "you'd": ("{O} would", ""), "yourself": ("{O}", ""), "yours": ("{O}'s", ""), "your": ("{O}'s", ""),
    "you": ("{O}", ""),
}
#: Before the subject (an inverted question, "so do I"), the auxiliary keeps the verb after
#: the subject as written.
_AUXILIARIES = frozenset(
    "do does did don't doesn't didn't can can't could couldn't will won't would wouldn't should shouldn't "
    "have has had haven't hasn't hadn't am are is was were aren't isn't wasn't weren't shall may might "
    "must".split()
)
#: An inverted auxiliary that agrees with its subject -> its third-person singular form.
_AGREE: dict[str, str] = {
    "do": "does", "don't": "doesn't", "have": "has", "haven't": "hasn't", "am": "is", "are": "is",
    "aren't": "isn't", "were": "was", "weren't": "wasn't",
}
_INVERTED_AUX_RE = re.compile(r"\b(" + "|".join(re.escape(a) for a in _AGREE) + r")(\s+)$", re.IGNORECASE)
#: "you" is a subject (its verb agrees) at the start of a clause: after these words or
#: punctuation; elsewhere it is an object ("I'll give you hope" keeps "hope").
_CLAUSE_OPENERS = frozenset(
    "and but or so if when whenever because since as while though although unless until till once before "
    "after lest whereas wherever than case where what "
    "how why who which whether then that hope think thought guess bet believe know knew feel felt wish "
    "mean say said sure glad like maybe perhaps now also really just always never still even".split()
)
#: Plural "you" is not the other party.
_PLURAL_YOU_AFTER = frozenset("guys all both two folks people lot".split())
#: Words between a subject and its verb that do not change the agreement.
_ADVERBS = frozenset(
    "really also just always never still even only often usually sometimes actually totally definitely "
    "kinda sorta truly honestly seriously personally absolutely completely rarely finally already "
    "generally mostly certainly probably literally simply especially barely hardly almost ever "
    "sincerely genuinely deeply strongly currently now normally typically".split()
)
#: Modal verbs never take -s ("Caroline can", not "Caroline cans").
_MODALS = frozenset("can could will would shall should may might must ought".split())
_IRREGULAR_3SG: dict[str, str] = {
    "am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "don't": "doesn't",
    "haven't": "hasn't", "aren't": "isn't", "weren't": "wasn't",
}
_NEXT_WORD = re.compile(r"([ \t]+)([A-Za-z]+(?:'t)?)\b(?!['-]\w)")
#: "mine" as a noun ("a gold mine") is left alone after these words.
_MINE_NOUN_BEFORE = frozenset("a the this that gold coal salt diamond silver copper iron old land".split())
#: One pass over the text: a trie by first letter (so most positions fail on one character
#: test) over every form above plus two fillers that are kept as they are ("you know what I
#: mean", "I mean, ..."). Longer forms come first so "I'm" wins over "I".
_PRONOUN_RE = re.compile(
    r"(?=[imyIMY])\b(?:"
    r"i(?: mean(?=,)|'m| am|'ve| haven't| have| don't|'ll|'d)?"
    r"|m(?:yself|ine|y|e)"
    r"|you(?: know what i mean|'re| are|'ve| haven't| have| don't| were|'ll|'d|rselves|rself|rs|r)?"
    r")\b(?!'\w|-\w|\.\w)",
    re.IGNORECASE,
)
#: "you know" as a filler ("It's hard, you know?") is not about the other party.
_YOU_KNOW_FILLER = re.compile(r" know(?:[,.?!]|$)")
_I_HAD = re.compile(r" (?:been|had|better|gone|done|never been)\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?:\n]\s*|^\s*[-*+]\s+|\n\s*[-*+]\s+|[\"(]\s*)$")


@functools.lru_cache(maxsize=4096)
def third_person(verb: str) -> str | None:
    """The third-person singular present of a base-form verb ("need" -> "needs", "try" ->
    "tries", "watch" -> "watches", "am" -> "is"), or None when ``verb`` is not one: past
    tense ("went"), a modal ("can"), an ``-ing`` form, a non-verb ("too"), a verb whose
    past equals its base ("read", "put") or that is another verb's past ("saw", "found"):
    there the tense is unknowable, so the word stays as said.

    The verb lexicon is lemminflect's (loaded on first use).
    """
    low = verb.lower()
    out = _IRREGULAR_3SG.get(low)
    if out is None:
        if low in _MODALS or low in _ADVERBS or not low.isalpha():
            return None
        from lemminflect import getAllInflections, getAllLemmas

        forms = getAllInflections(low, upos="VERB")
        if "VBZ" not in forms or low in forms.get("VBD", ()):
            return None
        if set(getAllLemmas(low, upos="VERB").get("VERB", (low,))) != {low}:
            return None  # also another verb's past ("saw", "found", "fell")
        out = forms["VBZ"][0]
    if verb.isupper() and len(verb) > 1:
        return out.upper()
    return out[:1].upper() + out[1:] if verb[:1].isupper() else out


def _agree_next_verb(s: str, pos: int) -> tuple[str, int] | None:
    """The text from ``pos`` up to the subject's verb, with the verb made third-person
    singular, and where it ends; None when no present-tense verb follows."""
    start = pos
    for _ in range(4):
        m = _NEXT_WORD.match(s, pos)
        if m is None:
            return None
        word = m.group(2)
        low = word.lower()
        if low in _ADVERBS or (low.endswith("ly") and third_person(word) is None):
            pos = m.end()
            continue
        verb = third_person(word)
        if verb is None:
            return None
        return s[start:m.start(2)] + verb, m.end()
    return None


def _reflexive(s: str, start: int, subject_at: int | None) -> bool:
    """True when the same person is the subject earlier in this sentence ("I taught myself")."""
    return subject_at is not None and not re.search(r"[.!?\n]", s[subject_at:start])


def _is_pronoun(m: re.Match[str], key: str, prev: str, other_known: bool) -> bool:
    """Whether a match of :data:`_PRONOUN_RE` is a pronoun to ground (not a filler, a noun
    "mine", plural "you", or a second person with nobody to resolve it to)."""
    # Unicode case folding lets IGNORECASE match forms the tables do not hold ("İ"
    # matches "i" but lowers to "i̇"): such a match is not a pronoun, keep it as written.
    if key.endswith("mean") or (key not in _FIRST and key not in _SECOND):
        return False
    if not key.startswith("you"):
        return not (key == "mine" and prev in _MINE_NOUN_BEFORE)
    if not other_known or key == "yourselves":
        return False
    if key == "you":
        if _YOU_KNOW_FILLER.match(m.string, m.end()):
            return False
        nxt = _NEXT_WORD.match(m.string, m.end())
        if nxt is not None and nxt.group(2).lower() in _PLURAL_YOU_AFTER:
            return False
    return True


def _agree_inverted(gap: str) -> str:
    """``gap`` (the text before an inverted subject) with its closing auxiliary made
    third-person singular: "do " -> "does ", "Are " -> "Is ", "what're " -> "what's "."""
    aux = _INVERTED_AUX_RE.search(gap)
    if aux is not None:
        said = aux.group(1)
        agreed = _AGREE[said.lower()]
        agreed = agreed[:1].upper() + agreed[1:] if said[:1].isupper() else agreed
        return gap[:aux.start()] + agreed + aux.group(2)
    cut = len(gap.rstrip())
    if gap[:cut].lower().endswith("'re"):
        return gap[:cut - 3] + "'s" + gap[cut:]
    return gap


def ground_pronouns_ex(text: str, speaker: str, other: str | None, *,
                       assistant_speakers: Iterable[str] = DEFAULT_ASSISTANT_SPEAKERS) -> tuple[str, bool]:
    """:func:`ground_pronouns` plus whether a second-person form was resolved to ``other``."""
    used_other = False
    me = speaker_label(speaker, assistant_speakers)
    you = speaker_label(other, assistant_speakers) if other is not None else None
    out: list[str] = []
    last = 0
    subject_at: dict[bool, int] = {}  # first person? -> where its last subject form was
    for m in _PRONOUN_RE.finditer(text):
        if m.start() < last:
            continue
        form = m.group(0)
        key = form.lower()
        prev = previous_word(text, m.start())
        if not _is_pronoun(m, key, prev, you is not None):
            continue
        first = not key.startswith("you")
        if first:
            name = me
        else:
            used_other = True
            name = you or ""
        gap = text[last:m.start()]
        end = m.end()
        template, verb = (_FIRST if first else _SECOND)[key]
        subject = key not in ("me", "my", "mine", "myself", "your", "yours", "yourself")
        if key in ("myself", "yourself") and _reflexive(text, m.start(), subject_at.get(first)):
            repl = "themselves"
        elif key == "i'd" and _I_HAD.match(text, m.end()):
            repl = f"{name} had"
        elif subject and (prev in _AUXILIARIES or prev.endswith("'re")):
            # Inverted: "do you have" -> "does Melanie have", "can you help" -> "can Melanie help".
            gap = _agree_inverted(gap)
            repl = name + form[len(form) - len(verb):] if verb else name
        else:
            repl, end = _filled(template, name, key, prev, text, end)
        if subject:
            subject_at[first] = m.start()
        if repl.startswith("the ") and _SENTENCE_START.search("".join(out[-2:]) + gap if out else gap):
            repl = "T" + repl[1:]
        out.append(gap)
        out.append(repl)
        last = end
    out.append(text[last:])
    return "".join(out), used_other


def _filled(template: str, name: str, key: str, prev: str, text: str, end: int) -> tuple[str, int]:
    """The pronoun's template filled with ``name``, and where the replaced span ends: after
    "I" (or a clause-opening "you") the next verb is taken in and made to agree."""
    repl = template.replace("{S}", name).replace("{O}", name)
    if key == "i" or (key == "you" and (prev == "" or prev in _CLAUSE_OPENERS)):
        agreed_verb = _agree_next_verb(text, end)
        if agreed_verb is not None:
            return repl + agreed_verb[0], agreed_verb[1]
    return repl, end


def ground_pronouns(text: str, speaker: str, other: str | None, *,
                    assistant_speakers: Iterable[str] = DEFAULT_ASSISTANT_SPEAKERS) -> str:
    """First person -> ``speaker``; second person -> ``other`` (left alone when unknown),
    with the verb made to agree ("I think so" -> "Caroline thinks so", "do you have" ->
    "does Melanie have"). A role speaker is "the user" / "the assistant" (see
    :func:`speaker_label`): "Can you help me" said by the user becomes "Can the assistant
    help the user".

    Expects :func:`normalize_text` output (straight apostrophes). "we/us/our" are left as
    they are: who "we" is (the pair, a family, a team) is not decidable by rule.
    """
    return ground_pronouns_ex(text, speaker, other, assistant_speakers=assistant_speakers)[0]


_LOCATION_RE = re.compile(
    r"\b(?:in|at|to|from|near|visited|visiting|visit|moved\s+to|back\s+to|around|across|through)\s+"
    r"(?:the\s+)?(" + NAME_PHRASE + r")"
)
#: "talked to Jenna", "a gift from Jenna": the phrase after these is a person, not a place.
_NOT_PLACE_BEFORE = frozenset(
    "talk talked talking talks spoke speak speaking said say says sent send sending gave give giving wrote "
    "write writing listen listened listening introduced introduce thanks congrats props shoutout married "
    "engaged close next similar due according gift message letter card call text heard note advice help "
    "support love hugs reply replied belongs belonged dedicated".split()
)


def find_location(text: str, persons: Iterable[str] = (), participants: Mapping[str, str] | None = None
                  ) -> str | None:
    """The first capitalized phrase after in/at/to/from/near/visited/moved to that is not
    a person, a calendar word or a common word ("went to Sweden" -> "Sweden")."""
    people = {p.lower() for p in persons}
    index = participants or {}
    for m in _LOCATION_RE.finditer(text):
        words = m.group(1).split()
        while words and strip_possessive(words[0]).lower() in COMMON_CAPS:
            words.pop(0)
        while words and words[-1].lower() in COMMON_CAPS:
            words.pop()
        if not words:
            continue
        words[-1] = strip_possessive(words[-1])
        if words[0].lower() in FAMILY_NAMES or previous_word(text, m.start()) in _NOT_PLACE_BEFORE:
            continue
        place = " ".join(words)
        if place.lower() in people or (len(words) == 1 and participant(words[0], index)):
            continue
        return place
    return None


def find_topic(words: Iterable[str]) -> str | None:
    """The topic of the lexicon most keywords belong to (ties: lexicon order), else None."""
    counts: dict[str, int] = {}
    for w in words:
        t = _TOPIC_OF.get(w)
        if t is None and len(w) > 3 and w.endswith("s"):
            t = _TOPIC_OF.get(w[:-1])
        if t is not None:
            counts[t] = counts.get(t, 0) + 1
    if not counts:
        return None
    return min(counts, key=lambda t: (-counts[t], _TOPIC_ORDER[t]))


# --------------------------------------------------------------------------- attributes
_VALUE_WORD = r"(?:[^\s.,!?;:()\"]|[.,:](?=[^\s.,!?;:]))+"
_ATTRIBUTE_RE = re.compile(
    r"\b(?i:my)\s+((?:[a-zA-Z]+(?:'s)?\s+){0,2}[a-zA-Z]+)\s+(?:is|=)\s+(?=(" + _VALUE_WORD
    + r"(?:\s" + _VALUE_WORD + r"){0,7}))"  # lookahead: the value may hold the next "my ... is"
)
_VALUE_STOP = frozenset("but because since so which though although if when while whereas unless until".split())
#: Two-word clause openers ("555-0142 in case you need it", "... just in case").
_VALUE_STOP_PAIRS = frozenset({("in", "case"), ("in", "order"), ("just", "in")})
_VALUE_STOP_AFTER_AND = frozenset("i i'm my we she he they it it's that this you your then also".split())
_VALUE_REJECT = frozenset(
    "so really very just also not always still too pretty kinda quite such getting going being doing that "
    "what how why where who like actually definitely totally probably gonna finally now already all "
    "about more less much something nothing everything".split()
)
#: "My new / current / updated phone number is ...": the same attribute, a newer value
#: (the look-up returns the newest), not a different attribute named "new phone number".
_ATTR_NEWER = frozenset("new current updated latest".split())
_ATTR_REJECT = frozenset("own only first last best whole life heart mind point goal plan hope dream".split())


def find_attributes(text: str) -> dict[str, str]:
    """Self-stated attributes: "My phone number is 555-0199" -> {"phone number": "555-0199"},
    "my dog's name is Max" -> {"dog's name": "Max"}, "my dog is named Max" likewise.

    ``attr`` is 1-3 words, lowercased; the value is at most 6 words and stops at
    punctuation or a clause boundary ("but", "and I ..."). Vague values ("so much fun")
    are not attributes. The subject is the speaker (the memory records it).
    """
    if "my" not in text.lower():
        return {}
    out: dict[str, str] = {}
    for m in _ATTRIBUTE_RE.finditer(text):
        attr_words = m.group(1).lower().split()
        if attr_words[0] in _ATTR_NEWER and len(attr_words) > 1:
            attr_words = attr_words[1:]  # "my new phone number" updates "phone number"
        if attr_words[0] in STOPWORDS or attr_words[0] in _ATTR_REJECT:
            continue
        words = m.group(2).split()
        if words and words[0].lower() in ("named", "called") and len(words) > 1:
            if attr_words[-1] != "name":
                attr_words = [*attr_words[:-1], attr_words[-1] + "'s", "name"]
            words = words[1:]
        value = _attribute_value(words)
        if not value or value[0].lower() in _VALUE_REJECT:
            continue
        attr = " ".join(attr_words)
        out.setdefault(attr, " ".join(value).strip("'\""))
    return out


def _attribute_value(words: list[str]) -> list[str]:
    """The value's words: at most 6, stopping at a clause boundary ("but", "and I ...")."""
    value: list[str] = []
    for i, w in enumerate(words):
        lw = w.lower()
        nxt = words[i + 1].lower() if i + 1 < len(words) else ""
        if (lw in _VALUE_STOP or (lw, nxt) in _VALUE_STOP_PAIRS
                or (lw in ("and", "or") and nxt in _VALUE_STOP_AFTER_AND)):
            break
        value.append(w)
        if len(value) == 6:
            break
    return value


# --------------------------------------------------------------------------- sentences
#: A sentence ends at ".", "!" or "?" before the next word, capitalised or not (chat is
#: often written in lowercase: "ok I dropped italian. it's japanese now. is that realistic?"),
#: but not after a title or an abbreviation: "the coach is Mr. Alvarez" is one sentence
#: (split, the entry read "the coach is Mr." and the name went to another entry), and so is
#: "at 9 a.m. tomorrow".
#: A title ends no sentence in either case: chat writes "my dentist dr. halvorsen" too
#: ("ms." aside: "the page took 300 ms. Then it crashed." is two sentences).
_NO_END = (*TITLES, "St", "Jr", "Sr", "mr", "mrs", "dr", "prof", "st", "jr", "sr",
           "vs", "e.g", "i.e", "a.m", "p.m", "etc", "approx", "no", "min")
_SENT_SPLIT = re.compile(r"(?<=[.!?])" + "".join(rf"(?<!\b{re.escape(w)}\.)" for w in _NO_END) + r"(?<!\.\.\.)"
                         r"\s+(?=[\"'(\[]?[A-Z0-9]|[a-z](?![a-z]?\.))")
_ANAPHOR = re.compile(r"^(?:it|that|this|they|them|those|these|he|she|there|which|so|and|but|also)\b", re.I)


def split_atomic(text: str) -> list[str]:
    """Sentences of a turn; a sentence opening on an anaphor stays with the previous one
    (used only when the extractor is asked for sentence-level entries)."""
    parts = [p.strip() for p in _SENT_SPLIT.split(text) if p.strip()]
    out: list[str] = []
    for p in parts:
        if out and _ANAPHOR.match(p):
            out[-1] = f"{out[-1]} {p}"
        else:
            out.append(p)
    return out or [text]


def is_chitchat(sentence: str, names: Iterable[str] = ()) -> bool:
    """True when a sentence has no content word beyond fillers and the given names."""
    return not keywords(sentence, exclude=names)

