"""Evidence-graph pictures: Mermaid, PNG, SVG, HTML, and the suffix dispatch (picture.py)."""

from __future__ import annotations

import itertools
import random
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.patches import FancyArrowPatch

from ariadnemem_core import AriadneMemory, Turn, picture
from ariadnemem_core.embedding import HashEmbedder
from ariadnemem_core.evidence import EvidenceGraph, Fact
from ariadnemem_core.picture import MAX_COLUMNS, draw, mermaid_escape, save_picture

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
    for role in ("terminal", "bridge", "update", "pending"):
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
    assert len(text.splitlines()) == 2 + 6 + 6 + 4 + 2 + 3  # header+comment, nodes, edges, classDefs, ...
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
    assert w1 > 300 and h1 > 150
    assert w2 > w1 * 1.5 and h2 > h1  # more columns *and* more cards per column
    stacked = chain_graph(6)
    for f in stacked.facts:
        f.timestamp = T0  # six facts at one time: they stack, the picture grows downwards
    _, h3 = png_size(stacked.to_png(tmp_path / "stacked.png", dpi=80))
    assert h3 > h1 * 1.2


def board_graph(n: int = 25, days: int = 3) -> EvidenceGraph:
    """``n`` facts at ``n`` distinct times spread over ``days`` days, long texts, temporal edges
    between every pair less than 6 h apart (as retrieval makes them), entity edges, a path."""
    per_day = -(-n // days)
    facts = [Fact(f"b{i}", f"Fact {i}: Maya told Leo about the hotel in Alfama, the climbing gym near it, the teal "
                           f"chalk bag and the flight to Lisbon booked for April.", T0 + timedelta(
                      days=i // per_day, minutes=13 * (i % per_day)), [f"t{i}"], 0.5,
                  "bridge" if i % 5 == 2 else "terminal", f"F{i + 1}", speaker="Maya") for i in range(n)]
    edges = [(a.id, b.id, "temporal") for a, b in itertools.combinations(facts, 2)
             if abs(a.timestamp - b.timestamp) < timedelta(hours=6)]
    edges += [(f"b{i}", f"b{(i * 7 + 3) % n}", "entity") for i in range(0, n, 2) if (i * 7 + 3) % n != i]
    return EvidenceGraph("Where is Maya staying in Lisbon?", facts, edges, [["b0", "b12", "b24"][: max(1, n // 9)]])


def tick_texts(graph: EvidenceGraph) -> list[str]:
    return [t.get_text() for t in draw(graph).axes[0].get_xticklabels()]


def test_a_full_graph_is_bounded_in_width_and_wider_than_high(tmp_path: Path):
    """25 facts at 25 times over 3 days: at most MAX_COLUMNS time columns, not one per timestamp."""
    g = board_graph()
    w, h = png_size(g.to_png(tmp_path / "board.png"))  # the default dpi, as in a README
    assert 1500 <= w <= 2800 and h < w
    assert 1.8 <= w / h <= 3.5
    ticks = tick_texts(g)
    assert 2 <= len(ticks) <= MAX_COLUMNS
    # The columns cover the first and the last fact date, in time order.
    assert ticks[0].startswith("2024-03-01") and "2024-03-03" in ticks[-1]
    assert ticks == sorted(ticks)


def test_columns_are_consecutive_runs_of_time():
    g = board_graph()
    random.Random(7).shuffle(g.facts)  # graph order must not matter, only timestamps
    g.facts.append(Fact("u", "An undated fact.", None, ["tu"], 0.1, "terminal", "F26"))
    g.facts[0].timestamp = g.facts[0].timestamp.replace(tzinfo=None)  # naive counts as UTC
    cols = picture._columns(g, 0.6)
    assert 1 < len(cols) <= MAX_COLUMNS
    flat = [f for col in cols for f in col]
    assert sorted(f.id for f in flat) == sorted(f.id for f in g.facts)
    dated = flat[:-1]
    assert [picture._utc(f.timestamp) for f in dated] == sorted(picture._utc(f.timestamp) for f in dated)
    assert cols[-1] == [g.facts[-1]]  # undated facts: their own column, last
    assert tick_texts(g)[-1] == "undated"


def test_small_graphs_keep_one_column_per_day():
    g = chain_graph(3)
    assert tick_texts(g) == ["2024-03-01\n10:00", "2024-03-02\n10:00", "2024-03-03\n10:00"]
    same_day = chain_graph(3)
    for i, f in enumerate(same_day.facts):
        f.timestamp = T0 + timedelta(minutes=7 * i)
    assert tick_texts(same_day) == ["2024-03-01\n10:00–10:14"]
    for f in same_day.facts:
        f.timestamp = f.timestamp.replace(hour=0, minute=0)  # date-only data: no clock times shown
    assert tick_texts(same_day) == ["2024-03-01"]


def test_only_temporal_edges_between_neighbours_in_time_are_drawn():
    g = board_graph(6, days=1)  # six facts within 65 minutes: 15 temporal edges
    g.edges = [e for e in g.edges if e[2] == "temporal"]
    g.paths = []
    fig = draw(g)
    arrows = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]
    assert len(g.edges) == 15 and len(arrows) == 5  # F1-F2, F2-F3, ... only
    assert any("10 more temporal edges" in t.get_text() for t in fig.texts)


def test_fact_labels_are_wrapped_to_their_card():
    g = board_graph()
    g.facts[3].text = "x" * 300  # one unbreakable word
    g.facts[4].text = "short"
    fig = draw(g)
    fig.set_dpi(150)  # to_png's default: glyph hinting makes text widths vary a little with the dpi
    canvas = FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    node_texts = [t for t in fig.axes[0].texts if t.get_fontsize() == picture.FONT]
    assert len(node_texts) == len(g.facts)
    limit = (picture.CARD_W - picture.BADGE_W) * fig.dpi
    for t in node_texts:
        assert t.get_text().count("\n") <= 2
        assert t.get_window_extent(renderer).width <= limit, t.get_text()
    assert any(t.get_text().endswith(" …") for t in node_texts)
    assert any(t.get_text() == "Maya: short" for t in node_texts)  # the speaker, named once
    assert any(t.get_text().startswith("Maya: xxxxxxxx") for t in node_texts)  # a long word fills lines


def test_every_fact_label_is_in_the_svg_and_html(tmp_path: Path):
    g = board_graph()
    svg = g.to_svg(tmp_path / "b.svg").read_text(encoding="utf-8")
    page = g.to_html(tmp_path / "b.html").read_text(encoding="utf-8")
    comments = set(re.findall(r"<!-- (.*?) -->", svg))  # matplotlib keeps each drawn text line as a comment
    for f in g.facts:
        assert f.label in comments
        assert f"<td>{f.label}</td>" in page


def test_the_demo_sized_graph_is_wide_not_a_strip(tmp_path: Path):
    """The demo's shape: 22 facts, days of 8, 5, 4 and 5 facts a minute apart."""
    sizes = [8, 5, 4, 5]
    starts = [T0 + timedelta(days=d, hours=h) for d, h in ((3, -1), (4, 8.5), (7, 9), (11, 2.25))]
    facts = [Fact(f"d{k}{i}", f"Maya said thing {i} of day {k} about Lisbon and Ana.", start + timedelta(minutes=i),
                  [f"t{k}{i}"], 0.5, "terminal", "") for k, (n, start) in enumerate(zip(sizes, starts, strict=True))
             for i in range(n)]
    for i, f in enumerate(facts):
        f.label = f"F{i + 1}"
    g = EvidenceGraph("Where is Maya staying in Lisbon, and who suggested it?", facts,
                      [(a.id, b.id, "temporal") for a, b in itertools.combinations(facts, 2)
                       if abs(a.timestamp - b.timestamp) < timedelta(hours=6)])
    w, h = png_size(g.to_png(tmp_path / "demo.png"))
    assert 2000 <= w <= 2600 and 2 <= w / h <= 3.2


def test_rich_png_and_dollar_text_render(tmp_path: Path):
    g = rich_graph()
    g.query = "Costs $5 and $6? Also \\frac{a}{b} and $\\undefinedmacro$"
    g.facts[0].text = "$x^2$ and a lone $ and \\alpha$"
    w, h = png_size(g.to_png(tmp_path / "rich.png", dpi=60))
    assert w > 300 and h > 150
    fig = draw(g)
    texts = [*fig.texts, *fig.axes[0].texts, *fig.legends[0].get_texts()]
    dollars = [t for t in texts if "$" in t.get_text()]
    assert len(dollars) >= 3 and not any(t.get_parse_math() for t in dollars)  # title, F1, F4: literal text


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
