"""Scopes, deletion, forgetting, export/import round trips."""

from __future__ import annotations

import json

import pytest

from ariadnemem_core import NotFoundError
from tests.conftest import BOTH_BACKENDS, turn

pytestmark = BOTH_BACKENDS

HOUR = 60
DAY = 24 * HOUR


def dialogue(prefix: str):
    return [
        turn("Maya", "I went climbing at the gym on Elm Street.", 0, f"{prefix}1"),
        turn("Maya", "My phone number is 555-0142.", 5, f"{prefix}2"),
        turn("Leo", "The kickoff meeting is at 2 pm on Friday.", 10, f"{prefix}3"),
        turn("Leo", "The kickoff meeting moved to 3 pm on Friday.", 2 * DAY, f"{prefix}4"),
        turn("Maya", "I went climbing again and finished a V3 route.", 3 * DAY, f"{prefix}5"),
        turn("Maya", "Ana suggested a hotel in Alfama for the Lisbon trip.", 4 * DAY, f"{prefix}6"),
    ]


QUESTIONS = [
    "What is Maya's phone number?",  # attribute fast path
    "How many times did Maya go climbing?",  # counter fast path
    "When is the kickoff meeting?",  # update chain
    "Where is Maya staying in Lisbon and who suggested it?",  # multi-hop / bridges
    "climbing",  # lexical
]


def test_users_never_see_each_others_memories(make_memory):
    mem = make_memory("iso")
    mem.add(dialogue("a"), user_id="alice")
    mem.add(dialogue("b"), user_id="bob")
    mem.flush()
    alice_ids = {e.id for e in mem.entries("alice")}
    bob_ids = {e.id for e in mem.entries("bob")}
    assert alice_ids and bob_ids and not alice_ids & bob_ids
    for q in QUESTIONS:
        for user, own, prefix in (("alice", alice_ids, "a"), ("bob", bob_ids, "b")):
            g = mem.retrieve(q, user_id=user)
            assert g.facts, q
            assert {f.id for f in g.facts} <= own, (user, q)
            assert all(t.startswith(prefix) for f in g.facts for t in f.source_turn_ids)
            assert {n for p in g.paths for n in p} <= own
    assert mem.retrieve("anything about climbing", user_id="carol").facts == []


def test_agent_and_session_scopes_filter_reads(make_memory):
    mem = make_memory("scopes")
    mem.add([turn("Maya", "I love the blue climbing shoes.", 0, "s1")], user_id="u", session_id="one")
    mem.add([turn("Maya", "I love the red climbing shoes.", DAY, "s2")], user_id="u", session_id="two")
    mem.flush()
    assert {e.source_turn_ids[0] for e in mem.entries("u")} == {"s1", "s2"}
    assert {e.source_turn_ids[0] for e in mem.entries("u", session_id="one")} == {"s1"}
    g = mem.retrieve("Which climbing shoes does Maya love?", user_id="u", session_id="two")
    assert {t for f in g.facts for t in f.source_turn_ids} == {"s2"}


def test_delete_removes_from_every_index_and_repairs_chain(make_memory):
    mem = make_memory("del")
    mem.add([turn("Leo", "The kickoff meeting is at 2 pm on Friday.", 0, "m1"),
             turn("Leo", "The kickoff meeting moved to 3 pm on Friday.", 2 * HOUR, "m2"),
             turn("Leo", "The kickoff meeting moved to 4 pm on Friday.", 4 * HOUR, "m3")])
    mem.flush()
    ids = {e.source_turn_ids[0]: e.id for e in mem.entries()}
    assert [(e.src, e.dst) for e in mem.edges()][:1] == [(ids["m1"], ids["m2"])]
    mem.delete(ids["m2"])
    with pytest.raises(NotFoundError) as missing:
        mem.get(ids["m2"])
    # The message reads as written, not as KeyError's quoted repr of it.
    assert str(missing.value) == f"no entry {ids['m2']!r} for user 'default'"
    assert ids["m2"] not in {e.id for e in mem.entries()}
    assert (ids["m1"], ids["m3"]) in {(e.src, e.dst) for e in mem.edges()}
    assert all(ids["m2"] not in (e.src, e.dst) for e in mem.edges())
    assert ids["m2"] not in {i for i, _ in mem.storage.lexical_search("kickoff meeting", 10)}
    dense = mem.storage.dense_search(mem.get(ids["m1"]).embedding, 10)
    assert ids["m2"] not in {i for i, _ in dense}
    with pytest.raises(NotFoundError):
        mem.delete(ids["m2"])


