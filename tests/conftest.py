"""Shared fixtures. Everything runs offline; the MiniLM model loads once per session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fake_openai_server import FakeOpenAIServer

from ariadnemem_core import AriadneMemory, Config, HashEmbedder, MiniLMEmbedder, Turn

REPO = Path(__file__).resolve().parents[1]
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    """A scripted OpenAI-compatible server on 127.0.0.1 (tests cue its replies)."""
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    emb = MiniLMEmbedder()
    emb.embed(["warm up"])
    return emb


@pytest.fixture
def make_memory(tmp_path: Path, minilm: MiniLMEmbedder) -> Iterator[Callable[..., AriadneMemory]]:
    """Open memories on disk under tmp_path (MiniLM by default); all closed at teardown."""
    opened: list[AriadneMemory] = []

    def factory(name: str = "store", config: Config | None = None, *, hashing: bool = False,
                **kwargs) -> AriadneMemory:
        embedder = HashEmbedder() if hashing else minilm
        mem = AriadneMemory(tmp_path / name, config, embedder=kwargs.pop("embedder", embedder), **kwargs)
        opened.append(mem)
        return mem

    yield factory
    for mem in opened:
        mem.close()


def turn(speaker: str, text: str, minutes: float = 0.0, turn_id: str | None = None, **kw) -> Turn:
    return Turn(speaker, text, T0 + timedelta(minutes=minutes), turn_id, kw or {})
