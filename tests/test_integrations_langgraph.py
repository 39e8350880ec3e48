"""The LangGraph store adapter: inside a real ``create_agent`` graph whose tools use
``runtime.store``, and side by side with LangGraph's reference ``InMemoryStore`` where
the two should behave alike (and where they differ by design)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from ariadnemem_core import AriadneMemory, HashEmbedder
from ariadnemem_integrations.langgraph import AriadneMemStore


class ToolCallingFake(GenericFakeChatModel):
    """langchain-core's scripted chat model; it cannot bind tools, so bind_tools -> self."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:
        return self


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[AriadneMemory]:
    with AriadneMemory(tmp_path / "lg", embedder=HashEmbedder()) as mem:
        yield mem


@pytest.fixture
def store(memory: AriadneMemory) -> AriadneMemStore:
    return AriadneMemStore(memory, prefix=("memories",))


def _call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
async def test_create_agent_tools_use_runtime_store(store: AriadneMemStore, memory: AriadneMemory,
                                                    use_async: bool) -> None:
    @tool
    def remember(note: str, runtime: ToolRuntime) -> str:
        """Store a note about the user."""
        runtime.store.put(("memories", "maya"), "note-1", {"content": note})
        return "stored"

    @tool
    def recall(query: str, runtime: ToolRuntime) -> str:
        """Search notes about the user."""
        items = runtime.store.search(("memories", "maya"), query=query, limit=3)
        return "\n".join(i.value["content"] for i in items) or "nothing"

    model = ToolCallingFake(messages=iter([
        _call("remember", "c1", note="Maya's passport number is X1234567."),
        _call("recall", "c2", query="What is Maya's passport number?"),
        AIMessage(content="It is X1234567."),
    ]))
    agent = create_agent(model, tools=[remember, recall], store=store)
    request = {"messages": [HumanMessage("Remember my passport number X1234567, then look it up.")]}
    result = await agent.ainvoke(request) if use_async else agent.invoke(request)

    tool_msgs = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert tool_msgs[0].content == "stored"
    assert "X1234567" in tool_msgs[1].content  # recalled through runtime.store.search
    assert result["messages"][-1].content == "It is X1234567."
    [entry] = memory.entries("maya")  # the put became an extracted memory entry of user maya
    assert "X1234567" in entry.text and entry.source_turn_ids == ["langgraph:note-1"]