def test_forget_a_user_leaves_others_untouched(make_memory):
    mem = make_memory("forget")
    mem.add(dialogue("a"), user_id="alice")
    mem.add(dialogue("b"), user_id="bob")
    mem.flush()
    n_bob = len(mem.entries("bob"))
    assert mem.forget("alice") > 0
    assert mem.entries("alice") == [] and mem.retrieve("climbing", user_id="alice").facts == []
    assert mem.retrieve("What is Maya's phone number?", user_id="alice").fast_path is None
    assert len(mem.entries("bob")) == n_bob
    assert mem.stats("alice")["entries"] == 0


def test_clear_removes_everything(make_memory):
    mem = make_memory("clear")
    mem.add(dialogue("a"), user_id="alice")
    mem.flush()
    mem.clear()
    assert mem.entries("alice") == [] and mem.stats()["entries"] == 0
    mem.add(dialogue("c"), user_id="alice")
    mem.flush()
    assert mem.entries("alice")


def test_export_import_round_trip(make_memory, tmp_path):
    mem = make_memory("src")
    mem.add(dialogue("a"), user_id="alice")
    mem.add(dialogue("b"), user_id="bob")
    mem.flush()
    mem.add([turn("Maya", "A pending turn not yet extracted.", 5 * DAY, "p1")], user_id="alice")
    path = tmp_path / "export.jsonl"
    assert mem.export(path) > 0
    copy = make_memory("dst")
    copy.import_(path)
    for user in ("alice", "bob"):
        assert [e.to_dict(with_embedding=True) for e in copy.entries(user)] == \
            [e.to_dict(with_embedding=True) for e in mem.entries(user)]
        assert [(e.src, e.dst, e.kind) for e in copy.edges(user)] == [(e.src, e.dst, e.kind) for e in mem.edges(user)]
        assert copy.stats(user) == mem.stats(user)
        for q in QUESTIONS:
            assert copy.retrieve(q, user_id=user).to_text() == mem.retrieve(q, user_id=user).to_text()
    # The fast-path counters have no public reader: compared on the private store.
    assert copy._store.mentions("alice", "maya", ["climb"]) == mem._store.mentions("alice", "maya", ["climb"])


def test_import_refuses_another_embedders_vectors(make_memory, tmp_path):
    """Same dimension is not enough: MiniLM vectors must not land in a store whose
    queries are embedded by another model (they would match nonsense silently)."""
    from ariadnemem_core import HashEmbedder
    from ariadnemem_core.errors import StoreError

    mem = make_memory("src")
    mem.add(dialogue("a"), user_id="alice")
    mem.flush()
    path = tmp_path / "export.jsonl"
    mem.export(path)
    other = make_memory("dst", embedder=HashEmbedder(dim=mem.embedder.dim))
    with pytest.raises(StoreError, match="embedded with 'sentence-transformers/all-MiniLM-L6-v2'"):
        other.import_(path)
    assert other.entries("alice") == []  # the transaction rolled back


def test_import_is_all_or_nothing(make_memory, tmp_path):
    from ariadnemem_core.errors import InvalidInputError, StoreError

    mem = make_memory("src")
    mem.add(dialogue("a"), user_id="alice")
    mem.flush()
    path = tmp_path / "export.jsonl"
    mem.export(path)
    with pytest.raises(StoreError, match="already holds entries"):
        mem.import_(path)  # its own entries again
    lines = path.read_text(encoding="utf-8").splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*lines[:3], "{not json", *lines[3:]]) + "\n", encoding="utf-8")
    copy = make_memory("dst")
    with pytest.raises(InvalidInputError, match=r"broken\.jsonl line 4"):
        copy.import_(broken)
    assert copy.entries("alice") == [] and copy.stats()["entries"] == 0  # rolled back
    headless = tmp_path / "headless.jsonl"
    headless.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="no meta record"):
        copy.import_(headless)
    assert copy.import_(path) == len(mem.entries("alice"))


