"""Package boundaries: the core never imports the integrations, the integrations use the
core's public surface, nothing imports another library's private names; and commands
contributed through the ``ariadnemem.cli`` entry points reach the CLI."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
OURS = ("ariadnemem_core", "ariadnemem_integrations")
#: What the integrations may import from the core: the package root, the CLI's plugin
#: surface (shared options for contributed commands) and the LLM client's documented module.
CORE_SURFACE = {"ariadnemem_core", "ariadnemem_core.cli.plugins", "ariadnemem_core.llm"}


def _imports(package: str) -> list[tuple[Path, str, list[str]]]:
    """(file, absolute module, imported names) of every import in ``package``."""
    found = []
    for path in sorted((REPO / package).rglob("*.py")):
        here = list(path.relative_to(REPO).parent.parts)  # the package the file belongs to
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [(path, alias.name, []) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - node.level + 1]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                found.append((path, module, [a.name for a in node.names]))
    return found


def test_the_core_never_imports_the_integrations() -> None:
    bad = [(str(p.relative_to(REPO)), m) for p, m, _ in _imports("ariadnemem_core")
           if m.split(".")[0] == "ariadnemem_integrations"]
    assert not bad


def test_the_integrations_use_the_core_public_surface() -> None:
    bad = [(str(p.relative_to(REPO)), m, names) for p, m, names in _imports("ariadnemem_integrations")
           if m.split(".")[0] == "ariadnemem_core"
           and (m not in CORE_SURFACE or any(n.startswith("_") for n in names))]
    assert not bad
    import ariadnemem_core

    used = {n for _, m, names in _imports("ariadnemem_integrations") if m == "ariadnemem_core" for n in names}
    assert used <= set(ariadnemem_core.__all__)


def test_no_private_name_of_another_library_is_imported() -> None:
    bad = [(str(p.relative_to(REPO)), m, n) for pkg in OURS for p, m, names in _imports(pkg)
           if m.split(".")[0] not in OURS for n in names if n.startswith("_") and n != "__future__"]
    bad += [(str(p.relative_to(REPO)), m, "") for pkg in OURS for p, m, _ in _imports(pkg)
            if m.split(".")[0] not in OURS and any(part.startswith("_") and part != "__future__"
                                                     for part in m.split("."))]
    assert not bad


class _EntryPoint:
    def __init__(self, name: str, load: Any) -> None:
        self.name, self.value, self._load = name, f"fake:{name}", load

    def load(self) -> Any:
        return self._load()


def test_contributed_commands_are_added_and_broken_ones_skipped(monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    from ariadnemem_core.cli import plugins

    def hello(name: str = "world") -> None:
        """Say hello."""
        typer.echo(f"hello {name}")

    def broken() -> Any:
        raise ImportError("no module named 'missing_dependency'")

    eps = [_EntryPoint("hello", lambda: hello), _EntryPoint("broken", broken),
           _EntryPoint("stats", lambda: hello)]
    monkeypatch.setattr(plugins, "entry_points", lambda group: eps if group == plugins.ENTRY_POINT_GROUP else [])
    app = typer.Typer()

    @app.command("stats")
    def stats() -> None:
        typer.echo("core stats")

    added = plugins.add_plugin_commands(app, taken={"stats"})
    assert added == ["hello"]
    assert "missing_dependency" in caplog.text and "taken" in caplog.text
    runner = CliRunner()
    assert runner.invoke(app, ["hello", "--name", "Ana"]).output == "hello Ana\n"
    assert runner.invoke(app, ["stats"]).output == "core stats\n"  # a core command is never replaced


def test_the_mcp_command_comes_from_the_integrations_entry_point() -> None:
    from importlib.metadata import entry_points

    from ariadnemem_core.cli import app

    [ep] = [e for e in entry_points(group="ariadnemem.cli") if e.name == "mcp"]
    assert ep.value == "ariadnemem_integrations.cli:mcp"
    assert "mcp" in [c.name for c in app.registered_commands]
