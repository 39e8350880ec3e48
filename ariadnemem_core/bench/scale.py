"""The scale bench: how storage and retrieval behave as one memory grows to 100k entries.

A documented synthetic dialogue (:class:`SyntheticDialogue`) is fed through the real
``AriadneMemory.add`` path (gate -> rule extraction -> embedding -> coarsening -> SQLite,
FTS5 and chromadb commit) into *one* user scope until the store holds ``entries``
entries: one user is the worst case, since every query searches that user's whole
partition. Reported: entries reached, ingest turns/s (overall and per growth segment),
retrieval p50/p95 over ~200 generated questions at the end (and over 20 at each
checkpoint), peak RSS (``ru_maxrss``) and store size on disk, with the targets
p50 <= 100 ms and peak RSS <= 1 GiB marked met / not met.

The embedder is :class:`~ariadnemem_core.embedding.HashEmbedder` (feature hashing, no
model): this bench measures how the store and the retrieval pipeline scale, not the
model. MiniLM's ingest rate (the embedding cost, which dominates real ingest) is measured
by ``ariadnemem bench ingest`` on LoCoMo. Retrieval timings *include* query embedding
(with HashEmbedder it is a fraction of a millisecond), measured after one untimed warm-up
query that pays the first-query imports.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..config import Config
from ..models import Turn
from .metrics import ingest_figures, mean, peak_rss, percentile
from .progress import progress_bar
from .report import environment, fmt, markdown_table, write_json

DEFAULT_OUT = Path("bench-results") / "scale"
DEFAULT_ENTRIES = 100_000
TARGET_P50_MS = 100.0
TARGET_RSS_MB = 1024.0
#: Questions timed at the end, and at each intermediate checkpoint.
QUESTIONS = 200
CHECKPOINT_QUESTIONS = 20
#: Fractions of ``entries`` at which growth is recorded (ingest rate, p50, RSS).
CHECKPOINTS = (0.1, 0.25, 0.5)
USER_ID = "scale"
START = datetime(2022, 1, 3, 9, 0, tzinfo=UTC)
SPAN_DAYS = 730

NAMES = (
    "Ana", "Ben", "Chloe", "Dev", "Emma", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kira", "Liam",
    "Maya", "Nils", "Olga", "Pablo", "Quinn", "Rosa", "Samir", "Tara", "Umar", "Vera", "Wes", "Xenia",
    "Yusuf", "Zoe", "Amara", "Bruno", "Celia", "Dario", "Elif", "Felix", "Gwen", "Hamid", "Ivy", "Jules",
    "Kofi", "Lena", "Marco", "Nadia", "Oscar", "Priya", "Rafael", "Sofia", "Theo", "Ulla", "Viktor",
    "Wanda", "Yara", "Zane",
)
HOBBIES = (
    "hiking", "pottery", "chess", "surfing", "painting", "cycling", "baking", "climbing", "knitting",
    "photography", "gardening", "fencing", "rowing", "birdwatching", "salsa dancing", "archery",
    "woodworking", "kayaking", "skiing", "origami", "juggling", "calligraphy", "sailing", "running",
    "yoga", "bouldering", "beekeeping", "astronomy", "embroidery", "skateboarding",
)
PLACES = (
    "Lyon", "Oslo", "Kyoto", "Lima", "Porto", "Quebec", "Hanoi", "Tunis", "Bergen", "Cork", "Dakar",
    "Graz", "Izmir", "Krakow", "Malaga", "Nantes", "Osaka", "Perth", "Riga", "Seville", "Tallinn",
    "Utrecht", "Valencia", "Windhoek", "Zagreb", "Bologna", "Cusco", "Dublin", "Edinburgh", "Florence",
    "Geneva", "Havana", "Lisbon", "Marrakesh", "Naples", "Quito", "Salzburg", "Toledo", "Vienna", "Ghent",
)
JOBS = (
    "nurse", "teacher", "pilot", "chef", "lawyer", "plumber", "architect", "farmer", "librarian",
    "electrician", "dentist", "journalist", "carpenter", "pharmacist", "translator", "accountant",
    "firefighter", "veterinarian", "baker", "engineer", "designer", "mechanic", "geologist", "barista",
    "photographer", "surgeon", "tailor", "florist", "paramedic", "historian",
)
PETS = ("dog", "cat", "parrot", "rabbit", "hamster", "turtle", "goldfish", "horse")
PET_NAMES = ("Pixel", "Biscuit", "Luna", "Mango", "Pepper", "Ziggy", "Olive", "Nemo", "Ruby", "Taco")
EVENTS = ("dentist appointment", "job interview", "piano recital", "family dinner", "marathon",
          "wedding", "book club meeting", "art show", "conference talk", "driving test")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
CHITCHAT = ("That sounds great!", "Haha, really?", "Wow, good for you.", "Thanks, you too!", "Oh nice.",
            "I see.", "Sounds fun!", "Totally agree.")


@dataclass(slots=True)
class Fact:
    """One generated fact: what a question about it asks, and the turns that state it."""

    kind: str
    person: str
    question: str
    turn_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SyntheticDialogue:
    """A deterministic stream of dialogue turns about ``NAMES`` (seeded, any length).

    * Persons: ``NAMES`` (50). Sessions pair two persons who talk for 10-30 turns a minute
      or two apart; session starts are spread uniformly over ``SPAN_DAYS`` (~2 years)
      from ``START`` in order, so timestamps are increasing and the relative time words
      ("last week") are grounded against them.
    * Facts: first-person templates about hobbies, trips (places, relative and absolute
      dates), jobs (and workplaces), pets, birthdays and dated events; every person has a
      current job, city and hobby that facts refer to. About a quarter of the turns hold
      two facts (two sentences -> two atomic entries).
    * Repetition, so the gate and coarsening have work: ~6% of turns repeat a fact said a
      few minutes earlier in the session (near-duplicates the gate drops), ~6% restate an
      older fact of the speaker days or months later (long-term recurrence: the gate
      keeps it, coarsening MERGEs it), ~8% update a slot (new job, moved city: coarsening
      LINKs where the wording is close enough), ~5% are chit-chat.

    Each fact also yields a question (:class:`Fact`) whose evidence is the turns that
    stated it, so the bench can check that retrieval still finds things at scale.
    """

    seed: int = 0
    span_days: int = SPAN_DAYS
    expected_turns: int = 120_000
    facts: list[Fact] = field(default_factory=list)
    _rng: random.Random = field(init=False)
    _n: int = field(default=0, init=False)
    _profile: dict[str, dict[str, str]] = field(default_factory=dict, init=False)
    #: Per person: (text, fact index, turn number) of what they said, most recent last.
    _said: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        r = self._rng
        for name in NAMES:
            self._profile[name] = {"job": r.choice(JOBS), "city": r.choice(PLACES), "hobby": r.choice(HOBBIES)}
            self._said[name] = []

    def turns(self) -> Iterator[Turn]:
        """Endless turns; session starts advance so ``expected_turns`` span ~2 years."""
        r = self._rng
        mean_session = 20
        step = timedelta(days=self.span_days) / max(1, self.expected_turns // mean_session)
        session_start = START
        while True:
            a, b = r.sample(NAMES, 2)
            now = session_start
            for i in range(r.randint(10, 30)):
                speaker = a if i % 2 == 0 else b
                yield self._turn(speaker, now, session_start)
                now += timedelta(seconds=r.randint(30, 150))
            session_start += step * r.uniform(0.5, 1.5)

    def _turn(self, who: str, now: datetime, session_start: datetime) -> Turn:
        r = self._rng
        self._n += 1
        tid = f"s{self._n}"
        said = self._said[who]
        roll = r.random()
        if roll < 0.05:
            return Turn(who, r.choice(CHITCHAT), now, tid)
        if roll < 0.11 and said and said[-1][2] >= self._n - 30:
            text, fact_idx, _ = said[-1]  # near-duplicate minutes later: the gate's case
            return self._state(who, text, fact_idx, now, tid)
        if roll < 0.17 and said:
            text, fact_idx, _ = r.choice(said)  # long-term recurrence: coarsening's MERGE case
            return self._state(who, text, fact_idx, now, tid)
        if roll < 0.25:
            return self._update(who, now, tid)
        text = self._fact(who, now, tid)
        if r.random() < 0.25:
            text = f"{text} {self._fact(who, now, tid)}"
        return Turn(who, text, now, tid)

    def _state(self, who: str, text: str, fact_idx: int, now: datetime, tid: str) -> Turn:
        self.facts[fact_idx].turn_ids.append(tid)
        return Turn(who, text, now, tid)

    def _remember(self, who: str, text: str, kind: str, question: str, tid: str) -> str:
        self.facts.append(Fact(kind, who, question, [tid]))
        self._said[who].append((text, len(self.facts) - 1, self._n))
        if len(self._said[who]) > 200:
            del self._said[who][0]
        return text

    def _update(self, who: str, now: datetime, tid: str) -> Turn:
        r = self._rng
        p = self._profile[who]
        if r.random() < 0.5:
            p["job"] = r.choice([j for j in JOBS if j != p["job"]])
            text = f"I work as a {p['job']} in {p['city']} now."
            q = f"What does {who} work as now?"
        else:
            p["city"] = r.choice([c for c in PLACES if c != p["city"]])
            text = f"I moved to {p['city']} and I still work as a {p['job']}."
            q = f"Where does {who} live now?"
        return Turn(who, self._remember(who, text, "update", q, tid), now, tid)

    def _fact(self, who: str, now: datetime, tid: str) -> str:
        r = self._rng
        p = self._profile[who]
        kind = r.randrange(8)
        if kind == 0:
            hobby = r.choice(HOBBIES)
            text = f"I started {hobby} in {MONTHS[now.month - 1]} with some friends from {p['city']}."
            return self._remember(who, text, "hobby", f"When did {who} start {hobby}?", tid)
        if kind == 1:
            place = r.choice(PLACES)
            text = f"Last week I travelled to {place} and went {p['hobby']} there."
            return self._remember(who, text, "trip", f"When did {who} travel to {place}?", tid)
        if kind == 2:
            text = f"I work as a {p['job']} at a small company in {p['city']}."
            return self._remember(who, text, "job", f"What is {who}'s job?", tid)
        if kind == 3:
            pet, pet_name = r.choice(PETS), r.choice(PET_NAMES)
            text = f"We adopted a {pet} called {pet_name} {r.choice(('yesterday', 'last month', 'on Sunday'))}."
            return self._remember(who, text, "pet", f"What is the name of {who}'s {pet}?", tid)
        if kind == 4:
            month, day = r.choice(MONTHS), r.randint(1, 28)
            text = f"My birthday is on {month} {day}, I will celebrate in {p['city']}."
            return self._remember(who, text, "birthday", f"When is {who}'s birthday?", tid)
        if kind == 5:
            event = r.choice(EVENTS)
            text = f"I have a {event} next {r.choice(('Monday', 'Friday', 'week', 'month'))} in {r.choice(PLACES)}."
            return self._remember(who, text, "event", f"When is {who}'s {event}?", tid)
        if kind == 6:
            text = f"I really love {p['hobby']}, I go every weekend near {p['city']}."
            return self._remember(who, text, "hobby", f"What hobby does {who} love?", tid)
        place = r.choice(PLACES)
        text = f"In {MONTHS[r.randrange(12)]} {now.year - r.randint(1, 15)} I lived in {place} for a year."
        return self._remember(who, text, "past", f"When did {who} live in {place}?", tid)


def _ms_summary(values: Sequence[float]) -> dict[str, float | None]:
    return {"p50_ms": percentile(values, 50), "p95_ms": percentile(values, 95), "mean_ms": mean(values),
            "max_ms": max(values) if values else None, "n": len(values)}


def _current_rss_mb() -> float | None:
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dev dependency
        return None
    return round(psutil.Process().memory_info().rss / (1024 * 1024), 1)


def _dir_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / (1024 * 1024), 1)


def _time_questions(mem: Any, facts: Sequence[Fact]) -> tuple[list[float], list[bool]]:
    """``retrieve`` each fact's question (query embedding included): ms and evidence hits."""
    times: list[float] = []
    hits: list[bool] = []
    for f in facts:
        t0 = time.perf_counter()
        graph = mem.retrieve(f.question, user_id=USER_ID)
        times.append((time.perf_counter() - t0) * 1000.0)
        hits.append(bool(graph.source_turn_ids & set(f.turn_ids)))
    return times, hits


