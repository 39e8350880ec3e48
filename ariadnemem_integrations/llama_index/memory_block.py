"""``AriadneMemBlock``: AriadneMem as a LlamaIndex ``Memory`` block.

``Memory.from_defaults(memory_blocks=[AriadneMemBlock(memory=mem, user_id="alice")])``.

* ``_aget(messages)`` returns the serialized evidence graph (``graph.to_text()``) for the
  latest user message, or "" (the block is skipped) when nothing matches.
* ``_aput(messages)`` stores user and assistant messages as Turns (role -> speaker via
  ``speakers``; other roles and empty texts are skipped) and flushes. Note how LlamaIndex
  calls it: ``Memory`` hands a block only the messages *ejected* from its short-term FIFO
  (when the chat history passes ``token_limit * chat_history_token_ratio``), so recent
  messages reach long-term memory when they leave the window. Call ``block.aput(messages)``
  yourself to store them earlier.
* ``atruncate(content, tokens)``: when ``Memory`` is over its ``token_limit`` it truncates
  blocks with ``priority >= 1`` in ascending priority order (``priority=0``, the default,
  is never truncated, whatever the field description says). This block then drops the
  least relevant facts (a fact goes with the older states it supersedes) until about
  ``tokens`` cl100k tokens are saved, and returns the shorter graph text; None (the block
  is dropped) when nothing would be left.
"""

from __future__ import annotations

from typing import Any

from cachetools import LRUCache
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
from llama_index.core.memory import BaseMemoryBlock

from ariadnemem_core import EvidenceGraph

from .._compat import astore_turns, make_turns, said, scope_kwargs

#: Graphs remembered by their text, so ``atruncate`` can drop facts instead of characters.
_GRAPH_CACHE = 16


class AriadneMemBlock(BaseMemoryBlock[str]):
    """Long-term memory block: the AriadneMem evidence graph for the latest user message."""

    name: str = Field(default="ariadnemem", description="The name of the memory block.")
    description: str | None = Field(
        default="Long-term memory: facts from past conversations relevant to the latest user message.",
        description="A description of the memory block.",
    )
    memory: Any = Field(description="The AriadneMemory to read and write.", exclude=True)
    user_id: str = "default"
    agent_id: str | None = None
    session_id: str | None = Field(
        default=None, description="AriadneMem session scope (not the LlamaIndex Memory session id).")
    speakers: dict[str, str] = Field(
        default_factory=lambda: {"user": "user", "assistant": "assistant"},
        description="Message role -> speaker name of the stored Turn; other roles are not stored.",
    )
    flush: bool = Field(default=True, description="Extract stored turns right away.")

    @field_validator("speakers")
    @classmethod
    def _named_speakers(cls, speakers: dict[str, str]) -> dict[str, str]:
        # An empty name dropped every message of its role without a word.
        blank = sorted(role for role, name in speakers.items() if not str(name).strip())
        if blank:
            raise ValueError(f"speaker names must not be empty (roles {blank}); leave a role out to not store it")
        return speakers

    _graphs: LRUCache[str, EvidenceGraph] = PrivateAttr(default_factory=lambda: LRUCache(maxsize=_GRAPH_CACHE))

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = _latest_user_text(messages or [])
        if not query:
            return ""
        graph = await self.memory.aretrieve(query, **self._scope())
        if not graph.facts:
            return ""
        return self._remember(graph)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        turns = []
        for m in messages:
            speaker = self.speakers.get(str(getattr(m.role, "value", m.role)))
            text = said(m.content)
            if speaker and text:
                turns += make_turns(speaker, text, metadata={"source": "llama_index"})
        await astore_turns(self.memory, turns, flush=self.flush, **self._scope())

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        graph = self._graphs.get(content) if isinstance(content, str) and content else None
        if graph is None or tokens_to_truncate <= 0:
            return None if graph is None else content
        target = graph.token_count() - tokens_to_truncate  # content is graph.to_text()
        drop: set[str] = set()
        for group in graph.truncation_order():
            drop |= group
            if len(drop) >= len(graph.facts):
                return None
            smaller = graph.without(drop)
            if smaller.token_count() <= target:
                return self._remember(smaller)
        return None

    def _remember(self, graph: EvidenceGraph) -> str:
        text = graph.to_text()
        self._graphs[text] = graph  # the least recently used graph leaves when full
        return text

    def _scope(self) -> dict[str, Any]:
        return scope_kwargs(self.user_id, self.agent_id, self.session_id)


def _latest_user_text(messages: list[ChatMessage]) -> str:
    for m in reversed(messages):
        if str(getattr(m.role, "value", m.role)) == "user":
            return said(m.content)
    return ""


__all__ = ["AriadneMemBlock"]
