"""Progress bars on stderr (stdout is kept for the final summary), or nothing at all."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _NoProgress:
    """Same calls as ``rich.progress.Progress``, doing nothing (tests, pipes)."""

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        return 0

    def advance(self, task: int, advance: float = 1) -> None:
        pass

    def update(self, task: int, **_: Any) -> None:
        pass

    def remove_task(self, task: int) -> None:
        pass


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator[Any]:
    """A ``rich`` progress display on stderr when enabled, else a no-op stand-in."""
    if not enabled:
        yield _NoProgress()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True)) as prog:
        yield prog
