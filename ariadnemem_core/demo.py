"""The README's first command: build a memory from a small shipped dialogue and show it.

Prints the entries with their provenance, the update edges, the gate / MERGE / LINK /
ADD counts, and then the evidence graph of a few questions. Runs offline.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from .memory import AriadneMemory
from .models import Turn

QUESTIONS = (
    "When is the kickoff meeting?",
    "What is Maya's phone number?",
    "How many times did Maya go climbing?",
    "Where is Maya staying in Lisbon, and who suggested it?",
)


def demo_turns() -> list[Turn]:
    """The demo dialogue (written for this project; not from any dataset)."""
    raw = resources.files("ariadnemem_core").joinpath("data/demo_dialogue.jsonl").read_text("utf-8")
    turns = []
    for line in raw.splitlines():
        if line.strip():
            row = json.loads(line)
            row["timestamp"] = datetime.fromisoformat(row["timestamp"])
            turns.append(Turn.from_dict(row))
    return turns


def main(argv: list[str] | None = None) -> int:
    """``python -m ariadnemem_core.demo [--store DIR]`` (``ariadnemem demo`` calls ``run``)."""
    parser = argparse.ArgumentParser(prog="ariadnemem demo", description=__doc__)
    parser.add_argument("--store", type=Path, default=None,
                        help="persist the memory here (default: a temporary directory)")
    args = parser.parse_args(argv)
    return run(args.store)


def run(store: Path | None = None, picture: Path | None = None) -> int:
    """Build the demo memory (in ``store``, or a temporary directory) and show it;
    ``picture``: also draw the evidence graph of the multi-hop question there."""
    from .cli.render import print_entries  # the tables of `ariadnemem entries`, fitted to the terminal

    console = Console()
    turns = demo_turns()
    with console.status("Loading the embedding model and building the memory..."):
        mem = AriadneMemory(store)
        if not mem.stats("demo").get("turns_seen"):  # a second run over a kept store shows it as it is
            mem.add(turns, user_id="demo")
        mem.flush()
    with mem:
        entries = mem.entries("demo")
        print_entries(console, entries, f"{len(entries)} entries from {len(turns)} turns")

        edges = mem.edges("demo")
        by_id = {e.id: e for e in entries}
        if edges:
            console.print("[bold]Update edges (old -> new)[/bold]")
            for edge in edges:
                old, new = by_id.get(edge.src), by_id.get(edge.dst)
                if old and new:
                    console.print(f"  {old.text!r}\n    -> {new.text!r}  (cos {edge.similarity:.2f}, "
                                  f"overlap {edge.overlap:.2f})")
        s = mem.stats("demo")
        console.print(
            f"[bold]Gate[/bold] kept {s.get('gate_kept', 0)} / dropped {s.get('gate_dropped', 0)}   "
            f"[bold]Coarsening[/bold] MERGE {s.get('merge', 0)}  LINK {s.get('link', 0)}  ADD {s.get('add', 0)}"
            # A LINK can supersede two old entries that state one value (a request and its
            # confirmation): one decision, one edge each.
            f"  ({len(edges)} update edge{'s' if len(edges) != 1 else ''})"
        )
        for q in QUESTIONS:
            graph = mem.retrieve(q, user_id="demo")
            title = f"{q}  [{graph.token_count()} tokens" + (
                f", fast path: {graph.fast_path}]" if graph.fast_path else "]")
            console.print(Panel(Text(graph.to_text()), title=title, title_align="left"))
            answer = mem.answer(q, user_id="demo")
            console.print(f"  answer ({answer.mode}): {answer.text}\n")
        if picture is not None:
            from .picture import save_picture

            drawn = save_picture(mem.retrieve(QUESTIONS[-1], user_id="demo"), picture)
            console.print(f"evidence graph of {QUESTIONS[-1]!r} drawn to {drawn}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
