"""What every command shares: the store/user/server options, opening the memory, output
consoles, and turning library errors into messages and exit codes a shell user expects.

Exit codes: 0 success; 1 the command failed (store, LLM, bad data in an input file,
unknown entry id); 2 usage error (unknown option, missing file, bad value); 130
interrupted (Ctrl-C). Errors go to stderr as one ``Error: ...`` line, never a traceback;
results go to stdout (``--json``: one JSON document and nothing else).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from ..memory import AriadneMemory

ENV_STORE = "ARIADNEMEM_STORE"
ENV_USER = "ARIADNEMEM_USER"
ENV_CHROMA_HOST = "ARIADNEMEM_CHROMA_HOST"
ENV_CHROMA_PORT = "ARIADNEMEM_CHROMA_PORT"


def default_store() -> Path:
    """``$XDG_DATA_HOME/ariadnemem`` (``~/.local/share/ariadnemem``): one memory per
    machine user unless ``--store`` / ``$ARIADNEMEM_STORE`` says otherwise, so ``add``
    and ``retrieve`` find the same memory from any directory."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ariadnemem"


StoreOpt = Annotated[str | None, typer.Option(
    "--store", envvar=ENV_STORE, show_default=False, rich_help_panel="Memory",
    help="Memory directory or postgresql:// URL (env ARIADNEMEM_STORE; default ~/.local/share/ariadnemem).")]
UserOpt = Annotated[str, typer.Option(
    "--user", "-u", envvar=ENV_USER, rich_help_panel="Memory", help="User id: whose memories.")]
#: ``stats`` and ``export``: one user, or (the default) the whole store.
AllUsersOpt = Annotated[str | None, typer.Option(
    "--user", "-u", envvar=ENV_USER, rich_help_panel="Memory", help="Only this user (default: every user).")]
AgentOpt = Annotated[str | None, typer.Option("--agent", rich_help_panel="Memory", help="Agent id (scope).")]
SessionOpt = Annotated[str | None, typer.Option("--session", rich_help_panel="Memory", help="Session id (scope).")]
HostOpt = Annotated[str | None, typer.Option(
    "--chroma-host", envvar=ENV_CHROMA_HOST, rich_help_panel="Memory",
    help="Keep the dense index on this Chroma server.")]
PortOpt = Annotated[int, typer.Option(
    "--chroma-port", envvar=ENV_CHROMA_PORT, min=1, max=65535, rich_help_panel="Memory",
    help="Port of the Chroma server.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (for scripts) instead of tables.")]

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(value: Any) -> None:
    """Plain JSON on stdout (no rich markup or wrapping: it must parse)."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``Error: message`` on stderr and return the Exit to raise."""
    # Text, not markup: the message may quote user data ("turns[3]", "[/x]" in a path).
    err.print(Text("Error: ", style="bold red").append(message))
    return typer.Exit(code)


@contextmanager
def open_memory(store: str | Path | None, chroma_host: str | None, chroma_port: int, *,
                must_exist: bool = False, flush: bool = True, **kwargs: Any) -> Iterator[AriadneMemory]:
    """Open the memory the options name (closing it flushes partial windows).

    ``must_exist``: read commands refuse a directory that holds no memory instead of
    silently creating an empty one there (a typo in ``--store`` would otherwise look like
    "no memories"). ``flush=False``: close without extracting pending turns, so a read
    command does not write to the memory (and ``add --no-flush`` keeps its partial window
    for the next ``add``).
    """
    from ..memory import AriadneMemory
    from ..store import SQLiteStore, is_store_url
    from ..store.opening import check_location

    location: str | Path
    if store is not None and not str(store).strip():
        # "--store $STORE" with the variable unset: not the default memory, which a delete
        # or a forget would then change.
        raise fail("--store is empty: give a directory or a postgresql:// URL, or leave the option out "
                   "for the default store")
    if store is not None:
        check_location(str(store))  # before Path() folds "postgresql+psycopg://" into a directory name
    if is_store_url(store):
        location = str(store)  # a server: it exists (or is created) on open
        if "embedder" not in kwargs and (dim := _hashed_dim_at(location)):
            from ..embedding import HashEmbedder

            kwargs["embedder"] = HashEmbedder(dim)  # as for a directory, below
    else:
        location = path = Path(store).expanduser() if store else default_store()
        check_store_dir(path)
        if must_exist and not SQLiteStore.exists(path):
            raise fail(f"no memory at {path} (add turns first: ariadnemem add FILE --store {path})")
        if "embedder" not in kwargs and (dim := _hashed_dim(path)):
            # Built without a model (``ariadnemem mcp --embedder hash``): read, export and
            # repair it with the same embedder rather than refuse it.
            from ..embedding import HashEmbedder

            kwargs["embedder"] = HashEmbedder(dim)
    mem = AriadneMemory(location, chroma_host=chroma_host, chroma_port=chroma_port if chroma_host else None,
                        **kwargs)
    try:
        yield mem
    finally:
        mem.close(flush=flush)


