"""Commands the integrations add to the ``ariadnemem`` command line.

``ariadnemem mcp`` serves a memory to MCP clients (stdio, or streamable HTTP). It is
registered through the ``ariadnemem.cli`` entry-point group (see
:mod:`ariadnemem_core.cli.plugins`), so the core CLI never imports this package. The
server lives in :mod:`ariadnemem_integrations.mcp` and needs the optional ``mcp``
package; it is imported only when the command runs, so listing the commands, and every
other command, works without it.
"""

from __future__ import annotations

import signal
from enum import StrEnum
from typing import Annotated

import typer

from ariadnemem_core import HashEmbedder
from ariadnemem_core.cli.plugins import (
    AgentOpt,
    HostOpt,
    PortOpt,
    SessionOpt,
    StoreOpt,
    UserOpt,
    err,
    fail,
    open_memory,
)


class EmbedderChoice(StrEnum):
    minilm = "minilm"
    hash = "hash"


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise typer.BadParameter(f"expected HOST:PORT (e.g. 127.0.0.1:8765), got {value!r}", param_hint="--http")
    return host.strip("[]"), int(port)


def _stop(signum: int, frame: object) -> None:
    """SIGTERM ends the server like end of input does: the memory is closed (flushed), exit 0.
    (uvicorn handles the signal first for a graceful HTTP shutdown, then re-raises it.)"""
    raise SystemExit(0)


def mcp(
    store: StoreOpt = None,
    user: UserOpt = "default",
    agent: AgentOpt = None,
    session: SessionOpt = None,
    per_call_scope: Annotated[bool, typer.Option(
        "--per-call-scope", help="Let each tool call name its user/agent/session (trusted clients only); "
        "default: every call works in --user/--agent/--session.")] = False,
    http: Annotated[str | None, typer.Option(
        "--http", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")]
    = None,
    embedder: Annotated[EmbedderChoice, typer.Option(
        "--embedder", help="minilm: the embedded model; hash: no model, word overlap only (tests, smoke checks). "
        "A store keeps the embedder it was built with.")] = EmbedderChoice.minilm,
    base_url: Annotated[str | None, typer.Option(
        "--base-url", help="LLM for the answer tool (default: $OPENAI_BASE_URL; none: extractive answers).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model name (default: $ARIADNEMEM_LLM_MODEL).")] = None,
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
) -> None:
    """Serve the memory to MCP clients (Claude Desktop, IDEs, agent frameworks).

    Tools: add_turns, retrieve, answer, history, list_entries, stats, delete_entry,
    link_update, unlink_update, forget_user. stdio by default (the client starts this command);
    --http serves streamable HTTP. Needs the mcp extra: pip install "ariadnemem[mcp]".
    """
    address = _host_port(http) if http else None
    try:
        from .mcp import create_server
    except ImportError as exc:
        raise fail(f"the MCP server needs the mcp package: pip install \"ariadnemem[mcp]\" ({exc})") from None
    emb = HashEmbedder() if embedder is EmbedderChoice.hash else None
    llm = None
    if base_url or model:
        from ariadnemem_core.llm import LLMClient

        llm = LLMClient(base_url=base_url, model=model)
    with open_memory(store, chroma_host, chroma_port, embedder=emb, llm=llm) as mem:
        server = create_server(mem, user_id=user, agent_id=agent, session_id=session, per_call_scope=per_call_scope)
        scope = f"user {user!r}" + (f", agent {agent!r}" if agent else "") + (f", session {session!r}" if session
                                                                               else "")
        scope = "per-call scope (default " + scope + ")" if per_call_scope else scope
        signal.signal(signal.SIGTERM, _stop)
        if address:
            host, port = address
            err.print(f"AriadneMem MCP server: http://{host}:{port}/mcp ({mem.location}, {scope})")
            server.run("streamable-http", host=host, port=port)
        else:
            err.print(f"AriadneMem MCP server on stdio ({mem.location}, {scope})")
            server.run()
