"""Rule-based grounding: the pieces that make a turn's sentences context-independent.

* :func:`ground_pronouns` - first person -> the speaker ("I'm" -> "Caroline is"), second
  person -> the other party ("your" -> "Melanie's").
* :func:`ground_time` - relative time -> absolute dates from the turn's timestamp,
  appended in parentheses so the original wording is kept ("yesterday (2023-05-07)").
* :func:`split_atomic` - sentences, with a sentence that opens on an anaphor ("It was
  great") kept with the one before it, and content-free chit-chat ("Wow!") set apart.
* :func:`keywords`, :func:`capitalized_phrases`, :func:`find_location`, :func:`find_topic`,
  :func:`find_attributes` - the entry fields.

Everything is precompiled regular expressions and set look-ups (well under a millisecond
per turn); month arithmetic uses ``dateutil.relativedelta``.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from dateutil.relativedelta import relativedelta

# --------------------------------------------------------------------------- lexicons
STOPWORDS = frozenset(
    "a about above after again against all am an and any are aren't as at be because been before being "
    "below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down "
    "during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her "
    "here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's "
    "its itself let's me more most mustn't my myself no nor not of off on once only or other ought our "
    "ours ourselves out over own same shan't she she'd she'll she's should shouldn't so some such than "
    "that that's the their theirs them themselves then there there's these they they'd they'll they're "
    "they've this those through to too under until up very was wasn't we we'd we'll we're we've were "
    "weren't what what's when when's where where's which while who who's whom why why's with won't would "
    "wouldn't you you'd you'll you're you've your yours yourself yourselves also just really will get got "
    "gonna going go went im ive dont cant thats its lets one much many lot lots even still yet ever "
    "something anything everything thing things way well like could would should might must may".split()
)
#: Words that carry no memory on their own (interjections, politeness, empty praise).
FILLER = frozenset(
    "oh wow hey hi hello yeah yes yep nope no ok okay sure thanks thank haha lol hmm um uh ah aw aww "
    "awesome great cool nice amazing wonderful fantastic sweet glad good happy sounds sound totally "
    "definitely absolutely congrats congratulations bye see soon care take talk later catch glad "
    "exciting excited incredible impressive lovely beautiful fun true right agree know mean guess "
    "feel think hope wish sorry hear heard same too really truly indeed".split()
)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
NOT_NAMES = frozenset(
    [*WEEKDAYS, *MONTHS, "i", "i'm", "i've", "i'll", "i'd", "the", "a", "an", "my", "your", "our", "we",
     "you", "he", "she", "they", "it", "this", "that", "these", "those", "there", "what", "when",
     "where", "why", "how", "who", "which", "oh", "wow", "hey", "hi", "hello", "yes", "yeah", "no",
     "thanks", "thank", "and", "but", "so", "if", "or", "as", "at", "in", "on", "for", "to", "of",
     "do", "did", "does", "is", "are", "was", "were", "can", "could", "would", "will", "just", "also",
     "not", "all", "any", "some", "lol", "haha", "ok", "okay", "god", "omg", "awesome", "great",
     "nice", "cool", "sure", "sounds", "well", "anyway", "btw", "by", "with", "from", "mom", "dad",
     "last", "next", "this", "every", "each"])
NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
                "couple": 2, "few": 3, "several": 3}
TOPICS: dict[str, frozenset[str]] = {
    "family": frozenset("kids kid children child son daughter mom dad mother father family husband wife "
                        "sister brother parents grandma grandpa baby".split()),
    "work": frozenset("job work career boss office colleague company project meeting promotion "
                      "interview business client salary".split()),
    "health": frozenset("health doctor hospital sick injury surgery therapy medicine diet sleep".split()),
    "art": frozenset("painting paint art drawing draw sculpture pottery artist gallery canvas "
                     "photography photo".split()),
    "music": frozenset("music song songs guitar piano concert band sing singing violin album".split()),
    "sports": frozenset("running run marathon gym yoga climbing hiking swim swimming soccer football "
                        "basketball tennis workout race".split()),
    "travel": frozenset("trip travel vacation flight hotel beach camping road visit visited abroad "
                        "journey tour".split()),
    "pets": frozenset("dog dogs cat cats puppy kitten pet pets horse".split()),
    "education": frozenset("school college university class course degree study studying exam "
                           "teacher student education".split()),
    "food": frozenset("cook cooking recipe dinner lunch breakfast bake baking restaurant food".split()),
    "identity": frozenset("lgbtq transgender trans pride identity gender queer support "
                          "community".split()),
    "books": frozenset("book books reading read novel author library".split()),
    "events": frozenset("party birthday wedding festival celebration anniversary parade".split()),
    "nature": frozenset("nature garden gardening park forest mountain lake river camping".split()),
}
_TOPIC_OF = {w: t for t, words in TOPICS.items() for w in words}

# --------------------------------------------------------------------------- pronouns
_FIRST = {
    "i'm": "{S} is", "i am": "{S} is", "i've": "{S} has", "i have": "{S} has", "i'll": "{S} will",
    "i will": "{S} will", "i'd": "{S} would", "i was": "{S} was", "i": "{S}", "me": "{S}",
    "myself": "{S}", "my": "{S}'s", "mine": "{S}'s",
}
_SECOND = {
    "you're": "{O} is", "you are": "{O} is", "you've": "{O} has", "you have": "{O} has",
    "you'll": "{O} will", "you will": "{O} will", "you'd": "{O} would", "you were": "{O} was",
    "yourself": "{O}", "your": "{O}'s", "yours": "{O}'s", "you": "{O}",
}
_FIRST_RE = re.compile(
    r"\b(?:i'm|i am|i've|i have|i'll|i will|i'd|i was|myself|mine|my|me|i)\b(?!')", re.IGNORECASE)
_SECOND_RE = re.compile(
    r"\b(?:you're|you are|you've|you have|you'll|you will|you'd|you were|yourself|yours|your|you)\b(?!')",
    re.IGNORECASE)


def normalize_text(text: str) -> str:
    """Curly quotes to straight ones, control characters to spaces, whitespace collapsed."""
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def ground_pronouns(text: str, speaker: str, other: str | None) -> str:
    """First person -> ``speaker``; second person -> ``other`` (left alone if unknown)."""

    def first(m: re.Match[str]) -> str:
        key = m.group(0).lower()
        if key == "i" and m.group(0) == "i" and not _standalone_i(m):
            return m.group(0)
        return _FIRST[key].format(S=speaker)

    out = _FIRST_RE.sub(first, text)
    if other:
        out = _SECOND_RE.sub(lambda m: _SECOND[m.group(0).lower()].format(O=other), out)
    return out


def _standalone_i(m: re.Match[str]) -> bool:
    """Lowercase 'i' counts as the pronoun only between spaces/punctuation (chat style)."""
    s = m.string
    before = s[m.start() - 1] if m.start() else " "
    after = s[m.end()] if m.end() < len(s) else " "
    return not before.isalnum() and not after.isalnum()


# --------------------------------------------------------------------------- time
_NUM = (r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
        r"|a couple of|couple of|a few|few|several)")
_TIME_RE = re.compile(
    r"\b(?:"
    r"(?P<ago>" + _NUM + r")\s+(?P<unit>day|week|month|year)s?\s+ago"
    r"|(?P<rel>last|next|this|this past|this coming)\s+(?P<span>week|month|year|weekend|"
    + "|".join(WEEKDAYS) + r")"
    r"|(?P<single>yesterday|today|tonight|tomorrow|last night|this morning|this afternoon|this evening)"
    r"|(?P<on>on|since|by)\s+(?P<wday>" + "|".join(WEEKDAYS) + r")"
    r")\b",
    re.IGNORECASE,
)
_FUTURE = re.compile(r"\b(?:will|gonna|going to|plan(?:ning)? to|next|tomorrow|'ll|upcoming|soon)\b", re.I)


def _iso(d: date) -> str:
    return d.isoformat()


def _week_of(d: date) -> str:
    return f"week of {_iso(d - timedelta(days=d.weekday()))}"


def _number(word: str) -> int:
    word = word.lower().replace("a couple of", "couple").replace("couple of", "couple")
    word = word.replace("a few", "few")
    return int(word) if word.isdigit() else NUMBER_WORDS.get(word, 1)


def _resolve(m: re.Match[str], day: date, future: bool) -> str | None:
    g = m.groupdict()
    if g["single"]:
        s = g["single"].lower()
        offset = {"yesterday": -1, "last night": -1, "tomorrow": 1}.get(s, 0)
        return _iso(day + timedelta(days=offset))
    if g["ago"]:
        n = _number(g["ago"])
        unit = g["unit"].lower()
        approx = "around " if g["ago"].lower() in ("a few", "few", "several", "a couple of", "couple of") else ""
        if unit == "day":
            return approx + _iso(day - timedelta(days=n))
        if unit == "week":
            return approx + _week_of(day - timedelta(weeks=n))
        if unit == "month":
            return approx + (day - relativedelta(months=n)).strftime("%B %Y")
        return approx + str((day - relativedelta(years=n)).year)
    if g["rel"]:
        rel = g["rel"].lower()
        span = g["span"].lower()
        step = {"last": -1, "this past": -1, "next": 1, "this coming": 1}.get(rel, 0)
        if span in WEEKDAYS:
            return _iso(_weekday(day, WEEKDAYS.index(span), step if step else (1 if future else -1),
                                 this=rel == "this"))
        if span == "week":
            return _week_of(day + timedelta(weeks=step))
        if span == "weekend":
            saturday = day + timedelta(days=5 - day.weekday())  # this week's Saturday
            return f"weekend of {_iso(saturday + timedelta(weeks=step))}"
        if span == "month":
            return (day + relativedelta(months=step)).strftime("%B %Y")
        return str(day.year + step)
    if g["wday"]:
        return _iso(_weekday(day, WEEKDAYS.index(g["wday"].lower()), 1 if future else -1))
    return None


def _weekday(day: date, target: int, direction: int, this: bool = False) -> date:
    """The nearest ``target`` weekday before (direction -1) or after (+1) ``day``."""
    if this:  # "this Friday": the one in the current week
        return day + timedelta(days=target - day.weekday())
    delta = (target - day.weekday()) % 7
    if direction > 0:
        return day + timedelta(days=delta or 7)
    back = (day.weekday() - target) % 7
    return day - timedelta(days=back or 7)


def ground_time(text: str, when: datetime | None) -> str:
    """Append the absolute date after each relative time expression."""
    if when is None:
        return text
    day = when.date()
    future = bool(_FUTURE.search(text))
    out: list[str] = []
    last = 0
    for m in _TIME_RE.finditer(text):
        resolved = _resolve(m, day, future)
        if resolved is None:
            continue
        out.append(text[last : m.end()])
        out.append(f" ({resolved})")
        last = m.end()
    out.append(text[last:])
    return "".join(out)


# --------------------------------------------------------------------------- sentences
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_ANAPHOR = re.compile(r"^(?:it|that|this|they|them|those|these|he|she|there|which|so|and|but|also)\b", re.I)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?(?::[0-9]{2})?")
_TIME_OF_DAY = re.compile(r"\b(\d{1,2}(?::\d{2})?)\s*(am|pm)\b", re.I)


def split_atomic(text: str) -> list[str]:
    """Sentences of a turn; a sentence opening on an anaphor stays with the previous one."""
    parts = [p.strip() for p in _SENT_SPLIT.split(text) if p.strip()]
    out: list[str] = []
    for p in parts:
        if out and _ANAPHOR.match(p):
            out[-1] = f"{out[-1]} {p}"
        else:
            out.append(p)
    return out or [text]


def keywords(text: str, exclude: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Lowercased content words in order (stopwords and fillers removed, numbers and
    clock times kept: "2 pm" -> "2pm")."""
    text = _TIME_OF_DAY.sub(lambda m: m.group(1) + m.group(2).lower(), text)
    out: list[str] = []
    seen: set[str] = set()
    for w in _WORD.findall(text.lower()):
        w = w[:-2] if w.endswith("'s") else w
        if w in STOPWORDS or w in FILLER or w in exclude or w in seen:
            continue
        if len(w) < 2 and not w.isdigit():
            continue
        seen.add(w)
        out.append(w)
    return out


