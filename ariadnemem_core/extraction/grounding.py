"""Rule-based grounding: what makes one turn's text readable without the dialogue around it.

The memory stores each turn as a context-independent restatement, because an entry is
later retrieved alone, days of dialogue away from the turns that explained its "I", "you"
and "yesterday". Everything here is precompiled regular expressions and set look-ups, so
the whole restatement costs a small fraction of a millisecond per turn (ingest must stay
well above 300 turns/s); heavy NLP (spaCy, dateparser) is deliberately avoided.

* :func:`normalize_text` - curly quotes straightened, control characters removed,
  whitespace collapsed (so the other rules can match on plain ASCII apostrophes/spaces).
* :func:`ground_pronouns` - first person -> the speaker ("I'm" -> "Caroline is"), second
  person -> the other party ("your" -> "Melanie's").
* :func:`ground_time` - relative time -> absolute dates from the turn's timestamp, appended
  in parentheses so the original wording is kept ("yesterday (2023-05-07)").
* :func:`keywords`, :func:`persons_and_entities`, :func:`find_location`, :func:`find_topic`,
  :func:`find_attributes` - the entry fields used by coarsening, counters and retrieval.
* :func:`split_atomic`, :func:`is_chitchat` - optional sentence-level atomization.

Dates are computed on the turn's UTC calendar day; month and year arithmetic uses
``dateutil.relativedelta`` (month ends clamp: March 31 + 1 month = April 30).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import date, datetime, timedelta

from dateutil.relativedelta import relativedelta

# --------------------------------------------------------------------------- lexicons
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
_MONTH_TITLES = tuple(m.capitalize() for m in MONTHS)  # locale-independent (strftime %B is not)
_WEEKDAY_ABBR = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4,
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
    [*WEEKDAYS, *MONTHS, *STOPWORDS, *_WEEKDAY_ABBR,
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
NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
                "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
                "nineteen": 19, "twenty": 20, "thirty": 30}
#: Vague quantities: grounded as "around <date>" with these values.
FUZZY_NUMBERS = {"a few": 3, "few": 3, "a couple of": 2, "a couple": 2, "couple of": 2, "couple": 2,
                 "several": 3}

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

# --------------------------------------------------------------------------- normalization
_TRANSLATE = {ord("’"): "'", ord("‘"): "'", ord("ʼ"): "'", ord("`"): "'", ord("“"): '"', ord("”"): '"',
              ord("\u200b"): None, ord("\u200c"): None, ord("\u200d"): None, ord("\ufeff"): None,
              **{c: " " for c in range(32)}, 127: " "}


def normalize_text(text: str) -> str:
    """Curly quotes to straight ones, control and zero-width characters out, whitespace
    collapsed: the rules below then only need to match ``'`` and single spaces."""
    return " ".join(text.translate(_TRANSLATE).split())


# --------------------------------------------------------------------------- pronouns
#: Lowercased form -> (replacement template, verb part). ``{S}`` is the speaker, ``{O}`` the
#: other party. The verb part is re-used when the form follows an auxiliary ("do you have"
#: stays "do Melanie have", not "do Melanie has").
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
_AUXILIARIES = frozenset(
    "do does did don't doesn't didn't can can't could couldn't will won't would wouldn't should shouldn't "
    "have has had haven't hasn't hadn't am are is was were aren't isn't wasn't weren't shall may might "
    "must how what why where when".split()
)
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


def _previous_word(s: str, start: int) -> str:
    """The lowercased word just before ``start`` ("" at the start of the text)."""
    head = s[max(0, start - 24):start].rstrip()
    if not head or not (head[-1].isalnum() or head[-1] == "'"):
        return ""
    return head.rsplit(" ", 1)[-1].lower()


