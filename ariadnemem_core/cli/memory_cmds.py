"""The memory commands: add, retrieve, ask, entries, history, stats, export, import,
forget, delete. Each opens the memory named by ``--store`` (or a Chroma server with
``--chroma-host``), does one thing, and prints a table or, with ``--json``, one JSON
document."""

from __future__ import annotations

import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from ._common import (
    ENV_USER,
    AgentOpt,
    AllUsersOpt,
    HostOpt,
    JsonOpt,
    PortOpt,
    SessionOpt,
    StoreOpt,
    UserOpt,
    check_input_file,
    emit_json,
    err,
    fail,
    handle_errors,
    open_memory,
    out,
)
from .inputs import InputFileError, read_batches
from .render import print_counters, print_entries, print_evidence, say

if TYPE_CHECKING:
    from ..evidence import EvidenceGraph
    from ..memory import AriadneMemory


class FileFormat(StrEnum):
    auto = "auto"
    jsonl = "jsonl"
    json = "json"
    locomo = "locomo"


PICTURE_HELP = "Also draw the evidence graph to this file: .png, .svg, .html (self-contained) or .mmd (Mermaid)."


def register(app: typer.Typer) -> None:
    for func in (add, retrieve, ask, entries, history, stats, doctor, export, import_, forget, delete, link, unlink):
        name = func.__name__.rstrip("_")
        app.command(name)(handle_errors(func))


