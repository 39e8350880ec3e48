"""Progress bars on stderr (stdout is kept for the final summary), or nothing at all."""

from __future__ import annotations

import sys
import time
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


class _LineProgress(_NoProgress):
    """For a non-terminal stderr (CI logs, redirects), where a live bar renders nothing:
    one line when a stage starts and one when it ends, with its duration."""

    def __init__(self) -> None:
        self._tasks: dict[int, tuple[str, float]] = {}
        self._next = 0

    def _say(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        self._next += 1
        self._tasks[self._next] = (description, time.perf_counter())
        self._say(f"{description} ({total:g})..." if total is not None else f"{description}...")
        return self._next

    def update(self, task: int, **kw: Any) -> None:
        if "description" in kw and task in self._tasks:
            self._say(f"  {kw['description']}")

    def remove_task(self, task: int) -> None:
        if task in self._tasks:
            description, t0 = self._tasks.pop(task)
            self._say(f"{description}: done in {time.perf_counter() - t0:.1f} s")


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator[Any]:
    """A ``rich`` progress display on stderr when enabled (plain lines when stderr is not a
    terminal), else a no-op stand-in."""
    if not enabled:
        yield _NoProgress()
        return
    if not sys.stderr.isatty():
        yield _LineProgress()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True)) as prog:
        yield prog
