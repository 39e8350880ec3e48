"""Rich renderings for the terminal: evidence graphs, entries, counters.

Stored text is user data: it is always wrapped in ``rich.text.Text`` (never parsed as
markup), so a memory reading "[red]x[/red]" or "[link=...]" prints literally.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from ..evidence import EvidenceGraph
    from ..models import Entry

ROLE_STYLE = {"terminal": "bold cyan", "bridge": "bold magenta", "update": "bold yellow"}


def _date(ts: Any, with_time: bool = False) -> str:
    if ts is None:
        return "-"
    return str(ts.strftime("%Y-%m-%d %H:%M" if with_time else "%Y-%m-%d"))


def evidence_table(graph: EvidenceGraph) -> Table:
    """Facts in time order with role, date, provenance and update markers."""
    labels = {f.id: f.label for f in graph.facts}
    table = Table(title=Text(f"Evidence for: {graph.query}", style="bold"), title_justify="left",
                  show_lines=False, expand=False)
    table.add_column("fact", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("date", no_wrap=True)
    table.add_column("text", overflow="fold", ratio=1)
    table.add_column("turns", overflow="fold")
    for f in graph.facts:
        text = Text(f.text)
        if f.superseded_by:
            text.append(f"  (superseded by {labels.get(f.superseded_by, f.superseded_by)})", style="dim")
        table.add_row(Text(f.label), Text(f.role, style=ROLE_STYLE.get(f.role, "")), Text(_date(f.timestamp)),
                      text, Text(", ".join(f.source_turn_ids)))
    return table


def evidence_footer(graph: EvidenceGraph) -> Text:
    """Edges by kind, reasoning paths, cost: one short block under the table."""
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
        cost.append(f"{s['bridges']} bridges")
    if "ms_total" in s:
        cost.append(f"{s['ms_total']:.1f} ms")
    out.append("\n" + " · ".join(cost), style="dim")
    return out


def entries_table(entries: Iterable[Entry], title: str) -> Table:
    table = Table(title=Text(title, style="bold"), title_justify="left")
    table.add_column("id", no_wrap=True)
    table.add_column("date", no_wrap=True)
    table.add_column("speaker", no_wrap=True)
    table.add_column("text", overflow="fold", ratio=1)
    table.add_column("turns", overflow="fold")
    table.add_column("valid until", overflow="fold")
    for e in entries:
        until = "current" if e.superseded_by is None else (
            f"{_date(e.valid_until, with_time=True) if e.valid_until else '?'} (by {e.superseded_by})")
        table.add_row(Text(e.id), Text(_date(e.timestamp, with_time=True)), Text(e.speaker or "-"), Text(e.text),
                      Text(", ".join(e.source_turn_ids)), Text(until, style="dim" if e.superseded_by else ""))
    return table


def counters_table(title: str, rows: Mapping[str, Any]) -> Table:
    table = Table(title=Text(title, style="bold"), title_justify="left", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value", justify="right")
    for key, value in rows.items():
        table.add_row(Text(str(key)), Text(f"{value:,}" if isinstance(value, int) else str(value)))
    return table
