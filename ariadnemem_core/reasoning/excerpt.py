"""Query-focused excerpts: how a long entry is shown inside a hard token budget.

An entry from an agent's reply can be a whole list, a table or a code block of several
hundred tokens; shown whole, two of them fill a 500-token context. The evidence graph
shows such an entry as an excerpt: the lines or sentences that share the most words with
the question, in their original order, joined by " … " where something was left out.
The entry itself is unchanged and stays fetchable whole by its id (``AriadneMemory.get``).

Scoring is lexical on purpose: the entry was already chosen by meaning; inside it, the
question's own words locate the part that answers it, and this costs microseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from ..text import TITLES, words
from ..tokens import count_tokens

ELLIPSIS = " … "
#: A sentence ends at . ! ? or ; before a space, not after a title ("Eli's tutor is Ms.
#: Oyelaran" is one sentence: cut after "Ms." the excerpt would lose the name it answers with).
#: The end mark is looked for first: with the titles first, every space paid for five
#: lookbehinds and splitting was 15 times slower.
_SENTENCE = re.compile(r"(?<=[.!?;])" + "".join(rf"(?<!\b{t}\.)" for title in TITLES for t in (title, title.lower()))
                       + r"\s+(?=\S)")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """A light suffix strip: enough to match "deadlines" with "deadline" inside one entry."""
    w = word.lower()
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def query_terms(query: str, stopwords: Iterable[str] = ()) -> frozenset[str]:
    """The stemmed words of a question that can locate an answer (stopwords removed)."""
    stop = frozenset(stopwords)
    return frozenset(_stem(w) for w in words(query) if w not in stop and len(w) > 1)


def units(text: str) -> list[str]:
    """Lines of a multi-line text (lists, tables, code), else its sentences."""
    if "\n" in text:
        return [ln for ln in (x.rstrip() for x in text.split("\n")) if ln.strip()]
    return [s for s in _SENTENCE.split(text) if s.strip()]


def _score(unit: str, terms: frozenset[str]) -> int:
    return len({_stem(w) for w in words(unit)} & terms)


#: Tokens a separator (" / " or " … ") costs between two parts, at most.
_SEP_TOKENS = 2


def excerpt(text: str, terms: frozenset[str], max_tokens: int) -> str:
    """``text`` itself when it fits ``max_tokens``, else its best-matching parts.

    Args:
        text: The entry text.
        terms: Stemmed question words (:func:`query_terms`).
        max_tokens: Most cl100k tokens of the result (the ellipses included).

    Returns:
        A string of at most ``max_tokens`` tokens; the first unit (which carries the
        heading or lead-in of a block) wins ties, and parts keep their original order.
    """
    if count_tokens(text) <= max_tokens:
        return text
    parts = units(text)
    costs = [count_tokens(p.strip()) for p in parts]
    ranked = sorted(range(len(parts)), key=lambda i: (-_score(parts[i], terms), i))
    chosen: list[int] = []
    used = 2 * _SEP_TOKENS  # leading and trailing ellipsis
    for i in ranked:
        if used + costs[i] + _SEP_TOKENS <= max_tokens:
            chosen.append(i)
            used += costs[i] + _SEP_TOKENS
        elif not chosen:
            # The best unit alone is too long: a window of words around its first match.
            return _window(parts[i], terms, max_tokens)
    chosen.sort()
    out = _join(parts, chosen) if chosen else _window(text, terms, max_tokens)
    while chosen and count_tokens(out) > max_tokens:  # the estimate was short: drop the weakest
        weakest = max(chosen, key=lambda i: (ranked.index(i), i))
        chosen.remove(weakest)
        out = _join(parts, chosen) if chosen else _window(text, terms, max_tokens)
    return out


def _join(parts: list[str], chosen: list[int]) -> str:
    out = "" if not chosen or chosen[0] == 0 else ELLIPSIS.lstrip()
    prev = None
    for i in chosen:
        if prev is not None:
            out += " / " if i == prev + 1 else ELLIPSIS
        out += parts[i].strip()
        prev = i
    if chosen and chosen[-1] != len(parts) - 1:
        out += ELLIPSIS.rstrip()
    return out


def _window(text: str, terms: frozenset[str], max_tokens: int) -> str:
    """The words around the first question word, grown until the token limit."""
    tokens = text.split()
    if not tokens:
        return ""
    hit = next((i for i, w in enumerate(tokens) if {_stem(x) for x in words(w)} & terms), 0)
    lo, hi = max(0, hit - 4 * max_tokens), min(len(tokens), hit + 4 * max_tokens)
    # Estimated costs grow the window (a word is about one token per 4 characters), then
    # exact counts shrink it: a few tokenizer calls instead of one per word.
    cost = [1 + len(w) // 4 for w in tokens[lo:hi]]
    budget = max_tokens - 2 * _SEP_TOKENS
    a = b = hit - lo  # inclusive window [a, b] in the slice
    used = cost[a]
    while True:
        grown = False
        if b + 1 < len(cost) and used + cost[b + 1] <= budget:
            b += 1
            used += cost[b]
            grown = True
        if a > 0 and used + cost[a - 1] <= budget:
            a -= 1
            used += cost[a]
            grown = True
        if not grown:
            break
    out = _wrap(tokens, lo + a, lo + b)
    while count_tokens(out) > max_tokens and b > a:
        excess = count_tokens(out) - max_tokens
        b = max(a, b - max(1, excess // 2)) if b > hit - lo else b
        if b == hit - lo and a < b:
            a += 1
        out = _wrap(tokens, lo + a, lo + b)
    if count_tokens(out) > max_tokens:  # one enormous "word" (a URL, a base64 blob)
        out = _prefix(out, max_tokens)
    return out


def _prefix(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` (binary search on length:
    a character may cost several tokens)."""
    lo, hi = 0, min(len(text), max_tokens)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def _wrap(words: list[str], lo: int, hi: int) -> str:
    body = " ".join(words[lo:hi + 1])
    return ("… " if lo > 0 else "") + body + (" …" if hi < len(words) - 1 else "")
