"""The question, read once: what every stage of Phase II needs to know about it.

Each stage used to re-read the question on its own (its persons, its period, its words);
here it is read once, before any candidate is drawn, and the stages take the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import Config
from ..embedding import Embedder
from ..models import Scope
from ..text import STOPWORDS, query_entities, without_persons
from .excerpt import query_terms
from .periods import question_period


@dataclass(frozen=True, slots=True)
class Question:
    """A question as the read path sees it.

    Attributes:
        text: the (already validated) question.
        scope: whose memories may be used; nothing outside it is ever read into the graph.
        vector: the question's embedding.
        nameless_vector: the question embedded without the persons it names
            (``Config.nameless_query_weight``), or None when it names nobody.
        entities: the persons and named things the question names (lowercase).
        period: the day or month the question names, as POSIX seconds ``[start, end)``
            (``periods.py``), or None.
        terms: the stemmed content words that locate an answer inside a long entry.
        known_persons: the persons the memory knows of (for fast paths).
    """

    text: str
    scope: Scope
    vector: np.ndarray
    nameless_vector: np.ndarray | None = None
    entities: list[str] = field(default_factory=list)
    period: tuple[float, float] | None = None
    terms: frozenset[str] = frozenset()
    known_persons: frozenset[str] = frozenset()


def read_question(text: str, scope: Scope, known_persons: set[str], embedder: Embedder, config: Config, *,
                  vector: np.ndarray | None = None) -> Question:
    """Embed and parse a question once (one embedding call for both of its vectors).

    Args:
        text: the question.
        scope: whose memories.
        known_persons: the persons of the scope's memory (lowercase).
        embedder: embeds the question (unless ``vector`` is given) and its nameless form.
        config: ``nameless_query_weight`` and ``k_period`` decide what is read.
        vector: the question's embedding, if the caller has it.

    Returns:
        The question.
    """
    nameless = without_persons(text, known_persons) if config.nameless_query_weight else text
    texts = ([] if vector is not None else [text]) + ([nameless] if nameless != text else [])
    vectors = list(embedder.embed(texts)) if texts else []
    qvec = vector if vector is not None else vectors.pop(0)
    return Question(
        text=text, scope=scope, vector=qvec, nameless_vector=vectors[0] if vectors else None,
        entities=query_entities(text, known_persons),
        period=question_period(text) if config.k_period else None,
        terms=query_terms(text, STOPWORDS), known_persons=frozenset(known_persons),
    )
