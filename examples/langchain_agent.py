"""A LangChain 1.x agent with AriadneMem long-term memory: middleware + memory tools.

    python examples/langchain_agent.py [--store DIR] [--embedder minilm|hash] [--offline]

* ``AriadneMemMiddleware`` recalls the evidence graph for each user message before the
  model is called (added to the system message) and stores every exchange afterwards.
* ``create_memory_tools`` gives the agent ``search_memory`` and ``add_to_memory``.

Runs offline out of the box: without ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` (or with
``--offline``) a small scripted chat model stands in for the LLM. It answers with the
remembered fact that shares the most words with the question (read from the memory the
middleware put in its system message) and calls ``add_to_memory`` when asked to remember
something. With the variables set and ``langchain-openai`` installed, the agent uses
``ChatOpenAI`` (model from ``OPENAI_MODEL``, default ``gpt-4o-mini``).

The memory is seeded with the project's demo dialogue (Maya and Leo) on first use; pass
``--store`` to keep it between runs. Needs ``pip install "ariadnemem[langchain]"``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from ariadnemem_core import AriadneMemory, HashEmbedder, MiniLMEmbedder
from ariadnemem_core.demo import demo_turns
from ariadnemem_integrations.langchain import AriadneMemMiddleware, create_memory_tools

USER_ID = "maya"
CONVERSATION = (
    "Who suggested the hotel in Lisbon?",
    "Please remember that my new phone number is 555-0199.",
    "What is my phone number now?",
)
STOPWORDS = set("a an and are did do does for from how i in is it me my now of on the to was what when where "
                "which who why will with you your".split())
FACT = re.compile(r'^\[F\d+\](?P<mark> \((?:superseded by [^)]*|latest)\))? (?P<text>".*")$')


class ScriptedChatModel(BaseChatModel):
    """An offline stand-in for an LLM (deterministic; no network)."""

    @property
    def _llm_type(self) -> str:
        return "scripted-offline"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("Done, I saved that to your long-term memory.")
        question = next(m.text for m in reversed(messages) if isinstance(m, HumanMessage))
        found = re.search(r"remember that (.+)", question, re.IGNORECASE)
        if found:
            call = {"name": "add_to_memory", "args": {"text": found.group(1), "speaker": "Maya"},
                    "id": f"call-{len(messages)}", "type": "tool_call"}
            return AIMessage("", tool_calls=[call])
        system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
        fact = best_fact(question, system)
        return AIMessage(f"From memory: {fact}" if fact else "I don't remember anything about that.")


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+(?:-[0-9]+)?", text.lower()) if w not in STOPWORDS}


def best_fact(question: str, memory_text: str) -> str | None:
    """The current (not superseded) fact sharing the most words with the question; the
    newest one wins ties (facts are listed oldest first)."""
    best, best_overlap = None, 0
    for line in memory_text.splitlines():
        m = FACT.match(line.strip())
        if not m or "superseded" in (m.group("mark") or ""):
            continue
        text = json.loads(m.group("text"))
        overlap = len(words(question) & words(text))
        if overlap and overlap >= best_overlap:
            best, best_overlap = text, overlap
    return best


def chat_model(offline: bool) -> BaseChatModel:
    if not offline and (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
        try:
            from langchain_openai import ChatOpenAI  # type: ignore[import-not-found]
        except ImportError:
            print("langchain-openai is not installed: using the scripted offline model.")
        else:
            return ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    return ScriptedChatModel()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="memory directory (default: a temporary one)")
    parser.add_argument("--embedder", choices=["minilm", "hash"], default="minilm",
                        help="minilm: the shipped offline model (default); hash: fast bag of words")
    parser.add_argument("--offline", action="store_true", help="always use the scripted model")
    args = parser.parse_args(argv)

    # Without --store, a scratch directory that is removed on the way out.
    with tempfile.TemporaryDirectory(prefix="ariadnemem-agent-") as scratch:
        store = args.store or scratch
        embedder = HashEmbedder() if args.embedder == "hash" else MiniLMEmbedder()
        with AriadneMemory(store, embedder=embedder) as memory:
            if not memory.entries(USER_ID):
                memory.add(demo_turns(), user_id=USER_ID)
                memory.flush()
            print(f"Memory at {memory.path}: {len(memory.entries(USER_ID))} entries for {USER_ID!r}")

            middleware = AriadneMemMiddleware(memory, user_id=USER_ID, user_speaker="Maya", ai_speaker="Assistant")
            model = chat_model(args.offline)
            print(f"Model: {type(model).__name__}")
            agent = create_agent(
                model,
                tools=create_memory_tools(memory, USER_ID),
                middleware=[middleware],
                system_prompt="You are Maya's assistant. Answer briefly.",
            )
            for text in CONVERSATION:
                print(f"\nUser: {text}")
                result = agent.invoke({"messages": [HumanMessage(text)]})
                graph = middleware.last_graph
                recalled = len(graph.facts) if graph is not None else 0
                tools_used = [m.name for m in result["messages"] if isinstance(m, ToolMessage)]
                print(f"[memory] {recalled} facts recalled" + (f"; tools used: {', '.join(tools_used)}" if tools_used
                                                               else ""))
                print(f"Assistant: {result['messages'][-1].text}")
            print(f"\nStored turns for {USER_ID!r}: {memory.stats(USER_ID)['turns_seen']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
