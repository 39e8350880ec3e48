"""The update suite: does the memory link a changed fact old -> new, and only then?

Reads hand-written dialogues (``tests/data/update_dialogues.json``): *update* dialogues
name the turn(s) stating an old value, the turn(s) stating the new one, a question and the
latest value; *negative* dialogues hold look-alike facts that are both true (two meetings,
two people's phone numbers). Each dialogue is its own user of one ephemeral memory.

Three shares are measured:

* ``linked``: update dialogues with an :class:`~ariadnemem_core.models.UpdateEdge` from an
  entry of an old turn to an entry of a new turn;
* ``negatives_clean``: negative dialogues with no update edge at all;
* ``latest_answered``: update dialogues whose offline extractive answer
  (``mem.answer(question)`` with no LLM) contains the latest value.

Dialogues may carry more (the validation suite does): an update's ``question_original``
and ``original`` (the older state: ``original_answered`` counts answers that contain it
and not the latest value), and a negative's ``question`` and ``latest`` (the look-alike
left standing: ``negatives_answered``). ``false_links`` counts every update edge that
does not run from an old turn to a new one, in all dialogues.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from ..config import Config
from ..memory import AriadneMemory
from ..models import Entry, Turn, UpdateEdge
from ..synthesis import synthesize

#: The suite shipped with the tests (read from the repository, never copied).
DEFAULT_SUITE = Path(__file__).resolve().parents[2] / "tests" / "data" / "update_dialogues.json"


def load_suite(path: str | Path = DEFAULT_SUITE) -> list[dict[str, Any]]:
    """The dialogues of a suite file (a JSON list; see the module docstring)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of dialogues")
    return data


def dialogue_turns(dialogue: dict[str, Any]) -> list[Turn]:
    """The dialogue's turns with ids ``<dialogue id>#<index>``."""
    return [Turn(t["speaker"], t["text"], datetime.fromisoformat(t["timestamp"]), f"{dialogue['id']}#{i}")
            for i, t in enumerate(dialogue["turns"])]


def _norm(text: str) -> str:
    return re.sub(r"[\s,]+", " ", text.lower()).strip()


def _between(src_turns: list[str], dst_turns: list[str], user: str, dialogue: dict[str, Any]) -> bool:
    """Whether an edge runs within the change: from a turn stating the old value, or the
    reply to it, to a turn stating the new one or its confirmation (the assistant's echo of
    an old or new turn is the same state)."""
    def index(turns: list[str]) -> set[int]:
        return {int(t.rpartition("#")[2]) for t in turns if t.startswith(f"{user}#")}
    first_new = min(dialogue["new"])
    return bool(index(src_turns)) and max(index(src_turns)) < first_new \
        and any(i >= first_new for i in index(dst_turns))


def run_update_suite(dialogues: list[dict[str, Any]] | None = None, *, config: Config | None = None,
                     embedder: Any = None, llm: Any = None, extractor: Any = None) -> dict[str, Any]:
    """Run every dialogue through a fresh ephemeral memory; returns the three shares
    (percentages), the counts, and per-dialogue outcomes (``failures`` lists what missed).

    Args:
        dialogues: the suite (default: :data:`DEFAULT_SUITE`).
        config: the memory's ``Config`` (default: the library defaults).
        embedder: an embedder to share across runs (default: MiniLM).
        llm: an LLM client for extraction and answers (default: none, offline).
        extractor: an extractor (default: the memory's rule extractor).

    Returns:
        ``{"linked", "negatives_clean", "latest_answered"}`` in percent, plus
        ``"n_updates"``, ``"n_negatives"``, ``"links"`` (LINKs made per dialogue) and
        ``"failures"`` (``{dialogue id: [what failed, ...]}``).
    """
    dialogues = dialogues if dialogues is not None else load_suite()
    kwargs: dict[str, Any] = {"embedder": embedder, "extractor": extractor}
    mem = AriadneMemory(None, config, llm=llm, **{k: v for k, v in kwargs.items() if v is not None})
    n: Counter[str] = Counter()
    failures: dict[str, list[str]] = {}
    links: dict[str, int] = {}
    with mem:
        for d in dialogues:
            user = d["id"]
            mem.add(dialogue_turns(d), user_id=user)
            mem.flush()
            entries = {e.id: e for e in mem.entries(user)}
            edges = [e for e in mem.edges(user) if e.kind == "update"]
            links[user] = len(edges)

            def ask(question: str, user: str = user) -> str:
                # ``llm`` itself, not the environment's: offline answers when it is None.
                return synthesize(question, mem.retrieve(question, user_id=user), llm).text

            score = _score_negative if d["kind"] == "negative" else _score_update
            missed = score(d, entries, edges, ask, n)
            if missed:
                failures[user] = missed
    return {
        "linked": 100.0 * n["linked"] / max(n["n_up"], 1),
        "negatives_clean": 100.0 * n["clean"] / max(n["n_neg"], 1),
        "latest_answered": 100.0 * n["latest"] / max(n["n_up"], 1),
        "false_links": n["false_links"],
        "original_answered": 100.0 * n["original"] / n["n_original"] if n["n_original"] else None,
        "negatives_answered": 100.0 * n["neg_answered"] / n["n_neg_questions"] if n["n_neg_questions"] else None,
        "n_updates": n["n_up"],
        "n_negatives": n["n_neg"],
        "links": links,
        "failures": failures,
    }


