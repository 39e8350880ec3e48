"""The LoCoMo recall results as a picture: recall against context size, and per category.

The table says everything, but the question a reader brings ("more evidence for fewer
tokens?") is a position on a plane: the left panel puts every system at (mean context
tokens, cat 1-4 evidence recall), with each flat family's k = 10 and k = 30 joined; the
right panel compares AriadneMem with flat hybrid per category. Drawn with matplotlib's
object-oriented API (no pyplot), like ``picture.py``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ..files import write_atomic

CATEGORIES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}
FAMILY_COLOURS = {"flat-bm25": "#8c8c8c", "flat-dense": "#55a868", "flat-hybrid": "#dd8452"}
OURS_COLOUR = "#4c72b0"


def _points(results: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """System -> (mean tokens over every question, as in results.md; cat 1-4 recall in %)."""
    out = {}
    for name, system in results["systems"].items():
        summary = system["summary"]
        tokens, recall = summary["all"].get("tokens_mean"), summary["overall"].get("recall")
        if recall is not None and tokens is not None:
            out[name] = (float(tokens), 100.0 * float(recall))
    return out


def recall_chart(results: dict[str, Any], path: str | Path, *, dpi: float = 150) -> Path:
    """Draw ``results`` (a ``bench locomo`` results.json) to a PNG at ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    points = _points(results)
    fig = Figure(figsize=(12, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2, width_ratios=(1, 1.25))

    families: dict[str, list[tuple[float, float, str]]] = {}
    for name, (tokens, recall) in points.items():
        family = name.split("@")[0]
        if family in FAMILY_COLOURS:
            families.setdefault(family, []).append((tokens, recall, name))
    for family, pts in families.items():
        pts.sort()
        colour = FAMILY_COLOURS[family]
        left.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=colour, label=family, lw=1.5, ms=6)
        for tokens, recall, name in pts:
            left.annotate("k=" + name.split("@")[1], (tokens, recall), textcoords="offset points", xytext=(6, -10),
                          fontsize=8, color=colour)
    for name, (tokens, recall) in points.items():
        if name.split("@")[0] not in FAMILY_COLOURS:
            ours = name == "AriadneMem"
            left.plot([tokens], [recall], "*" if ours else "o", color=OURS_COLOUR if ours else "#937860",
                      ms=16 if ours else 7, label=name, zorder=5)
    left.set_xlabel("mean context tokens (cl100k)")
    left.set_ylabel("evidence recall, categories 1-4 (%)")
    left.set_title("Recall against context size", fontsize=11, loc="left")
    left.grid(alpha=0.3)
    left.legend(fontsize=8, loc="lower right")

    shown = [n for n in ("AriadneMem", "flat-hybrid@10", "flat-hybrid@30") if n in results["systems"]]
    width = 0.8 / max(1, len(shown))
    colours = {"AriadneMem": OURS_COLOUR, "flat-hybrid@10": "#f0b58a", "flat-hybrid@30": FAMILY_COLOURS["flat-hybrid"]}
    for i, name in enumerate(shown):
        cats = results["systems"][name]["summary"]["categories"]
        values = [100.0 * float(cats.get(c, {}).get("recall") or 0.0) for c in CATEGORIES]
        xs = [j + (i - (len(shown) - 1) / 2) * width for j in range(len(CATEGORIES))]
        tokens = points.get(name, (0.0, 0.0))[0]
        bars = right.bar(xs, values, width * 0.95, color=colours[name], label=f"{name} ({tokens:.0f} tokens)")
        right.bar_label(bars, fmt="%.1f", fontsize=7, padding=2)
    right.set_xticks(range(len(CATEGORIES)), [f"{c} {n}" for c, n in CATEGORIES.items()])
    right.set_ylabel("evidence recall (%)")
    right.set_ylim(0, 115)  # headroom: the legend sits above the tallest bars, not on them
    right.set_yticks(range(0, 101, 20))
    right.set_title("Per category", fontsize=11, loc="left")
    right.legend(fontsize=8, loc="upper center", ncols=len(shown), frameon=False, columnspacing=1.0,
                 handlelength=1.2)
    right.grid(axis="y", alpha=0.3)

    ds = results.get("dataset", {})
    fig.suptitle(f"LoCoMo evidence recall: {len(ds.get('conversations') or [])} conversations, "
                 f"{ds.get('questions_scored', '?')} questions with evidence", fontsize=12, x=0.01, ha="left")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return write_atomic(path, buf.getvalue())


QA_COLOURS = ("#4c72b0", "#dd8452", "#8172b3", "#55a868", "#c44e52", "#937860", "#da8bc3")


def qa_chart(qa: dict[str, Any], path: str | Path, *, dpi: float = 150) -> Path:
    """Draw a ``qa.json`` to a PNG: official F1 per category with 95% intervals (left) and
    the 1-4 average against context tokens (right). Systems whose scores were withheld
    (failed calls) are left out and named in the title, never drawn as 0."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cats = [str(c) for c in qa["settings"]["categories"]]
    shown = {n: s for n, s in qa["systems"].items() if s.get("valid", True)}
    withheld = [n for n in qa["systems"] if n not in shown]
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2, width_ratios=(1.5, 1))
    width = 0.8 / max(1, len(shown))
    for i, (name, s) in enumerate(shown.items()):
        colour = QA_COLOURS[i % len(QA_COLOURS)]
        values, low, high = [], [], []
        for c in cats:
            block = s["categories"].get(c) or {}
            v = 100.0 * float(block.get("f1") or 0.0)
            ci = (block.get("ci") or {}).get("f1") or [v / 100.0, v / 100.0]
            values.append(v)
            low.append(v - 100.0 * ci[0])
            high.append(100.0 * ci[1] - v)
        xs = [j + (i - (len(shown) - 1) / 2) * width for j in range(len(cats))]
        left.bar(xs, values, width * 0.95, color=colour, label=name, yerr=[low, high], capsize=2,
                 error_kw={"elinewidth": 0.8, "ecolor": "#333333"})
        ov = s["overall"]
        v = 100.0 * float(ov.get("f1") or 0.0)
        ci = (ov.get("ci") or {}).get("f1") or [v / 100.0, v / 100.0]
        right.errorbar([float(ov.get("context_tokens_mean") or 0.0)], [v],
                       yerr=[[v - 100.0 * ci[0]], [100.0 * ci[1] - v]], fmt="o", color=colour, capsize=3,
                       ms=7, label=name)
    left.set_xticks(range(len(cats)), [f"{c} {CATEGORIES.get(c, 'adversarial')}" for c in cats])
    left.set_ylabel("LoCoMo official F1 (%)")
    left.set_title("Per category (95% bootstrap intervals)", fontsize=11, loc="left")
    if shown:
        left.legend(fontsize=7, loc="upper left", frameon=False)
    left.grid(axis="y", alpha=0.3)
    right.set_xlabel("mean context tokens (cl100k)")
    right.set_ylabel("average F1, categories 1-4 (%)")
    right.set_title("Average against context size", fontsize=11, loc="left")
    right.grid(alpha=0.3)
    n = qa["sample"]["n"]
    title = f"LoCoMo end-to-end QA: {n} questions, reader {qa.get('model')}"
    if withheld:
        title += f" (withheld, calls failed: {', '.join(withheld)})"
    fig.suptitle(title, fontsize=12, x=0.01, ha="left")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return write_atomic(path, buf.getvalue())
