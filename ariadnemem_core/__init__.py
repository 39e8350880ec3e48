"""AriadneMem core: graph-structured long-term memory for LLM agents (framework-neutral).

>>> from ariadnemem_core import AriadneMemory, Turn
>>> with AriadneMemory() as mem:                                   # doctest: +SKIP
...     mem.add(Turn("Bob", "My phone number is 555-0199."))
...     print(mem.retrieve("What is Bob's phone number?").to_text())
"""

from .config import Config
from .embedding import Embedder, HashEmbedder, MiniLMEmbedder, OpenAIEmbedder, TorchMiniLMEmbedder
from .errors import (
    AriadneMemError,
    ConfigError,
    EmbeddingError,
    ExtractionError,
    InvalidInputError,
    LLMError,
    LLMTimeoutError,
    NotFoundError,
    StoreError,
)
from .evidence import EvidenceGraph, Fact
from .extraction import ExtractionContext, Extractor, RuleExtractor
from .limits import MAX_TEXT_CHARS
from .memory import AriadneMemory
from .models import Entry, Scope, Turn, UpdateEdge, clean_text
from .serialize import quote
from .storage_view import StorageView

__version__ = "0.1.0"

__all__ = [
    "MAX_TEXT_CHARS",
    "AriadneMemError",
    "AriadneMemory",
    "Config",
    "ConfigError",
    "Embedder",
    "EmbeddingError",
    "Entry",
    "EvidenceGraph",
    "ExtractionContext",
    "ExtractionError",
    "Extractor",
    "Fact",
    "HashEmbedder",
    "InvalidInputError",
    "LLMError",
    "LLMTimeoutError",
    "MiniLMEmbedder",
    "NotFoundError",
    "OpenAIEmbedder",
    "RuleExtractor",
    "Scope",
    "StorageView",
    "StoreError",
    "TorchMiniLMEmbedder",
    "Turn",
    "UpdateEdge",
    "__version__",
    "clean_text",
    "quote",
]
