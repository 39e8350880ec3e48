"""Flat retrieval baselines: BM25, dense and hybrid (RRF) top-k over raw documents.

These are the "just retrieve k turns" systems that AriadneMem is compared with in the same
run, on the same embedder, so differences come from the method and not from the setup.
BM25 is SQLite FTS5's ``bm25()`` (porter + unicode61 tokenizer, in memory); dense is
cosine over unit vectors with numpy; hybrid is reciprocal-rank fusion of both lists.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..models import Turn
from ..reasoning.channels import K_RRF, rrf
from ..tokens import count_tokens

if TYPE_CHECKING:
    from ..embedding import Embedder

#: Each list's depth fed into the fusion.
FUSION_POOL = 50
METHODS = ("bm25", "dense", "hybrid")

_WORD = re.compile(r"\w+", re.UNICODE)


def format_turn_doc(turn: Turn) -> str:
    """``[YYYY-MM-DD] Speaker: text [shared image: caption]`` — one flat document per turn."""
    day = turn.timestamp.strftime("%Y-%m-%d") if turn.timestamp else "????-??-??"
    text = f"[{day}] {turn.speaker}: {turn.text}"
    caption = turn.metadata.get("blip_caption") or turn.metadata.get("image_caption")
    if caption:
        text += f" [shared image: {caption}]"
    return text


def fts_query(text: str) -> str | None:
    """A MATCH expression that cannot break: every word quoted, all OR-ed (None if no word).

    Quoting keeps FTS5 operators and punctuation in questions ("AND", "-", ":", "*") from
    being parsed as query syntax.
    """
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


@dataclass(slots=True)
class BaselineResult:
    """One flat retrieval: ids in rank order, the context handed to a generator, its cost."""

    ids: list[str]
    context: str
    tokens: int
    latency_ms: float


class FlatIndex:
    """BM25 + dense index over a fixed list of documents (one conversation's turns, or a
    memory's entries). Build once; query many times."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str], *, embeddings: np.ndarray | None = None,
                 embedder: Embedder | None = None) -> None:
        if len(ids) != len(texts):
            raise ValueError("ids and texts must have the same length")
        self.ids = list(ids)
        self.texts = list(texts)
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='porter unicode61')")
        self.db.executemany("INSERT INTO docs(rowid, body) VALUES (?, ?)",
                            ((i, t) for i, t in enumerate(self.texts)))
        self.db.commit()
        if embeddings is None and embedder is not None:
            embeddings = embedder.embed(self.texts) if self.texts else None
        self.embeddings = None if embeddings is None else np.asarray(embeddings, dtype=np.float32)
        self.embedder = embedder

    @classmethod
    def from_turns(cls, turns: Sequence[Turn], embedder: Embedder | None = None) -> FlatIndex:
        """One document per turn (formatted by :func:`format_turn_doc`), embedded in one batch."""
        return cls([t.turn_id or "" for t in turns], [format_turn_doc(t) for t in turns], embedder=embedder)

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ rankings (indices)
    def bm25(self, query: str, k: int) -> list[int]:
        expr = fts_query(query)
        if expr is None:
            return []
        rows = self.db.execute(
            "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs), rowid LIMIT ?", (expr, k)
        ).fetchall()
        return [int(r[0]) for r in rows]

    def dense(self, query_vector: np.ndarray, k: int) -> list[int]:
        if self.embeddings is None or len(self.embeddings) == 0:
            return []
        sims = self.embeddings @ np.asarray(query_vector, dtype=np.float32).ravel()
        k = min(k, len(sims))
        top = np.argpartition(-sims, k - 1)[:k]
        return [int(i) for i in top[np.lexsort((top, -sims[top]))]]

    def hybrid(self, query: str, query_vector: np.ndarray, k: int, pool: int = FUSION_POOL,
               k_rrf: int = K_RRF) -> list[int]:
        lex = [str(i) for i in self.bm25(query, pool)]
        sem = [str(i) for i in self.dense(query_vector, pool)]
        return [int(doc) for doc, _ in rrf([sem, lex], k_rrf)[:k]]

    # ------------------------------------------------------------------ full results
    def search(self, method: str, query: str, k: int, query_vector: np.ndarray | None = None) -> BaselineResult:
        """Top-``k`` by ``method`` with the joined context and its token cost.

        ``latency_ms`` covers the ranking, plus query embedding when ``query_vector`` is
        not given (then the index's embedder is called, cache permitting).
        """
        t0 = time.perf_counter()
        if method != "bm25" and query_vector is None:
            if self.embedder is None:
                raise ValueError(f"{method} needs a query vector or an embedder")
            query_vector = self.embedder.embed([query])[0]
        if method == "bm25":
            idx = self.bm25(query, k)
        elif method == "dense":
            idx = self.dense(query_vector, k)  # type: ignore[arg-type]
        elif method == "hybrid":
            idx = self.hybrid(query, query_vector, k)  # type: ignore[arg-type]
        else:
            raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
        latency = (time.perf_counter() - t0) * 1000.0
        context = "\n".join(self.texts[i] for i in idx)
        return BaselineResult([self.ids[i] for i in idx], context, count_tokens(context), latency)
