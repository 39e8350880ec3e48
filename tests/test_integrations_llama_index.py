"""LlamaIndex adapters against a real AriadneMemory on disk (HashEmbedder for speed).

Covers: the retriever's node views and ``k``, sync/async parity, a ``RetrieverQueryEngine``
with ``MockLLM``, the memory block inside ``Memory`` (recall, waterfall storage, the
installed priority/truncation behaviour) and ``atruncate`` itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.memory import Memory, StaticMemoryBlock
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from llama_index.core.storage.chat_store.base_db import MessageStatus

from ariadnemem_core import AriadneMemory, EvidenceGraph, Fact, HashEmbedder
from ariadnemem_core.demo import demo_turns
from ariadnemem_core.tokens import count_tokens
from ariadnemem_integrations.llama_index import AriadneMemBlock, AriadneMemRetriever

USER = "maya"
PHONE_Q = "What is Maya's phone number?"
LISBON_Q = "Where is Maya staying in Lisbon, and who suggested it?"
QUESTIONS = (PHONE_Q, LISBON_Q, "When is the kickoff meeting?", "How many times did Maya go climbing?")
FACT_LINE = re.compile(r"^\[F\d+\]", re.MULTILINE)


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AriadneMemory]:
    mem = AriadneMemory(tmp_path_factory.mktemp("li") / "store", embedder=HashEmbedder())
    mem.add(demo_turns(), user_id=USER)
    mem.flush()
    yield mem
    mem.close()


# ---------------------------------------------------------------------- retriever
def test_graph_mode_single_node(memory: AriadneMemory) -> None:
    retriever = AriadneMemRetriever(memory, USER)
    assert isinstance(retriever, BaseRetriever)
    graph = memory.retrieve(LISBON_Q, user_id=USER)
    [hit] = retriever.retrieve(LISBON_Q)
    assert isinstance(hit, NodeWithScore) and isinstance(hit.node, TextNode)
    assert hit.node.text == graph.to_text()
    assert hit.score == pytest.approx(max(f.score for f in graph.facts))
    meta = hit.node.metadata
    assert meta["fact_ids"] == [f.id for f in graph.facts] and meta["paths"] == graph.paths
    assert set(meta["source_turn_ids"]) == graph.source_turn_ids
    assert all(isinstance(t, str) for t in meta["timestamps"].values())
    # the LLM reads the graph, not the bookkeeping
    assert hit.node.get_content(metadata_mode=MetadataMode.LLM) == graph.to_text()
    assert retriever.retrieve(PHONE_Q)[0].node.metadata["fast_path"] == "attribute"


def test_facts_mode_nodes(memory: AriadneMemory) -> None:
    graph = memory.retrieve(LISBON_Q, user_id=USER)
    *facts, paths = AriadneMemRetriever(memory, USER, mode="facts").retrieve(LISBON_Q)
    assert [n.node.node_id for n in facts] == [f.id for f in sorted(graph.facts, key=lambda f: -f.score)]
    for n in facts:
        fact = graph.fact(n.node.node_id)
        assert n.node.text == fact.text and n.score == pytest.approx(fact.score)
        assert n.node.metadata["source_turn_ids"] == fact.source_turn_ids
        llm_view = n.node.get_content(metadata_mode=MetadataMode.LLM)
        assert fact.timestamp.isoformat() in llm_view and fact.id not in llm_view
    assert paths.score is None and paths.node.metadata["kind"] == "paths"
    assert len(paths.node.text.splitlines()) == len(graph.paths)


def test_k_and_validation(memory: AriadneMemory) -> None:
    assert len(AriadneMemRetriever(memory, USER, k=1).retrieve(LISBON_Q)) == 1
    whole, *facts = AriadneMemRetriever(memory, USER, k=3).retrieve(LISBON_Q)
    assert whole.node.metadata["kind"] == "evidence_graph" and len(facts) == 2
    assert len(AriadneMemRetriever(memory, USER, mode="facts", k=4).retrieve(LISBON_Q)) == 4
    assert AriadneMemRetriever(memory, "stranger").retrieve(LISBON_Q) == []
    with pytest.raises(ValueError):
        AriadneMemRetriever(memory, USER, mode="chunks")
    with pytest.raises(ValueError):
        AriadneMemRetriever(memory, USER, k=0)


@pytest.mark.parametrize("mode", ["graph", "facts"])
async def test_sync_async_parity(memory: AriadneMemory, mode: str) -> None:
    assert AriadneMemRetriever._aretrieve is not BaseRetriever._aretrieve  # native async
    retriever = AriadneMemRetriever(memory, USER, mode=mode)
    for q in QUESTIONS:
        sync, asyn = retriever.retrieve(q), await retriever.aretrieve(q)
        assert [(n.node.text, n.score, n.node.metadata) for n in sync] == \
               [(n.node.text, n.score, n.node.metadata) for n in asyn]


async def test_query_engine_with_mock_llm(memory: AriadneMemory) -> None:
    engine = RetrieverQueryEngine.from_args(AriadneMemRetriever(memory, USER), llm=MockLLM())
    response = engine.query(PHONE_Q)
    graph_text = memory.retrieve(PHONE_Q, user_id=USER).to_text()
    assert [n.node.text for n in response.source_nodes] == [graph_text]
    assert "555-0142" in str(response)  # MockLLM echoes its prompt, which holds the graph
    aresponse = await engine.aquery(PHONE_Q)
    assert str(aresponse) == str(response)
    assert [n.node.text for n in aresponse.source_nodes] == [graph_text]


# ---------------------------------------------------------------------- memory block
def _blocks(system_text: str, names: tuple[str, ...] = ("ariadnemem", "keep", "trim", "notes")) -> dict[str, str]:
    """The rendered blocks: Memory's template writes ``<name>content</name>`` inside ``<memory>``."""
    found = {n: re.search(rf"<{n}>(.*?)</{n}>", system_text, re.DOTALL) for n in names}
    return {n: m.group(1).strip() for n, m in found.items() if m}


