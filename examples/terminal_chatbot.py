"""A terminal chatbot that remembers across restarts (plain AriadneMem, no framework).

    python examples/terminal_chatbot.py [--store DIR] [--user ID] [--name NAME] [--embedder minilm|hash]

Reads one message per line from stdin (interactive or piped). For each message it
recalls the evidence graph from long-term memory and prints the recalled facts, replies
from them with ``memory.answer`` (one LLM call when ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``
is set, else an extractive, clearly labelled answer: offline by default), then stores
the message as a Turn so a later run can recall it. Commands: ``/stats``, ``/forget``
(erase this user's memory), ``/quit`` (or end of input).

The memory lives in ``--store`` (default ``$ARIADNEMEM_CHATBOT_STORE`` or
``~/.ariadnemem/chatbot``): run the script twice with the same store, tell it something
the first time and ask about it the second time.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from ariadnemem_core import AriadneMemory, HashEmbedder, LLMError, MiniLMEmbedder, Turn

#: Most recalled facts printed per message (the answer reads the whole evidence graph).
SHOWN_FACTS = 5


def default_store() -> Path:
    return Path(os.environ.get("ARIADNEMEM_CHATBOT_STORE") or Path.home() / ".ariadnemem" / "chatbot")


def command(memory: AriadneMemory, text: str, user: str) -> bool:
    """Run ``/stats`` or ``/forget``; False when ``text`` is neither."""
    if text == "/stats":
        print(f"Stats: {memory.stats(user)}")
        return True
    if text == "/forget":
        print(f"Forgot {memory.forget(user)} memories.")
        return True
    return False


def reply(memory: AriadneMemory, text: str, user: str) -> None:
    """Print what the memory recalls for ``text`` and the answer drawn from it."""
    try:
        answer = memory.answer(text, user_id=user)
        graph, said = answer.graph, answer.text
    except LLMError as exc:  # the configured LLM failed after its retries
        graph, said = memory.retrieve(text, user_id=user), f"(the LLM failed: {exc})"
    facts = sorted(graph.facts, key=lambda f: -f.score)[:SHOWN_FACTS]
    if facts:
        print(f"Recalled ({len(graph.facts)} facts):")
        for f in facts:
            day = f.timestamp.strftime("%Y-%m-%d") if f.timestamp else "undated"
            print(f"  - {day}: {f.text}")
        print(f"Bot: {said}")
    else:
        print("Recalled nothing yet.")
        print("Bot: I'll remember that.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=None,
                        help="memory directory, kept between runs (default: $ARIADNEMEM_CHATBOT_STORE "
                             "or ~/.ariadnemem/chatbot)")
    parser.add_argument("--user", default="me", help="memory scope (user id)")
    parser.add_argument("--name", default="User", help="your speaker name in the stored turns")
    parser.add_argument("--embedder", choices=["minilm", "hash"], default="minilm",
                        help="minilm: the shipped offline model (default); hash: fast bag of words. "
                             "Keep the same choice for a store.")
    args = parser.parse_args(argv)

    store = args.store or default_store()
    interactive = sys.stdin.isatty()
    embedder = HashEmbedder() if args.embedder == "hash" else MiniLMEmbedder()
    with AriadneMemory(store, embedder=embedder) as memory:
        known = len(memory.entries(args.user))
        llm = memory.llm
        print(f"Memory at {memory.path}: {known} memories for {args.user!r}. "
              f"LLM: {llm.model if llm is not None else 'none (extractive answers, offline)'}")
        if interactive:
            print("Type a message (/stats, /forget, /quit).")
        while True:
            if interactive:
                print("> ", end="", flush=True)
            line = sys.stdin.readline()
            if not line:
                break
            text = line.strip()
            if not text:
                continue
            if text == "/quit":
                break
            if command(memory, text, args.user):
                continue
            if not interactive:
                print(f"> {text}")
            reply(memory, text, args.user)
            memory.add(Turn(args.name, text, datetime.now(UTC)), user_id=args.user)
            memory.flush()  # extract now: the next message (or the next run) can recall it
        print(f"Bye. {len(memory.entries(args.user))} memories stored for {args.user!r}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
