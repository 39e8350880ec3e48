"""Frictions a new user hits first: how an entry prints, and the CLI's answers to a wrong
path (a directory as the input file, a file or a foreign directory as ``--store``), to an
empty input file, and to ``stats`` on an emptied memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ariadnemem_core import Entry
from ariadnemem_core.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, " ".join(err.replace("│", " ").split())  # usage errors come in a wrapped box


def _turns(path: Path) -> Path:
    path.write_text(json.dumps({"speaker": "Ann", "text": "I adopted a cat named Pixel.",
                                "timestamp": "2024-05-01T10:00:00"}) + "\n", encoding="utf-8")
    return path


def test_entry_repr_leaves_out_the_embedding() -> None:
    entry = Entry("e-1", "Ann adopted a cat named Pixel.", embedding=np.full(384, 0.123456, dtype=np.float32))
    text = repr(entry)
    assert "0.123456" not in text and "embedding" not in text
    assert "Ann adopted a cat named Pixel." in text and len(text) < 600
    assert entry.embedding is not None  # still there, just not printed


def test_a_directory_as_the_input_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "turns").mkdir()
    for cmd in ("add", "import"):
        code, _, err = run(capsys, cmd, tmp_path / "turns", "--store", tmp_path / "m")
        assert code == 2 and "is a directory" in err and "no such file" not in err, err
    assert not (tmp_path / "m").exists()


def test_a_plain_file_as_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    store = tmp_path / "notes.txt"
    store.write_text("my notes\n", encoding="utf-8")
    turns = _turns(tmp_path / "t.jsonl")
    for args in (("add", turns), ("entries",), ("stats",)):
        code, _, err = run(capsys, *args, "--store", store)
        assert code == 2 and "is a file, not a memory directory" in err and "Errno" not in err, err
    assert store.read_text(encoding="utf-8") == "my notes\n"


def test_add_refuses_a_foreign_non_empty_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    home = tmp_path / "project"
    home.mkdir()
    (home / "README.md").write_text("hi\n", encoding="utf-8")
    turns = _turns(tmp_path / "t.jsonl")
    code, _, err = run(capsys, "add", turns, "--store", home)
    assert code == 2 and "holds other files but no memory" in err, err
    assert sorted(p.name for p in home.iterdir()) == ["README.md"]  # nothing written there


def test_a_store_whose_creation_was_cut_short_is_no_foreign_directory(capsys: pytest.CaptureFixture[str],
                                                                       tmp_path: Path) -> None:
    """A command killed while creating a store (or another one creating it at the same
    moment) leaves only the store's set-up lock: that directory is the store's, not someone
    else's, and the next command opens it."""
    store = tmp_path / "m"
    store.mkdir()
    (store / "init.lock").touch()
    code, _, err = run(capsys, "add", _turns(tmp_path / "t.jsonl"), "--store", store)
    assert code == 0, err
    code, out, err = run(capsys, "stats", "--store", store)
    assert code == 0 and "turns_seen" in out, err


def test_an_empty_jsonl(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    code, out, err = run(capsys, "add", empty, "--store", tmp_path / "m")
    assert code == 1 and "no turns in it" in err and out == "", err
    assert not (tmp_path / "m").exists()


def test_stats_after_forget_draws_no_empty_table(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 make_memory) -> None:
    mem = make_memory("m")
    mem.add({"speaker": "Ann", "text": "I adopted a cat named Pixel."}, user_id="ann")
    mem.close()
    code, _, err = run(capsys, "forget", "--user", "ann", "--yes", "--store", tmp_path / "m")
    assert code == 0, err
    code, out, _ = run(capsys, "stats", "--store", tmp_path / "m")
    assert code == 0 and "memory is empty" in out
    assert "users (entries)" not in out  # no second, empty table