def test_retrieval_cache_sees_writes_from_another_handle(make_memory, store_location):
    """The retrieval path caches decoded entries per store generation; a write through
    another handle on the same path (as another process would) must invalidate it."""
    from ariadnemem_core import AriadneMemory

    reader = make_memory("shared")
    reader.add(dialogue("c"))
    reader.flush()
    question = "When is the kickoff meeting?"
    before = reader.retrieve(question)
    kickoff = [f for f in before.facts if "kickoff" in f.text.lower()]
    assert kickoff
    gone = kickoff[0].id
    writer = AriadneMemory(store_location("shared"), embedder=reader.embedder)
    try:
        writer.delete(gone)
        writer.add([turn("Leo", "The kickoff meeting moved to 5 pm on Friday.", 5 * DAY, "c7")])
        writer.flush()
    finally:
        writer.close()
    after = reader.retrieve(question)
    assert gone not in {f.id for f in after.facts}
    assert any("5 pm" in f.text for f in after.facts)


@pytest.mark.both_backends
def test_export_import_keeps_each_scopes_recent_turns(make_memory, tmp_path):
    """The last extracted turns of a scope are the pronoun context of its next window: an
    export carries them, so the moved memory extracts its next turn as the original would
    (they were left out). A scope the importing memory already has keeps its own."""
    source = make_memory("recent-src")
    source.add([turn("Ana", "Did you see the new exhibit at the Tate?", 0, "r1"),
                turn("Ben", "Yes, I took my niece Lila on Sunday.", 1, "r2")], user_id="ana")
    source.add([turn("Ana", "Our offsite is in Lisbon.", 2, "s1")], user_id="ana", session_id="s")
    source.flush()
    path = tmp_path / "ana.jsonl"
    source.export(path, user_id="ana")
    assert sum(json.loads(line)["type"] == "recent" for line in path.read_text().splitlines()) == 3
    copy = make_memory("recent-dst")
    copy.add([turn("Ana", "The standup moved to 9:30.", 3, "c1")], user_id="ana", session_id="s")
    copy.flush()
    own = [t.text for t in copy.storage.recent_turns("ana", session_id="s")]
    copy.import_(path)
    assert [t.to_dict() for t in copy.storage.recent_turns("ana")] == \
        [t.to_dict() for t in source.storage.recent_turns("ana")]
    assert [t.text for t in copy.storage.recent_turns("ana", session_id="s")] == own == ["The standup moved to 9:30."]
    # The next turn is extracted alike in both: "she" is Lila, from the moved context.
    for mem in (source, copy):
        mem.add([turn("Ana", "She loved it.", 5, "r3")], user_id="ana")
        mem.flush()
    said = [next(e.text for e in m.entries("ana") if e.source_turn_ids == ["r3"]) for m in (source, copy)]
    assert said[0] == said[1]


@pytest.mark.both_backends
def test_an_imported_context_and_another_hosts_window_never_interleave(make_memory, tmp_path, monkeypatch):
    """A window another host commits for a scope while an import writes that scope's recent
    turns waits for it (Postgres: the user's lock; the directory store: its writer lock),
    so the scope ends with one context, not two side by side."""
    import threading
    import time

    from ariadnemem_core.store import postgres, records

    source = make_memory("ctx-src", hashing=True)
    source.add([turn("Ana", f"Ana visited museum number {i}.", i, f"s{i}") for i in range(4)], user_id="ana")
    source.flush()
    path = tmp_path / "ana.jsonl"
    source.export(path, user_id="ana")
    importer, other = make_memory("ctx-dst", hashing=True), make_memory("ctx-dst", hashing=True)
    other.add([turn("Ana", f"Ana booked hotel number {i}.", 10 + i, f"h{i}") for i in range(4)], user_id="ana")
    flushing: list[threading.Thread] = []

    def meanwhile(original):
        def racing(items, held):
            rows = original(items, held)  # the import found the scope without context
            if not flushing:  # the other host commits the scope's window now
                flushing.append(threading.Thread(target=other.flush, kwargs={"user_id": "ana"}))
                flushing[0].start()
                time.sleep(0.5)
            return rows
        return racing

    for module in (records, postgres):
        monkeypatch.setattr(module, "imported_recent", meanwhile(module.imported_recent))
    importer.import_(path)
    flushing[0].join(60)
    texts = [t.text for t in importer.storage.recent_turns("ana")]
    assert texts in ([f"Ana visited museum number {i}." for i in range(4)],
                     [f"Ana booked hotel number {i}." for i in range(4)]), texts