def _edge_text(edge: UpdateEdge, entries: dict[str, Entry]) -> str:
    return f"false update: {entries[edge.src].text!r} -> {entries[edge.dst].text!r}"


def _score_negative(d: dict[str, Any], entries: dict[str, Entry], edges: list[UpdateEdge],
                    ask: Callable[[str], str], n: Counter[str]) -> list[str]:
    """Count a negative dialogue (no update edge expected); returns what missed."""
    n["n_neg"] += 1
    n["false_links"] += len(edges)
    missed = [_edge_text(e, entries) for e in edges if e.src in entries and e.dst in entries]
    n["clean"] += not edges
    if d.get("question"):
        n["n_neg_questions"] += 1
        answer = ask(d["question"])
        if _norm(d["latest"]) in _norm(answer):
            n["neg_answered"] += 1
        else:
            missed.append(f"answer: {answer!r}")
    return missed


def _score_update(d: dict[str, Any], entries: dict[str, Entry], edges: list[UpdateEdge],
                  ask: Callable[[str], str], n: Counter[str]) -> list[str]:
    """Count an update dialogue (an edge old -> new, the latest value answered); returns what missed."""
    user = d["id"]
    n["n_up"] += 1
    old = {f"{user}#{i}" for i in d["old"]}
    new = {f"{user}#{i}" for i in d["new"]}
    right = [e for e in edges if e.src in entries and e.dst in entries
             and set(entries[e.src].source_turn_ids) & old and set(entries[e.dst].source_turn_ids) & new]
    missed: list[str] = []
    for e in edges:
        if e not in right and e.src in entries and e.dst in entries \
                and not _between(entries[e.src].source_turn_ids, entries[e.dst].source_turn_ids, user, d):
            n["false_links"] += 1
            missed.append(_edge_text(e, entries))
    if right:
        n["linked"] += 1
    else:
        missed.append("not linked")
    answer = ask(d["question"])
    if _norm(d["latest"]) in _norm(answer):
        n["latest"] += 1
    else:
        missed.append(f"answer: {answer!r}")
    if d.get("question_original"):
        n["n_original"] += 1
        answer = ask(d["question_original"])
        if _norm(d["original"]) in _norm(answer) and _norm(d["latest"]) not in _norm(answer):
            n["original"] += 1
        else:
            missed.append(f"original: {answer!r}")
    return missed


#: The suites shipped with the tests: the one the rules were written with, the held-out one
#: (written before the rules were last tuned) and the frozen validation one (user-assistant
#: phrasing, written and frozen before the detector's attribute rules; never tuned on).
SUITES = {
    "suite": DEFAULT_SUITE,
    "held-out": DEFAULT_SUITE.with_name("update_dialogues_heldout.json"),
    "validation": DEFAULT_SUITE.with_name("update_dialogues_validation.json"),
}
_SHARES = ("linked", "negatives_clean", "latest_answered", "original_answered", "negatives_answered")


def updates_markdown(results: dict[str, dict[str, Any]], command: str) -> str:
    """The suites' figures as a markdown table (one row per suite)."""
    lines = ["# State updates: linked, false links, answered", "",
             "Offline (rule extraction, extractive answers), one fresh memory per dialogue. Linked: changes "
             "with an update edge old -> new; false links: update edges that do not run from an old turn to "
             "a new one; answered: the offline answer states the latest value (the original one for "
             "\"originally\" questions, the look-alike's own value for negatives).", "",
             "| suite | changes | look-alikes | linked % | false links | negatives clean % | latest answered % "
             "| original answered % | look-alike answered % |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in results.items():
        cells = ["-" if r.get(k) is None else f"{r[k]:.1f}" for k in _SHARES]
        lines.append(f"| {name} | {r['n_updates']} | {r['n_negatives']} | {cells[0]} | {r['false_links']} | "
                     f"{cells[1]} | {cells[2]} | {cells[3]} | {cells[4]} |")
    lines += ["", f"Command: `{command}`", ""]
    return "\n".join(lines)


def main(out_dir: str | Path = Path("bench-results") / "updates") -> dict[str, dict[str, Any]]:
    """Run every shipped suite offline and write ``results.json`` / ``results.md``."""
    from ..embedding import MiniLMEmbedder
    from .report import write_json

    embedder = MiniLMEmbedder()
    results = {name: run_update_suite(load_suite(path), embedder=embedder) for name, path in SUITES.items()}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", results)
    (out / "results.md").write_text(updates_markdown(results, "python -m ariadnemem_core.bench.updates"),
                                    encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
