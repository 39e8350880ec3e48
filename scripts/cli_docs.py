"""Regenerate docs/cli.md from the CLI itself: ``python scripts/cli_docs.py``.

The reference is typer's own rendering of every command's options and help, so it cannot
drift from the code; ``tests/test_cli_reference.py`` fails when the file is stale.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = REPO / "docs" / "cli.md"

PREAMBLE = """\
# CLI reference

Generated from the CLI by `python scripts/cli_docs.py`; `ariadnemem COMMAND --help` shows
the same in the terminal.

Conventions shared by every memory command:

* `--store PATH` (env `ARIADNEMEM_STORE`, default `~/.local/share/ariadnemem`): the memory
  directory. Read commands refuse a directory that holds no memory instead of creating one.
* `--user ID` (env `ARIADNEMEM_USER`, default `default`), `--agent`, `--session`: the scope.
  A command only ever reads or changes that user's memories.
* `--chroma-host HOST` / `--chroma-port PORT` (env `ARIADNEMEM_CHROMA_HOST`,
  `ARIADNEMEM_CHROMA_PORT`): keep the dense index on a Chroma server
  ([deployment guide](guides/deployment.md)).
* `--json`: one JSON document on stdout and nothing else (progress and notes go to stderr).
* Tables fit the terminal they are printed in: the text column gets the room, entry ids
  are shortened to a unique prefix (`history` and `delete` accept it), and below 120
  columns (100 for evidence) the turns and validity fold into a dim line under the text.
  When stdout is not a terminal, each row is one tab-separated line with full ids and
  nothing wrapped, for `grep`, `cut` and `awk`.

Exit codes: `0` success; `1` the command failed (store or LLM error, a bad turn in an
input file, an unknown entry id), with one `Error: ...` line on stderr; `2` usage error
(unknown option, missing file, bad value, `forget` without `--yes` when stdin is not a
terminal); `130` interrupted.

"""


def render() -> str:
    """The whole docs/cli.md text."""
    proc = subprocess.run(
        [sys.executable, "-m", "typer", "ariadnemem_core.cli", "utils", "docs", "--name", "ariadnemem"],
        capture_output=True, text=True, check=True, cwd=REPO,
    )
    body = proc.stdout.split("\n", 1)[1].lstrip("\n")  # typer's own "# `ariadnemem`" title
    return PREAMBLE + "## `ariadnemem`\n\n" + body.replace("\n#", "\n##").rstrip() + "\n"


if __name__ == "__main__":
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET}")
