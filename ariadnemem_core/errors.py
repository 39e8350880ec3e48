"""The project's error types.

Every error a caller can provoke with bad input derives from :class:`AriadneMemError`, so
``except AriadneMemError`` catches all of them, and the more specific classes name the
problem (and, for input errors, the offending field).
"""

from __future__ import annotations


class AriadneMemError(Exception):
    """Base class of every error raised by AriadneMem."""


class InvalidInputError(AriadneMemError, ValueError):
    """A turn, query or argument is malformed. ``field`` names what is wrong."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"invalid {field}: {problem}")


class ConfigError(AriadneMemError, ValueError):
    """A :class:`~ariadnemem_core.config.Config` value is out of range."""


class StoreError(AriadneMemError):
    """The on-disk store cannot be opened, read or written."""


class EmbeddingError(AriadneMemError):
    """The embedder failed or returned vectors of the wrong shape."""


class ExtractionError(AriadneMemError):
    """An extractor failed on a window (callers fall back to the rule extractor)."""


class LLMError(AriadneMemError):
    """An LLM call failed after its retries, or its output could not be parsed."""


class LLMTimeoutError(LLMError, TimeoutError):
    """An LLM call passed its total deadline (``timeout``, every retry included).

    Separate from other LLM errors because asking again cannot help within the same
    budget: an extractor falls back to rules at once instead of re-asking.
    """


class NotFoundError(AriadneMemError, KeyError):
    """An entry id does not exist (in the caller's scope)."""
