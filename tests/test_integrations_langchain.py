"""LangChain adapters against a real AriadneMemory on disk (HashEmbedder for speed).

Covers: the langchain-tests standard retriever suite (both modes), the Document views,
``k``, sync/async parity, the memory tools, the agent middleware through
``create_agent`` (invoke and ainvoke), the legacy ``BaseMemory`` shim, and the
ImportErrors raised without the extras.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import Field

from ariadnemem_core import AriadneMemory, HashEmbedder
from ariadnemem_core.demo import demo_turns
from ariadnemem_integrations.langchain import AriadneMemRetriever, create_memory_tools
from ariadnemem_integrations.langchain.tools import NO_MEMORY

REPO = Path(__file__).resolve().parents[1]
USER = "maya"
PHONE_Q = "What is Maya's phone number?"
LISBON_Q = "Where is Maya staying in Lisbon, and who suggested it?"


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AriadneMemory]:
    """The shipped demo dialogue (21 turns) in a memory on disk; read-only for USER."""
    mem = AriadneMemory(tmp_path_factory.mktemp("lc") / "store", embedder=HashEmbedder())
    mem.add(demo_turns(), user_id=USER)
    mem.flush()
    yield mem
    mem.close()


# ---------------------------------------------------------------------- standard suite
class TestRetrieverStandardGraph(RetrieversIntegrationTests):
    """langchain-tests' retriever suite; mode="graph" with k = graph doc + facts."""

    mode = "graph"

    @pytest.fixture(autouse=True)
    def _bind_memory(self, memory: AriadneMemory) -> None:
        self._memory = memory

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return AriadneMemRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": self._memory, "user_id": USER, "mode": self.mode}

    @property
    def retriever_query_example(self) -> str:
        return LISBON_Q


class TestRetrieverStandardFacts(TestRetrieverStandardGraph):
    mode = "facts"


# ---------------------------------------------------------------------- views
def test_graph_mode_one_document_with_metadata(memory: AriadneMemory) -> None:
    graph = memory.retrieve(LISBON_Q, user_id=USER)
    [doc] = AriadneMemRetriever(memory=memory, user_id=USER).invoke(LISBON_Q)
    assert doc.page_content == graph.to_text()
    meta = doc.metadata
    assert meta["fact_ids"] == [f.id for f in graph.facts]
    assert meta["paths"] == graph.paths and meta["paths"]  # the demo question has reasoning paths
    assert set(meta["source_turn_ids"]) == graph.source_turn_ids
    assert any(t.startswith("2024-03-12#") for t in meta["source_turn_ids"])
    for fid, ts in meta["timestamps"].items():
        assert isinstance(ts, str) and datetime.fromisoformat(ts) == graph.fact(fid).timestamp
    assert meta["fast_path"] is None and meta["query"] == LISBON_Q


def test_graph_mode_fast_path_metadata(memory: AriadneMemory) -> None:
    [doc] = AriadneMemRetriever(memory=memory, user_id=USER).invoke(PHONE_Q)
    assert doc.metadata["fast_path"] == "attribute"
    assert "555-0142" in doc.page_content


def test_facts_mode_one_document_per_fact_then_paths(memory: AriadneMemory) -> None:
    graph = memory.retrieve(LISBON_Q, user_id=USER)
    docs = AriadneMemRetriever(memory=memory, user_id=USER, mode="facts").invoke(LISBON_Q)
    assert graph.paths, "the demo's multi-hop question should mine reasoning paths"
    *facts, paths = docs
    assert len(facts) == len(graph.facts)
    assert {d.id for d in facts} == {f.id for f in graph.facts}
    scores = [d.metadata["score"] for d in facts]
    assert scores == sorted(scores, reverse=True)
    for d in facts:
        fact = graph.fact(d.id)
        assert d.page_content == fact.text
        assert d.metadata["id"] == fact.id and d.metadata["role"] == fact.role
        assert d.metadata["source_turn_ids"] == fact.source_turn_ids
        assert d.metadata["timestamp"] == fact.timestamp.isoformat()
    assert paths.metadata["kind"] == "paths" and paths.metadata["paths"] == graph.paths
    assert len(paths.page_content.splitlines()) == len(graph.paths)