@pytest.mark.both_backends
def test_two_hosts_importing_one_export_at_once_import_it_once(make_memory, tmp_path, monkeypatch):
    """Two handles of one store (two hosts) importing the same export at the same moment:
    one import succeeds and the other is refused, as one after the other. On Postgres both
    passed the "not held yet" check before either committed, and the export's pending
    turns were stored twice."""
    import threading
    import time

    from ariadnemem_core import StoreError
    from ariadnemem_core.store import SQLiteStore, postgres

    source = make_memory("import-src")
    source.add([turn("Dave", "Dave's cat is called Tom.", 2, "d1"), turn("Dave", "Dave rows on Sundays.", 3, "d2")],
               user_id="dave")  # pending only: no entry id to collide on
    path = tmp_path / "dave.jsonl"
    source.export(path, user_id="dave")
    hosts = [make_memory("import-dst"), make_memory("import-dst")]
    for cls in (SQLiteStore, postgres.PostgresStore):  # both checks pass before either writes
        original = cls.write_imported

        def slow(self, plan, original=original):
            time.sleep(0.5)
            return original(self, plan)

        monkeypatch.setattr(cls, "write_imported", slow)
    barrier, outcome = threading.Barrier(2), []

    def run(mem) -> None:
        barrier.wait()
        try:
            mem.import_(path)
            outcome.append("ok")
        except StoreError as exc:
            outcome.append("held" if "pending turns" in str(exc) else str(exc))

    threads = [threading.Thread(target=run, args=(m,)) for m in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcome) == ["held", "ok"]
    assert len(hosts[0].storage.pending()) == 2 and hosts[1].stats("dave")["turns_seen"] == 2


