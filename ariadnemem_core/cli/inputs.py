"""Reading turns for ``ariadnemem add``: JSONL, JSON, or a LoCoMo file.

Every turn is validated before anything is stored, and a bad one is reported with its
place in the file (``dialog.jsonl line 7: text: must not be empty``), so a shell user can
fix the file and run the same command again; nothing of a rejected file is stored.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import InvalidInputError
from ..limits import load_json
from ..models import Turn

Format = Literal["auto", "jsonl", "json", "locomo"]


class InputFileError(ValueError):
    """The input file cannot be read as turns (message names the file and the place)."""


@dataclass(slots=True)
class Batch:
    """Turns for one user (a LoCoMo file gives one batch per conversation)."""

    user_id: str
    turns: list[Turn]
    label: str


def read_batches(path: Path, fmt: Format, user_id: str, conversations: list[str] | None = None,
                 user_given: bool = False) -> list[Batch]:
    """Parse ``path`` (``-`` = stdin) into validated batches.

    LoCoMo conversations go to the user named after their sample id (``conv-26``), so
    each stays its own memory, unless ``--user`` is given explicitly.
    """
    name = "<stdin>" if str(path) == "-" else str(path)
    try:
        raw = _read_stdin() if str(path) == "-" else path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    data: Any = None  # the parsed document, when sniffing already parsed it
    if fmt == "auto":
        fmt, data = _sniff(path, raw)
    if fmt == "jsonl":
        if conversations:
            raise InputFileError("--conversation applies to LoCoMo files only")
        return [Batch(user_id, _jsonl_turns(raw, name), name)]
    if data is None:
        data = _loads(raw, name)
    if fmt == "locomo" or _looks_like_locomo(data):
        return _locomo_batches(data, name, user_id if user_given else None, conversations)
    if conversations:
        raise InputFileError("--conversation applies to LoCoMo files only")
    items = data.get("turns") if isinstance(data, Mapping) else data
    if not isinstance(items, list):
        raise InputFileError(f"{name}: expected a JSON list of turns, an object with \"turns\", "
                             "or a LoCoMo file")
    return [Batch(user_id, [_turn(item, f"{name} item {i}") for i, item in enumerate(items)], name)]


def _read_stdin() -> str:
    """Standard input decoded as UTF-8, as a file is: the locale's decoding let bytes that
    are not UTF-8 through as lone surrogates, reported later as another problem."""
    buffer = getattr(sys.stdin, "buffer", None)
    return buffer.read().decode("utf-8") if buffer is not None else sys.stdin.read()


def _sniff(path: Path, raw: str) -> tuple[Format, Any]:
    """``auto``: JSONL by suffix, else by content. Text starting with ``{`` that is one
    object per line (``cat turns.jsonl | ariadnemem add -``, a single turn, a ``.txt``) is
    JSONL, not a broken JSON document. Returns the format and, if it had to parse a JSON
    document to decide, that document (so it is parsed once), else None."""
    if path.suffix.lower() in {".jsonl", ".ndjson"}:
        return "jsonl", None
    text = raw.lstrip()
    if not text.startswith(("[", "{")):
        return "jsonl", None
    if text.startswith("{"):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            return ("jsonl" if exc.msg == "Extra data" else "json"), None
        except (RecursionError, ValueError):  # too deep, or an integer over 4,300 digits
            return "json", None  # parsed again, and named, by the caller
        if isinstance(data, Mapping) and "turns" not in data and "conversation" not in data:
            return "jsonl", None  # one turn object
        return "json", data
    return "json", None


def _jsonl_turns(raw: str, name: str) -> list[Turn]:
    turns = []
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        item = _loads(line, f"{name} line {lineno}")
        turns.append(_turn(item, f"{name} line {lineno}"))
    return turns


def _loads(raw: str, where: str) -> Any:
    """The JSON in ``raw``; any parse failure (syntax, nesting too deep, an integer of
    over 4,300 digits, which Python refuses with a bare ValueError) names ``where``."""
    try:
        return load_json(raw, where)
    except InvalidInputError as exc:
        raise InputFileError(str(exc).removeprefix("invalid ")) from None


def _turn(item: Any, where: str) -> Turn:
    if not isinstance(item, Mapping):
        raise InputFileError(f"{where}: expected an object with speaker, text, timestamp; got {type(item).__name__}")
    try:
        return Turn.from_dict(item)
    except InvalidInputError as exc:
        raise InputFileError(f"{where}: {exc.field}: {exc.problem}") from None
    except TypeError as exc:
        raise InputFileError(f"{where}: {exc}") from None


def _looks_like_locomo(data: Any) -> bool:
    samples = data if isinstance(data, list) else [data]
    return bool(samples) and all(isinstance(s, Mapping) and "conversation" in s for s in samples)


def _locomo_batches(data: Any, name: str, user_id: str | None, wanted: list[str] | None) -> list[Batch]:
    from ..bench.locomo import load_turns

    samples = data if isinstance(data, list) else [data]
    if not _looks_like_locomo(samples):
        raise InputFileError(f"{name}: not a LoCoMo file (samples with a \"conversation\" object)")
    ids = [str(s.get("sample_id", f"conv-{i}")) for i, s in enumerate(samples)]
    unknown = [w for w in wanted or [] if w not in ids]
    if unknown:
        raise InputFileError(f"{name}: unknown conversation ids {unknown}; the file has {', '.join(ids)}")
    batches = []
    for sid, sample in zip(ids, samples, strict=True):
        if wanted and sid not in wanted:
            continue
        try:
            turns = load_turns(sample["conversation"])
        except (KeyError, TypeError, ValueError, AttributeError, InvalidInputError) as exc:
            # AttributeError: a "conversation" or session of the wrong shape (a list, a number)
            raise InputFileError(f"{name}: conversation {sid}: {type(exc).__name__}: {exc}") from None
        batches.append(Batch(user_id or sid, turns, sid))
    return batches
