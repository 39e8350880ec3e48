"""The one atomic file writer: a reader sees the old file or the new one, never half of one.

Used by exports, pictures, charts and bench reports: the data goes to a temporary sibling
(same directory, hence the same file system) that ``os.replace`` then puts in place; on
any error the temporary file is removed and the target is left as it was.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", *, encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open ``path`` for writing, atomically (see the module docstring).

    Args:
        path: the target file; its directory must exist.
        mode: ``"w"`` (text in ``encoding``) or ``"wb"`` (bytes).
        encoding: the text encoding in ``"w"`` mode.

    Yields:
        The open temporary file; the target is replaced when the block ends without an
        exception.

    Raises:
        FileNotFoundError: the target's directory does not exist.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot write {target}: directory {target.parent} does not exist")
    # open(..., "x") rather than mkstemp: the file gets the umask's usual mode, not 0600.
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, mode.replace("w", "x"), encoding=None if mode == "wb" else encoding) as fh:
            yield fh
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically.

    Args:
        path: the target file; its directory must exist.
        data: the whole content.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)