def test_import_refuses_edges_across_users_and_a_second_import_of_pending_turns(make_memory, tmp_path):
    """An edge must join two entries of its own user in the export (one between two users'
    entries marked one user's fact superseded by the other's); an export holding only
    pending turns, imported twice, is refused the second time instead of doubling them."""
    import json

    from ariadnemem_core import InvalidInputError, StoreError

    mem = make_memory("src")
    mem.add(dialogue("a"), user_id="alice")
    mem.add([turn("Bob", "Bob's bike is blue.", 1)], user_id="bob")
    mem.flush()
    path = tmp_path / "export.jsonl"
    mem.export(path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    alice = next(r["id"] for r in rows if r["type"] == "entry" and r["user_id"] == "alice")
    bob = next(r["id"] for r in rows if r["type"] == "entry" and r["user_id"] == "bob")
    bad = tmp_path / "bad.jsonl"
    end = rows[-1]
    assert end == {"type": "end", "records": len(rows) - 2}
    bad.write_text("".join(json.dumps(r) + "\n" for r in [*rows[:-1], {
        "type": "edge", "src": alice, "dst": bob, "kind": "update", "user_id": "bob", "similarity": 0.9,
        "overlap": 0.5, "created_at": 0.0}, {"type": "end", "records": end["records"] + 1}]))
    copy = make_memory("dst")
    with pytest.raises(InvalidInputError, match="does not join two entries"):
        copy.import_(bad)
    assert copy.users() == {}
    # Update edges in a circle (each fact superseded by the next, none current): refused.
    a1, a2 = [r["id"] for r in rows if r["type"] == "entry" and r["user_id"] == "alice"][:2]
    loop = [{"type": "edge", "src": s, "dst": d, "kind": "update", "user_id": "alice", "similarity": 0.0,
             "overlap": 0.0, "created_at": 0.0} for s, d in ((a1, a2), (a2, a1))]
    bad.write_text("".join(json.dumps(r) + "\n" for r in [*rows[:-1], *loop, {"type": "end",
                                                                              "records": end["records"] + 2}]))
    with pytest.raises(InvalidInputError, match="loop"):
        copy.import_(bad)
    assert copy.users() == {}
    mem.add([turn("Dave", "Dave's cat is called Tom.", 2, "d1")], user_id="dave")  # pending only
    only_pending = tmp_path / "dave.jsonl"
    mem.export(only_pending, user_id="dave")
    copy.import_(only_pending)
    with pytest.raises(StoreError, match="pending turns"):
        copy.import_(only_pending)
    assert copy.stats("dave")["turns_seen"] == mem.stats("dave")["turns_seen"]
    assert len(copy.storage.pending()) == 1


def test_forget_with_an_id_of_the_wrong_type_is_an_input_error(make_memory):
    from ariadnemem_core import InvalidInputError

    mem = make_memory("forget")
    for bad in (["x"], {"a": 1}):
        with pytest.raises(InvalidInputError):
            mem.forget(bad)  # type: ignore[arg-type]


def test_a_truncated_export_is_refused(make_memory, tmp_path):
    """An export ends with a record counting the records before it: a copy cut off at a
    line break (which reads as a smaller, whole export) imports nothing."""
    from ariadnemem_core import InvalidInputError

    mem = make_memory("src")
    mem.add(dialogue("a"), user_id="alice")
    mem.flush()
    path = tmp_path / "export.jsonl"
    mem.export(path)
    lines = path.read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:3]))
    copy = make_memory("dst")
    with pytest.raises(InvalidInputError, match="truncated"):
        copy.import_(cut)
    cut.write_text("".join([*lines[:3], lines[-1]]))  # the end record kept, records lost
    with pytest.raises(InvalidInputError, match="end record counts"):
        copy.import_(cut)
    assert copy.users() == {}
    copy.import_(path)
    assert len(copy.entries("alice")) == len(mem.entries("alice"))


def test_the_blocks_own_error_survives_a_failing_close(make_memory, monkeypatch):
    """A ``with`` block that raises, whose flush on the way out fails too (the turns stay
    pending): the caller sees the block's error, not the flush's; without an error in the
    block, the flush's error is raised as before."""
    from ariadnemem_core import ExtractionError
    from ariadnemem_core.memory import AriadneMemory

    def broken(self, **kwargs):
        raise ExtractionError("extraction failed; the turns stay pending")

    mem = make_memory("exit")
    monkeypatch.setattr(AriadneMemory, "flush", broken)
    with pytest.raises(KeyError, match="the caller's own"), mem:
        mem.add([turn("Ana", "Ana likes kayaks.", 0)], user_id="ana")
        raise KeyError("the caller's own")
    other = make_memory("exit-2")
    with pytest.raises(ExtractionError), other:
        other.add([turn("Ana", "Ana likes kayaks.", 0)], user_id="ana")


def test_an_interrupt_closes_without_extracting_and_loses_nothing(make_memory, store_location, monkeypatch):
    """Ctrl-C inside a ``with`` block closes at once: extracting every pending window on
    the way out (one LLM call each with an LLM extractor) would hold the interrupt for
    minutes. The turns stay pending, durable, and the next open extracts them."""
    from ariadnemem_core.memory import AriadneMemory

    calls: list[int] = []
    real_flush = AriadneMemory.flush

    def counting(self, **kwargs):
        calls.append(1)
        return real_flush(self, **kwargs)

    monkeypatch.setattr(AriadneMemory, "flush", counting)
    mem = make_memory("interrupt")
    with pytest.raises(KeyboardInterrupt), mem:
        mem.add([turn("Ana", "Ana's kayak is red.", 0, "k1")], user_id="ana")
        raise KeyboardInterrupt
    assert calls == []
    again = make_memory("interrupt")
    assert again.stats("ana")["pending_turns"] == 1
    again.flush()
    assert any("k1" in e.source_turn_ids for e in again.entries("ana"))
