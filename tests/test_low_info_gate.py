"""The low-information gate: phatic entries are not stored, a turn made only of them is
gated, and short replies that answer a question, or that carry a value, are kept."""

from __future__ import annotations

import numpy as np

from ariadnemem_core import Config, gating
from ariadnemem_core.models import Entry
from tests.conftest import turn


def covered(mem, user="default") -> set[str]:
    return {t for e in mem.entries(user) for t in e.source_turn_ids}


def test_phatic_turns_are_gated_and_counted(make_memory):
    mem = make_memory()
    mem.add([
        turn("Ana", "I started a pottery class at the community center last week.", 0, "a1"),
        turn("Ben", "Thanks so much!", 1, "b1"),
        turn("Ana", "Noted.", 2, "a2"),
        turn("Ben", "Good to hear.", 3, "b2"),
        turn("Ana", "Ben adopted a beagle named Max in March.", 4, "a3"),
    ])
    mem.flush()
    assert covered(mem) == {"a1", "a3"}
    s = mem.stats()
    assert s["gate_low_info"] == 3 and s["gate_low_info_entries"] == 3
    assert s["gate_dropped"] == 3 and s["gate_kept"] == 2


def test_assistant_courtesy_sentence_is_dropped_but_the_reply_kept(make_memory):
    mem = make_memory()
    mem.add([
        turn("user", "How should I structure the sprint for a team of five?", 0, "u1"),
        # Two hours later, so the redundancy gate (an hour's horizon) has no say.
        turn("assistant", "Split the sprint into two-week iterations with a planning meeting on Monday. "
             "Hope this helps! Let me know if you have any other questions.", 120, "a1"),
    ])
    mem.flush()
    texts = [e.text for e in mem.entries()]
    assert any("two-week iterations" in t for t in texts)
    assert not any("Hope this helps" in t or "other questions" in t for t in texts), texts
    s = mem.stats()
    assert s["gate_low_info"] == 0 and s["gate_low_info_entries"] >= 1


def test_short_answers_to_questions_are_kept(make_memory):
    """"I'm excited!" answering a question is evidence: its vector carries the question."""
    mem = make_memory()
    mem.add([
        turn("Gina", "How do you feel about the opening of your dance studio?", 0, "g1"),
        turn("Jon", "I'm so excited!", 1, "j1"),
        turn("Gina", "Have you been to Paris?", 2, "g2"),
        turn("Jon", "Yes, twice.", 3, "j2"),
    ])
    mem.flush()
    assert {"j1", "j2"} <= covered(mem)


def test_specific_values_are_never_low_information(minilm):
    cfg = Config()

    def entry(text: str, keywords: list[str]) -> Entry:
        return Entry(id=text, text=text, keywords=keywords, embedding=minilm.embed([text])[0])

    thanks = entry("Thanks!", [])
    dated = entry("Thanks for the 3 pm slot!", ["slot", "3pm"])
    code = entry("Thanks, `pip install x` worked!", ["pip", "install", "worked"])
    assert gating.low_information([thanks, dated, code], minilm, cfg) == [True, False, False]
    # Switched off, or with the gate off (ablation), nothing is low-information.
    assert gating.low_information([thanks], minilm, cfg.replace(enable_low_info_gate=False)) == [False]
    assert gating.low_information([thanks], minilm, cfg.ablate("gating")) == [False]
    # Its own ablation switches off this gate alone (``bench --ablate low_info_gate``).
    alone = cfg.ablate("low_info_gate")
    assert "low_info_gate" in Config.ABLATIONS and alone.enable_gating and not alone.enable_low_info_gate
    assert gating.low_information([thanks], minilm, alone) == [False]


def test_prototypes_are_embedded_once_per_embedder(minilm):
    first = gating.phatic_prototypes(minilm)
    assert gating.phatic_prototypes(minilm) is first
    assert first.shape == (len(gating.PHATIC_PROTOTYPES), minilm.dim)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-4)


def test_a_courtesy_joined_to_a_fact_keeps_the_fact(make_memory):
    mem = make_memory()
    mem.add([
        turn("Ana", "I started a pottery class at the community center last week.", 0, "a1"),
        turn("Ben", "Sure, sounds good, I'm diabetic.", 1, "b1"),
        turn("Ana", "Bye for now, I got the job!", 2, "a2"),
    ])
    mem.flush()
    assert covered(mem) == {"a1", "b1", "a2"}


def test_a_consent_that_answers_a_question_is_kept(make_memory):
    mem = make_memory()
    mem.add([
        turn("assistant", "Should I move your dentist appointment to Friday at 10?", 0, "a1"),
        turn("user", "Sure, sounds good.", 1, "u1"),
        turn("assistant", "Done. I've also booked a cleaning for March. Would you like a reminder?", 2, "a2"),
        # A longer reply: the answer is in its content, and the courtesy opening it is not.
        turn("user", "Thanks so much! Yes, the day before.", 3, "u2"),
    ])
    mem.flush()
    assert "u1" in covered(mem)
    said = [e.text for e in mem.entries() if "u2" in e.source_turn_ids]
    assert said and not any("Thanks" in t for t in said), said


def test_a_yes_or_no_beside_a_courtesy_is_kept(make_memory):
    mem = make_memory()
    mem.add([
        turn("assistant", "Have you ever been to Japan?", 0, "a1"),
        turn("user", "Lovely question, thanks. Never.", 1, "u1"),
    ])
    mem.flush()
    assert any("Never" in e.text for e in mem.entries() if "u1" in e.source_turn_ids)
