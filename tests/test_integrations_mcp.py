"""The MCP server, end to end with the SDK's own client: ``ariadnemem mcp`` as a real
subprocess over stdio and over streamable HTTP on 127.0.0.1, plus in-process checks of the
tool schemas. The subprocesses use the hash embedder (``--embedder hash``) so they start in
about a second instead of loading the model."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver.exceptions import ToolError

from ariadnemem_core import AriadneMemory, HashEmbedder
from ariadnemem_core.cli import main
from ariadnemem_integrations.mcp import NO_MATCH, TOOLS, create_server

REPO = Path(__file__).resolve().parents[1]
CLI = "import sys; from ariadnemem_core.cli import main; sys.exit(main())"
TOOL_NAMES = {name for name, _, _ in TOOLS}


def _env() -> dict[str, str]:
    """This checkout first on the path; no LLM configured (answers are extractive)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _seed(store: Path) -> str:
    """A store where bob has a secret; returns the id of bob's entry."""
    with AriadneMemory(store, embedder=HashEmbedder()) as mem:
        mem.add([{"speaker": "Bob", "text": "Bob's locker code is 4417.", "timestamp": "2024-01-02T10:00:00"}],
                user_id="bob")
        mem.flush()
        [entry] = mem.entries("bob")
        # ... and a turn of bob's still waiting for its window (a read sees pending turns).
        mem.add([{"speaker": "Bob", "text": "Bob's new locker code is 9931.", "timestamp": "2024-01-03T10:00:00"}],
                user_id="bob")
        mem.close(flush=False)
        return entry.id


async def _call(session: ClientSession, name: str, **args: Any) -> Any:
    """Call a tool; returns its structured content (or text), raising on a tool error."""
    result = await session.call_tool(name, args)
    text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    if result.is_error:
        raise RuntimeError(text)
    return result.structured_content if result.structured_content is not None else text


