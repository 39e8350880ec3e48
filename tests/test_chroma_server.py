"""Server mode against a real ``chroma run`` on 127.0.0.1 (started and stopped here).

The dense index lives on the server; records, BM25, edges and counters stay in the local
SQLite file. Checked: ingest + retrieve, user isolation (and store isolation on a shared
server), reopen, a wiped server rebuilt from SQLite, an embedded store moved to a server,
an injected client, forget, and an outage in the middle of ingest losing nothing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import turn

from ariadnemem_core import AriadneMemory, Config, HashEmbedder
from ariadnemem_core.errors import StoreError

chromadb = pytest.importorskip("chromadb")
CHROMA = shutil.which("chroma")
pytestmark = pytest.mark.skipif(CHROMA is None, reason="the `chroma` CLI (chromadb package) is not on PATH")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ChromaServer:
    path: Path
    port: int
    proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> ChromaServer:
        self.proc = subprocess.Popen(
            [CHROMA, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.client().heartbeat()
                return self
            except Exception:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"chroma run exited with {self.proc.returncode}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM stops it cleanly
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def client(self):
        return chromadb.HttpClient(host="127.0.0.1", port=self.port)

    def collections(self) -> dict[str, int]:
        client = self.client()
        return {c.name: client.get_collection(c.name).count() for c in client.list_collections()}


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    srv = ChromaServer(tmp_path_factory.mktemp("chroma-server"), _free_port()).start()
    yield srv
    srv.stop()


@pytest.fixture
def open_remote(tmp_path: Path, chroma_server: ChromaServer) -> Iterator[Callable[..., AriadneMemory]]:
    opened: list[AriadneMemory] = []

    def factory(name: str = "store", **kwargs) -> AriadneMemory:
        kwargs.setdefault("chroma_host", "127.0.0.1")
        kwargs.setdefault("chroma_port", chroma_server.port)
        mem = AriadneMemory(tmp_path / name, kwargs.pop("config", None), embedder=HashEmbedder(), **kwargs)
        opened.append(mem)
        return mem

    yield factory
    for mem in opened:
        mem.close()


ALICE = [
    turn("Alice", "I adopted a greyhound called Pixel from the shelter in Leeds.", 0, "a1"),
    turn("Alice", "Pixel loves the long walks along the canal every morning.", 5, "a2"),
    turn("Alice", "My dentist appointment is on Tuesday at nine.", 600, "a3"),
]
BOB = [
    turn("Bob", "I bought a sailing boat named Kestrel in Plymouth harbour.", 0, "b1"),
    turn("Bob", "Kestrel needs new sails before the regatta in June.", 7, "b2"),
]


def _prefix(mem: AriadneMemory) -> str:
    """The start of this store's collection names on the server (server-mode naming is
    private to the store, read here to look at the server's side)."""
    return mem._store.collection_prefix


def _collection(mem: AriadneMemory, user_id: str) -> str:
    """The server-side collection of ``user_id``'s vectors (private naming, see ``_prefix``)."""
    return mem._store.dense_collection(user_id)


def _ids(mem: AriadneMemory, query: str, user: str) -> set[str]:
    return {f.id for f in mem.retrieve(query, user_id=user).facts}


def test_ingest_and_retrieve_keep_vectors_on_the_server(open_remote, chroma_server: ChromaServer,
                                                        tmp_path: Path) -> None:
    mem = open_remote()
    mem.add(ALICE, user_id="alice")
    mem.flush()
    graph = mem.retrieve("What is the name of Alice's greyhound?", user_id="alice")
    assert any("Pixel" in f.text for f in graph.facts)
    assert "a1" in graph.source_turn_ids
    # The vectors are on the server (one collection for this store's user), none on disk.
    mine = {n: c for n, c in chroma_server.collections().items() if n.startswith(_prefix(mem))}
    assert list(mine.values()) == [len(mem.entries("alice"))]
    assert not (tmp_path / "store" / "chroma").exists()
    assert mem.storage.remote and "127.0.0.1" in mem.storage.dense_location


def test_users_and_stores_are_isolated_on_a_shared_server(open_remote) -> None:
    mem = open_remote("one")
    mem.add(ALICE, user_id="alice")
    mem.add(BOB, user_id="bob")
    mem.flush()
    assert mem.users() == {"alice": len(mem.entries("alice")), "bob": len(mem.entries("bob"))}
    alice_ids = {e.id for e in mem.entries("alice")}
    bob_ids = {e.id for e in mem.entries("bob")}
    for q in ("Kestrel sailing boat regatta", "greyhound Pixel canal walks", "dentist appointment"):
        assert _ids(mem, q, "bob") <= bob_ids
        assert _ids(mem, q, "alice") <= alice_ids
        assert not _ids(mem, q, "carol")  # an unknown user sees nothing at all
    # A second store on the same server, with a user of the same name, sees only its own.
    other = open_remote("two")
    other.add([turn("Alice", "I am learning the cello with a teacher in York.", 0, "x1")], user_id="alice")
    other.flush()
    theirs = {e.id for e in other.entries("alice")}
    assert _ids(other, "greyhound Pixel canal walks", "alice") <= theirs
    assert _ids(mem, "cello teacher York", "alice") <= alice_ids
    assert _prefix(other) != _prefix(mem)


