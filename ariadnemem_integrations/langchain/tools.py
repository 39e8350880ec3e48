"""Agent tools over an AriadneMemory: ``search_memory`` and ``add_to_memory``.

``search_memory(query)`` returns the serialized evidence graph (``graph.to_text()``) from
:class:`AriadneMemRetriever`; ``add_to_memory(text, speaker="user")`` stores the text as
one Turn (stamped now; a text over the library's limit as consecutive parts) and flushes,
so the next search sees it. Both have native async implementations (``memory.aretrieve``
/ ``memory.aadd``). An invalid argument (a blank query, an empty speaker) is the tool's
reply, for the model to correct, not an exception that ends the agent's run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from ariadnemem_core import AriadneMemory, InvalidInputError, Turn

from .._compat import astore_turns, make_turn, make_turns, scope_kwargs, store_turns
from .retriever import AriadneMemRetriever

#: What ``search_memory`` returns when no stored fact matches.
NO_MEMORY = "No stored memory matches this query."

SEARCH_DESCRIPTION = (
    "Search the long-term memory of past conversations. Input: a question or keywords. "
    "Returns the relevant remembered facts (dated, oldest first), how they were updated and "
    "how they connect."
)
ADD_DESCRIPTION = (
    "Store a fact or an utterance in long-term memory so it can be recalled in later "
    "conversations. Input: the text to remember and who said it (default 'user')."
)


class SearchMemoryInput(BaseModel):
    query: str = Field(description="What to look up in memory (a question or keywords).")


class AddMemoryInput(BaseModel):
    text: str = Field(description="The fact or utterance to remember, as a full sentence.")
    speaker: str = Field(default="user", description="Who said it or whom it is about.")


def create_memory_tools(
    memory: AriadneMemory,
    user_id: str = "default",
    *,
    agent_id: str | None = None,
    session_id: str | None = None,
    search_name: str = "search_memory",
    add_name: str = "add_to_memory",
    flush: bool = True,
) -> list[BaseTool]:
    """``[search_tool, add_tool]`` bound to one memory scope.

    ``flush=True`` extracts the stored turn right away (retrievable by the next search);
    with ``False`` turns wait for a full window, ``memory.flush()`` or ``memory.close()``.
    """
    retriever = AriadneMemRetriever(memory=memory, user_id=user_id, agent_id=agent_id,
                                    session_id=session_id, mode="graph")
    scope = scope_kwargs(user_id, agent_id, session_id)

    # The arguments are the model's: a blank query or an empty speaker goes back to it as
    # the tool's answer (``ToolException`` with ``handle_tool_error``) for it to correct,
    # rather than ending the whole agent run.
    def search(query: str) -> str:
        with _to_the_model():
            docs = retriever.invoke(query)
        return docs[0].page_content if docs else NO_MEMORY

    async def asearch(query: str) -> str:
        with _to_the_model():
            docs = await retriever.ainvoke(query)
        return docs[0].page_content if docs else NO_MEMORY

    def add(text: str, speaker: str = "user") -> str:
        with _to_the_model():
            # A text over the library's limit is stored as consecutive parts, as the
            # middleware stores a message.
            store_turns(memory, _turns(speaker, text), flush=flush, **scope)
        return _stored(text, speaker)

    async def aadd(text: str, speaker: str = "user") -> str:
        with _to_the_model():
            await astore_turns(memory, _turns(speaker, text), flush=flush, **scope)
        return _stored(text, speaker)

    search_tool = StructuredTool.from_function(
        func=search, coroutine=asearch, name=search_name, description=SEARCH_DESCRIPTION,
        args_schema=SearchMemoryInput, handle_tool_error=True,
    )
    add_tool = StructuredTool.from_function(
        func=add, coroutine=aadd, name=add_name, description=ADD_DESCRIPTION, args_schema=AddMemoryInput,
        handle_tool_error=True,
    )
    return [search_tool, add_tool]


def _turns(speaker: str, text: str) -> list[Turn]:
    """The text as turns; an empty one is built anyway, so its validation says why (split
    into parts it would be none, and "stored" with nothing stored)."""
    return make_turns(speaker, text) or [make_turn(speaker, text)]


@contextmanager
def _to_the_model() -> Iterator[None]:
    """An invalid argument as a :class:`ToolException` (its message is the tool's reply)."""
    try:
        yield
    except InvalidInputError as exc:
        raise ToolException(f"Error: {exc}") from None


#: Characters of a stored text the add tool's reply repeats: the model wrote the text; a
#: pasted log repeated whole would fill its context a second time.
ECHO_CHARS = 300


def _stored(text: str, speaker: str) -> str:
    if len(text) <= ECHO_CHARS:
        return f"Stored in memory ({speaker}): {text}"
    return f"Stored in memory ({speaker}, {len(text):,} characters): {text[:ECHO_CHARS]}..."


__all__ = ["NO_MEMORY", "AddMemoryInput", "SearchMemoryInput", "create_memory_tools"]
