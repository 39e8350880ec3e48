"""Markdown-aware segmentation of long messages into meaningful units.

An agent's replies are long and structured: headings, lists, tables, code. Cutting them
into sentences breaks code mid-line and turns "- **Task 2:** Implement user login." into a
fragment with no context. This module parses a message with ``markdown-it-py`` (the
CommonMark parser that ``rich`` already depends on) and returns its top-level blocks as
:class:`Segment` units, each with the heading path it sits under:

* a paragraph is ``prose`` (the extractor may still split it into sentences);
* a list is one ``list`` unit, or one unit per top-level item when it is long, so a
  list item keeps its sub-items;
* a fenced or indented code block is one ``code`` unit (never cut), with its language;
* a table is one ``table`` unit;
* a heading is not a unit of its own: it becomes the ``context`` of what follows, and a
  paragraph that ends with ":" becomes the context of the list, code or table after it.

Only text with line breaks is parsed: a one-line message is a single ``prose`` segment,
so short chat turns are treated exactly as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from ..text import SENTENCE_END

SegmentKind = Literal["prose", "list", "code", "table"]

#: A list longer than this (characters) is split into its top-level items (grouped while
#: they stay under the limit), so one entry does not hold a whole multi-screen plan.
LIST_UNIT_CHARS = 600
#: Longest heading path kept as context (characters).
CONTEXT_CHARS = 160

_EMPHASIS = re.compile(r"(\*\*|__|~~)(?=\S)(.+?)(?<=\S)\1")
_HEADING_MARK = re.compile(r"^\s{0,3}#{1,6}\s*|\s+#+\s*$")
_ITEM_MARK = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")


@dataclass(frozen=True, slots=True)
class Segment:
    """One meaningful unit of a message.

    Attributes:
        kind: ``prose``, ``list``, ``code`` or ``table``.
        text: The unit's text: markdown emphasis removed, list items one per line
            (nested items indented), code exactly as written (without the fences).
        context: The heading path above it and, for a list, code block or table, the
            lead-in sentence ending in ":" just before it ("" when there is none).
        lang: The code block's language tag, if any.
    """

    kind: SegmentKind
    text: str
    context: str = ""
    lang: str | None = None


@lru_cache(maxsize=1)
def _parser():  # type: ignore[no-untyped-def]
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def plain(text: str) -> str:
    """Markdown emphasis and inline-code backticks removed (``**Task 1:**`` -> ``Task 1:``)."""
    text = _EMPHASIS.sub(r"\2", text)
    return text.replace("`", "")


def _heading_text(line: str) -> str:
    return plain(_HEADING_MARK.sub("", line)).strip().rstrip(":").strip()


def _last_sentence(text: str) -> str:
    return SENTENCE_END.split(text.strip())[-1]


def segment(text: str) -> list[Segment]:
    """The top-level units of ``text`` in order (see the module docstring).

    Args:
        text: A message as the speaker wrote it (line breaks kept).

    Returns:
        At least one segment for non-blank text; a one-line text is one ``prose`` segment.
    """
    if "\n" not in text.strip():
        return [Segment("prose", text.strip())] if text.strip() else []
    lines = text.split("\n")
    tokens = _parser().parse(text)
    headings: list[tuple[int, str]] = []  # (level, text) of the open heading path
    lead_in = ""
    out: list[Segment] = []

    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.level != 0 or tok.nesting == -1 or tok.map is None:
            i += 1
            continue
        start, end = tok.map
        raw = "\n".join(lines[start:end])
        kind = tok.type
        if kind == "heading_open":
            level = int(tok.tag[1:]) if tok.tag[1:].isdigit() else 1
            headings = [h for h in headings if h[0] < level] + [(level, _heading_text(raw))]
            lead_in = ""
        elif kind in ("paragraph_open", "blockquote_open", "html_block"):
            body = plain(" ".join(ln.strip().lstrip(">").strip() for ln in raw.split("\n")))
            if body:
                out.append(Segment("prose", body, _context(headings, lead_in)))
                lead_in = _last_sentence(body).rstrip(":").strip() if body.endswith(":") else ""
        elif kind in ("fence", "code_block"):
            out.extend(_code(tok, _context(headings, lead_in)))
            lead_in = ""
        elif kind in ("bullet_list_open", "ordered_list_open"):
            items = _top_items(tokens, i, lines)
            out.extend(Segment("list", unit, _context(headings, lead_in)) for unit in _group(items))
            lead_in = ""
        elif kind == "table_open":
            rows = [ln.strip() for ln in raw.split("\n") if ln.strip() and not set(ln.strip()) <= set("|:- ")]
            out.append(Segment("table", plain("\n".join(rows)), _context(headings, lead_in)))
            lead_in = ""
        i += 1
    return out or [Segment("prose", text.strip())]


def _context(headings: list[tuple[int, str]], lead_in: str) -> str:
    """What a block sits under: its heading path and the lead-in sentence before it."""
    path = " > ".join(h for _, h in headings)
    ctx = f"{path}: {lead_in}" if path and lead_in else path or lead_in
    return ctx[-CONTEXT_CHARS:].strip()


def _code(tok: Any, context: str) -> list[Segment]:
    """A fenced or indented code block as one segment (none when it is blank)."""
    code = tok.content.rstrip("\n")
    if not code.strip():
        return []
    lang = tok.info.strip().split(" ")[0] or None if tok.type == "fence" else None
    return [Segment("code", code, context, lang)]


def _top_items(tokens: list, i: int, lines: list[str]) -> list[str]:  # type: ignore[type-arg]
    """The text of each top-level item of the list opened at ``tokens[i]`` (sub-items kept,
    indented two spaces per level)."""
    level = tokens[i].level
    items: list[str] = []
    for tok in tokens[i + 1:]:
        if tok.level == level and tok.nesting == -1:  # the list's close
            break
        if tok.type == "list_item_open" and tok.level == level + 1 and tok.map:
            start, end = tok.map
            item_lines = []
            for ln in lines[start:end]:
                if not ln.strip():
                    continue
                depth = (len(ln) - len(ln.lstrip())) // 2
                item_lines.append("  " * min(depth, 3) + plain(_ITEM_MARK.sub("", ln).strip()))
            if item_lines:
                items.append("\n".join(item_lines).strip())
    return items


def _group(items: list[str]) -> list[str]:
    """Items joined one per line; a long list becomes several units of whole items."""
    if sum(len(x) for x in items) <= LIST_UNIT_CHARS:
        return ["\n".join(items)] if items else []
    units: list[str] = []
    cur: list[str] = []
    size = 0
    for item in items:
        if cur and size + len(item) > LIST_UNIT_CHARS:
            units.append("\n".join(cur))
            cur, size = [], 0
        cur.append(item)
        size += len(item)
    if cur:
        units.append("\n".join(cur))
    return units
