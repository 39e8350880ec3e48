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


#: The benchmarks measure the whole distribution: the reliability bench attacks the adapters
#: too, importing each inside a ``try`` (skipped without its extra). No other core module
#: may import the integrations.
BENCHES = REPO / "ariadnemem_core" / "bench"


def test_the_core_never_imports_the_integrations() -> None:
    bad = [(str(p.relative_to(REPO)), m) for p, m, _ in _imports("ariadnemem_core")
           if m.split(".")[0] == "ariadnemem_integrations" and BENCHES not in p.parents]
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



def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


#: The only private names of other libraries the package touches, each in one function,
#: because no public API does the job: (file, function) -> (names, why). Each has a test
#: that fails on a release that renames them.
PRIVATE_REACHES = {
    ("ariadnemem_core/llm.py", "guard_http_client"): (
        {"_client", "_mounts", "_transport", "_pool", "_network_backend"},
        "the LLM call's deadline and size guard must see the body as it streams in and every "
        "socket read; the SDK builds its own httpx2 client, whose transport and connection "
        "pool take no such hook (tests/test_llm_client.py checks it is in place)"),
    ("ariadnemem_core/store/dense.py", "_forget_system"): (
        {"_identifier_to_system", "_identifier_to_refcount"},
        "chromadb caches a failed system per folder; its public reset drops every store's "
        "(tests/test_no_hang_no_loss.py checks the per-folder drop)"),
}


def _defined_in(tree: ast.AST) -> set[str]:
    """Every name a module defines itself (functions, classes, variables, attributes of self)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            names.add(node.attr)
    return names


def _private_reaches(path: Path) -> list[tuple[str, str]]:
    """(enclosing function, name) of every ``x._name`` / ``getattr(x, "_name")`` in ``path``
    whose name the module does not define itself (``self._name`` is the class's own, or a
    base class's inside the package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = _defined_in(tree)
    found = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else where
            name = None
            if isinstance(child, ast.Attribute) and not (isinstance(child.value, ast.Name)
                                                         and child.value.id in ("self", "cls")):
                name = child.attr
            elif isinstance(child, ast.Call) and isinstance(child.func, ast.Name) \
                    and child.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(child.args) > 1 \
                    and isinstance(child.args[1], ast.Constant) and isinstance(child.args[1].value, str):
                name = child.args[1].value
            if name is not None and _private(name) and name not in own:
                found.append((inner, name))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_no_private_name_crosses_a_module() -> None:
    """A private name stays in its module: no ``from x import _name``, no ``x._name`` of
    something defined elsewhere, here or in another library (except :data:`PRIVATE_REACHES`).
    A private module (``cli/_common.py``) serves its own package only."""
    bad = []
    for pkg in OURS:
        for path, module, names in _imports(pkg):
            rel = str(path.relative_to(REPO))
            bad += [(rel, f"import {module}.{n}") for n in names if _private(n)]
            parts = module.split(".")
            for i, part in enumerate(parts):
                if _private(part) and part != "__future__" and (
                        parts[0] not in OURS or not rel.startswith("/".join(parts[:i]) + "/")):
                    bad.append((rel, f"import {module}"))
    allowed = {(file, where, name) for (file, where), (names, _) in PRIVATE_REACHES.items() for name in names}
    for pkg in OURS:
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            bad += [(rel, f"{where}: .{name}") for where, name in _private_reaches(path)
                    if (rel, where, name) not in allowed]
    assert not bad


def test_the_scan_sees_a_private_reach(tmp_path: Path) -> None:
    """The scan above finds what it forbids (or it would pass on anything)."""
    path = tmp_path / "m.py"
    path.write_text("import other\n\ndef f(x):\n    other._hidden(x)\n    getattr(x, '_secret')\n"
                    "    return x._own\n\ndef _own():\n    pass\n", encoding="utf-8")
    assert _private_reaches(path) == [("f", "_hidden"), ("f", "_secret")]

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
