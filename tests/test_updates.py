"""State updates: a changed fact is linked old -> new however it is phrased, two facts that
can both be true never are, and the latest state is what the memory answers with."""

from __future__ import annotations

import pytest

from ariadnemem_core import Config
from ariadnemem_core.bench.updates import load_suite, run_update_suite
from ariadnemem_core.coarsening import Action, changed_types, co_true, decide
from ariadnemem_core.models import Entry

#: What the offline (rule) detector reaches on the shipped suite; the issue's targets are
#: 90 / 95 / 90. Raising these floors is the point; lowering them needs a reason.
MIN_LINKED = 72.0
MIN_NEGATIVES_CLEAN = 100.0
MIN_LATEST = 78.0


def _e(eid: str, text: str, *, speaker: str | None = None, persons: tuple[str, ...] = (),
       turn: str | None = None, entities: tuple[str, ...] = ()) -> Entry:
    from ariadnemem_core import text as g

    return Entry(eid, text, keywords=g.keywords(text), persons=list(persons), entities=list(entities),
                 speaker=speaker, source_turn_ids=[turn or f"t-{eid}"])


def test_suite_shape() -> None:
    suite = load_suite()
    updates = [d for d in suite if d["kind"] == "update"]
    negatives = [d for d in suite if d["kind"] == "negative"]
    assert len(updates) >= 40 and len(negatives) >= 20
    assert len({d["id"] for d in suite}) == len(suite)
    for d in updates:
        n = len(d["turns"])
        assert all(0 <= i < n for i in [*d["old"], *d["new"]]) and max(d["old"]) < min(d["new"])
        assert d["question"].endswith("?") and d["latest"]
        assert any(d["latest"].lower().replace(",", "") in d["turns"][i]["text"].lower().replace(",", "")
                   for i in d["new"]), d["id"]  # the latest value is stated in a new turn
    speakers = {t["speaker"] for d in suite for t in d["turns"]}
    assert {"user", "assistant"} <= speakers and len(speakers) > 10  # both kinds of dialogue


def test_update_suite_meets_its_floors(minilm) -> None:
    result = run_update_suite(embedder=minilm)
    assert result["n_updates"] >= 40 and result["n_negatives"] >= 20
    summary = {k: round(result[k], 1) for k in ("linked", "negatives_clean", "latest_answered")}
    assert result["negatives_clean"] >= MIN_NEGATIVES_CLEAN, (summary, result["failures"])
    assert result["linked"] >= MIN_LINKED, (summary, result["failures"])
    assert result["latest_answered"] >= MIN_LATEST, (summary, result["failures"])


@pytest.mark.parametrize(("old", "new", "why"), [
    (_e("a", "Kim: The blue jacket costs $80.", speaker="Kim"),
     _e("b", "Kim: The black jacket is $120.", speaker="Kim"), "different jacket"),
    (_e("a", "user's birthday is April 3.", speaker="user", persons=("user",)),
     _e("b", "user's sister Nadia's birthday is July 19.", speaker="user", persons=("user", "Nadia")),
     "different"),
    (_e("a", "Quinn's husband works at Boeing.", speaker="Quinn", persons=("Quinn",), entities=("Boeing",)),
     _e("b", "Quinn works at the city library.", speaker="Quinn", persons=("Quinn",)), "relatives"),
    (_e("a", "user usually runs 5 km in the morning.", speaker="user"),
     _e("b", "Today user ran 12 km for the charity race!", speaker="user"), "habit and one-off"),
    (_e("a", "user takes 20 mg of atorvastatin at night.", speaker="user"),
     _e("b", "user: And 500 mg of metformin twice a day.", speaker="user"), "of atorvastatin"),
    (_e("a", "The meeting is at 2 pm.", speaker="Leo"),
     _e("b", "Is the meeting still at 3 pm?", speaker="Maya"), "question"),
])
def test_co_true_pairs_are_recognised(old: Entry, new: Entry, why: str) -> None:
    reason = co_true(old, new)
    assert reason is not None and why in reason
    assert decide(new, [(old, 0.8)], Config()).action is not Action.LINK


def test_changed_types_compare_like_with_like() -> None:
    two = _e("a", "The kickoff meeting is at 2 pm on Friday.")
    three = _e("b", "The kickoff meeting moved to 3 pm.")
    assert changed_types(two, three) == ["time"]  # the day it does not repeat is unchanged
    assert changed_types(_e("c", "Rent is $1,450 a month."), _e("d", "Rent is $1,600 a month now.")) == ["money"]
    assert changed_types(_e("e", "Call 555-0199."), _e("f", "Use 555-0733 from now on.")) == ["phone"]
    assert changed_types(two, _e("g", "The kickoff meeting is at 2 pm.")) == []  # a subset restates


def test_rephrased_update_links_below_the_merge_threshold() -> None:
    """A restated fact with a changed value is usually 0.5-0.8 cosine with MiniLM: it is
    linked by slot, value and wording, not by a near-duplicate similarity."""
    old = _e("a", "The book club meets Thursday at 7 pm at Nina's place.", speaker="Nina", turn="t1")
    new = _e("b", "Nina: Small change for book club: we start at 6:30 now, same day.", speaker="Nina", turn="t2")
    d = decide(new, [(old, 0.71)], Config())
    assert (d.action, d.target_id) == (Action.LINK, "a")
    # the same pair within one turn is not an update of itself
    same_turn = _e("c", "Nina: we start at 6:30 now.", speaker="Nina", turn="t1")
    assert decide(same_turn, [(old, 0.71)], Config()).action is Action.ADD
    # several values changed at once without a word of change: another event of that kind
    one = _e("d", "user: Sprint planning on March 4 is at 10 am.", speaker="user", turn="t3")
    other = _e("e", "user: Sprint planning on March 18 is at 2 pm.", speaker="user", turn="t4")
    assert decide(other, [(one, 0.8)], Config()).action is Action.ADD


