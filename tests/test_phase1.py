"""Phase I rules: gating, coarsening (MERGE / LINK / ADD), provenance, persistence, bad input."""

from __future__ import annotations

import json
from datetime import datetime

import numpy as np
import pytest

from ariadnemem_core import Config, InvalidInputError, Turn
from ariadnemem_core.coarsening import keyword_overlap, terms
from tests.conftest import BOTH_BACKENDS, turn

pytestmark = BOTH_BACKENDS

DAY = 24 * 60


def covered(mem, user="default") -> set[str]:
    return {t for e in mem.entries(user) for t in e.source_turn_ids}


def test_short_term_repetition_is_dropped(make_memory):
    mem = make_memory()
    mem.add([turn("Ana", "The pottery class starts at the community center on Monday.", 0, "a1"),
             turn("Ana", "The pottery class starts at the community center on Monday.", 5, "a2")])
    mem.flush()
    s = mem.stats()
    assert s["gate_dropped"] == 1 and s["gate_kept"] == 1
    # No second memory; the repeat's turn joins the provenance of the one it repeats.
    assert covered(mem) == {"a1", "a2"} and len(mem.entries()) == 1


def test_long_term_recurrence_passes_the_gate(make_memory):
    mem = make_memory()
    mem.add([turn("Ana", "The pottery class starts at the community center on Monday.", 0, "a1"),
             turn("Ana", "The pottery class starts at the community center on Monday.", 3 * DAY, "a2")])
    mem.flush()
    s = mem.stats()
    assert s["gate_dropped"] == 0 and s["gate_kept"] == 2
    # Kept by the gate, then recognised by coarsening as the same fact: merged, not lost.
    assert covered(mem) == {"a1", "a2"}


def test_gate_respects_lambda_red_threshold(make_memory):
    # Unrelated turns a minute apart are novel: both kept.
    mem = make_memory()
    mem.add([turn("Ana", "I adopted a grey kitten from the shelter.", 0, "a1"),
             turn("Ben", "The stock market fell sharply after the announcement.", 1, "b1")])
    mem.flush()
    assert mem.stats()["gate_dropped"] == 0


def test_gating_can_be_switched_off(make_memory):
    mem = make_memory(config=Config().ablate("gating"))
    same = "The pottery class starts at the community center on Monday."
    mem.add([turn("Ana", same, 0, "a1"), turn("Ana", same, 5, "a2")])
    mem.flush()
    assert mem.stats().get("gate_dropped", 0) == 0
    assert covered(mem) == {"a1", "a2"}


def test_duplicate_is_merged_with_provenance_added(make_memory):
    mem = make_memory()
    mem.add([turn("Ana", "I adopted a grey kitten named Miso from the animal shelter.", 0, "a1"),
             turn("Ana", "I adopted a grey kitten named Miso from the shelter!", 2 * DAY, "a2")])
    mem.flush()
    entries = mem.entries()
    assert len(entries) == 1
    (e,) = entries
    assert e.source_turn_ids == ["a1", "a2"]
    assert e.timestamp == turn("x", "x", 2 * DAY).timestamp  # refreshed
    assert e.first_timestamp == turn("x", "x", 0).timestamp
    assert mem.stats()["merge"] == 1


def test_state_update_is_linked_and_persisted(make_memory, tmp_path):
    mem = make_memory("s")
    mem.add([turn("Leo", "The team meeting is at 2 pm on Friday.", 0, "m1"),
             turn("Leo", "The team meeting moved to 3 pm on Friday.", 2 * 60, "m2")])
    mem.flush()
    edges = mem.edges()
    assert len(edges) == 1 and mem.stats()["link"] == 1
    by_turn = {e.source_turn_ids[0]: e for e in mem.entries()}
    assert (edges[0].src, edges[0].dst) == (by_turn["m1"].id, by_turn["m2"].id)
    mem.close()
    again = make_memory("s")
    assert [(e.src, e.dst) for e in again.edges()] == [(by_turn["m1"].id, by_turn["m2"].id)]
    chain = again.history(by_turn["m1"].id)
    assert [e.id for e in chain] == [by_turn["m1"].id, by_turn["m2"].id]
    assert [e.id for e in again.history(by_turn["m2"].id)] == [by_turn["m1"].id, by_turn["m2"].id]