def _hashed_dim_at(url: str) -> int | None:
    """:func:`_hashed_dim` of a server's memory (None without the Postgres extra: opening
    the URL then names the extra to install)."""
    try:
        from ..store.postgres import built_with
    except ImportError:
        return None
    built = built_with(url)
    return built[1] if built and built[0] == f"hash-bow-{built[1]}" else None


def _hashed_dim(path: Path) -> int | None:
    """The dimension of the hashing embedder a store directory was built with, if it was
    (None for a model's store, a new directory or an unreadable one)."""
    import sqlite3

    from ..store import DB_FILENAME

    db_file = path / DB_FILENAME
    if not db_file.is_file():
        return None
    try:
        with closing(sqlite3.connect(f"file:{db_file}?mode=ro", uri=True, timeout=5)) as db:
            rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dim')").fetchall())
    except sqlite3.Error:
        return None  # the open itself says what is wrong
    name, dim = str(rows.get("embedder", "")), str(rows.get("dim", ""))
    return int(dim) if name == f"hash-bow-{dim}" and dim.isdigit() else None


def check_store_dir(path: Path) -> None:
    """Refuse a ``--store`` that cannot be a memory before anything is written: a plain
    file, or a directory that is neither empty nor a memory (a typo such as ``--store .``
    would otherwise scatter a SQLite file and a Chroma index among someone's files)."""
    if path.exists() and not path.is_dir():
        raise fail(f"--store {path} is a file, not a memory directory (give a new or empty directory, "
                   "or one that holds a memory)", code=2)
    from ..store import SQLiteStore
    from ..store.locking import LOCK_FILES

    # The store's own lock files are no one else's: several commands creating one store at
    # once, or one killed while creating it, leave only those.
    if path.is_dir() and not SQLiteStore.exists(path) and any(p.name not in LOCK_FILES for p in path.iterdir()):
        raise fail(f"--store {path} is a directory that holds other files but no memory; refusing to write "
                   "a memory into it (give a new or empty directory)", code=2)


def check_input_file(file: Path, *, allow_dash: bool = False) -> None:
    """A usage error naming the problem with an input FILE: missing, or a directory."""
    if allow_dash and str(file) == "-":
        return
    if file.is_dir():
        raise typer.BadParameter(f"{file} is a directory; give a file", param_hint="FILE")
    if not file.is_file():
        raise typer.BadParameter(f"no such file: {file}", param_hint="FILE")


F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Library errors become ``Error: ...`` + exit 1; Ctrl-C exits 130 quietly."""
    from ..errors import AriadneMemError

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except AriadneMemError as exc:
            # args[0], not str(): NotFoundError is a KeyError, whose str() adds quotes.
            raise fail(str(exc.args[0]) if exc.args else type(exc).__name__) from None
        except OSError as exc:
            raise fail(f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}") from None
        except (RecursionError, OverflowError, MemoryError) as exc:
            # Input too deep or too large for Python itself (nested JSON, huge numbers):
            # still one clean error line, never a traceback.
            raise fail(f"input too deeply nested or too large ({type(exc).__name__}: {exc})") from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]
