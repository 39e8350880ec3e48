"""``AriadneMemRetriever``: a LangChain ``BaseRetriever`` over an AriadneMemory.

Two views of the same evidence graph (``memory.retrieve`` builds it; nothing is re-ranked
or re-serialized here):

* ``mode="graph"`` (default): ONE Document whose ``page_content`` is ``graph.to_text()``
  (dated facts, update edges, reasoning paths) and whose metadata carries ``fact_ids``,
  ``fact_labels``, ``paths``, ``edges``, ``source_turn_ids``, ``timestamps`` (ISO strings,
  by fact id), ``fast_path`` and ``query``. This is what a generator should read.
* ``mode="facts"``: one Document per fact, most relevant first (``page_content`` = the
  fact text; metadata ``id``, ``label``, ``timestamp``, ``source_turn_ids``, ``score``,
  ``role``, ``superseded_by``, ``speaker``), then one Document for the reasoning paths
  when the graph has any (``metadata["kind"] == "paths"``).

``k`` (constructor field, or ``invoke(query, k=...)``, which wins) caps the number of
Documents. In ``"graph"`` mode a given ``k`` returns the graph Document followed by the
fact Documents (most relevant first), up to ``k`` in all: ``k=1`` is the graph alone. In
``"facts"`` mode the list is cut after ``k`` Documents (the paths Document comes last and
goes first). An empty memory (no matching fact) gives ``[]``.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator

from ariadnemem_core import AriadneMemory, EvidenceGraph

from .._compat import (
    check_k,
    fact_metadata,
    graph_metadata,
    paths_metadata,
    paths_text,
    ranked_facts,
    scope_kwargs,
)


class AriadneMemRetriever(BaseRetriever):
    """Retrieve the connected evidence graph of a query from an AriadneMemory.

    Example::

        retriever = AriadneMemRetriever(memory=mem, user_id="alice")
        [doc] = retriever.invoke("Where does Bob live now?")
        print(doc.page_content)            # the serialized evidence graph
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: AriadneMemory = Field(description="The AriadneMemory to read from.")
    user_id: str = "default"
    agent_id: str | None = None
    session_id: str | None = None
    mode: Literal["graph", "facts"] = "graph"
    k: int | None = Field(default=None, description="Most Documents returned (None: all).")

    @field_validator("k", mode="before")  # before pydantic turns "3" or True into an int
    @classmethod
    def _valid_k(cls, value: int | None) -> int | None:
        return check_k(value)

    # ------------------------------------------------------------------ retrieval
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        graph = self.memory.retrieve(query, **self._scope())
        return self.documents(graph, k=k)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        # memory.aretrieve runs the retrieval in a worker thread: the event loop stays free.
        graph = await self.memory.aretrieve(query, **self._scope())
        return self.documents(graph, k=k)

    # ------------------------------------------------------------------ views
    def documents(self, graph: EvidenceGraph, *, k: int | None = None) -> list[Document]:
        """The Documents of an already built evidence graph (``k`` overrides ``self.k``)."""
        k = check_k(k) if k is not None else self.k
        if not graph.facts:
            return []
        facts = [Document(id=f.id, page_content=f.text, metadata=fact_metadata(f)) for f in ranked_facts(graph)]
        if self.mode == "facts":
            docs = facts
            text = paths_text(graph)
            if text:
                docs = [*facts, Document(page_content=text, metadata=paths_metadata(graph))]
        else:
            whole = Document(page_content=graph.to_text(), metadata=graph_metadata(graph))
            docs = [whole] if k is None else [whole, *facts]
        return docs if k is None else docs[:k]

    def _scope(self) -> dict[str, Any]:
        return scope_kwargs(self.user_id, self.agent_id, self.session_id)
