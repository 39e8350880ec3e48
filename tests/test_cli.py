"""The ``ariadnemem`` command line, end to end: every command run in-process through
``main([...])`` (or typer's CliRunner where stdin / a confirmation prompt matters) on real
stores with the MiniLM embedder. One memory is built with ``add`` per module and shared by
the read-only commands; destructive commands work on copies of it."""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import typer.testing
from fake_openai_server import FakeOpenAIServer, prompt_text
from rich.console import Console

from ariadnemem_core.cli import _common, app, main, memory_cmds

CLEAN_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ARIADNEMEM_LLM_MODEL", "ARIADNEMEM_STORE", "ARIADNEMEM_USER",
             "ARIADNEMEM_CHROMA_HOST", "ARIADNEMEM_CHROMA_PORT")

ALICE = [
    {"speaker": "Alice", "text": "I adopted a grey kitten named Miso from the shelter.",
     "timestamp": "2024-03-01T09:00:00", "turn_id": "a1"},
    {"speaker": "Alice", "text": "The kickoff meeting is at 2 pm on Friday.",
     "timestamp": "2024-03-01T09:05:00", "turn_id": "a2"},
    {"speaker": "Alice", "text": "My friend [red]Leo[/red] lives in [link=http://x]Lisbon[/link].",
     "timestamp": "2024-03-01T09:10:00", "turn_id": "a3"},
    {"speaker": "Alice", "text": "The kickoff meeting moved to 3 pm.",
     "timestamp": "2024-03-02T09:00:00", "turn_id": "a4"},
]
BOB = [
    {"speaker": "Bob", "text": "I play the cello in the city orchestra every Thursday.",
     "timestamp": "2024-04-01T18:00:00", "turn_id": "b1"},
    {"speaker": "Bob", "text": "My sister Nora works as a nurse in Porto.",
     "timestamp": "2024-04-01T18:02:00", "turn_id": "b2"},
]
ALICE_WORDS = ("Miso", "kickoff", "Leo", "Lisbon")
KITTEN_Q = "What is the name of Alice's kitten?"


# ---------------------------------------------------------------------- helpers
def run(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str, str]:
    """``main(args)`` -> (exit code, stdout, stderr). ``main`` returns 0 or raises SystemExit."""
    capsys.readouterr()
    try:
        code = main([str(a) for a in args])
        assert code == 0
    except SystemExit as exc:
        code = exc.code
        assert isinstance(code, int) and code != 0
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *args: Any) -> Any:
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)  # --json: one document and nothing else on stdout


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def locomo_sample(sid: str, a: str, b: str, lines: list[str]) -> dict[str, Any]:
    conv: dict[str, Any] = {"speaker_a": a, "speaker_b": b, "session_1_date_time": "10:00 am on 1 August, 2023"}
    conv["session_1"] = [{"speaker": (a, b)[i % 2], "dia_id": f"D1:{i + 1}", "text": t} for i, t in enumerate(lines)]
    return {"sample_id": sid, "conversation": conv, "qa": []}


def no_memory_files(path: Path) -> bool:
    return not (path / "memory.sqlite3").exists() and not (path / "chroma").exists()


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in rows]


@pytest.fixture(autouse=True)
def _cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No LLM, no store/user from the environment, default store under tmp_path; a wide
    console so table cells are not wrapped mid-word."""
    for name in CLEAN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    wide = Console(highlight=False, soft_wrap=False, width=250)
    monkeypatch.setattr(_common, "out", wide)
    monkeypatch.setattr(memory_cmds, "out", wide)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Iterator[Path]:
    """One store built with ``add``: alice from JSONL (a LINKed update, rich markup), bob from JSON."""
    root = tmp_path_factory.mktemp("cli")
    store = root / "store"
    write_jsonl(root / "alice.jsonl", ALICE)
    (root / "bob.json").write_text(json.dumps(BOB), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        for name in CLEAN_ENV:
            mp.delenv(name, raising=False)
        assert main(["add", str(root / "alice.jsonl"), "--store", str(store), "--user", "alice", "-q"]) == 0
        assert main(["add", str(root / "bob.json"), "--store", str(store), "-u", "bob", "-q"]) == 0
    yield store


@pytest.fixture(scope="module")
def listing(base: Path) -> dict[str, list[dict[str, Any]]]:
    """Each user's entries (``entries --json``), read once."""
    found = {}
    for user in ("alice", "bob"):
        buf = io.StringIO()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sys, "stdout", buf)
            assert main(["entries", "--store", str(base), "--user", user, "--json"]) == 0
        found[user] = json.loads(buf.getvalue())
    return found


def entry_for(listing: dict[str, list[dict[str, Any]]], user: str, turn_id: str) -> dict[str, Any]:
    (hit,) = [e for e in listing[user] if turn_id in e["source_turn_ids"]]
    return hit


@pytest.fixture
def copy(base: Path, tmp_path: Path) -> Path:
    """A private copy of the shared store for destructive commands."""
    return Path(shutil.copytree(base, tmp_path / "copy"))


# ---------------------------------------------------------------------- add
def test_add_jsonl_summary_counts(capsys, tmp_path: Path, minilm) -> None:
    store = tmp_path / "s"
    data = run_json(capsys, "add", write_jsonl(tmp_path / "a.jsonl", ALICE), "--store", store, "-u", "alice")
    assert data["turns"] == 4 and data["store"] == str(store)
    assert list(data["users"]) == ["alice"]
    row = data["users"]["alice"]
    assert row["turns_seen"] == 4 and row["gate_kept"] + row["gate_dropped"] == 4 and row["pending_turns"] == 0
    assert row["link"] == 1  # the kickoff meeting moved: an update, not a new fact
    # a fresh user: every ADD and LINK is a new entry, a MERGE is not
    assert row["entries"] == row["add"] + row["link"]
    assert row["merge"] + row["link"] + row["add"] >= row["gate_kept"]
    listed = run_json(capsys, "entries", "--store", store, "-u", "alice")
    assert len(listed) == row["entries"]
    assert {t for e in listed for t in e["source_turn_ids"]} == {"a1", "a2", "a3", "a4"}
    stats = run_json(capsys, "stats", "--store", store, "-u", "alice")
    assert stats["counters"]["turns_seen"] == 4 and stats["counters"]["entries"] == row["entries"]

    # the table summary names the user and the counts
    code, out, _ = run(capsys, "add", write_jsonl(tmp_path / "more.jsonl", BOB), "--store", store, "-u", "bob", "-q")
    assert code == 0
    assert "user bob" in out and "turns added" in out and "MERGE / LINK / ADD" in out and "2 turns in" in out


