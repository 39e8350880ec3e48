"""The matching rules of LangGraph's ``BaseStore``: value filters and namespace conditions.

Written from the documented contract of ``BaseStore.search`` / ``list_namespaces`` (and
checked against the reference ``InMemoryStore`` in the tests), so the adapter filters the
way every LangGraph store does without importing LangGraph's private helpers:

* ``filter={"kind": "note"}``: each key's value must equal the filter value. A nested
  dict matches key by key (extra keys in the item are allowed, as JSONB containment); a
  list matches a list of the same length, element by element.
* ``filter={"score": {"$gte": 3, "$lt": 5}}``: operators ``$eq``, ``$ne``, ``$gt``,
  ``$gte``, ``$lt``, ``$lte``, all of which must hold. The order comparisons compare as
  numbers; a missing value, or one that is not a number, does not match (as a SQL
  comparison with NULL; ``InMemoryStore`` raises instead). An unknown operator raises
  ``ValueError``.
* namespace conditions: ``prefix`` / ``suffix`` paths whose ``"*"`` labels match any label.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from langgraph.store.base import MatchCondition

__all__ = ["matches_filter", "matches_namespace"]

_ORDER: dict[str, Callable[[float, float], bool]] = {
    "$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def matches_filter(value: Mapping[str, Any], conditions: Mapping[str, Any]) -> bool:
    """Whether an item's value passes a ``search`` filter (every key must match).

    Args:
        value: the item's value.
        conditions: the ``filter`` argument of ``search``: key -> expected value, or
            key -> ``{"$op": operand, ...}``.

    Returns:
        True when every condition holds.

    Raises:
        ValueError: an unknown ``$`` operator.
    """
    return all(_matches(value.get(key), expected) for key, expected in conditions.items())


def matches_namespace(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether a namespace meets one ``list_namespaces`` match condition.

    Args:
        condition: ``prefix`` or ``suffix`` with a path of labels (``"*"``: any label).
        namespace: the namespace.

    Returns:
        True when the namespace starts (prefix) or ends (suffix) with the path.

    Raises:
        ValueError: another match type.
    """
    path = tuple(condition.path)
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported match type: {condition.match_type!r}")
    return len(namespace) >= len(path) and all(p in ("*", label) for label, p in pairs)


def _matches(actual: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in expected):
            return all(_operator(actual, op, operand) for op, operand in expected.items())
        return isinstance(actual, Mapping) and all(_matches(actual.get(k), v) for k, v in expected.items())
    if isinstance(expected, list | tuple):
        return (isinstance(actual, list | tuple) and len(actual) == len(expected)
                and all(_matches(a, e) for a, e in zip(actual, expected, strict=True)))
    return bool(actual == expected)


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(actual == operand)
    if op == "$ne":
        return bool(actual != operand)
    compare = _ORDER.get(op)
    if compare is None:
        raise ValueError(f"unsupported filter operator: {op!r} (use $eq, $ne, $gt, $gte, $lt, $lte)")
    a, b = _number(actual), _number(operand)
    return a is not None and b is not None and compare(a, b)


def _number(value: Any) -> float | None:
    """``value`` as a number (numbers and numeric strings, as ``float()`` reads them), or None."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
