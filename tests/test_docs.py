"""The documentation site (mkdocs.yml, docs/): it builds in strict mode, and it cannot
drift from the README, the Config defaults or the benchmark result files.

One strict build (about 3 s) is shared by the tests of this module. Checked:

* ``mkdocs build --strict`` succeeds (broken links, anchors, missing snippet files and
  docstring warnings all fail it) and no snippet marker is left unexpanded;
* every page in the nav exists and was built;
* the quickstart contains the README's two set-up commands verbatim (parsed from the
  README's fenced block), in its source and in the built page;
* every ``Config`` field has exactly one knob row on the concept pages, whose default is
  the code's default and whose paper column names ``Config.paper()``'s value where the
  project departs from the paper;
* every ``bench-results/*/*.md`` is included into a benchmark page, and every table row
  of it appears in that built page; the command recorded in each result JSON is shown.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CONCEPTS = DOCS / "concepts"
BENCH_DOCS = DOCS / "benchmarks"
BENCH_RESULTS = ROOT / "bench-results"
MKDOCS_YML = ROOT / "mkdocs.yml"


# ---------------------------------------------------------------------- helpers
def _nav_pages() -> list[str]:
    """Every page path (relative to docs/) in the nav of mkdocs.yml."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml uses MkDocs' ``!relative`` tag (snippets base path); its value is irrelevant here.
    Loader.add_constructor("!relative", lambda loader, node: loader.construct_scalar(node))
    config = yaml.load(MKDOCS_YML.read_text(encoding="utf-8"), Loader=Loader)

    pages: list[str] = []

    def walk(item: object) -> None:
        if isinstance(item, str):
            pages.append(item)
        elif isinstance(item, list):
            for x in item:
                walk(x)
        elif isinstance(item, dict):
            for v in item.values():
                walk(v)

    walk(config["nav"])
    return pages


def _built(site: Path, page: str) -> Path:
    """The HTML file MkDocs writes for a docs/ page (directory URLs)."""
    stem = page[: -len(".md")]
    if stem == "index" or stem.endswith("/index"):
        return site / stem[: -len("index")] / "index.html"
    return site / stem / "index.html"


def _text(html_doc: str) -> str:
    """The visible text of an HTML page, tags removed and entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", html_doc))


class _Rows(HTMLParser):
    """Table rows of an HTML page as tuples of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, ...]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(tuple(self._row))
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _html_rows(path: Path) -> set[tuple[str, ...]]:
    parser = _Rows()
    parser.feed(path.read_text(encoding="utf-8"))
    return set(parser.rows)


def _md_rows(markdown: str) -> list[tuple[str, ...]]:
    """Table rows of a Markdown text (header and body, separator rows skipped), with the
    inline markup the tables use (bold, code) removed, as the built page shows them."""
    rows = []
    for line in markdown.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
            continue
        rows.append(tuple(" ".join(c.replace("**", "").replace("`", "").split()) for c in cells))
    return rows