def test_add_no_flush_keeps_the_partial_window_and_reads_do_not_write(capsys, tmp_path: Path) -> None:
    store = tmp_path / "s"
    first = run_json(capsys, "add", write_jsonl(tmp_path / "a.jsonl", ALICE[:2]), "--store", store, "-u", "al",
                     "--no-flush")
    assert first["users"]["al"]["pending_turns"] == 2 and first["users"]["al"]["entries"] == 0
    for _ in range(2):  # read commands leave the pending turns alone
        assert run_json(capsys, "stats", "--store", store, "-u", "al")["counters"]["pending_turns"] == 2
        assert run_json(capsys, "entries", "--store", store, "-u", "al") == []
        # ... and a read finds them as they were said, before their window is extracted
        facts = run_json(capsys, "retrieve", "kickoff", "--store", store, "-u", "al")["facts"]
        assert facts and {f["role"] for f in facts} == {"pending"}
        assert {t for f in facts for t in f["source_turn_ids"]} <= {"a1", "a2"}
    second = run_json(capsys, "add", write_jsonl(tmp_path / "b.jsonl", ALICE[2:]), "--store", store, "-u", "al")
    row = second["users"]["al"]
    assert row["pending_turns"] == 0 and row["turns_seen"] == 2 and row["entries"] == 4
    listed = run_json(capsys, "entries", "--store", store, "-u", "al")
    assert {t for e in listed for t in e["source_turn_ids"]} == {"a1", "a2", "a3", "a4"}


def test_add_json_list_and_turns_object(capsys, tmp_path: Path) -> None:
    store = tmp_path / "s"
    (tmp_path / "list.json").write_text(json.dumps(BOB), encoding="utf-8")
    (tmp_path / "obj.json").write_text(json.dumps({"turns": ALICE[:2]}), encoding="utf-8")
    listed = run_json(capsys, "add", tmp_path / "list.json", "--store", store, "-u", "bob")
    assert listed["turns"] == 2 and listed["users"]["bob"]["turns_seen"] == 2
    obj = run_json(capsys, "add", tmp_path / "obj.json", "--store", store, "-u", "carol")
    assert obj["turns"] == 2 and list(obj["users"]) == ["carol"]
    assert obj["users"]["carol"]["entries"] == obj["users"]["carol"]["add"] + obj["users"]["carol"]["link"]
    assert {t for e in run_json(capsys, "entries", "--store", store, "-u", "carol") for t in e["source_turn_ids"]} \
        == {"a1", "a2"}
    assert {t for e in run_json(capsys, "entries", "--store", store, "-u", "bob") for t in e["source_turn_ids"]} \
        == {"b1", "b2"}


def test_add_from_stdin(tmp_path: Path) -> None:
    store = tmp_path / "s"
    text = "".join(json.dumps(r) + "\n" for r in BOB)
    result = typer.testing.CliRunner().invoke(app, ["add", "-", "--store", str(store), "-u", "dan", "--json"],
                                              input=text)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["file"] == "-" and data["turns"] == 2 and data["users"]["dan"]["turns_seen"] == 2
    bad = typer.testing.CliRunner().invoke(app, ["add", "-", "--store", str(store), "-u", "dan"],
                                           input=text + '{"speaker": "Bob"}\n')
    assert bad.exit_code == 1 and "<stdin> line 3" in bad.stderr and "Error:" in bad.stderr
    # a single turn object, and JSONL in a file whose suffix says nothing
    one = typer.testing.CliRunner().invoke(app, ["add", "-", "--store", str(store), "-u", "eve", "--json"],
                                           input=json.dumps(ALICE[0]))
    assert one.exit_code == 0, one.output
    assert json.loads(one.stdout)["users"]["eve"]["turns_seen"] == 1
    (tmp_path / "turns.txt").write_text(text, encoding="utf-8")
    txt = typer.testing.CliRunner().invoke(app, ["add", str(tmp_path / "turns.txt"), "--store", str(store),
                                                 "-u", "fay", "--json"])
    assert txt.exit_code == 0, txt.output
    assert json.loads(txt.stdout)["users"]["fay"]["turns_seen"] == 2


@pytest.mark.slow
def test_add_locomo_users_filter_and_unknown_id(capsys, tmp_path: Path) -> None:
    path = tmp_path / "mini_locomo.json"
    path.write_text(json.dumps([
        locomo_sample("s-1", "Ann", "Bo", ["I work at the aquarium in Genoa.", "Cool, I teach chemistry.",
                                           "My cat is called Pepper."]),
        locomo_sample("s-2", "Cy", "Di", ["I just moved to Oslo for a new job.", "I bake sourdough bread."]),
    ]), encoding="utf-8")
    store = tmp_path / "s"

    code, _, err = run(capsys, "add", path, "--store", store, "-c", "nope", "-q")
    assert code == 1 and "Error:" in err and "nope" in err and str(path) in err and "s-1" in err
    assert no_memory_files(store)
    for shape in ([], "text", {"speaker_a": "Ann", "speaker_b": "Bo", "session_1": [5]}):
        bad = tmp_path / "bad_locomo.json"
        bad.write_text(json.dumps([{"sample_id": "s-9", "conversation": shape}]), encoding="utf-8")
        code, _, err = run(capsys, "add", bad, "--store", store, "-q")  # a traceback before
        assert code == 1 and err.startswith("Error:") and "s-9" in err and "Traceback" not in err
    code, _, err = run(capsys, "entries", "--store", "")  # "--store $UNSET": not the default store
    assert code != 0 and "--store is empty" in err
    assert no_memory_files(store)

    one = run_json(capsys, "add", path, "--store", store, "--conversation", "s-2")
    assert list(one["users"]) == ["s-2"] and one["turns"] == 2
    both = run_json(capsys, "add", path, "--store", tmp_path / "s2")
    assert set(both["users"]) == {"s-1", "s-2"} and both["turns"] == 5
    assert both["users"]["s-1"]["turns_seen"] == 3 and both["users"]["s-2"]["turns_seen"] == 2
    entries = run_json(capsys, "entries", "--store", tmp_path / "s2", "-u", "s-1")
    assert {t for e in entries for t in e["source_turn_ids"]} == {"D1:1", "D1:2", "D1:3"}
    stats = run_json(capsys, "stats", "--store", store)
    assert set(stats["users"]) == {"s-2"}  # --conversation filtered s-1 out

    mine = run_json(capsys, "add", path, "--store", tmp_path / "s3", "--user", "me")
    assert list(mine["users"]) == ["me"] and mine["users"]["me"]["turns_seen"] == 5
    assert set(run_json(capsys, "stats", "--store", tmp_path / "s3")["users"]) == {"me"}