async def _exercise_fixed_scope(session: ClientSession, bob_entry: str) -> None:
    """Every tool, as user alice, on a store that also holds bob's memories."""
    tools = await session.list_tools()
    assert {t.name for t in tools.tools} == TOOL_NAMES
    for t in tools.tools:  # a fixed-scope server does not even offer a user argument
        assert "user_id" not in t.input_schema.get("properties", {}), t.name

    added = await _call(session, "add_turns", turns=[
        {"speaker": "Alice", "text": "I moved to Porto in March.", "timestamp": "2024-03-01T09:00:00"},
        {"speaker": "Alice", "text": "My locker code is 2290.", "timestamp": "2024-03-02T09:00:00"},
    ])
    assert added["added"] == 2 and added["user_entries"] >= 2 and added["pending_turns"] == 0

    result = await session.call_tool("retrieve", {"query": "What is the locker code?"})
    assert not result.is_error
    text = result.content[0].text
    assert "2290" in text and "4417" not in text and "9931" not in text  # alice's fact, never bob's
    graph = result.structured_content
    assert graph["text"] == text and any("2290" in f["text"] for f in graph["facts"])
    assert all(f["id"] != bob_entry for f in graph["facts"])

    ans = await _call(session, "answer", question="What is Alice's locker code?")
    assert ans["mode"] == "extractive" and "2290" in ans["answer"] and ans["note"]

    listed = await _call(session, "list_entries", limit=10)
    ids = [e["id"] for e in listed["entries"]]
    assert listed["total"] == len(ids) >= 2 and bob_entry not in ids
    assert all("embedding" not in e for e in listed["entries"])

    hist = await _call(session, "history", entry_id=ids[0])
    assert [s["id"] for s in hist["states"]] == [ids[0]]
    stats = await _call(session, "stats")
    assert stats["user_id"] == "alice" and stats["counters"]["turns_seen"] == 2

    # Bob's entry is out of reach, named directly or with a user argument slipped in.
    for name in ("history", "delete_entry"):
        with pytest.raises(RuntimeError, match="no entry"):
            await _call(session, name, entry_id=bob_entry)
        with pytest.raises(RuntimeError, match="fixed scope"):
            await _call(session, name, entry_id=bob_entry, user_id="bob")
    with pytest.raises(RuntimeError, match="waits for its window") as pending:  # a pending fact's id says what it is
        await _call(session, "history", entry_id="pending:0123456789abcdef")
    assert "flush()" not in str(pending.value)  # a library call an MCP client cannot make
    with pytest.raises(RuntimeError, match="no entry"):
        await _call(session, "unlink_update", old_id=bob_entry, new_id=ids[0])
    with pytest.raises(RuntimeError, match="no update link"):
        await _call(session, "unlink_update", old_id=ids[0], new_id=ids[1])
    # A change the agent understood and the memory missed: recorded, refused the other way
    # round (with the reason), and undone.
    with pytest.raises(RuntimeError, match="no entry"):
        await _call(session, "link_update", old_id=bob_entry, new_id=ids[0])
    assert await _call(session, "link_update", old_id=ids[0], new_id=ids[1]) == {"linked": [ids[0], ids[1]]}
    hist = await _call(session, "history", entry_id=ids[1])
    assert [s["id"] for s in hist["states"]] == [ids[0], ids[1]]
    with pytest.raises(RuntimeError, match="new_id"):
        await _call(session, "link_update", old_id=ids[1], new_id=ids[0])
    assert await _call(session, "unlink_update", old_id=ids[0], new_id=ids[1]) == {"unlinked": [ids[0], ids[1]]}
    # Another user named on a fixed-scope server (a gateway pointed at the wrong server): an
    # error, not bob's memory, nor alice's read or written as if it were bob's.
    sneaky = await session.call_tool("retrieve", {"query": "locker code", "user_id": "bob"})
    assert sneaky.is_error and "fixed scope" in sneaky.content[0].text
    # (the secret's text, not the bare digits: a timing figure in the stats may hold them)
    assert "locker code is 4417" not in json.dumps(sneaky.model_dump(mode="json"))
    before = (await _call(session, "stats"))["counters"]["turns_seen"]
    for args in ({"user_id": "bob"}, {"agent_id": "a9"}, {"session_id": ""}):
        refused = await session.call_tool("add_turns", {"turns": [{"speaker": "Bob", "text": "My passport ends 0042."}],
                                                        **args})
        assert refused.is_error and next(iter(args)) in refused.content[0].text
    assert (await _call(session, "stats"))["counters"]["turns_seen"] == before
    assert "2290" in json.dumps(await _call(session, "retrieve", query="locker code", user_id="alice"))

    deleted = await _call(session, "delete_entry", entry_id=ids[0])
    assert deleted == {"deleted": ids[0]}
    with pytest.raises(RuntimeError, match="refusing to forget"):
        await _call(session, "forget_user", confirm="yes")
    with pytest.raises(RuntimeError, match="refusing to forget"):
        await _call(session, "forget_user", confirm="bob")
    gone = await _call(session, "forget_user", confirm="alice")
    assert gone["removed"] == len(ids) - 1
    assert (await _call(session, "list_entries"))["total"] == 0
    empty = await session.call_tool("retrieve", {"query": "locker code"})
    assert empty.content[0].text == NO_MATCH


def _bob_still_there(store: Path, bob_entry: str) -> None:
    with AriadneMemory(store, embedder=HashEmbedder()) as mem:
        # Bob's pending turn was extracted when the server closed, as bob's; nothing of his was touched.
        bobs = mem.entries("bob")
        assert len(bobs) == 2 and bobs[0].id == bob_entry and "9931" in bobs[1].text
        assert mem.entries("alice") == []