def add(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(
        metavar="FILE", help="Turns: JSONL, JSON (a list or {\"turns\": [...]}) or a LoCoMo file; - reads stdin.",
        allow_dash=True)],
    store: StoreOpt = None,
    user: UserOpt = "default",
    agent: AgentOpt = None,
    session: SessionOpt = None,
    fmt: Annotated[FileFormat, typer.Option("--format", help="How to read FILE (auto: by suffix and content).")]
    = FileFormat.auto,
    conversation: Annotated[list[str] | None, typer.Option(
        "--conversation", "-c", help="LoCoMo: only this sample id (repeatable).")] = None,
    no_flush: Annotated[bool, typer.Option(
        "--no-flush", help="Leave a last partial window pending (extracted by a later add or on close).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Add dialogue turns to the memory (gate, extract, coarsen) and summarize.

    A turn is an object with "speaker", "text", and optionally "timestamp" (ISO 8601),
    "turn_id" and "metadata". LoCoMo conversations are stored for the user named after
    their sample id unless --user is given. The whole file is validated first: one bad
    turn rejects the file, naming its line, and nothing is stored.
    """
    from ..bench.progress import progress_bar

    check_input_file(file, allow_dash=True)
    source = ctx.get_parameter_source("user")  # LoCoMo files default to their sample ids
    user_given = source is not None and source.name != "DEFAULT"
    try:
        batches = read_batches(file, fmt.value, user, conversation, user_given=user_given)
    except InputFileError as exc:
        raise fail(str(exc)) from None
    total = sum(len(b.turns) for b in batches)
    if total == 0:  # refuse before opening (and so creating) a store
        raise fail(f"{'<stdin>' if str(file) == '-' else file}: no turns in it (nothing stored)")
    t0 = time.perf_counter()
    with open_memory(store, chroma_host, chroma_port, flush=not no_flush) as mem:
        before = {b.user_id: mem.stats(b.user_id) for b in batches}
        step = mem.config.window_size
        with progress_bar(not quiet and not as_json) as prog:
            task = prog.add_task("adding turns", total=total)
            for batch in batches:
                prog.update(task, description=f"adding {batch.label}")
                for start in range(0, len(batch.turns), step):
                    chunk = batch.turns[start : start + step]
                    mem.add(chunk, user_id=batch.user_id, agent_id=agent, session_id=session)
                    prog.advance(task, len(chunk))
            if not no_flush:
                prog.update(task, description="extracting the last partial windows")
                mem.flush()
            prog.remove_task(task)
        seconds = time.perf_counter() - t0
        users = {}
        for uid in dict.fromkeys(b.user_id for b in batches):
            after = mem.stats(uid)
            users[uid] = {k: after.get(k, 0) - before[uid].get(k, 0) for k in
                          ("turns_seen", "gate_kept", "gate_dropped", "merge", "link", "add")}
            users[uid].update(entries=after["entries"], pending_turns=after.get("pending_turns", 0))
        summary = {"file": str(file), "turns": total, "seconds": round(seconds, 3),
                   "turns_per_s": round(total / seconds, 1) if seconds > 0 else None,
                   "store": mem.location, "dense_index": mem.storage.dense_location, "users": users}
    if as_json:
        emit_json(summary)
        return
    for uid, row in users.items():
        print_counters(out, f"user {uid}", {
            "turns added": row["turns_seen"], "gate kept / dropped": f"{row['gate_kept']} / {row['gate_dropped']}",
            "MERGE / LINK / ADD": f"{row['merge']} / {row['link']} / {row['add']}",
            "entries now": row["entries"], "pending turns": row["pending_turns"]})
    say(out, Text(f"{total} turns in {seconds:.1f} s ({summary['turns_per_s'] or 0:.0f} turns/s) -> {mem.location}",
                   style="dim"))


def retrieve(
    query: Annotated[str, typer.Argument(metavar="QUESTION", help="The question.")],
    store: StoreOpt = None,
    user: UserOpt = "default",
    agent: AgentOpt = None,
    session: SessionOpt = None,
    picture: Annotated[Path | None, typer.Option("--picture", "-p", help=PICTURE_HELP)] = None,
    text: Annotated[bool, typer.Option(
        "--text", help="Print only the context an LLM would get: exactly EvidenceGraph.to_text(), never wrapped.")]
    = False,
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Build the question's evidence graph (no LLM call) and print it."""
    _check_question(query)
    check_picture(picture)
    with open_memory(store, chroma_host, chroma_port, must_exist=True, flush=False) as mem:
        graph = mem.retrieve(query, user_id=user, agent_id=agent, session_id=session)
    drawn = _draw(graph, picture)
    if as_json:
        emit_json(graph.to_dict() | {"tokens": graph.token_count(), "picture": drawn})
    elif text:
        _write_exactly(graph.to_text())
    else:
        _print_graph(graph, user)
    if drawn and not as_json:
        err.print(f"picture: {drawn}")


def ask(
    question: Annotated[str, typer.Argument(metavar="QUESTION", help="The question.")],
    store: StoreOpt = None,
    user: UserOpt = "default",
    agent: AgentOpt = None,
    session: SessionOpt = None,
    base_url: Annotated[str | None, typer.Option(
        "--base-url", help="OpenAI-compatible base URL (default: $OPENAI_BASE_URL).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model name (default: $ARIADNEMEM_LLM_MODEL).")] = None,
    evidence: Annotated[bool, typer.Option("--evidence/--no-evidence", help="Print the evidence graph too.")] = True,
    picture: Annotated[Path | None, typer.Option("--picture", "-p", help=PICTURE_HELP)] = None,
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question from the evidence graph with one LLM call.

    Uses the LLM configured by OPENAI_API_KEY and/or OPENAI_BASE_URL (OpenAI, vLLM,
    Ollama, llama.cpp). Without one, prints a clearly labelled extractive answer (the
    best fact) and says so on stderr.
    """
    _check_question(question)  # before the no-LLM warning: an empty question is the error to see
    check_picture(picture)
    llm = None
    if base_url or model:
        from ..llm import LLMClient

        llm = LLMClient(base_url=base_url, model=model)
    with open_memory(store, chroma_host, chroma_port, must_exist=True, flush=False, llm=llm) as mem:
        if mem.llm is None:
            err.print("no LLM configured (set OPENAI_API_KEY or OPENAI_BASE_URL, or pass --base-url): "
                      "extractive answer")
        answer = mem.answer(question, user_id=user, agent_id=agent, session_id=session)
    drawn = _draw(answer.graph, picture)
    if as_json:
        emit_json({"question": question, "answer": answer.text, "mode": answer.mode, "fact_ids": answer.fact_ids,
                   "usage": answer.usage, "latency_s": round(answer.latency_s, 3),
                   "evidence": answer.graph.to_dict(), "picture": drawn})
        return
    if evidence:
        _print_graph(answer.graph, user)
    # An extractive answer carries its own label in its text ("[extractive, no LLM configured] ...").
    say(out, Text("answer: ", style="bold green").append(Text(answer.text, style="")))
    if answer.fact_ids:
        say(out, Text(f"cites: {', '.join(answer.fact_ids)}", style="dim"))
    if drawn:
        err.print(f"picture: {drawn}")


def _print_graph(graph: EvidenceGraph, user: str) -> None:
    if not graph.facts:
        say(out, Text(f"no memories of user {user!r} match (is --user right? "
                       "`ariadnemem stats` lists the users)", style="yellow"))
        return
    # One command, one process: its retrieve is always the first, so its time includes
    # loading the embedding model and the libraries, and the line says so.
    print_evidence(out, graph, cold=True)


def _check_question(question: str) -> None:
    """The library's own check of a question (empty, whitespace only), before any work."""
    from ..memory import check_query

    check_query(question)


def _write_exactly(text: str) -> None:
    """``text`` as it is on stdout (no wrapping, no markup); a final newline only on a
    terminal, so that a redirected output is byte for byte the text."""
    import sys

    sys.stdout.write(text + ("\n" if out.is_terminal and not text.endswith("\n") else ""))
    sys.stdout.flush()


def check_picture(picture: Path | None) -> None:
    """Reject a bad --picture before any work (suffix, missing directory)."""
    if picture is None:
        return
    from ..picture import SUFFIXES

    if picture.suffix.lower() not in SUFFIXES:
        raise typer.BadParameter("the file must end in .png, .svg, .html or .mmd", param_hint="--picture")
    if not picture.parent.expanduser().is_dir():
        raise typer.BadParameter(f"no such directory: {picture.parent}", param_hint="--picture")


def _draw(graph: EvidenceGraph, picture: Path | None) -> str | None:
    if picture is None:
        return None
    from ..picture import save_picture

    return str(save_picture(graph, picture.expanduser()))


def entries(
    store: StoreOpt = None,
    user: UserOpt = "default",
    agent: AgentOpt = None,
    session: SessionOpt = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Only the newest N.")] = None,
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """List a user's memory entries in time order, with provenance (source turn ids)."""
    with open_memory(store, chroma_host, chroma_port, must_exist=True, flush=False) as mem:
        rows = mem.entries(user, agent_id=agent, session_id=session)
    shown = rows[-limit:] if limit else rows
    if as_json:
        emit_json([e.to_dict(with_embedding=False) for e in shown])
        return
    if not rows:
        say(out, Text(f"user {user!r} has no entries (is --user right? `ariadnemem stats` lists the users)",
                       style="yellow"))
        return
    title = f"{len(rows)} entries of user {user}" + (f" (newest {len(shown)})" if len(shown) < len(rows) else "")
    print_entries(out, shown, title, among=rows)


def history(
    entry_id: Annotated[str, typer.Argument(metavar="ENTRY_ID", help="An entry id (see `ariadnemem entries`).")],
    store: StoreOpt = None,
    user: UserOpt = "default",
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Show the update chain through an entry (LINK edges), oldest state first."""
    with open_memory(store, chroma_host, chroma_port, must_exist=True, flush=False) as mem:
        entry_id = _resolve_id(mem, entry_id, user)  # another user's entry is not found (exit 1)
        chain = mem.history(entry_id, user_id=user)
    if as_json:
        emit_json([e.to_dict(with_embedding=False) for e in chain])
        return
    note = "no updates" if len(chain) == 1 else f"{len(chain)} states, oldest first"
    print_entries(out, chain, f"history of {entry_id} ({note})")
    if len(chain) > 1:
        # The detector reads wording: say how to undo a link it got wrong.
        from ..store import is_store_url
        from ..store.opening import redact_url

        # The password of a URL never reaches the screen (a pasted hint asks for it again);
        # a directory is named as given ("#" or "?" in it is no URL syntax).
        shown = redact_url(str(store)) if is_store_url(store) else str(store)
        where = f" --store {shown}" if store else ""
        say(out, Text(f"Not a change of one thing? `ariadnemem unlink OLD_ID NEW_ID{where} --user {user}` "
                      "removes a link and keeps both entries.", style="dim"))


def _resolve_id(mem: AriadneMemory, entry_id: str, user: str) -> str:
    """The entry ``entry_id`` names for ``user``: the id itself, or the one entry of that
    user whose id starts with it (the tables show ids shortened that way). Not found:
    an error that names ``--user``, since an id only exists for the user who owns it."""
    from ..errors import NotFoundError

    try:
        return mem.get(entry_id, user_id=user).id
    except NotFoundError:
        pass
    matches = [e.id for e in mem.entries(user) if e.id.startswith(entry_id)] if entry_id else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise fail(f"{entry_id!r} is the start of {len(matches)} entry ids of user {user!r}; give more of it")
    raise fail(f"no entry {entry_id!r} for user {user!r} (an entry belongs to one user: pass its --user; "
               f"`ariadnemem entries --user USER` lists a user's ids)")


def stats(
    store: StoreOpt = None,
    user: AllUsersOpt = None,
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Counters: turns seen, gate kept/dropped, MERGE/LINK/ADD, entries, edges, users."""
    with open_memory(store, chroma_host, chroma_port, must_exist=True, flush=False) as mem:
        counters = mem.stats(user)
        users = mem.users()
        info = {"store": mem.location, "dense_index": mem.storage.dense_location}
    if as_json:
        emit_json(info | {"user": user, "counters": counters, "users": users if user is None else None})
        return
    print_counters(out, f"{'user ' + user if user else 'whole store'} ({info['store']})", counters)
    if user is None:
        if users:
            print_counters(out, f"{len(users)} {'user' if len(users) == 1 else 'users'} (entries)", users)
        else:
            say(out, Text("no users: the memory is empty", style="yellow"))


def doctor(
    store: StoreOpt = None,
    check_only: Annotated[bool, typer.Option("--check-only", help="Report problems without repairing them.")] = False,
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Check the store and repair what can be repaired: quarantine unreadable rows, rebuild a drifted index.

    Unreadable entries and pending turns are moved to the quarantine with their reason
    (kept, never read back); the dense index is rebuilt where it disagrees with the
    records. Exit code 0 when the store is (now) healthy, 1 when problems remain.
    """
    with open_memory(store, chroma_host, chroma_port, must_exist=True, flush=False) as mem:
        report = mem.doctor(repair=not check_only)
    problems = len(report["bad_entries"]) + len(report["bad_pending"]) + len(report["drifted_users"])
    if as_json:
        emit_json(report)
    else:
        print_counters(out, "doctor", {
            "entries checked": report["entries"], "unreadable entries": len(report["bad_entries"]),
            "invalid pending turns": len(report["bad_pending"]), "users with index drift": len(report["drifted_users"]),
            "quarantined now": report["quarantined_now"], "vectors re-pushed": report["reindexed"],
            "users rebuilt": report["rebuilt_users"], "quarantined in total": len(report["quarantined"])})
        for q in report["quarantined"]:
            say(out, Text(f"quarantined {q['kind']} {q['ref']} (user {q['user_id']}): {q['reason']}"))
        if report.get("dense_damaged"):
            out.print(f"dense index was damaged ({report['dense_damaged']}); rebuilt from the records: "
                      f"{report.get('dense_rebuilt', 0)} entries re-indexed")
    if check_only and problems:
        raise typer.Exit(1)


def export(
    file: Annotated[Path, typer.Argument(
        metavar="FILE", help="JSONL file to write (entries with embeddings, edges, counters).")],
    store: StoreOpt = None,
    user: AllUsersOpt = None,
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Write the whole memory, or one user's part of it, to a JSONL file."""
    if not file.parent.expanduser().is_dir():
        raise typer.BadParameter(f"no such directory: {file.parent}", param_hint="FILE")
    if file.expanduser().is_dir():
        raise typer.BadParameter(f"{file} is a directory", param_hint="FILE")
    with open_memory(store, chroma_host, chroma_port, must_exist=True, flush=False) as mem:
        n = mem.export(file.expanduser(), user_id=user)
    emit_json({"file": str(file), "lines": n}) if as_json else say(out, Text(f"wrote {n} lines to {file}"))


def import_(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A JSONL file written by `ariadnemem export`.")],
    store: StoreOpt = None,
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Load an export into the memory (entries keep their ids, provenance and edges).

    All or nothing: a malformed line, another embedder's export, or entries the memory
    already holds (the same export twice) is an error and imports nothing.
    """
    from contextlib import closing

    from ..memory import read_export

    check_input_file(file)
    # Read the first record before opening (and so creating) a store for a wrong file.
    with closing(read_export(file)) as records:
        next(records)  # the meta record, or an error naming the file (empty, not an export)
    with open_memory(store, chroma_host, chroma_port) as mem:
        n = mem.import_(file)
    emit_json({"file": str(file), "entries": n}) if as_json else say(out, Text(f"imported {n} entries from {file}"))


def forget(
    user: Annotated[str, typer.Option("--user", "-u", envvar=ENV_USER, help="Whose memories (required).")],
    store: StoreOpt = None,
    agent: AgentOpt = None,
    session: SessionOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Delete every memory (and pending turn) of a user, or of one agent/session of it."""
    scope = f"user {user!r}" + (f" agent {agent!r}" if agent else "") + (f" session {session!r}" if session else "")
    with open_memory(store, chroma_host, chroma_port, must_exist=True) as mem:
        n_entries = len(mem.entries(user, agent_id=agent, session_id=session))
        if not yes:
            import sys

            if not sys.stdin.isatty():
                raise fail(f"refusing to forget {scope} ({n_entries} entries) without --yes "
                           "(stdin is not a terminal)", code=2)
            typer.confirm(f"Forget {scope}: {n_entries} entries?", abort=True)
        removed = mem.forget(user, agent_id=agent, session_id=session)
    emit_json({"user": user, "removed": removed}) if as_json else say(out, Text(f"forgot {removed} entries of {scope}"))


def delete(
    entry_id: Annotated[str, typer.Argument(metavar="ENTRY_ID", help="The entry id to delete.")],
    store: StoreOpt = None,
    user: UserOpt = "default",
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Delete one entry (update chains through it are repaired)."""
    with open_memory(store, chroma_host, chroma_port, must_exist=True) as mem:
        entry_id = _resolve_id(mem, entry_id, user)
        mem.delete(entry_id, user_id=user)
    emit_json({"deleted": entry_id}) if as_json else say(out, Text(f"deleted {entry_id}"))


def link(
    old_id: Annotated[str, typer.Argument(metavar="OLD_ID", help="The entry that no longer holds.")],
    new_id: Annotated[str, typer.Argument(metavar="NEW_ID", help="The entry stating what holds now.")],
    store: StoreOpt = None,
    user: UserOpt = "default",
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Record a change the memory missed: NEW_ID replaces OLD_ID (both entries stay; see `history`)."""
    _edit_update_link("link", old_id, new_id, store, user, chroma_host, chroma_port, as_json)


def unlink(
    old_id: Annotated[str, typer.Argument(metavar="OLD_ID", help="The entry marked superseded.")],
    new_id: Annotated[str, typer.Argument(metavar="NEW_ID", help="The entry named as its newer state.")],
    store: StoreOpt = None,
    user: UserOpt = "default",
    chroma_host: HostOpt = None,
    chroma_port: PortOpt = 8000,
    as_json: JsonOpt = False,
) -> None:
    """Remove a wrong update link: NEW_ID does not replace OLD_ID (both entries stay; see `history`)."""
    _edit_update_link("unlink", old_id, new_id, store, user, chroma_host, chroma_port, as_json)


def _edit_update_link(action: str, old_id: str, new_id: str, store: str | Path | None, user: str,
                      chroma_host: str | None, chroma_port: int, as_json: bool) -> None:
    """``link`` or ``unlink`` (``action``) OLD_ID -> NEW_ID, ids resolved from prefixes."""
    with open_memory(store, chroma_host, chroma_port, must_exist=True) as mem:
        old_id, new_id = _resolve_id(mem, old_id, user), _resolve_id(mem, new_id, user)
        getattr(mem, action)(old_id, new_id, user_id=user)
    done = f"{action}ed"
    emit_json({done: [old_id, new_id]}) if as_json else say(out, Text(f"{done} {old_id} -> {new_id}"))