def test_overlap_threshold_separates_merge_from_link():
    from ariadnemem_core.models import Entry

    a = Entry("a", "x", keywords=["team", "meeting", "2pm", "friday"], persons=["Leo"])
    b = Entry("b", "x", keywords=["team", "meeting", "moved", "3pm", "friday"], persons=["Leo"])
    c = Entry("c", "x", keywords=["team", "meeting", "2pm", "friday", "office"], persons=["Leo"])
    assert keyword_overlap(terms(a), terms(b)) <= Config().lambda_ovlp < keyword_overlap(terms(a), terms(c))


def test_unrelated_facts_are_added(make_memory):
    mem = make_memory()
    mem.add([turn("Ana", "I adopted a grey kitten from the shelter.", 0, "a1"),
             turn("Ben", "My brother is studying marine biology in Lisbon.", 90, "b1"),
             turn("Ana", "We repainted the kitchen a pale yellow last weekend.", 200, "a2")])
    mem.flush()
    s = mem.stats()
    assert s["add"] == 3 and s.get("merge", 0) == 0 and s.get("link", 0) == 0
    assert len(mem.entries()) == 3


def test_different_people_are_not_conflated(make_memory):
    mem = make_memory()
    mem.add([turn("Ana", "I love painting sunsets at the beach.", 0, "a1"),
             turn("Ben", "I love painting sunsets at the beach.", 3 * DAY, "b1")])
    mem.flush()
    assert covered(mem) == {"a1", "b1"}
    assert len(mem.entries()) == 2 and not mem.edges()


def test_pronouns_and_relative_time_are_grounded(make_memory):
    mem = make_memory()
    mem.add([turn("Caroline", "Hi Melanie!", 0, "c0"),
             turn("Melanie", "I went to the lake with my kids yesterday.", 1, "m1")])
    mem.flush()
    e = next(x for x in mem.entries() if x.source_turn_ids == ["m1"])
    assert "Melanie" in e.text and "2023-05-07" in e.text
    assert "I went" not in e.text


def test_partial_window_waits_for_flush_and_is_durable(make_memory):
    mem = make_memory("p")
    mem.add([turn("Ana", f"Fact number {i} about the garden and the tomatoes {i}.", i * 90, f"t{i}")
             for i in range(5)])
    assert mem.stats()["pending_turns"] == 5 and mem.entries() == []
    mem.close(flush=False)  # as after a crash: the partial window was never extracted
    again = make_memory("p")
    assert again.stats()["pending_turns"] == 5
    again.flush()
    assert covered(again) == {f"t{i}" for i in range(5)}
    assert again.stats()["pending_turns"] == 0


def test_full_windows_are_extracted_on_add(make_memory):
    mem = make_memory(config=Config(window_size=4))
    mem.add([turn("Ana", f"Item {i}: I planted {i} rows of {w}.", i * 120, f"t{i}")
             for i, w in enumerate(["beans", "corn", "peas", "kale", "leeks", "chard"])])
    assert mem.stats()["pending_turns"] == 2
    assert covered(mem) == {"t0", "t1", "t2", "t3"}


def test_reopen_gives_back_the_same_memory(make_memory):
    mem = make_memory("r")
    mem.add([turn("Ana", "The team meeting is at 2 pm on Friday.", 0, "m1"),
             turn("Ben", "My sister Ana moved to Porto in 2021.", 60, "b1"),
             turn("Ana", "The team meeting moved to 3 pm on Friday.", 120, "m2"),
             turn("Ben", "I went hiking in the Alps last summer.", 3 * DAY, "b2")])
    mem.flush()
    before = [e.to_dict(with_embedding=True) for e in mem.entries()]
    edges = [(e.src, e.dst, e.kind) for e in mem.edges()]
    stats = mem.stats()
    text = mem.retrieve("When is the team meeting?").to_text()
    mem.close()
    again = make_memory("r")
    assert [e.to_dict(with_embedding=True) for e in again.entries()] == before
    assert [(e.src, e.dst, e.kind) for e in again.edges()] == edges
    assert again.stats() == stats
    assert again.retrieve("When is the team meeting?").to_text() == text