def _readme_setup_commands() -> list[str]:
    """The command lines of the README's "Set-up: two commands" fenced block."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set-up: two commands", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README: no ```bash block under 'Set-up: two commands'"
    return [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _knob_rows() -> dict[str, list[list[str]]]:
    """Rows of the concept pages' knob tables (header ``| knob | default | paper | ...``),
    by knob name: ``[page, default cell, paper cell, ...]``."""
    rows: dict[str, list[list[str]]] = {}
    for page in sorted(CONCEPTS.glob("*.md")):
        in_table = False
        for line in page.read_text(encoding="utf-8").splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.startswith("|"):
                in_table = False
            elif cells[:3] == ["knob", "default", "paper"]:
                in_table = True
            elif in_table and not all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
                m = re.fullmatch(r"`(\w+)`", cells[0])
                assert m, f"{page.name}: knob table row without a `name`: {line}"
                rows.setdefault(m.group(1), []).append([page.name, *cells[1:]])
    return rows


# ---------------------------------------------------------------------- the build
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        pytest.skip('mkdocs is not installed: pip install -e ".[docs]"')
    out = tmp_path_factory.mktemp("docs") / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(MKDOCS_YML), "-d", str(out)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    if proc.returncode != 0:
        print(proc.stdout)
        print(proc.stderr)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-4000:]}"
    return out


def test_strict_build_succeeds_and_expands_every_snippet(site: Path) -> None:
    assert (site / "index.html").is_file()
    leftovers = [p.relative_to(site) for p in site.rglob("*.html") if "--8&lt;--" in p.read_text("utf-8")
                 or "--8<--" in p.read_text("utf-8")]
    assert not leftovers, f"unexpanded snippet markers in {leftovers}"


def test_every_nav_page_exists_and_is_built(site: Path) -> None:
    pages = _nav_pages()
    assert len(pages) >= 20, pages
    for page in pages:
        assert (DOCS / page).is_file(), f"nav names {page}, which is not in docs/"
        assert _built(site, page).is_file(), f"{page} was not built ({_built(site, page)})"
    # Every page under docs/ is reachable from the nav (no orphan pages).
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert on_disk <= set(pages), f"pages missing from the nav: {sorted(on_disk - set(pages))}"


def test_quickstart_has_the_readme_setup_commands_verbatim(site: Path) -> None:
    commands = _readme_setup_commands()
    assert len(commands) == 2, commands
    source = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    built = _text(_built(site, "quickstart.md").read_text(encoding="utf-8"))
    for command in commands:
        assert command in source.splitlines(), f"quickstart.md lacks the README command {command!r}"
        assert command in built, f"the built quickstart does not show {command!r}"


def test_every_config_field_is_documented_with_its_default() -> None:
    from ariadnemem_core import Config

    rows = _knob_rows()
    default, paper = Config(), Config.paper()
    for field in dataclasses.fields(Config):
        name = field.name
        found = rows.get(name, [])
        assert len(found) == 1, f"Config.{name}: expected one knob row on the concept pages, found {found}"
        page, default_cell, paper_cell = found[0][0], found[0][1], found[0][2]
        assert default_cell == f"`{getattr(default, name)!r}`", (
            f"{page}: Config.{name} default is {getattr(default, name)!r}, the docs say {default_cell}")
        if getattr(paper, name) != getattr(default, name):
            paper_value = getattr(paper, name)
            shown = repr(paper_value) if not isinstance(paper_value, bool) else None
            # A paper value is a number (shown as written), a switch the paper lacks ("-"),
            # or a switch the paper has ("on" / "off", as Config.paper() sets it).
            switch = ("-", "on" if paper_value else "off")
            assert (shown is not None and shown in paper_cell) or (
                shown is None and any(w in paper_cell.split() for w in switch)), (
                f"{page}: Config.paper() sets {name}={paper_value!r}; the paper column says {paper_cell!r}")
    documented = set(rows)
    known = {f.name for f in dataclasses.fields(Config)}
    assert documented <= known, f"knob rows for names that are not Config fields: {sorted(documented - known)}"


def test_benchmark_pages_include_every_result_table(site: Path) -> None:
    results = sorted(BENCH_RESULTS.glob("*/*.md"))
    assert results, "no bench-results/*/*.md found"
    pages = {p: p.read_text(encoding="utf-8") for p in sorted(BENCH_DOCS.glob("*.md"))}
    for md in results:
        rel = md.relative_to(ROOT).as_posix()
        text = md.read_text(encoding="utf-8")
        # The pages include each file from line 2: line 1 is its own H1 title.
        assert text.startswith("# "), f"{rel} no longer starts with an H1 title; fix the :2 include"
        marker = f'--8<-- "{rel}:2"'
        including = [p for p, src in pages.items() if marker in src]
        assert including, f"no benchmark page includes {rel} ({marker})"
        rows = _md_rows(text)
        assert rows, f"{rel} has no table"
        for page in including:
            built = _html_rows(_built(site, page.relative_to(DOCS).as_posix()))
            missing = [r for r in rows if r not in built]
            assert not missing, f"{page.name}: rows of {rel} missing from the built page: {missing[:3]}"


def test_benchmark_pages_show_the_recorded_commands() -> None:
    pages = {p.name: p.read_text(encoding="utf-8") for p in BENCH_DOCS.glob("*.md")}
    checked = 0
    for js in sorted(BENCH_RESULTS.glob("*/*.json")):
        command = (json.loads(js.read_text(encoding="utf-8")).get("environment") or {}).get("command")
        if not command:
            continue
        shown = " ".join(["ariadnemem", *command[1:]])
        marker = f'--8<-- "{js.parent.relative_to(ROOT).as_posix()}/'
        page = [name for name, src in pages.items() if marker in src]
        assert page, f"no benchmark page includes results from {js.parent.name}"
        assert any(shown in pages[name] for name in page), f"{page}: the recorded command {shown!r} is not shown"
        checked += 1
    assert checked >= 5, checked


def test_wide_code_blocks_wrap(site: Path) -> None:
    """Long command lines and JSON configs wrap instead of being cut at the page width:
    the extra stylesheet sets ``pre-wrap`` on code blocks and every built page links it."""
    css = (site / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    assert re.search(r"pre\s*>\s*code\s*\{[^}]*white-space:\s*pre-wrap", css)
    for page in ("index.md", "guides/mcp.md", "cli.md"):
        assert "stylesheets/extra.css" in _built(site, page).read_text(encoding="utf-8"), page


def test_readme_and_docs_speak_of_the_project_not_of_issue_numbers() -> None:
    """No "(issue 5)" headings or "for issue 9" notes: readers do not know the tracker."""
    pattern = re.compile(r"\bissues?\s*#?\d+", re.I)
    files = [ROOT / "README.md", *DOCS.rglob("*.md")]
    found = [f"{p.relative_to(ROOT)}: {m.group()}" for p in files
             for m in pattern.finditer(p.read_text(encoding="utf-8"))]
    assert not found, found


def test_every_read_path_constant_in_the_architecture_table_exists() -> None:
    """The architecture page's table of read-path constants names each constant with its
    module: a row whose constant was removed from the code would describe a stage that no
    longer runs."""
    import importlib

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \| `(\w+)`", text, re.M)
    assert len(rows) >= 10, rows
    for name, module in rows:
        package = "ariadnemem_core" if module == "synthesis" else "ariadnemem_core.reasoning"
        assert hasattr(importlib.import_module(f"{package}.{module}"), name), (module, name)