def test_reopen_and_a_wiped_server_is_rebuilt_from_sqlite(open_remote, chroma_server: ChromaServer) -> None:
    mem = open_remote()
    mem.add(ALICE, user_id="alice")
    mem.close()
    again = open_remote()
    before = _ids(again, "greyhound Pixel", "alice")
    assert before
    prefix = _prefix(again)
    again.close()
    client = chroma_server.client()
    for name in [n for n in chroma_server.collections() if n.startswith(prefix)]:
        client.delete_collection(name)
    rebuilt = open_remote()
    # open did it
    # Reconcile is run by open, never on demand: called on the private store, it finds nothing to do.
    assert rebuilt._store.reconcile() == {"reindexed": 0, "removed": 0, "rebuilt_users": 0, "quarantined": 0}
    assert _ids(rebuilt, "greyhound Pixel", "alice") == before


def test_embedded_store_moves_to_the_server_on_open(tmp_path: Path, open_remote,
                                                    chroma_server: ChromaServer) -> None:
    with AriadneMemory(tmp_path / "store", embedder=HashEmbedder()) as local:
        local.add(BOB, user_id="bob")
        local.flush()
        expected = _ids(local, "sailing boat Kestrel", "bob")
    remote = open_remote()
    assert _ids(remote, "sailing boat Kestrel", "bob") == expected
    counts = [c for n, c in chroma_server.collections().items() if n.startswith(_prefix(remote))]
    assert counts == [len(remote.entries("bob"))]


def test_injected_client_is_used_and_left_open(tmp_path: Path, chroma_server: ChromaServer) -> None:
    client = chroma_server.client()
    with AriadneMemory(tmp_path / "s", embedder=HashEmbedder(), chroma_client=client) as mem:
        mem.add(BOB, user_id="bob")
        mem.flush()
        assert _ids(mem, "Kestrel sails regatta", "bob")
        prefix = _prefix(mem)
    assert any(n.startswith(prefix) for n in (c.name for c in client.list_collections()))  # still usable
    with pytest.raises(StoreError, match="not both"):
        AriadneMemory(tmp_path / "t", embedder=HashEmbedder(), chroma_client=client, chroma_host="127.0.0.1")


def test_forget_removes_the_users_vectors_from_the_server(open_remote, chroma_server: ChromaServer) -> None:
    mem = open_remote()
    mem.add(ALICE, user_id="alice")
    mem.add(BOB, user_id="bob")
    mem.flush()
    assert mem.forget("alice") > 0
    assert not _ids(mem, "greyhound Pixel", "alice")
    left = {n: c for n, c in chroma_server.collections().items() if n.startswith(_prefix(mem))}
    assert sorted(left.values()) == [len(mem.entries("bob"))]


def test_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    port = _free_port()
    with pytest.raises(StoreError, match=rf"cannot reach the Chroma server at 127\.0\.0\.1:{port}.*chroma run"):
        AriadneMemory(tmp_path / "s", embedder=HashEmbedder(), chroma_host="127.0.0.1", chroma_port=port)


@pytest.mark.slow
def test_outage_mid_ingest_loses_nothing(tmp_path: Path) -> None:
    """The server dies between two windows: ``add`` still accepts the turns (they are
    durable, so it must not report them as not stored), they stay pending on disk, an
    explicit ``flush`` fails with a clear StoreError at its first dense read (the gate),
    and once the server is back ``flush`` extracts and indexes them."""
    srv = ChromaServer(tmp_path / "srv", _free_port()).start()
    try:
        mem = AriadneMemory(tmp_path / "s", Config(window_size=2), embedder=HashEmbedder(),
                            chroma_host="127.0.0.1", chroma_port=srv.port)
        mem.add(ALICE[:2], user_id="alice")  # one full window: extracted and indexed
        n_before = len(mem.entries("alice"))
        assert n_before > 0
        srv.stop()
        assert mem.add([ALICE[2], BOB[0]], user_id="alice") == 2
        assert [t.turn_id for _, _, t in mem.storage.pending()] == ["a3", "b1"]  # acknowledged, kept
        with pytest.raises(StoreError, match=r"dense index \(chroma server 127\.0\.0\.1:\d+\) failed"):
            mem.flush()
        assert [t.turn_id for _, _, t in mem.storage.pending()] == ["a3", "b1"]
        assert len(mem.entries("alice")) == n_before
        srv.start()
        mem.flush()
        graph = mem.retrieve("When is the dentist appointment?", user_id="alice")
        assert any("dentist" in f.text for f in graph.facts)
        assert "a3" in graph.source_turn_ids
        counts = [c for n, c in srv.collections().items() if n.startswith(_prefix(mem))]
        assert counts == [len(mem.entries("alice"))]
        mem.close()
    finally:
        srv.stop()