async def test_block_recalls_latest_user_message(memory: AriadneMemory) -> None:
    block = AriadneMemBlock(memory=memory, user_id=USER)
    assert block.priority == 0 and block.name == "ariadnemem"
    chat = Memory.from_defaults(token_limit=4000, memory_blocks=[block])
    await chat.aput(ChatMessage(role="user", content="Hi, I'm planning my trip."))
    messages = await chat.aget(input=LISBON_Q)
    assert messages[0].role == "system"
    assert _blocks(messages[0].content)["ariadnemem"] == memory.retrieve(LISBON_Q, user_id=USER).to_text()
    # no user message, or nothing stored for the scope: the block stays out
    assert await block.aget(messages=[ChatMessage(role="assistant", content="hello")]) == ""
    stranger = AriadneMemBlock(memory=memory, user_id="stranger")
    assert await stranger.aget(messages=[ChatMessage(role="user", content=LISBON_Q)]) == ""


async def test_block_aput_maps_roles(tmp_path: Path) -> None:
    with AriadneMemory(tmp_path / "block", embedder=HashEmbedder()) as mem:
        block = AriadneMemBlock(memory=mem, user_id="ravi", speakers={"user": "Ravi", "assistant": "Bot"})
        await block.aput([
            ChatMessage(role="system", content="You are helpful."),
            ChatMessage(role="user", content="My cat Biscuit is afraid of thunderstorms."),
            ChatMessage(role="assistant", content="Poor Biscuit! Storms can be scary."),
            ChatMessage(role="tool", content="{}"),
            ChatMessage(role="user", content="   "),
        ])
        assert mem.stats("ravi")["turns_seen"] == 2
        assert {e.speaker for e in mem.entries("ravi")} == {"Ravi", "Bot"}
        with pytest.raises(ValueError, match="speaker names must not be empty"):
            AriadneMemBlock(memory=mem, speakers={"user": " ", "assistant": "Bot"})
        text = await block.aget(messages=[ChatMessage(role="user", content="What is Biscuit afraid of?")])
        assert "thunderstorms" in text