async def test_stdio_subprocess_every_tool_and_user_isolation(tmp_path: Path) -> None:
    store = tmp_path / "mem"
    bob_entry = _seed(store)
    params = StdioServerParameters(
        command=sys.executable, args=["-c", CLI, "mcp", "--store", str(store), "--user", "alice",
                                      "--embedder", "hash"], env=_env(), cwd=str(REPO))
    with (tmp_path / "server.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "ariadnemem"
            await asyncio.wait_for(_exercise_fixed_scope(session, bob_entry), timeout=120)
    assert "alice" in (tmp_path / "server.log").read_text()
    _bob_still_there(store, bob_entry)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@asynccontextmanager
async def _http_server(store: Path, *extra: str) -> AsyncIterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "mcp", "--store", str(store), "--embedder", "hash",
         "--http", f"127.0.0.1:{port}", *extra],
        env=_env(), cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "server did not listen"
                await asyncio.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - diagnostics only
            proc.kill()
            raise
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


async def test_streamable_http_fixed_scope(tmp_path: Path) -> None:
    store = tmp_path / "mem"
    bob_entry = _seed(store)
    async with _http_server(store, "--user", "alice") as url, \
            streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await asyncio.wait_for(_exercise_fixed_scope(session, bob_entry), timeout=120)
    _bob_still_there(store, bob_entry)


async def test_streamable_http_per_call_scope(tmp_path: Path) -> None:
    """With --per-call-scope each call names its user, and stays inside it."""
    store = tmp_path / "mem"
    bob_entry = _seed(store)
    async with _http_server(store, "--per-call-scope") as url, \
            streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await _call(session, "add_turns", user_id="carol",
                    turns=[{"speaker": "Carol", "text": "Carol's locker code is 9051."}])
        carol = await _call(session, "retrieve", query="locker code", user_id="carol")
        assert "9051" in carol["text"] and "4417" not in carol["text"]
        bob = await _call(session, "retrieve", query="locker code", user_id="bob")
        assert "4417" in bob["text"] and "9051" not in bob["text"]
        default = await session.call_tool("retrieve", {"query": "locker code"})
        assert default.content[0].text == NO_MATCH  # user "default" has nothing
        with pytest.raises(RuntimeError, match="no entry"):
            await _call(session, "delete_entry", entry_id=bob_entry, user_id="carol")
        with pytest.raises(RuntimeError, match="refusing to forget"):
            await _call(session, "forget_user", user_id="bob", confirm="carol")
        assert (await _call(session, "stats", user_id="carol"))["counters"]["turns_seen"] == 1
    _bob_still_there(store, bob_entry)


async def test_scope_arguments_only_with_per_call_scope(tmp_path: Path) -> None:
    with AriadneMemory(tmp_path / "m", embedder=HashEmbedder()) as mem:
        fixed = await create_server(mem, user_id="u").list_tools()
        open_ = await create_server(mem, user_id="u", per_call_scope=True).list_tools()
        assert all("user_id" not in t.input_schema["properties"] for t in fixed)
        assert all({"user_id", "agent_id", "session_id"} <= set(t.input_schema["properties"]) for t in open_)
        by_name = {t.name: t for t in fixed}
        assert by_name["retrieve"].annotations.read_only_hint is True
        assert by_name["forget_user"].annotations.destructive_hint is True
        with pytest.raises(ValueError):
            create_server(mem, user_id="")


async def test_empty_ids_are_refused_with_a_reason(tmp_path: Path) -> None:
    """An empty entry id says why it is refused; with per-call scope an empty user or agent
    id is refused, never read as "not given" (the default user's memory, or every agent of
    the user for ``forget_user``)."""
    with AriadneMemory(tmp_path / "m", embedder=HashEmbedder()) as mem:
        mem.add({"speaker": "Alice", "text": "Alice's bank PIN is 4821."}, user_id="alice")
        mem.add({"speaker": "Bob", "text": "Bob's bike is blue."}, user_id="bob", agent_id="a1")
        mem.flush()
        server = create_server(mem, user_id="alice", per_call_scope=True)
        for tool in ("history", "delete_entry"):
            with pytest.raises(ToolError, match="entry_id"):
                await server.call_tool(tool, {"entry_id": ""})
        with pytest.raises(ToolError, match="user_id"):
            await server.call_tool("retrieve", {"query": "bank PIN", "user_id": ""})
        with pytest.raises(ToolError, match="agent_id"):
            await server.call_tool("forget_user", {"confirm": "bob", "user_id": "bob", "agent_id": ""})
        assert mem.entries("bob") and mem.entries("alice")
        # An empty time is a time the client could not fill, not "now" (only a missing one is).
        seen = mem.stats("alice")["turns_seen"]
        with pytest.raises(ToolError, match="timestamp"):
            await server.call_tool("add_turns", {"turns": [{"speaker": "Alice", "text": "I moved to Lyon.",
                                                            "timestamp": ""}]})
        assert mem.stats("alice")["turns_seen"] == seen


