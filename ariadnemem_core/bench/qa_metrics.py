"""QA answer scoring: LoCoMo's official F1, and the SimpleMem/Mem0-style F1 and BLEU-1.

Why two F1s: papers report both and they differ. LoCoMo's official score
(``task_eval/evaluation.py`` of snap-research/locomo) Porter-stems token multisets and
treats categories differently; SimpleMem and Mem0 report an unstemmed token-*set* F1 and
BLEU-1. Both are reproduced here so our numbers compare with each line of the literature.

LoCoMo's categories (numbering of the dataset and its official evaluation):
1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache
from typing import Any

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
#: Phrases the official evaluation accepts as "the memory does not say" (category 5).
ADVERSARIAL_PHRASES = ("no information available", "not mentioned")


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    from nltk.stem import PorterStemmer

    return PorterStemmer()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(_stemmer().stem(word))


# ---------------------------------------------------------------- LoCoMo official
def normalize_answer(s: Any) -> str:
    """LoCoMo's normalization: drop commas, lowercase, strip punctuation, remove the
    words a/an/the/and, collapse whitespace (in the official order)."""
    s = str(s).replace(",", "")
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def locomo_f1_score(prediction: Any, ground_truth: Any) -> float:
    """Official token F1: Porter-stemmed token multisets of the normalized strings."""
    pred = [_stem(w) for w in normalize_answer(prediction).split()]
    gold = [_stem(w) for w in normalize_answer(ground_truth).split()]
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def locomo_multi_f1(prediction: Any, ground_truth: Any) -> float:
    """Official multi-hop F1: split both on ","; for each gold sub-answer take the best F1
    over the predicted sub-answers; average over the gold sub-answers."""
    preds = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(ground_truth).split(",")]
    return sum(max(locomo_f1_score(p, g) for p in preds) for g in golds) / len(golds)


def is_abstention(prediction: Any) -> bool:
    low = str(prediction).lower()
    return any(p in low for p in ADVERSARIAL_PHRASES)


def locomo_score(prediction: Any, gold: Any, category: int) -> float:
    """One question's score as in the official ``eval_question_answering``.

    Category 3 keeps the gold text before the first ";"; categories 2-4 use the plain F1,
    1 the multi-answer F1, 5 scores 1 iff the prediction abstains ("no information
    available" / "not mentioned").
    """
    category = int(category)
    prediction = "" if prediction is None else str(prediction)
    answer = str(gold) if gold is not None else ""
    if category == 3:
        answer = answer.split(";")[0].strip()
    if category in (2, 3, 4):
        return locomo_f1_score(prediction, answer)
    if category == 1:
        return locomo_multi_f1(prediction, answer)
    if category == 5:
        return 1.0 if is_abstention(prediction) else 0.0
    raise ValueError(f"unknown LoCoMo category {category!r} (expected 1-5)")


# ---------------------------------------------------------------- SimpleMem / Mem0 style
def simple_tokenize(text: Any) -> list[str]:
    """Mem0's ``simple_tokenize`` (also used by SimpleMem and A-Mem): lowercase, turn
    . , ! ? into spaces, split on whitespace."""
    t = str(text).lower()
    for ch in ".,!?":
        t = t.replace(ch, " ")
    return t.split()


def simple_f1(prediction: Any, reference: Any) -> float:
    """Unstemmed token-*set* F1 (Mem0 / SimpleMem ``calculate_f1``)."""
    pred = set(simple_tokenize(prediction))
    ref = set(simple_tokenize(reference))
    if not pred or not ref:
        return 0.0
    common = pred & ref
    if not common:
        return 0.0
    precision = len(common) / len(pred)
    recall = len(common) / len(ref)
    return 2 * precision * recall / (precision + recall)


def _bleu1_fallback(pred: list[str], ref: list[str]) -> float:
    """Unigram modified precision x brevity penalty; no unigram match scores 0 (as nltk
    does), so this equals nltk for weights (1, 0, 0, 0)."""
    import math

    if not pred:
        return 0.0
    ref_counts = Counter(ref)
    clipped = sum(min(c, ref_counts[w]) for w, c in Counter(pred).items())
    if clipped == 0:
        return 0.0
    precision = clipped / len(pred)
    bp = 1.0 if len(pred) > len(ref) else math.exp(1 - len(ref) / len(pred)) if ref else 0.0
    return bp * precision


def bleu1(prediction: Any, reference: Any) -> float:
    """Sentence BLEU-1 as reported by Mem0/SimpleMem: nltk ``sentence_bleu`` with weights
    (1, 0, 0, 0) and smoothing method1. Tokens are :func:`simple_tokenize` (Mem0's own
    fallback when nltk's punkt data is missing, which it always is offline), so scores do
    not depend on what nltk data happens to be installed."""
    pred = simple_tokenize(prediction)
    ref = simple_tokenize(reference)
    if not pred or not ref:
        return 0.0
    try:
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    except ImportError:  # pragma: no cover - nltk is a dependency of the bench extras
        return _bleu1_fallback(pred, ref)
    return float(sentence_bleu([ref], pred, weights=(1, 0, 0, 0),
                               smoothing_function=SmoothingFunction().method1))


def score_answer(prediction: Any, gold: Any, category: int) -> dict[str, float]:
    """All three metrics for one question. For category 5 the gold of the simple metrics
    is the gold text given (the adversarial answer, if any)."""
    return {
        "f1": locomo_score(prediction, gold, category),
        "f1_simple": simple_f1(prediction, gold),
        "bleu1": bleu1(prediction, gold),
    }
