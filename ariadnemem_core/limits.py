"""The limits and checks shared by every boundary into the store.

Turns, imported records and LLM output all reach the same tables, so they are held to
the same rules: one text limit, one limit for names and ids, one for metadata, no lone
surrogates, and JSON parsed with nesting bounded. A limit enforced at one door and not
another is no limit (an import or a model reply would bypass it), which is why they live
here rather than next to any one of the doors.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import InvalidInputError

#: Longest text (turn, entry) in characters. Longer turn texts are rejected with a clear
#: error rather than silently truncated (nothing is lost without the caller knowing).
MAX_TEXT_CHARS = 200_000
#: Longest speaker name, id (turn, entry, user) or short field (topic, location, keyword).
MAX_NAME_CHARS = 1_000
#: ... and at most this many bytes in UTF-8: a user id and a speaker name share a Postgres
#: index row (at most ~2,700 bytes), and 1,000 characters of CJK are 3,000 bytes (a turn
#: accepted by ``add`` would otherwise fail every flush of its scope on Postgres).
MAX_NAME_BYTES = 1_000
#: Largest metadata, as JSON text in characters (an image caption is folded into the entry
#: text, so it is bounded like text).
MAX_METADATA_CHARS = MAX_TEXT_CHARS
#: Deepest nesting of metadata (lists and dicts inside each other). Python's JSON reader
#: recurses once per level: metadata stored 950 levels deep was accepted by ``add`` and
#: then unreadable from a caller a few dozen frames deeper (a framework's call chain), so
#: its turn was quarantined and its entry hidden. 64 is far beyond any real record.
MAX_METADATA_DEPTH = 64
#: Most list items (keywords, persons, entities, source turn ids) of one entry.
MAX_LIST_ITEMS = 1_000

#: A lone surrogate (U+D800..U+DFFF): not valid Unicode, cannot be encoded as UTF-8, so no
#: store, index or prompt accepts it. The one definition every check uses.
SURROGATE = re.compile("[\ud800-\udfff]")


def replace_surrogates(value: Any) -> Any:
    """``value`` with lone surrogates in every string (nested in lists and dicts) replaced
    by U+FFFD. For text the caller did not write (model replies): it cannot be re-encoded
    as UTF-8, and rejecting it would only make the model repeat the same reply."""
    if isinstance(value, str):
        return SURROGATE.sub("\ufffd", value) if SURROGATE.search(value) else value
    stack = [value]
    while stack:  # iterative: a deeply nested reply must not hit the recursion limit
        item = stack.pop()
        if isinstance(item, dict):
            _clean_dict(item, stack)
        elif isinstance(item, list):
            for i, v in enumerate(item):
                if isinstance(v, str):
                    item[i] = replace_surrogates(v)
                elif isinstance(v, list | dict):
                    stack.append(v)
    return value


def _clean_dict(item: dict[Any, Any], stack: list[Any]) -> None:
    """One dict of :func:`replace_surrogates`: its strings and keys cleaned in place, its
    lists and dicts pushed on ``stack``."""
    for key in list(item):
        v = item[key]
        if isinstance(v, str):
            item[key] = replace_surrogates(v)
        elif isinstance(v, list | dict):
            stack.append(v)
        if isinstance(key, str) and SURROGATE.search(key):
            item[replace_surrogates(key)] = item.pop(key)


def load_json(text: str, where: str) -> Any:
    """``json.loads`` whose every failure is an :class:`InvalidInputError` naming ``where``:
    syntax errors, nesting deeper than the interpreter can parse (``RecursionError`` from
    ``"[" * 100000``) and numbers beyond float range."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(where, f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InvalidInputError(where, "JSON nested too deeply") from None
    except (ValueError, OverflowError) as exc:
        raise InvalidInputError(where, f"invalid JSON ({exc})") from None


def check_name(value: Any, field_name: str, *, optional: bool = False) -> str | None:
    """A speaker, id or short label: a non-empty ``str`` of at most ``MAX_NAME_CHARS``
    characters and ``MAX_NAME_BYTES`` bytes in UTF-8, without NUL (Postgres text holds
    none), on one line (newlines and tabs become spaces, so a name cannot start a
    forged line in any prompt or document that prints it)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(field_name, f"expected str, got {type(value).__name__}")
    if len(value) > MAX_NAME_CHARS:
        raise InvalidInputError(field_name, f"is {len(value)} characters; the limit is {MAX_NAME_CHARS}")
    m = SURROGATE.search(value)
    if m:
        raise InvalidInputError(field_name, f"contains a lone surrogate at position {m.start()}")
    if "\x00" in value:
        raise InvalidInputError(field_name, "contains a NUL character")
    size = len(value.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise InvalidInputError(field_name, f"is {size} bytes in UTF-8; the limit is {MAX_NAME_BYTES}")
    return " ".join(value.split())


def check_int(value: Any, field_name: str, *, minimum: int = 0, maximum: int = 2**63 - 1) -> int:
    """An integer SQLite can store (64-bit signed), ``bool`` excluded."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(field_name, f"expected an integer, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise InvalidInputError(field_name, f"{value} is out of range [{minimum}, {maximum}]")
    return value


def _check_text(value: Any, field_name: str) -> None:
    if not isinstance(value, str):
        raise InvalidInputError(field_name, f"expected str, got {type(value).__name__}")
    if len(value) > MAX_TEXT_CHARS:
        raise InvalidInputError(field_name, f"is {len(value)} characters; the limit is {MAX_TEXT_CHARS}")
    if not value.strip():
        raise InvalidInputError(field_name, "is empty")
    m = SURROGATE.search(value)
    if m:
        raise InvalidInputError(field_name, f"contains a lone surrogate at position {m.start()}")