# ---------------------------------------------------------------------- same semantics
@pytest.fixture(params=["in_memory", "ariadnemem"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "in_memory":
        yield InMemoryStore()
        return
    with AriadneMemory(tmp_path / "s", embedder=HashEmbedder()) as mem:
        yield AriadneMemStore(mem)


NOTES = {"k1": "Maya adopted a grey cat named Biscuit.", "k2": "Maya works at the aquarium on Pier 9.",
         "k3": "Maya's sister lives in Oslo."}


def _fill(s: Any) -> None:
    for key, text in NOTES.items():
        s.put(("maya",), key, {"content": text, "topic": "pets" if key == "k1" else "life"})
    s.put(("maya", "travel"), "k4", {"content": "Maya booked a flight to Lisbon for June."})
    s.put(("ben",), "k1", {"content": "Ben plays the cello in a quartet."})


def _content(item: Any) -> str:
    return item.value["content"]


def test_get_put_delete_like_in_memory_store(any_store: Any) -> None:
    _fill(any_store)
    assert any_store.get(("maya",), "missing") is None
    item = any_store.get(("maya",), "k1")
    assert item.key == "k1" and item.namespace == ("maya",) and "Biscuit" in _content(item)
    assert item.created_at <= item.updated_at
    assert "cello" in _content(any_store.get(("ben",), "k1"))  # same key, other namespace: other item
    assert any_store.get(("maya",), "k4") is None  # exact namespace, not a prefix
    any_store.put(("maya",), "k1", {"content": "Maya adopted a black cat named Pepper."})  # replace
    assert "Pepper" in _content(any_store.get(("maya",), "k1"))
    assert "Biscuit" not in _content(any_store.get(("maya",), "k1"))
    any_store.delete(("maya",), "k1")
    assert any_store.get(("maya",), "k1") is None
    assert any_store.get(("ben",), "k1") is not None
    any_store.delete(("maya",), "never-there")  # deleting a missing key is not an error


def test_search_without_query_lists_a_prefix(any_store: Any) -> None:
    _fill(any_store)
    keys = {(i.namespace, i.key) for i in any_store.search(("maya",), limit=10)}
    assert keys == {(("maya",), "k1"), (("maya",), "k2"), (("maya",), "k3"), (("maya", "travel"), "k4")}
    assert len(any_store.search(("maya",), limit=2)) == 2
    assert len(any_store.search(("maya",), limit=2, offset=3)) == 1
    assert {i.key for i in any_store.search(("maya", "travel"))} == {"k4"}
    assert [i.key for i in any_store.search(("maya",), filter={"topic": "pets"})] == (
        ["k1"] if isinstance(any_store, InMemoryStore) else [])  # filters see the *stored* value
    if isinstance(any_store, AriadneMemStore):
        assert [i.key for i in any_store.search(("maya",), filter={"put_value": {"topic": "pets"}})] == ["k1"]


def test_search_with_query_stays_in_the_namespace(any_store: Any) -> None:
    _fill(any_store)
    hits = any_store.search(("maya",), query="Which instrument does Ben play?", limit=5)
    assert all(h.namespace[0] == "maya" for h in hits)
    assert all("cello" not in _content(h) for h in hits)


def test_list_namespaces_like_in_memory_store(any_store: Any) -> None:
    _fill(any_store)
    assert any_store.list_namespaces() == [("ben",), ("maya",), ("maya", "travel")]
    assert any_store.list_namespaces(prefix=("maya",)) == [("maya",), ("maya", "travel")]
    assert any_store.list_namespaces(suffix=("travel",)) == [("maya", "travel")]
    assert any_store.list_namespaces(max_depth=1) == [("ben",), ("maya",)]
    assert any_store.list_namespaces(limit=1, offset=1) == [("maya",)]


def test_namespace_validation_like_in_memory_store(any_store: Any) -> None:
    for bad in [(), ("langgraph", "x"), ("a.b",), ("",)]:
        with pytest.raises(InvalidNamespaceError):
            any_store.put(bad, "k", {"content": "Something worth keeping about Maya."})
    with pytest.raises(NotImplementedError):
        any_store.put(("maya",), "k", {"content": "Maya likes tea."}, ttl=5)


async def test_batch_and_abatch(any_store: Any) -> None:
    put = PutOp(("maya",), "k9", {"content": "Maya's locker code is 4417."})
    reads = [GetOp(("maya",), "k9"), SearchOp(("maya",), query="locker code", limit=1), ListNamespacesOp()]
    # Reads see the store as it was before the batch. (Not list_namespaces: InMemoryStore's
    # get creates an empty namespace as a side effect, which its listing then shows.)
    assert any_store.batch([put, *reads])[:3] == [None, None, []]
    for results in (any_store.batch(reads), await any_store.abatch(reads)):
        assert "4417" in _content(results[0])
        assert [i.key for i in results[1]] == ["k9"]
        assert results[2] == [("maya",)]
    await any_store.abatch([PutOp(("maya",), "k9", None)])
    assert await any_store.aget(("maya",), "k9") is None


# ---------------------------------------------------------------------- differences
def test_put_is_extracted_not_stored_verbatim(store: AriadneMemStore, memory: AriadneMemory) -> None:
    ns = ("memories", "maya")
    value = {"kind": "Memory", "content": {"content": "I prefer aisle seats."}}  # LangMem's nested shape
    store.put(ns, "m1", value, index=False)  # index is ignored: everything is indexed
    item = store.get(ns, "m1")
    assert item.value["put_value"] == value  # the original, as provenance
    assert item.value["content"] != "I prefer aisle seats."  # an extracted restatement
    assert "aisle seats" in item.value["content"]
    assert [f["id"] for f in item.value["facts"]] == [e.id for e in memory.entries("maya")]
    # a fact added directly to the memory is an item keyed by its entry id
    memory.add({"speaker": "Maya", "text": "My brother is called Tomas."}, user_id="maya")
    memory.flush()
    direct = next(e for e in memory.entries("maya") if "Tomas" in e.text)
    assert "Tomas" in store.get(ns, direct.id).value["content"]
    store.delete(ns, direct.id)
    assert all("Tomas" not in e.text for e in memory.entries("maya"))


def test_a_put_reads_as_written_not_as_a_transcript_line(store: AriadneMemStore, memory: AriadneMemory) -> None:
    ns = ("memories", "maya")
    store.put(ns, "diet", {"content": "Maya is vegetarian since 2021"})
    store.put(ns, "cake", {"content": "I need a vegan cake for Saturday."})
    store.put(ns, "said", {"content": "My sister Ana lives in Porto.", "speaker": "Maya"})  # an utterance
    shown = [store.get(ns, key).value["content"] for key in ("diet", "cake", "said")]
    assert shown[0] == "Maya is vegetarian since 2021"
    assert shown[1].startswith("The user needs a vegan cake for Saturday")  # first person: the store's speaker
    assert shown[2] == "Maya's sister Ana lives in Porto."
    context = memory.retrieve("Is Maya vegetarian?", user_id="maya").to_text()
    found = [i.value["content"] for i in store.search(ns, query="Is Maya vegetarian?")]
    for text in (context, *found, *(e.text for e in memory.entries("maya"))):
        assert "The user: " not in text and "user: Maya" not in text, text


def test_scopes_and_prefix(store: AriadneMemStore, memory: AriadneMemory) -> None:
    store.put(("memories", "maya", "planner", "s1"), "a", {"content": "Maya's train leaves at 9."})
    store.put(("memories", "maya", "_", "s2"), "b", {"content": "Maya's bus leaves at 7."})
    [a] = memory.entries("maya", agent_id="planner", session_id="s1")
    [b] = memory.entries("maya", session_id="s2")
    assert (a.agent_id, b.agent_id, b.session_id) == ("planner", None, "s2")
    assert store.list_namespaces() == [("memories", "maya", "_", "s2"), ("memories", "maya", "planner", "s1")]
    for bad in [("maya",), ("memories",), ("memories", "maya", "x", "y", "z")]:
        with pytest.raises(InvalidNamespaceError):
            store.get(bad, "a")
    with pytest.raises(InvalidNamespaceError, match="user"):
        store.search(("memories",), query="train")  # retrieval is per user


def test_langmem_tools_in_an_agent(store: AriadneMemStore, memory: AriadneMemory) -> None:
    """LangMem's own manage/search tools (built on BaseStore namespaces) inside create_agent."""
    langmem = pytest.importorskip("langmem")
    ns = ("memories", "{langgraph_user_id}")
    tools = [langmem.create_manage_memory_tool(namespace=ns), langmem.create_search_memory_tool(namespace=ns)]
    config = {"configurable": {"langgraph_user_id": "maya"}}

    def run(*replies: AIMessage) -> list[ToolMessage]:
        agent = create_agent(ToolCallingFake(messages=iter(replies)), tools=tools, store=store)
        out = agent.invoke({"messages": [HumanMessage("go")]}, config=config)
        return [m for m in out["messages"] if isinstance(m, ToolMessage)]

    created, found = run(_call("manage_memory", "c1", content="Maya is vegetarian.", action="create"),
                         _call("search_memory", "c2", query="What does Maya eat?"),
                         AIMessage(content="done"))
    assert created.content.startswith("created memory ")
    key = created.content.split()[-1]
    assert "vegetarian" in found.content and key in found.content
    [entry] = memory.entries("maya")
    assert "vegetarian" in entry.text

    [updated] = run(_call("manage_memory", "c3", content="Maya eats fish again since 2024.", action="update",
                          id=key), AIMessage(content="done"))
    assert "updated memory" in updated.content
    assert [e.text for e in memory.entries("maya") if "vegetarian" in e.text] == []  # replaced, not piled up
    assert "fish" in store.get(("memories", "maya"), key).value["content"]
    [deleted] = run(_call("manage_memory", "c4", action="delete", id=key), AIMessage(content="done"))
    assert "Deleted memory" in deleted.content and memory.entries("maya") == []


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    for name in [m for m in sys.modules if m.startswith(("langgraph.store", "ariadnemem_integrations.langgraph"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "langgraph.store.base", None)
    with pytest.raises(ImportError, match=r"ariadnemem\[langchain\]"):
        import ariadnemem_integrations.langgraph  # noqa: F401


# ---------------------------------------------------------------------- filter semantics
#: Values of items, and filters, where the adapter must agree with InMemoryStore.
FILTER_VALUES = {
    "a": {"kind": "note", "score": 3, "tags": ["x", "y"], "meta": {"lang": "en", "v": 2}},
    "b": {"kind": "note", "score": 5.5, "tags": ["x"], "meta": {"lang": "fr", "v": 1}},
    "c": {"kind": "todo", "score": "4", "tags": ["y", "x"], "meta": {"lang": "en", "v": 3}},
    "d": {"kind": "todo", "score": 0, "tags": [], "meta": {"lang": "en", "v": "2"}},
}
FILTERS = [
    {"kind": "note"},
    {"kind": "note", "score": 3},
    {"kind": "nothing"},
    {"kind": {"$eq": "todo"}},
    {"kind": {"$ne": "todo"}},
    {"score": {"$gt": 3}},
    {"score": {"$gte": 3}},
    {"score": {"$lt": 4}},
    {"score": {"$lte": 4}},
    {"score": {"$gt": 0, "$lt": 5}},
    {"score": {"$gte": "4"}},
    {"tags": ["x", "y"]},
    {"tags": ["x"]},
    {"tags": []},
    {"meta": {"lang": "en"}},
    {"meta": {"lang": "en", "v": 3}},
    {"meta": {"v": {"$gte": 2}}},
    {"kind": "note", "meta": {"lang": "fr"}, "score": {"$ne": 3}},
]


@pytest.mark.parametrize("conditions", FILTERS, ids=[str(f) for f in FILTERS])
def test_filters_match_like_in_memory_store(conditions: dict[str, Any]) -> None:
    from ariadnemem_integrations.langgraph.filters import matches_filter

    reference = InMemoryStore()
    for key, value in FILTER_VALUES.items():
        reference.put(("ns",), key, value)
    expected = sorted(i.key for i in reference.search(("ns",), filter=conditions, limit=10))
    assert sorted(k for k, v in FILTER_VALUES.items() if matches_filter(v, conditions)) == expected


def test_filter_semantics_where_the_reference_raises() -> None:
    from ariadnemem_integrations.langgraph.filters import matches_filter

    # A missing or non-numeric value never meets an order comparison (InMemoryStore raises).
    assert not matches_filter({}, {"score": {"$gt": 1}})
    assert not matches_filter({"score": "high"}, {"score": {"$lte": 10}})
    assert not matches_filter({"score": {"n": 1}}, {"score": {"$lt": 10}})
    assert matches_filter({}, {"score": {"$ne": 1}}) and matches_filter({}, {"score": None})
    assert not matches_filter({"meta": "en"}, {"meta": {"lang": "en"}})  # not a dict: no containment
    assert not matches_filter({"tags": "xy"}, {"tags": ["x", "y"]})
    with pytest.raises(ValueError, match=r"\$in"):
        matches_filter({"kind": "note"}, {"kind": {"$in": ["note"]}})


NAMESPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("a", "x", "c"), ("z", "b"), ("z", "b", "c", "d")]


@pytest.mark.parametrize(("prefix", "suffix"), [
    (("a",), None), (("a", "b"), None), (("a", "*", "c"), None), (("*", "b"), None), (("q",), None),
    (None, ("c",)), (None, ("b", "*")), (None, ("*", "c")), (("a",), ("c",)), (("a", "b", "c", "d", "e"), None),
])
def test_namespace_conditions_match_like_in_memory_store(prefix: tuple[str, ...] | None,
                                                         suffix: tuple[str, ...] | None) -> None:
    from langgraph.store.base import MatchCondition

    from ariadnemem_integrations.langgraph.filters import matches_namespace

    reference = InMemoryStore()
    for ns in NAMESPACES:
        reference.put(ns, "k", {"content": "x"})
    expected = reference.list_namespaces(prefix=prefix, suffix=suffix, limit=100)
    conditions = [MatchCondition("prefix", prefix)] if prefix else []
    conditions += [MatchCondition("suffix", suffix)] if suffix else []
    assert sorted(ns for ns in NAMESPACES if all(matches_namespace(c, ns) for c in conditions)) == sorted(expected)
    with pytest.raises(ValueError, match="match type"):
        matches_namespace(MatchCondition("infix", ("a",)), ("a",))  # type: ignore[arg-type]


def test_concurrent_puts_to_one_key_keep_one_value_and_deletes_are_idempotent(store: AriadneMemStore) -> None:
    """A put reads a key's facts, deletes them and adds the new value: puts from several
    threads take turns, so the key ends with one value (the last write wins), and deleting
    a key several times at once raises nothing."""
    from concurrent.futures import ThreadPoolExecutor

    ns = ("memories", "maya")
    store.put(ns, "city", {"content": "Maya lives in Lisbon."})
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda c: store.put(ns, "city", {"content": f"Maya lives in {c}."}),
                    ("Porto", "Rome", "Oslo", "Paris")))
    item = store.get(ns, "city")
    assert item is not None and len(item.value["facts"]) == 1
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda _: store.delete(ns, "city"), range(4)))
    assert store.get(ns, "city") is None