class _FlakyCollection:
    """A real collection whose next ``upsert`` fails (a dropped connection)."""

    def __init__(self, col, owner: _FlakyClient) -> None:
        self._col, self._owner = col, owner

    def upsert(self, **kwargs):
        if self._owner.fail_upserts:
            self._owner.fail_upserts -= 1
            raise ConnectionError("connection reset by peer")
        return self._col.upsert(**kwargs)

    def update(self, **kwargs):
        if self._owner.fail_updates:
            self._owner.fail_updates -= 1
            raise TimeoutError("read timed out")
        return self._col.update(**kwargs)

    def __getattr__(self, name):
        return getattr(self._col, name)


class _FlakyClient:
    def __init__(self, client) -> None:
        self._client, self.fail_upserts, self.fail_updates = client, 0, 0

    def get_or_create_collection(self, *args, **kwargs):
        return _FlakyCollection(self._client.get_or_create_collection(*args, **kwargs), self)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_failed_vector_write_after_commit_is_caught_up(tmp_path: Path, chroma_server: ChromaServer) -> None:
    """The records of a window are committed, then the vector upsert fails: ``add`` still
    returns (its turns are stored; the failure is logged), the entries are readable (BM25)
    at once, and the next operation re-pushes their vectors."""
    client = _FlakyClient(chroma_server.client())
    with AriadneMemory(tmp_path / "s", Config(window_size=2), embedder=HashEmbedder(),
                       chroma_client=client) as mem:
        mem.add(BOB, user_id="bob")
        client.fail_upserts = 1
        assert mem.add(ALICE[:2], user_id="alice") == 2  # logged: "Records are safe"
        stored = mem.entries("alice")
        assert stored and {"a1", "a2"} <= {t for e in stored for t in e.source_turn_ids}
        collections = chroma_server.collections()
        assert collections.get(_collection(mem, "alice"), 0) == 0  # no vectors yet
        graph = mem.retrieve("greyhound Pixel canal", user_id="alice")  # catches up first
        assert {"a1", "a2"} & graph.source_turn_ids
        assert mem.storage.dense_count("alice") == len(stored)
        counts = [c for n, c in chroma_server.collections().items()
                  if n in (_collection(mem, "alice"), _collection(mem, "bob"))]
        assert sorted(counts) == sorted([len(stored), len(mem.entries("bob"))])


def test_failed_merge_metadata_update_is_caught_up(tmp_path: Path, chroma_server: ChromaServer) -> None:
    """A MERGE refreshes the old entry's timestamp in the dense index; if that update
    fails, the entry is marked for re-indexing and the next operation pushes it again."""
    client = _FlakyClient(chroma_server.client())
    day = 24 * 60
    with AriadneMemory(tmp_path / "s", Config(window_size=1), embedder=HashEmbedder(),
                       chroma_client=client) as mem:
        mem.add([turn("Bob", "The boat Kestrel is moored in Plymouth harbour.", 0, "m1")], user_id="bob")
        client.fail_updates = 1
        # The window is committed before the failing update: add returns (the failure is logged).
        mem.add([turn("Bob", "The boat Kestrel is moored in Plymouth harbour.", 3 * day, "m2")], user_id="bob")
        [entry] = mem.entries("bob")  # merged: one entry, both turns as provenance
        assert entry.source_turn_ids == ["m1", "m2"]
        col = client._client.get_collection(_collection(mem, "bob"))

        def dense_ts() -> float:
            return col.get(ids=[entry.id], include=["metadatas"])["metadatas"][0]["ts"]

        assert dense_ts() != pytest.approx(entry.timestamp.timestamp())  # still the old timestamp
        assert mem.retrieve("Where is Kestrel moored?", user_id="bob").facts
        assert dense_ts() == pytest.approx(entry.timestamp.timestamp())  # the refreshed timestamp


def test_latency_bench_runs_in_server_mode(tmp_path: Path, chroma_server: ChromaServer) -> None:
    from test_bench_runner import write_fixture

    from ariadnemem_core.bench.latency import run_latency

    data = write_fixture(tmp_path / "mini.json")
    res = run_latency(data, None, tmp_path / "lat", embedder=HashEmbedder(), progress=False,
                      chroma_host="127.0.0.1", chroma_port=chroma_server.port)
    assert res["dense_index"] == "chroma server"
    assert res["ariadnemem"]["without_embedding"]["p50_ms"] > 0
    assert "dense index: chroma server" in (tmp_path / "lat" / "latency.md").read_text(encoding="utf-8")
