"""Evidence-graph pictures: Mermaid, PNG, SVG, HTML, and the suffix dispatch (picture.py)."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ariadnemem_core import AriadneMemory, Turn
from ariadnemem_core.embedding import HashEmbedder
from ariadnemem_core.evidence import EvidenceGraph, Fact
from ariadnemem_core.picture import mermaid_escape, save_picture

HOSTILE = '"]; click F1 call evil() %% <script>alert(1)</script> $5 and $6 -->'
T0 = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)


def rich_graph() -> EvidenceGraph:
    """All three roles, all four edge kinds, two paths, a superseded fact, an undated fact, hostile text."""
    day = lambda n: T0 + timedelta(days=n)  # noqa: E731
    facts = [
        Fact("e1", "Caroline started painting lessons with a patient teacher.", day(0), ["t1"], 0.9, "terminal",
             "F1", speaker="Caroline"),
        Fact("e2", "The meeting is at 2 pm.", day(0), ["t2"], 0.7, "terminal", "F2", superseded_by="e5",
             speaker="Mel"),
        Fact("e3", "Olga, who teaches Caroline, runs her studio in Riga.", day(2), ["t3"], 0.5, "bridge", "F3"),
        Fact("e4", "Weekend lessons cost $5 and $6 in Riga.", day(4), ["t4", "t4b"], 0.8, "terminal", "F4"),
        Fact("e5", "The meeting moved to 3 pm.", day(5), ["t5"], 0.6, "update", "F5", speaker="Mel"),
        Fact("e6", HOSTILE, None, ["t6<img src=x>"], 0.4, "terminal", "F6", speaker="Eve <b>"),
    ]
    edges = [("e1", "e3", "bridge"), ("e3", "e4", "bridge"), ("e1", "e2", "temporal"), ("e2", "e5", "update"),
             ("e1", "e4", "entity"), ("e4", "e6", "entity")]
    return EvidenceGraph(f"What did Caroline say? {HOSTILE}", facts, edges, [["e1", "e3", "e4"], ["e2", "e5"]])


def chain_graph(n: int) -> EvidenceGraph:
    facts = [Fact(f"c{i}", f"Fact number {i} about the garden.", T0 + timedelta(days=i), [f"t{i}"], 0.5,
                  "terminal", f"F{i + 1}") for i in range(n)]
    edges = [(f"c{i}", f"c{i + 1}", "entity") for i in range(n - 1)]
    return EvidenceGraph("garden?", facts, edges, [])


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, dict(attrs)))


def tag_attrs(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    return parser.seen


def tag_links(page: str) -> list[str]:
    return [v or "" for _, attrs in tag_attrs(page) for k, v in attrs.items() if k in ("src", "href", "xlink:href")]


#: Document structure plus matplotlib's SVG vocabulary: no script, img, link, iframe, object or foreignobject.
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "figure", "table", "tr", "th",
                "td", "code", "ol", "li", "details", "summary", "pre", "svg", "metadata", "rdf:rdf", "cc:work",
                "dc:type", "dc:format", "defs", "g", "path", "use", "clippath", "rect"}


def mermaid_nodes(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"\s+f\d+\[", line)]


# ---------------------------------------------------------------- Mermaid
def test_mermaid_structure_roles_and_edge_styles():
    g = rich_graph()
    text = g.to_mermaid()
    assert text.startswith("flowchart LR\n")
    nodes = mermaid_nodes(text)
    assert len(nodes) == len(g.facts)
    for i, fact in enumerate(g.facts):
        assert nodes[i].lstrip().startswith(f'f{i + 1}["{fact.label} · ')
        assert nodes[i].endswith(f":::{fact.role}")
    assert "f6[\"F6 · undated<br/>" in text
    for role in ("terminal", "bridge", "update"):
        assert re.search(rf"classDef {role} fill:#[0-9a-f]{{6}}", text)
    edge_lines = [line.strip() for line in text.splitlines() if re.match(r"\s+f\d+ \S+\|", line)]
    assert "f2 -.->|update| f5" in edge_lines
    assert "f1 ==>|bridge| f3" in edge_lines
    assert "f1 ---|temporal| f2" in edge_lines and "f1 ---|entity| f4" in edge_lines
    assert len(edge_lines) == len(g.edges)  # every path step already has an edge: no extra links
    # Links are numbered in order: the first path (e1-e3-e4) is links 0 and 1, the second (e2->e5) link 3.
    assert re.search(r"linkStyle 0,1 stroke:#\w+,stroke-width:5px", text)
    assert re.search(r"linkStyle 3 stroke:#\w+,stroke-width:5px", text)
    assert "class f2 superseded" in text


def test_mermaid_hostile_text_cannot_escape_its_label():
    text = rich_graph().to_mermaid()
    node = mermaid_nodes(text)[5]
    label = node[node.index('["') + 2: node.rindex('"]')]
    assert '"' not in label and "]" not in label and "[" not in label and "|" not in label
    assert "%%" not in label and "<script" not in label and "`" not in label and "-->" not in label
    assert "#quot;#93;#59; click F1 call evil#40;#41;" in label
    assert node.count('"]') == 1  # only the closing one we wrote
    # Whole document: the only raw "<" is our own <br/>, no line break smuggled in, no extra statements.
    assert "<script" not in text and "%% <" not in text
    assert len(text.splitlines()) == 2 + 6 + 6 + 3 + 2 + 3  # header+comment, nodes, edges, classDefs, ...
    hostile = mermaid_escape("a\nb\r\nc`d$e&#x;")
    assert "\n" not in hostile and "`" not in hostile and "$" not in hostile
    assert re.fullmatch(r"[A-Za-z ]*(?:(?:#\w+;)[A-Za-z ]*)*", hostile)


def test_mermaid_adds_a_link_for_a_path_step_without_an_edge():
    g = chain_graph(3)
    g.edges = []
    g.paths = [["c0", "c2"]]
    text = g.to_mermaid()
    assert "f1 -->|path| f3" in text and "linkStyle 0 stroke" in text


# ---------------------------------------------------------------- PNG / SVG
def test_png_is_a_real_image_that_grows_with_the_graph(tmp_path: Path):
    small = chain_graph(2).to_png(tmp_path / "small.png", dpi=80)
    large = chain_graph(12).to_png(tmp_path / "large.png", dpi=80)
    assert small == tmp_path / "small.png"
    (w1, h1), (w2, h2) = png_size(small), png_size(large)
    assert w1 > 300 and h1 > 200
    assert w2 > w1 * 2 and h2 >= h1
    stacked = chain_graph(6)
    for f in stacked.facts:
        f.timestamp = T0  # one column, six rows: the picture must grow downwards
    _, h3 = png_size(stacked.to_png(tmp_path / "stacked.png", dpi=80))
    assert h3 > h1 * 1.5


def test_rich_png_and_dollar_text_render(tmp_path: Path):
    g = rich_graph()
    g.query = "Costs $5 and $6? Also \\frac{a}{b} and $\\undefinedmacro$"
    g.facts[0].text = "$x^2$ and a lone $ and \\alpha$"
    w, h = png_size(g.to_png(tmp_path / "rich.png", dpi=60))
    assert w > 300 and h > 150


def test_empty_graph_renders_a_picture(tmp_path: Path):
    g = EvidenceGraph("What is nothing?")
    assert min(png_size(g.to_png(tmp_path / "empty.png", dpi=60))) > 100
    root = ET.parse(g.to_svg(tmp_path / "empty.svg")).getroot()
    assert root.tag.endswith("svg")
    page = g.to_html(tmp_path / "empty.html").read_text(encoding="utf-8")
    assert "Facts (0)" in page and "What is nothing?" in page and "<svg" in page
    assert g.to_mermaid().startswith("flowchart LR")
    assert mermaid_nodes(g.to_mermaid()) == []


def test_svg_is_valid_xml_and_holds_no_raw_markup(tmp_path: Path):
    path = rich_graph().to_svg(tmp_path / "g.svg")
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    raw = path.read_text(encoding="utf-8")
    assert "<script" not in raw.lower() and "<img" not in raw.lower()


def test_missing_parent_directory_is_a_clear_error(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        chain_graph(2).to_svg(tmp_path / "no" / "such" / "g.svg")
    assert not (tmp_path / "no").exists()


# ---------------------------------------------------------------- HTML
def test_html_is_self_contained_and_escaped(tmp_path: Path):
    g = rich_graph()
    page = g.to_html(tmp_path / "g.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<svg" in page and "<?xml" not in page
    for f in g.facts:
        assert f"<code>{f.id}</code>" in page and f"<td>{f.label}</td>" in page
    for tid in ("t1", "t4b"):
        assert f"<code>{tid}</code>" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page.lower()
    assert "t6&lt;img src=x&gt;" in page and "<img" not in page.lower()
    assert "Eve &lt;b&gt;" in page
    assert "&quot;]; click F1 call evil()" in page
    # No external resources: every src/href of every tag (the inline SVG's too) is an in-document fragment.
    links = tag_links(page)
    assert links and all(v.startswith("#") for v in links), [v for v in links if not v.startswith("#")]
    assert {t for t, _ in tag_attrs(page)} <= ALLOWED_TAGS
    assert "@import" not in page and not re.search(r"url\((?!#)", page)
    assert "F1 → F3 → F4" in page and "F2 → F5" in page
    assert page.count("<tr>") == 1 + len(g.facts) + 1 + len(g.edges)
    assert "F5 <code>e5</code>" in page  # superseded_by shown with its label


# ---------------------------------------------------------------- dispatch
@pytest.mark.parametrize(("suffix", "magic"), [(".png", b"\x89PNG"), (".svg", b"<?xml"), (".html", b"<!DOCTYPE"),
                                               (".HTM", b"<!DOCTYPE"), (".mmd", b"flowchart LR"),
                                               (".mermaid", b"flowchart LR")])
def test_save_picture_dispatches_on_suffix(tmp_path: Path, suffix: str, magic: bytes):
    g = chain_graph(3)
    out = save_picture(g, tmp_path / f"out{suffix}")
    assert out == tmp_path / f"out{suffix}"
    assert out.read_bytes().startswith(magic)
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary file left behind


@pytest.mark.parametrize("name", ["out.jpg", "out", "out.png.txt"])
def test_save_picture_rejects_other_suffixes(tmp_path: Path, name: str):
    with pytest.raises(ValueError, match=r"\.png.*\.svg.*\.html.*\.mmd"):
        save_picture(chain_graph(2), tmp_path / name)
    assert not any(tmp_path.iterdir())


# ---------------------------------------------------------------- a graph from a real memory
def test_pictures_of_a_retrieved_graph(tmp_path: Path):
    with AriadneMemory(tmp_path / "mem", embedder=HashEmbedder()) as mem:
        mem.add([
            Turn("Caroline", "I started painting lessons with Olga last week.", T0, "a"),
            Turn("Melanie", "Olga runs her studio in Riga, right?", T0 + timedelta(hours=1), "b"),
            Turn("Caroline", "Yes, weekend painting lessons are in Riga and cost $40.", T0 + timedelta(days=2), "c"),
            Turn("Melanie", "My dog Rex learned to fetch the ball.", T0 + timedelta(days=3), "d"),
        ], user_id="u1")
        mem.flush()
        g = mem.retrieve("Where are Caroline's painting lessons?", user_id="u1")
    assert g.facts
    text = g.to_mermaid()
    assert len(mermaid_nodes(text)) == len(g.facts)
    assert "<script" not in text
    w, h = png_size(g.to_png(tmp_path / "real.png", dpi=60))
    assert w > 300 and h > 150
    page = save_picture(g, tmp_path / "real.html").read_text(encoding="utf-8")
    for f in g.facts:
        assert f.id in page and f"<td>{f.label}</td>" in page


def test_matplotlib_is_lazy_and_pyplot_never_used(tmp_path: Path):
    """Package import must not pay for matplotlib; drawing must not touch pyplot's global state."""
    script = (
        "import sys, ariadnemem_core\n"
        "assert 'matplotlib' not in sys.modules\n"
        "from ariadnemem_core.evidence import EvidenceGraph\n"
        f"EvidenceGraph('q').to_png({str(tmp_path / 'x.png')!r}, dpi=40)\n"
        "assert 'matplotlib' in sys.modules and 'matplotlib.pyplot' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
