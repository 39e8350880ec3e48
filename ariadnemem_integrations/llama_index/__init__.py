"""LlamaIndex adapters for AriadneMem (``pip install "ariadnemem[llama-index]"``).

* :class:`AriadneMemRetriever`: a ``llama_index.core`` ``BaseRetriever`` returning the
  evidence graph as ``NodeWithScore`` items; works in ``RetrieverQueryEngine``.
* :class:`AriadneMemBlock`: a ``BaseMemoryBlock`` for ``Memory.from_defaults(memory_blocks=[...])``.
"""

from __future__ import annotations

from .._compat import require

require("llama_index.core", "llama-index", "ariadnemem_integrations.llama_index")

from .memory_block import AriadneMemBlock  # noqa: E402
from .retriever import AriadneMemRetriever  # noqa: E402

__all__ = ["AriadneMemBlock", "AriadneMemRetriever"]