def test_turns_without_timestamps_are_accepted(make_memory):
    mem = make_memory()
    mem.add([Turn("Ana", "I like green tea."), Turn("Ben", "I prefer black coffee.")])
    mem.flush()
    es = mem.entries()
    assert len(es) == 2 and all(e.timestamp is None for e in es)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"speaker": "Ana", "text": "   "}, "text"),
        ({"speaker": "", "text": "hello"}, "speaker"),
        ({"text": "hello"}, "speaker"),
        ({"speaker": "Ana", "text": "hi", "timestamp": "yesterday"}, "timestamp"),
        ({"speaker": "Ana", "text": "hi", "when": 3}, "turn"),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(make_memory, bad, field):
    mem = make_memory()
    mem.add(turn("Ana", "I adopted a grey kitten from the shelter.", 0, "ok"))
    mem.flush()
    before = mem.stats()
    good = {"speaker": "Ben", "text": "A valid turn that must not be stored either."}
    with pytest.raises(InvalidInputError) as info:
        mem.add([good, bad])
    assert field in str(info.value)
    assert mem.stats() == before


def test_embeddings_are_stored_normalized(make_memory):
    mem = make_memory()
    mem.add(turn("Ana", "I adopted a grey kitten from the shelter.", 0))
    mem.flush()
    (e,) = mem.entries()
    assert e.embedding.shape == (384,) and abs(float(np.linalg.norm(e.embedding)) - 1) < 1e-4


def test_naive_timestamps_are_read_as_utc():
    t = Turn("Ana", "hi", datetime(2023, 1, 1, 12, 0))
    assert t.timestamp.utcoffset().total_seconds() == 0


def test_config_documents_paper_defaults_and_validates():
    """``Config.paper()`` restores every threshold we depart from; bad values and names fail clearly."""
    from ariadnemem_core.errors import ConfigError

    paper, ours = Config.paper(), Config()
    assert (paper.lambda_red, paper.lambda_coal, paper.k_sem, paper.k_lex) == (0.6, 0.7, 20, 5)
    assert not paper.context_embedding and not paper.link_requires_value_change
    assert (ours.k_sem, ours.k_lex) != (paper.k_sem, paper.k_lex)
    assert Config.paper(k_sem=7).k_sem == 7
    with pytest.raises(ConfigError):
        Config(k_sem=0)
    with pytest.raises(ConfigError, match="message_context"):
        Config(message_context=-1)
    with pytest.raises(ConfigError, match="message_context"):
        Config(message_context_max_tokens=0)
    with pytest.raises(ConfigError):
        Config().ablate("nonsense")
    with pytest.raises(ConfigError):
        Config.from_dict({"k_semm": 3})


@pytest.mark.parametrize("field, value, said", [
    ("window_size", 2.5, "whole number"), ("k_lex", 2.5, "whole number"), ("max_paths", float("nan"), "whole number"),
    ("window_size", "20", "whole number"), ("token_budget", float("inf"), "whole number or None"),
    ("lexical_weight", float("nan"), "NaN"), ("lexical_weight", -5, "negative"),
    ("max_bridge_pairs", -1, "negative"),
    ("enable_gating", "no", "True or False"), ("assistant_speakers", "assistant", "list of strings"),
    ("k_sem", True, "whole number")])
def test_config_refuses_values_of_the_wrong_kind(field: str, value: object, said: str) -> None:
    """A count must be a whole number, a weight finite and not negative, a switch a bool and
    the speakers a list: accepted, 2.5 candidates or a NaN path count crashed retrieval with
    another library's error, a fractional window left every turn pending, ``"no"`` switched
    gating on and ``"assistant"`` became its letters."""
    from ariadnemem_core.errors import ConfigError

    with pytest.raises(ConfigError, match=said) as info:
        Config(**{field: value})
    assert field in str(info.value)
    with pytest.raises(ConfigError, match=field):
        Config.from_dict({field: value})
    assert Config(assistant_speakers=["bot"]).assistant_speakers == ("bot",) and Config(token_budget=None)