def test_link_floor_is_a_knob() -> None:
    old = _e("a", "Lily's party is on Saturday the 15th.", speaker="Dan", turn="t1")
    new = _e("b", "Lily's party got moved to Sunday the 16th.", speaker="Dan", turn="t2")
    assert decide(new, [(old, 0.6)], Config()).action is Action.LINK
    assert decide(new, [(old, 0.6)], Config(lambda_link=0.7)).action is Action.ADD


def test_superseded_entry_records_validity_everywhere(make_memory, tmp_path) -> None:
    """The older state knows what replaced it and when: in entries(), history(), get(), the
    export (and back after import), and it becomes current again if the newer one is deleted."""
    from datetime import datetime

    from ariadnemem_core import Turn

    mem = make_memory("bt")
    mem.add([Turn("Priya", "Jonas and I are moving to Berlin in the spring!", datetime(2024, 1, 10, 12), "t0"),
             Turn("Mateo", "Berlin is amazing, congrats.", datetime(2024, 1, 10, 12, 1), "t1"),
             Turn("Priya", "Plot twist: we're moving to Munich instead, Jonas got a job there.",
                  datetime(2024, 2, 20, 9), "t2")], user_id="u")
    mem.flush()
    by_turn = {e.source_turn_ids[0]: e for e in mem.entries("u")}
    old, new = by_turn["t0"], by_turn["t2"]
    assert old.superseded_by == new.id and old.valid_until == datetime(2024, 2, 20, 9, tzinfo=old.valid_until.tzinfo)
    assert new.superseded_by is None and new.valid_until is None
    assert [e.id for e in mem.history(new.id, user_id="u")] == [old.id, new.id]
    assert mem.get(old.id, user_id="u").superseded_by == new.id
    # the latest state answers; an earlier time gets the older state
    assert "Munich" in mem.answer("Where are Jonas and Priya moving?", user_id="u").text
    assert "Berlin" in mem.answer("Where did Priya plan to move in January?", user_id="u").text
    graph = mem.retrieve("Where are Jonas and Priya moving?", user_id="u")
    if graph.fact(old.id):  # shown with its marker when it is in the graph
        assert "(superseded by" in graph.to_text()
    path = tmp_path / "x.jsonl"
    mem.export(path, user_id="u")
    other = make_memory("other")
    other.import_(path)
    again = {e.id: e for e in other.entries("u")}
    assert again[old.id].superseded_by == new.id and again[old.id].valid_until == old.valid_until
    mem.delete(new.id, user_id="u")
    assert mem.get(old.id, user_id="u").superseded_by is None  # the older state is current again


def test_llm_states_decide_updates_when_configured(server) -> None:
    """With the LLM extractor, each entry may carry a normalized (subject, attribute,
    value); two states of one slot with different values are linked even when the words
    share nothing the rules could use, and two different subjects never are."""
    import json
    from datetime import datetime

    from fake_openai_server import fake_client

    from ariadnemem_core import AriadneMemory, HashEmbedder, Turn
    from ariadnemem_core.extraction.llm import LLMExtractor, validate_output

    turns = [Turn("Amira", "I live in Austin, near the university.", datetime(2024, 2, 1, 19), "a1"),
             Turn("Jake", "My number is 555-0101.", datetime(2024, 2, 1, 19, 1), "a2"),
             Turn("Amira", "Mine is 555-0202.", datetime(2024, 2, 1, 19, 2), "a3"),
             Turn("Amira", "The heat got to me, so I packed up for Portland.", datetime(2024, 8, 20, 9), "a4")]
    entries = [
        {"text": "Amira lives in Austin, near the university.", "source_turn_ids": ["T1"],
         "state": {"subject": "Amira", "attribute": "home city", "value": "Austin"}},
        {"text": "Jake's phone number is 555-0101.", "source_turn_ids": ["T2"],
         "state": {"subject": "Jake", "attribute": "phone number", "value": "555-0101"}},
        {"text": "Amira's phone number is 555-0202.", "source_turn_ids": ["T3"],
         "state": {"subject": "Amira", "attribute": "phone number", "value": "555-0202"}},
        {"text": "Amira packed up for Portland because of the heat.", "source_turn_ids": ["T4"],
         "state": {"subject": "amira", "attribute": "the home city", "value": "Portland"}},
    ]
    server.queue(lambda body: (200, json.dumps({"entries": entries})))
    with AriadneMemory(None, Config(window_size=4), embedder=HashEmbedder(),
                       extractor=LLMExtractor(fake_client(server))) as mem:
        mem.add(turns, user_id="u")
        mem.flush()
        by_turn = {e.source_turn_ids[0]: e for e in mem.entries("u")}
        edges = {(e.src, e.dst) for e in mem.edges("u")}
    assert by_turn["a4"].metadata["state"]["value"] == "Portland"
    assert edges == {(by_turn["a1"].id, by_turn["a4"].id)}  # Jake's and Amira's numbers: both true
    # an LLM prompt asks for the state; a malformed state is dropped, the entry kept
    assert '"state"' in server.requests[0]["messages"][0]["content"]
    items = validate_output({"entries": [{"text": "x y", "source_turn_ids": ["T1"], "state": {"subject": "a"}},
                                         {"text": "z", "source_turn_ids": ["T1"], "state": "home"}]}, turns[:1])
    assert [i["state"] for i in items] == [None, None]
