"""What the memory commands print: tables fitted to the terminal, plain lines elsewhere.

On a terminal, a table is laid out for the console's width: the text column gets the room
(ids are shortened to a unique prefix, dates lose their time, and columns that would
squeeze the text are folded into a dim line under it, then dropped). When stdout is not a
terminal (a pipe, a file), each row is one line of tab-separated fields with full ids and
no wrapping, for ``grep``, ``cut`` and ``awk``; ``--json`` stays the format for programs.

Stored text is user data: it is always wrapped in ``rich.text.Text`` (never parsed as
markup), so a memory reading "[red]x[/red]" or "[link=...]" prints literally.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from ..evidence import EvidenceGraph
    from ..models import Entry

ROLE_STYLE = {"terminal": "bold cyan", "bridge": "bold magenta", "update": "bold yellow"}
#: From this width on, every column has its own place.
WIDE = 120
#: Below this width, only the id and the text keep a column; the rest is folded under the text.
NARROW = 72
#: The text column never gets fewer characters than this (others are folded first).
MIN_TEXT = 30
#: Shortened ids keep at least this many characters ("e-" and 8 hex digits).
SHORT_ID = 10
#: Turn ids shown in a cell before "+N more".
MAX_TURNS = 3


def _date(ts: Any, with_time: bool = False) -> str:
    if ts is None:
        return "-"
    return str(ts.strftime("%Y-%m-%d %H:%M" if with_time else "%Y-%m-%d"))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _one_line(text: str) -> str:
    """A field for a tab-separated line: tabs and line breaks become spaces."""
    return re.sub(r"[\t\r\n]+", " ", text)


def _turns(ids: Sequence[str], limit: int | None = MAX_TURNS) -> str:
    if limit is None or len(ids) <= limit:
        return ", ".join(ids) or "-"
    return ", ".join(ids[:limit]) + f" +{len(ids) - limit} more"


def short_ids(ids: Iterable[str]) -> dict[str, str]:
    """Each id's shortest prefix of at least :data:`SHORT_ID` characters that no other of
    ``ids`` starts with (``history`` and ``delete`` accept such a prefix). In sorted
    order, the ids that share the longest prefix with an id are its neighbours."""
    unique = sorted(set(ids))
    out: dict[str, str] = {}
    for k, i in enumerate(unique):
        need = SHORT_ID
        for j in (k - 1, k + 1):
            if 0 <= j < len(unique):
                need = max(need, _common_prefix(i, unique[j]) + 1)
        out[i] = i[:need]
    return out


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _table(title: str) -> Table:
    return Table(title=Text(title, style="bold"), title_justify="left")


def _text_column(table: Table) -> None:
    table.add_column("text", overflow="fold", ratio=1, min_width=MIN_TEXT)


# ---------------------------------------------------------------------- entries
def entries_table(entries: Sequence[Entry], title: str, width: int,
                  among: Sequence[Entry] | None = None) -> Table:
    """Entries for a terminal of ``width`` columns (see the module docstring); ids are
    shortened to prefixes unique ``among`` these entries (default: the ones shown)."""
    short = short_ids(e.id for e in (among or entries))
    wide, narrow = width >= WIDE, width < NARROW
    table = _table(title)
    table.add_column("id", no_wrap=True)
    if not narrow:
        table.add_column("date", no_wrap=True)
        table.add_column("speaker", no_wrap=True, max_width=12, overflow="ellipsis")
    _text_column(table)
    if wide:
        table.add_column("turns", overflow="fold", max_width=16)
        table.add_column("valid until", no_wrap=True)
    for e in entries:
        text = Text(e.text)
        if e.superseded_by:
            text.append(f"  (superseded by {short.get(e.superseded_by, e.superseded_by)})", style="dim")
        until = "current" if e.superseded_by is None else _date(e.valid_until, with_time=True)
        if wide:
            table.add_row(Text(short[e.id]), Text(_date(e.timestamp, with_time=True)), Text(e.speaker or "-"),
                          text, Text(_turns(e.source_turn_ids)), Text(until, style="dim" if e.superseded_by else ""))
            continue
        folded = [f"turns {_turns(e.source_turn_ids)}"]
        if e.superseded_by:
            folded.append(f"valid until {until}")
        if narrow:
            folded[:0] = [_date(e.timestamp, with_time=True), e.speaker or "-"]
            table.add_row(Text(short[e.id]), text.append("\n" + " · ".join(folded), style="dim"))
        else:
            table.add_row(Text(short[e.id]), Text(_date(e.timestamp)), Text(e.speaker or "-"),
                          text.append("\n" + " · ".join(folded), style="dim"))
    return table


def entries_plain(entries: Sequence[Entry], title: str) -> str:
    """Entries as tab-separated lines under a title and a header line (full ids)."""
    lines = [title, "\t".join(("id", "date", "speaker", "text", "turns", "valid until", "superseded by"))]
    for e in entries:
        until = "current" if e.superseded_by is None else _date(e.valid_until, with_time=True)
        lines.append("\t".join((e.id, _date(e.timestamp, with_time=True), _one_line(e.speaker or "-"),
                                _one_line(e.text), _turns(e.source_turn_ids, None), until, e.superseded_by or "-")))
    return "\n".join(lines)


def print_entries(console: Console, entries: Sequence[Entry], title: str,
                  among: Sequence[Entry] | None = None) -> None:
    """Entries as a table fitted to a terminal (see :func:`entries_table`), else as plain lines."""
    if console.is_terminal:
        console.print(entries_table(entries, title, console.width, among))
    else:
        _plain(console, entries_plain(entries, title))


# ---------------------------------------------------------------------- evidence
def evidence_table(graph: EvidenceGraph, width: int) -> Table:
    """Facts in time order with role, date, provenance and update markers."""
    labels = {f.id: f.label for f in graph.facts}
    wide, narrow = width >= WIDE - 20, width < NARROW
    table = _table(f"Evidence for: {graph.query}")
    table.add_column("fact", no_wrap=True)
    if not narrow:
        table.add_column("role", no_wrap=True)
        table.add_column("date", no_wrap=True)
    _text_column(table)
    if wide:
        table.add_column("turns", overflow="fold", max_width=16)
    for f in graph.facts:
        text = Text(f.text)
        if f.superseded_by:
            text.append(f"  (superseded by {labels.get(f.superseded_by, f.superseded_by)})", style="dim")
        role = Text(f.role, style=ROLE_STYLE.get(f.role, ""))
        if wide:
            table.add_row(Text(f.label), role, Text(_date(f.timestamp)), text, Text(_turns(f.source_turn_ids)))
        elif narrow:
            fold = " · ".join((f.role, _date(f.timestamp), f"turns {_turns(f.source_turn_ids)}"))
            table.add_row(Text(f.label), text.append("\n" + fold, style="dim"))
        else:
            table.add_row(Text(f.label), role, Text(_date(f.timestamp)),
                          text.append(f"\nturns {_turns(f.source_turn_ids)}", style="dim"))
    return table


def evidence_plain(graph: EvidenceGraph) -> str:
    """Facts as tab-separated lines under the question and a header line."""
    labels = {f.id: f.label for f in graph.facts}
    lines = [f"Evidence for: {_one_line(graph.query)}", "\t".join(("fact", "role", "date", "text", "turns",
                                                                   "superseded by"))]
    for f in graph.facts:
        newer = labels.get(f.superseded_by, f.superseded_by) if f.superseded_by else "-"
        lines.append("\t".join((f.label, f.role, _date(f.timestamp), _one_line(f.text),
                                _turns(f.source_turn_ids, None), newer)))
    return "\n".join(lines)


def evidence_footer(graph: EvidenceGraph, *, cold: bool = False) -> Text:
    """Edges by kind, reasoning paths, cost: one short block under the table.

    ``cold``: the retrieve was the first of its process (the time includes loading the
    embedding model and the libraries), which a command-line call always is.
    """
    labels = {f.id: f.label for f in graph.facts}
    kinds = Counter(k for _, _, k in graph.edges)
    out = Text()
    out.append("edges: ", style="bold")
    out.append(", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none")
    for path in graph.paths:
        if all(i in labels for i in path):
            out.append("\npath: ", style="bold")
            out.append(" -> ".join(labels[i] for i in path))
    s = graph.stats
    cost = [f"{graph.token_count()} tokens"]
    if graph.fast_path:
        cost.append(f"fast path: {graph.fast_path}")
    if "bridges" in s:
        cost.append(_plural(int(s["bridges"]), "bridge"))
    if "ms_total" in s:
        ms = f"{s['ms_total']:.1f} ms"
        cost.append(f"{ms} (cold start: the first retrieve of a process loads the model)" if cold else ms)
    out.append("\n" + " · ".join(cost), style="dim")
    return out


def print_evidence(console: Console, graph: EvidenceGraph, *, cold: bool = False) -> None:
    """The evidence graph: a table fitted to a terminal (else plain lines) and the footer."""
    if console.is_terminal:
        console.print(evidence_table(graph, console.width))
    else:
        _plain(console, evidence_plain(graph))
    say(console, evidence_footer(graph, cold=cold))


# ---------------------------------------------------------------------- counters
def counters_table(rows: Mapping[str, Any]) -> Table:
    table = Table(show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value", justify="right")
    for key, value in rows.items():
        table.add_row(Text(str(key)), Text(f"{value:,}" if isinstance(value, int) else str(value)))
    return table


def print_counters(console: Console, title: str, rows: Mapping[str, Any]) -> None:
    """A title line (wrapped between words at the console's width, not into the narrow
    table's, so a path in it stays whole) and the counters: a two-column table on a
    terminal, else ``key<TAB>value`` lines."""
    say(console, Text(title, style="bold"))
    if console.is_terminal:
        console.print(counters_table(rows))
    else:
        _plain(console, "\n".join(f"{k}\t{_one_line(str(v))}" for k, v in rows.items()))


def say(console: Console, text: Text | str) -> None:
    """One message: wrapped at word boundaries on a terminal, left whole elsewhere."""
    console.print(text, soft_wrap=not console.is_terminal)


def _plain(console: Console, text: str) -> None:
    """Lines as they are, written past rich (which would expand the tabs and wrap)."""
    console.file.write(text + "\n")
    console.file.flush()