def ground_pronouns_ex(text: str, speaker: str, other: str | None) -> tuple[str, bool]:
    """:func:`ground_pronouns` plus whether a second-person form was resolved to ``other``."""
    used_other = False

    def repl(m: re.Match[str]) -> str:
        nonlocal used_other
        form = m.group(0)
        key = form.lower()
        s = m.string
        if key.endswith("mean"):
            return form
        # Unicode case folding lets IGNORECASE match forms the tables do not hold ("İ"
        # matches "i" but lowers to "i̇"): such a match is not a pronoun, keep it as written.
        if key not in _FIRST and key not in _SECOND:
            return form
        if key.startswith("you"):
            if other is None or key == "yourselves":
                return form
            if key == "you" and _YOU_KNOW_FILLER.match(s, m.end()):
                return form
            template, verb = _SECOND[key]
            used_other = True
            name = other
        else:
            if key == "mine" and _previous_word(s, m.start()) in _MINE_NOUN_BEFORE:
                return form
            if key == "i'd" and _I_HAD.match(s, m.end()):
                return f"{speaker} had"
            template, verb = _FIRST[key]
            name = speaker
        if verb and _previous_word(s, m.start()) in _AUXILIARIES:
            return name + form[len(form) - len(verb):]  # keep the verb as written
        return template.replace("{S}", name).replace("{O}", name)

    return _PRONOUN_RE.sub(repl, text), used_other


def ground_pronouns(text: str, speaker: str, other: str | None) -> str:
    """First person -> ``speaker``; second person -> ``other`` (left alone when unknown).

    Expects :func:`normalize_text` output (straight apostrophes). "we/us/our" are left as
    they are: who "we" is (the pair, a family, a team) is not decidable by rule.
    """
    return ground_pronouns_ex(text, speaker, other)[0]


# --------------------------------------------------------------------------- time
def _alts(words: Iterable[str]) -> str:
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(words, key=len, reverse=True))


_WD = "|".join(WEEKDAYS)
_NUM = r"\d{1,3}|" + _alts([*NUMBER_WORDS, *FUZZY_NUMBERS])
#: Matched against the lowercased text (several times faster than IGNORECASE); the
#: lookahead lets most positions fail on one character test.
_TIME_RE = re.compile(
    r"(?=[0-9abcdefilmnostwy])\b(?:"
    r"(?P<dd>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow)"
    r"|(?P<n>" + _NUM + r")\s+(?P<unit>day|week|weekend|month|year)s?\s+ago"
    r"|(?P<single>yesterday|today|tonight|tomorrow|last\s+night|this\s+morning|this\s+afternoon"
    r"|this\s+evening|the\s+other\s+day)"
    r"|(?P<rel>(?<!the\s)last|next|this\s+past|this\s+coming|this)\s+(?P<span>week|weekend|month|year|summer|spring"
    r"|autumn|fall|winter|" + _WD + r")"
    r"|(?P<relab>last|next)\s+(?P<abbr>" + _alts(_WEEKDAY_ABBR) + r")"
    r"|(?:(?P<prep>on|since|by|until|till)\s+)?(?P<wday>" + _WD + r")"
    r")\b(?P<poss>'s\b)?"
)
_TIME_RE_ANYCASE = re.compile(_TIME_RE.pattern, re.IGNORECASE)
#: Every expression above contains one of these (weekdays end in "day"): a substring test
#: skips the regular expression for the ~80% of chat turns that have no time word.
_TIME_ANCHORS = ("day", "ago", "last", "next", "this", "tonight", "tomorrow")
_FUTURE_RE = re.compile(
    r"\b(?:will|won't|gonna|going|heading|plan|plans|planning|next|tomorrow|upcoming|soon|can't\s+wait"
    r"|looking\s+forward|hope\s+to|hoping\s+to|about\s+to|intend|shall|would\s+love\s+to)\b|'ll\b",
    re.IGNORECASE,
)
_PAST_RE = re.compile(
    r"\b(?:was|were|did|didn't|had|went|got|came|took|made|saw|met|ran|spent|gave|told|said|felt|won|lost"
    r"|bought|found|left|began|brought|caught|drove|ate|wrote|read\s+it|\w{3,}ed)\b",
    re.IGNORECASE,
)
#: "moved to 3 pm on Friday", "rescheduled to Monday": the verb is past, the time it
#: names is the new (coming) one. Needs a clock time, weekday or "next" right after
#: "to", so "I moved to Boston on Friday" (a place) stays past.
_RESCHEDULE_RE = re.compile(
    r"\b(?:moved|rescheduled|postponed|pushed(?:\s+back)?|shifted|delayed|bumped|changed)\s+(?:it\s+)?to\s+"
    r"(?:\d{1,2}(?::\d\d)?\s*(?:am|pm|a\.m\.|p\.m\.|o'clock)\b|next\b|" + "|".join(WEEKDAYS) + r")",
    re.IGNORECASE,
)
_ACK_RE = re.compile(r"\bgot\s+it\s*[,.!;:-]", re.IGNORECASE)
_NOT_PAST = frozenset({"need", "needed", "excited", "interested", "tired", "scared", "worried", "bored",
                       "speed", "indeed", "seed", "embed", "proceed", "succeed", "exceed", "feed",
                       "breed", "bleed", "weed", "greed", "shed", "bed"})
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}


