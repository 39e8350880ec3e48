"""The one place for English word lists and word-level rules shared across the package.

Extraction (keywords, names), coarsening (stems, calendar values), the lexical index
(query stopwords), retrieval (the entities a question names) and the fast paths all read
the same lexicons from here, so a word added to a list changes every step the same way.

* :data:`WEEKDAYS`, :data:`MONTHS` and their title-case forms (locale-independent:
  ``strftime`` is not);
* :data:`STOPWORDS` (content-free words of chat turns), :data:`QUERY_STOPWORDS` (words a
  lexical query drops), :data:`QUESTION_WORDS` (words that never name an entity in a
  question);
* :func:`normalize_text`, :func:`keywords`, :func:`stem`;
* the word tokenizers: :func:`words` (questions and texts compared word by word),
  :func:`letter_words` and :func:`value_tokens` (coarsening's words and values),
  :func:`index_words` (the lexical index's words), and :data:`COUNTER_STOPWORDS`;
* name detection: :func:`scan_names` (persons and entities of a turn) and
  :func:`query_entities` (the entities a question names).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

import regex

# --------------------------------------------------------------------------- lexicons
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
MONTH_TITLES = tuple(m.capitalize() for m in MONTHS)  # locale-independent (strftime %B is not)
WEEKDAY_TITLES = tuple(d.capitalize() for d in WEEKDAYS)
WEEKDAY_ABBR = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4,
                 "sat": 5, "sun": 6}

#: Function words, pronouns, auxiliaries, contractions (with and without apostrophe) and
#: chat fillers: they say nothing about *what* a turn is about, so they are not keywords.
STOPWORDS = frozenset(
    "a about above after again against all almost along already also although always am among an and "
    "another any anybody anyone anything anyway anyways are aren't around as at away back be became "
    "because become been before being below beside besides between both but by can can't cannot could "
    "couldn't did didn't do does doesn't doing don't done down during each either else enough etc even "
    "ever every everybody everyone everything few for from further get gets getting go goes going gone "
    "gonna got gotta had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers "
    "herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it'd it'll "
    "it's its itself just kinda least less let let's like lot lots made make makes many may maybe me "
    "might mine more most much must mustn't my myself neither never no nobody none nor not nothing now "
    "of off often oh ok okay on once one ones only onto or other others ought our ours ourselves out "
    "over own per perhaps quite rather really said same say says see seem seems shall shan't she she'd "
    "she'll she's should shouldn't since so some somebody someone something sometimes somewhat soon "
    "still such sure than that that's thats the their theirs them themselves then there there's these "
    "they they'd they'll they're they've thing things this those though through thus till to too "
    "toward towards under unless until up upon us very via was wasn't way we we'd we'll we're we've "
    "well went were weren't what what's whatever when when's whenever where where's whether which while "
    "who who's whoever whole whom whose why why's will with within without won't would wouldn't yet you "
    "you'd you'll you're you've your yours yourself yourselves im ive id ill dont cant wont didnt doesnt "
    "isnt wasnt arent youre youve youll theyre lets hes shes whats thats theres heres ya yall y'all "
    "wanna know last next ago yesterday today tomorrow tonight recently lately "
    # chat fillers / interjections / empty politeness
    "oh ooh wow whoa hey hi hello yeah yea yes yep yup nope nah ah aw aww haha hahaha lol lmao omg hmm "
    "um uh er thanks thank thx ty pls please btw bye cool awesome great nice amazing totally "
    "definitely absolutely congrats congratulations guess yay yoohoo woohoo hooray phew ugh ooh yikes "
    "gosh oops".split()
)
#: Capitalized words that are not names however they are placed (sentence openers,
#: interjections, calendar words, the pronoun I, religious and generic words).
COMMON_CAPS = frozenset(
    [*WEEKDAYS, *MONTHS, *STOPWORDS, *WEEKDAY_ABBR,
     *("god gosh jesus sir madam mr mrs ms dr today tomorrow yesterday tonight morning evening "
       "afternoon night weekend week month year christmas easter halloween thanksgiving sounds sound "
       "love glad happy sorry good best fun yay woah dear wishing hope hoping keep take let remember "
       "check look congratulations oops anyways wait right true exactly same absolutely agreed "
       "totally certainly indeed haha ahh ugh whew phew cheers welcome excellent fantastic wonderful "
       "incredible beautiful lovely sweet cute brilliant perfect interesting tell thank thanks "
       "sure wow yes no nope yeah yep ok okay alright hey hi hello oh omg lol "
       "english internet tv ps pm am ok fyi woohoo yay hooray anytime bravo kudos hmm hmmm").split()]
)
#: Family words that name a person when capitalized mid-sentence ("I called Mom").
FAMILY_NAMES = frozenset({"mom", "dad", "mum", "mommy", "daddy", "grandma", "grandpa", "granny", "nana",
                          "papa", "mama", "grandmother", "grandfather", "auntie", "uncle", "aunt"})
_GREETINGS = frozenset({"hey", "hi", "hello", "thanks", "thank", "congrats", "congratulations", "bye",
                        "sorry", "wow", "oh", "yo", "dear", "hiya", "cheers", "goodbye", "morning",
                        "night", "welcome", "yeah", "yes", "no", "ok", "okay", "sure", "love", "miss"})
_PERSON_CUE_BEFORE = frozenset({"friend", "friends", "brother", "sister", "son", "daughter", "husband",
                                "wife", "partner", "boyfriend", "girlfriend", "bf", "gf", "cousin", "aunt",
                                "uncle", "niece", "nephew", "colleague", "coworker", "boss", "neighbor",
                                "neighbour", "buddy", "pal", "mentor", "teacher", "coach", "fiance",
                                "fiancee", "roommate", "mom", "dad", "mother", "father", "grandma",
                                "grandpa", "kid", "child", "baby", "bestie", "classmate", "therapist"})
#: Words of politeness and acknowledgement that carry no fact on their own ("glad to
#: help", "feel free to ask", "good to hear"); the low-information gate does not count them
#: as content words (they are content elsewhere, so they are not stopwords).
COURTESY_WORDS = frozenset(
    "welcome glad happy hope hoping helps helped helpful help feel free noted question questions hear "
    "good lovely wonderful fantastic cheers goodbye care luck appreciate appreciated anytime problem "
    "worries sounds sound fun further details assistance else ask asking reach touch anything "
    "pleasure talk talking chat chatting sorry catch nice".split()
)


#: Words of a "how many times" question that name no activity: what the counter fast
#: path leaves out of the question before counting the remaining words' mentions.
COUNTER_STOPWORDS = frozenset(
    "how many times often did does do has have had was were is are the a an to of in on at "
    "for with and or been go went gone ever since so far total number what which when".split()
)
#: Words a lexical (BM25) query drops: the index keeps them, a question's match on them
#: says nothing.
QUERY_STOPWORDS = frozenset(
    "a an the and or but of to in on at for with by from as is are was were be been being do "
    "does did has have had what when where which who whom whose why how did i you he she it "
    "we they me him her them my your his its our their this that these those there here not "
    "no yes any some can could would should will shall may might must about into than then so "
    "if".split()
)
#: Capitalized words of a question that never name an entity (question words, auxiliaries,
#: function words, calendar words).
QUESTION_WORDS = frozenset(
    "i what when where which who whom whose why how is are was were do does did can could "
    "would should will has have had the a an in on at of for to and or but if my your his her "
    "their our its this that these those there here".split()
) | frozenset(WEEKDAYS) | frozenset(MONTHS)


# --------------------------------------------------------------------------- normalization
TRANSLATE = {ord("’"): "'", ord("‘"): "'", ord("ʼ"): "'", ord("`"): "'", ord("“"): '"', ord("”"): '"',
              ord("\u200b"): None, ord("\u200c"): None, ord("\u200d"): None, ord("\ufeff"): None,
              **{c: " " for c in range(32)}, 127: " "}


def normalize_text(text: str) -> str:
    """Curly quotes to straight ones, control and zero-width characters out, whitespace
    collapsed: the rules below then only need to match ``'`` and single spaces."""
    return " ".join(text.translate(TRANSLATE).split())


