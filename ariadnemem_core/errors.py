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
    """An entry id does not exist (in the caller's scope).

    :meth:`for_entry` builds the error of a lookup by id, so every host (the library, the
    MCP server) says the same thing, including what a pending turn's id is.
    """

    #: The id a read gives a turn that waits for its window (role "pending").
    PENDING_PREFIX = "pending:"

    @classmethod
    def for_entry(cls, entry_id: str, where: str, *, library: bool = True) -> NotFoundError:
        """The error of a lookup that found no entry.

        Args:
            entry_id: the id looked up.
            where: the scope searched, as it reads after the id ("for user 'maya'").
            library: name the library calls that act on a pending turn (``flush``,
                ``replace``); a host that does not offer them (the MCP server) leaves
                them out.
        """
        if entry_id.startswith(cls.PENDING_PREFIX):
            until = ("until flush() extracts it; replace(turn_ids=[...]) takes a turn back by its turn id"
                     if library else "until it is extracted")
            return cls(f"no entry {entry_id!r} {where}: it names a turn that waits for its window "
                       f"(role 'pending'), which has no entry {until}")
        return cls(f"no entry {entry_id!r} {where}")

    def __str__(self) -> str:
        # KeyError's str() is the repr of its argument (quotes and escapes around the
        # message); the message reads as written.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()
