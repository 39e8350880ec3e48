"""MCP server over AriadneMem (``pip install "ariadnemem[mcp]"``; run ``ariadnemem mcp``)."""

from .server import NO_MATCH, TOOLS, MemoryTools, TurnInput, create_server

__all__ = ["NO_MATCH", "TOOLS", "MemoryTools", "TurnInput", "create_server"]
