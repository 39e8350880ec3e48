"""A LlamaIndex query engine over AriadneMem, and AriadneMem as a chat ``Memory`` block.

    python examples/llama_index_query_engine.py [--store DIR] [--embedder minilm|hash] [--offline]

1. ``RetrieverQueryEngine`` over ``AriadneMemRetriever``: each question retrieves ONE node,
   the connected evidence graph (dated facts, update edges, reasoning paths), and the LLM
   answers from it.
2. ``Memory.from_defaults(memory_blocks=[AriadneMemBlock(...)])``: the chat memory puts the
   evidence graph for the latest user message into the system message.

Runs offline out of the box with LlamaIndex's ``MockLLM`` (it echoes its prompt, so the
"answer" shows what the LLM would read). With ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` set
and ``llama-index-llms-openai`` installed, a real model answers (``OPENAI_MODEL``, default
``gpt-4o-mini``). The memory is seeded with the project's demo dialogue on first use.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

from llama_index.core.llms import LLM, ChatMessage, MockLLM
from llama_index.core.memory import Memory
from llama_index.core.query_engine import RetrieverQueryEngine

from ariadnemem_core import AriadneMemory, HashEmbedder, MiniLMEmbedder
from ariadnemem_core.demo import QUESTIONS, demo_turns
from ariadnemem_integrations.llama_index import AriadneMemBlock, AriadneMemRetriever

USER_ID = "maya"


def make_llm(offline: bool) -> tuple[LLM, bool]:
    """The LLM and whether it is the offline MockLLM."""
    if not offline and (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
        try:
            from llama_index.llms.openai import OpenAI  # type: ignore[import-not-found]
        except ImportError:
            print("llama-index-llms-openai is not installed: using MockLLM.")
        else:
            return OpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini")), False
    return MockLLM(), True


def indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="memory directory (default: a temporary one)")
    parser.add_argument("--embedder", choices=["minilm", "hash"], default="minilm",
                        help="minilm: the shipped offline model (default); hash: fast bag of words")
    parser.add_argument("--offline", action="store_true", help="always use MockLLM")
    args = parser.parse_args(argv)

    # Without --store, a scratch directory that is removed on the way out.
    with tempfile.TemporaryDirectory(prefix="ariadnemem-llama-") as scratch:
        store = args.store or scratch
        embedder = HashEmbedder() if args.embedder == "hash" else MiniLMEmbedder()
        llm, mock = make_llm(args.offline)
        with AriadneMemory(store, embedder=embedder) as memory:
            if not memory.entries(USER_ID):
                memory.add(demo_turns(), user_id=USER_ID)
                memory.flush()
            print(f"Memory at {memory.path}: {len(memory.entries(USER_ID))} entries for {USER_ID!r}")
            print(f"LLM: {type(llm).__name__}")

            # 1. query engine over the retriever
            engine = RetrieverQueryEngine.from_args(AriadneMemRetriever(memory, USER_ID), llm=llm)
            for question in QUESTIONS:
                response = engine.query(question)
                print(f"\nQ: {question}")
                for hit in response.source_nodes:
                    meta: dict[str, Any] = hit.node.metadata
                    fast = f", fast path: {meta['fast_path']}" if meta.get("fast_path") else ""
                    print(f"Evidence ({meta['num_facts']} facts{fast}, score {hit.score:.2f}):")
                    print(indent(hit.node.get_content()))
                answer = str(response)
                if mock:
                    answer = f"[MockLLM echoes its {len(answer)}-character prompt; the evidence above is in it]"
                print(f"A: {answer}")

            # 2. the memory block in a chat Memory
            block = AriadneMemBlock(memory=memory, user_id=USER_ID)
            chat = Memory.from_defaults(token_limit=4000, memory_blocks=[block])
            chat.put(ChatMessage(role="user", content="Hi! I'm packing for my trip."))
            messages = chat.get(input="What is Maya's phone number?")
            print("\nChat memory with the AriadneMem block, for 'What is Maya's phone number?':")
            for m in messages:
                print(indent(f"{m.role.value}: {m.content}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