def is_chitchat(sentence: str, names: set[str]) -> bool:
    """True when a sentence has no content word beyond fillers and the participants' names."""
    return not keywords(sentence, exclude=names)


_CAP_PHRASE = re.compile(r"\b([A-Z][a-zA-Z'&-]*(?:\s+(?:of|the|de|du|von|van|and)?\s*[A-Z][a-zA-Z'&-]*)*)")


def capitalized_phrases(text: str) -> list[str]:
    """Capitalized phrases that are not sentence-initial function words or calendar names."""
    found: list[str] = []
    for m in _CAP_PHRASE.finditer(text):
        phrase = m.group(1).strip("'-")
        if phrase.endswith("'s"):
            phrase = phrase[:-2]
        words = phrase.split()
        while words and words[0].lower() in NOT_NAMES:
            words = words[1:]
        if not words:
            continue
        start = m.start()
        initial = start == 0 or text[:start].rstrip()[-1:] in ".!?\"(" or text[:start].rstrip().endswith(":")
        phrase = " ".join(words)
        if initial and len(words) == 1 and words[0].lower() in STOPWORDS | FILLER:
            continue
        if phrase.lower() not in NOT_NAMES and len(phrase) > 1:
            found.append(phrase)
    return list(dict.fromkeys(found))


_LOCATION = re.compile(
    r"\b(?:in|at|to|from|near|visited|visiting|moved to|back to|around)\s+"
    r"((?:the\s+)?[A-Z][a-zA-Z'-]*(?:\s+[A-Z][a-zA-Z'-]*)*)")


def find_location(text: str, persons: set[str]) -> str | None:
    for m in _LOCATION.finditer(text):
        place = m.group(1)
        if place.lower().startswith("the "):
            place = place[4:]
        if place.lower() in NOT_NAMES or place in persons:
            continue
        return place
    return None


def find_topic(words: list[str]) -> str | None:
    counts: dict[str, int] = {}
    for w in words:
        t = _TOPIC_OF.get(w)
        if t:
            counts[t] = counts.get(t, 0) + 1
    return max(counts, key=lambda t: counts[t]) if counts else None


_ATTRIBUTE = re.compile(
    r"\bmy\s+((?:[a-z]+(?:'s)?\s+){0,2}[a-z]+)\s+(?:is|are|was)\s+([^.,!?;]{1,60})", re.IGNORECASE)


def find_attributes(text: str) -> dict[str, str]:
    """Self-stated attributes: "my phone number is 555-0199" -> {"phone number": "555-0199"}."""
    out: dict[str, str] = {}
    for m in _ATTRIBUTE.finditer(normalize_text(text)):
        attr = m.group(1).lower().strip()
        value = " ".join(m.group(2).split()[:6]).strip()
        if value and attr.split()[0] not in STOPWORDS:
            out.setdefault(attr, value)
    return out
