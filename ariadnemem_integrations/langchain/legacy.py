"""Legacy path: ``AriadneMemConversationMemory`` for ``langchain-classic`` chains.

LangChain 1.x removed ``langchain.memory``; the old ``BaseMemory`` lives on in
``langchain_classic.base_memory`` (``pip install "ariadnemem[langchain-classic]"``). Use
this only for chains written against that interface; new code should use
:class:`~ariadnemem_integrations.langchain.AriadneMemMiddleware` with ``create_agent``
(or the retriever/tools).

* ``load_memory_variables(inputs)`` -> ``{memory_key: graph.to_text()}`` for the input
  text ("" when nothing matches);
* ``save_context(inputs, outputs)`` stores the input and output texts as two Turns
  (``human_prefix`` / ``ai_prefix`` speakers) and flushes;
* ``clear()`` forgets the whole scope (``memory.forget(user_id, ...)``): every stored
  memory of that user, not only this chain's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .._compat import require

require("langchain_classic.base_memory", "langchain-classic", "AriadneMemConversationMemory")

from langchain_classic.base_memory import BaseMemory  # noqa: E402
from langchain_classic.memory.utils import get_prompt_input_key  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

from ariadnemem_core import AriadneMemory, Turn  # noqa: E402

from .._compat import astore_turns, make_turns, said, scope_kwargs, store_turns  # noqa: E402


class AriadneMemConversationMemory(BaseMemory):
    """A ``langchain_classic`` ``BaseMemory`` backed by an AriadneMemory (legacy)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: AriadneMemory = Field(description="The AriadneMemory to read and write.")
    user_id: str = "default"
    agent_id: str | None = None
    session_id: str | None = None
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    human_prefix: str = "Human"
    ai_prefix: str = "AI"
    flush: bool = True

    @property
    def memory_variables(self) -> list[str]:
        return [self.memory_key]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        query = self._input(inputs)
        if not query:
            return {self.memory_key: ""}
        return {self.memory_key: _text(self.memory.retrieve(query, **self._scope()))}

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        query = self._input(inputs)
        if not query:
            return {self.memory_key: ""}
        return {self.memory_key: _text(await self.memory.aretrieve(query, **self._scope()))}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        store_turns(self.memory, self._turns(inputs, outputs), flush=self.flush, **self._scope())

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        await astore_turns(self.memory, self._turns(inputs, outputs), flush=self.flush, **self._scope())

    def clear(self) -> None:
        self.memory.forget(self.user_id, agent_id=self.agent_id, session_id=self.session_id)

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)

    # ------------------------------------------------------------------ helpers
    def _scope(self) -> dict[str, Any]:
        return scope_kwargs(self.user_id, self.agent_id, self.session_id)

    def _input(self, inputs: dict[str, Any]) -> str:
        key = self.input_key or get_prompt_input_key(inputs, self.memory_variables)
        return said(inputs[key])

    def _turns(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> list[Turn]:
        if self.output_key:
            output_key = self.output_key
        elif len(outputs) == 1:
            output_key = next(iter(outputs))
        else:
            raise ValueError(f"One output key expected, got {sorted(outputs)}; set output_key")
        pairs = [(self.human_prefix, self._input(inputs)), (self.ai_prefix, said(outputs[output_key]))]
        meta = {"source": "langchain_classic"}
        return [t for speaker, text in pairs if text for t in make_turns(speaker, text, metadata=meta)]


def _text(graph: Any) -> str:
    return graph.to_text() if graph.facts else ""


__all__ = ["AriadneMemConversationMemory"]
