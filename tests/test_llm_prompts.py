"""No gold answer of the LoCoMo dev split may appear in any prompt template or system
prompt (module-level string constants) of the LLM extraction and synthesis modules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ariadnemem_core import synthesis
from ariadnemem_core.extraction import llm as llm_extraction

#: The abstention phrases the official LoCoMo scoring looks for (category 5). The answer
#: rules must name one, so it is not a leak of any question's answer.
ABSTENTIONS = {"not mentioned", "no information available", "unknown"}
LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo-dev.json"


def _gold_answers() -> list[str]:
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo dev split not found at {LOCOMO}")
    data = json.loads(LOCOMO.read_text())
    out: set[str] = set()
    for sample in data:
        for qa in sample.get("qa", []):
            for key in ("answer", "adversarial_answer"):
                value = qa.get(key)
                if value is None:
                    continue
                text = str(value).strip()
                # distinctive answers only: long enough and not a common English word
                if text.lower() in ABSTENTIONS:
                    continue
                if len(text) >= 4 and (len(text.split()) >= 2 or re.search(r"[0-9A-Z]", text)):
                    out.add(text)
    assert out, "no gold answers collected"
    return sorted(out)


def _prompt_constants() -> dict[str, str]:
    consts = {}
    for mod in (llm_extraction, synthesis):
        for name, value in vars(mod).items():
            if name.isupper() and isinstance(value, str):
                consts[f"{mod.__name__}.{name}"] = value
    assert "ariadnemem_core.extraction.llm.EXTRACTION_SYSTEM_PROMPT" in consts
    assert "ariadnemem_core.synthesis.SYNTHESIS_SYSTEM_PROMPT" in consts
    return consts


def _occurs(gold: str, prompt: str) -> bool:
    if len(gold.split()) >= 2:  # phrases: case-insensitive, on word boundaries
        return re.search(rf"(?<!\w){re.escape(gold.lower())}(?!\w)", prompt.lower()) is not None
    return re.search(rf"(?<!\w){re.escape(gold)}(?!\w)", prompt) is not None  # names, numbers: exact


def test_no_gold_answer_in_any_prompt() -> None:
    golds = _gold_answers()
    leaks = [(name, gold) for name, prompt in _prompt_constants().items() for gold in golds
             if _occurs(gold, prompt)]
    assert not leaks, f"gold answers found in prompts: {leaks[:10]}"


def test_leak_detector_detects() -> None:
    assert _occurs("7 May 2023", "answer like 7 may 2023 please")
    assert _occurs("Sweden", "moved to Sweden.")
    assert not _occurs("Sweden", "Swedens")