def test_config_takes_numpy_numbers_and_whole_floats_as_plain_values() -> None:
    """A sweep over ``np.arange`` or a count read as 20.0 is taken, stored as the plain
    Python value (``to_dict`` stays JSON); an infinite time horizon is a horizon."""
    import numpy as np

    cfg = Config(k_sem=np.int64(40), lambda_coal=np.float32(0.5), enable_bridges=np.False_, window_size=20.0,
                 assistant_speakers={"bot"}, delta_time_s=float("inf"))
    assert (cfg.k_sem, cfg.lambda_coal, cfg.enable_bridges, cfg.window_size, cfg.assistant_speakers) == \
        (40, 0.5, False, 20, ("bot",))
    assert [type(v) for v in (cfg.k_sem, cfg.lambda_coal, cfg.enable_bridges, cfg.window_size)] == \
        [int, float, bool, int]
    assert json.loads(json.dumps(cfg.to_dict()))["k_sem"] == 40 and cfg.delta_time_s == float("inf")


def test_link_needs_a_changed_value_paraphrase_is_added():
    """Similar small talk is not a state update (ADD); a changed time, place or date is (LINK)."""
    from ariadnemem_core.coarsening import Action, decide, value_terms
    from ariadnemem_core.models import Entry

    cfg = Config()
    old = Entry("o", "Melanie, that's a great pic!", keywords=["great", "pic"], persons=["Melanie"],
                speaker="Caroline")
    para = Entry("p", "Melanie, that photo's amazing!", keywords=["photo", "amazing"], persons=["Melanie"],
                 speaker="Caroline")
    assert decide(para, [(old, 0.9)], cfg).action == Action.ADD
    assert decide(para, [(old, 0.9)], Config.paper()).action == Action.LINK  # the paper's rule

    two = Entry("a", "The team meeting is at 2 pm on Friday.", keywords=["team", "meeting", "friday"])
    three = Entry("b", "The team meeting moved to 3 pm on Friday.", keywords=["meeting", "moved", "friday"])
    assert value_terms(two) == {"2", "friday"} and value_terms(three) == {"3", "friday"}
    d = decide(three, [(two, 0.9)], cfg)
    assert (d.action, d.target_id) == (Action.LINK, "a")

    boston = Entry("c", "Ana lives in Boston.", keywords=["lives"], persons=["Ana"], location="Boston")
    denver = Entry("d", "Ana lives in Denver now.", keywords=["lives", "now"], persons=["Ana"], location="Denver")
    assert "ana" not in value_terms(boston)  # who it is about is not a value
    assert decide(denver, [(boston, 0.9)], cfg).action == Action.LINK


def test_question_context_is_the_other_speakers_last_question():
    from ariadnemem_core.extraction import question_context

    turns = [turn("Nate", "Congrats! What genre is it? Is it long?", 0),
             turn("Joanna", "Thanks! It's a mix of drama and romance!", 1),
             turn("Joanna", "Do you like romance?", 2),          # same speaker as before: no context
             turn("Nate", "Not really. I like thrillers.", 3),    # answers Joanna's question
             turn("Joanna", "Fair enough.", 4)]                   # Nate asked nothing
    assert question_context(turns) == [None, "Is it long?", None, "Do you like romance?", None]
    before = turn("Joanna", "Did you finish the game?", -1)
    assert question_context(turns[:1], before)[0] == "Did you finish the game?"


class _RecordingEmbedder:
    """HashEmbedder that remembers every text it embedded."""

    def __init__(self) -> None:
        from ariadnemem_core import HashEmbedder

        self._inner = HashEmbedder()
        self.dim, self.name, self.seen = self._inner.dim, self._inner.name, []

    def embed(self, texts):
        self.seen.extend(texts)
        return self._inner.embed(texts)


@pytest.mark.parametrize("on", [True, False])
def test_reply_is_embedded_with_the_question_it_answers(make_memory, on):
    """The vector of a reply sees the question (so "What genre ...?" finds "It's a mix of
    drama and romance"); the stored text stays what was said."""
    emb = _RecordingEmbedder()
    mem = make_memory(config=Config(context_embedding=on), embedder=emb)
    mem.add([turn("Nate", "What genre is your first screenplay?", 0, "D1:1"),
             turn("Joanna", "It's a mix of drama and romance!", 1, "D1:2")])
    mem.flush()
    reply = next(e for e in mem.entries() if "D1:2" in e.source_turn_ids)
    assert "genre" not in reply.text.lower()
    contextual = [t for t in emb.seen if "genre" in t and "romance" in t]
    assert bool(contextual) is on
    expected = emb._inner.embed([contextual[0] if on else reply.text])[0]
    assert np.allclose(reply.embedding, expected / np.linalg.norm(expected), atol=1e-5)