BAD_LINES = {
    "empty text": ('{"speaker": "A", "text": "   ", "timestamp": "2024-01-01T00:00:00"}', "text"),
    "unknown field": ('{"speaker": "A", "text": "hello there", "mood": "happy"}', "mood"),
    "invalid JSON": ('{"speaker": "A", "text": ', "invalid JSON"),
    "bad timestamp": ('{"speaker": "A", "text": "hello there", "timestamp": "the day after"}', "timestamp"),
}


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_add_bad_line_rejects_whole_file(capsys, copy: Path, tmp_path: Path, case: str) -> None:
    line, problem = BAD_LINES[case]
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in BOB) + line + "\n", encoding="utf-8")
    before = run_json(capsys, "stats", "--store", copy)["counters"]
    code, out, err = run(capsys, "add", path, "--store", copy, "-u", "carol", "-q")
    assert code == 1 and out == ""
    assert err.startswith("Error:") and f"{path} line 3" in err and problem in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    after = run_json(capsys, "stats", "--store", copy)
    assert after["counters"] == before and "carol" not in after["users"]
    assert run_json(capsys, "stats", "--store", copy, "-u", "carol")["counters"].get("turns_seen", 0) == 0
    # into a fresh directory: nothing is created at all
    code, _, err = run(capsys, "add", path, "--store", tmp_path / "fresh", "-q")
    assert code == 1 and no_memory_files(tmp_path / "fresh")


