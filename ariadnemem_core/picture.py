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
import math
import os
import re
import textwrap
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

from .files import write_atomic
from .serialize import SerializableFact


class Fact(SerializableFact, Protocol):
    """What a drawing reads of a fact (``evidence.Fact`` has it): its line plus its role."""

    @property
    def role(self) -> str: ...


class EvidenceGraph(Protocol):
    """What a drawing reads of a graph (``evidence.EvidenceGraph`` has it). A protocol, so
    that this module does not import the graph whose methods call it."""

    @property
    def query(self) -> str: ...
    @property
    def facts(self) -> Sequence[Fact]: ...
    @property
    def edges(self) -> Sequence[tuple[str, str, str]]: ...
    @property
    def paths(self) -> Sequence[Sequence[str]]: ...
    @property
    def fast_path(self) -> str | None: ...

#: Role -> (matplotlib marker, colour, legend text). Shape *and* colour differ, so the
#: roles stay distinguishable in grey-scale prints and for colour-blind readers.
ROLE_STYLE: dict[str, tuple[str, str, str]] = {
    "terminal": ("o", "#4c72b0", "terminal (retrieved)"),
    "bridge": ("D", "#dd8452", "bridge (connects terminals)"),
    "update": ("s", "#c44e52", "update (older or newer state)"),
    "pending": ("^", "#55a868", "pending (said, window not extracted yet)"),
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
MERMAID_FILL = {"terminal": "#dbe6f5", "bridge": "#fbe3d2", "update": "#f4d6d7", "pending": "#dcefe0"}

SUFFIXES = {".png": "png", ".svg": "svg", ".html": "html", ".htm": "html", ".mmd": "mermaid", ".mermaid": "mermaid"}


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
    return "\n".join(lines + _mermaid_styles(graph, node, update_links, path_links)) + "\n"


def _mermaid_styles(graph: EvidenceGraph, node: dict[str, str], update_links: list[int],
                    path_links: dict[int, int]) -> list[str]:
    """The diagram's style lines: role classes, superseded facts, update and path links (by position)."""
    lines = []
    for role, fill in MERMAID_FILL.items():
        lines.append(f"  classDef {role} fill:{fill},stroke:{ROLE_STYLE[role][1]},stroke-width:2px,color:#111")
    superseded = [node[f.id] for f in graph.facts if f.superseded_by]
    if superseded:
        lines.append("  classDef superseded stroke-dasharray:5 3,opacity:0.65")
        lines.append(f"  class {','.join(superseded)} superseded")
    if update_links:
        ids = ",".join(map(str, update_links))
        lines.append(f"  linkStyle {ids} stroke:{EDGE_STYLE['update'][0]},stroke-width:2px")
    for k in sorted(set(path_links.values())):
        ids = ",".join(str(n) for n, p in path_links.items() if p == k)
        lines.append(f"  linkStyle {ids} stroke:{PATH_COLOURS[k % len(PATH_COLOURS)]},stroke-width:5px")
    return lines


# ---------------------------------------------------------------- matplotlib drawing
# The picture is a board: one column per stretch of time (a day, part of a busy day, or a
# few quiet days), facts stacked as cards in time order, columns left to right. Geometry is
# in inches and the axes are sized so that one data unit is one inch on both axes: cards
# (inches), text (points) and arcs line up with no rescaling.
MAX_COLUMNS = 6  # 6 columns of CARD_W + GAP ≈ 18 in: at most ~2700 px wide at the default 150 dpi
CARD_W, GAP, ROW_GAP = 2.45, 0.5, 0.24  # card width; gap between columns (edges run there) / cards
BADGE_W, BADGE_X = 0.46, 0.23  # left strip of a card: role marker with the label, the time under it
FONT = 9.0  # node text (pt): 8-10 px when a 15-18 in picture is scaled to 1200 px wide
LINE_H = FONT * 1.22 / 72  # inches per line of node text
TEXT_W = (CARD_W - BADGE_W - 0.16) * 72  # points of text per card line; the rest: hinting makes PNG text ~3% wider
MARGIN_L, MARGIN_R, PAD = 0.55, 0.3, 0.16  # room left of the first column for its arcs; axes padding
MIN_WIDTH, TARGET_ASPECT = 7.0, 2.4
CARD_FILL = {"terminal": "#eef3fa", "bridge": "#fdf0e6", "update": "#fbeaea", "pending": "#eef7f0"}

_CHAR_W: dict[str, float] = {}


def _text_width(text: str) -> float:
    """Width in points of ``text`` at ``FONT`` pt: the sum of per-character advances (cached).

    Glyph advances add up exactly for the default DejaVu Sans (matplotlib does not kern
    it), and measuring character by character keeps wrapping 25 labels well under 10 ms."""
    missing = set(text) - _CHAR_W.keys()
    if missing:
        from matplotlib.font_manager import FontProperties
        from matplotlib.textpath import TextToPath

        measure, prop = TextToPath(), FontProperties(size=FONT)
        for ch in missing:
            _CHAR_W[ch] = measure.get_text_width_height_descent(ch, prop, ismath=False)[0]
    return sum(_CHAR_W[ch] for ch in text)


def _wrap(text: str, max_lines: int) -> list[str]:
    """Greedy word wrap to ``TEXT_W`` points; at most ``max_lines``, the last ending in " …" when cut."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        joined = f"{line} {word}" if line else word
        if _text_width(joined) <= TEXT_W:
            line = joined
            continue
        if _text_width(word) <= TEXT_W:
            lines.append(line)
            line = word
            continue
        line = joined  # a word wider than a card (a URL, an id): fill the line, then break the word
        while _text_width(line) > TEXT_W:
            cut = max((n for n in range(2, len(line) + 1) if _text_width(line[:n]) <= TEXT_W), default=1)
            lines.append(line[:cut])
            line = line[cut:]
    if line:
        lines.append(line)
    if len(lines) > max_lines:
        last = lines[max_lines - 1]
        while last and _text_width(last + " …") > TEXT_W:
            last = last.rsplit(" ", 1)[0] if " " in last else last[:-1]
        lines = [*lines[: max_lines - 1], last.rstrip() + " …"]
    return lines or [""]


def _node_lines(fact: Fact, labels: dict[str, str]) -> list[str]:
    # Stored texts usually name their speaker already ("Caroline: ...", "Melanie's dog ..."): say it once.
    named = not fact.speaker or fact.speaker.casefold() in fact.text.casefold()
    text = one_line(fact.text if named else f"{fact.speaker}: {fact.text}", 200)
    if not fact.superseded_by:
        return _wrap(text, 3)
    return [*_wrap(text, 2), f"(superseded by {labels.get(fact.superseded_by, 'a newer fact')})"]


def _time_order(graph: EvidenceGraph) -> list[Fact]:
    """Dated facts in time order (equal times keep graph order), then the undated ones."""
    dated = sorted((f for f in graph.facts if f.timestamp), key=lambda f: _utc(f.timestamp))  # type: ignore[arg-type]
    return dated + [f for f in graph.facts if not f.timestamp]


def _even(items: list[Fact], k: int) -> list[list[Fact]]:
    """``items`` cut into ``k`` consecutive runs whose lengths differ by at most one."""
    q, r = divmod(len(items), k)
    bounds = list(itertools.accumulate([0] + [q + (i < r) for i in range(k)]))
    return [items[a:b] for a, b in itertools.pairwise(bounds)]


def _size(columns: int, rows: int, card_h: float, head: float = 1.3, foot: float = 0.6) -> tuple[float, float]:
    """Figure width and height (inches) of a board of ``columns`` x ``rows`` cards."""
    width = max(MIN_WIDTH, MARGIN_L + columns * CARD_W + (columns - 1) * GAP + MARGIN_R)
    return width, head + 2 * PAD + rows * card_h + (rows - 1) * ROW_GAP + foot


def _columns(graph: EvidenceGraph, card_h: float) -> list[list[Fact]]:
    """Time columns: consecutive runs of the time order, at most ``MAX_COLUMNS`` of them.

    For every row budget ``r`` two candidates: each day is a column (undated facts are one
    more "day", last), a day with more than ``r`` facts cut into evenly filled columns of
    consecutive times; and the same with consecutive days packed into one column while
    they fit in ``r``. Of the candidates with at most ``MAX_COLUMNS`` columns, the one whose
    picture is nearest ``TARGET_ASPECT`` wins, with a small charge for cutting a day and a
    larger one for mixing days: a day stays one column unless the picture gets much worse.
    """
    days = [list(g) for _, g in itertools.groupby(_time_order(graph), key=_day)]
    best: tuple[float, list[list[Fact]]] | None = None
    for r in range(1, len(graph.facts) + 1):
        for pack in (False, True):
            cols: list[list[Fact]] = []
            cut = mixed = False
            for day in days:
                if len(day) > r:
                    cols += _even(day, -(-len(day) // r))
                    cut = True
                elif (pack and cols and len(cols[-1]) + len(day) <= r
                      and day[0].timestamp is not None and cols[-1][0].timestamp is not None):
                    cols[-1] = cols[-1] + day
                    mixed = True
                else:
                    cols.append(day)
            if len(cols) > MAX_COLUMNS:
                continue
            width, height = _size(len(cols), max(map(len, cols)), card_h)
            score = abs(math.log(width / height / TARGET_ASPECT)) + 0.25 * cut + 0.3 * mixed
            if best is None or score < best[0] - 1e-9:
                best = (score, cols)
    assert best is not None  # r = len(facts) with packing: one dated column and one undated at most
    return best[1]


def _tick(col: list[Fact], clock: bool) -> str:
    """A column's x tick label: its date (and time range), or its first and last date."""
    if col[0].timestamp is None:
        return "undated"
    days = sorted({_day(f) for f in col})
    if len(days) > 1:
        return f"{days[0]} → {days[-1]}"
    if not clock:
        return days[0]
    first, last = col[0].timestamp.strftime("%H:%M"), col[-1].timestamp.strftime("%H:%M")  # type: ignore[union-attr]
    return f"{days[0]}\n{first}" if first == last else f"{days[0]}\n{first}–{last}"


def _empty_figure(title: str) -> Figure:
    """The picture of a graph without facts: the question and a note."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 2.6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(textwrap.fill(title, 80, max_lines=3, placeholder=" …"), fontsize=10, parse_math=False)
    ax.text(0.5, 0.5, "Nothing to show: the evidence graph has no facts.", ha="center", va="center",
            fontsize=11, color="#555555", transform=ax.transAxes)
    return fig


def _legend_handles(graph: EvidenceGraph, shown: list[tuple[str, str, str]], labels: dict[str, str],
                    drawn: set[str]) -> list[Line2D]:
    """One legend entry per role, edge kind and path drawn, and one for superseded facts."""
    from matplotlib.lines import Line2D

    roles = {f.role for f in graph.facts}
    handles = [Line2D([], [], ls="", marker=m, ms=10, mfc=c, mec="#222222", label=t)
               for r, (m, c, t) in ROLE_STYLE.items() if r in roles]
    kinds = {k for _, _, k in shown}
    handles += [Line2D([], [], color=c, ls=ls, lw=lw, marker=">" if head != "-" else None,
                       label="temporal edge (next fact in time)" if k == "temporal" else f"{k} edge")
                for k, (c, ls, lw, head) in EDGE_STYLE.items() if k in kinds]
    handles += [Line2D([], [], color=PATH_COLOURS[k % len(PATH_COLOURS)], lw=8, alpha=0.55,
                       label="path: " + " → ".join(labels[i] for i in p))
                for k, p in enumerate(graph.paths) if set(p) <= drawn]
    if any(f.superseded_by for f in graph.facts):
        handles.append(Line2D([], [], ls="--", color="#999999", marker="o", ms=10, mfc="#999999", alpha=0.5,
                              label="superseded (faded)"))
    return handles


@dataclass(frozen=True, slots=True)
class _Board:
    """Where cards sit on the board (column x positions, (column, row) per fact, card
    height) and how an edge runs between two of them."""

    xs: list[float]
    where: dict[str, tuple[int, int]]
    card_h: float

    def top(self, fid: str) -> float:
        return -PAD - self.where[fid][1] * (self.card_h + ROW_GAP)

    def anchor(self, fid: str, side: str) -> tuple[float, float]:
        x, y = self.xs[self.where[fid][0]], self.top(fid)
        return {"l": (x, y - self.card_h / 2), "r": (x + CARD_W, y - self.card_h / 2),
                "t": (x + BADGE_X, y), "b": (x + BADGE_X, y - self.card_h)}[side]

    def route(self, src: str, dst: str, kind: str, nth: int) -> tuple[tuple[float, float], tuple[float, float], float]:
        """Ends and arc3 bend of an edge. Consecutive facts of a column: a short link down
        the badge line; other pairs in a column: an arc through the gap on its left, wider
        the further apart they are; pairs in different columns: card side to card side,
        under the cards of any column in between."""
        anchor = self.anchor
        (ca, ra), (cb, rb) = self.where[src], self.where[dst]
        if ca == cb:
            if kind in ("temporal", "path") and abs(ra - rb) == 1 and nth == 0:
                return anchor(src, "b" if ra < rb else "t"), anchor(dst, "t" if ra < rb else "b"), 0.0
            a, b = anchor(src, "l"), anchor(dst, "l")
            bulge = min(GAP * 0.85, 0.13 + 0.06 * abs(ra - rb) + 0.09 * nth)
            return a, b, -math.copysign(2 * bulge / abs(b[1] - a[1]), b[1] - a[1])
        a, b = (anchor(src, "r"), anchor(dst, "l")) if ca < cb else (anchor(src, "l"), anchor(dst, "r"))
        # Past a column, bow up by half a row: the middle of the edge runs between two cards, not behind one.
        bow = 0.0 if abs(ca - cb) == 1 else (self.card_h + ROW_GAP) / math.dist(a, b)
        return a, b, -math.copysign(bow + 0.15 * nth, b[0] - a[0])


def draw(graph: EvidenceGraph) -> Figure:
    """The evidence graph as a matplotlib ``Figure`` (not attached to pyplot).

    Columns are stretches of time, left to right, with their dates as x tick labels; a
    column holds the facts of that stretch as cards, earliest on top. A card shows the
    fact's role (marker shape and colour), label, time and wrapped text. Edges between
    columns run from card side to card side through the gaps; edges inside a column arc
    through the gap on its left. Temporal edges join almost every pair of close facts and
    say little, so only those between facts next to each other in time are drawn.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    title = one_line(f"Q: {graph.query}", 300)
    if not graph.facts:
        return _empty_figure(title)

    labels = {f.id: _label(f, i) for i, f in enumerate(graph.facts)}
    texts = {f.id: _node_lines(f, labels) for f in graph.facts}
    card_h = max(0.5, max(map(len, texts.values())) * LINE_H + 0.16)
    cols = _columns(graph, card_h)
    rows = max(map(len, cols))
    where = {f.id: (c, r) for c, col in enumerate(cols) for r, f in enumerate(col)}
    rank = {f.id: i for i, f in enumerate(f for col in cols for f in col)}
    edges = [(s, d, k) for s, d, k in graph.edges if s in where and d in where and s != d]
    shown = [(s, d, k) for s, d, k in edges if k != "temporal" or abs(rank[s] - rank[d]) == 1]
    on_path = _on_path(graph, where.keys())

    # Legend first: its height is part of the figure's.
    handles = _legend_handles(graph, shown, labels, set(where))
    width = _size(len(cols), rows, card_h)[0]
    entry_w = max((0.55 + 0.068 * len(str(h.get_label())) for h in handles), default=1.0)  # handle + 9 pt, inches
    legend_cols = max(1, min(len(handles), int((width - 0.2) // entry_w)))
    foot = 0.2 + 0.27 * -(-len(handles) // legend_cols)
    clock = any(f.timestamp and (f.timestamp.hour, f.timestamp.minute) != (0, 0) for f in graph.facts)
    title_lines = textwrap.wrap(title, max(50, int(width * 10.5)), max_lines=2, placeholder=" …")
    ticks = [_tick(col, clock) for col in cols]
    head = 0.15 + 0.24 * len(title_lines) + 0.26 + 0.22 + 0.17 * max(t.count("\n") + 1 for t in ticks)
    width, height = _size(len(cols), rows, card_h, head, foot)

    fig = Figure(figsize=(width, height))
    fig.text(0.15 / width, 1 - 0.15 / height, "\n".join(title_lines), ha="left", va="top", fontsize=12,
             fontweight="bold", parse_math=False)
    hidden = len(edges) - len(shown)
    summary = f"{len(graph.facts)} fact{'s' * (len(graph.facts) != 1)}, {len(shown)} edge{'s' * (len(shown) != 1)}" + (
        f" ({hidden} more temporal edges, between facts not next to each other in time, not drawn)" if hidden else "")
    fig.text(0.15 / width, 1 - (0.2 + 0.24 * len(title_lines)) / height, summary, ha="left", va="top",
             fontsize=9, color="#555555")
    board = height - head - foot
    ax = fig.add_axes((0, foot / height, 1, board / height))
    ax.set_xlim(0, width)
    ax.set_ylim(-board, 0)
    for side in ("left", "right", "top", "bottom"):
        ax.spines[side].set_visible(False)
    content = len(cols) * CARD_W + (len(cols) - 1) * GAP
    left = MARGIN_L + (width - MARGIN_L - MARGIN_R - content) / 2
    xs = [left + c * (CARD_W + GAP) for c in range(len(cols))]

    board_at = _Board(xs, where, card_h)
    top, route = board_at.top, board_at.route

    def stroke(ends: tuple[tuple[float, float], tuple[float, float], float], **style: Any) -> None:
        a, b, rad = ends
        ax.add_patch(FancyArrowPatch(a, b, connectionstyle=f"arc3,rad={rad:.3f}", shrinkA=0, shrinkB=0,
                                     mutation_scale=13, **style))

    # Column bands, then path highlights, edges, cards and their text, bottom to top.
    for x in xs:
        ax.add_patch(FancyBboxPatch((x - 0.1, -board + 0.06), CARD_W + 0.2, board - 0.12,
                                    boxstyle="round,pad=0,rounding_size=0.1", fc="#f4f5f7", ec="none", zorder=0))
    drawn: dict[frozenset[str], int] = defaultdict(int)  # parallel edges fan out instead of overlapping
    routes: dict[frozenset[str], tuple[tuple[float, float], tuple[float, float], float]] = {}
    for src, dst, kind in shown:
        pair = frozenset((src, dst))
        ends = route(src, dst, kind, drawn[pair])
        routes.setdefault(pair, ends)
        colour, ls, lw, head_style = EDGE_STYLE.get(kind, ("#999999", "-.", 1.0, "-"))
        stroke(ends, color=colour, linestyle=ls, linewidth=lw, arrowstyle=head_style,
               zorder=1.5 if kind == "temporal" else 2)
        drawn[pair] += 1
    for k, a, b in _path_pairs(graph):
        stroke(routes.get(frozenset((a, b))) or route(a, b, "path", 0), color=PATH_COLOURS[k % len(PATH_COLOURS)],
               linewidth=9, alpha=0.55, arrowstyle="-", capstyle="round", zorder=1)

    for col in cols:
        multi_day = len({_day(f) for f in col}) > 1
        for f in col:
            stamp = "" if not f.timestamp else f.timestamp.strftime("%m-%d") if multi_day else (
                f.timestamp.strftime("%H:%M") if clock else "")
            _draw_card(ax, f, (xs[where[f.id][0]], top(f.id)), card_h, labels[f.id], texts[f.id], stamp,
                       on_path.get(f.id))

    ax.xaxis.tick_top()
    ax.set_xticks([x + CARD_W / 2 for x in xs], ticks, fontsize=9)
    ax.tick_params(axis="x", length=4, color="#9a9a9a", pad=3)
    ax.set_yticks([])
    ax.annotate("", xy=(width - 0.12, 0), xytext=(0.12, 0), annotation_clip=False,
                arrowprops={"arrowstyle": "-|>", "color": "#9a9a9a", "lw": 1.0, "shrinkA": 0, "shrinkB": 0})
    ax.text(width - 0.12, 0.06, "time", ha="right", va="bottom", fontsize=8, color="#777777")
    legend = fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, foot / height), ncols=legend_cols,
                        fontsize=9, frameon=False, handlelength=2.6)
    for text in legend.get_texts():  # path entries repeat fact labels: literal, never mathtext
        text.set_parse_math(False)
    return fig


def _on_path(graph: EvidenceGraph, shown: Iterable[str]) -> dict[str, int]:
    """Fact id -> the first drawn path it lies on (a path with a fact not drawn is skipped)."""
    drawn = set(shown)
    on_path: dict[str, int] = {}
    for k, p in enumerate(graph.paths):
        if set(p) <= drawn:
            for fid in p:
                on_path.setdefault(fid, k)
    return on_path


def _draw_card(ax: Any, f: Fact, at: tuple[float, float], card_h: float, label: str, lines: list[str],
               stamp: str, path: int | None) -> None:
    """One fact's card with its top-left corner ``at``: a highlight when it lies on path
    ``path``, the role badge with its label and time ``stamp``, the wrapped text; dashed
    and faded when the fact is superseded."""
    from matplotlib.patches import FancyBboxPatch

    x, y = at
    marker, colour, _ = ROLE_STYLE.get(f.role, ("o", "#999999", ""))
    faded = bool(f.superseded_by)
    if path is not None:
        ax.add_patch(FancyBboxPatch((x, y - card_h), CARD_W, card_h, zorder=2.5, ec="none", alpha=0.6,
                                    fc=PATH_COLOURS[path % len(PATH_COLOURS)],
                                    boxstyle="round,pad=0.05,rounding_size=0.1"))
    ax.add_patch(FancyBboxPatch((x, y - card_h), CARD_W, card_h, boxstyle="round,pad=0,rounding_size=0.07",
                                fc=CARD_FILL.get(f.role, "#f4f4f4"), ec=colour, lw=1.4,
                                ls="--" if faded else "-", zorder=3))
    badge_y = y - (0.19 if stamp else card_h / 2)
    ax.scatter([x + BADGE_X], [badge_y], s=330 if marker == "D" else 460, marker=marker, c=colour,
               edgecolors="#222222", linewidths=1.1, zorder=4, alpha=0.45 if faded else 1.0)
    ax.text(x + BADGE_X, badge_y, label, ha="center", va="center", fontsize=7.5, fontweight="bold",
            color="white", zorder=5, parse_math=False)
    if stamp:
        ax.text(x + BADGE_X, y - 0.415, stamp, ha="center", va="center", fontsize=7, color="#555555",
                zorder=5)
    ax.text(x + BADGE_W, y - card_h / 2, "\n".join(lines), ha="left", va="center", fontsize=FONT,
            linespacing=1.15, color="#777777" if faded else "#111111", zorder=5, parse_math=False)


def _render(graph: EvidenceGraph, fmt: str, dpi: float = 100) -> bytes:
    """Bytes of the drawing, through an explicit Agg or SVG canvas (thread-safe, no pyplot)."""
    fig = draw(graph)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    (FigureCanvasAgg if fmt == "png" else FigureCanvasSVG)(fig)
    buf = io.BytesIO()
    # Fixed metadata: no creation date, so the same graph gives the same bytes.
    meta = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
    fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta, bbox_inches="tight", pad_inches=0.1)
    return buf.getvalue()


def to_png(graph: EvidenceGraph, path: str | os.PathLike[str], *, dpi: float = 150) -> Path:
    """Draw the graph to a PNG file; returns the path written."""
    return write_atomic(path, _render(graph, "png", dpi))


def to_svg(graph: EvidenceGraph, path: str | os.PathLike[str]) -> Path:
    """Draw the graph to an SVG file (text drawn as paths: no font needed to view it); returns the path."""
    return write_atomic(path, _render(graph, "svg"))


# ---------------------------------------------------------------- HTML
_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:110em}
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.5em}
.query{font-size:1.05em;background:#f4f4f4;padding:.5em .8em;border-left:4px solid #4c72b0;white-space:pre-wrap}
figure{margin:0;overflow-x:auto}figure svg{max-width:100%;height:auto}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ccc;padding:.25em .5em;vertical-align:top}
th{background:#f0f0f0;text-align:left}td.text{max-width:40em;white-space:pre-wrap}code{font-size:.9em}
.terminal{color:#4c72b0}.bridge{color:#dd8452}.update{color:#c44e52}.pending{color:#55a868}.role{font-weight:600}
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
    return write_atomic(path, page.encode("utf-8"))


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
        return write_atomic(target, to_mermaid(graph).encode("utf-8"))
    raise InvalidInputError("path", f"unsupported picture suffix {target.suffix or '(none)'!r}; "
                                    f"supported: {', '.join(SUFFIXES)}")
