"""docs/cli.md is generated from the CLI (scripts/cli_docs.py): fail when it is stale."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("cli_docs", REPO / "scripts" / "cli_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_matches_the_cli() -> None:
    gen = _generator()
    current = gen.TARGET.read_text(encoding="utf-8")
    assert current == gen.render(), "docs/cli.md is stale: run `python scripts/cli_docs.py`"


def test_cli_reference_documents_every_command() -> None:
    from ariadnemem_core.cli import app

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    names = [c.name for c in app.registered_commands] + [
        f"bench {c.name}" for g in app.registered_groups for c in g.typer_instance.registered_commands]
    assert len(names) >= 15
    for name in names:
        assert f"`ariadnemem {name}`" in text, name
