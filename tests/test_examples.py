"""The examples run end to end, offline, as a user would run them (subprocesses).

Each run gets a fresh store under a temporary directory, the fast HashEmbedder
(``--embedder hash``) and an environment without ``OPENAI_*`` variables, so the scripted /
mock LLMs are used. The LangChain and LlamaIndex examples start in the background when the
module starts (they are independent), while the chatbot test runs its two sessions.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer

from ariadnemem_core.demo import demo_turns

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update({"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **extra})
    return env


def _start(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / name), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=REPO, env=env or _env(),
    )


def _finish(name: str, proc: subprocess.Popen, stdin: str = "") -> str:
    try:
        out, err = proc.communicate(stdin, timeout=240)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    return out


def run_example(name: str, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> str:
    return _finish(name, _start(name, *args, env=env), stdin)


@pytest.fixture(scope="module")
def background(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, subprocess.Popen]]:
    """The framework examples, started together; each test collects its own."""
    base = tmp_path_factory.mktemp("examples")
    procs = {name: _start(name, "--store", str(base / name), "--embedder", "hash")
             for name in ("langchain_agent.py", "llama_index_query_engine.py")}
    yield procs
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.fixture(autouse=True, scope="module")
def _start_background_first(background: dict[str, subprocess.Popen]) -> None:
    """Launch the background runs before the first test of the module."""


@pytest.mark.slow
def test_terminal_chatbot_remembers_across_restarts(tmp_path: Path) -> None:
    env = _env(ARIADNEMEM_CHATBOT_STORE=str(tmp_path / "chatbot"))
    first = run_example("terminal_chatbot.py", "--embedder", "hash", env=env,
                        stdin="My favourite colour is teal.\nMy dog Pickle likes the colour teal too.\n")
    assert "0 memories for 'me'. LLM: none (extractive answers, offline)" in first
    assert "Recalled nothing yet." in first
    # the second line shares words with the first (hashing embedder): it is recalled; an
    # unrelated line would stay under the relevance floor and recall nothing
    assert "Bot: [extractive, no LLM configured]" in first and "teal" in first  # offline answer
    assert "Bye. 2 memories stored for 'me'." in first

    # second session, same store: this time with an OpenAI-compatible endpoint configured
    with FakeOpenAIServer() as server:
        server.answer = "teal"
        llm_env = {**env, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test-key",
                   "ARIADNEMEM_LLM_TIMEOUT": "20"}
        second = run_example("terminal_chatbot.py", "--embedder", "hash", env=llm_env,
                             stdin="What is my favourite colour?\n/quit\nThis line is never read.\n")
        assert server.count == 1  # one LLM call for the one question
        prompt = " ".join(str(m.get("content")) for m in server.requests[0]["messages"])
        assert "teal" in prompt  # the recalled evidence was in the prompt
    lines = second.splitlines()
    assert "2 memories for 'me'" in lines[0] and "LLM: none" not in lines[0]
    recalled = lines.index("> What is my favourite colour?") + 1
    assert lines[recalled].startswith("Recalled (")
    assert lines[recalled + 1].startswith("  - ") and "teal" in lines[recalled + 1]  # best fact first
    assert "Bot: teal" in lines
    assert "never read" not in second


def test_langchain_agent_example(background: dict[str, subprocess.Popen]) -> None:
    out = _finish("langchain_agent.py", background["langchain_agent.py"])
    lines = out.splitlines()
    assert "Model: ScriptedChatModel" in lines
    assert "User: Who suggested the hotel in Lisbon?" in lines
    answers = [line for line in lines if line.startswith("Assistant: ")]
    assert len(answers) == 3
    assert answers[0].startswith("Assistant: From memory: ") and "Alfama" in answers[0]
    assert any(line.startswith("[memory]") and "tools used: add_to_memory" in line for line in lines)
    # the fact stored through the tool is recalled by the middleware on the next turn
    assert answers[2].startswith("Assistant: From memory: ") and "555-0199" in answers[2]
    # the demo dialogue + the tool's turn + three exchanges (user + assistant) stored by the middleware
    assert f"Stored turns for 'maya': {len(demo_turns()) + 1 + 3 * 2}" in lines


def test_llama_index_example(background: dict[str, subprocess.Popen]) -> None:
    out = _finish("llama_index_query_engine.py", background["llama_index_query_engine.py"])
    assert "LLM: MockLLM" in out
    assert "Q: What is Maya's phone number?" in out
    assert "fast path: attribute" in out and "fast path: counter" in out
    phone = out.split("Q: What is Maya's phone number?")[1].split("\nQ: ")[0]
    assert "Evidence (" in phone and "555-0142" in phone
    assert "A: [MockLLM echoes its" in out
    # the memory block put the evidence into the chat memory's system message
    block = out.split("Chat memory with the AriadneMem block")[1]
    assert "system: <memory>" in block and "<ariadnemem>" in block and "555-0142" in block


def test_chatbot_help() -> None:
    # argparse help exits before any model or store is opened
    out = run_example("terminal_chatbot.py", "--help")
    assert "--store" in out and "--embedder" in out and "ARIADNEMEM_CHATBOT_STORE" in out