def _check_str_list(value: Any, field_name: str, *, non_empty: bool = False) -> None:
    if not isinstance(value, list):
        raise InvalidInputError(field_name, f"expected a list of strings, got {type(value).__name__}")
    if non_empty and not value:
        raise InvalidInputError(field_name, "is empty")
    if len(value) > MAX_LIST_ITEMS:
        raise InvalidInputError(field_name, f"has {len(value)} items; the limit is {MAX_LIST_ITEMS}")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item or len(item) > MAX_NAME_CHARS or SURROGATE.search(item):
            raise InvalidInputError(f"{field_name}[{i}]", f"expected a non-empty string of at most "
                                    f"{MAX_NAME_CHARS} characters, got {str(item)[:40]!r}")


def split_text(text: str, limit: int = MAX_TEXT_CHARS) -> list[str]:
    """``text`` in consecutive pieces of at most ``limit`` characters, cut at the last
    whitespace before the limit (or at the limit when a piece has none in its second
    half). For text the library itself made longer than the caller's: a speaker prefix
    or grounded pronouns ("I" -> "Ann") can take a turn at the limit past it."""
    pieces: list[str] = []
    while len(text) > limit:
        cut = max(text.rfind(" ", 0, limit + 1), text.rfind("\n", 0, limit + 1))
        if cut < limit // 2:
            cut = limit
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text or not pieces:
        pieces.append(text)
    return pieces


def bounded_list(items: list[str], limit: int = MAX_LIST_ITEMS) -> list[str]:
    """``items`` cut to ``limit``: the first one (where it began) and the latest ones."""
    return items if len(items) <= limit else [items[0], *items[len(items) - limit + 1:]]


def check_vector(value: Any, dim: int, field_name: str = "embedding") -> Any:
    """A float32 vector of ``dim`` finite values (NaN or Inf would poison every search
    of the user, and a wrong length fails the dense index on every later open)."""
    import numpy as np

    try:
        vec = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInputError(field_name, f"expected {dim} numbers, got {type(value).__name__}") from None
    if vec.ndim != 1 or vec.shape[0] != dim:
        raise InvalidInputError(field_name, f"expected {dim} numbers, got shape {tuple(vec.shape)}")
    if not np.isfinite(vec).all():
        raise InvalidInputError(field_name, "contains NaN or infinite values")
    return vec


def check_entry(entry: Any, dim: int | None = None) -> None:
    """Every field of an :class:`~ariadnemem_core.models.Entry` within the shared limits
    (the same whether it comes from an extractor, an LLM or an import).

    Raises:
        InvalidInputError: naming the first bad field.
    """
    import datetime as _dt

    check_name(entry.id, "id")
    if not entry.id:
        raise InvalidInputError("id", "is empty")
    check_name(entry.user_id, "user_id")
    if not entry.user_id:  # a user no call can name: its entries could never be read or removed
        raise InvalidInputError("user_id", "is empty")
    for name in ("agent_id", "session_id", "location", "topic", "speaker"):
        check_name(getattr(entry, name), name, optional=True)
    _check_text(entry.text, "text")
    _check_str_list(entry.source_turn_ids, "source_turn_ids", non_empty=True)
    for name in ("keywords", "persons", "entities"):
        _check_str_list(getattr(entry, name), name)
    for name in ("timestamp", "first_timestamp"):
        value = getattr(entry, name)
        if value is not None and not isinstance(value, _dt.datetime):
            raise InvalidInputError(name, f"expected a datetime, got {type(value).__name__}")
    if not isinstance(entry.metadata, dict):
        raise InvalidInputError("metadata", f"expected a dict, got {type(entry.metadata).__name__}")
    check_metadata(entry.metadata)
    if dim is not None:
        entry.embedding = check_vector(entry.embedding, dim)


def check_metadata(metadata: Any, field_name: str = "metadata", *, new: bool = False) -> None:
    """JSON-serializable valid Unicode of at most ``MAX_METADATA_CHARS`` as JSON text.

    ``new``: metadata coming in (``add``, ``replace``) is held to more: strict JSON (no NaN
    or Infinity, which JSON clients of the MCP server cannot parse) at most
    ``MAX_METADATA_DEPTH`` levels deep. What a store already holds, or an export of one,
    is read as before: a stricter reader must not hide a memory stored by an earlier
    version."""
    if new and _depth(metadata) > MAX_METADATA_DEPTH:
        raise InvalidInputError(field_name, f"is nested more than {MAX_METADATA_DEPTH} levels deep")
    try:
        encoded = json.dumps(metadata, ensure_ascii=False, allow_nan=not new)
        encoded.encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(field_name, f"must be JSON-serializable valid Unicode: {exc}") from None
    if len(encoded) > MAX_METADATA_CHARS:
        raise InvalidInputError(field_name, f"is {len(encoded)} characters as JSON; the limit is "
                                f"{MAX_METADATA_CHARS}")


def _depth(value: Any) -> int:
    """How many lists and dicts ``value`` nests (iterative: the check must not recurse)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list | tuple):
            level += 1
            deepest = max(deepest, level)
            if level <= MAX_METADATA_DEPTH:
                stack.extend((v, level) for v in (item.values() if isinstance(item, dict) else item))
    return deepest
