"""The BEAM bench: evidence recall on long user–assistant agent conversations.

BEAM ("Beyond a Million Tokens", github.com/mohammadtavakoli78/BEAM) holds conversations
between a user and an assistant whose replies are long (markdown, lists, code): about
2,800 characters per message, 190-340 messages and ~100K tokens per conversation. Each
probing question names its evidence messages (``source_chat_ids``). This bench builds one
memory per conversation (its own user scope) and measures, per question category:

* evidence recall (share of the evidence message ids covered by the returned facts'
  ``source_turn_ids``) and all-hit (every evidence message covered);
* the context's mean and max tokens (``EvidenceGraph.to_text()``, cl100k);
* for knowledge_update questions, how often the *updated* message is covered;
* ingest messages/s and ingest time as a multiple of embedding every message once with
  the same embedder (measured in the same run);
* retrieval latency p50/p95, warm, and cold (the first query after the memory is
  reopened), with query embedding excluded as in the LoCoMo bench;
* where missed evidence was lost: ``gate`` (no entry came from the message), ``budget``
  (an entry was considered, then cut by the node/token budget) or ``retrieval`` (never
  a candidate);
* how the update links meet the knowledge updates BEAM names (:func:`update_links`): a
  link from a question's earlier evidence message to its updated one is a real change by
  the dataset's own account, read with no human judgement, on any split.

The flat baselines rank the raw messages (dense, and BM25 + dense fused by RRF) and fill
them greedily, best first, up to the same token budgets (a message that does not fit is
skipped, a shorter one further down may still fit).

Data decisions, reported in the results: the ``->-> b,t`` index marker that ends every
message is stripped; a message longer than the library's limit (one, 348,469 characters,
in the dev split) is cut to ``MAX_TEXT_CHARS`` so it stays one turn with its own id; user
messages carry a ``time_anchor`` date that later messages inherit, and messages are 30 s
apart from it so the order stays visible in the timestamps. Abstention questions have no
evidence and are counted, not scored.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..config import Config
from ..models import MAX_TEXT_CHARS, Turn, UpdateEdge
from ..tokens import count_tokens
from .baselines import FlatIndex
from .ingest import fresh_embedder
from .metrics import (
    QuestionRecord,
    covered_turns,
    make_record,
    mean,
    peak_rss,
    percentile,
    stratified_bootstrap,
    summarize_group,
)
from .progress import progress_bar
from .report import environment, fmt, markdown_table, write_json, write_jsonl

DEFAULT_OUT = Path("bench-results") / "beam"
MAIN = "AriadneMem"
#: Token budgets of the flat baselines (the issue's comparison points).
FLAT_BUDGETS = (500, 1500)
FLAT_METHODS = ("dense", "hybrid")
#: Depth of the ranked list a flat baseline fills its budget from.
FLAT_POOL = 50
#: Categories excluded from the "every category" target (their evidence is the whole
#: conversation's arc, not a fact a memory returns).
BROAD_CATEGORIES = ("summarization", "event_ordering")
#: Seconds between consecutive messages (their only timing is the batch's date).
MESSAGE_STEP_S = 30
ANCHOR_FORMAT = "%B-%d-%Y"

_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")


@dataclass(slots=True)
class BeamQuestion:
    """One probing question; ``evidence`` are message ids (strings) of the conversation."""

    qid: str
    category: str
    question: str
    evidence: list[str]
    #: knowledge_update: the ids of the updated message(s).
    updated: list[str] = field(default_factory=list)


@dataclass(slots=True)
class BeamConversation:
    conv_id: str
    turns: list[Turn]
    questions: list[BeamQuestion]
    cut_messages: list[tuple[str, int]] = field(default_factory=list)  # (id, original length)
    skipped_ids: int = 0  # evidence ids that are not a message of the conversation
    #: Several conversations as one user's log (:func:`one_user`): ids are ``"conv:id"``.
    merged: bool = False

    @property
    def user_id(self) -> str:
        return f"beam-{self.conv_id}"


def strip_marker(text: str) -> str:
    """``"... deadline? ->-> 1,1"`` -> ``"... deadline?"``."""
    return _MARKER.sub("", text)


def _ids(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [i for v in value.values() for i in _ids(v)]
    if isinstance(value, list | tuple):
        return [i for v in value for i in _ids(v)]
    return [str(value)]


def load_conversation(folder: Path) -> BeamConversation:
    """One BEAM conversation folder (``chat.json`` + ``probing_questions.json``)."""
    chat = json.loads((folder / "chat.json").read_text(encoding="utf-8"))
    turns: list[Turn] = []
    cut: list[tuple[str, int]] = []
    anchor: datetime | None = None
    step = 0
    for batch in chat:
        for exchange in batch.get("turns", []):
            for msg in exchange:
                if msg.get("time_anchor"):
                    try:
                        anchor = datetime.strptime(str(msg["time_anchor"]), ANCHOR_FORMAT)
                        step = 0
                    except ValueError:
                        pass
                text = strip_marker(str(msg.get("content", "")))
                if len(text) > MAX_TEXT_CHARS:
                    cut.append((str(msg["id"]), len(text)))
                    text = text[:MAX_TEXT_CHARS]
                if not text.strip():
                    continue
                ts = anchor + timedelta(seconds=MESSAGE_STEP_S * step) if anchor else None
                step += 1
                turns.append(Turn(str(msg.get("role", "user")), text, ts, str(msg["id"])))
    known = {t.turn_id for t in turns}
    questions: list[BeamQuestion] = []
    skipped = 0
    probing = json.loads((folder / "probing_questions.json").read_text(encoding="utf-8"))
    for category, items in probing.items():
        for n, item in enumerate(items):
            raw = _ids(item.get("source_chat_ids"))
            evidence = list(dict.fromkeys(i for i in raw if i in known))
            skipped += len(set(raw)) - len(evidence)
            src = item.get("source_chat_ids")
            updated = [i for i in _ids(src.get("updated_info")) if i in known] if isinstance(src, Mapping) else []
            questions.append(BeamQuestion(f"{folder.name}:{category}:{n}", category, str(item["question"]),
                                          evidence, updated))
    return BeamConversation(folder.name, turns, questions, cut, skipped)


def conversation_folders(root: Path) -> list[Path]:
    """The conversation folders under ``root`` (the folder of ``100K/``, ``100K/`` itself,
    or one conversation), in numeric order."""
    root = Path(root)
    if (root / "chat.json").is_file():
        return [root]
    for base in (root / "100K", root):
        found = [p for p in base.iterdir() if (p / "chat.json").is_file()] if base.is_dir() else []
        if found:
            return sorted(found, key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name))
    raise FileNotFoundError(f"no BEAM conversation (a folder with chat.json) under {root}")


def load_beam(root: Path, conversations: Sequence[str] | None = None) -> list[BeamConversation]:
    folders = conversation_folders(root)
    if conversations:
        wanted = set(conversations)
        unknown = wanted - {f.name for f in folders}
        if unknown:
            raise ValueError(f"unknown conversations {sorted(unknown)}; have {[f.name for f in folders]}")
        folders = [f for f in folders if f.name in wanted]
    return [load_conversation(f) for f in folders]


def one_user(convs: Sequence[BeamConversation]) -> BeamConversation:
    """All conversations as one user's log, in folder order: the long horizon on any split.

    Ten 100K conversations make one log of about 2,400 messages (~1M tokens), the length of
    the longest held-out conversations, so how retrieval holds up as a log grows can be
    measured, and tuned, on the tuning split itself. Every message and evidence id gets its
    conversation's name as a prefix (``"3:52"``), and every question is asked of the
    whole log: the other conversations are distractors a long life of one user would hold.
    Each conversation keeps its own dates.

    Args:
        convs: the conversations, as :func:`load_beam` returns them.

    Returns:
        One conversation named ``"+".join(names)``.
    """
    def ids(conv: BeamConversation, items: Iterable[str]) -> list[str]:
        return [f"{conv.conv_id}:{i}" for i in items]

    turns = [replace(t, turn_id=f"{c.conv_id}:{t.turn_id}") for c in convs for t in c.turns]
    questions = [replace(q, evidence=ids(c, q.evidence), updated=ids(c, q.updated))
                 for c in convs for q in c.questions]
    cut = [(f"{c.conv_id}:{i}", n) for c in convs for i, n in c.cut_messages]
    return BeamConversation("+".join(c.conv_id for c in convs), turns, questions, cut,
                            sum(c.skipped_ids for c in convs), merged=True)


# ---------------------------------------------------------------------- scoring
def fill_budget(ranked: Iterable[int], costs: Sequence[int], budget: int) -> list[int]:
    """Greedy fill: take documents in rank order while they fit (skip one that does not)."""
    out: list[int] = []
    used = 0
    for i in ranked:
        if used + costs[i] <= budget:
            out.append(i)
            used += costs[i]
    return out


def summarize_beam(records: Sequence[QuestionRecord], categories: Sequence[str]) -> dict[str, Any]:
    """Per category, ``overall`` (questions with evidence) and ``all``; category keys are names."""
    by_cat = {c: [r for r in records if r.extra.get("category") == c] for c in categories}
    out: dict[str, Any] = {"categories": {c: summarize_group(rs) for c, rs in by_cat.items() if rs}}
    scored = [r for r in records if r.evidence]
    out["overall"] = summarize_group(scored)
    out["all"] = summarize_group(records)
    out["tokens_max"] = max((r.tokens for r in records), default=0)
    updated = [r for r in records if r.extra.get("updated")]
    out["knowledge_update_updated_present"] = mean(bool(set(r.extra["updated"]) & set(r.covered)) for r in updated)
    return out


#: The flat system every other is compared with question by question (paired intervals).
REFERENCE = "flat-hybrid@500"


def _recall_groups(records: Sequence[QuestionRecord]) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = {}
    for r in records:
        if r.evidence and r.recall is not None:
            groups.setdefault(str(r.extra.get("category")), []).append(float(r.recall))
    return groups


def recall_intervals(records: Sequence[QuestionRecord], seed: int = 0) -> dict[str, list[float] | None]:
    """Bootstrap 95% intervals of mean recall, per category and ``overall`` (questions
    with evidence). With ~20 questions a category one question moves it ~5 points: read
    the interval, not the point."""
    ci = stratified_bootstrap(_recall_groups(records), seed=seed)
    return {k: list(v) if v else None for k, v in ci.items()}


def paired_difference(records: Sequence[QuestionRecord], reference: Sequence[QuestionRecord],
                      seed: int = 0) -> dict[str, Any]:
    """Per-question recall of ``records`` minus the ``reference``'s on the same questions,
    per category and overall, with paired bootstrap 95% intervals (the questions'
    difficulty cancels out): a difference whose interval excludes 0 is one the sample tells.

    Returns:
        ``{"diff": {group: mean difference}, "ci": {group: [low, high] | None}}``.
    """
    ref = {r.qid: r for r in reference}
    groups: dict[str, list[float]] = {}
    for r in records:
        other = ref.get(r.qid)
        if r.evidence and other is not None and r.recall is not None and other.recall is not None:
            groups.setdefault(str(r.extra.get("category")), []).append(float(r.recall) - float(other.recall))
    ci = stratified_bootstrap(groups, seed=seed)
    pooled = [d for v in groups.values() for d in v]
    diff = {c: sum(v) / len(v) for c, v in groups.items() if v}
    diff["overall"] = sum(pooled) / len(pooled) if pooled else 0.0
    return {"vs": REFERENCE, "diff": diff, "ci": {k: list(v) if v else None for k, v in ci.items()}}


def update_links(questions: Sequence[BeamQuestion], edges: Iterable[UpdateEdge],
                 turns_of: Mapping[str, Iterable[str]], *, merged: bool = False) -> dict[str, int]:
    """How a conversation's update links meet the knowledge updates its questions name.

    A knowledge_update question names its updated message(s) and, among its other evidence
    messages, the earlier state. A link whose older entry comes from the earlier state and
    whose newer entry comes from the updated message records that change; no other link can
    be scored without reading it, so ``on_named_updates`` is a floor on the real links, and
    ``named_updates_linked`` says how many of the dataset's changes the detector found.

    Args:
        questions: the conversation's questions.
        edges: its stored update edges (old -> new).
        turns_of: each entry id's source message ids.
        merged: the conversation is several as one user's log (:func:`one_user`). A link
            between two of them joins two people's lives: false by construction, so
            ``across_conversations`` is a floor on the false links, again without reading.

    Returns:
        ``edges``, ``on_named_updates``, ``named_updates`` and ``named_updates_linked``;
        with ``merged``, ``across_conversations`` too.
    """
    named = [(set(q.evidence) - set(q.updated), set(q.updated)) for q in questions
             if q.updated and set(q.evidence) - set(q.updated)]
    links = [(set(turns_of.get(e.src, ())), set(turns_of.get(e.dst, ()))) for e in edges if e.kind == "update"]
    hits = [[bool(old & before and new & after and not old & new) for before, after in named] for old, new in links]
    out = {"edges": len(links), "on_named_updates": sum(any(row) for row in hits), "named_updates": len(named),
           "named_updates_linked": sum(any(row[i] for row in hits) for i in range(len(named)))}
    if merged:
        def convs(ids: set[str]) -> set[str]:
            return {i.split(":", 1)[0] for i in ids}

        out["across_conversations"] = sum(1 for old, new in links if not convs(old) & convs(new))
    return out


def _record(q: BeamQuestion, covered: Iterable[str], tokens: int, latency: float) -> QuestionRecord:
    rec = make_record(q.qid, 0, q.evidence, covered, tokens, latency)
    rec.extra["category"] = q.category
    if q.updated:
        rec.extra["updated"] = q.updated
    return rec


def _ariadnemem(convs: Sequence[BeamConversation], cfg: Config, embedder: Any, store: Path, prog: Any,
                diagnostics: list[dict[str, Any]]) -> dict[str, Any]:
    from ..memory import AriadneMemory

    records: list[QuestionRecord] = []
    ingest_s = 0.0
    embed_once_s = 0.0
    cold: list[float] = []
    lost = {"gate": 0, "budget": 0, "retrieval": 0}
    links = {"edges": 0, "on_named_updates": 0, "named_updates": 0, "named_updates_linked": 0}
    per_conv: dict[str, Any] = {}
    embedder = fresh_embedder(embedder)
    n_msgs = sum(len(c.turns) for c in convs)
    task = prog.add_task(f"{MAIN}: ingest", total=n_msgs)
    path = store / "ariadnemem"
    with AriadneMemory(path, cfg, embedder=embedder) as mem:
        for conv in convs:
            # The yardstick, measured right before this conversation's ingest so both see
            # the same machine load: every message embedded once by a fresh embedder.
            t0 = time.perf_counter()
            fresh_embedder(embedder).embed([t.text for t in conv.turns])
            embed_once_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            for start in range(0, len(conv.turns), cfg.window_size):
                batch = conv.turns[start:start + cfg.window_size]
                mem.add(batch, user_id=conv.user_id)
                prog.advance(task, len(batch))
            mem.flush()
            seconds = time.perf_counter() - t0
            ingest_s += seconds
            st = mem.stats(conv.user_id)
            per_conv[conv.conv_id] = {"messages": len(conv.turns), "seconds": round(seconds, 2),
                                      "entries": st.get("entries", 0), "gate_dropped": st.get("gate_dropped", 0),
                                      "link": st.get("link", 0), "merge": st.get("merge", 0)}
        stats = mem.stats()
    # Reopen: the first query per conversation is a cold one (empty caches), then warm.
    qtask = prog.add_task(f"{MAIN}: questions", total=sum(len(c.questions) for c in convs))
    with AriadneMemory(path, cfg, embedder=embedder) as mem:
        for conv in convs:
            embedder.embed([q.question for q in conv.questions])  # latency excludes query embedding
            entries = mem.entries(conv.user_id)
            stored_turns = {tid for e in entries for tid in e.source_turn_ids}
            turns_of = {e.id: set(e.source_turn_ids) for e in entries}
            for key, n in update_links(conv.questions, mem.edges(conv.user_id), turns_of,
                                       merged=conv.merged).items():
                links[key] = links.get(key, 0) + n
            for n, q in enumerate(conv.questions):
                t0 = time.perf_counter()
                graph = mem.retrieve(q.question, user_id=conv.user_id)
                latency = (time.perf_counter() - t0) * 1000.0
                if n == 0:
                    cold.append(latency)
                covered = covered_turns(graph)
                rec = _record(q, covered, graph.token_count(), latency)
                if n == 0:
                    rec.extra["cold"] = True
                records.append(rec)
                pruned_turns = {t for i in graph.stats.get("pruned", []) for t in turns_of.get(i, ())}
                for ev in set(q.evidence) - covered:
                    where = "gate" if ev not in stored_turns else "budget" if ev in pruned_turns else "retrieval"
                    lost[where] += 1
                    diagnostics.append({"qid": q.qid, "category": q.category, "evidence": ev, "lost_at": where})
                prog.advance(qtask)
    warm = [r.latency_ms for r in records if not r.extra.get("cold")]
    summary = summarize_beam(records, _categories(convs))
    return {
        "summary": summary,
        "records": records,
        "ingest": {"messages": n_msgs, "seconds": round(ingest_s, 2), "embed_once_seconds": round(embed_once_s, 2),
                   "ingest_over_embed_once": ingest_s / embed_once_s if embed_once_s else None,
                   "messages_per_s": n_msgs / ingest_s if ingest_s else None,
                   "entries": stats.get("entries", 0), "gate_kept": stats.get("gate_kept", 0),
                   "gate_dropped": stats.get("gate_dropped", 0), "merge": stats.get("merge", 0),
                   "link": stats.get("link", 0), "add": stats.get("add", 0),
                   "per_conversation": per_conv},
        "latency": {"warm_p50_ms": percentile(warm, 50), "warm_p95_ms": percentile(warm, 95),
                    "cold_p50_ms": percentile(cold, 50), "cold_p95_ms": percentile(cold, 95)},
        "lost_at": lost,
        "update_links": links,
    }


def _categories(convs: Sequence[BeamConversation]) -> list[str]:
    return sorted({q.category for c in convs for q in c.questions})


def _flat(convs: Sequence[BeamConversation], embedder: Any, prog: Any) -> dict[str, Any]:
    """Every flat system (raw messages ranked, filled greedily up to each budget)."""
    results: dict[str, list[QuestionRecord]] = {f"flat-{m}@{b}": [] for m in FLAT_METHODS for b in FLAT_BUDGETS}
    embedder = fresh_embedder(embedder)
    task = prog.add_task("flat baselines", total=len(convs))
    for conv in convs:
        index = FlatIndex.from_turns(conv.turns, embedder=embedder)
        costs = [count_tokens(t) for t in index.texts]
        qvecs = embedder.embed([q.question for q in conv.questions])
        for q, qv in zip(conv.questions, qvecs, strict=True):
            for method in FLAT_METHODS:
                t0 = time.perf_counter()
                ranked = index.dense(qv, FLAT_POOL) if method == "dense" else index.hybrid(q.question, qv, FLAT_POOL)
                latency = (time.perf_counter() - t0) * 1000.0
                for budget in FLAT_BUDGETS:
                    chosen = fill_budget(ranked, costs, budget)
                    tokens = count_tokens("\n".join(index.texts[i] for i in chosen)) if chosen else 0
                    results[f"flat-{method}@{budget}"].append(
                        _record(q, [index.ids[i] for i in chosen], tokens, latency))
        index.close()
        prog.advance(task)
    cats = _categories(convs)
    return {name: {"summary": summarize_beam(recs, cats), "records": recs} for name, recs in results.items()}


def run_beam(root: Path, *, conversations: Sequence[str] | None = None, out_dir: Path = DEFAULT_OUT,
             config: Config | None = None, embedder: Any = None, store: Path | None = None,
             progress: bool = True, log: Callable[[str], None] | None = None,
             as_one_user: bool = False) -> dict[str, Any]:
    """Run AriadneMem and the flat baselines on BEAM; write results.json/.md and a chart.

    ``as_one_user`` asks every question of all the conversations as one user's log
    (:func:`one_user`), for the flat baselines too."""
    import tempfile

    from ..embedding import MiniLMEmbedder
    from .ingest import warm_embedder

    cfg = config or Config()
    convs = load_beam(root, conversations)
    if as_one_user:
        convs = [one_user(convs)]
    embedder = embedder or MiniLMEmbedder()
    load_s = warm_embedder(embedder)
    diagnostics: list[dict[str, Any]] = []
    with progress_bar(progress) as prog, tempfile.TemporaryDirectory(prefix="beam-bench-") as tmp:
        flat = _flat(convs, embedder, prog)
        ours = _ariadnemem(convs, cfg, embedder, store or Path(tmp), prog, diagnostics)
    systems = {MAIN: ours, **flat}
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {
        "dataset": {"path": str(root), "conversations": [c.conv_id for c in convs], "one_user": as_one_user,
                    "messages": sum(len(c.turns) for c in convs),
                    "questions": sum(len(c.questions) for c in convs),
                    "questions_with_evidence": sum(1 for c in convs for q in c.questions if q.evidence),
                    "cut_messages": [{"conversation": c.conv_id, "id": i, "chars": n}
                                     for c in convs for i, n in c.cut_messages],
                    "skipped_evidence_ids": sum(c.skipped_ids for c in convs)},
        "config": cfg.to_dict(),
        "model_load_seconds": round(load_s, 2),
        "systems": {name: {k: v for k, v in s.items() if k != "records"} for name, s in systems.items()},
        "intervals": {name: recall_intervals(s["records"]) for name, s in systems.items()},
        "paired": {name: paired_difference(s["records"], systems[REFERENCE]["records"])
                   for name, s in systems.items() if name != REFERENCE},
        "environment": environment(),
        "peak_rss": peak_rss(),
    }
    write_json(out_dir / "results.json", results)
    write_jsonl(out_dir / "questions.jsonl", (
        {"system": name, "qid": r.qid, "category": r.extra.get("category"), "evidence": r.evidence,
         "covered": r.covered, "tokens": r.tokens, "latency_ms": round(r.latency_ms, 3)}
        for name, s in systems.items() for r in s["records"]))
    write_jsonl(out_dir / "diagnostics.jsonl", diagnostics)
    (out_dir / "results.md").write_text(beam_markdown(results), encoding="utf-8")
    beam_chart(results, out_dir / "results.png")
    return results


# ---------------------------------------------------------------------- report
def beam_markdown(results: Mapping[str, Any]) -> str:
    systems = results["systems"]
    cats = sorted({c for s in systems.values() for c in s["summary"]["categories"]})
    headers = ["system", "mean tokens", "max tokens", "recall", "all-hit", *cats, "KU updated present"]
    rows = []
    for name, s in systems.items():
        sm = s["summary"]
        rows.append([name, fmt(sm["all"]["tokens_mean"], "int"), str(sm["tokens_max"]),
                     fmt(sm["overall"]["recall"]), fmt(sm["overall"]["all_hit"]),
                     *[fmt(sm["categories"].get(c, {}).get("recall")) for c in cats],
                     fmt(sm.get("knowledge_update_updated_present"))])
    ds = results["dataset"]
    ours = systems[MAIN]
    ing = ours["ingest"]
    lat = ours["latency"]
    lines = [
        "# BEAM evidence recall",
        "",
        (f"Conversations {ds['conversations'][0].replace('+', ', ')} as one user's log"
         if ds.get("one_user") else f"{len(ds['conversations'])} conversations")
        + f", {ds['messages']} messages, {ds['questions']} questions "
        f"({ds['questions_with_evidence']} with evidence; recall and all-hit are means over those).",
        "",
        markdown_table(headers, rows),
        "",
        *_interval_lines(results, cats),
        "## AriadneMem ingest and latency",
        "",
        markdown_table(
            ["messages", "seconds", "messages/s", "x embed-once", "entries", "gate dropped", "MERGE", "LINK",
             "warm p50 ms", "warm p95 ms", "cold p50 ms"],
            [[str(ing["messages"]), fmt(ing["seconds"], "ms"), fmt(ing["messages_per_s"], "ms"),
              fmt(ing.get("ingest_over_embed_once"), "ms"), str(ing["entries"]), str(ing["gate_dropped"]),
              str(ing["merge"]), str(ing["link"]), fmt(lat["warm_p50_ms"], "ms"),
              fmt(lat["warm_p95_ms"], "ms"), fmt(lat["cold_p50_ms"], "ms")]]),
        "",
        f"Missed evidence lost at: retrieval {ours['lost_at']['retrieval']}, budget {ours['lost_at']['budget']}, "
        f"gate {ours['lost_at']['gate']}.",
        "",
        *_link_lines(ours.get("update_links")),
        f"Embedding every message once with the same embedder took {ing.get('embed_once_seconds')} s "
        "(measured per conversation right before its ingest, so both see the same machine load).",
    ]
    if ds["cut_messages"]:
        lines += ["", "Messages cut to the library's limit: " + ", ".join(
            f"conversation {c['conversation']} message {c['id']} ({c['chars']:,} characters)"
            for c in ds["cut_messages"]) + "."]
    cmd = " ".join(results.get("environment", {}).get("command", []))
    if cmd:
        lines += ["", f"Command: `{cmd}`"]
    return "\n".join(lines) + "\n"


def _link_lines(links: Mapping[str, int] | None) -> list[str]:
    if not links:
        return []
    across = links.get("across_conversations")
    return [f"Update links: {links['edges']} edges; {links['on_named_updates']} join the earlier and the updated "
            f"message of a knowledge update the questions name (real by the dataset's account); "
            f"{links['named_updates_linked']} of those {links['named_updates']} updates are linked."
            + (f" {across} join two of the conversations (false by construction: two people's lives)."
               if across is not None else ""), ""]


def _interval_lines(results: Mapping[str, Any], cats: Sequence[str]) -> list[str]:
    """The intervals section: each system's recall with its bootstrap 95% interval, and
    each system minus the reference on the same questions (paired)."""
    intervals = results.get("intervals")
    if not intervals:
        return []
    systems = results["systems"]

    def cell(value: float | None, ci: Sequence[float] | None, signed: bool = False) -> str:
        if value is None:
            return "–"
        body = f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"
        return f"{body} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else body

    rows = []
    for name, s in systems.items():
        ci = intervals.get(name, {})
        sm = s["summary"]
        rows.append([name, cell(sm["overall"]["recall"], ci.get("overall")),
                     *[cell(sm["categories"].get(c, {}).get("recall"), ci.get(c)) for c in cats]])
    for name, p in results.get("paired", {}).items():
        rows.append([f"{name} - {p['vs']}", cell(p["diff"].get("overall"), p["ci"].get("overall"), signed=True),
                     *[cell(p["diff"].get(c), p["ci"].get(c), signed=True) for c in cats]])
    return ["## Recall with bootstrap 95% intervals", "",
            "Per question, resampled within each category (2,000 resamples, seed 0); the last rows are "
            "paired differences on the same questions.", "",
            markdown_table(["system", "recall", *cats], rows), ""]


def beam_chart(results: Mapping[str, Any], path: Path, *, dpi: float = 150) -> Path:
    """Recall against mean tokens for every system, and per-category bars (ours vs flat)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..files import write_atomic

    systems = results["systems"]
    fig = Figure(figsize=(12, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2, width_ratios=(1, 1.6))
    for name, s in systems.items():
        sm = s["summary"]
        x, y = sm["all"]["tokens_mean"] or 0, 100 * (sm["overall"]["recall"] or 0)
        ours = name == MAIN
        left.plot([x], [y], "*" if ours else "o", ms=16 if ours else 8, label=name, zorder=5 if ours else 3)
    left.set_xlabel("mean context tokens")
    left.set_ylabel("evidence recall (%)")
    left.set_title("BEAM: recall vs context size")
    left.legend(fontsize=8)
    cats = sorted(c for c, v in systems[MAIN]["summary"]["categories"].items() if v.get("recall") is not None)
    compare = [MAIN, "flat-dense@500", "flat-hybrid@1500"]
    width = 0.8 / len(compare)
    for k, name in enumerate(n for n in compare if n in systems):
        vals = [100 * (systems[name]["summary"]["categories"].get(c, {}).get("recall") or 0) for c in cats]
        right.bar([i + k * width for i in range(len(cats))], vals, width, label=name)
    right.set_xticks([i + width for i in range(len(cats))], [c.replace("_", "\n") for c in cats], fontsize=7)
    right.set_ylabel("evidence recall (%)")
    right.set_title("per category")
    right.legend(fontsize=8)
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return write_atomic(Path(path), buf.getvalue())