def test_stdin_that_is_not_utf8_is_refused_as_a_file_is(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 on a real standard input: the same error as in a file (the
    locale's decoding let them through as lone surrogates, reported as something else)."""
    import subprocess
    import sys

    latin1 = '{"speaker": "Bob", "text": "caf\xe9"}\n'.encode("latin-1")
    proc = subprocess.run([sys.executable, "-m", "ariadnemem_core.cli", "add", "-", "--store", str(tmp_path / "s")],
                          input=latin1, capture_output=True, timeout=120)
    assert proc.returncode == 1 and b"<stdin>: not UTF-8 text" in proc.stderr, proc.stderr


def test_add_bad_item_in_json_list(capsys, tmp_path: Path) -> None:
    path = tmp_path / "turns.json"
    path.write_text(json.dumps([BOB[0], {"speaker": "Bob", "text": ""}]), encoding="utf-8")
    code, _, err = run(capsys, "add", path, "--store", tmp_path / "s")
    assert code == 1 and f"{path} item 1" in err and "text" in err
    assert no_memory_files(tmp_path / "s")


def test_add_usage_errors(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "ok.jsonl", BOB)
    with pytest.raises(SystemExit) as missing:
        main(["add", str(tmp_path / "nope.jsonl"), "--store", str(tmp_path / "s")])
    assert missing.value.code == 2
    with pytest.raises(SystemExit) as fmt:
        main(["add", str(tmp_path / "ok.jsonl"), "--store", str(tmp_path / "s"), "--format", "yaml"])
    assert fmt.value.code == 2
    with pytest.raises(SystemExit) as opt:
        main(["add", str(tmp_path / "ok.jsonl"), "--store", str(tmp_path / "s"), "--frobnicate"])
    assert opt.value.code == 2
    assert no_memory_files(tmp_path / "s")


# ---------------------------------------------------------------------- retrieve
def test_retrieve_table(capsys, base: Path, listing) -> None:
    code, out, _ = run(capsys, "retrieve", "When is the kickoff meeting?", "--store", base, "-u", "alice")
    assert code == 0
    assert out.startswith("Evidence for: When is the kickoff meeting?\nfact\trole\tdate\ttext\tturns\t")
    rows = {line.split("\t")[0]: line.split("\t") for line in out.splitlines() if line.count("\t") == 5}
    assert {"F1", "F2"} <= set(rows)  # not a terminal: one tab-separated line per fact
    assert {"a2", "a4"} <= {r[4] for r in rows.values()}  # provenance
    assert any(r[5].startswith("F") for r in rows.values())  # the 2 pm entry was updated by the 3 pm one
    assert "1 update" in out and "tokens" in out
    assert "cold start" in out  # a command's retrieve is the first of its process, and says so


def test_retrieve_json_and_text(capsys, base: Path, listing) -> None:
    data = run_json(capsys, "retrieve", "When is the kickoff meeting?", "--store", base, "-u", "alice")
    assert set(data) == {"query", "facts", "edges", "paths", "fast_path", "stats", "text", "tokens", "picture"}
    assert data["query"] == "When is the kickoff meeting?" and data["picture"] is None
    assert isinstance(data["tokens"], int) and data["tokens"] > 0
    assert data["text"].startswith("MEMORY")
    assert {f["id"] for f in data["facts"]} <= set(ids(listing["alice"]))
    old, new = entry_for(listing, "alice", "a2"), entry_for(listing, "alice", "a4")
    by_id = {f["id"]: f for f in data["facts"]}
    assert by_id[old["id"]]["superseded_by"] == new["id"]
    assert [old["id"], new["id"], "update"] in [e[:3] for e in data["edges"]]

    code, out, _ = run(capsys, "retrieve", "When is the kickoff meeting?", "--store", base, "-u", "alice", "--text")
    assert code == 0 and out.startswith("MEMORY")
    assert out == data["text"]  # byte for byte what an LLM gets: no wrapping, nothing added
    assert "Evidence for" not in out


def test_rich_markup_in_memories_prints_literally(capsys, base: Path) -> None:
    code, out, _ = run(capsys, "retrieve", "Where does Leo live?", "--store", base, "-u", "alice")
    assert code == 0
    assert "[red]Leo[/red]" in out and "[link=http://x]Lisbon[/link]" in out
    code, out, _ = run(capsys, "entries", "--store", base, "-u", "alice")
    assert code == 0 and "[red]Leo[/red]" in out and "[link=http://x]Lisbon[/link]" in out


@pytest.mark.parametrize("suffix", [".png", ".svg", ".html", ".mmd"])
def test_retrieve_picture(capsys, base: Path, tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"graph{suffix}"
    data = run_json(capsys, "retrieve", "When is the kickoff meeting?", "--store", base, "-u", "alice",
                    "--picture", target)
    assert data["picture"] == str(target) and target.is_file()
    if suffix == ".png":
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    elif suffix == ".svg":
        assert ET.parse(target).getroot().tag.endswith("svg")
    elif suffix == ".html":
        html = target.read_text(encoding="utf-8")
        assert data["facts"] and all(f["id"] in html for f in data["facts"])
    else:
        assert target.read_text(encoding="utf-8").startswith("flowchart LR")
    # without --json the path is reported on stderr, the table on stdout
    again = tmp_path / f"again{suffix}"
    code, out, err = run(capsys, "retrieve", "kickoff", "--store", base, "-u", "alice", "-p", again)
    assert code == 0 and again.is_file() and f"picture: {again}" in err and "Evidence for" in out


@pytest.mark.parametrize("picture", ["graph.jpg", "missing-dir/graph.png"])
def test_retrieve_bad_picture_is_a_usage_error_before_the_store_opens(capsys, tmp_path: Path, picture: str) -> None:
    store = tmp_path / "no-store"
    code, _, err = run(capsys, "retrieve", "anything", "--store", store, "--picture", tmp_path / picture)
    assert code == 2 and "--picture" in err
    assert "no memory at" not in err and not store.exists()


# ---------------------------------------------------------------------- isolation
@pytest.mark.slow
def test_users_are_isolated(capsys, base: Path, listing) -> None:
    alice_ids = set(ids(listing["alice"]))
    bob_ids = set(ids(listing["bob"]))
    assert alice_ids and bob_ids and not alice_ids & bob_ids
    for q in (KITTEN_Q, "Where does Leo live?", "When is the kickoff meeting?"):
        code, out, _ = run(capsys, "retrieve", q, "--store", base, "--user", "bob")
        assert code == 0 and out.startswith(f"Evidence for: {q}") and "\nF1\t" in out
        rows = out.split("\n", 1)[1]  # the title repeats the question
        assert "cello" in rows or "Nora" in rows
        assert not any(w in rows for w in ALICE_WORDS)
        data = run_json(capsys, "retrieve", q, "--store", base, "--user", "bob")
        assert {f["id"] for f in data["facts"]} <= bob_ids
        assert not any(w in data["text"] for w in ALICE_WORDS)
    code, out, _ = run(capsys, "entries", "--store", base, "--user", "bob")
    assert code == 0 and "cello" in out and not any(w in out for w in ALICE_WORDS)
    code, out, _ = run(capsys, "ask", KITTEN_Q, "--store", base, "--user", "bob")
    assert code == 0 and "Miso" not in out


def test_unknown_user_gets_no_facts_and_a_hint(capsys, base: Path) -> None:
    code, out, _ = run(capsys, "retrieve", KITTEN_Q, "--store", base, "-u", "nobody")
    assert code == 0 and "no memories of user 'nobody'" in out and "--user" in out and "Miso" not in out
    assert run_json(capsys, "retrieve", KITTEN_Q, "--store", base, "-u", "nobody")["facts"] == []
    code, out, _ = run(capsys, "entries", "--store", base, "-u", "nobody")
    assert code == 0 and "user 'nobody' has no entries" in out
    assert run_json(capsys, "entries", "--store", base, "-u", "nobody") == []
    assert "nobody" not in run_json(capsys, "stats", "--store", base)["users"]  # reading created nothing


# ---------------------------------------------------------------------- ask
def test_ask_without_llm_is_extractive(capsys, base: Path) -> None:
    code, out, err = run(capsys, "ask", KITTEN_Q, "--store", base, "-u", "alice")
    assert code == 0
    assert "no LLM configured" in err and "extractive" in err
    assert "answer: [extractive, no LLM configured] " in out and "Miso" in out
    assert out.count("extractive") == 1  # one label, not "answer (extractive ...): [extractive ...]"
    assert "Evidence for" in out
    code, out, _ = run(capsys, "ask", KITTEN_Q, "--store", base, "-u", "alice", "--no-evidence")
    assert code == 0 and "Evidence for" not in out and out.startswith("answer: [extractive")
    data = run_json(capsys, "ask", KITTEN_Q, "--store", base, "-u", "alice")
    assert data["mode"] == "extractive" and "Miso" in data["answer"] and data["usage"]["calls"] == 0


def test_ask_with_llm_server(capsys, base: Path, server: FakeOpenAIServer) -> None:
    server.answer = "Her kitten is called Miso."
    data = run_json(capsys, "ask", KITTEN_Q, "--store", base, "-u", "alice", "--base-url", server.url)
    assert data["mode"] == "llm" and data["answer"] == "Her kitten is called Miso."
    assert data["fact_ids"] == ["F1"]  # the server also cited F99, which is not in the graph
    assert server.count == 1
    prompt = prompt_text(server.requests[0])
    assert data["evidence"]["text"].startswith("MEMORY") and data["evidence"]["text"] in prompt
    assert KITTEN_Q in prompt and all(f["text"] in prompt for f in data["evidence"]["facts"])
    assert any("Miso" in f["text"] for f in data["evidence"]["facts"])

    server.answer = "Miso, a grey kitten."
    code, out, err = run(capsys, "ask", KITTEN_Q, "--store", base, "-u", "alice", "--base-url", server.url,
                         "--model", "my-model")
    assert code == 0 and "no LLM configured" not in err
    assert "answer: Miso, a grey kitten." in out and "cites: F1" in out and "extractive" not in out
    assert server.requests[-1]["model"] == "my-model"


def test_ask_llm_failure_is_one_error_line(capsys, base: Path, server: FakeOpenAIServer) -> None:
    server.default = "500"
    code, out, err = run(capsys, "ask", KITTEN_Q, "--store", base, "-u", "alice", "--base-url", server.url)
    assert code == 1 and out == "" and err.startswith("Error:") and "Traceback" not in err


# ---------------------------------------------------------------------- entries / history / stats
def test_entries_table_json_and_limit(capsys, base: Path, listing) -> None:
    alice = listing["alice"]
    assert len(alice) >= 4 and all("embedding" not in e for e in alice)
    code, out, _ = run(capsys, "entries", "--store", base, "-u", "alice")
    assert code == 0 and f"{len(alice)} entries of user alice" in out
    assert all(e["id"] in out for e in alice)
    code, out, _ = run(capsys, "entries", "--store", base, "-u", "alice", "--limit", "2")
    assert code == 0 and "(newest 2)" in out
    assert [e["id"] in out for e in alice] == [False] * (len(alice) - 2) + [True, True]
    assert ids(run_json(capsys, "entries", "--store", base, "-u", "alice", "-n", "1")) == [alice[-1]["id"]]
    code, _, _ = run(capsys, "entries", "--store", base, "-u", "alice", "--limit", "0")
    assert code == 2


def test_history_of_an_updated_entry(capsys, base: Path, listing) -> None:
    old, new = entry_for(listing, "alice", "a2"), entry_for(listing, "alice", "a4")
    for eid in (old["id"], new["id"]):
        chain = run_json(capsys, "history", eid, "--store", base, "-u", "alice")
        assert ids(chain) == [old["id"], new["id"]]
        assert "2 pm" in chain[0]["text"] and "3 pm" in chain[1]["text"]
    code, out, _ = run(capsys, "history", new["id"], "--store", base, "-u", "alice")
    assert code == 0 and "2 states, oldest first" in out
    assert "ariadnemem unlink OLD_ID NEW_ID --store " in out and "--user alice` removes" in out
    assert out.index(old["id"], out.index("\n")) < out.index(new["id"], out.index("\n"))
    single = entry_for(listing, "alice", "a1")
    code, out, _ = run(capsys, "history", single["id"], "--store", base, "-u", "alice")
    assert code == 0 and "no updates" in out and "unlink" not in out


def test_history_hint_never_prints_a_store_password(capsys, pg_url: str, monkeypatch, tmp_path: Path) -> None:
    """The unlink hint of ``history`` names the store; a Postgres URL's password is shown
    as ``***`` there, as in every other message (given as ``--store`` or in the
    environment)."""
    from conftest import with_schema

    url = with_schema(pg_url.replace("postgres:@", "postgres:TopSecretPw42@", 1), "clihint")
    assert "TopSecretPw42" in url
    rows = [{"speaker": "Leo", "text": "The kickoff meeting is at 2 pm on Friday.", "timestamp": "2024-03-04T09:00:00"},
            {"speaker": "Leo", "text": "The kickoff meeting moved to 3 pm.", "timestamp": "2024-03-05T18:30:00"}]
    turns = write_jsonl(tmp_path / "turns.jsonl", rows)
    assert run(capsys, "add", turns, "--store", url, "-u", "team", "-q")[0] == 0
    newest = next(e["id"] for e in run_json(capsys, "entries", "--store", url, "-u", "team") if "moved" in e["text"])
    code, out, err = run(capsys, "history", newest, "--store", url, "-u", "team")
    assert code == 0 and "ariadnemem unlink OLD_ID NEW_ID --store postgresql://postgres:***@" in out
    monkeypatch.setenv("ARIADNEMEM_STORE", url)
    code, out2, err2 = run(capsys, "history", newest, "-u", "team")
    assert code == 0 and "unlink OLD_ID NEW_ID" in out2
    assert "TopSecretPw42" not in out + err + out2 + err2
    monkeypatch.delenv("ARIADNEMEM_STORE")
    # A directory is named as given: "#" or "?" in its name is no URL syntax to redact.
    odd = tmp_path / "memory#2?a&x"
    assert run(capsys, "add", turns, "--store", odd, "-u", "team", "-q")[0] == 0
    newest = next(e["id"] for e in run_json(capsys, "entries", "--store", odd, "-u", "team") if "moved" in e["text"])
    code, out, _ = run(capsys, "history", newest, "--store", odd, "-u", "team")
    assert code == 0 and f"--store {odd} --user team" in " ".join(out.split())


@pytest.mark.parametrize("who", ["other user", "unknown id"])
def test_history_refuses_other_users_and_unknown_ids(capsys, base: Path, listing, who: str) -> None:
    eid = entry_for(listing, "alice", "a2")["id"] if who == "other user" else "e-0000000000000000"
    code, out, err = run(capsys, "history", eid, "--store", base, "-u", "bob")
    assert code == 1 and out == "" and err.startswith("Error:") and eid in err
    assert "2 pm" not in err
    assert "user 'bob'" in err and "--user" in err  # the hint: an entry belongs to one user


def test_stats_whole_store_and_per_user(capsys, base: Path, listing) -> None:
    whole = run_json(capsys, "stats", "--store", base)
    assert whole["user"] is None and whole["store"] == str(base)
    assert whole["users"] == {"alice": len(listing["alice"]), "bob": len(listing["bob"])}
    assert whole["counters"]["turns_seen"] == len(ALICE) + len(BOB)
    assert whole["counters"]["entries"] == len(listing["alice"]) + len(listing["bob"])
    alice = run_json(capsys, "stats", "--store", base, "-u", "alice")
    assert alice["user"] == "alice" and alice["users"] is None
    c = alice["counters"]
    assert c["turns_seen"] == 4 and c["link"] == 1 and c["entries"] == len(listing["alice"])
    code, out, _ = run(capsys, "stats", "--store", base)
    assert code == 0 and "whole store" in out and "2 users" in out and "alice" in out and "bob" in out
    code, out, _ = run(capsys, "stats", "--store", base, "-u", "bob")
    assert code == 0 and "user bob" in out and "alice" not in out


# ---------------------------------------------------------------------- tables that fit the terminal
LONG = [
    {"speaker": "Priya", "text": "For the Kyoto leg I booked the Ryokan Sakura near Gion for three nights, breakfast "
     "included, and the host said we can leave our bags there after checkout on the last day.",
     "timestamp": "2024-05-01T10:00:00", "turn_id": "p1"},
    {"speaker": "Priya", "text": "The train to Osaka leaves at 9 am on Friday.", "timestamp": "2024-05-01T10:05:00",
     "turn_id": "p2"},
    {"speaker": "Priya", "text": "The train to Osaka moved to 11 am on Friday.",
     "timestamp": "2024-05-02T10:05:00", "turn_id": "p3"},
]


@pytest.fixture(scope="module")
def trip(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Path:
    """A store whose entries have a long text and an update (user priya)."""
    root = tmp_path_factory.mktemp("trip")
    write_jsonl(root / "trip.jsonl", LONG)
    with pytest.MonkeyPatch.context() as mp:
        for name in CLEAN_ENV:
            mp.delenv(name, raising=False)
        assert main(["add", str(root / "trip.jsonl"), "--store", str(root / "store"), "-u", "priya", "-q"]) == 0
    return root / "store"


def terminal(monkeypatch: pytest.MonkeyPatch, width: int) -> io.StringIO:
    """Print the commands' output to a terminal of ``width`` columns (no colours)."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=True, color_system=None, highlight=False)
    monkeypatch.setattr(_common, "out", console)
    monkeypatch.setattr(memory_cmds, "out", console)
    return buf


def column_widths(table: str) -> dict[str, int]:
    """Header name -> inner width of each column of a rich table (heavy header box)."""
    header = next(line for line in table.splitlines() if line.startswith("┃") and line.strip("┃ "))
    return {cell.strip(): len(cell) - 2 for cell in header.strip("┃").split("┃")}


def text_cells(table: str, column: int) -> list[str]:
    """Each body row's text in one column, continuation lines joined (a row starts where
    the first column is not blank)."""
    rows: list[list[str]] = []
    for line in table.splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip("│").split("│")]
        if cells[0]:
            rows.append([])
        rows[-1].append(cells[column])
    return [" ".join(part for part in row if part) for row in rows]


@pytest.mark.parametrize("width", [80, 120])
def test_entries_fit_the_terminal_and_the_text_stays_readable(monkeypatch, capsys, trip: Path, width: int) -> None:
    entries = run_json(capsys, "entries", "--store", trip, "-u", "priya")
    buf = terminal(monkeypatch, width)
    code, _, _ = run(capsys, "entries", "--store", trip, "-u", "priya")
    table = buf.getvalue()
    assert code == 0 and all(len(line) <= width for line in table.splitlines())
    widths = column_widths(table)
    assert widths["text"] >= 40 and widths["text"] == max(widths.values())  # the text gets the room
    assert widths["id"] <= 12  # ids shortened to a unique prefix
    assert ("valid until" in widths) == (width >= 120)  # folded under the text below 120 columns
    text_col = list(widths).index("text")
    shown = text_cells(table, text_col)
    for entry, cell in zip(entries, shown, strict=True):
        assert cell.startswith(entry["text"])  # every word whole: wrapped between words, never inside one
    if width < 120:
        assert any("valid until" in cell for cell in shown) and "turns p1" in table


@pytest.mark.parametrize("width", [80, 120])
def test_evidence_fits_the_terminal(monkeypatch, capsys, trip: Path, width: int) -> None:
    data = run_json(capsys, "retrieve", "Where is Priya staying in Kyoto?", "--store", trip, "-u", "priya")
    buf = terminal(monkeypatch, width)
    code, _, _ = run(capsys, "retrieve", "Where is Priya staying in Kyoto?", "--store", trip, "-u", "priya")
    table = buf.getvalue()
    assert code == 0 and all(len(line) <= width for line in table.splitlines())
    widths = column_widths(table)
    assert widths["text"] >= 40 and widths["text"] == max(widths.values())
    shown = text_cells(table, list(widths).index("text"))
    for fact, cell in zip(data["facts"], shown, strict=True):
        assert cell.startswith(fact["text"])
    assert "cold start" in " ".join(table.split())


def test_short_ids_from_a_table_work_in_history_and_delete(monkeypatch, capsys, trip: Path, tmp_path: Path) -> None:
    entries = run_json(capsys, "entries", "--store", trip, "-u", "priya")
    buf = terminal(monkeypatch, 80)
    assert run(capsys, "entries", "--store", trip, "-u", "priya")[0] == 0
    short = [line.split("│")[1].strip() for line in buf.getvalue().splitlines()
             if line.startswith("│") and line.split("│")[1].strip()]
    assert len(short) == len(entries) and all(e["id"].startswith(s) and s != e["id"]
                                              for e, s in zip(entries, short, strict=True))
    newest = entries[-1]
    chain = run_json(capsys, "history", short[-1], "--store", trip, "-u", "priya")
    assert chain[-1]["id"] == newest["id"]
    code, _, err = run(capsys, "history", short[-1], "--store", trip)  # not the default user's
    assert code == 1 and "--user" in err
    code, _, err = run(capsys, "history", "e-", "--store", trip, "-u", "priya")  # the start of every id
    assert code == 1 and "give more of it" in err
    copy = Path(shutil.copytree(trip, tmp_path / "copy"))
    assert run_json(capsys, "delete", short[0], "--store", copy, "-u", "priya") == {"deleted": entries[0]["id"]}


def test_short_ids_are_unique_prefixes() -> None:
    from ariadnemem_core.cli.render import short_ids

    ids = ["e-0123456789abcdef", "e-0123456789abcdee", "e-ffff000011112222", "abc", "abcd", "x"]
    short = short_ids(ids)
    assert short["e-ffff000011112222"] == "e-ffff0000"  # "e-" and 8 hex digits when that is unique
    assert short["e-0123456789abcdef"] == "e-0123456789abcdef"  # as long as needed to tell them apart
    assert short["x"] == "x" and short["abc"] == "abc"
    for i, s in short.items():
        assert i.startswith(s) and [o for o in ids if o.startswith(s) and len(o) <= len(i)] == [i]


def test_not_a_terminal_prints_whole_lines(capsys, trip: Path) -> None:
    entries = run_json(capsys, "entries", "--store", trip, "-u", "priya")
    code, out, _ = run(capsys, "entries", "--store", trip, "-u", "priya")
    assert code == 0 and "│" not in out and "\x1b" not in out
    lines = out.splitlines()
    assert lines[1].split("\t")[:4] == ["id", "date", "speaker", "text"]
    for entry in entries:  # the full id and the whole text on one line, however long
        assert any(line.startswith(entry["id"] + "\t") and f"\t{entry['text']}\t" in line for line in lines)


def test_stats_title_keeps_the_store_path_whole(monkeypatch, capsys, trip: Path) -> None:
    buf = terminal(monkeypatch, len(str(trip)) + 4)  # the title does not fit on one line, the path does
    assert run(capsys, "stats", "--store", trip)[0] == 0
    lines = [line.strip() for line in buf.getvalue().splitlines()]
    assert lines[:2] == ["whole store", f"({trip})"]


def test_ask_with_an_empty_question_says_only_that(capsys, trip: Path) -> None:
    code, out, err = run(capsys, "ask", "  ", "--store", trip, "-u", "priya")
    assert code == 1 and out == "" and err.startswith("Error:") and "empty" in err
    assert "no LLM configured" not in err


# ---------------------------------------------------------------------- delete / export / import / forget
def test_delete_entry(capsys, copy: Path, listing) -> None:
    victim = entry_for(listing, "alice", "a1")["id"]
    code, _, err = run(capsys, "delete", victim, "--store", copy, "-u", "bob")  # not bob's
    assert code == 1 and err.startswith("Error:")
    assert victim in ids(run_json(capsys, "entries", "--store", copy, "-u", "alice"))
    code, out, _ = run(capsys, "delete", victim, "--store", copy, "-u", "alice")
    assert code == 0 and f"deleted {victim}" in out
    left = ids(run_json(capsys, "entries", "--store", copy, "-u", "alice"))
    assert victim not in left and len(left) == len(listing["alice"]) - 1
    assert run_json(capsys, "stats", "--store", copy)["users"]["alice"] == len(left)
    code, _, err = run(capsys, "delete", victim, "--store", copy, "-u", "alice")
    assert code == 1 and err.startswith("Error:")


def test_a_url_of_another_scheme_is_no_directory(capsys, tmp_path: Path, monkeypatch) -> None:
    """``--store postgresql+psycopg://...`` made a directory named after the URL (the
    password in its name) instead of an error: Path() folded the "//" before any check."""
    monkeypatch.chdir(tmp_path)
    source = write_jsonl(tmp_path / "a.jsonl", ALICE[:1])
    for url in ("postgresql+psycopg://app:secret@db/memory", "mysql://app:secret@db/memory"):
        code, _, err = run(capsys, "add", source, "--store", url)
        assert code != 0 and "no store backend opens" in err and "secret" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def test_link_a_missed_update(capsys, copy: Path, listing) -> None:
    first, later = entry_for(listing, "alice", "a1"), entry_for(listing, "alice", "a4")
    code, _, err = run(capsys, "link", first["id"], later["id"], "--store", copy, "-u", "bob")  # not bob's
    assert code == 1 and err.startswith("Error:") and "user 'bob'" in err
    code, _, err = run(capsys, "link", later["id"], first["id"], "--store", copy, "-u", "alice")  # new -> old
    assert code == 1 and "said before" in err
    assert run_json(capsys, "link", first["id"][:10], later["id"], "--store", copy, "-u", "alice") == {
        "linked": [first["id"], later["id"]]}
    assert ids(run_json(capsys, "history", first["id"], "--store", copy, "-u", "alice"))[:2] == [
        first["id"], later["id"]]


def test_unlink_a_wrong_update(capsys, copy: Path, listing) -> None:
    old, new = entry_for(listing, "alice", "a2"), entry_for(listing, "alice", "a4")
    code, _, err = run(capsys, "unlink", old["id"], new["id"], "--store", copy, "-u", "bob")  # not bob's
    assert code == 1 and err.startswith("Error:") and "user 'bob'" in err
    code, _, err = run(capsys, "unlink", new["id"], old["id"], "--store", copy, "-u", "alice")  # new -> old
    assert code == 1 and "no update link" in err
    assert run_json(capsys, "unlink", old["id"][:10], new["id"], "--store", copy, "-u", "alice") == {
        "unlinked": [old["id"], new["id"]]}
    assert ids(run_json(capsys, "history", old["id"], "--store", copy, "-u", "alice")) == [old["id"]]
    kept = {e["id"]: e for e in run_json(capsys, "entries", "--store", copy, "-u", "alice")}
    assert old["id"] in kept and new["id"] in kept and kept[old["id"]]["valid_until"] is None


def test_export_import_round_trip(capsys, base: Path, tmp_path: Path, listing) -> None:
    dump = tmp_path / "dump.jsonl"
    exported = run_json(capsys, "export", dump, "--store", base)
    assert exported["lines"] > 0 and len(dump.read_text().splitlines()) == exported["lines"]
    fresh = tmp_path / "fresh"
    imported = run_json(capsys, "import", dump, "--store", fresh)
    assert imported["entries"] == len(listing["alice"]) + len(listing["bob"])
    for user in ("alice", "bob"):
        again = run_json(capsys, "entries", "--store", fresh, "-u", user)
        assert [(e["id"], e["text"], e["source_turn_ids"]) for e in again] \
            == [(e["id"], e["text"], e["source_turn_ids"]) for e in listing[user]]
    assert run_json(capsys, "stats", "--store", fresh)["users"] == run_json(capsys, "stats", "--store", base)["users"]
    old, new = entry_for(listing, "alice", "a2"), entry_for(listing, "alice", "a4")
    assert ids(run_json(capsys, "history", old["id"], "--store", fresh, "-u", "alice")) == [old["id"], new["id"]]
    facts = run_json(capsys, "retrieve", KITTEN_Q, "--store", fresh, "-u", "alice")["facts"]
    assert any("Miso" in f["text"] for f in facts)  # the dense index came back too

    # importing the same export again: refused, one transaction, nothing changed
    code, out, err = run(capsys, "import", dump, "--store", fresh)
    assert code == 1 and out == "" and err.startswith("Error:") and "already holds" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert run_json(capsys, "stats", "--store", fresh)["users"] == run_json(capsys, "stats", "--store", base)["users"]

    # a per-user export holds that user's records only
    bob_dump = tmp_path / "bob.jsonl"
    run_json(capsys, "export", bob_dump, "--store", base, "-u", "bob")
    rows = [json.loads(line) for line in bob_dump.read_text(encoding="utf-8").splitlines()]
    assert {r["user_id"] for r in rows if "user_id" in r} == {"bob"}
    assert run_json(capsys, "import", bob_dump, "--store", tmp_path / "bob-only")["entries"] == len(listing["bob"])
    assert run_json(capsys, "stats", "--store", tmp_path / "bob-only")["users"] == {"bob": len(listing["bob"])}

    (tmp_path / "junk.jsonl").write_text('{"hello": 1}\n', encoding="utf-8")
    code, _, err = run(capsys, "import", tmp_path / "junk.jsonl", "--store", tmp_path / "other")
    assert code == 1 and err.startswith("Error:") and "not an ariadnemem export" in err
    assert not (tmp_path / "other").exists()  # a wrong file creates no empty memory
    for name, data in (("binary.jsonl", b"\xff\xfe{bad"), ("empty.jsonl", b"")):
        (tmp_path / name).write_bytes(data)
        code, _, err = run(capsys, "import", tmp_path / name, "--store", tmp_path / "other")
        assert code == 1 and err.startswith("Error:") and "Traceback" not in err, (name, err)
    assert not (tmp_path / "other").exists()
    code, _, _ = run(capsys, "import", tmp_path / "absent.jsonl", "--store", tmp_path / "other")
    assert code == 2
    code, _, _ = run(capsys, "export", tmp_path / "no-dir" / "x.jsonl", "--store", base)
    assert code == 2


def test_forget_with_yes(capsys, copy: Path, listing) -> None:
    data = run_json(capsys, "forget", "--user", "bob", "--yes", "--store", copy)
    assert data == {"user": "bob", "removed": len(listing["bob"])}
    assert run_json(capsys, "entries", "--store", copy, "-u", "bob") == []
    assert ids(run_json(capsys, "entries", "--store", copy, "-u", "alice")) == ids(listing["alice"])
    code, _, _ = run(capsys, "forget", "--store", copy)  # --user is required
    assert code == 2


def test_forget_without_yes_refuses_on_non_tty_stdin(capsys, monkeypatch, copy: Path, listing) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    code, out, err = run(capsys, "forget", "-u", "bob", "--store", copy)
    assert code == 2 and out == "" and "--yes" in err
    assert len(run_json(capsys, "entries", "--store", copy, "-u", "bob")) == len(listing["bob"])


def test_forget_confirmation_prompt(monkeypatch, copy: Path, listing) -> None:
    monkeypatch.setattr(typer.testing._NamedTextIOWrapper, "isatty", lambda self: True, raising=False)
    runner = typer.testing.CliRunner()
    args = ["forget", "-u", "bob", "--store", str(copy)]
    no = runner.invoke(app, args, input="n\n")
    assert no.exit_code == 1 and f"Forget user 'bob': {len(listing['bob'])} entries?" in no.output
    assert "Aborted" in no.output
    listed = runner.invoke(app, ["entries", "-u", "bob", "--store", str(copy), "--json"])
    assert len(json.loads(listed.stdout)) == len(listing["bob"])
    yes = runner.invoke(app, args, input="y\n")
    assert yes.exit_code == 0 and f"forgot {len(listing['bob'])} entries of user 'bob'" in yes.stdout
    listed = runner.invoke(app, ["entries", "-u", "bob", "--store", str(copy), "--json"])
    assert json.loads(listed.stdout) == []


# ---------------------------------------------------------------------- errors, env, version, help
READ_COMMANDS = [
    ["retrieve", "q"], ["ask", "q"], ["entries"], ["history", "e-1"], ["stats"], ["export", "{tmp}/x.jsonl"],
    ["forget", "-u", "x", "--yes"], ["delete", "e-1"],
]


@pytest.mark.parametrize("cmd", READ_COMMANDS, ids=[c[0] for c in READ_COMMANDS])
def test_read_commands_refuse_a_directory_without_memory(capsys, tmp_path: Path, cmd: list[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    args = [a.replace("{tmp}", str(tmp_path)) for a in cmd]
    code, out, err = run(capsys, *args, "--store", empty)
    assert code == 1 and out == ""
    assert err.startswith("Error:") and f"no memory at {empty}" in err
    assert list(empty.iterdir()) == []
    code, _, err = run(capsys, *args, "--store", tmp_path / "typo")
    assert code == 1 and "no memory at" in err and not (tmp_path / "typo").exists()


def test_store_and_user_from_the_environment(capsys, monkeypatch, base: Path, listing) -> None:
    monkeypatch.setenv("ARIADNEMEM_STORE", str(base))
    assert ids(run_json(capsys, "entries", "-u", "bob")) == ids(listing["bob"])
    monkeypatch.setenv("ARIADNEMEM_USER", "alice")
    assert ids(run_json(capsys, "entries")) == ids(listing["alice"])
    assert run_json(capsys, "stats")["store"] == str(base)


def test_library_errors_and_interrupts(capsys, monkeypatch, base: Path) -> None:
    code, out, err = run(capsys, "retrieve", "   ", "--store", base, "-u", "alice")
    assert code == 1 and out == "" and err.startswith("Error:") and "query" in err and "Traceback" not in err

    from ariadnemem_core.memory import AriadneMemory

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(AriadneMemory, "retrieve", interrupted)
    code, out, err = run(capsys, "retrieve", "anything", "--store", base, "-u", "alice")
    assert code == 130 and out == "" and "interrupted" in err and "Traceback" not in err


def test_version(capsys) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"ariadnemem {version('ariadnemem')}"


HELP = [[], ["demo"], ["add"], ["retrieve"], ["ask"], ["entries"], ["history"], ["stats"], ["export"], ["import"],
        ["forget"], ["delete"], ["bench"], ["bench", "locomo"], ["bench", "ingest"], ["bench", "latency"],
        ["bench", "scale"]]


@pytest.mark.parametrize("cmd", HELP, ids=[" ".join(c) or "root" for c in HELP])
def test_help(capsys, cmd: list[str]) -> None:
    code, out, _ = run(capsys, *cmd, "--help")
    assert code == 0 and "Usage:" in out and "ariadnemem" in out
    if cmd and cmd[0] not in ("bench", "demo", "import", "export"):
        assert "--store" in out and "--json" in out


def test_unknown_command_is_a_usage_error(capsys) -> None:
    code, _, err = run(capsys, "frobnicate")
    assert code == 2 and "frobnicate" in err


# ---------------------------------------------------------------------- demo
def test_demo_writes_store_and_picture(capsys, tmp_path: Path, minilm) -> None:
    store = tmp_path / "demo"
    store.mkdir()
    code, out, _ = run(capsys, "demo", "--store", store, "--picture", store / "g.svg")
    assert code == 0
    assert "entries from 21 turns" in out and "When is the kickoff meeting?" in out and "answer (extractive)" in out
    assert "drawn" in out and "g.svg" in out
    assert ET.parse(store / "g.svg").getroot().tag.endswith("svg")
    assert run_json(capsys, "stats", "--store", store)["users"]["demo"] > 0
    # Again over the kept store: the same memory, shown as it is (not its turns added twice).
    gate_line = next(line for line in out.splitlines() if line.startswith("Gate"))
    code, again, _ = run(capsys, "demo", "--store", store)
    assert code == 0 and next(line for line in again.splitlines() if line.startswith("Gate")) == gate_line
    code, _, err = run(capsys, "demo", "--picture", tmp_path / "g.gif")
    assert code == 2 and "--picture" in err


@pytest.mark.both_backends
def test_a_store_built_without_a_model_is_read_with_its_own_embedder(capsys, tmp_path: Path, store_location) -> None:
    """A store written with the hashing embedder (``ariadnemem mcp --embedder hash``) is
    read, exported and checked by the other commands with that embedder (they refused it
    for the embedded model's and left no way to inspect or repair it; a Postgres one still
    after the directory was mended)."""
    from ariadnemem_core import AriadneMemory, HashEmbedder

    store = store_location("hashed")
    with AriadneMemory(store, embedder=HashEmbedder()) as mem:
        mem.add({"speaker": "Maya", "text": "I parked at level 3 of the garage."}, user_id="maya")
    code, out, err = run(capsys, "entries", "--store", store, "--user", "maya")
    assert code == 0 and "level 3" in out, err
    for args in (("stats",), ("doctor", "--check-only"), ("export", tmp_path / "h.jsonl")):
        code, _, err = run(capsys, *args, "--store", store)
        assert code == 0, (args, err)


@pytest.mark.parametrize(("content", "message"), [('{}\n{}\n', "is not JSON"),
                                                  ('[{"sample_id": "a"}]', "is not a LoCoMo file")])
def test_bench_locomo_names_a_file_that_is_not_locomo(capsys, tmp_path: Path, content: str, message: str) -> None:
    """One error line before any work, not a traceback from inside the loader."""
    data = tmp_path / "data.json"
    data.write_text(content, encoding="utf-8")
    code, _, err = run(capsys, "bench", "locomo", str(data), "--out", str(tmp_path / "out"))
    said = " ".join(re.sub(r"[│╭╮╰╯─]", " ", err).split())  # the words, out of rich's box
    assert code == 2 and message in said and "Traceback" not in err
    assert not (tmp_path / "out").exists()
