"""FTS5-compatible tokens and BM25 terms for a backend without FTS5 (Postgres).

SQLite's ``porter unicode61`` tokenizer splits on anything but letters and digits, folds
case and diacritics, and Porter-stems tokens of 3 to 64 characters (the original
algorithm). The same steps here give a Postgres ``tsvector`` whose lexemes and term
frequencies equal what FTS5 indexes, so both backends rank with the same BM25 over the
same terms. NLTK's Porter stemmer in its original-algorithm mode is what FTS5 implements.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import defaultdict

from ..text import QUERY_STOPWORDS

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
#: Postgres limits: positions are 1..16383 and at most 256 are kept per lexeme; a lexeme
#: is shorter than 2 KB.
_MAX_POS = 16383
_MAX_POSITIONS = 256
_MAX_LEXEME_BYTES = 2046


@functools.cache
def _stemmer() -> object:
    from nltk.stem import PorterStemmer

    return PorterStemmer(mode=PorterStemmer.ORIGINAL_ALGORITHM)


@functools.lru_cache(maxsize=65536)
def _stem(token: str) -> str:
    if not 3 <= len(token) <= 64 or not token.isascii():
        return token
    return str(_stemmer().stem(token))  # type: ignore[attr-defined]


def _fold(text: str) -> str:
    text = text.lower()
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def tokens(text: str) -> list[str]:
    """The stemmed tokens of ``text`` in order (what FTS5 indexes for it)."""
    return [_stem(w) for w in _WORD.findall(_fold(text))]


def tsvector_literal(toks: list[str]) -> str:
    """A ``tsvector`` input literal with every token's positions (exact term frequencies)."""
    positions: dict[str, list[int]] = defaultdict(list)
    for i, tok in enumerate(toks, start=1):
        if len(tok.encode("utf-8")) <= _MAX_LEXEME_BYTES:
            positions[tok].append(min(i, _MAX_POS))
    parts = []
    for tok, pos in positions.items():
        quoted = tok.replace("\\", "\\\\").replace("'", "''")
        parts.append(f"'{quoted}':" + ",".join(str(p) for p in pos[:_MAX_POSITIONS]))
    return " ".join(parts)


def query_terms(text: str, max_terms: int = 32) -> list[str]:
    """The stemmed terms of a query, as :func:`~ariadnemem_core.store.records.fts_query`
    picks them: content words, each once, at most ``max_terms``. Two words with one stem
    stay two terms (FTS5 scores each phrase of the OR separately)."""
    words: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if word in QUERY_STOPWORDS or word in seen:
            continue
        seen.add(word)
        words.append(word)
        if len(words) >= max_terms:
            break
    return [t for w in words for t in tokens(w)]


class BM25Index:
    """Okapi BM25 over a small set of documents in memory, ranked as FTS5's ``bm25()``
    ranks one column (k1 = 1.2, b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5)), at least
    1e-6): for a backend that derives an index on read (the message view on Postgres).

    Args:
        bodies: the documents' texts, tokenized with :func:`tokens`.
    """

    K1, B = 1.2, 0.75

    def __init__(self, bodies: list[str]) -> None:
        self._postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self._lengths: list[int] = []
        for i, body in enumerate(bodies):
            toks = tokens(body)
            self._lengths.append(len(toks))
            counts: dict[str, int] = defaultdict(int)
            for tok in toks:
                counts[tok] += 1
            for tok, tf in counts.items():
                self._postings[tok].append((i, tf))
        self._avg = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """Top-``k`` (document index, positive score) for the query's terms (OR-ed)."""
        import math

        n_docs = len(self._lengths)
        scores: dict[int, float] = defaultdict(float)
        for term in query_terms(query):
            postings = self._postings.get(term, [])
            if not postings:
                continue
            idf = max(math.log((n_docs - len(postings) + 0.5) / (len(postings) + 0.5)), 1e-6)
            for doc, tf in postings:
                norm = self.K1 * (1 - self.B + self.B * self._lengths[doc] / (self._avg or 1.0))
                scores[doc] += idf * tf * (self.K1 + 1) / (tf + norm)
        return sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]