def test_batch_checks_namespaces_and_values_as_put_does(store: AriadneMemStore, memory: AriadneMemory) -> None:
    """Ops handed to ``batch`` directly meet LangGraph's namespace rules (a label with a
    period, the "langgraph" root), so nothing is written that ``get`` and ``delete`` could
    not reach; a value that is no dict is an input error naming it."""
    from ariadnemem_core import InvalidInputError

    for ns in (("memories", "a.b"), ("langgraph", "maya"), ("memories", "")):
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(ns, "g", {"content": "Maya plays tennis."})])
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp(("memories", "a.b"), "g")])
    with pytest.raises(InvalidInputError, match="value"):
        store.put(("memories", "maya"), "g", "Maya plays tennis.")  # type: ignore[arg-type]
    deep: dict = {"content": "Maya plays tennis."}
    for _ in range(5_000):  # a RecursionError from inside before
        deep = {"content": deep}
    with pytest.raises(InvalidInputError, match="value"):
        store.put(("memories", "maya"), "g", deep)
    with pytest.raises(InvalidInputError, match="filter"):
        store.search(("memories", "maya"), filter=5)  # type: ignore[arg-type]  # an AttributeError before
    assert memory.users() == {}


def test_a_put_cut_short_keeps_the_old_value(store: AriadneMemStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A put replaces a key's facts in one transaction: a process killed while storing the
    new value leaves the old one (it was deleted first, in a commit of its own, and the
    acknowledged value was lost)."""
    from ariadnemem_core.store import records

    ns = ("memories", "maya")
    store.put(ns, "city", {"content": "Maya lives in Porto."})
    real = records.Records._bump

    def killed(self: Any, db: Any, user_id: str, counts: dict[str, int]) -> None:
        if "turns_seen" in counts:
            raise KeyboardInterrupt  # the process dies while the new value is written
        real(self, db, user_id, counts)

    monkeypatch.setattr(records.Records, "_bump", killed)
    with pytest.raises(KeyboardInterrupt):
        store.put(ns, "city", {"content": "Maya moved to Lisbon."})
    monkeypatch.setattr(records.Records, "_bump", real)
    item = store.get(ns, "city")
    assert item is not None and "Porto" in item.value["content"]


def test_reads_never_see_a_put_half_done(store: AriadneMemStore) -> None:
    """A read of a key that always exists, while another thread replaces it, finds a value
    every time (between the delete and the add it found none)."""
    import threading
    import time

    ns = ("memories", "maya")
    store.put(ns, "city", {"content": "Maya lives in Porto."})
    done = threading.Event()

    def writer() -> None:
        for i in range(8):
            store.put(ns, "city", {"content": f"Maya lives in city number {i}."})
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    seen = []
    while not done.is_set() and len(seen) < 200:
        seen.append(store.get(ns, "city"))
        time.sleep(0.01)  # the writer gets its turns
    t.join()
    assert seen and all(item is not None for item in seen)


def test_without_flush_a_replaced_or_deleted_value_never_reaches_the_memory(tmp_path: Path) -> None:
    """With ``flush=False`` a put waits for extraction: a second put of the key replaces
    it, and a delete removes it, before it is ever extracted (a deleted passport number
    came back after close)."""
    ns = ("memories", "maya")
    with AriadneMemory(tmp_path / "nf", embedder=HashEmbedder()) as mem:
        lazy = AriadneMemStore(mem, prefix=("memories",), flush=False)
        lazy.put(ns, "passport", {"content": "Maya's passport number is X1234567."})
        lazy.delete(ns, "passport")
        lazy.put(ns, "city", {"content": "Maya lives in Porto."})
        lazy.put(ns, "city", {"content": "Maya lives in Lisbon."})
    with AriadneMemory(tmp_path / "nf", embedder=HashEmbedder()) as mem:
        lazy = AriadneMemStore(mem, prefix=("memories",), flush=False)
        assert lazy.get(ns, "passport") is None
        city = lazy.get(ns, "city")
        assert city is not None and "Lisbon" in city.value["content"] and "Porto" not in city.value["content"]


def test_a_search_skips_a_fact_deleted_meanwhile(store: AriadneMemStore, memory: AriadneMemory,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process may delete a fact between the retrieval that found it and the read
    of it: the search returns the rest, it does not raise ``NotFoundError``."""
    ns = ("memories", "maya")
    store.put(ns, "a", {"content": "Maya plays tennis on Sundays."})
    store.put(ns, "b", {"content": "Maya plays chess online."})
    retrieve = memory.retrieve

    def racing(*args: Any, **kwargs: Any) -> Any:
        graph = retrieve(*args, **kwargs)
        memory.delete(graph.facts[0].id, user_id="maya")  # gone before the search reads it
        return graph

    monkeypatch.setattr(memory, "retrieve", racing)
    items = store.search(ns, query="what does Maya play?")
    assert len(items) == 1


async def test_async_puts_to_one_key_keep_the_order_they_were_awaited_in(store: AriadneMemStore) -> None:
    """``gather(aput(k, v0), ..., aput(k, v4))`` leaves ``v4``, as ``InMemoryStore`` does
    (the puts ran in worker threads in any order)."""
    import asyncio

    ns = ("memories", "maya")
    for _ in range(3):
        await asyncio.gather(*(store.aput(ns, "city", {"content": f"Maya lives in city number {i}."})
                               for i in range(5)))
        item = await store.aget(ns, "city")
        assert item is not None and "number 4" in item.value["content"]


def test_a_put_replaces_a_value_extracted_while_it_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key's old value may be extracted (by another thread or process) between the
    put's read of the key and its write: the put still replaces it (the facts of the key's
    turn go in the same transaction), instead of leaving both values."""
    ns = ("memories", "maya")
    with AriadneMemory(tmp_path / "race", embedder=HashEmbedder()) as mem:
        lazy = AriadneMemStore(mem, prefix=("memories",), flush=False)
        lazy.put(ns, "city", {"content": "Maya lives in Lisbon."})
        replace = mem.replace

        def extracted_meanwhile(*args: Any, **kwargs: Any) -> int:
            mem.flush()  # another writer extracts the pending value first
            return replace(*args, **kwargs)

        monkeypatch.setattr(mem, "replace", extracted_meanwhile)
        lazy.put(ns, "city", {"content": "Maya lives in Porto."})
        mem.flush()
        item = lazy.get(ns, "city")
        assert item is not None and "Porto" in item.value["content"] and "Lisbon" not in item.value["content"]


def test_a_fact_two_keys_hold_stays_while_one_of_them_does(store: AriadneMemStore) -> None:
    """The same value put under two keys is one fact (the second put MERGEs into the
    first): deleting or replacing one key leaves the other's value (deleting ``a`` lost
    ``b``'s acknowledged value)."""
    ns = ("memories", "maya")
    store.put(ns, "a", {"content": "Maya is vegetarian."})
    store.put(ns, "b", {"content": "Maya is vegetarian."})
    store.delete(ns, "a")
    item = store.get(ns, "b")
    assert item is not None and "vegetarian" in item.value["content"] and store.get(ns, "a") is None
    store.put(ns, "c", {"content": "Maya plays the cello."})
    store.put(ns, "d", {"content": "Maya plays the cello."})
    store.put(ns, "c", {"content": "Maya plays the violin now."})
    kept = store.get(ns, "d")
    assert kept is not None and "cello" in kept.value["content"]