def test_k_in_graph_mode_is_graph_then_best_facts(memory: AriadneMemory) -> None:
    retriever = AriadneMemRetriever(memory=memory, user_id=USER, k=3)
    whole, *facts = retriever.invoke(LISBON_Q)
    assert whole.metadata["kind"] == "evidence_graph" and len(facts) == 2
    graph = memory.retrieve(LISBON_Q, user_id=USER)
    best = sorted(graph.facts, key=lambda f: -f.score)[:2]
    assert [d.id for d in facts] == [f.id for f in best]
    # the invoke kwarg wins over the constructor field
    assert len(retriever.invoke(LISBON_Q, k=1)) == 1
    assert len(retriever.invoke(LISBON_Q, k=5)) == 5


def test_invalid_arguments(memory: AriadneMemory) -> None:
    for bad_k in (0, "3", True, 2.0):  # as invoke(k=...) refuses them: no quiet coercion
        with pytest.raises(ValueError):
            AriadneMemRetriever(memory=memory, k=bad_k)
    with pytest.raises(ValueError):
        AriadneMemRetriever(memory=memory, mode="chunks")
    with pytest.raises(ValueError):
        AriadneMemRetriever(memory=memory, user_id=USER).invoke(LISBON_Q, k=-1)


def test_other_user_sees_nothing(memory: AriadneMemory) -> None:
    assert AriadneMemRetriever(memory=memory, user_id="stranger").invoke(LISBON_Q) == []
    assert AriadneMemRetriever(memory=memory, user_id="stranger", mode="facts").invoke(LISBON_Q) == []


@pytest.mark.parametrize("mode", ["graph", "facts"])
async def test_sync_async_parity(memory: AriadneMemory, mode: str) -> None:
    # native async path (memory.aretrieve), not the base class' executor fallback
    assert AriadneMemRetriever._aget_relevant_documents is not BaseRetriever._aget_relevant_documents
    retriever = AriadneMemRetriever(memory=memory, user_id=USER, mode=mode)
    for q in (LISBON_Q, PHONE_Q, "How many times did Maya go climbing?"):
        sync, asyn = retriever.invoke(q), await retriever.ainvoke(q)
        assert [_doc_key(d) for d in sync] == [_doc_key(d) for d in asyn]
        assert len(await retriever.ainvoke(q, k=1)) == 1


def _doc_key(d: Document) -> tuple:
    return d.id, d.page_content, d.metadata


# ---------------------------------------------------------------------- tools
def test_memory_tools_search_and_add(tmp_path: Path) -> None:
    with AriadneMemory(tmp_path / "tools", embedder=HashEmbedder()) as mem:
        search, add = create_memory_tools(mem, "sam")
        assert (search.name, add.name) == ("search_memory", "add_to_memory")
        assert search.invoke({"query": "What is Sam's dog called?"}) == NO_MEMORY
        out = add.invoke({"text": "My dog is called Pickle and she loves carrots.", "speaker": "Sam"})
        assert "Pickle" in out
        text = search.invoke({"query": "What is Sam's dog called?"})
        assert "Pickle" in text
        assert text == mem.retrieve("What is Sam's dog called?", user_id="sam").to_text()
        assert mem.retrieve("What is Sam's dog called?", user_id="other").facts == []
        assert add.args_schema.model_json_schema()["properties"]["speaker"]["default"] == "user"


