"""The period a question names ("in August 2023", "on 7 November, 2022"), for retrieval.

A question that names when something happened says where its answer lies in time; the
similarity of its words does not. "What did Tim start learning in August 2023?" matches
"Tim started learning an instrument" (December) as well as "Tim started learning the
piano" (August): only the date tells them apart. :func:`question_period` reads a named
day or month with its year; retrieval then also draws candidates from that period and
ranks the memories said in it higher (``Config.period_bonus``).

Only calendar dates with a year are read. A bare year spans most conversations and a
day or month without its year is ambiguous across years; relative phrases ("last week")
have no anchor in a question. A preceding "before"/"by"/"until" widens the period to the
week before the date, "after"/"since" to the week after: a soft window, because the
memory is ranked higher inside it, never filtered by it.
"""

from __future__ import annotations

import re
from calendar import monthrange
from datetime import UTC, datetime, timedelta

MONTHS = {name: n for n, names in enumerate(
    (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
     ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sept", "sep"),
     ("october", "oct"), ("november", "nov"), ("december", "dec")), 1) for name in names}

_MONTH = "(?P<m>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<d>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<y>(?:19|20)\d\d)"
_BEFORE = r"(?P<q>before|by|until|till|prior to|after|since)?\s*(?:the\s+)?"
#: Day month year ("7 November, 2022"), month day year ("October 13, 2023"), month year.
_PATTERNS = [re.compile(r"\b" + _BEFORE + p + r"\b", re.IGNORECASE) for p in (
    _DAY + r"\s+(?:of\s+)?" + _MONTH + r",?\s+" + _YEAR,
    _MONTH + r"\s+" + _DAY + r",?\s+" + _YEAR,
    _MONTH + r",?\s+(?:of\s+)?" + _YEAR,
)]
#: Knob: slack around a named day: a message stamped late in the evening, or the next morning.
DAY_SLACK = timedelta(days=1)
#: Knob: how far "before X" / "after X" reaches from X.
BEFORE_AFTER = timedelta(days=7)


def question_period(question: str) -> tuple[float, float] | None:
    """The period a question names, as ``(start, end)`` POSIX seconds (UTC), or None.

    Args:
        question: the question as asked.

    Returns:
        The first calendar day or month with a year the question names (a day with a
        day's slack either side), widened to the week before or after it when "before",
        "by", "after" or "since" precedes it; None when it names none.
    """
    for pattern in _PATTERNS:
        m = pattern.search(question)
        if m is None:
            continue
        year, month = int(m.group("y")), MONTHS[m.group("m").lower()]
        day = m.groupdict().get("d")
        if day is not None:
            if not 1 <= int(day) <= monthrange(year, month)[1]:
                continue
            start = datetime(year, month, int(day), tzinfo=UTC) - DAY_SLACK
            end = datetime(year, month, int(day), tzinfo=UTC) + timedelta(days=1) + DAY_SLACK
        else:
            start = datetime(year, month, 1, tzinfo=UTC)
            end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
        word = (m.group("q") or "").lower()
        if word in ("before", "by", "until", "till", "prior to"):
            start = start - BEFORE_AFTER
        elif word in ("after", "since"):
            end = end + BEFORE_AFTER
        return start.timestamp(), end.timestamp()
    return None
