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
from datetime import datetime
from pathlib import Path
from typing import Any

from ..config import Config
from ..memory import AriadneMemory
from ..models import Turn

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
    if llm is None:
        mem._llm_checked = True  # offline answers even if the environment names an LLM
    linked = clean = latest = n_up = n_neg = false_links = 0
    original = n_original = neg_answered = n_neg_questions = 0
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
            missed: list[str] = []
            if d["kind"] == "negative":
                n_neg += 1
                false_links += len(edges)
                missed += [f"false update: {entries[e.src].text!r} -> {entries[e.dst].text!r}"
                           for e in edges if e.src in entries and e.dst in entries]
                clean += not edges
                if d.get("question"):
                    n_neg_questions += 1
                    answer = mem.answer(d["question"], user_id=user)
                    if _norm(d["latest"]) in _norm(answer.text):
                        neg_answered += 1
                    else:
                        missed.append(f"answer: {answer.text!r}")
                if missed:
                    failures[user] = missed
                continue
            n_up += 1
            old = {f"{user}#{i}" for i in d["old"]}
            new = {f"{user}#{i}" for i in d["new"]}
            right = [e for e in edges if e.src in entries and e.dst in entries
                     and set(entries[e.src].source_turn_ids) & old and set(entries[e.dst].source_turn_ids) & new]
            for e in edges:
                if e not in right and e.src in entries and e.dst in entries \
                        and not _between(entries[e.src].source_turn_ids, entries[e.dst].source_turn_ids, user, d):
                    false_links += 1
                    missed.append(f"false update: {entries[e.src].text!r} -> {entries[e.dst].text!r}")
            if right:
                linked += 1
            else:
                missed.append("not linked")
            answer = mem.answer(d["question"], user_id=user)
            if _norm(d["latest"]) in _norm(answer.text):
                latest += 1
            else:
                missed.append(f"answer: {answer.text!r}")
            if d.get("question_original"):
                n_original += 1
                answer = mem.answer(d["question_original"], user_id=user)
                if _norm(d["original"]) in _norm(answer.text) and _norm(d["latest"]) not in _norm(answer.text):
                    original += 1
                else:
                    missed.append(f"original: {answer.text!r}")
            if missed:
                failures[user] = missed
    return {
        "linked": 100.0 * linked / max(n_up, 1),
        "negatives_clean": 100.0 * clean / max(n_neg, 1),
        "latest_answered": 100.0 * latest / max(n_up, 1),
        "false_links": false_links,
        "original_answered": 100.0 * original / n_original if n_original else None,
        "negatives_answered": 100.0 * neg_answered / n_neg_questions if n_neg_questions else None,
        "n_updates": n_up,
        "n_negatives": n_neg,
        "links": links,
        "failures": failures,
    }