def test_a_key_equal_to_another_keys_fact_id_is_its_own_key(store: AriadneMemStore, memory: AriadneMemory) -> None:
    """Every reader sees a put's fact ids in ``value["facts"]``; a key equal to one of them
    is a key of its own, as in ``InMemoryStore`` (it read, overwrote and deleted the other
    key's value). A fact added with ``memory.add`` (no put key) is still addressed by its id."""
    from datetime import datetime

    from ariadnemem_core import Turn

    ns = ("memories", "maya")
    store.put(ns, "diet", {"content": "Maya is vegetarian since 2021."})
    store.put(ns, "pet", {"content": "Maya has a dog called Pixel."})
    diet_fact = store.get(ns, "diet").value["facts"][0]["id"]
    pet_fact = store.get(ns, "pet").value["facts"][0]["id"]
    assert store.get(ns, diet_fact) is None
    store.put(ns, diet_fact, {"content": "Maya plays chess on Tuesdays."})
    store.delete(ns, pet_fact)
    diet, pet, chess = store.get(ns, "diet"), store.get(ns, "pet"), store.get(ns, diet_fact)
    assert diet is not None and "vegetarian" in diet.value["content"]
    assert pet is not None and "Pixel" in pet.value["content"]
    assert chess is not None and "chess" in chess.value["content"]
    memory.add([Turn("maya", "Maya's sister lives in Porto.", datetime(2024, 5, 6, 10))], user_id="maya")
    memory.flush()
    added = next(e.id for e in memory.entries("maya") if "Porto" in e.text)
    assert "Porto" in store.get(ns, added).value["content"]
    store.delete(ns, added)
    assert store.get(ns, added) is None and all("Porto" not in e.text for e in memory.entries("maya"))