def previous_word(s: str, start: int) -> str:
    """The lowercased word just before ``start`` ("" at the start of the text)."""
    head = s[max(0, start - 24):start].rstrip()
    if not head or not (head[-1].isalnum() or head[-1] == "'"):
        return ""
    return head.rsplit(" ", 1)[-1].lower()



# --------------------------------------------------------------------------- words
# The word tokenizers of the package. Each splits the same way everywhere it is used; they
# differ from one another on purpose, and each docstring says why.
_WORD = re.compile(r"[a-z0-9]+")
_LETTERS = re.compile(r"[a-z]+")
_INDEX_WORD = re.compile(r"[^\W_]+")
_VALUE_TOKEN = re.compile(r"\b\w*\d\w*\b")


def words(text: str) -> list[str]:
    """The words of a text: lowercased runs of ASCII letters and digits, in order, repeats kept.

    The tokenizer for comparing a question's words with a memory's: the hash embedder's
    features, the counter fast path's question words, the words that locate an excerpt.
    Apostrophes, hyphens and other punctuation split words ("Jean-Luc's" -> ``jean``,
    ``luc``, ``s``); letters outside ASCII are not word characters.

    Args:
        text: any text.

    Returns:
        The words.
    """
    return _WORD.findall(text.lower())


def letter_words(text: str) -> list[str]:
    """Lowercased runs of ASCII letters only: a digit splits a word ("5pm" -> ``pm``).

    Unlike :func:`words` on purpose: coarsening matches these against word lists (month
    and weekday names, slot words, stems) and reads the numbers of a statement separately,
    as values (:func:`value_tokens`), so a number never becomes a slot word and "may5"
    still names May.

    Args:
        text: any text.

    Returns:
        The words, in order, repeats kept.
    """
    return _LETTERS.findall(text.lower())