async def test_block_keeps_a_batch_with_an_oversize_message(tmp_path: Path) -> None:
    """LlamaIndex hands a block the messages leaving its window at once: one longer than
    the text limit is stored in parts, and the rest of the batch with it (it failed the
    whole batch, so none of them was kept)."""
    from ariadnemem_core.models import MAX_TEXT_CHARS

    # Long lines, few sentences: the split is under test, not the extraction of 20,000 of them.
    log = "\n".join(f"line{i} " + "ok " * 60 for i in range(MAX_TEXT_CHARS // 190 + 200))
    with AriadneMemory(tmp_path / "block", embedder=HashEmbedder()) as mem:
        block = AriadneMemBlock(memory=mem, user_id="ravi", speakers={"user": "Ravi", "assistant": "Bot"})
        await block.aput([ChatMessage(role="user", content="My cat Biscuit is afraid of thunderstorms."),
                          ChatMessage(role="user", content="Here is my log: " + log),
                          ChatMessage(role="assistant", content="Poor Biscuit! Storms can be scary.")])
        assert mem.stats("ravi")["turns_seen"] == 4  # the log in two parts
        stored = " ".join(e.text for e in mem.entries("ravi"))
        assert "Biscuit" in stored and "Storms" in stored
        assert "line0 " in stored and log.split()[-2] in stored  # both ends of the log


async def test_block_receives_messages_ejected_from_short_term_memory(tmp_path: Path) -> None:
    with AriadneMemory(tmp_path / "waterfall", embedder=HashEmbedder()) as mem:
        block = AriadneMemBlock(memory=mem, user_id="ravi")
        chat = Memory.from_defaults(token_limit=120, chat_history_token_ratio=0.5, token_flush_size=30,
                                    memory_blocks=[block])
        await chat.aput_messages([
            ChatMessage(role="user", content="My cat Biscuit is afraid of thunderstorms."),
            ChatMessage(role="assistant", content="Noted, Biscuit dislikes storms."),
        ])
        assert mem.stats("ravi")["turns_seen"] == 0  # still in the short-term FIFO
        for i in range(6):
            await chat.aput_messages([
                ChatMessage(role="user", content=f"Filler message number {i} about the weather and nothing else."),
                ChatMessage(role="assistant", content=f"Understood, filler reply {i}."),
            ])
        assert mem.stats("ravi")["turns_seen"] >= 2  # ejected messages reached long-term memory
        active = await chat.aget_all(status=MessageStatus.ACTIVE)
        assert not any("Biscuit" in (m.content or "") for m in active)
        messages = await chat.aget(input="What is my cat afraid of?")
        assert "thunderstorms" in messages[0].content


def test_block_sync_memory_wrappers(memory: AriadneMemory) -> None:
    chat = Memory.from_defaults(token_limit=4000, memory_blocks=[AriadneMemBlock(memory=memory, user_id=USER)])
    messages = chat.get(input=PHONE_Q)  # Memory's sync wrapper runs the async block
    assert "555-0142" in messages[0].content


async def test_priority_zero_survives_priority_one_is_truncated(memory: AriadneMemory) -> None:
    keep = AriadneMemBlock(name="keep", memory=memory, user_id=USER, priority=0)
    trim = AriadneMemBlock(name="trim", memory=memory, user_id=USER, priority=1)
    full = memory.retrieve(LISBON_Q, user_id=USER).to_text()
    tokens = count_tokens(full)
    history = ChatMessage(role="user", content="Hello there.")
    probe = Memory.from_defaults(token_limit=10_000)
    history_tokens = probe._estimate_token_count(history)
    assert probe._estimate_token_count(full) == tokens  # Memory counts tokens as we do (cl100k)

    # 40 tokens over the limit: the priority-1 block loses its least relevant facts only
    chat = Memory.from_defaults(token_limit=history_tokens + 2 * tokens - 40, memory_blocks=[keep, trim],
                                chat_history=[history], token_flush_size=1)
    blocks = _blocks((await chat.aget(input=LISBON_Q))[0].content)
    assert blocks["keep"] == full
    assert 0 < len(FACT_LINE.findall(blocks["trim"])) < len(FACT_LINE.findall(full))
    assert count_tokens(blocks["trim"]) <= tokens - 40
    graph = memory.retrieve(LISBON_Q, user_id=USER)
    best = max(graph.facts, key=lambda f: f.score)
    assert f"[{best.label}]" in blocks["trim"]  # the most relevant fact stays

    # far over the limit: the priority-1 block is dropped, the priority-0 block still survives
    chat = Memory.from_defaults(token_limit=history_tokens + tokens + 5, memory_blocks=[keep, trim],
                                chat_history=[history], token_flush_size=1)
    blocks = _blocks((await chat.aget(input=LISBON_Q))[0].content)
    assert blocks == {"keep": full}


async def test_priority_one_static_block_goes_before_priority_two(memory: AriadneMemory) -> None:
    static = StaticMemoryBlock(name="notes", static_content="Some static notes. " * 30, priority=1)
    ours = AriadneMemBlock(memory=memory, user_id=USER, priority=2)
    phone = memory.retrieve(PHONE_Q, user_id=USER).to_text()
    chat = Memory.from_defaults(token_limit=count_tokens(phone) + 40, memory_blocks=[static, ours],
                                token_flush_size=1)
    blocks = _blocks((await chat.aget(input=PHONE_Q))[0].content)
    assert blocks == {"ariadnemem": phone}  # ascending priority: 1 is truncated first


async def test_atruncate(memory: AriadneMemory) -> None:
    block = AriadneMemBlock(memory=memory, user_id=USER)
    content = await block.aget(messages=[ChatMessage(role="user", content=LISBON_Q)])
    tokens = count_tokens(content)
    short = await block.atruncate(content, 60)
    assert short is not None and count_tokens(short) <= tokens - 60
    kept = set(FACT_LINE.findall(short))
    assert kept < set(FACT_LINE.findall(content))
    for line in short.splitlines():  # every remaining fact line is verbatim from the full graph
        if FACT_LINE.match(line):
            assert line in content.splitlines()
    shorter = await block.atruncate(short, 30)  # truncating a truncated text works too
    assert shorter is not None and count_tokens(shorter) <= count_tokens(short) - 30
    assert await block.atruncate(content, 0) == content
    assert await block.atruncate(content, tokens) is None  # nothing would be left: drop the block
    assert await block.atruncate("not produced by this block", 5) is None
    assert await block.atruncate([], 5) is None  # what Memory passes for a block without content


def test_truncation_keeps_newer_states() -> None:
    t0 = datetime(2024, 3, 4, tzinfo=UTC)

    def fact(fid: str, score: float, minutes: int, superseded_by: str | None = None) -> Fact:
        return Fact(fid, f"text {fid}", t0 + timedelta(minutes=minutes), [f"t-{fid}"], score, "terminal",
                    label=f"F{minutes}", superseded_by=superseded_by)

    # old -> new update chain where the OLD state scores high and the new one low
    graph = EvidenceGraph("q", facts=[fact("old", 0.9, 1, "new"), fact("mid", 0.5, 2), fact("new", 0.1, 3)],
                          edges=[("old", "new", "update")])
    order = graph.truncation_order()
    assert order == [{"mid"}, {"old"}, {"new"}]  # "new" is never dropped before "old"


async def test_a_message_of_control_characters_is_skipped_not_the_batch(tmp_path: Path) -> None:
    """A message that says nothing once control characters are removed is skipped: the
    other messages flushed out of the short-term window with it still reach the memory."""
    with AriadneMemory(tmp_path / "control", embedder=HashEmbedder()) as mem:
        block = AriadneMemBlock(memory=mem, user_id="ravi")
        await block.aput([ChatMessage(role="user", content="My gym locker is number 31."),
                          ChatMessage(role="user", content="\x01\x00"),
                          ChatMessage(role="assistant", content="Locker 31, noted.")])
        assert mem.stats("ravi")["turns_seen"] == 2
        assert any("31" in e.text for e in mem.entries("ravi"))
        assert await block.aget(messages=[ChatMessage(role="user", content="\x02")]) == ""
