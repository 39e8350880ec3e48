"""The atomic writer keeps the old file on any error, and Scope.matches is the one scope filter."""

from __future__ import annotations

from pathlib import Path

import pytest

from ariadnemem_core import Entry, Scope
from ariadnemem_core.files import atomic_open, write_atomic


def test_atomic_open_replaces_only_on_success(tmp_path: Path) -> None:
    target = tmp_path / "export.jsonl"
    target.write_text("old\n", encoding="utf-8")
    with pytest.raises(RuntimeError), atomic_open(target) as fh:
        fh.write("half of the new con")
        raise RuntimeError("disk full, say")
    assert target.read_text(encoding="utf-8") == "old\n"  # untouched
    assert [p.name for p in tmp_path.iterdir()] == ["export.jsonl"]  # no temporary file left
    with atomic_open(target) as fh:
        fh.write("new\n")
    assert target.read_text(encoding="utf-8") == "new\n"
    assert write_atomic(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"


def test_atomic_open_refuses_a_missing_directory_and_a_read_mode(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"), atomic_open(tmp_path / "no" / "x.txt"):
        pass
    with pytest.raises(ValueError, match="mode"), atomic_open(tmp_path / "x.txt", "r"):
        pass


def test_scope_matches_user_then_agent_and_session_when_named() -> None:
    e = Entry(id="e1", text="t", user_id="u", agent_id="a", session_id="s")
    assert Scope("u").matches(e)
    assert Scope("u", "a").matches(e) and Scope("u", None, "s").matches(e) and Scope("u", "a", "s").matches(e)
    assert not Scope("v").matches(e)
    assert not Scope("u", "b").matches(e) and not Scope("u", "a", "t").matches(e)
    assert not Scope("u", "a").matches(Entry(id="e2", text="t", user_id="u"))  # no agent: not agent a's
