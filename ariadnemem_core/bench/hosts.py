"""Many hosts on one memory: N writer and M reader processes, each its own ``AriadneMemory``.

Each process opens the memory itself (as a separate host would) and runs for a fixed time:
writers add LoCoMo turns one at a time (the way a chat service acknowledges each message;
full windows are extracted inside ``add``), readers ask the conversations' questions.
Three of every four turns go to a user of the writer's own (``conv-26~w1``), one to a user
all writers share (``conv-26``), so scope claims are contended too. Every turn id names its
user (``user|w1|17``), which makes the checks exact:

* **lost**: an acknowledged turn (its ``add`` returned) that is neither in an entry nor
  pending after the run (the main process flushes what the writers left pending);
* **duplicated**: one turn's text stored twice (a window extracted by two workers);
* **cross-user**: a fact returned to a reader whose source turn belongs to another user.

Gating, the low-information gate and coarsening are off in this bench, so every turn
becomes entries of its own and the checks above cannot be masked by a merge or a drop.
The same run is made against the embedded SQLite store (the processes share one
directory on this host) for comparison.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import Config
from ..store.opening import is_store_url, redact_url, with_schema
from .locomo import load_locomo
from .metrics import percentile
from .report import environment, write_json

#: The bench's extraction settings: every turn is kept as entries of its own (see above).
BENCH_CONFIG = Config(enable_gating=False, enable_low_info_gate=False, enable_coarsening=False)


def _embedder(kind: str) -> Any:
    from ..embedding import HashEmbedder, MiniLMEmbedder

    return HashEmbedder() if kind == "hash" else MiniLMEmbedder()


def _warm_up(mem: Any) -> None:
    """Load what a first call would (the model, NLTK's stemmer, the token counter) before the clock starts."""
    from ..text import stem

    mem.embedder.embed(["warm up"])
    stem("warming")
    mem.retrieve("warm up", user_id="~warm-up")


def _user_of(tid: str) -> str:
    return tid.split("|", 1)[0]


def _writer(k: int, location: str, data: str, embedder: str, ready: Any, go: Any, seconds: float,
            out: str) -> None:
    from ..memory import AriadneMemory
    from ..models import Turn

    dataset = load_locomo(data)
    convs = dataset.conversations
    mem = AriadneMemory(location, BENCH_CONFIG, embedder=_embedder(embedder))
    _warm_up(mem)
    ready.put(k)
    go.wait()
    acked: list[str] = []
    add_ms: list[float] = []
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        conv = convs[(k + n // len(convs[0].turns)) % len(convs)]
        src = conv.turns[n % len(conv.turns)]
        user = conv.sample_id if n % 4 == 0 else f"{conv.sample_id}~w{k}"
        tid = f"{user}|w{k}|{n}"
        t0 = time.perf_counter()
        mem.add(Turn(src.speaker, src.text, src.timestamp, tid), user_id=user)
        add_ms.append((time.perf_counter() - t0) * 1000)
        acked.append(tid)
        n += 1
    mem.close(flush=False)  # what is left pending is the main process's to check
    Path(out).write_text(json.dumps({"acked": acked, "add_ms": add_ms}), encoding="utf-8")


def _reader(k: int, location: str, data: str, embedder: str, writers: int, ready: Any, go: Any,
            seconds: float, out: str) -> None:
    from ..memory import AriadneMemory

    dataset = load_locomo(data)
    rng = random.Random(k)
    mem = AriadneMemory(location, BENCH_CONFIG, embedder=_embedder(embedder))
    _warm_up(mem)
    ready.put(k)
    go.wait()
    lat: list[float] = []
    cross = facts = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        conv = rng.choice(dataset.conversations)
        users = [conv.sample_id, *(f"{conv.sample_id}~w{w}" for w in range(writers))]
        user = rng.choice(users)
        q = rng.choice(conv.questions)
        t0 = time.perf_counter()
        graph = mem.retrieve(q.question, user_id=user)
        lat.append((time.perf_counter() - t0) * 1000)
        for fact in graph.facts:
            facts += 1
            cross += any(_user_of(t) != user for t in fact.source_turn_ids)
    mem.close(flush=False)
    Path(out).write_text(json.dumps({"retrieve_ms": lat, "cross_user": cross, "facts": facts}), encoding="utf-8")


def _check(location: str, embedder: str, acked: Sequence[str]) -> dict[str, Any]:
    """Flush what the writers left pending, then count lost and duplicated turns."""
    from ..memory import AriadneMemory

    with AriadneMemory(location, BENCH_CONFIG, embedder=_embedder(embedder)) as mem:
        pending = len(mem.storage.pending())
        mem.flush()
        seen: Counter[tuple[str, str]] = Counter()
        turns: set[str] = set()
        wrong_owner = 0
        for user in mem.users():
            for entry in mem.entries(user):
                for tid in entry.source_turn_ids:
                    seen[(tid, entry.text)] += 1
                    turns.add(tid)
                    wrong_owner += _user_of(tid) != user
        quarantined = mem.stats()["quarantined"]
    return {"acknowledged": len(acked), "pending_at_end": pending,
            "lost": len(set(acked) - turns), "duplicated": sum(c - 1 for c in seen.values() if c > 1),
            "stored_under_another_user": wrong_owner, "quarantined": quarantined}


def run_once(location: str, data: str, *, writers: int, readers: int, seconds: float, embedder: str,
             work: Path) -> dict[str, Any]:
    """One run: start every process, release them together, collect and check."""
    ctx = mp.get_context("spawn")
    ready, go = ctx.Queue(), ctx.Event()
    procs = []
    for k in range(writers):
        procs.append(ctx.Process(target=_writer, args=(k, location, data, embedder, ready, go, seconds,
                                                       str(work / f"w{k}.json"))))
    for k in range(readers):
        procs.append(ctx.Process(target=_reader, args=(k, location, data, embedder, writers, ready, go, seconds,
                                                       str(work / f"r{k}.json"))))
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=600)
    go.set()
    for p in procs:
        p.join()
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} bench process(es) failed (exit codes {failed})")
    acked: list[str] = []
    add_ms: list[float] = []
    for k in range(writers):
        w = json.loads((work / f"w{k}.json").read_text(encoding="utf-8"))
        acked += w["acked"]
        add_ms += w["add_ms"]
    lat: list[float] = []
    cross = facts = 0
    for k in range(readers):
        r = json.loads((work / f"r{k}.json").read_text(encoding="utf-8"))
        lat += r["retrieve_ms"]
        cross += r["cross_user"]
        facts += r["facts"]
    checks = _check(location, embedder, acked)
    return {"writers": writers, "readers": readers, "seconds": seconds,
            "turns_per_s": round(len(acked) / seconds, 2),
            "add_p50_ms": percentile(add_ms, 50), "add_p95_ms": percentile(add_ms, 95),
            "retrievals": len(lat), "retrieve_p50_ms": percentile(lat, 50), "retrieve_p95_ms": percentile(lat, 95),
            "facts_returned": facts, "cross_user": cross, **checks}


def warm_latency(data: str | Path, url: str, conversation: str, work: Path) -> dict[str, Any]:
    """Warm retrieval p50/p95 of both backends on one conversation, alternating question by
    question so both see the same machine load (query vectors embedded beforehand)."""
    from ..embedding import MiniLMEmbedder
    from ..memory import AriadneMemory
    from .metrics import covered_turns

    dataset = load_locomo(data, [conversation])
    conv = dataset.conversations[0]
    embedder = MiniLMEmbedder()
    questions = [q for q in conv.questions if q.category in (1, 2, 3, 4)]
    vectors = embedder.embed([q.question for q in questions])
    schema = f"bench_warm_{time.strftime('%H%M%S')}"
    mems = {"sqlite": AriadneMemory(work / "warm-sqlite", embedder=embedder),
            "postgres": AriadneMemory(with_schema(url, schema), embedder=embedder)}
    out: dict[str, Any] = {"conversation": conversation, "questions": len(questions)}
    try:
        for mem in mems.values():
            mem.add(conv.turns, user_id=conv.user_id)
            mem.flush()
            mem.retrieve(questions[0].question, user_id=conv.user_id, query_vector=vectors[0])  # warm caches
        out["entries"] = len(mems["sqlite"].entries(conv.user_id))
        lat: dict[str, list[float]] = {name: [] for name in mems}
        hits: dict[str, list[float]] = {name: [] for name in mems}
        for q, vec in zip(questions, vectors, strict=True):
            for name, mem in mems.items():
                t0 = time.perf_counter()
                graph = mem.retrieve(q.question, user_id=conv.user_id, query_vector=vec)
                lat[name].append((time.perf_counter() - t0) * 1000)
                if q.evidence:
                    hits[name].append(len(set(q.evidence) & covered_turns(graph)) / len(set(q.evidence)))
        for name in mems:
            out[name] = {"p50_ms": percentile(lat[name], 50), "p95_ms": percentile(lat[name], 95),
                         "recall": sum(hits[name]) / max(len(hits[name]), 1)}
        out["ratio_p50"] = (out["postgres"]["p50_ms"] or 0) / max(out["sqlite"]["p50_ms"] or 1e-9, 1e-9)
    finally:
        for mem in mems.values():
            mem.close(flush=False)
        _drop_schema(url, schema)
    return out


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    from ..store.postgres import split_url

    conninfo = split_url(url)[0]
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def run_hosts(data: str | Path, url: str, out_dir: Path, *, writers: int = 4, readers: int = 4,
              seconds: float = 60.0, curve: Sequence[int] = (1, 2, 4), curve_seconds: float = 20.0,
              embedder: str = "minilm", sqlite: bool = True, warm_conversation: str | None = "conv-26",
              log: Callable[[str], None] = print) -> dict[str, Any]:
    """The main run on Postgres (and on SQLite), then the writer curve on Postgres.

    Args:
        data: a LoCoMo-format file (turns to add, questions to ask).
        url: a ``postgresql://`` URL; each run uses a fresh schema, dropped afterwards.
        out_dir: where ``hosts.json`` and ``hosts.md`` go.
        writers: writer processes of the main run.
        readers: reader processes of the main run.
        seconds: length of the main run.
        curve: writer counts of the throughput curve (no readers), each ``curve_seconds`` long.
        curve_seconds: length of each curve run.
        embedder: "minilm" (the default model) or "hash" (isolates the store's own cost).
        sqlite: also make the main run against the embedded store, in a temporary directory.
        warm_conversation: first compare warm retrieval latency of the two backends on
            this conversation (None: skip).
        log: progress lines.

    Returns:
        The results (also written to ``out_dir``).
    """
    if not is_store_url(url):
        raise ValueError("bench hosts needs a postgresql:// URL")
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%H%M%S")
    runs: dict[str, Any] = {}
    work = Path(tempfile.mkdtemp(prefix="ariadnemem-hosts-"))
    warm: dict[str, Any] | None = None
    try:
        if warm_conversation:
            log(f"warm latency, {warm_conversation}: SQLite and Postgres alternating")
            warm = warm_latency(data, url, warm_conversation, work)
            log(f"  {json.dumps(warm)}")
        plan: list[tuple[str, str, int, int, float]] = [("postgres", url, writers, readers, seconds)]
        if sqlite:
            plan.append(("sqlite", str(work / "sqlite-store"), writers, readers, seconds))
        plan += [(f"postgres_curve_{n}w", url, n, 0, curve_seconds) for n in curve]
        for name, location, w, r, secs in plan:
            log(f"{name}: {w} writers, {r} readers, {secs:g} s")
            schema = f"bench_hosts_{stamp}_{name}"
            target = with_schema(location, schema) if is_store_url(location) else location
            run_dir = work / name
            run_dir.mkdir()
            try:
                runs[name] = run_once(target, str(data), writers=w, readers=r, seconds=secs, embedder=embedder,
                                      work=run_dir)
            finally:
                if is_store_url(location):
                    _drop_schema(location, schema)
            log(f"  {json.dumps(runs[name])}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"benchmark": "hosts", "store": redact_url(url), "data": str(data), "embedder": embedder,
              "config": "gating, low-information gate and coarsening off (every turn traceable)",
              "runs": runs, "warm_latency": warm, "environment": environment()}
    write_json(out_dir / "hosts.json", result)
    (out_dir / "hosts.md").write_text(hosts_markdown(result), encoding="utf-8")
    return result


def hosts_markdown(result: dict[str, Any]) -> str:
    """The results as a markdown table."""
    lines = ["# Hosts", "", "| run | writers | readers | s | turns/s | add p50 ms | retrieve p50 ms | "
             "retrieve p95 ms | lost | duplicated | cross-user |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in result["runs"].items():
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.1f}"

        lines.append(f"| {name} | {r['writers']} | {r['readers']} | {r['seconds']:g} | {r['turns_per_s']:.1f} | "
                     f"{ms(r['add_p50_ms'])} | {ms(r['retrieve_p50_ms'])} | {ms(r['retrieve_p95_ms'])} | "
                     f"{r['lost']} | {r['duplicated']} | {r['cross_user'] + r['stored_under_another_user']} |")
    warm = result.get("warm_latency")
    if warm:
        lines += ["", f"Warm retrieval, {warm['conversation']} ({warm['entries']} entries, {warm['questions']} "
                      "questions, the two backends alternating question by question, query embedding excluded):",
                  "", "| backend | p50 ms | p95 ms | recall (cat 1-4 evidence turns) |", "|---|---|---|---|"]
        for name in ("sqlite", "postgres"):
            r = warm[name]
            lines.append(f"| {name} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['recall']:.3f} |")
    return "\n".join(lines) + "\n"
