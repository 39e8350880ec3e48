"""The one atomic file writer: a reader sees the old file or the new one, never half of one.

Used by exports, pictures, charts and bench reports: the data goes to a temporary sibling
(same directory, hence the same file system) that ``os.replace`` then puts in place; on
any error the temporary file is removed and the target is left as it was.

What replacing a file keeps, as an editor's "save" does:

* **permissions**: an existing target's mode (and, where allowed, its owner) is given to
  the new file, so re-exporting over a 0600 file leaves it 0600; a new file gets
  ``new_mode`` when the caller asks (exports: 0600, they hold every user's memories);
* **symlinks**: a link is followed and its target replaced; the link stays a link;
* **hard links**: a file with several names cannot be replaced without splitting it, so
  the new content is written in full to the temporary file first and then copied into
  the existing file in place; every name keeps seeing one file, and a failure while
  producing the content still leaves the target untouched.
"""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", *, encoding: str | None = "utf-8",
                new_mode: int | None = None) -> Iterator[IO[Any]]:
    """Open ``path`` for writing, atomically (see the module docstring).

    Args:
        path: the target file (a symlink is followed); its directory must exist.
        mode: ``"w"`` (text in ``encoding``) or ``"wb"`` (bytes).
        encoding: the text encoding in ``"w"`` mode.
        new_mode: permission bits of a file that does not exist yet (None: the umask's
            usual mode). An existing file keeps its own.

    Yields:
        The open temporary file; the target is replaced when the block ends without an
        exception.

    Raises:
        FileNotFoundError: the target's directory does not exist.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    target = Path(os.path.realpath(path)) if Path(path).is_symlink() else Path(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot write {target}: directory {target.parent} does not exist")
    try:
        old: os.stat_result | None = target.stat()
    except FileNotFoundError:
        old = None
    # O_EXCL rather than mkstemp: the file gets the umask's usual mode (or ``new_mode``), not 0600.
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if new_mode is None else new_mode)
    try:
        if old is not None:
            _copy_owner_and_mode(fd, old)
        with open(fd, mode, encoding=None if mode == "wb" else encoding) as fh:
            yield fh
        if old is not None and old.st_nlink > 1:
            shutil.copyfile(tmp, target)  # in place: every hard link keeps seeing the one file
            tmp.unlink()
        else:
            os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _copy_owner_and_mode(fd: int, old: os.stat_result) -> None:
    """Give the new file the replaced one's owner (best effort: only root may) and mode."""
    if (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
        with suppress(OSError):
            os.fchown(fd, old.st_uid, old.st_gid)
    os.fchmod(fd, stat.S_IMODE(old.st_mode))


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