async def test_memory_tools_async_parity(tmp_path: Path) -> None:
    with AriadneMemory(tmp_path / "tools", embedder=HashEmbedder()) as mem:
        search, add = create_memory_tools(mem, "sam")
        assert await search.ainvoke({"query": "Where does Sam swim?"}) == NO_MEMORY
        await add.ainvoke({"text": "I swim at the Northside pool every Tuesday."})
        [entry] = mem.entries("sam")
        assert entry.speaker == "user" and "Northside pool" in entry.text
        q = {"query": "Where does the user swim?"}
        assert await search.ainvoke(q) == search.invoke(q)
        assert "Northside pool" in search.invoke(q)


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_memory_tools_answer_a_bad_argument_to_the_model(tmp_path: Path, use_async: bool) -> None:
    """The model chooses the tools' arguments: a blank text or query or an empty speaker is
    the tool's reply, for the model to correct, in an agent's run (it raised out of the
    tool and ended the run); a text over the limit is stored in parts, and the reply does
    not repeat all of it."""
    import asyncio

    from langchain.agents import create_agent
    from langchain_core.messages import ToolMessage

    from ariadnemem_core import MAX_TEXT_CHARS

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
            return self

    log = "word " * (MAX_TEXT_CHARS // 5 + 1_000)
    calls = [("add_to_memory", {"text": "   "}, "invalid text"), ("add_to_memory", {"text": ""}, "invalid text"),
             ("add_to_memory", {"text": "Maya likes tea.", "speaker": ""}, "invalid speaker"),
             ("search_memory", {"query": " "}, "invalid query"),
             ("add_to_memory", {"text": log}, "Stored in memory")]
    with AriadneMemory(tmp_path / "tools", embedder=HashEmbedder()) as mem:
        for name, args, said in calls:
            model = Scripted(messages=iter([AIMessage("", tool_calls=[{"name": name, "args": args, "id": "c1"}]),
                                            AIMessage("done")]))
            agent = create_agent(model, tools=create_memory_tools(mem, "maya"))
            request = {"messages": [HumanMessage("remember this / look it up")]}
            out = asyncio.run(agent.ainvoke(request)) if use_async else agent.invoke(request)
            [reply] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
            assert said in reply.content and len(reply.content) < 1_000, (name, args)
            assert out["messages"][-1].content == "done"
        assert mem.stats("maya")["turns_seen"] == 2  # only the log, in two parts


# ---------------------------------------------------------------------- middleware
class CapturingFakeChatModel(GenericFakeChatModel):
    """langchain-core's fake chat model, recording what it was sent; bind_tools -> self."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> CapturingFakeChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _fake(*replies: AIMessage | str) -> CapturingFakeChatModel:
    return CapturingFakeChatModel(messages=iter(replies), seen=[])


def _agent(model: CapturingFakeChatModel, middleware: Any, **kw: Any) -> Any:
    from langchain.agents import create_agent

    return create_agent(model, tools=[], middleware=[middleware], **kw)


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
async def test_middleware_recalls_then_stores(tmp_path: Path, use_async: bool) -> None:
    from ariadnemem_integrations.langchain import AriadneMemMiddleware

    with AriadneMemory(tmp_path / "mw", embedder=HashEmbedder()) as mem:
        mem.add(demo_turns(), user_id=USER)
        mem.flush()
        middleware = AriadneMemMiddleware(mem, user_id=USER, user_speaker="Maya", ai_speaker="Assistant")
        model = _fake("Noted: Biscuit is scared of thunderstorms.", "Biscuit is afraid of thunderstorms.")
        agent = _agent(model, middleware, system_prompt="You are a concise assistant.")

        async def run(text: str) -> dict:
            payload = {"messages": [HumanMessage(text)]}
            return await agent.ainvoke(payload) if use_async else agent.invoke(payload)

        before = mem.stats(USER)["turns_seen"]
        result = await run("What is my phone number? Also, my cat Biscuit is afraid of thunderstorms.")
        # the model saw the recalled evidence graph in its system message, after the prompt
        system = model.seen[0][0]
        assert isinstance(system, SystemMessage)
        assert system.text.startswith("You are a concise assistant.")
        assert "MEMORY (quoted data" in system.text and "555-0142" in system.text
        assert middleware.last_graph is not None and middleware.last_graph.to_text() in system.text
        # the exchange (user message + final AI message) was stored and is retrievable
        assert mem.stats(USER)["turns_seen"] == before + 2
        human, ai = result["messages"][0], result["messages"][-1]
        provenance = {t for e in mem.entries(USER) for t in e.source_turn_ids}
        assert human.id in provenance
        seen = mem.stats(USER)
        assert seen["gate_kept"] + seen["gate_dropped"] == seen["turns_seen"]  # both turns processed
        assert ai.text.startswith("Noted")

        await run("What is my cat afraid of?")
        assert "thunderstorms" in model.seen[1][0].text  # recalled from the stored exchange
        assert mem.stats(USER)["turns_seen"] == before + 4


def test_middleware_checks_its_scope_when_made(tmp_path: Path) -> None:
    from ariadnemem_core import InvalidInputError
    from ariadnemem_integrations.langchain import AriadneMemMiddleware

    with AriadneMemory(tmp_path / "mw", embedder=HashEmbedder()) as mem:
        for bad in ({"user_id": None}, {"user_id": ""}, {"agent_id": 5}):
            with pytest.raises(InvalidInputError):
                AriadneMemMiddleware(mem, **bad)  # it failed at the first exchange, after the answer


def test_middleware_keeps_an_oversize_message(tmp_path: Path) -> None:
    """A message longer than the text limit (a pasted log) is stored in parts under its
    message id, the answer with it; it ended the agent's run with an error and kept nothing."""
    from ariadnemem_core import MAX_TEXT_CHARS
    from ariadnemem_integrations.langchain import AriadneMemMiddleware

    # Long lines, few sentences: the split is under test, not the extraction of 20,000 of them.
    log = "\n".join(f"line{i} " + "ok " * 60 for i in range(MAX_TEXT_CHARS // 190 + 200))
    with AriadneMemory(tmp_path / "mw", embedder=HashEmbedder()) as mem:
        middleware = AriadneMemMiddleware(mem, user_id=USER, user_speaker="Maya", ai_speaker="Assistant")
        result = _agent(_fake("Got the log."), middleware).invoke(
            {"messages": [HumanMessage("My build log: " + log)]})
        human = result["messages"][0]
        assert mem.stats(USER)["turns_seen"] == 3  # the log in two parts, and the answer
        provenance = {t for e in mem.entries(USER) for t in e.source_turn_ids}
        assert {human.id, f"{human.id}#2"} <= provenance
        assert any("Got the log" in e.text for e in mem.entries(USER))


async def test_middleware_sync_async_same_context(tmp_path: Path) -> None:
    from ariadnemem_integrations.langchain import AriadneMemMiddleware

    with AriadneMemory(tmp_path / "mw", embedder=HashEmbedder()) as mem:
        mem.add(demo_turns(), user_id=USER)
        mem.flush()
        middleware = AriadneMemMiddleware(mem, user_id=USER, remember=False)
        sync_model, async_model = _fake("ok"), _fake("ok")
        _agent(sync_model, middleware).invoke({"messages": [HumanMessage(LISBON_Q)]})
        await _agent(async_model, middleware).ainvoke({"messages": [HumanMessage(LISBON_Q)]})
        assert sync_model.seen[0][0].text == async_model.seen[0][0].text
        assert sync_model.seen[0][0].text.endswith(mem.retrieve(LISBON_Q, user_id=USER).to_text())
        assert mem.stats(USER)["turns_seen"] == len(demo_turns())  # remember=False stores nothing


def test_middleware_no_match_leaves_request_alone_and_tools(tmp_path: Path) -> None:
    from ariadnemem_integrations.langchain import AriadneMemMiddleware

    with AriadneMemory(tmp_path / "mw", embedder=HashEmbedder()) as mem:
        middleware = AriadneMemMiddleware(mem, user_id="new", with_tools=True)
        assert [t.name for t in middleware.tools] == ["search_memory", "add_to_memory"]
        call = {"name": "add_to_memory", "args": {"text": "My locker code is 4417.", "speaker": "user"},
                "id": "call-1", "type": "tool_call"}
        model = _fake(AIMessage("", tool_calls=[call]), "Saved your locker code.")
        result = _agent(model, middleware).invoke({"messages": [HumanMessage("Remember my locker code 4417")]})
        assert not any(isinstance(m, SystemMessage) for m in model.seen[0])  # empty memory: no context
        assert result["messages"][-1].text == "Saved your locker code."
        # the tool stored its turn, then after_agent stored the exchange (the tool-call AI
        # message with no text is skipped: the final answer is stored)
        assert mem.stats("new")["turns_seen"] == 3
        assert "4417" in mem.retrieve("What is the locker code?", user_id="new").to_text()
        # the second model call (after the tool) saw the freshly stored fact
        assert "4417" in model.seen[1][0].text


# ---------------------------------------------------------------------- legacy BaseMemory
def test_legacy_conversation_memory(memory: AriadneMemory) -> None:
    from langchain_classic.base_memory import BaseMemory

    from ariadnemem_integrations.langchain.legacy import AriadneMemConversationMemory

    legacy = AriadneMemConversationMemory(memory=memory, user_id="legacy")
    assert isinstance(legacy, BaseMemory) and legacy.memory_variables == ["history"]
    assert legacy.load_memory_variables({"input": "Where does Ravi work?"}) == {"history": ""}
    legacy.save_context({"input": "I work at the aquarium on Pier 9."}, {"output": "Sounds fun!"})
    loaded = legacy.load_memory_variables({"input": "Where does Ravi work?"})
    assert "aquarium on Pier 9" in loaded["history"]
    assert loaded["history"] == memory.retrieve("Where does Ravi work?", user_id="legacy").to_text()
    assert {e.speaker for e in memory.entries("legacy")} <= {"Human", "AI"}
    legacy.clear()
    assert memory.entries("legacy") == []
    assert memory.entries(USER)  # clear() forgets only its own scope


async def test_legacy_async_parity(memory: AriadneMemory) -> None:
    from ariadnemem_integrations.langchain.legacy import AriadneMemConversationMemory

    legacy = AriadneMemConversationMemory(memory=memory, user_id="legacy-async", memory_key="memories",
                                          input_key="question", human_prefix="Ravi")
    await legacy.asave_context({"question": "My sister Priya lives in Oslo.", "stop": None},
                               {"answer": "Noted."})
    inputs = {"question": "Where does Priya live?"}
    assert await legacy.aload_memory_variables(inputs) == legacy.load_memory_variables(inputs)
    assert "Oslo" in legacy.load_memory_variables(inputs)["memories"]
    with pytest.raises(ValueError):
        legacy.save_context({"question": "x"}, {"a": "1", "b": "2"})
    await legacy.aclear()
    assert memory.entries("legacy-async") == []


# ---------------------------------------------------------------------- import errors
IMPORT_CHECKS = textwrap.dedent(
    """
    import importlib, sys

    def fresh(blocked, target, attr=None):
        saved = {k: v for k, v in sys.modules.items() if k.startswith("ariadnemem_integrations")}
        for k in saved:
            del sys.modules[k]
        old = {b: sys.modules.get(b) for b in blocked}
        for b in blocked:
            sys.modules[b] = None
        try:
            mod = importlib.import_module(target)
            if attr:
                getattr(mod, attr)
            return "imported"
        except ImportError as exc:
            return str(exc)
        finally:
            for b, m in old.items():
                if m is None:
                    sys.modules.pop(b, None)
                else:
                    sys.modules[b] = m

    print(fresh(["langchain_core", "langchain_core.retrievers"], "ariadnemem_integrations.langchain"))
    print(fresh(["langchain", "langchain.agents", "langchain.agents.middleware"],
                "ariadnemem_integrations.langchain", "AriadneMemMiddleware"))
    print(fresh(["langchain_classic", "langchain_classic.base_memory"],
                "ariadnemem_integrations.langchain.legacy"))
    print(fresh(["llama_index", "llama_index.core"], "ariadnemem_integrations.llama_index"))
    print(fresh([], "ariadnemem_integrations.llama_index"))
    """
)


def test_import_errors_name_the_extra() -> None:
    out = subprocess.run([sys.executable, "-c", IMPORT_CHECKS], cwd=REPO, capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert 'pip install "ariadnemem[langchain]"' in out[0]
    assert 'pip install "ariadnemem[langchain]"' in out[1] and "AriadneMemMiddleware" in out[1]
    assert 'pip install "ariadnemem[langchain-classic]"' in out[2]
    assert 'pip install "ariadnemem[llama-index]"' in out[3]
    assert out[4] == "imported"


def test_legacy_memory_skips_what_says_nothing(memory: AriadneMemory) -> None:
    """An input of control characters or None is skipped (not stored as "None", not an
    error that loses the answer beside it)."""
    from ariadnemem_integrations.langchain.legacy import AriadneMemConversationMemory

    legacy = AriadneMemConversationMemory(memory=memory, user_id="legacy-empty")
    assert legacy.load_memory_variables({"input": "\x00\x01"}) == {"history": ""}
    legacy.save_context({"input": "\x00"}, {"output": "Zed's locker code is 5512."})
    legacy.save_context({"input": None}, {"output": None})
    texts = [e.text for e in memory.entries("legacy-empty")]
    assert any("5512" in t for t in texts) and not any("None" in t for t in texts)
    legacy.clear()