def run_scale(out: str | Path | None = None, *, entries: int = DEFAULT_ENTRIES, seed: int = 0,
              progress: bool = True, config: Config | None = None, batch_turns: int = 100,
              questions: int = QUESTIONS, store: str | Path | None = None) -> dict[str, Any]:
    """Grow one memory to ``entries`` entries; write scale.json and scale.md under ``out``.

    ``out=None`` writes to ``bench-results/scale``. Turns go through ``add`` in batches of
    ``batch_turns`` (a bulk import; the memory extracts full windows as they fill) with
    one ``flush`` at the end. ``store`` keeps the memory on disk (default: a temporary
    directory, removed afterwards).
    """
    from ..embedding import HashEmbedder
    from ..memory import AriadneMemory

    if entries < 1:
        raise ValueError("entries must be >= 1")
    t_start = time.perf_counter()
    cfg = config or Config()
    tmp = None if store is not None else Path(tempfile.mkdtemp(prefix="ariadnemem-scale-"))
    path = Path(store) if store is not None else tmp / "store"  # type: ignore[operator]
    # ~0.85 entries per turn after gating and merging with this generator (measured at
    # 2k-30k entries), so the turns needed for ``entries`` span about two years.
    gen = SyntheticDialogue(seed=seed, expected_turns=max(100, int(entries / 0.85)))
    stream = gen.turns()
    rng = random.Random(seed + 1)
    checkpoints = sorted({max(1, int(entries * f)) for f in CHECKPOINTS if int(entries * f) < entries})
    curve: list[dict[str, Any]] = []
    embedder = HashEmbedder()
    try:
        with progress_bar(progress) as prog, AriadneMemory(path, cfg, embedder=embedder) as mem:
            task = prog.add_task(f"ingest to {entries:,} entries", total=entries)
            n_turns = 0
            ingest_s = 0.0
            seg_turns, seg_s = 0, 0.0
            n_entries = 0
            while n_entries < entries:
                batch = [next(stream) for _ in range(batch_turns)]
                t0 = time.perf_counter()
                mem.add(batch, user_id=USER_ID)
                dt = time.perf_counter() - t0
                ingest_s += dt
                seg_s += dt
                n_turns += len(batch)
                seg_turns += len(batch)
                now = mem.stats(USER_ID)["entries"]
                prog.advance(task, now - n_entries)
                n_entries = now
                if checkpoints and n_entries >= checkpoints[0]:
                    while checkpoints and n_entries >= checkpoints[0]:
                        checkpoints.pop(0)
                    sample = rng.sample(gen.facts, min(CHECKPOINT_QUESTIONS, len(gen.facts)))
                    mem.retrieve("What happened recently?", user_id=USER_ID)  # untimed warm-up
                    times, hits = _time_questions(mem, sample)
                    curve.append({"entries": n_entries, "turns": n_turns, "ingest_s": round(ingest_s, 3),
                                  "segment_turns_per_s": seg_turns / seg_s if seg_s else None,
                                  "retrieve": _ms_summary(times), "evidence_hit_rate": mean(hits),
                                  "rss_mb": _current_rss_mb(), "peak_rss_mb": peak_rss()["ru_maxrss_mb"]})
                    seg_turns, seg_s = 0, 0.0
            t0 = time.perf_counter()
            mem.flush()
            ingest_s += time.perf_counter() - t0
            seg_s += time.perf_counter() - t0
            prog.remove_task(task)
            stats = mem.stats(USER_ID)
            figures = ingest_figures(stats, n_turns, ingest_s)

            asked = [f for f in gen.facts if f.turn_ids]
            sample = rng.sample(asked, min(questions, len(asked)))
            task = prog.add_task(f"retrieve {len(sample)} questions", total=len(sample))
            mem.retrieve("What happened recently?", user_id=USER_ID)  # untimed: first-query loads
            times, hits = [], []
            for f in sample:
                t, h = _time_questions(mem, [f])
                times += t
                hits += h
                prog.advance(task)
            prog.remove_task(task)
            final = _ms_summary(times)
            curve.append({"entries": stats["entries"], "turns": n_turns, "ingest_s": round(ingest_s, 3),
                          "segment_turns_per_s": seg_turns / seg_s if seg_s else None,
                          "retrieve": final, "evidence_hit_rate": mean(hits),
                          "rss_mb": _current_rss_mb(), "peak_rss_mb": peak_rss()["ru_maxrss_mb"]})
            by_kind: dict[str, list[bool]] = {}
            for f, hit in zip(sample, hits, strict=True):
                by_kind.setdefault(f.kind, []).append(hit)
        store_mb = _dir_mb(path)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    rss = peak_rss()
    results: dict[str, Any] = {
        "benchmark": "scale",
        "generator": {"seed": seed, "persons": len(NAMES), "span_days": SPAN_DAYS, "facts": len(gen.facts),
                      "batch_turns": batch_turns},
        "entries_target": entries,
        "entries": stats["entries"],
        "ingest": figures,
        "retrieve": final | {"includes_query_embedding": True},
        "evidence_hit_rate": mean(hits),
        "evidence_hit_rate_by_kind": {k: mean(v) for k, v in sorted(by_kind.items())},
        "curve": curve,
        "store_mb": store_mb,
        "peak_rss": rss,
        "targets": {"p50_ms": TARGET_P50_MS, "peak_rss_mb": TARGET_RSS_MB},
        "meets_targets": {
            "p50": final["p50_ms"] is not None and final["p50_ms"] <= TARGET_P50_MS,
            "rss": rss["ru_maxrss_mb"] is not None and rss["ru_maxrss_mb"] <= TARGET_RSS_MB,
        },
        "embedder": embedder.name,
        "config": cfg.to_dict(),
        "environment": environment(),
        "elapsed_s": time.perf_counter() - t_start,
    }
    out_dir = Path(out) if out is not None else DEFAULT_OUT
    write_json(out_dir / "scale.json", results)
    (out_dir / "scale.md").write_text(scale_markdown(results), encoding="utf-8")
    results["out"] = str(out_dir)
    return results


