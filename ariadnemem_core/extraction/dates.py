"""Relative time -> absolute dates, from the turn's timestamp (part of grounding).

"yesterday" said on 2023-05-08 becomes "yesterday (2023-05-07)"; the original words are
kept and the date appended in parentheses. Dates are computed on the turn's UTC calendar
day; month and year arithmetic uses ``dateutil.relativedelta`` (month ends clamp: March
31 + 1 month = April 30). Precompiled regular expressions only: this runs on every turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, datetime, timedelta

from dateutil.relativedelta import relativedelta

from ..text import MONTH_TITLES, WEEKDAY_ABBR, WEEKDAYS

NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
                "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
                "nineteen": 19, "twenty": 20, "thirty": 30}
#: Vague quantities: grounded as "around <date>" with these values.
FUZZY_NUMBERS = {"a few": 3, "few": 3, "a couple of": 2, "a couple": 2, "couple of": 2, "couple": 2,
                 "several": 3}



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
    r"|(?P<relab>last|next)\s+(?P<abbr>" + _alts(WEEKDAY_ABBR) + r")"
    # "every Sunday", "Sunday mornings": a habit, no one day to ground
    r"|(?<!every\s)(?:(?P<prep>on|since|by|until|till)\s+)?(?P<wday>" + _WD + r")"
    r"(?!\s+(?:mornings|afternoons|evenings|nights)\b)"
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
#: An acknowledgement ("Got it,", or opening the sentence: "Noted:", "Confirmed!"): a word
#: in the past tense that says nothing about when the rest happens ("We agreed, on Monday,
#: to split the bill" is past: only an opening "agreed" acknowledges).
_ACK_RE = re.compile(r"\bgot\s+it\s*[,.!;:-]|^\W*(?:noted|understood|confirmed|agreed)\s*[,.!;:-]", re.IGNORECASE)
_NOT_PAST = frozenset({"need", "needed", "excited", "interested", "tired", "scared", "worried", "bored",
                       "speed", "indeed", "seed", "embed", "proceed", "succeed", "exceed", "feed",
                       "breed", "bleed", "weed", "greed", "shed", "bed"})
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}


def _iso(d: date) -> str:
    return d.isoformat()


def _month_label(d: date) -> str:
    return f"{MONTH_TITLES[d.month - 1]} {d.year}"


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
        return _resolve_day(" ".join((g["single"] or g["dd"]).lower().split()), day)
    if g["n"]:
        return _resolve_ago(" ".join(g["n"].lower().split()), g["unit"].lower(), day)
    if g["abbr"]:
        target = WEEKDAY_ABBR[g["abbr"].lower()]
        if g["relab"].lower() == "last":
            return _iso(_previous_weekday(day, target))
        return _iso(_next_weekday(day, target))
    if g["rel"]:
        rel = " ".join(g["rel"].lower().split())
        return _resolve_relative({"this past": "last", "this coming": "next"}.get(rel, rel), g["span"].lower(), m, day)
    if g["wday"]:
        return _resolve_weekday(WEEKDAYS.index(g["wday"].lower()), (g["prep"] or "").lower(), m, day)
    return None


def _resolve_day(s: str, day: date) -> str:
    """"yesterday", "tonight", "the day after tomorrow", "the other day", ..."""
    if s == "the other day":
        return f"a few days before {_iso(day)}"
    offset = {"yesterday": -1, "last night": -1, "tomorrow": 1, "the day before yesterday": -2,
              "the day after tomorrow": 2}.get(s, 0)
    return _iso(day + timedelta(days=offset))


def _resolve_ago(raw: str, unit: str, day: date) -> str:
    """"<n> days/weeks/weekends/months/years ago" ("a few" and "a couple" give "around")."""
    fuzzy = raw in FUZZY_NUMBERS
    n = int(raw) if raw.isdigit() else FUZZY_NUMBERS.get(raw) or NUMBER_WORDS.get(raw, 1)
    around = "around " if fuzzy else ""
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


def _resolve_relative(rel: str, span: str, m: re.Match[str], day: date) -> str:
    """"last/next/this <weekday|week|weekend|month|year|season>"."""
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
        return f"weekend of {_iso(_weekend(rel, m, day))}"
    if span == "month":
        return _month_label(day + relativedelta(months={"last": -1, "next": 1}.get(rel, 0)))
    if span == "year":
        return str(day.year + {"last": -1, "next": 1}.get(rel, 0))
    return _season(span, rel, day)


def _weekend(rel: str, m: re.Match[str], day: date) -> date:
    """The Saturday of "last/next/this weekend"."""
    weekend = day.weekday() >= 5
    recent = _recent_saturday(day)
    if rel == "last":
        return recent - timedelta(days=7) if weekend else recent
    if rel == "next":
        return recent + timedelta(days=7) if weekend else _next_weekday(day, 5)
    if weekend or _tense(m.string, m.start(), m.end()) == "past":
        return recent
    return _next_weekday(day, 5)


def _resolve_weekday(target: int, prep: str, m: re.Match[str], day: date) -> str:
    """A bare weekday, "(on|since|by|until) <weekday>"."""
    if prep in ("by", "until", "till"):
        return _iso(_next_weekday(day, target, inclusive=True))
    # A bare weekday in a sentence with no past-tense verb is a schedule ("the meeting
    # is at 2 pm on Friday"): the coming one. Past tense points back.
    if prep != "since" and _tense(m.string, m.start(), m.end()) != "past":
        return _iso(_next_weekday(day, target))
    return _iso(_previous_weekday(day, target))


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


