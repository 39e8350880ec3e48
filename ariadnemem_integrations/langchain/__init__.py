"""LangChain 1.x adapters for AriadneMem (``pip install "ariadnemem[langchain]"``).

* :class:`AriadneMemRetriever`: a ``BaseRetriever`` over ``memory.retrieve`` (sync) and
  ``memory.aretrieve`` (async); needs only ``langchain-core``.
* :func:`create_memory_tools`: ``[search_memory, add_to_memory]`` tools for an agent.
* :class:`AriadneMemMiddleware`: an ``AgentMiddleware`` for ``langchain.agents.create_agent``
  that recalls the evidence graph before each model call and stores every exchange;
  needs the ``langchain`` package (imported when you first touch the name).
* ``ariadnemem_integrations.langchain.legacy.AriadneMemConversationMemory``: the legacy
  ``BaseMemory`` shim for ``langchain-classic`` chains (``pip install "ariadnemem[langchain-classic]"``).
"""

from __future__ import annotations

from typing import Any

from .._compat import require

require("langchain_core.retrievers", "langchain", "ariadnemem_integrations.langchain")

from .retriever import AriadneMemRetriever  # noqa: E402
from .tools import AddMemoryInput, SearchMemoryInput, create_memory_tools  # noqa: E402

__all__ = [
    "AddMemoryInput",
    "AriadneMemMiddleware",
    "AriadneMemRetriever",
    "SearchMemoryInput",
    "create_memory_tools",
]


def __getattr__(name: str) -> Any:
    # The middleware needs the full ``langchain`` package (agents), not only langchain-core:
    # import it on first use so the retriever and tools work with langchain-core alone.
    if name == "AriadneMemMiddleware":
        from .middleware import AriadneMemMiddleware

        return AriadneMemMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
