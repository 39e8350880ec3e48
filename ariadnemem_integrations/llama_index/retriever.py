"""``AriadneMemRetriever`` for LlamaIndex: the evidence graph as ``NodeWithScore`` items.

* ``mode="graph"`` (default): one ``TextNode`` whose text is ``graph.to_text()``; its
  metadata (``fact_ids``, ``paths``, ``source_turn_ids``, ``timestamps``, ``fast_path``,
  ...) is kept out of the LLM and embedding text. Score: the best fact score.
* ``mode="facts"``: one ``TextNode`` per fact, most relevant first (``id_`` = the entry
  id, score = the fact score; the LLM sees the text plus its ``timestamp`` and
  ``speaker``), then one node for the reasoning paths when there are any (score None).

``k`` caps the node count as in the LangChain retriever: in ``"graph"`` mode a given
``k`` returns the graph node followed by fact nodes up to ``k``. No fact: ``[]``.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ariadnemem_core import AriadneMemory, EvidenceGraph

from .._compat import (
    check_k,
    check_mode,
    fact_metadata,
    graph_metadata,
    paths_metadata,
    paths_text,
    ranked_facts,
    scope_kwargs,
)

#: Fact metadata the LLM sees next to the fact text (the rest is ids and bookkeeping).
FACT_LLM_KEYS = ("timestamp", "speaker")


class AriadneMemRetriever(BaseRetriever):
    """Retrieve the connected evidence graph of a query from an AriadneMemory."""

    def __init__(
        self,
        memory: AriadneMemory,
        user_id: str = "default",
        mode: str = "graph",
        k: int | None = None,
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.memory = memory
        self.user_id = user_id
        self.agent_id = agent_id
        self.session_id = session_id
        self.mode = check_mode(mode)
        self.k = check_k(k)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.nodes(self.memory.retrieve(query_bundle.query_str, **self._scope()))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # memory.aretrieve runs the retrieval in a worker thread: the event loop stays free.
        return self.nodes(await self.memory.aretrieve(query_bundle.query_str, **self._scope()))

    def nodes(self, graph: EvidenceGraph) -> list[NodeWithScore]:
        """The nodes of an already built evidence graph."""
        if not graph.facts:
            return []
        facts = []
        for f in ranked_facts(graph):
            meta = fact_metadata(f)
            node = TextNode(id_=f.id, text=f.text, metadata=meta,
                            excluded_llm_metadata_keys=[m for m in meta if m not in FACT_LLM_KEYS],
                            excluded_embed_metadata_keys=list(meta))
            facts.append(NodeWithScore(node=node, score=float(f.score)))
        if self.mode == "facts":
            out = facts
            text = paths_text(graph)
            if text:
                out = [*facts, NodeWithScore(node=_hidden_meta_node(text, paths_metadata(graph)), score=None)]
        else:
            whole = NodeWithScore(node=_hidden_meta_node(graph.to_text(), graph_metadata(graph)),
                                  score=max(float(f.score) for f in graph.facts))
            out = [whole] if self.k is None else [whole, *facts]
        return out if self.k is None else out[: self.k]

    def _scope(self) -> dict[str, Any]:
        return scope_kwargs(self.user_id, self.agent_id, self.session_id)


def _hidden_meta_node(text: str, metadata: dict[str, Any]) -> TextNode:
    return TextNode(text=text, metadata=metadata, excluded_llm_metadata_keys=list(metadata),
                    excluded_embed_metadata_keys=list(metadata))
