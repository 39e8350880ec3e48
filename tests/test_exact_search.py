"""Small users are searched exactly over the records' vectors; chromadb serves larger ones.

A short-lived process (a CLI call, a web request) that only reads a small memory must not
pay for importing chromadb, and the answer must be the one the index gives: the same
facts, the same scope filters, unusable rows skipped rather than fatal.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import ariadnemem_core.store.dense as dense
from ariadnemem_core import AriadneMemory
from tests.conftest import REPO, turn

DAY = 24 * 60
TURNS = [
    turn("Maya", "I went climbing at the gym on Elm Street.", 0, "t1"),
    turn("Maya", "My phone number is 555-0142.", 5, "t2"),
    turn("Leo", "The kickoff meeting is at 2 pm on Friday.", 10, "t3"),
    turn("Leo", "The kickoff meeting moved to 3 pm on Friday.", 2 * DAY, "t4"),
    turn("Maya", "Ana suggested a hotel in Alfama for the Lisbon trip.", 4 * DAY, "t5"),
    turn("Leo", "I bought new running shoes for the marathon in May.", 5 * DAY, "t6"),
]
QUESTIONS = ["When is the kickoff meeting?", "Where is Maya staying in Lisbon?", "What did Leo buy?",
             "climbing", "Who suggested the hotel?"]


def _texts(mem: AriadneMemory, **scope: str) -> list[str]:
    return [mem.retrieve(q, user_id="u", **scope).to_text() for q in QUESTIONS]


def test_exact_search_gives_the_index_answer(make_memory, monkeypatch: pytest.MonkeyPatch) -> None:
    mem = make_memory()
    mem.add(TURNS[:3], user_id="u", session_id="one")
    mem.add(TURNS[3:], user_id="u", session_id="two")
    mem.flush()
    exact = _texts(mem), _texts(mem, session_id="two")
    assert any("3 pm" in t for t in exact[0]) and not any("Elm Street" in t for t in exact[1])
    monkeypatch.setattr(dense, "EXACT_SEARCH_MAX", 0)  # every user through chromadb
    assert (_texts(mem), _texts(mem, session_id="two")) == exact


def _run(code: str) -> dict[str, bool]:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_a_reading_process_never_imports_chromadb_and_a_writer_still_indexes(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with AriadneMemory(store) as mem:
        mem.add(TURNS, user_id="u")
        mem.flush()
    read = f"""
import json, sys
from ariadnemem_core import AriadneMemory
with AriadneMemory({str(store)!r}) as mem:
    text = mem.retrieve("When is the kickoff meeting?", user_id="u").to_text()
print(json.dumps({{"found": "3 pm" in text, "chromadb": "chromadb" in sys.modules}}))
"""
    assert _run(read) == {"found": True, "chromadb": False}
    # A write still goes to the index (it is what larger users are searched with).
    write = f"""
import json, sys
from ariadnemem_core import AriadneMemory, Turn
with AriadneMemory({str(store)!r}) as mem:
    mem.add([Turn("Ana", "Ana adopted a beagle called Pip.")], user_id="u")
    mem.flush()
    report = mem.doctor(repair=False)
    indexed = report["entries"] == mem.stats("u")["entries"] and not report["drifted_users"]
print(json.dumps({{"indexed": indexed, "chromadb": "chromadb" in sys.modules}}))
"""
    assert _run(write) == {"indexed": True, "chromadb": True}


def test_a_user_above_the_limit_goes_through_chromadb(make_memory, monkeypatch: pytest.MonkeyPatch) -> None:
    mem = make_memory()
    mem.add(TURNS, user_id="u")
    mem.flush()
    calls: list[str] = []
    real = dense.DenseIndex._exact_search

    def spy(self: dense.DenseIndex, *args: object) -> object:
        calls.append("exact")
        return real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(dense.DenseIndex, "_exact_search", spy)
    assert "3 pm" in mem.retrieve("When is the kickoff meeting?", user_id="u").to_text()
    assert calls == ["exact"]
    monkeypatch.setattr(dense, "EXACT_SEARCH_MAX", len(mem.entries("u")) - 1)
    assert "3 pm" in mem.retrieve("When is the kickoff meeting?", user_id="u").to_text()
    assert calls == ["exact"]  # the second retrieve went to chromadb


def test_an_unusable_vector_row_is_skipped_not_fatal(tmp_path: Path, minilm) -> None:
    store = tmp_path / "s"
    with AriadneMemory(store, embedder=minilm) as mem:
        mem.add(TURNS, user_id="u")
        mem.flush()
    db = sqlite3.connect(store / "memory.sqlite3")
    db.execute("UPDATE entries SET embedding = ? WHERE rowid = (SELECT MIN(rowid) FROM entries)", (b"\x00\x01",))
    db.execute("UPDATE entries SET embedding = ? WHERE rowid = (SELECT MAX(rowid) FROM entries)",
               (bytes(4 * minilm.dim),))  # all zeros: no direction
    db.commit()
    db.close()
    with AriadneMemory(store, embedder=minilm) as mem:
        graph = mem.retrieve("When is the kickoff meeting?", user_id="u")
        assert "3 pm" in graph.to_text()


def test_exact_search_sees_every_write_at_once(tmp_path: Path, minilm) -> None:
    """The vectors an exact search keeps are valid for one store generation: a write by
    this memory or by another one on the same store is seen by the next search."""
    reader = AriadneMemory(tmp_path / "s", embedder=minilm)
    writer = AriadneMemory(tmp_path / "s", embedder=minilm)
    try:
        reader.add(TURNS, user_id="u")
        reader.flush()
        assert "Pip" not in reader.retrieve("What is Ana's dog called?", user_id="u").to_text()
        reader.add([turn("Ana", "I adopted a beagle called Pip.", 6 * DAY, "t7")], user_id="u")
        reader.flush()
        assert "Pip" in reader.retrieve("What is Ana's dog called?", user_id="u").to_text()
        writer.add([turn("Ana", "Pip learned to fetch the newspaper.", 7 * DAY, "t8")], user_id="u")
        writer.flush()
        assert "newspaper" in reader.retrieve("What did Pip learn?", user_id="u").to_text()
    finally:
        writer.close()
        reader.close()
