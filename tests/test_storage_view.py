"""The facade's read-only storage view, and per-call read settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from ariadnemem_core import AriadneMemory, Config, HashEmbedder, StorageView, StoreError, Turn


def _memory(path: Path) -> AriadneMemory:
    mem = AriadneMemory(path, Config(window_size=2), embedder=HashEmbedder())
    mem.add([Turn("Ana", "Ana paddles a red kayak on Lake Bled."), Turn("Ana", "Ana works as a nurse.")],
            user_id="ana")
    mem.add([Turn("Zoe", "Zoe paddles a kayak too."), Turn("Zoe", "Zoe plays the cello.")], user_id="zoe")
    mem.add(Turn("Ana", "Ana bought a new paddle."), user_id="ana")  # half a window: pending
    return mem


def test_the_store_is_private_and_the_view_reads_it(tmp_path: Path) -> None:
    with _memory(tmp_path / "m") as mem:
        assert not hasattr(mem, "store")
        view = mem.storage
        assert isinstance(view, StorageView)
        assert not any(hasattr(view, name) for name in ("add_pending", "commit_window", "delete", "clear",
                                                         "import_rows", "close", "reconcile"))
        # pending: the exact scope's, or every scope's, in arrival order
        assert [t.text for _, _, t in view.pending("ana")] == ["Ana bought a new paddle."]
        assert view.pending("zoe") == []
        assert [s.user_id for _, s, _ in view.pending()] == ["ana"]
        # each index alone, scoped to one user
        ana = {e.id: e for e in mem.entries("ana")}
        zoe = {e.id for e in mem.entries("zoe")}
        lexical = view.lexical_search("kayak", 10, user_id="ana")
        assert lexical and {i for i, _ in lexical} <= set(ana)
        assert {i for i, _ in view.lexical_search("kayak", 10, user_id="zoe")} <= zoe
        kayak = next(e for e in ana.values() if "kayak" in e.text)
        dense = view.dense_search(kayak.embedding, 10, user_id="ana")
        assert dense[0][0] == kayak.id and dense[0][1] == pytest.approx(1.0, abs=1e-4)
        assert {i for i, _ in dense} <= set(ana)
        assert view.dense_count("ana") == len(ana) and view.dense_count("zoe") == len(zoe)
        # several entries in one read; another user's are left out
        got = view.get_many([*ana, *zoe], user_id="ana")
        assert set(got) == set(ana)
        assert not view.remote and view.dense_location.endswith("chroma")
        rows = list(view.export_rows("ana"))
        assert rows[0]["type"] == "meta" and not any(r.get("user_id") == "zoe" for r in rows)
    with pytest.raises(StoreError):
        view.pending()


def test_retrieve_takes_read_settings_for_one_call(tmp_path: Path) -> None:
    with _memory(tmp_path / "m") as mem:
        mem.flush()
        question = "What does Ana do: kayak, nurse, paddle?"
        full = mem.retrieve(question, user_id="ana")
        small = mem.retrieve(question, user_id="ana", config=mem.config.replace(
            max_nodes=1, min_nodes=1, message_context=0, path_lines=True))
        assert len(small.facts) == 1 < len(full.facts)
        assert small.path_lines and not full.path_lines
        assert mem.config.max_nodes != 1 and not mem.config.path_lines  # the memory's own settings
        again = mem.retrieve(question, user_id="ana")
        assert [f.id for f in again.facts] == [f.id for f in full.facts]
