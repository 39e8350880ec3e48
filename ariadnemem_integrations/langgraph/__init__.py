"""LangGraph adapter: a ``BaseStore`` backed by AriadneMem (``pip install "ariadnemem[langchain]"``)."""

from .store import NO_AGENT, AriadneMemStore

__all__ = ["NO_AGENT", "AriadneMemStore"]
