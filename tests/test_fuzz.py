"""Hypothesis drives add/retrieve with arbitrary text and timestamps."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariadnemem_core import AriadneMemory, Config, HashEmbedder, InvalidInputError, Turn
from ariadnemem_core.models import clean_text

timestamps = st.one_of(
    st.none(),
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1)),
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1)).map(lambda d: d.replace(tzinfo=UTC)),
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.text(max_size=300), timestamps), min_size=1, max_size=8), st.text(max_size=200))
def test_add_and_retrieve_never_crash(items, query):
    with tempfile.TemporaryDirectory() as d:
        mem = AriadneMemory(d, Config(window_size=3), embedder=HashEmbedder())
        accepted = 0
        for i, (text, ts) in enumerate(items):
            try:
                mem.add(Turn("Ana", text, ts, f"t{i}"))
                accepted += 1
            except InvalidInputError as exc:
                assert exc.field == "text"
                assert not clean_text(text).strip()  # control characters are stripped first
        mem.flush()
        s = mem.stats()
        assert s["gate_kept"] + s["gate_dropped"] == accepted
        kept_ids = {t for e in mem.entries() for t in e.source_turn_ids}
        assert len(kept_ids) == s["gate_kept"]
        try:
            g = mem.retrieve(query)
        except InvalidInputError as exc:
            assert exc.field == "query" and not clean_text(query).strip()
        else:
            for line in g.to_text().splitlines()[1:]:
                if line.startswith("[F"):
                    json.loads(line[line.index('"'):])
            json.dumps(g.to_dict())
        mem.close()
