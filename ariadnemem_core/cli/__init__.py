"""``ariadnemem``: the command line (typer on click, rich output).

    ariadnemem demo [--store DIR] [--picture FILE]
    ariadnemem add FILE [--user U] [--format auto|jsonl|json|locomo] [--conversation ID]
    ariadnemem retrieve "question" [--picture out.png] [--text]
    ariadnemem ask "question" [--base-url URL] [--model NAME]
    ariadnemem entries | history ENTRY_ID | stats | delete ENTRY_ID
    ariadnemem export FILE | import FILE | forget --user U [--yes]
    ariadnemem mcp [--http HOST:PORT] [--per-call-scope]
    ariadnemem bench locomo|ingest|latency|scale ...

Every memory command takes ``--store PATH`` (env ``ARIADNEMEM_STORE``), ``--user ID``,
``--chroma-host/--chroma-port`` and ``--json``. Exit codes: see ``_common``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated

import typer

from . import memory_cmds
from ._common import handle_errors
from .bench_cmds import bench_app
from .plugins import add_plugin_commands

app = typer.Typer(
    name="ariadnemem",
    help="AriadneMem: graph-structured long-term memory for LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        try:
            typer.echo(f"ariadnemem {version('ariadnemem')}")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            typer.echo("ariadnemem (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    _: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                    help="Print the version and exit.")] = False,
) -> None:
    """AriadneMem: graph-structured long-term memory for LLM agents.

    Offline by default (embedded model, chromadb on disk, rule extractor); with
    OPENAI_API_KEY / OPENAI_BASE_URL set, `ask` answers with one LLM call.
    """


@app.command("demo")
@handle_errors
def demo(
    store: Annotated[str | None, typer.Option("--store", help="Keep the demo memory here (default: temporary).")]
    = None,
    picture: Annotated[Path | None, typer.Option(
        "--picture", "-p", help="Also draw one evidence graph (.png, .svg, .html or .mmd).")] = None,
) -> None:
    """Build a memory from a small shipped dialogue and show entries, updates and evidence."""
    from ..demo import run
    from ..store.opening import check_location

    if store is not None:
        check_location(store)  # before Path() folds "postgresql+psycopg://" into a directory name
    memory_cmds.check_picture(picture)
    raise typer.Exit(run(Path(store) if store else None, picture))


memory_cmds.register(app)
# Commands of other installed packages (``ariadnemem mcp`` from ariadnemem_integrations).
add_plugin_commands(app, taken={c.name for c in app.registered_commands if c.name} | {"bench"})
app.add_typer(bench_app, name="bench")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0) or raises SystemExit with a non-zero one."""
    try:
        app(args=list(sys.argv[1:] if argv is None else argv), prog_name="ariadnemem", standalone_mode=True)
    except SystemExit as exc:
        if exc.code in (0, None):
            return 0
        raise
    return 0  # pragma: no cover - standalone mode always exits


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