def index_words(text: str) -> list[str]:
    """Lowercased runs of Unicode letters and digits: the words of the lexical index.

    Unlike :func:`words` on purpose: SQLite FTS5's ``unicode61`` tokenizer, which builds
    the BM25 index, treats every Unicode letter and digit as a word character, so a query
    is split the same way to find "café" or "東京" at all.

    Args:
        text: any text.

    Returns:
        The words, in order, repeats kept.
    """
    return _INDEX_WORD.findall(text.lower())


def value_tokens(text: str) -> list[str]:
    """Lowercased tokens that hold a digit: times, amounts, ids, date parts ("5pm",
    "2023-05-07" -> ``2023``, ``05``, ``07``), the values coarsening compares.

    Args:
        text: any text.

    Returns:
        The tokens, in order, repeats kept.
    """
    return _VALUE_TOKEN.findall(text.lower())


# --------------------------------------------------------------------------- stemming
@functools.lru_cache(maxsize=1)
def _stemmer() -> Any:
    from nltk.stem import PorterStemmer

    return PorterStemmer()


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Porter stem of a lowercased word (NLTK's variant; cached: a memory's vocabulary is small).

    Args:
        word: any word; it is lowercased first.

    Returns:
        The stem, as stored in the mention counters and compared by coarsening.
    """
    return str(_stemmer().stem(word.lower()))


# --------------------------------------------------------------------------- what is said
#: Words that never change what a sentence states: articles and the fillers of speech.
INERT_WORDS = frozenset({"a", "an", "the", "and", "so", "just", "really", "very", "also", "oh", "um", "uh",
                         "er", "hmm", "ah"})
#: The words whose absence turns a statement into its opposite ("I am not allergic" / "I am
#: allergic"): a restatement may leave out anything but these.
NEGATIONS = frozenset({
    "not", "no", "never", "nobody", "none", "nothing", "neither", "nor", "without", "cannot", "nowhere",
    # The negators of other languages a user may write in: a closed class of short words, so
    # "Ich komme nicht" is never dropped as a repeat of "Ich komme" (nor the other way round).
    "nicht", "kein", "keine", "keinen", "keinem", "keiner", "nie", "niemals", "nichts",  # German
    "ne", "pas", "jamais", "aucun", "aucune", "rien", "non", "sans",  # French
    "nunca", "nada", "ningún", "ninguna", "ninguno", "tampoco", "jamás", "sin",  # Spanish
    "mai", "nessuno", "niente", "senza",  # Italian
    "não", "nenhum", "nenhuma", "sem",  # Portuguese
    "niet", "geen", "nooit", "zonder",  # Dutch
    "не", "нет", "ни", "никогда", "ничего", "без",  # Russian
    "nigdy",  # Polish
    "değil", "yok", "hiç",  # Turkish
    "không", "chưa", "chẳng",  # Vietnamese
    "नहीं", "न", "मत",  # Hindi
    "لا", "لم", "لن", "ليس", "ليست",  # Arabic
    "לא", "אין",  # Hebrew
    "안", "못", "않", "없",  # Korean
    "不", "没", "没有", "別", "别",  # Chinese (a negator written apart; inside a run it changes the word)
})
#: A sign that carries a value: currency, mathematical and other symbols (emoji with their
#: skin tone, flags), read with regex's Unicode data (newer than the interpreter's: "🩷"),
#: and the percent, number and at signs.
_VALUE_SIGN = regex.compile(r"[\p{S}%#@]")
#: A word is a letter or digit then letters, digits and combining marks: a vowel sign or
#: virama belongs to its word ("हिन्दी", "தமிழ்"), which Python's re would cut apart. A
#: mark after no letter (an emoji's variation selector) is a lone sign, left out below.
#: A sign is a whole grapheme cluster ("👍🏿" is not "👍🏻", "🇺🇦" not a piece of "🇺🇸🇦🇹").
_SAID_TOKEN = regex.compile(r"[-\u2212]?\d+(?:[.,:]\d+)*|[\p{L}\p{N}][\p{L}\p{N}\p{M}]*|(?=[^\p{L}\p{N}_\s])\X")
_CONTRACTIONS = ((re.compile(r"n't\b", re.I), " not"), (re.compile(r"'m\b", re.I), " am"),
                 (re.compile(r"'re\b", re.I), " are"), (re.compile(r"'ve\b", re.I), " have"),
                 (re.compile(r"'ll\b", re.I), " will"))


def said_tokens(text: str) -> list[str]:
    """Every token that can change what a sentence states, in order: words of any script
    (stopwords, single letters and codes such as "14C" included; Latin words other than
    :data:`NEGATIONS` stemmed), numbers with their sign ("-12"), and value symbols ("$",
    "%", emoji); punctuation and :data:`INERT_WORDS` (but a capital "A", a letter) left
    out, contractions spelled out ("isn't" -> ``is not``).

    Why: :func:`keywords` leaves out stopwords, names' initials, signs and every script
    but Latin, which is right for matching a question to a memory and wrong for deciding
    that a message says nothing new: "after noon" and "before noon", "option A" and
    "option B", "Bob owes Alice" and "Alice owes Bob" share every keyword.

    Args:
        text: any text.

    Returns:
        The tokens, repeats kept.
    """
    text = normalize_text(text)
    for pattern, spelled in _CONTRACTIONS:
        text = pattern.sub(spelled, text)
    out: list[str] = []
    for tok in _SAID_TOKEN.findall(text):
        if not tok.lstrip("-\u2212")[:1].isalnum():  # a sign ("-12" is a number, "-" alone a dash)
            if not _VALUE_SIGN.search(tok):
                continue
            tok = tok.replace("\ufe0f", "").replace("\ufe0e", "")  # text or emoji presentation: one sign
        elif tok.lower() in INERT_WORDS and tok != "A":  # "option A" names a letter
            continue
        tok = tok.lower()
        if tok.isascii() and tok.isalpha() and tok not in NEGATIONS:
            tok = stem(tok)
        out.append(tok.replace("\u2212", "-"))
    return out


def says_nothing_new(new: str, old: str) -> bool:
    """Whether ``new`` states nothing that ``old`` does not: its tokens
    (:func:`said_tokens`) are a subsequence of ``old``'s (the same words in the same
    order, any of old's left out), and none of old's negations is left out.

    The test a message must pass to be dropped as a repeat, and a fact to be merged
    into an older one: both keep only the older text, so a "no", a swapped "from" and
    "to", a changed letter or a changed currency must keep the message.

    Args:
        new: the later text.
        old: the text it may repeat.

    Returns:
        True when dropping ``new`` in favour of ``old`` loses nothing.
    """
    said, have = said_tokens(new), said_tokens(old)
    it = iter(have)
    if not all(tok in it for tok in said):  # each found after the previous one: a subsequence
        return False
    left_out = [t for t in have if t in NEGATIONS]
    for t in said:
        if t in left_out:
            left_out.remove(t)
    return not left_out


# --------------------------------------------------------------------------- keywords
#: Whitespace after a sentence's final ".", "!" or "?" (a plain split: no abbreviation rules).
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
#: (``_END``: where a number or clock time ends, as ``\b`` did with Python's re, whose word
#: characters hold no combining mark: "1️⃣" is the number 1 and a keycap.)
_END = r"(?![\p{L}\p{N}_])"
_TOKEN_RE = regex.compile(
    r"\d{1,2}(?::\d{2})?\s?(?:am|pm)" + _END  # clock times, joined below
    + r"|\d+(?:[.,:/-]\d+)*(?:st|nd|rd|th|s|k)?" + _END  # numbers, dates, phone numbers, 1990s, 5k
    # words of any script, combining marks included: "reunión", "münchen", "東京", "हिन्दी",
    # and the numeric letters re counted as letters ("m²", "H₂O")
    + r"|[\p{L}\p{Nl}\p{No}][\p{L}\p{Nl}\p{No}\p{M}]*(?:['-][\p{L}\p{Nl}\p{No}][\p{L}\p{Nl}\p{No}\p{M}]*)*"
)


_CLITICS = frozenset({"s", "ve", "re", "ll", "d", "m"})


def keywords(text: str, exclude: Iterable[str] = ()) -> list[str]:
    """Lowercased content words in order of appearance, deduplicated.

    Stopwords and chat fillers are dropped, numbers kept, clock times joined ("2 pm" ->
    "2pm", "3:30 pm" -> "3:30pm"), a possessive "'s" stripped, hyphenated words split (as
    the counter fast path splits the question). Words shorter than 2 characters are
    dropped unless they are digits. ``exclude``: further lowercased words to leave out.
    """
    extra = exclude if isinstance(exclude, (set, frozenset)) else frozenset(exclude)
    out: list[str] = []
    seen: set[str] = set()
    for tok in _TOKEN_RE.findall(text.lower().translate(TRANSLATE)):
        first = tok[0]
        if first.isdigit():
            tok = tok.replace(" ", "")
            parts = [tok]
        elif "-" in tok:
            parts = tok.split("-")
        else:
            parts = [tok]
        for w in parts:
            if "'" in w:
                base, _, suffix = w.rpartition("'")
                if suffix in _CLITICS:
                    w = base
            if w in STOPWORDS or w in extra or w in seen or (len(w) < 2 and not w.isdigit()):
                continue
            seen.add(w)
            out.append(w)
    return out


# --------------------------------------------------------------------------- names
#: A capitalized word, possibly hyphenated or possessive ("Caroline's", "Jean-Luc").
_CAPW = r"[A-Z][A-Za-z0-9&]*(?:['-][A-Za-z0-9]+)*"
#: Runs of capitalized words, joined by name particles ("Lord of the Rings"); a
#: possessive ends the run ("Caroline's Mom" is two phrases).
NAME_PHRASE = _CAPW + r"(?:(?<!'s)\s(?:(?:of|the|de|du|la|le|von|van|der|del|da|di|y)\s)*" + _CAPW + r")*"
_CAP_PHRASE_RE = re.compile(r"(?<![\w'-])" + NAME_PHRASE)
_SENTENCE_OPENERS = frozenset('.!?:;\n')
_AFTER_PERSON_RE = re.compile(r" (?:said|says|told|tells|asked|asks|and i|and me|is my|was my)\b")
_POSS_PERSON_RE = re.compile(
    r" (?:mom|dad|mother|father|wife|husband|son|daughter|sister|brother|kids|children|friend|boyfriend"
    r"|girlfriend|partner|birthday|family)\b"
)


def participant_index(participants: Iterable[str]) -> dict[str, str]:
    """Lowercased full names and first names -> canonical participant name."""
    index: dict[str, str] = {}
    for p in participants:
        low = p.lower()
        index.setdefault(low, p)
        first = low.split()[0] if " " in low else ""
        if len(first) > 2:
            index.setdefault(first, p)
    return index


def participant(word: str, index: Mapping[str, str]) -> str | None:
    """The participant a capitalized word names: exact, or a nickname prefix ("Mel")."""
    low = word.lower()
    hit = index.get(low)
    if hit is not None:
        return hit
    if len(low) >= 2:
        for key, name in index.items():
            if len(key) > len(low) and key.startswith(low):
                return name
    return None


def _is_initial(text: str, start: int) -> bool:
    """Does the word at ``start`` open a sentence (where every word is capitalized)?"""
    i = start - 1
    while i >= 0 and text[i] == " ":
        i -= 1
    if i < 0:
        return True
    c = text[i]
    return c in _SENTENCE_OPENERS or c in "\"'(" or ord(c) >= 0x2190  # emoji/symbols end chat sentences


def strip_possessive(word: str) -> str:
    return word[:-2] if word.endswith("'s") else word


def _person_position(text: str, start: int, end: int, possessive: bool) -> bool:
    """Addressed ("..., Jon!"), introduced ("my friend Jenna"), speaking ("Jenna said")
    or owning a relation ("Jenna's mom")."""
    if text.startswith(", ", start - 2) and (end == len(text) or text[end] in "!?."):
        # Addressed only after a short clause ("Sounds great, Jon!"), not an apposition
        # closing a long one ("a gift from my home country, Sweden.").
        left = max(text.rfind(".", 0, start), text.rfind("!", 0, start), text.rfind("?", 0, start))
        if text.count(" ", left + 1, start) <= 6:
            return True
    if previous_word(text, start) in _PERSON_CUE_BEFORE:
        return True
    if possessive:
        return _POSS_PERSON_RE.match(text, end) is not None
    return _AFTER_PERSON_RE.match(text.lower(), end) is not None if end < len(text) else False


def scan_names(text: str, participants: Mapping[str, str] | None = None
               ) -> tuple[list[str], list[str], set[str]]:
    """(persons, entities, lowercased surface words of the persons) of a normalized text.

    Precision over recall, because a wrong person keeps two entries from merging: a word is
    a person when it is a participant (or a nickname prefix of one, mapped to the full
    name), a family word ("Mom"), or a single mid-sentence name in a person position
    (greeted: "Hey Jenna"; addressed: "Thanks, Jon!"; introduced: "my friend Jenna";
    speaking: "Jenna said"; owning: "Jenna's mom"). Other mid-sentence capitalized words,
    multiword phrases and acronyms are entities. A lone sentence-initial word is kept only
    if it is a participant, a family word or an acronym (every sentence starts capitalized).
    """
    index = participants or {}
    persons: list[str] = []
    entities: list[str] = []
    surfaces: set[str] = set()
    for m in _CAP_PHRASE_RE.finditer(text):
        words, dropped = _trim_common(m.group(0).split())
        if not words:
            continue
        possessive = words[-1].endswith("'s")
        words[-1] = strip_possessive(words[-1])
        if len(words) == 1:
            kind, name = _single_name(words[0], dropped, possessive, text, m, index)
            if kind == "entity":
                entities.append(name)
            elif kind:
                persons.append(name)
                if kind == "named":
                    surfaces.add(words[0].lower())
            continue
        if not dropped and words[0].lower().endswith(("ing", "ly")) and _is_initial(text, m.start()):
            words.pop(0)  # a capitalized sentence opener ("Adding NYC ...")
            if len(words) == 1:
                who = participant(words[0], index)
                (persons if who else entities).append(who or words[0])
                continue
        phrase = " ".join(words)
        who = index.get(phrase.lower())
        if who is not None:
            persons.append(who)
        else:
            entities.append(phrase)
    titled = _lower_titled(text)
    persons += [w.capitalize() for w in titled]
    surfaces.update(titled)
    persons = _dedupe(persons)
    taken = {p.lower() for p in persons}
    return persons, [e for e in _dedupe(entities) if e.lower() not in taken], surfaces


def _lower_titled(text: str) -> list[str]:
    """Lowercase words after a lowercase title: chat typed in lowercase names a person after
    a title too ("my dentist dr. halvorsen"). Not after a determiner ("the dr. wants more
    tests", "my dr. appointment": the title is the noun), and not a word the tokenizer's
    vocabulary holds whole ("dr. visit went fine"): precision over recall, as for every
    name, so a common surname typed in lowercase is missed."""
    from .tokens import is_common_word

    return [m.group(1) for m in _LOWER_TITLED.finditer(text)
            if not _DETERMINER_BEFORE.search(text, 0, m.start()) and m.group(1) not in COMMON_CAPS
            and m.group(1) not in STOPWORDS and not is_common_word(m.group(1))]


_DETERMINER_BEFORE = re.compile(r"\b(?:the|a|an|my|his|her|your|our|their|this|that)\s+$", re.I)


def _trim_common(words: list[str]) -> tuple[list[str], str]:
    """A capitalized phrase without its leading function words, interjections and
    greetings (not part of the name) nor trailing common words; and the last word dropped
    in front (lowercased, "" if none). Empty when every word is common."""
    dropped = ""
    while words and strip_possessive(words[0]).lower() in COMMON_CAPS:
        dropped = words.pop(0).lower()
    while len(words) > 1 and words[-1].lower() in COMMON_CAPS:
        words.pop()
    return words, dropped


#: Titles before a person's name: their period ends no sentence ("the coach is Mr. Alvarez").
TITLES = ("Mr", "Ms", "Mrs", "Dr", "Prof")
#: A title right before a word: the word is a person's name.
_TITLE_BEFORE = re.compile(r"\b(?:" + "|".join(TITLES) + r")\.? $")
#: A title written in lowercase, with its period, before a lowercase word: a person's name
#: ("dr. mbeki"). The period is required ("dr appt"), and "ms." is left out: "300 ms. later"
#: is a duration.
_LOWER_TITLED = re.compile(r"\b(?:dr|mr|mrs|prof)\. ([a-z][a-z'-]+[a-z])\b")


def _single_name(word: str, dropped: str, possessive: bool, text: str, m: re.Match[str],
                 index: Mapping[str, str]) -> tuple[str, str]:
    """How :func:`scan_names` reads a capitalized word standing alone: ("named", person)
    for a participant or a person in a person position, ("family", word) for a family
    word, ("entity", word), or ("", "") for none of them (a sentence opener, a common
    word, a shouted word)."""
    who = participant(word, index)
    low = word.lower()
    if who is not None:
        return "named", who
    if low in COMMON_CAPS or len(word) < 2 or any(c.isdigit() for c in word):
        return "", ""
    if low in FAMILY_NAMES:
        return "family", word
    if word.isupper() or (word[:-1].isupper() and word[-1] == "s"):  # an acronym
        return ("", "") if len(word) > 6 else ("entity", word)  # > 6: shouted ("INTENSE")
    if _TITLE_BEFORE.search(text, max(0, m.start() - 7), m.start()):
        return "named", word  # "Mr. Alvarez", "Dr Lee": a title's period ends no sentence
    if not dropped and _is_initial(text, m.start()):
        return "", ""
    if dropped in _GREETINGS or _person_position(text, m.start(), m.end(), possessive):
        return "named", word
    return "entity", word


def _dedupe(items: list[str]) -> list[str]:
    """Order-preserving, case-insensitive de-duplication (first surface form wins)."""
    seen: set[str] = set()
    out: list[str] = []
    for x in items:
        k = x.lower()
        if k not in seen:
            seen.add(k)
            out.append(x)
    return out



_CAPITALIZED = re.compile(r"\b([A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)")


def query_entities(query: str, known_persons: set[str]) -> list[str]:
    """Entities a question names: known persons (any case) and capitalized phrases.

    Looser than :func:`scan_names` on purpose: a question is short and a missed entity
    only costs a ranking bonus, so every capitalized phrase that is not a question word
    counts.

    Args:
        query: the question as asked.
        known_persons: lowercased persons of the user's memory.

    Returns:
        Lowercased entities, in order of first appearance, without repeats.
    """
    found: list[str] = []
    lowered = query.lower()
    for person in known_persons:
        if len(person) > 1 and re.search(rf"\b{re.escape(person)}\b", lowered):
            found.append(person)
    for match in _CAPITALIZED.finditer(query):
        phrase = match.group(1).strip("'’-").rstrip("s'’") if match.group(1).endswith(("'s", "’s")) \
            else match.group(1).strip("'’-")
        words = [w for w in phrase.split() if w.lower() not in QUESTION_WORDS]
        if words:
            found.append(" ".join(words).lower())
    return list(dict.fromkeys(found))


def without_persons(query: str, persons: Iterable[str]) -> str:
    """``query`` with the named ``persons`` (and their possessive "'s") taken out.

    What the question asks about, without whom: a sentence embedding of a short question
    is dominated by a name it shares with a memory, whatever the memory says (see
    ``Config.nameless_query_weight``). Only a name the question writes as one is taken
    out: capitalized and not part of a hyphenated word, because the known persons of an
    assistant conversation also hold the speaker role ("user") and words the rule
    extractor took for names ("Flask" in "Flask-Login"), which are what such a question
    asks about.

    Args:
        query: the question as asked.
        persons: lowercased person names (the user's known persons).

    Returns:
        The question without those names, whitespace collapsed; ``query`` itself when it
        names none of them or nothing but them.
    """
    out = query
    for person in persons:
        if len(person) > 1:
            out = re.sub(rf"(?<![\w-]){re.escape(person)}(?:['’]s)?(?![\w-])",
                         lambda m: " " if m.group(0)[0].isupper() else m.group(0), out, flags=re.IGNORECASE)
    # A question that is only a name ("Caroline?") keeps it: nothing else to search for.
    return " ".join(out.split()) if out != query and re.search(r"\w", out) else query
