"""Phase II fast paths: answer without graph search when a cheap index is confident.

* ``counter``: "How many times did Melanie go to the beach?" -> the ingestion-time
  mention counters (person x stemmed keyword -> entries) give the entries in which that
  person and *every* content word of the question occur. Fires only for one known person
  and at least one match.
* ``attribute``: "What is Bob's phone number?" -> self-stated attributes recorded at
  extraction ("my phone number is ..."), newest first. Fires only on an exact
  (subject, attribute) hit in a question that *is* the look-up ("What is Bob's phone
  number?", "Where's Ana's office?"): a possessive inside a longer question ("What is
  displayed on Joanna's cork board?", "How long was Max part of John's family?") asks
  something else. Before this rule the fast path fired on 6 LoCoMo dev questions and its
  evidence was right for 2. It stands back when the entry has been superseded (an update
  edge leads away from it): "my driving test is on May 22" -> "rescheduled to June 5"
  records no attribute, and the full search follows the update to the newer state.

A fast path returns a minimal result: the entry ids it used and what it found. When it
is not confident it returns None and the full Phase II runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..models import Scope
from ..store import Store
from ..text import COUNTER_STOPWORDS, stem
from ..text import words as text_words

_COUNT_Q = re.compile(r"\bhow (?:many times|often)\b", re.I)
_POSSESSIVE = re.compile(r"\b([A-Z][a-zA-Z-]+)(?:'s|’s)\s+((?:[a-z][a-z-]*\s+){0,3}[a-z][a-z-]*)")
#: What may precede the possessive in a look-up question, and what may follow the attribute.
_LOOKUP_HEAD = re.compile(
    r"^\s*(?:(?:what|where|when|who|which|how)(?:'s|’s|\s+(?:is|are|was|were))|tell me|give me)"
    r"\s+(?:the\s+)?$", re.I)
_LOOKUP_TAIL = re.compile(r"^\s*(?:now|these days|currently|again)?\s*[?.!]*\s*$", re.I)


@dataclass(slots=True)
class FastPathResult:
    name: str
    entry_ids: list[str]
    data: dict[str, Any] = field(default_factory=dict)


def counter_fast_path(store: Store, scope: Scope, query: str, known_persons: set[str]) -> FastPathResult | None:
    if not _COUNT_Q.search(query):
        return None
    words = text_words(query)
    persons = [p for p in known_persons if p in words]
    if len(persons) != 1:
        return None
    person = persons[0]
    terms = list(dict.fromkeys(stem(w) for w in words if w not in COUNTER_STOPWORDS and w != person and len(w) > 1))
    if not terms:
        return None
    ids = store.mentions(scope.user_id, person, terms)
    if scope.agent_id or scope.session_id:
        found = store.get(ids, scope.user_id)
        ids = [i for i in ids if i in found and scope.matches(found[i])]
    if not ids:
        return None
    return FastPathResult("counter", ids, {"person": person, "terms": terms, "count": len(ids)})


def attribute_fast_path(store: Store, scope: Scope, query: str) -> FastPathResult | None:
    for match in _POSSESSIVE.finditer(query):
        if not _LOOKUP_HEAD.match(query[: match.start()]):
            continue
        subject = match.group(1)
        words = match.group(2).split()
        for n in range(len(words), 0, -1):
            if not _LOOKUP_TAIL.match(" ".join(words[n:]) + query[match.end():]):
                continue
            attribute = " ".join(words[:n])
            hits = store.attribute(scope.user_id, subject, attribute)
            if hits:
                value, entry_id, _ = hits[0]
                if any(e.src == entry_id and e.kind == "update" for e in store.edges(scope.user_id, [entry_id])):
                    return None  # a newer state was stated otherwise: the full search shows it
                return FastPathResult("attribute", [entry_id],
                                      {"subject": subject, "attribute": attribute, "value": value})
    return None


def try_fast_paths(store: Store, scope: Scope, query: str, known_persons: set[str]) -> FastPathResult | None:
    """The first confident fast path, or None."""
    return attribute_fast_path(store, scope, query) or counter_fast_path(store, scope, query, known_persons)