def _met(flag: bool) -> str:
    return "met" if flag else "NOT met"


def scale_markdown(results: dict[str, Any]) -> str:
    f, r, rss = results["ingest"], results["retrieve"], results["peak_rss"]
    met = results["meets_targets"]
    curve_rows = [[f"{c['entries']:,}", f"{c['turns']:,}", fmt(c["segment_turns_per_s"], "int"),
                   fmt(c["retrieve"]["p50_ms"], "ms"), fmt(c["retrieve"]["p95_ms"], "ms"),
                   str(c["retrieve"]["n"]), fmt(c["evidence_hit_rate"]), str(c["rss_mb"]), str(c["peak_rss_mb"])]
                  for c in results["curve"]]
    env = results["environment"]
    g = results["generator"]
    lines = [
        "# Scale",
        "",
        f"One user scope grown to {results['entries']:,} entries (target {results['entries_target']:,}) from "
        f"{f['turns']:,} synthetic turns (seed {g['seed']}, {g['persons']} persons, ~{g['span_days']} days, "
        f"`add` in batches of {g['batch_turns']}); embedder `{results['embedder']}` (no model: this bench "
        "measures the store and retrieval; MiniLM's ingest rate is `ariadnemem bench ingest`).",
        "",
        markdown_table(
            ("entries", "turns", "ingest turns/s", "retrieve p50 ms", "retrieve p95 ms", "peak RSS MB", "store MB"),
            [[f"{results['entries']:,}", f"{f['turns']:,}", fmt(f["turns_per_s"], "int"), fmt(r["p50_ms"], "ms"),
              fmt(r["p95_ms"], "ms"), str(rss["ru_maxrss_mb"]), str(results["store_mb"])]],
        ),
        "",
        f"Targets: retrieve p50 <= {TARGET_P50_MS:g} ms over {r['n']} questions (query embedding included): "
        f"**{_met(met['p50'])}**; peak RSS <= {TARGET_RSS_MB:g} MB: **{_met(met['rss'])}**.",
        "",
        f"Ingest: {f['seconds']:.0f} s; gate dropped {f['gate_dropped']:,} turns "
        f"({fmt(f['gate_drop_rate'])} %); MERGE {f['merge']:,}, LINK {f['link']:,}, ADD {f['add']:,}. "
        f"Evidence hit rate (a turn stating the asked fact is in the graph): {fmt(results['evidence_hit_rate'])} % "
        "(a sanity check that retrieval still finds things at scale; hashing has no semantics).",
        "",
        "Growth (retrieval at intermediate checkpoints over 20 questions, at the end over all):",
        "",
        markdown_table(("entries", "turns", "segment turns/s", "p50 ms", "p95 ms", "questions", "hit %",
                        "RSS MB", "peak RSS MB"), curve_rows),
        "",
        f"{env['cpu_count']} CPUs; " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
        + f". Total run {results['elapsed_s']:.0f} s.",
        "",
    ]
    return "\n".join(lines)
