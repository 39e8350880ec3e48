"""Pictures of an EvidenceGraph: Mermaid text, PNG / SVG drawings and one self-contained HTML page.

``to_text()`` is what a generator reads; these are for the person debugging a retrieval:
which facts were kept, in what role, how they connect over time and which reasoning paths
were mined. Everything shown is untrusted user data, so every format escapes it:
Mermaid labels use Mermaid entity codes, matplotlib text is drawn with ``parse_math=False``
(a stored "costs $5 and $6" is not mathtext), HTML goes through ``html.escape``.

matplotlib is imported inside the drawing functions (it costs ~0.3 s), and only its
object-oriented API is used (a ``Figure`` with an explicit Agg or SVG canvas, never
pyplot): no global backend switch, so drawing is safe inside servers and worker threads.

Files are written to a temporary sibling, then renamed over the target: a reader never
sees half a picture. The parent directory must exist (``FileNotFoundError`` otherwise):
silently creating directories from a mistyped path would hide the typo.
"""

from __future__ import annotations

import html
import io
import itertools
import os
import re
import textwrap
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .evidence import EvidenceGraph, Fact

#: Role -> (matplotlib marker, colour, legend text). Shape *and* colour differ, so the
#: roles stay distinguishable in grey-scale prints and for colour-blind readers.
ROLE_STYLE: dict[str, tuple[str, str, str]] = {
    "terminal": ("o", "#4c72b0", "terminal (retrieved)"),
    "bridge": ("D", "#dd8452", "bridge (connects terminals)"),
    "update": ("s", "#c44e52", "update (newer state)"),
}
#: Edge kind -> (colour, line style, width, arrow style). Only update edges carry an
#: arrow: they are the one kind whose direction (old -> new) the reader must see.
EDGE_STYLE: dict[str, tuple[str, str, float, str]] = {
    "entity": ("#7f7f7f", "-", 1.2, "-"),
    "temporal": ("#a0a0a0", ":", 1.4, "-"),
    "bridge": ("#dd8452", "-", 2.2, "-"),
    "update": ("#c44e52", "--", 1.8, "-|>"),
}
#: Highlighter colours of the reasoning paths, drawn as thick translucent strokes under the edges.
PATH_COLOURS = ["#ffd400", "#5ad1ff", "#9be22d", "#ff8ad8", "#b39ddb"]
MERMAID_FILL = {"terminal": "#dbe6f5", "bridge": "#fbe3d2", "update": "#f4d6d7"}

SUFFIXES = {".png": "png", ".svg": "svg", ".html": "html", ".htm": "html", ".mmd": "mermaid", ".mermaid": "mermaid"}

# Inches per time column / per stacked fact: room for a ~26-character, four-line label.
COL_W, ROW_H = 1.9, 1.15


