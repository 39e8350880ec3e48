"""Phase I, step 1: the entropy-aware gate (the paper's Phi_gate).

A turn is dropped only when its *nearest* stored memory is both semantically redundant
(cosine > lambda_red) and recent (less than delta_short apart). A near-identical statement
made long ago passes: long-term recurrence is information (a habit, a repeated event).
Turns already accepted earlier in the same window count as stored memories, so a
repetition inside one window is caught too. A turn or memory without a timestamp has an
unknown age and is never dropped (nothing is lost on missing data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from .config import Config


@dataclass(frozen=True, slots=True)
class Neighbor:
    """The nearest stored memory of a turn: its id, cosine and timestamp."""

    id: str
    similarity: float
    timestamp: datetime | None


@dataclass(frozen=True, slots=True)
class GateDecision:
    keep: bool
    reason: str  # "novel" | "long-term recurrence" | "no timestamp" | "redundant" | "gating off"
    nearest: Neighbor | None = None


def decide(turn_ts: datetime | None, nearest: Neighbor | None, config: Config) -> GateDecision:
    """Phi_gate for one turn given its nearest stored memory."""
    if nearest is None or nearest.similarity <= config.lambda_red:
        return GateDecision(True, "novel", nearest)
    if turn_ts is None or nearest.timestamp is None:
        return GateDecision(True, "no timestamp", nearest)
    age = abs((turn_ts - nearest.timestamp).total_seconds())
    if age < config.delta_short_s:
        return GateDecision(False, "redundant", nearest)
    return GateDecision(True, "long-term recurrence", nearest)


def gate_window(
    vectors: np.ndarray,
    timestamps: Sequence[datetime | None],
    turn_ids: Sequence[str],
    stored_nearest: Sequence[Neighbor | None],
    config: Config,
) -> list[GateDecision]:
    """Decide a whole window: stored neighbours plus turns kept earlier in the window."""
    if not config.enable_gating:
        return [GateDecision(True, "gating off") for _ in turn_ids]
    decisions: list[GateDecision] = []
    kept: list[int] = []
    for i, ts in enumerate(timestamps):
        best = stored_nearest[i]
        if kept:
            sims = vectors[kept] @ vectors[i]
            j = int(np.argmax(sims))
            if best is None or float(sims[j]) > best.similarity:
                k = kept[j]
                best = Neighbor(turn_ids[k], float(sims[j]), timestamps[k])
        decision = decide(ts, best, config)
        decisions.append(decision)
        if decision.keep:
            kept.append(i)
    return decisions
