"""The ingest bench: a whole LoCoMo file into one memory, one user per conversation.

Reports throughput (turns/s, target >= 300 on 2 cores with the rule extractor and MiniLM),
entries kept, the gate's drop rate, MERGE/LINK/ADD counts and peak RSS. The embedding
model is loaded before the clock starts: its one-off load time is reported separately,
since a long-running agent pays it once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import Config
from .locomo import Conversation, load_locomo
from .metrics import ingest_figures, peak_rss
from .progress import progress_bar
from .report import environment, fmt, markdown_table, write_json

DEFAULT_OUT = Path("bench-results") / "ingest"
#: Throughput target of the ingest bench (turns per second).
TARGET_TURNS_PER_S = 300.0


def warm_embedder(embedder: Any) -> float:
    """Load the model and the tokenizer now (seconds taken) so that later timings measure
    steady-state work, not one-off imports (the first token count imports tiktoken's data)."""
    from ..tokens import count_tokens

    t0 = time.perf_counter()
    embedder.embed(["warm up the embedding model"])
    count_tokens("warm up the tokenizer")
    return time.perf_counter() - t0


def fresh_embedder(embedder: Any) -> Any:
    """The same model with an empty text cache (MiniLM shares its weights across instances).

    Every system of a run gets one, so no system's ingest or retrieval is sped up by
    texts an earlier system embedded: timings stay comparable across systems.
    """
    from ..embedding import MiniLMEmbedder, TorchMiniLMEmbedder

    if type(embedder) is MiniLMEmbedder:
        return MiniLMEmbedder(batch_size=embedder.batch_size, model_dir=embedder.model_dir, threads=embedder.threads)
    if type(embedder) is TorchMiniLMEmbedder:
        return TorchMiniLMEmbedder(batch_size=embedder.batch_size)
    return embedder


def set_torch_threads(threads: int | None) -> int | None:
    """Pin torch's intra-op threads (None: leave torch's default); returns the count in use,
    or None when torch is not loaded (the default embedder runs on onnxruntime and takes its
    thread count from ``MiniLMEmbedder(threads=...)``; torch is not imported just for this).

    On a busy 2-core machine two torch threads spin against other processes and MiniLM
    gets several times slower than with one thread, so the benches can pin it and record it.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if threads:
        torch.set_num_threads(threads)
    return int(torch.get_num_threads())


def ingest_conversation(mem: Any, conv: Conversation) -> float:
    """``add`` every turn of one conversation into its own user scope, then ``flush``.

    One ``add`` call for the whole conversation: the memory extracts and embeds each
    batch of full windows together, which is how a bulk import should use it.
    """
    t0 = time.perf_counter()
    mem.add(conv.turns, user_id=conv.user_id)
    mem.flush()
    return time.perf_counter() - t0


def already_ingested(mem: Any, conv: Conversation) -> bool:
    """True when a persistent store already holds exactly this conversation's turns."""
    stats = mem.stats(conv.user_id)
    return stats.get("turns_seen", 0) == len(conv.turns) and not stats.get("pending_turns", 0)


def ingest_all(mem: Any, convs: Sequence[Conversation], prog: Any, label: str = "ingest") -> dict[str, Any]:
    """Ingest (or reuse, on a persistent store) every conversation; returns the figures.

    A conversation found complete in the store is reused and not timed; one found partly
    ingested is forgotten and ingested again.
    """
    task = prog.add_task(f"{label}", total=len(convs))
    seconds = 0.0
    turns = 0
    reused: list[str] = []
    for conv in convs:
        prog.update(task, description=f"{label} {conv.sample_id}")
        if already_ingested(mem, conv):
            reused.append(conv.sample_id)
        else:
            if mem.stats(conv.user_id).get("turns_seen", 0):
                mem.forget(conv.user_id)
            seconds += ingest_conversation(mem, conv)
            turns += len(conv.turns)
        prog.advance(task)
    prog.remove_task(task)
    figures = ingest_figures(mem.stats(), turns, seconds)
    figures["reused_conversations"] = reused
    if reused:
        figures["note"] = "reused conversations were ingested by an earlier run; counters include them"
    return figures


def run_ingest(path: str | Path, out: str | Path | None = None, *, config: Config | None = None,
               embedder: Any = None, store: str | Path | None = None, conversations: Sequence[str] | None = None,
               progress: bool = True, threads: int | None = None) -> dict[str, Any]:
    """Ingest a LoCoMo file (one user per conversation); write ingest.json and ingest.md.

    ``out=None`` writes to ``bench-results/ingest``. ``store`` keeps the memory on disk
    (a fresh directory is expected: an existing complete store is reused, not re-timed).
    """
    from ..embedding import MiniLMEmbedder
    from ..memory import AriadneMemory

    t_start = time.perf_counter()
    torch_threads = set_torch_threads(threads)
    dataset = load_locomo(path, conversations)
    embedder = embedder or MiniLMEmbedder(threads=threads)
    load_s = warm_embedder(embedder)
    cfg = config or Config()
    with progress_bar(progress) as prog, AriadneMemory(store, cfg, embedder=embedder) as mem:
        figures = ingest_all(mem, dataset.conversations, prog)
        per_user = {c.sample_id: ingest_figures(mem.stats(c.user_id), len(c.turns), 0.0)
                    for c in dataset.conversations}
    for fig in per_user.values():
        fig.pop("seconds")
        fig.pop("turns_per_s")
    results: dict[str, Any] = {
        "benchmark": "ingest",
        "dataset": {"path": str(path), "conversations": [c.sample_id for c in dataset.conversations],
                    "turns": dataset.n_turns},
        "ingest": figures,
        "per_conversation": per_user,
        "target_turns_per_s": TARGET_TURNS_PER_S,
        "meets_target": (figures["turns_per_s"] or 0) >= TARGET_TURNS_PER_S if figures["turns"] else None,
        "model_load_s": round(load_s, 3),
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "config": cfg.to_dict(),
        "environment": environment() | {"torch_threads": torch_threads},
        "peak_rss": peak_rss(),
        "elapsed_s": time.perf_counter() - t_start,
    }
    out_dir = Path(out) if out is not None else DEFAULT_OUT
    write_json(out_dir / "ingest.json", results)
    (out_dir / "ingest.md").write_text(ingest_markdown(results), encoding="utf-8")
    results["out"] = str(out_dir)
    return results


def ingest_markdown(results: dict[str, Any]) -> str:
    f = results["ingest"]
    rss = results["peak_rss"]
    row = [str(f["turns"]), fmt(f["seconds"], "ms"), fmt(f["turns_per_s"], "int"), str(f["entries"]),
           fmt(f["gate_drop_rate"]), str(f["merge"]), str(f["link"]), str(f["add"]),
           str(rss.get("ru_maxrss_mb"))]
    env = results["environment"]
    lines = [
        "# Ingest",
        "",
        f"`{Path(results['dataset']['path']).name}`: {len(results['dataset']['conversations'])} conversations, "
        f"one user scope each; embedder `{results['embedder']}` (model load {results['model_load_s']:.2f} s, "
        "excluded). Target: >= 300 turns/s.",
        "",
        markdown_table(("turns", "s", "turns/s", "entries", "gate drop %", "MERGE", "LINK", "ADD", "peak RSS MB"),
                       [row]),
        "",
        f"Meets target: {results['meets_target']}. {env['cpu_count']} CPUs; "
        + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v),
        "",
    ]
    return "\n".join(lines)