# ---------------------------------------------------------------- shared helpers
def one_line(text: str, limit: int) -> str:
    """Whitespace (newlines, tabs, U+2028) collapsed to single spaces, cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _utc(ts: datetime) -> datetime:
    """Naive timestamps read as UTC (as ``Turn`` does), so naive and aware facts can be ordered together."""
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts


def _day(fact: Fact) -> str:
    return fact.timestamp.strftime("%Y-%m-%d") if fact.timestamp else "undated"


def _label(fact: Fact, index: int) -> str:
    return fact.label or f"F{index + 1}"


def _path_pairs(graph: EvidenceGraph) -> list[tuple[int, str, str]]:
    """(path index, a, b) for every consecutive pair of every path whose facts are all shown."""
    ids = {f.id for f in graph.facts}
    return [(k, a, b) for k, p in enumerate(graph.paths) if set(p) <= ids for a, b in itertools.pairwise(p)]


def _write(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write via a temporary sibling and ``os.replace`` (atomic on one file system)."""
    target = Path(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot write {target}: directory {target.parent} does not exist")
    # open(..., "xb") rather than mkstemp: the file gets the umask's usual mode, not 0600.
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


# ---------------------------------------------------------------- Mermaid
_MERMAID_SAFE = set(" .,:!?'+=_@/~^*-")
_MERMAID_NAMED = {'"': "#quot;", "&": "#amp;", "<": "#lt;", ">": "#gt;"}


def mermaid_escape(text: str) -> str:
    """Text safe inside a Mermaid ``["..."]`` label.

    A whitelist, not a blacklist: letters, digits, spaces and harmless punctuation stay;
    every other character (quotes, brackets, pipes, ``;``, ``%``, ``#``, backticks, ``$``,
    ``<``, control and bidi characters) becomes an entity code such as ``#quot;`` or
    ``#93;``, which Mermaid renders as the character but never parses as syntax. Newlines
    are collapsed first, so a label cannot end a statement either.
    """
    out = []
    for ch in " ".join(str(text).split()):
        if ch.isalnum() or ch in _MERMAID_SAFE:
            out.append(ch)
        else:
            out.append(_MERMAID_NAMED.get(ch, f"#{ord(ch)};"))
    return "".join(out)


def to_mermaid(graph: EvidenceGraph) -> str:
    """A ``flowchart LR`` diagram: one node per fact, role classes, edges styled by kind, paths highlighted."""
    node = {f.id: f"f{i + 1}" for i, f in enumerate(graph.facts)}
    lines = ["flowchart LR", f"  %% query: {mermaid_escape(one_line(graph.query, 200))}"]
    for i, f in enumerate(graph.facts):
        head = f"{mermaid_escape(_label(f, i))} · {mermaid_escape(_day(f))}"
        cls = f":::{f.role}" if f.role in ROLE_STYLE else ""
        lines.append(f'  {node[f.id]}["{head}<br/>{mermaid_escape(one_line(f.text, 60))}"]{cls}')
    arrows = {"update": "-.->", "bridge": "==>"}
    links: list[tuple[str, str]] = []  # (src, dst) per emitted link; linkStyle refers to links by position
    update_links: list[int] = []
    for src, dst, kind in graph.edges:
        if src not in node or dst not in node:
            continue
        kind_text = re.sub(r"[^a-z_]", "", str(kind).lower()) or "edge"
        if kind == "update":
            update_links.append(len(links))
        lines.append(f"  {node[src]} {arrows.get(kind, '---')}|{kind_text}| {node[dst]}")
        links.append((src, dst))
    path_links: dict[int, int] = {}  # link position -> path index
    for k, a, b in _path_pairs(graph):
        at = next((n for n, (s, d) in enumerate(links) if {s, d} == {a, b}), None)
        if at is None:  # a path step with no drawn edge still has to be visible
            at = len(links)
            lines.append(f"  {node[a]} -->|path| {node[b]}")
            links.append((a, b))
        path_links.setdefault(at, k)
    for role, fill in MERMAID_FILL.items():
        lines.append(f"  classDef {role} fill:{fill},stroke:{ROLE_STYLE[role][1]},stroke-width:2px,color:#111")
    superseded = [node[f.id] for f in graph.facts if f.superseded_by]
    if superseded:
        lines.append("  classDef superseded stroke-dasharray:5 3,opacity:0.65")
        lines.append(f"  class {','.join(superseded)} superseded")
    if update_links:
        at = ",".join(map(str, update_links))
        lines.append(f"  linkStyle {at} stroke:{EDGE_STYLE['update'][0]},stroke-width:2px")
    for k in sorted(set(path_links.values())):
        at = ",".join(str(n) for n, p in path_links.items() if p == k)
        lines.append(f"  linkStyle {at} stroke:{PATH_COLOURS[k % len(PATH_COLOURS)]},stroke-width:5px")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- matplotlib drawing
def _layout(graph: EvidenceGraph) -> tuple[dict[str, tuple[float, float]], list[str]]:
    """Node positions in data units (x = time column, y = slot) and the x tick labels.

    Columns are the distinct timestamps in time order, undated facts last. Within a column
    facts are ordered by the mean height of their already placed neighbours (one
    barycentre sweep, left to right), which removes most edge crossings for the price of
    a sort; ``nx.multipartite_layout`` would place the same grid but rescale it to a unit
    box, while here one unit is one column / one row so the figure size follows the data.
    """
    g = nx.Graph()
    g.add_nodes_from(f.id for f in graph.facts)
    g.add_edges_from((s, d) for s, d, _ in graph.edges if s in g and d in g and s != d)
    columns: dict[datetime | None, list[Fact]] = defaultdict(list)
    for f in graph.facts:
        columns[_utc(f.timestamp) if f.timestamp else None].append(f)
    keys = sorted(k for k in columns if k is not None) + ([None] if None in columns else [])
    days = defaultdict(int)
    for k in keys:
        if k is not None:
            days[columns[k][0].timestamp.strftime("%Y-%m-%d")] += 1
    pos: dict[str, tuple[float, float]] = {}

    def height(f: Fact) -> float:
        placed = [pos[n][1] for n in g.neighbors(f.id) if n in pos]
        return sum(placed) / len(placed) if placed else 0.0

    ticks = []
    for x, key in enumerate(keys):
        facts = columns[key]
        order = sorted(facts, key=lambda f: -height(f))  # stable: time order breaks ties
        for i, f in enumerate(order):
            pos[f.id] = (float(x), (len(order) - 1) / 2 - i)
        if key is None:
            ticks.append("undated")
        else:
            ts = facts[0].timestamp
            day = ts.strftime("%Y-%m-%d")
            ticks.append(day + ts.strftime("\n%H:%M") if days[day] > 1 else day)
    return pos, ticks


def _node_text(fact: Fact, labels: dict[str, str]) -> str:
    # Stored texts usually name their speaker already ("Caroline: ...", "Melanie's dog ..."): say it once.
    named = not fact.speaker or fact.speaker.casefold() in fact.text.casefold()
    text = fact.text if named else f"{fact.speaker}: {fact.text}"
    lines = textwrap.wrap(one_line(text, 90), 26, max_lines=3, placeholder=" …") or [""]
    if fact.superseded_by:
        lines.append(f"(superseded by {labels.get(fact.superseded_by, 'a newer fact')})")
    return "\n".join(lines)


def draw(graph: EvidenceGraph) -> Figure:
    """The evidence graph as a matplotlib ``Figure`` (not attached to pyplot)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    title = one_line(f"Q: {graph.query}", 300)
    if not graph.facts:
        fig = Figure(figsize=(6.5, 2.6), layout="constrained")
        ax = fig.add_subplot()
        ax.set_axis_off()
        ax.set_title(textwrap.fill(title, 80, max_lines=3, placeholder=" …"), fontsize=10, parse_math=False)
        ax.text(0.5, 0.5, "Nothing to show: the evidence graph has no facts.", ha="center", va="center",
                fontsize=11, color="#555555", transform=ax.transAxes)
        return fig

    pos, ticks = _layout(graph)
    labels = {f.id: _label(f, i) for i, f in enumerate(graph.facts)}
    rows = max(sum(1 for p in pos.values() if p[0] == x) for x in range(len(ticks)))
    width = max(6.5, COL_W * len(ticks) + 1.2)
    fig = Figure(figsize=(width, max(3.8, ROW_H * rows + 2.3)), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(textwrap.fill(title, max(60, int(width * 12)), max_lines=3, placeholder=" …"),
                 fontsize=10, loc="left", parse_math=False)

    def arrow(src: str, dst: str, rad: float, **style: Any) -> FancyArrowPatch:
        """An edge. Edges between neighbouring columns are straight; longer or same-column
        ones arc *above* the nodes (labels hang below them), flatter the longer they are."""
        (x1, y1), (x2, y2) = pos[src], pos[dst]
        span = abs(x2 - x1)
        bend = (0.0 if span == 1 else min(0.35, 0.9 / span) if span else 1.2) + rad  # 1.2: around the label
        rad = bend if x1 > x2 or (span == 0 and y1 < y2) else -bend
        patch = FancyArrowPatch((x1, y1), (x2, y2), connectionstyle=f"arc3,rad={rad:.3f}", shrinkA=9, shrinkB=9,
                                mutation_scale=12, **style)
        ax.add_patch(patch)
        return patch

    drawn: dict[frozenset[str], int] = defaultdict(int)  # parallel edges fan out instead of overlapping
    bends: dict[frozenset[str], float] = {}
    for src, dst, kind in graph.edges:
        if src not in pos or dst not in pos or src == dst:
            continue
        pair = frozenset((src, dst))
        colour, ls, lw, head = EDGE_STYLE.get(kind, ("#999999", "-.", 1.0, "-"))
        bends.setdefault(pair, 0.12 * drawn[pair])
        arrow(src, dst, 0.12 * drawn[pair], color=colour, linestyle=ls, linewidth=lw, arrowstyle=head, zorder=2)
        drawn[pair] += 1
    for k, a, b in _path_pairs(graph):
        arrow(a, b, bends.get(frozenset((a, b)), 0.0), color=PATH_COLOURS[k % len(PATH_COLOURS)], linewidth=9,
              alpha=0.55, arrowstyle="-", capstyle="round", zorder=1)

    for f in graph.facts:
        x, y = pos[f.id]
        marker, colour, _ = ROLE_STYLE.get(f.role, ("o", "#999999", ""))
        ax.scatter([x], [y], s=430, marker=marker, c=colour, edgecolors="#222222", linewidths=1.2, zorder=3,
                   alpha=0.45 if f.superseded_by else 1.0)
        ax.text(x, y, labels[f.id], ha="center", va="center", fontsize=7, fontweight="bold", color="white",
                zorder=4, parse_math=False)
        ax.annotate(_node_text(f, labels), (x, y), xytext=(0, -13), textcoords="offset points", ha="center",
                    va="top", fontsize=7, zorder=4, parse_math=False, annotation_clip=False,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85})

    ax.set_xticks(range(len(ticks)), ticks, fontsize=8)
    ax.set_yticks([])
    ax.set_xlim(-0.6, len(ticks) - 0.4)
    ax.set_ylim(-(rows - 1) / 2 - 0.75, (rows - 1) / 2 + 0.7)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("time →", fontsize=8, color="#555555")

    roles = {f.role for f in graph.facts}
    handles = [Line2D([], [], ls="", marker=m, ms=9, mfc=c, mec="#222222", label=t)
               for r, (m, c, t) in ROLE_STYLE.items() if r in roles]
    kinds = {k for s, d, k in graph.edges if s in pos and d in pos}
    handles += [Line2D([], [], color=c, ls=ls, lw=lw, marker=">" if head != "-" else None, label=f"{k} edge")
                for k, (c, ls, lw, head) in EDGE_STYLE.items() if k in kinds]
    handles += [Line2D([], [], color=PATH_COLOURS[k % len(PATH_COLOURS)], lw=8, alpha=0.55,
                       label="path: " + " → ".join(labels[i] for i in p))
                for k, p in enumerate(graph.paths) if set(p) <= set(pos)]
    if any(f.superseded_by for f in graph.facts):
        handles.append(Line2D([], [], ls="", marker="o", ms=9, mfc="#999999", alpha=0.45, label="superseded (faded)"))
    fig.legend(handles=handles, loc="outside lower center", ncols=min(4, len(handles)), fontsize=8, frameon=False)
    return fig


def _render(graph: EvidenceGraph, fmt: str, dpi: float = 100) -> bytes:
    """Bytes of the drawing, through an explicit Agg or SVG canvas (thread-safe, no pyplot)."""
    fig = draw(graph)
    if fmt == "png":
        from matplotlib.backends.backend_agg import FigureCanvasAgg as Canvas
    else:
        from matplotlib.backends.backend_svg import FigureCanvasSVG as Canvas
    Canvas(fig)
    buf = io.BytesIO()
    # Fixed metadata: no creation date, so the same graph gives the same bytes.
    meta = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
    fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
    return buf.getvalue()


def to_png(graph: EvidenceGraph, path: str | os.PathLike[str], *, dpi: float = 150) -> Path:
    """Draw the graph to a PNG file; returns the path written."""
    return _write(path, _render(graph, "png", dpi))


def to_svg(graph: EvidenceGraph, path: str | os.PathLike[str]) -> Path:
    """Draw the graph to an SVG file (text drawn as paths: no font needed to view it); returns the path."""
    return _write(path, _render(graph, "svg"))


# ---------------------------------------------------------------- HTML
_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:110em}
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.5em}
.query{font-size:1.05em;background:#f4f4f4;padding:.5em .8em;border-left:4px solid #4c72b0;white-space:pre-wrap}
figure{margin:0;overflow-x:auto}figure svg{max-width:100%;height:auto}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ccc;padding:.25em .5em;vertical-align:top}
th{background:#f0f0f0;text-align:left}td.text{max-width:40em;white-space:pre-wrap}code{font-size:.9em}
.terminal{color:#4c72b0}.bridge{color:#dd8452}.update{color:#c44e52}.role{font-weight:600}
"""


def _svg_inline(graph: EvidenceGraph) -> str:
    """The SVG drawing without its XML prolog and DOCTYPE, ready to sit inside HTML."""
    svg = _render(graph, "svg").decode("utf-8")
    return svg[svg.index("<svg"):]


def to_html(graph: EvidenceGraph, path: str | os.PathLike[str]) -> Path:
    """One self-contained page: query, inline SVG drawing, facts, edges, paths, Mermaid source.

    No external scripts, stylesheets, fonts or images, so the file can be mailed or
    attached to a bug report and opens offline. Every stored string is ``html.escape``-d.
    """
    e = html.escape
    labels = {f.id: _label(f, i) for i, f in enumerate(graph.facts)}

    def ref(entry_id: str | None) -> str:
        if not entry_id:
            return ""
        return f"{e(labels[entry_id])} " * (entry_id in labels) + f"<code>{e(entry_id)}</code>"

    fact_rows = "\n".join(
        f'<tr><td>{e(labels[f.id])}</td><td><code>{e(f.id)}</code></td><td class="role {e(f.role)}">{e(f.role)}</td>'
        f"<td>{e(f.timestamp.isoformat(sep=' ', timespec='minutes')) if f.timestamp else 'undated'}</td>"
        f"<td>{e(f.speaker or '')}</td><td class=\"text\">{e(f.text)}</td>"
        f"<td>{', '.join(f'<code>{e(t)}</code>' for t in f.source_turn_ids)}</td><td>{ref(f.superseded_by)}</td>"
        f"<td>{f.score:.3f}</td></tr>"
        for f in graph.facts)
    edge_rows = "\n".join(f"<tr><td>{ref(s)}</td><td>{ref(d)}</td><td>{e(str(k))}</td></tr>" for s, d, k in graph.edges)
    path_items = "\n".join(
        "<li>" + " → ".join(e(labels.get(i, i)) for i in p) + "</li>" for p in graph.paths)
    fast = f"<p>Answered by the fast path <code>{e(graph.fast_path)}</code>.</p>" if graph.fast_path else ""
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Evidence graph: {e(one_line(graph.query, 80))}</title>
<style>{_CSS}</style></head>
<body>
<h1>Evidence graph</h1>
<p class="query">{e(graph.query)}</p>
{fast}
<figure>{_svg_inline(graph)}</figure>
<h2>Facts ({len(graph.facts)})</h2>
<table><tr><th>label</th><th>id</th><th>role</th><th>date</th><th>speaker</th><th>text</th>
<th>source turns</th><th>superseded by</th><th>score</th></tr>
{fact_rows}
</table>
<h2>Edges ({len(graph.edges)})</h2>
<table><tr><th>from</th><th>to</th><th>kind</th></tr>
{edge_rows}
</table>
<h2>Paths ({len(graph.paths)})</h2>
<ol>
{path_items}
</ol>
<details><summary>Mermaid source</summary><pre>{e(to_mermaid(graph))}</pre></details>
</body></html>
"""
    return _write(path, page.encode("utf-8"))


# ---------------------------------------------------------------- dispatch
def save_picture(graph: EvidenceGraph, path: str | os.PathLike[str]) -> Path:
    """Write ``graph`` in the format its suffix names (.png, .svg, .html/.htm, .mmd/.mermaid)."""
    from .errors import InvalidInputError

    target = Path(path)
    fmt = SUFFIXES.get(target.suffix.lower())
    if fmt == "png":
        return to_png(graph, target)
    if fmt == "svg":
        return to_svg(graph, target)
    if fmt == "html":
        return to_html(graph, target)
    if fmt == "mermaid":
        return _write(target, to_mermaid(graph).encode("utf-8"))
    raise InvalidInputError("path", f"unsupported picture suffix {target.suffix or '(none)'!r}; "
                                    f"supported: {', '.join(SUFFIXES)}")