async def test_agent_scope_hides_other_agents_entries(tmp_path: Path) -> None:
    with AriadneMemory(tmp_path / "m", embedder=HashEmbedder()) as mem:
        mem.add({"speaker": "Ann", "text": "Ann's badge number is 77."}, user_id="ann", agent_id="a1")
        mem.flush()
        [other] = mem.entries("ann", agent_id="a1")
        server = create_server(mem, user_id="ann", agent_id="a2")
        with pytest.raises(ToolError, match="no entry"):
            await server.call_tool("history", {"entry_id": other.id})
        listed = await server.call_tool("list_entries", {})
        assert listed.structured_content["total"] == 0


async def test_add_turns_restates_in_english(tmp_path: Path) -> None:
    """Through the ``add_turns`` tool: "you" opening a clause agrees with its verb, and
    a role speaker is "the user" / "the assistant"."""
    with AriadneMemory(tmp_path / "m", embedder=HashEmbedder()) as mem:
        server = create_server(mem, user_id="u")
        await server.call_tool("add_turns", {"turns": [
            {"speaker": "Leo", "text": "Are you free on Friday?", "timestamp": "2024-03-04T09:00:00"},
            {"speaker": "Maya", "text": "My phone number is 555-0142 in case you need to reach me.",
             "timestamp": "2024-03-04T09:01:00"},
            {"speaker": "user", "text": "Just in case you need it, my number is 555-0199.",
             "timestamp": "2024-03-04T09:02:00"}]})
        texts = [e.text for e in mem.entries("u")]
    assert "Maya's phone number is 555-0142 in case Leo needs to reach Maya." in texts
    assert "Just in case Maya needs it, the user's number is 555-0199." in texts
    assert not any(" need to reach" in t for t in texts)


def test_cli_rejects_a_bad_http_address(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["mcp", "--http", "8765", "--store", "/nonexistent/never-created"])
    assert exc.value.code == 2
    assert "HOST:PORT" in capsys.readouterr().err
    assert not Path("/nonexistent/never-created").exists()


def test_cli_names_the_extra_when_mcp_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for name in [m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "ariadnemem_integrations.mcp"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the package were not installed
    with pytest.raises(SystemExit) as exc:
        main(["mcp", "--store", str(tmp_path / "m")])
    assert exc.value.code == 1
    assert "ariadnemem[mcp]" in capsys.readouterr().err


async def test_answer_with_a_configured_llm(tmp_path: Path, server) -> None:
    """With an LLM the answer tool makes one call over the evidence graph (mode "llm")."""
    from fake_openai_server import fake_client

    server.answer = "4417"
    with AriadneMemory(tmp_path / "m", embedder=HashEmbedder(), llm=fake_client(server)) as mem:
        mem.add({"speaker": "Bob", "text": "My locker code is 4417."}, user_id="bob")
        mem.flush()
        res = await create_server(mem, user_id="bob").call_tool("answer", {"question": "What is Bob's locker code?"})
    assert res.structured_content["mode"] == "llm" and res.structured_content["answer"] == "4417"
    assert res.structured_content["note"] is None and "4417" in res.structured_content["evidence"]
    assert server.count == 1