def _iso(d: date) -> str:
    return d.isoformat()


def _month_label(d: date) -> str:
    return f"{_MONTH_TITLES[d.month - 1]} {d.year}"


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _previous_weekday(day: date, target: int, inclusive: bool = False) -> date:
    """The most recent ``target`` weekday strictly before ``day`` (or on it if inclusive)."""
    back = (day.weekday() - target) % 7
    if back == 0 and not inclusive:
        back = 7
    return day - timedelta(days=back)


def _next_weekday(day: date, target: int, inclusive: bool = False) -> date:
    """The next ``target`` weekday strictly after ``day`` (or on it if inclusive)."""
    ahead = (target - day.weekday()) % 7
    if ahead == 0 and not inclusive:
        ahead = 7
    return day + timedelta(days=ahead)


def _recent_saturday(day: date) -> date:
    """Saturday of the current weekend (Sat/Sun) or of the most recent one."""
    return day - timedelta(days=(day.weekday() - 5) % 7)


def _season(name: str, rel: str, day: date) -> str:
    """'last/this/next <season>' -> 'summer 2022' (meteorological, northern hemisphere)."""
    start = _SEASON_START[name]
    m = day.month
    current = (day.year - 1, 12) if m < 3 else (day.year, (m // 3) * 3)
    if rel == "last":
        year = day.year if (day.year, start) < current else day.year - 1
        if (year, start) >= current:
            year -= 1
    elif rel == "next":
        year = day.year if (day.year, start) > current else day.year + 1
    else:  # this: the current season, else this calendar year's
        year = current[0] if start == current[1] else day.year
    label = "fall" if name == "autumn" else name
    return f"{label} {year}-{(year + 1) % 100:02d}" if start == 12 else f"{label} {year}"


def _tense(text: str, start: int, end: int) -> str:
    """'future', 'past' or '' for the sentence around ``text[start:end]``."""
    left = max(text.rfind(".", 0, start), text.rfind("!", 0, start), text.rfind("?", 0, start)) + 1
    ends = [i for i in (text.find(".", end), text.find("!", end), text.find("?", end)) if i >= 0]
    sentence = text[left:min(ends) + 1 if ends else len(text)]
    if _FUTURE_RE.search(sentence) or _RESCHEDULE_RE.search(sentence):
        return "future"
    # "Got it," / "Got it!" acknowledges; it says nothing about when the rest happens.
    sentence = _ACK_RE.sub(" ", sentence)
    if any(w.group(0).lower() not in _NOT_PAST for w in _PAST_RE.finditer(sentence)):
        return "past"
    return ""


def _resolve(m: re.Match[str], day: date) -> str | None:
    """The absolute date (label) a relative time expression stands for."""
    g = m.groupdict()
    if g["single"] or g["dd"]:
        s = " ".join((g["single"] or g["dd"]).lower().split())
        if s == "the other day":
            return f"a few days before {_iso(day)}"
        offset = {"yesterday": -1, "last night": -1, "tomorrow": 1, "the day before yesterday": -2,
                  "the day after tomorrow": 2}.get(s, 0)
        return _iso(day + timedelta(days=offset))
    if g["n"]:
        raw = " ".join(g["n"].lower().split())
        fuzzy = raw in FUZZY_NUMBERS
        n = int(raw) if raw.isdigit() else FUZZY_NUMBERS.get(raw) or NUMBER_WORDS.get(raw, 1)
        around = "around " if fuzzy else ""
        unit = g["unit"].lower()
        if unit == "day":
            return around + _iso(day - timedelta(days=n))
        if unit == "week":
            return f"{around}{'the ' if fuzzy else ''}week of {_iso(_monday(day - timedelta(weeks=n)))}"
        if unit == "weekend":
            last = _recent_saturday(day) - timedelta(days=7 if day.weekday() >= 5 else 0)
            return f"{around}{'the ' if fuzzy else ''}weekend of {_iso(last - timedelta(weeks=n - 1))}"
        if unit == "month":
            return around + _month_label(day - relativedelta(months=n))
        return around + str(day.year - n)
    if g["abbr"]:
        target = _WEEKDAY_ABBR[g["abbr"].lower()]
        if g["relab"].lower() == "last":
            return _iso(_previous_weekday(day, target))
        return _iso(_next_weekday(day, target))
    if g["rel"]:
        rel = " ".join(g["rel"].lower().split())
        rel = {"this past": "last", "this coming": "next"}.get(rel, rel)
        span = g["span"].lower()
        if span in WEEKDAYS:
            target = WEEKDAYS.index(span)
            if rel == "last":
                return _iso(_previous_weekday(day, target))
            if rel == "next":
                return _iso(_next_weekday(day, target))
            if _tense(m.string, m.start(), m.end()) == "past":  # "this Tuesday" said of the past
                return _iso(_previous_weekday(day, target, inclusive=True))
            return _iso(_next_weekday(day, target, inclusive=True))
        if span == "week":
            return f"week of {_iso(_monday(day) + timedelta(weeks={'last': -1, 'next': 1}.get(rel, 0)))}"
        if span == "weekend":
            weekend = day.weekday() >= 5
            recent = _recent_saturday(day)
            if rel == "last":
                sat = recent - timedelta(days=7) if weekend else recent
            elif rel == "next":
                sat = recent + timedelta(days=7) if weekend else _next_weekday(day, 5)
            elif weekend or _tense(m.string, m.start(), m.end()) == "past":
                sat = recent
            else:
                sat = _next_weekday(day, 5)
            return f"weekend of {_iso(sat)}"
        if span == "month":
            return _month_label(day + relativedelta(months={"last": -1, "next": 1}.get(rel, 0)))
        if span == "year":
            return str(day.year + {"last": -1, "next": 1}.get(rel, 0))
        return _season(span, rel, day)
    if g["wday"]:
        target = WEEKDAYS.index(g["wday"].lower())
        prep = (g["prep"] or "").lower()
        if prep in ("by", "until", "till"):
            return _iso(_next_weekday(day, target, inclusive=True))
        # A bare weekday in a sentence with no past-tense verb is a schedule ("the meeting
        # is at 2 pm on Friday"): the coming one. Past tense points back.
        if prep != "since" and _tense(m.string, m.start(), m.end()) != "past":
            return _iso(_next_weekday(day, target))
        return _iso(_previous_weekday(day, target))
    return None


def ground_time(text: str, when: datetime | None) -> str:
    """Append the absolute date after each relative time expression ("last week" ->
    "last week (week of 2023-05-01)"). Nothing is grounded without a timestamp.

    Weekdays: "last Friday" is the most recent Friday before the turn's day, "next Friday"
    the next one after it; a bare "(on) Friday" and "this Friday" are the coming one unless
    their sentence is in the past tense ("we went hiking on Friday").
    """
    if when is None:
        return text
    low = text.lower()
    if not any(a in low for a in _TIME_ANCHORS):
        return text
    day = when.date()
    # lower() keeps positions unless a rare character changes length ("İ"): then match
    # case-insensitively on the text itself.
    matches = _TIME_RE.finditer(low) if len(low) == len(text) else _TIME_RE_ANYCASE.finditer(text)
    out: list[str] = []
    last = 0
    for m in matches:
        try:
            resolved = _resolve(m, day)
        except (OverflowError, ValueError):
            # "tomorrow" on 9999-12-31 or "last month" in year 1 leaves datetime's range:
            # keep the words ungrounded rather than fail the window (the turn is pending
            # already, so an exception here would fail every later flush).
            resolved = None
        if resolved is None:
            continue
        out.append(text[last:m.end()])
        out.append(f" ({resolved})")
        last = m.end()
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


# --------------------------------------------------------------------------- keywords
_TOKEN_RE = re.compile(
    r"\d{1,2}(?::\d{2})?\s?(?:am|pm)\b"  # clock times, joined below
    r"|\d+(?:[.,:/-]\d+)*(?:st|nd|rd|th|s|k)?\b"  # numbers, dates, phone numbers, 1990s, 5k
    r"|[a-z]+(?:['-][a-z]+)*"
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
    for tok in _TOKEN_RE.findall(text.lower().translate(_TRANSLATE)):
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
_PHRASE = _CAPW + r"(?:(?<!'s)\s(?:(?:of|the|de|du|la|le|von|van|der|del|da|di|y)\s)*" + _CAPW + r")*"
_CAP_PHRASE_RE = re.compile(r"(?<![\w'-])" + _PHRASE)
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


def _participant(word: str, index: Mapping[str, str]) -> str | None:
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


def _strip_poss(word: str) -> str:
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
    if _previous_word(text, start) in _PERSON_CUE_BEFORE:
        return True
    if possessive:
        return _POSS_PERSON_RE.match(text, end) is not None
    return _AFTER_PERSON_RE.match(text.lower(), end) is not None if end < len(text) else False


def persons_and_entities(text: str, participants: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """Persons and named entities among the capitalized phrases of a normalized text.

    See :func:`scan_names`; this drops the surface forms.
    """
    persons, entities, _ = scan_names(text, participants)
    return persons, entities


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
        words = m.group(0).split()
        # Leading function words, interjections and greetings are not part of the name.
        dropped = ""
        while words and _strip_poss(words[0]).lower() in COMMON_CAPS:
            dropped = words.pop(0).lower()
        if not words:
            continue
        while len(words) > 1 and words[-1].lower() in COMMON_CAPS:
            words.pop()
        possessive = words[-1].endswith("'s")
        words[-1] = _strip_poss(words[-1])
        if len(words) == 1:
            word = words[0]
            who = _participant(word, index)
            low = word.lower()
            if who is not None:
                persons.append(who)
                surfaces.add(low)
                continue
            if low in COMMON_CAPS or len(word) < 2 or any(c.isdigit() for c in word):
                continue
            if low in FAMILY_NAMES:
                persons.append(word)
                continue
            acronym = word.isupper() or (word[:-1].isupper() and word[-1] == "s")
            if acronym:
                if len(word) > 6:  # shouted words ("INTENSE"), not acronyms
                    continue
                entities.append(word)
            elif not dropped and _is_initial(text, m.start()):
                continue
            elif dropped in _GREETINGS or _person_position(text, m.start(), m.end(), possessive):
                persons.append(word)
                surfaces.add(low)
            else:
                entities.append(word)
            continue
        if not dropped and words[0].lower().endswith(("ing", "ly")) and _is_initial(text, m.start()):
            words.pop(0)  # a capitalized sentence opener ("Adding NYC ...")
            if len(words) == 1:
                who = _participant(words[0], index)
                (persons if who else entities).append(who or words[0])
                continue
        phrase = " ".join(words)
        who = index.get(phrase.lower())
        if who is not None:
            persons.append(who)
        else:
            entities.append(phrase)
    persons = _dedupe(persons)
    taken = {p.lower() for p in persons}
    return persons, [e for e in _dedupe(entities) if e.lower() not in taken], surfaces


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


_LOCATION_RE = re.compile(
    r"\b(?:in|at|to|from|near|visited|visiting|visit|moved\s+to|back\s+to|around|across|through)\s+"
    r"(?:the\s+)?(" + _PHRASE + r")"
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
        while words and _strip_poss(words[0]).lower() in COMMON_CAPS:
            words.pop(0)
        while words and words[-1].lower() in COMMON_CAPS:
            words.pop()
        if not words:
            continue
        words[-1] = _strip_poss(words[-1])
        if words[0].lower() in FAMILY_NAMES or _previous_word(text, m.start()) in _NOT_PLACE_BEFORE:
            continue
        place = " ".join(words)
        if place.lower() in people or (len(words) == 1 and _participant(words[0], index)):
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
        if not value or value[0].lower() in _VALUE_REJECT:
            continue
        attr = " ".join(attr_words)
        out.setdefault(attr, " ".join(value).strip("'\""))
    return out


# --------------------------------------------------------------------------- sentences
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
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
