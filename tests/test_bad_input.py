"""Bad input never damages what is already stored.

Every case either asserts the documented handling (see ``AriadneMemory.add``, ``Turn`` and
``AriadneMemory.retrieve``) or a clear :class:`InvalidInputError` naming the field, and then
checks that the memory stored before the bad call is byte-for-byte the same: entries,
stats, pending turns and a retrieval result. The store must also stay *usable*: a bad
turn that slipped into the pending table would fail every later ``flush``, so most cases
flush and add a good turn afterwards.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from ariadnemem_core import AriadneMemError, AriadneMemory, Config, InvalidInputError, Turn
from ariadnemem_core.memory import MAX_QUERY_CHARS
from ariadnemem_core.models import MAX_TEXT_CHARS
from tests.conftest import T0, turn

QUESTION = "Where does Caroline go hiking?"
BASELINE = [
    ("Caroline", "I go hiking in the Alps every summer."),
    ("Melanie", "I work as a nurse at the hospital in Lyon."),
    ("Caroline", "My brother Tom plays the violin in an orchestra."),
    ("Melanie", "We adopted a grey kitten called Pixel last week."),
]


def _snapshot(mem: AriadneMemory) -> dict[str, Any]:
    """Everything a bad call could damage, in comparable form."""
    return {
        "entries": [e.to_dict(with_embedding=True) for e in mem.entries()],
        "stats": mem.stats(),
        "pending": [(seq, t.to_dict()) for seq, _, t in mem.storage.pending()],
        "edges": [e.to_dict() for e in mem.edges()],
        "retrieved": mem.retrieve(QUESTION).to_text(),
    }


@pytest.fixture
def mem(make_memory: Callable[..., AriadneMemory]) -> AriadneMemory:
    m = make_memory(config=Config(window_size=4), hashing=True)
    m.add([turn(s, t, i) for i, (s, t) in enumerate(BASELINE)])
    m.flush()
    assert len(m.entries()) >= len(BASELINE)
    return m


def _assert_unchanged(mem: AriadneMemory, before: dict[str, Any]) -> None:
    assert _snapshot(mem) == before


def _assert_old_entries_kept(mem: AriadneMemory, before: dict[str, Any]) -> None:
    """After an *accepted* input: every earlier entry is still there, unchanged."""
    now = {e["id"]: e for e in (x.to_dict(with_embedding=True) for x in mem.entries())}
    for old in before["entries"]:
        assert now.get(old["id"]) == old


def _assert_still_usable(mem: AriadneMemory) -> None:
    """No poisoned pending turn: flushing works and a good turn is still extracted."""
    mem.flush()
    n = len(mem.entries())
    mem.add(turn("Melanie", "I bought a red bicycle for commuting.", 500))
    mem.flush()
    assert len(mem.entries()) == n + 1
    assert mem.storage.pending() == []


def _rejects(mem: AriadneMemory, bad: Any, field: str) -> InvalidInputError:
    """``add([good, bad])`` raises naming ``field``; nothing of the batch is stored."""
    good = {"speaker": "Ben", "text": "A valid turn that must not be stored either.", "timestamp": T0}
    with pytest.raises(InvalidInputError) as info:
        mem.add([good, bad])
    assert isinstance(info.value, AriadneMemError)
    assert info.value.field == f"turns[1].{field}", info.value.field
    return info.value


# --------------------------------------------------------------------------- text
@pytest.mark.parametrize("text", ["", "   ", "\n\t \r\n", "\x00", "\x00\x07\x1b \x7f\x85"])
def test_empty_whitespace_or_control_only_text_is_rejected(mem, text):
    before = _snapshot(mem)
    err = _rejects(mem, {"speaker": "Ana", "text": text}, "text")
    assert "empty" in err.problem
    with pytest.raises(InvalidInputError):
        Turn("Ana", text)
    _assert_unchanged(mem, before)
    _assert_still_usable(mem)


def test_one_megabyte_message_is_rejected_clearly_and_fast(mem):
    """Documented in ``add``: > MAX_TEXT_CHARS is rejected (never silently truncated)."""
    before = _snapshot(mem)
    text = "I walked along the river and counted the boats. " * 21_000  # ~1 MB
    assert len(text) > 1_000_000
    t = time.perf_counter()
    err = _rejects(mem, {"speaker": "Ana", "text": text, "timestamp": T0}, "text")
    assert time.perf_counter() - t < 1.0
    assert str(MAX_TEXT_CHARS) in err.problem and "split" in err.problem
    _assert_unchanged(mem, before)
    _assert_still_usable(mem)


def test_text_at_the_limit_is_accepted_and_bounded(mem):
    before = _snapshot(mem)
    sentence = "Ana painted a lighthouse on the cliff today. "
    text = (sentence * (MAX_TEXT_CHARS // len(sentence) + 1))[:MAX_TEXT_CHARS]
    t = time.perf_counter()
    assert mem.add(Turn("Ana", text, T0 + timedelta(days=3))) == 1
    mem.flush()
    assert time.perf_counter() - t < 30  # bounded: ~0.5 s unloaded
    new = [e for e in mem.entries() if e.source_turn_ids and e.id not in {x["id"] for x in before["entries"]}]
    assert new and all(len(e.text) <= MAX_TEXT_CHARS for e in new)
    _assert_old_entries_kept(mem, before)
    with pytest.raises(InvalidInputError):
        Turn("Ana", text + "x")


@pytest.mark.parametrize("text", [b"I like tea.", bytearray(b"I like tea."), 42, None])
def test_non_str_text_is_rejected(mem, text):
    before = _snapshot(mem)
    err = _rejects(mem, {"speaker": "Ana", "text": text}, "text")
    if isinstance(text, bytes | bytearray):
        assert "decode" in err.problem
    _assert_unchanged(mem, before)


@pytest.mark.parametrize("text", ["bad \ud800 half", "surrogateescape \udcff byte", "\udc80"])
def test_lone_surrogates_are_rejected_not_left_pending(mem, text):
    """Before the fix a lone surrogate was acknowledged, then failed every later flush."""
    before = _snapshot(mem)
    err = _rejects(mem, {"speaker": "Ana", "text": text}, "text")
    assert "surrogate" in err.problem
    _assert_unchanged(mem, before)
    _assert_still_usable(mem)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"speaker": "An\ud800a", "text": "hello there"}, "speaker"),
        ({"speaker": "Ana", "text": "hello there", "turn_id": "t-\udc00"}, "turn_id"),
        ({"speaker": "Ana", "text": "hello there", "metadata": {"image_caption": "a \ud83d cat"}}, "metadata"),
        ({"speaker": "Ana", "text": "hello there", "metadata": {"when": object()}}, "metadata"),
        ({"speaker": "Ana", "text": "hello there", "metadata": ["not", "a", "dict"]}, "metadata"),
        ({"speaker": "\x00\x07", "text": "hello there"}, "speaker"),
    ],
)
def test_other_fields_that_could_not_be_stored_are_rejected(mem, bad, field):
    before = _snapshot(mem)
    _rejects(mem, bad, field)
    _assert_unchanged(mem, before)
    _assert_still_usable(mem)


def test_bad_scope_is_rejected(mem):
    before = _snapshot(mem)
    with pytest.raises(InvalidInputError) as info:
        mem.add(turn("Ana", "hello there"), user_id="u\ud800")
    assert info.value.field == "user_id"
    _assert_unchanged(mem, before)


def test_turn_mutated_after_construction_is_revalidated(mem):
    before = _snapshot(mem)
    t = turn("Ana", "a perfectly fine sentence", 10)
    t.text = "now broken \ud800"
    with pytest.raises(InvalidInputError) as info:
        mem.add(t)
    assert info.value.field == "turns[0].text"
    _assert_unchanged(mem, before)
    _assert_still_usable(mem)


def test_control_characters_and_nul_are_stripped(mem, tmp_path):
    """Documented: C0 (but tab/newline), DEL and C1 are removed, CR/VT/FF become newlines."""
    before = _snapshot(mem)
    raw = "I love kay\x00aking\x07 on \x1b[1mlakes\x1b[0m.\r\nTab\there.\x7f\x85\x0bEnd\rdone"
    t = Turn("Ana\x00", raw, T0 + timedelta(days=1), "ctl")
    assert t.speaker == "Ana"
    assert t.text == "I love kayaking on [1mlakes[0m.\nTab\there.\nEnd\ndone"
    mem.add(t)
    mem.flush()
    new = [e for e in mem.entries() if "ctl" in e.source_turn_ids]
    assert new
    for e in new:
        assert not any(ord(c) < 32 and c not in "\n\t" for c in e.text)
    # The lexical index (FTS5) finds the word that had a NUL inside it, and the dense
    # index (chromadb) returns the new entry too.
    lex = {i for i, _ in mem.storage.lexical_search("kayaking", 5)}
    assert lex & {e.id for e in new}
    dense = mem.storage.dense_search(new[0].embedding, 1)
    assert dense[0][0] == new[0].id
    assert "kayaking" in mem.retrieve("Who loves kayaking on lakes?").to_text()
    _assert_old_entries_kept(mem, before)
    # The whole store round-trips through export (JSON) and a reopen.
    assert mem.export(tmp_path / "dump.jsonl") > 0
    for line in (tmp_path / "dump.jsonl").read_text(encoding="utf-8").splitlines():
        json.loads(line)


def test_control_characters_in_query_are_stripped_and_surrogates_replaced(mem):
    before = _snapshot(mem)
    g1 = mem.retrieve("Where does Caroline go\x00 hiking?\x1b")
    g2 = mem.retrieve("Where does Caroline go hiking? \ud800")
    assert "Alps" in g1.to_text() and "Alps" in g2.to_text()
    for q in ("\x00\x07", " \n ", b"hiking", None):
        with pytest.raises(InvalidInputError) as info:
            mem.retrieve(q)
        assert info.value.field == "query"
    _assert_unchanged(mem, before)


# --------------------------------------------------------------------------- timestamps
def test_naive_and_aware_timestamps_mix_consistently(mem):
    """Naive = UTC (documented in models.py); aware ones keep their offset (the speaker's
    calendar, for grounding) and are stored as the same instant, read back in UTC."""
    before = _snapshot(mem)
    day = datetime(2024, 3, 1, 12, 0)
    plus2, minus5 = timezone(timedelta(hours=2)), timezone(timedelta(hours=-5))  # 11:00 and 12:30 UTC below
    turns = [
        Turn("Ana", "I repaint the kitchen yellow.", day, "naive-12:00"),  # 12:00 UTC
        Turn("Ana", "I plant tomatoes in the garden.", datetime(2024, 3, 1, 13, 0, tzinfo=plus2), "plus2-11:00"),
        Turn("Ana", "I fix the broken fence outside.", datetime(2024, 3, 1, 7, 30, tzinfo=minus5), "minus5-12:30"),
        Turn.from_dict({"speaker": "Ana", "text": "I bake sourdough bread tonight.",
                        "timestamp": "2024-03-01T12:15:00", "turn_id": "iso-naive-12:15"}),
        Turn.from_dict({"speaker": "Ana", "text": "I wash the old car quickly.",
                        "timestamp": "2024-03-01T10:45:00Z", "turn_id": "iso-z-10:45"}),
    ]
    assert [t.timestamp.utcoffset() for t in turns] == [timedelta(0), timedelta(hours=2), timedelta(hours=-5),
                                                        timedelta(0), timedelta(0)]
    mem.add(turns)
    mem.flush()
    assert all(e.timestamp.utcoffset() == timedelta(0) for e in mem.entries() if e.timestamp)
    order = [e.source_turn_ids[0] for e in mem.entries() if e.timestamp and e.timestamp.year == 2024]
    assert order == ["iso-z-10:45", "plus2-11:00", "naive-12:00", "iso-naive-12:15", "minus5-12:30"]
    assert all(e.timestamp.tzinfo is not None for e in mem.entries() if e.timestamp)
    _assert_old_entries_kept(mem, before)


def test_out_of_order_timestamps_are_read_back_in_time_order(mem):
    before = _snapshot(mem)
    texts = ["I visited Rome.", "I learned to swim.", "I sold my guitar.", "I moved to Oslo.", "I met a chef."]
    minutes = [4000, 1000, 3000, -2000, 2000]  # arrival order != time order, some before T0
    mem.add([turn("Ana", t, m, f"ooo{i}") for i, (t, m) in enumerate(zip(texts, minutes, strict=True))])
    mem.flush()
    stamps = [e.timestamp for e in mem.entries() if e.timestamp]
    assert stamps == sorted(stamps)
    ids = [e.source_turn_ids[0] for e in mem.entries() if e.source_turn_ids[0].startswith("ooo")]
    assert ids == ["ooo3", "ooo1", "ooo4", "ooo2", "ooo0"]
    assert "Oslo" in mem.retrieve("Where did Ana move?").to_text()
    _assert_old_entries_kept(mem, before)


def test_far_future_and_far_past_timestamps(mem, make_memory):
    """Any year datetime holds is accepted; relative words that would leave the range are
    left ungrounded (they used to raise inside extraction and wedge the pending turn)."""
    before = _snapshot(mem)
    edge = [
        Turn("Ana", "See you tomorrow, next month and next Friday.",
             datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), "max"),
        Turn("Ana", "Yesterday and last month I walked a lot.", datetime(1, 1, 1), "min"),
        Turn("Ana", "Next year I will travel far.", datetime(9999, 6, 1), "y9999"),
    ]
    mem.add(edge)
    mem.flush()
    by_turn = {e.source_turn_ids[0]: e for e in mem.entries()}
    assert by_turn["max"].timestamp.year == 9999  # stored epoch rounds past max: clamped on read
    assert by_turn["min"].timestamp == datetime(1, 1, 1, tzinfo=UTC)
    stamps = [e.timestamp for e in mem.entries() if e.timestamp]
    assert stamps == sorted(stamps) and stamps[0].year == 1 and stamps[-1].year == 9999
    assert mem.retrieve("When will Ana travel?").to_text()
    _assert_old_entries_kept(mem, before)
    _assert_still_usable(mem)
    # Reopening reads the same far dates back.
    path = mem.path
    mem.close()
    again = make_memory(path.name, Config(window_size=4), hashing=True)
    assert {e.source_turn_ids[0]: e.timestamp for e in again.entries()}["min"].year == 1


def test_aware_timestamp_out_of_range_in_utc_is_rejected(mem):
    before = _snapshot(mem)
    bad = {"speaker": "Ana", "text": "hello there",
           "timestamp": datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5)))}
    err = _rejects(mem, bad, "timestamp")
    assert "out of range" in err.problem
    _assert_unchanged(mem, before)


@pytest.mark.parametrize("ts", ["yesterday", "2023-13-45", "", "05/08/2023", 1683554160, 1.5e12, True, [2023]])
def test_unparseable_timestamps_are_rejected(mem, ts):
    before = _snapshot(mem)
    err = _rejects(mem, {"speaker": "Ana", "text": "hello there", "timestamp": ts}, "timestamp")
    assert "ISO 8601" in err.problem
    _assert_unchanged(mem, before)
    _assert_still_usable(mem)


def test_iso_strings_round_trip_through_to_dict():
    t = Turn("Ana", "hello", datetime(2023, 5, 8, 13, 56, tzinfo=timezone(timedelta(hours=2))), "x")
    back = Turn.from_dict(t.to_dict())
    assert back.timestamp == t.timestamp == datetime(2023, 5, 8, 11, 56, tzinfo=UTC)


# --------------------------------------------------------------------------- dict turns
def test_unknown_dict_fields_are_rejected_naming_the_field(mem):
    """Rejected, not folded into metadata: a typo ("timestmap") would otherwise lose data."""
    before = _snapshot(mem)
    err = _rejects(mem, {"speaker": "Ana", "text": "hello there", "timestmap": T0, "mood": "happy"}, "mood")
    assert "timestmap" in err.problem and "metadata" in err.problem
    _rejects(mem, {"speaker": "Ana"}, "text")
    _rejects(mem, {"text": "hello"}, "speaker")
    _rejects(mem, {"speaker": "Ana", "text": "hi", 7: "x"}, "7")
    _assert_unchanged(mem, before)
    # The documented alternative is accepted.
    mem.add({"speaker": "Ana", "text": "I feel happy about the garden.", "timestamp": T0 + timedelta(days=2),
             "turn_id": "meta", "metadata": {"mood": "happy"}})
    mem.flush()
    (e,) = [e for e in mem.entries() if "meta" in e.source_turn_ids]
    assert e.metadata.get("mood") == "happy"
    _assert_old_entries_kept(mem, before)


@pytest.mark.parametrize("turns", ["just a string", b"bytes", 42, [42], [None]])
def test_wrong_container_is_rejected(mem, turns):
    before = _snapshot(mem)
    with pytest.raises(InvalidInputError) as info:
        mem.add(turns)
    assert info.value.field.startswith("turns")
    _assert_unchanged(mem, before)


# --------------------------------------------------------------------------- queries
def test_hundred_kilobyte_question_is_bounded_and_fast(mem):
    """Documented in ``retrieve``: only the last MAX_QUERY_CHARS characters are used."""
    before = _snapshot(mem)
    filler = "Tell me everything you remember about the weather and the news. " * 1600
    question = (filler + QUESTION)[-100_000:]
    assert len(question) == 100_000
    mem.retrieve(QUESTION)  # warm caches
    t = time.perf_counter()
    big = mem.retrieve(question)
    elapsed = time.perf_counter() - t
    assert elapsed < 2.0, elapsed
    assert big.to_text() == mem.retrieve(question[-MAX_QUERY_CHARS:]).to_text()
    assert "Alps" in big.to_text()
    _assert_unchanged(mem, before)


# --------------------------------------------------------------------------- ids, vectors, files
def test_no_user_id_never_means_any_user(mem):
    """``get``, ``history``, ``delete``, ``unlink`` and ``edges`` take a user id as every read
    does: None or "" is an error naming ``user_id``, never a read across users."""
    mem.add(turn("Bob", "My locker code is 4471.", 600), user_id="bob")
    mem.flush()
    bob = mem.entries("bob")[0].id
    before = _snapshot(mem)
    for call in (lambda u: mem.get(bob, user_id=u), lambda u: mem.history(bob, user_id=u),
                 lambda u: mem.delete(bob, user_id=u), lambda u: mem.unlink(bob, bob, user_id=u),
                 lambda u: mem.edges(u)):
        for bad in (None, "", 5):
            with pytest.raises(InvalidInputError) as info:
                call(bad)
            assert info.value.field == "user_id"
    assert [e.id for e in mem.entries("bob")] == [bob]
    _assert_unchanged(mem, before)


@pytest.mark.parametrize("bad", ["\ud800", ["e-1"], None, "", "e-\x001"])
def test_bad_entry_ids_are_rejected_naming_the_field(mem, bad):
    before = _snapshot(mem)
    for call, field in ((mem.get, "entry_id"), (mem.history, "entry_id"), (mem.delete, "entry_id"),
                        (lambda i: mem.unlink(i, "e-2"), "old_id"), (lambda i: mem.unlink("e-2", i), "new_id")):
        with pytest.raises(InvalidInputError) as info:
            call(bad)
        assert info.value.field == field
    _assert_unchanged(mem, before)
    _assert_still_usable(mem)


def test_query_vector_and_config_are_checked(mem):
    """A query vector of another length, of NaN, or not numbers, and a config that is no
    ``Config``, are input errors, not a crash or a ranking computed from NaN."""
    import numpy as np

    dim = mem.embedder.dim
    for bad in (np.ones(10), np.full(dim, np.nan), np.ones((2, dim)), ["a"] * dim):
        with pytest.raises(InvalidInputError) as info:
            mem.retrieve(QUESTION, query_vector=bad)
        assert info.value.field == "query_vector"
    with pytest.raises(InvalidInputError) as info:
        mem.retrieve(QUESTION, config={"token_budget": 5})  # type: ignore[arg-type]
    assert info.value.field == "config"
    good = mem.embedder.embed([QUESTION])[0]
    assert mem.retrieve(QUESTION, query_vector=list(good)).facts


def test_importing_a_missing_file_or_a_directory_is_an_input_error(mem, tmp_path):
    before = _snapshot(mem)
    for path in (tmp_path / "missing.jsonl", tmp_path):
        with pytest.raises(InvalidInputError):
            mem.import_(path)
    _assert_unchanged(mem, before)


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_importing_an_empty_file_is_an_input_error(mem, tmp_path, content):
    """An empty copy of an export is a failed copy, not an export of nothing (the API
    returned 0 entries where the CLI refused the same file)."""
    before = _snapshot(mem)
    path = tmp_path / "empty.jsonl"
    path.write_text(content)
    with pytest.raises(InvalidInputError, match="it is empty"):
        mem.import_(path)
    _assert_unchanged(mem, before)


def test_a_closed_memory_refuses_reads_with_a_store_error(make_memory):
    from ariadnemem_core.errors import StoreError

    m = make_memory(hashing=True)
    m.add(turn("Ana", "I keep bees on the roof.", 1))
    m.flush()
    m.retrieve("What does Ana keep?")
    m.close()
    for call in (lambda: m.retrieve("What does Ana keep?"), lambda: m.answer("What does Ana keep?")):
        with pytest.raises(StoreError, match="closed"):
            call()


def test_an_embedder_of_the_wrong_size_is_caught_before_anything_is_stored(make_memory):
    """A caller's embedder that returns vectors of another length (or NaN) raises an
    ``EmbeddingError`` at flush; the turn stays pending and is stored once the model works,
    and the user's memory is never wedged."""
    import numpy as np

    from ariadnemem_core.embedding import HashEmbedder
    from ariadnemem_core.errors import EmbeddingError

    class Flaky(HashEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.bad: str | None = "short"

        def embed(self, texts):  # type: ignore[no-untyped-def]
            v = super().embed(texts)
            if self.bad == "short":
                return v[:, :10]
            return np.full_like(v, np.nan) if self.bad == "nan" else v

    emb = Flaky()
    m = make_memory(embedder=emb)
    m.add(turn("Ann", "Ann owns a red kayak.", 1))
    for bad in ("short", "nan"):
        emb.bad = bad
        with pytest.raises(EmbeddingError):
            m.flush()
        assert m.entries() == [] and len(m.storage.pending()) == 1
        with pytest.raises(EmbeddingError):
            m.retrieve("What does Ann own?")
    emb.bad = None
    m.flush()
    assert [e.text for e in m.entries()] == ["Ann owns a red kayak."]
    assert "kayak" in m.retrieve("What does Ann own?").to_text()


def test_an_export_never_replaces_the_stores_own_files(make_memory):
    """An export aimed inside the store's directory (its records file above all) is refused:
    replacing it would destroy every user's memory."""
    m = make_memory("selfexport", hashing=True)
    m.add(turn("Ana", "I keep bees on the roof.", 1), user_id="ana")
    m.add(turn("Ben", "I keep a kayak in the garage.", 2), user_id="ben")
    m.flush()
    for name in ("memory.sqlite3", "ariadnemem/memory.sqlite3", "new-export.jsonl"):
        with pytest.raises(InvalidInputError, match="inside the store"):
            m.export(m.path / name, user_id="ana")
    assert {u for u in m.users()} == {"ana", "ben"}
    assert "bees" in m.retrieve("What does Ana keep?", user_id="ana").to_text()


def test_names_are_bounded_in_bytes_and_hold_no_nul(mem):
    """A name of 1,000 CJK characters (3,000 bytes) would be accepted by ``add`` and then
    fail every flush of its scope on Postgres (an index row holds ~2,700 bytes): names are
    bounded in UTF-8 bytes too; a NUL (Postgres text holds none) is refused the same way."""
    before = _snapshot(mem)
    wide = "漢" * 400  # 400 characters, 1,200 bytes
    with pytest.raises(InvalidInputError, match="bytes"):
        mem.add([{"speaker": wide, "text": "I work at Acme."}])
    for field, kwargs in (("user_id", {"user_id": wide}), ("user_id", {"user_id": "a\x00b"}),
                          ("agent_id", {"agent_id": "a\x00b"})):
        with pytest.raises(InvalidInputError) as info:
            mem.add(turn("Ana", "I work at Acme.", 700), **kwargs)
        assert info.value.field == field
    _assert_unchanged(mem, before)
    mem.add([{"speaker": "漢" * 333, "text": "I work at Acme."}])  # 999 bytes: accepted
    _assert_still_usable(mem)


def test_metadata_must_be_strict_json_of_bounded_depth(mem):
    """Metadata 950 levels deep was accepted and then unreadable from a caller a few dozen
    frames deeper (its turn quarantined, its entry hidden); NaN made an MCP listing that
    JSON clients cannot parse. Both are refused at the door, naming the field."""
    deep: Any = "leaf"
    for _ in range(100):
        deep = [deep]
    before = _snapshot(mem)
    for bad in ({"trace": deep}, {"score": float("nan")}, {"score": float("inf")}):
        with pytest.raises(InvalidInputError) as info:
            mem.add(Turn("Ana", "Ana rows on Tuesdays.", T0, metadata=bad), user_id="ana")
        assert info.value.field.endswith("metadata")
    _assert_unchanged(mem, before)
    nested = "leaf"
    for _ in range(20):
        nested = [nested]
    mem.add(Turn("Ana", "Ana rows on Tuesdays.", T0, metadata={"trace": nested}), user_id="ana")
    mem.flush()
    assert mem.entries("ana")[0].metadata["trace"] == nested


def test_stats_and_export_check_the_user_id(mem, tmp_path):
    """A user id given to stats or export is checked as every read checks it (a lone
    surrogate was a UnicodeEncodeError, a list a driver error or an empty export)."""
    for bad in ("\ud800", ["ana"], "", "a\x00b"):
        with pytest.raises(InvalidInputError):
            mem.stats(bad)
        with pytest.raises(InvalidInputError):
            mem.export(tmp_path / "out.jsonl", user_id=bad)
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("args, field", [((123,), "path"), ((b"/tmp/x",), "path"), (("/tmp/a\x00b",), "path"),
                                         (("/tmp/x", {"window_size": 2}), "config")])
def test_constructor_arguments_of_the_wrong_kind(tmp_path, args, field):
    with pytest.raises(InvalidInputError) as info:
        AriadneMemory(*args)
    assert info.value.field == field
    for bad in (-1, 0, "5", float("nan"), float("inf"), True):
        with pytest.raises(InvalidInputError, match="lock_timeout"):
            AriadneMemory(tmp_path / "s", lock_timeout=bad)
    from ariadnemem_core import HashEmbedder, StoreError

    for raw in ("inf", "1e12", "nan"):  # an OverflowError from inside at the first write before
        with pytest.MonkeyPatch.context() as env:
            env.setenv("ARIADNEMEM_LOCK_TIMEOUT", raw)
            with pytest.raises(StoreError, match="lock timeout"):
                AriadneMemory(tmp_path / "s", embedder=HashEmbedder())


def test_a_url_no_backend_opens_is_refused(tmp_path, monkeypatch):
    """A database URL with a driver suffix, a typo or another database opened a local
    directory store named after it (hosts meant to share one memory each kept their own,
    and ``location`` showed the password): refused, naming the scheme only."""
    from ariadnemem_core import StoreError

    monkeypatch.chdir(tmp_path)
    for url in ("postgresql+psycopg://app:secret@db:5432/memory", "postgresq://app:secret@db/memory",
                "mysql://app:secret@db/memory", "file:///tmp/memory"):
        with pytest.raises(StoreError, match="no store backend opens") as info:
            AriadneMemory(url)
        assert "secret" not in str(info.value)
    assert not list(tmp_path.iterdir())


def test_metadata_stored_before_the_stricter_door_stays_readable(mem, make_memory, tmp_path):
    """The strict metadata check is for what comes in: an export whose entries and pending
    turns hold NaN or deep metadata (as an earlier version stored them) imports, reads back
    and survives ``doctor`` (the check on every read path quarantined them, and the store's
    own export could not be imported again)."""
    import math

    mem.add([turn("Ana", "Ana rows on Tuesdays.", 1, "a1"), turn("Ana", "Ana sails in July.", 2, "a2")],
            user_id="ana")
    mem.flush()
    mem.add(turn("Ana", "Ana paints on Sundays.", 3, "a3"), user_id="ana")  # stays pending
    path = tmp_path / "old.jsonl"
    mem.export(path)
    deep: Any = "leaf"
    for _ in range(80):
        deep = [deep]
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for r in rows:
        if r["type"] == "entry":
            r["metadata"] = {"score": float("nan"), "trace": deep}
        elif r["type"] == "pending":
            r["turn"]["metadata"] = {"score": float("inf")}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # NaN / Infinity, as Python writes them
    copy = make_memory("copy", config=Config(window_size=4), hashing=True)
    copy.import_(path)
    copy.doctor()
    copy.flush()
    got = copy.entries("ana")
    assert len(got) == 3 and math.isnan(got[0].metadata["score"]) and got[-1].metadata == {"score": math.inf}
    again = tmp_path / "again.jsonl"
    copy.export(again)
    make_memory("third", hashing=True).import_(again)
