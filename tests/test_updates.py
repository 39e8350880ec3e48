"""State updates: a changed fact is linked old -> new however it is phrased, two facts that
can both be true never are, and the latest state is what the memory answers with."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from ariadnemem_core import Config
from ariadnemem_core.bench.updates import load_suite, run_update_suite
from ariadnemem_core.coarsening import (
    Action,
    Surroundings,
    changed_types,
    co_true,
    decide,
    may_replace,
    says_change,
    update_reason,
)
from ariadnemem_core.models import Entry, Turn
from tests.conftest import BOTH_BACKENDS

pytestmark = BOTH_BACKENDS

#: What the offline (rule) detector reaches on the shipped suite; the issue's targets are
#: 90 / 95 / 90. Raising these floors is the point; lowering them needs a reason. They were
#: 89 / 100 / 91 until a changed value had to be a value of the same attribute (what it is
#: *of*, not a shared unit, month or person) and a change sharing no word stopped linking on a
#: cue alone: on conversations the rules were not written for, most links were false and
#: coarsening off beat coarsening on. Four changes of the suite are lost to that: a weekly
#: distance that shares only its unit, a due date renamed a deadline, a school named by a
#: person the extractor missed, a new employer sharing no word with the old one. A fifth,
#: the reunion head count said again with no change word, went when a count or a name
#: stopped linking on closeness alone (it linked no tuning conversation); its latest value
#: is still answered.
MIN_LINKED = 80.0
MIN_NEGATIVES_CLEAN = 100.0
MIN_LATEST = 95.0
#: The held-out dialogues (tests/data/update_dialogues_heldout.json) were written before the
#: rules were last tuned and never used to tune them: they check that the rules generalise.
#: The floors are modest on purpose (what they reach is reported in docs/concepts/coarsening.md).
MIN_HELDOUT_LINKED = 50.0
MIN_HELDOUT_NEGATIVES_CLEAN = 80.0
HELDOUT = Path(__file__).parent / "data" / "update_dialogues_heldout.json"


def _graph(*facts: object) -> SimpleNamespace:
    """An evidence graph as the offline answer reads it: its facts, no fast path."""
    return SimpleNamespace(fast_path=None, stats={}, to_text=lambda: "", facts=list(facts))


def _e(eid: str, text: str, *, speaker: str | None = None, persons: tuple[str, ...] = (),
       turn: str | None = None, entities: tuple[str, ...] = (), at: datetime | None = None) -> Entry:
    from ariadnemem_core import text as g

    return Entry(eid, text, keywords=g.keywords(text), persons=list(persons), entities=list(entities),
                 speaker=speaker, source_turn_ids=[turn or f"t-{eid}"], timestamp=at)


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


def test_heldout_dialogues_generalise(minilm) -> None:
    heldout = load_suite(HELDOUT)
    assert sum(d["kind"] == "update" for d in heldout) >= 15 and sum(d["kind"] == "negative" for d in heldout) >= 8
    assert not {d["id"] for d in heldout} & {d["id"] for d in load_suite()}
    result = run_update_suite(heldout, embedder=minilm)
    summary = {k: round(result[k], 1) for k in ("linked", "negatives_clean", "latest_answered")}
    assert result["linked"] >= MIN_HELDOUT_LINKED, (summary, result["failures"])
    assert result["negatives_clean"] >= MIN_HELDOUT_NEGATIVES_CLEAN, (summary, result["failures"])


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


JULY = datetime(2023, 7, 10, 12)


def _reason(old: Entry, new: Entry, similarity: float, context: str = "") -> str | None:
    """``context``: the turn before, then (after the last newline) the new entry's own turn."""
    before, _, own = context.rpartition("\n")
    return update_reason(old, new, similarity, Config(), Surroundings([Entry("", own)], [Entry("", before)]))


@pytest.mark.parametrize(("old", "new", "sim", "linked"), [
    # A change verb counts when its "to" introduces a value ...
    (_e("a", "The reunion dinner is on Friday."), _e("b", "Ola pushed the reunion dinner to Saturday."), 0.6, True),
    # ... not when it introduces a verb ("pushed Jon to open") or names no value ("changed the game").
    (_e("a", "The studio opens on Monday."),
     _e("b", "Losing the job pushed Jon to open the studio on Tuesday.", persons=("Jon",)), 0.6, False),
    (_e("a", "The match with the Hawks is on Friday."),
     _e("b", "That block changed the game, the match is on Sunday."), 0.6, False),
    # "Actually" is emphasis, not a change word.
    (_e("a", "The match with the Hawks is on Friday."),
     _e("b", "Actually the match with the Hawks is on Sunday."), 0.6, False),
    # "instead of Y" replaces Y: the entry stating Y, and nothing else.
    (_e("a", "Mila's book club meets at the Corner Cafe.", entities=("Corner Cafe",)),
     _e("b", "Mila's book club meets at Lola's Bakery instead of the Corner Cafe.",
        entities=("Lola's Bakery", "Corner Cafe")), 0.6, True),
    (_e("a", "Mila's book club meets at the Corner Cafe.", entities=("Corner Cafe",)),
     _e("b", "Instead of getting stuck at home, Mila's book club read at Lola's Bakery.",
        entities=("Lola's Bakery",)), 0.6, False),
    # A name given as an example is no value: "games like Civilization" / "like Total War".
    (_e("a", "James plays strategy games like Civilization.", persons=("James",), entities=("Civilization",)),
     _e("b", "James now plays strategy games like Total War.", persons=("James",), entities=("Total War",)),
     0.75, False),
    (_e("a", "James plays Civilization every night.", persons=("James",), entities=("Civilization",)),
     _e("b", "James plays Total War every night now.", persons=("James",), entities=("Total War",)), 0.75, True),
    # Ordinals are dates after "the" / "on" only: "Nate's 4th tournament" counts tournaments.
    (_e("a", "Nate's 4th tournament was fun.", persons=("Nate",)),
     _e("b", "Nate's 5th tournament was fun too.", persons=("Nate",)), 0.8, False),
    (_e("a", "The recital is on the 4th."), _e("b", "The recital got moved to the 5th."), 0.6, True),
    # An entry opening on a question asks, whatever follows it.
    (_e("a", "Has Audrey volunteered at the shelter on Mondays? It is rewarding."),
     _e("b", "Audrey volunteers at the shelter on Tuesdays now."), 0.7, False),
    # "my new X" renews X; "some new teammates" adds people.
    (_e("a", "My roommate is Alex.", entities=("Alex",)), _e("b", "My new roommate is Jordan.", entities=("Jordan",)),
     0.6, True),
    (_e("a", "John met his teammates at Luigi's.", entities=("Luigi's",)),
     _e("b", "John met some new teammates at Sal's.", entities=("Sal's",)), 0.6, False),
    (_e("a", "Reach the user at 555-0199 for the delivery."), _e("b", "The user's new number is 555-0733."), 0.6, True),
])
def test_change_words_must_govern_a_value(old: Entry, new: Entry, sim: float, linked: bool) -> None:
    assert (_reason(old, new, sim) is not None) is linked, _reason(old, new, sim)


def test_new_on_a_word_of_the_old_statement_renews_only_a_contact() -> None:
    """With every shared word a name, "new" on a word of the old statement ("this new role")
    is all that ties two dated statements: two plans of one profile, not a change of date.
    On the BEAM tuning conversations asked as one log, 4 of the 7 links between two of the
    conversations (false by construction) were of this kind, and no link of any update suite."""
    old = _e("a", "The user is considering updating the user's LinkedIn profile by June 5 as Leslie suggested, but "
                  "the user is not sure how to reflect the user's new role.", entities=("LinkedIn", "Leslie"))
    new = _e("b", "The user wants to make sure the user's LinkedIn profile reflects this new role, especially since "
                  "the user has increased the user's followers by 150 since July 1, 2024.", entities=("LinkedIn",))
    names = frozenset({"user", "linkedin", "linkedin profile", "profile", "role", "new", "reflect", "increased",
                       "leslie"})
    assert update_reason(old, new, 0.66, Config(), Surroundings([new], []), names) is None


@BOTH_BACKENDS
def test_a_statement_said_earlier_never_supersedes_a_later_one(make_memory) -> None:
    """Turns may arrive out of time order: "moved to 3 pm" said on the 5th stays the latest
    state when "is at 2 pm" said on the 4th arrives after it (in one batch or in a later
    window); in time order the same two are linked as before."""
    from datetime import timedelta

    day = JULY.replace(tzinfo=UTC)
    moved = Turn("Leo", "The kickoff meeting moved to 3 pm.", day + timedelta(days=1))
    first = Turn("Leo", "The kickoff meeting is at 2 pm on Friday.", day)
    mem = make_memory(hashing=False)
    mem.add([moved, first], user_id="batch")
    mem.add(moved, user_id="windows")
    mem.flush()
    mem.add(first, user_id="windows")
    mem.add([first, moved], user_id="ordered")
    mem.flush()
    for user in ("batch", "windows"):
        assert mem.edges(user) == [] and all(e.valid_until is None for e in mem.entries(user))
        assert "3 pm" in mem.answer("When is the kickoff meeting?", user_id=user).text
    (edge,) = mem.edges("ordered")
    assert "2 pm" in mem.get(edge.src, user_id="ordered").text and "3 pm" in mem.get(edge.dst, user_id="ordered").text


def test_naming_the_old_value_as_ended_is_a_change() -> None:
    """ "Pho Saigon closed, so we booked Green Leaf": the turn names the old value with an
    ending word. Naming it without one ("the deals with Nike and Gatorade") replaces nothing."""
    lunch = _e("a", "The team lunch is at Pho Saigon on Friday.", entities=("Pho Saigon",))
    booked = _e("b", "so we booked Green Leaf for the team lunch.", entities=("Green Leaf",))
    assert _reason(lunch, booked, 0.6, "Pho Saigon closed for good,") is not None
    assert _reason(lunch, booked, 0.6, "Pho Saigon was packed,") is None
    # the turn before counts too: a confirmation after "Laura left the agency."
    contact = _e("c", "Laura Chen gets a copy of every invoice.", entities=("Laura Chen",))
    confirm = _e("d", "Thanks, invoices will go to Marcus Webb.", entities=("Marcus Webb",))
    assert _reason(contact, confirm, 0.67, "Laura left the agency. My contact is Marcus Webb now.\n") is not None
    assert _reason(contact, confirm, 0.67, "\n") is None
    deal = _e("e", "John signed a shoe deal with Nike.", entities=("Nike",))
    both = _e("f", "The shoe deals with Nike and Gatorade are huge!", entities=("Nike", "Gatorade"))
    assert _reason(deal, both, 0.6) is None


def test_dated_past_events_neither_update_nor_are_updated() -> None:
    plan = _e("a", "Nate has a gaming tournament next month (August 2023).", persons=("Nate",), at=JULY)
    won = _e("b", "Nate won a gaming tournament last week (week of 2023-07-03)!", persons=("Nate",), at=JULY)
    assert _reason(plan, won, 0.75) is None
    met = _e("c", "John met his teammates on Friday (2023-07-07).", at=JULY)
    again = _e("d", "John met the teammates on Sunday (2023-07-16).", at=datetime(2023, 7, 20))
    assert co_true(met, again) == "two episodes"
    show = _e("e", "The art show is next month (August 2023).", at=JULY)
    later = _e("f", "The art show is next month (September 2023) now.", at=datetime(2023, 7, 20))
    assert _reason(show, later, 0.75) is not None  # two plans: the later one replaces the first


def test_reporters_and_shared_things_keep_the_subject() -> None:
    """ "Marta said the launch moved": Marta reports, the launch is the subject. "Emma moved
    our table": the table is both speakers'. Two people's own things stay apart."""
    launch = _e("a", "The book launch is at the Old Town Library.", speaker="Pia", entities=("Old Town Library",))
    moved = _e("b", "Marta said the book launch moved to the Riverside Library.", speaker="Pia",
               persons=("Marta",), entities=("Riverside Library",))
    assert _reason(launch, moved, 0.6) is not None
    pias = _e("c", "Pia's book launch is at the Old Town Library.", speaker="Pia", persons=("Pia",),
              entities=("Old Town Library",))
    martas = _e("d", "Marta's book launch is at the Riverside Library.", speaker="Pia", persons=("Marta",),
                entities=("Riverside Library",))
    assert _reason(pias, martas, 0.6) is None
    table = _e("e", "Noah booked a table at Bruno's for 8 pm.", speaker="Noah", persons=("Noah",), entities=("Bruno",))
    ours = _e("f", "Emma moved our table to 9:15.", speaker="Emma", persons=("Emma",))
    assert _reason(table, ours, 0.55) is not None
    hers = _e("g", "Emma booked a table at Sal's for 9:15.", speaker="Emma", persons=("Emma",), entities=("Sal",))
    assert _reason(table, hers, 0.75) is None


def test_state_changes_without_a_value_need_one_fact_and_a_marked_change() -> None:
    review = _e("a", "The visa application is still under review.")
    assert _reason(review, _e("b", "The visa application got approved now."), 0.75) is not None
    talk = _e("c", "The visa application got approved. It was a long wait, we celebrated with the whole family!")
    assert _reason(_e("d", "The visa application is under review."), talk, 0.75) is None
    walks = _e("e", "Theo always walks to school.")
    assert _reason(walks, _e("f", "These days Theo bikes to school."), 0.72) is not None
    assert _reason(walks, _e("g", "Yesterday Theo biked to school, these days are sunny."), 0.72) is None
    # a change word of the same turn vouches; one of the turn before does not
    title = _e("h", "The user is a product manager at Zenith, working on roadmaps.", entities=("Zenith",))
    senior = _e("i", "The user is a senior product manager at Zenith now.", entities=("Zenith",))
    assert _reason(title, senior, 0.72, "\nThe user got promoted!") is not None
    assert _reason(title, senior, 0.72, "The user got promoted!\n") is None


def test_offline_answer_skips_courtesy_facts() -> None:
    from ariadnemem_core.evidence import Fact
    from ariadnemem_core.synthesis import extractive_answer

    graph = SimpleNamespace(
        fast_path=None, stats={}, to_text=lambda: "",
        facts=[Fact("a", "The user: Nice.", JULY, ["t1"], 0.44, "terminal", speaker="user"),
               Fact("b", "The user is a senior product manager now.", JULY, ["t2"], 0.42, "terminal",
                    speaker="user")])
    assert "senior product manager" in extractive_answer("What is the user's job title?", graph).text


def test_offline_answer_takes_the_later_close_statement_when_nothing_linked() -> None:
    """Two statements of the asked attribute that score alike and are not linked: the later
    one answers "now", the earlier one "originally"; a later fact that says little of the
    question ("Professor Nadia!"), one far below the best, or a question about a named time
    leave the best fact; a linked chain is followed as before."""
    from datetime import timedelta

    from ariadnemem_core.evidence import Fact
    from ariadnemem_core.synthesis import extractive_answer

    july = JULY.replace(tzinfo=UTC)  # as stored: every entry's time is aware
    later = july + timedelta(days=60)
    ten = Fact("a", "user: I run about 10 km a week, mostly on weekends.", july, ["t1"], 0.62, "terminal",
               label="F1", speaker="user")
    built = Fact("b", "user: Progress report: I've built up to 25 km a week.", later, ["t4"], 0.50, "terminal",
                 label="F2", speaker="user")
    now = extractive_answer("How many kilometres does the user run each week?", _graph(ten, built))
    assert "25 km" in now.text and now.fact_ids == ["F2"]
    first = extractive_answer("How far did the user run a week originally?", _graph(ten, built))
    assert "10 km" in first.text and "25 km" not in first.text
    # too far below the best: the best answers
    far = Fact("b", built.text, later, ["t4"], 0.30, "terminal", label="F2", speaker="user")
    assert "10 km" in extractive_answer("How many kilometres does the user run each week?", _graph(ten, far)).text
    # a question about a named time keeps the best fact (the chain decides such questions)
    assert "10 km" in extractive_answer("How far did the user run in July 2023?", _graph(ten, built)).text
    teach = Fact("c", "Nadia: I teach history at Lincoln High, eleven years now.", july, ["t1"], 0.72, "terminal",
                 label="F1", speaker="Nadia")
    cheer = Fact("d", "Omar: Professor Nadia!", later, ["t5"], 0.64, "terminal", label="F2", speaker="Omar")
    assert "Lincoln High" in extractive_answer("Where does Nadia teach?", _graph(teach, cheer)).text
    # linked: the chain's latest state answers, not a later unlinked look-alike
    old = Fact("e", "Sofia: My sister's due date is November 3.", july, ["t1"], 0.87, "terminal", label="F1",
               superseded_by="f", speaker="Sofia")
    new = Fact("f", "Sofia: My sister's due date is October 27 now.", later, ["t5"], 0.53, "update", label="F3",
               speaker="Sofia")
    moved = Fact("g", "Sofia: So the doctor moved my sister's due date.", later - timedelta(minutes=2), ["t3"],
                 0.77, "terminal", label="F2", speaker="Sofia")
    assert "October 27" in extractive_answer("When is Sofia's sister's due date?", _graph(old, moved, new)).text


def test_an_earlier_time_quotes_what_held_then() -> None:
    """A question about the start quotes the superseded sentences of the best fact's turn,
    which held then; a present question leaves them out."""
    from datetime import timedelta

    from ariadnemem_core.evidence import Fact
    from ariadnemem_core.synthesis import extractive_answer

    jan = JULY.replace(tzinfo=UTC)
    mar = jan + timedelta(days=50)
    board = Fact("e", "user: I'm on our condo HOA board.", jan, ["t0"], 0.65, "terminal", label="F1", speaker="user")
    greg = Fact("f", "user: Greg Palmer is the treasurer and he's always late with the reports.", jan, ["t0"], 0.52,
                "terminal", label="F2", superseded_by="g", speaker="user", persons=["Greg Palmer"])
    down = Fact("g", "user: so greg stepped down at the last meeting lol.", mar, ["t2"], 0.13, "update",
                label="F3", speaker="user")
    first = extractive_answer("Who was the HOA treasurer originally?", _graph(board, greg, down))
    assert "Greg Palmer" in first.text and "F2" in first.fact_ids
    assert "Greg Palmer" not in extractive_answer("Who is on the HOA board?", _graph(board, greg, down)).text


def test_what_did_they_first_do_asks_for_the_earliest_state() -> None:
    """"What did the user first sign up to bring?" asks for the state that held first, not
    the latest one the chain leads to; a question in the present does not."""
    from ariadnemem_core.synthesis import asked_time

    assert asked_time("What did the user first sign up to bring to the potluck?", []) == datetime.min.replace(
        tzinfo=UTC)
    assert asked_time("Which car did Sam first buy?", []) == datetime.min.replace(tzinfo=UTC)
    assert asked_time("What does the user bring to the potluck?", []) is None
    assert asked_time("Where did Caroline and Melanie first meet?", []) is None  # an event


def test_compound_statements_and_message_blocks_need_a_governing_change_word() -> None:
    """A statement of many values changes one only under a change word that governs it;
    a block cut out of a long message (a list, a code or prose chunk) is a document."""
    plan = _e("a", "The user has 3 sprints, the first ends on March 29 with 4 engineers at Acme.", entities=("Acme",))
    now = _e("b", "The first sprint now ends on March 31 with 4 engineers at Acme.", entities=("Acme",))
    assert _reason(plan, now, 0.8) is None  # "now" does not say which of its values is new
    moved = _e("c", "The first sprint got moved to March 31, still 4 engineers at Acme.", entities=("Acme",))
    assert _reason(plan, moved, 0.8) is not None
    block = _e("d", "assistant (list), Plan:\nThe first sprint ends on March 31.")
    block.metadata["segment"] = "list"
    assert co_true(_e("e", "The first sprint ends on March 29."), block) == "a document"


def test_the_clause_holding_the_attribute_says_whether_the_old_value_is_gone() -> None:
    austin = _e("a", "Amira lives in Austin, near the university.", persons=("Amira",), entities=("Austin",))
    portland = _e("b", "Amira has been living in Portland since the summer, the Austin heat got to Amira.",
                  persons=("Amira",), entities=("Portland", "Austin"))
    assert _reason(austin, portland, 0.69) is not None
    visit = _e("c", "Amira has been living in Austin since the summer, Portland was too rainy.",
               persons=("Amira",), entities=("Portland", "Austin"))
    assert _reason(austin, visit, 0.69) is None  # Austin is still where she lives


# --------------------------------------------------------------------------- attributes and forks
VALIDATION = Path(__file__).parent / "data" / "update_dialogues_validation.json"


#: The first validation suite (user-assistant phrasing; frozen before the attribute rules,
#: read when the ended-value rules were written): the targets are 80 linked / 100 clean / 85
#: answered; these floors are what the rules reach (docs/concepts/coarsening.md), so a change
#: that loses ground here is seen.
MIN_VALIDATION_LINKED = 60.0
MIN_VALIDATION_ORIGINAL = 90.0
MIN_VALIDATION_LATEST = 85.0


def test_validation_suite_is_frozen_and_clean(minilm) -> None:
    suite = load_suite(VALIDATION)
    updates = [d for d in suite if d["kind"] == "update"]
    negatives = [d for d in suite if d["kind"] == "negative"]
    assert len(updates) == 20 and len(negatives) == 10
    assert {t["speaker"] for d in suite for t in d["turns"]} == {"user", "assistant"}
    for d in updates:  # the latest value is stated in a new turn, the original in an old one
        assert any(d["latest"].lower() in d["turns"][i]["text"].lower() for i in d["new"]), d["id"]
        assert any(d["original"].lower() in d["turns"][i]["text"].lower() for i in d["old"]), d["id"]
    result = run_update_suite(suite, embedder=minilm)
    summary = {k: result[k] for k in ("linked", "false_links", "negatives_clean", "latest_answered",
                                      "original_answered", "negatives_answered")}
    assert result["false_links"] == 0 and result["negatives_clean"] == 100.0, (summary, result["failures"])
    assert result["negatives_answered"] == 100.0, (summary, result["failures"])
    assert result["linked"] >= MIN_VALIDATION_LINKED, (summary, result["failures"])
    assert result["original_answered"] >= MIN_VALIDATION_ORIGINAL, (summary, result["failures"])
    assert result["latest_answered"] >= MIN_VALIDATION_LATEST, (summary, result["failures"])


def test_exercises_restatements_and_periods_are_not_updates() -> None:
    """Values of a supposition or an example are nobody's state; "five" and "5" are one
    count; a change the old statement already reports is told again, not made again; a
    range ("from July 16-18") is a period, not the onset of a new state."""
    aces = _e("a", "The user is trying to solve the problem of drawing 2 aces in a row from a 52-card deck.")
    kings = _e("b", "hmm, so if the user wanted to calculate the probability of drawing two kings instead, "
                    "would the process be exactly the same?")
    assert _reason(aces, kings, 0.61) is None
    zotero = _e("q", "The user just downloaded Zotero on March 2, 2024, to manage the user's references more "
                     "efficiently, can the assistant help the user figure out how to use it to organize the user's "
                     "citations for the user's essay on persuasive academic writing", speaker="user",
                persons=("user", "assistant"), entities=("Zotero",), at=datetime(2024, 3, 3, tzinfo=UTC))
    mla = _e("r", "The user adjusted the user's manuscript to MLA style per journal guidelines on May 28, but now the "
                  "user is wondering if this change will affect how the user uses the citation tools, like the "
                  "updated Zotero, to ensure the user's references are correctly formatted", speaker="user",
             persons=("user",), entities=("MLA", "Zotero"), at=datetime(2024, 6, 1, tzinfo=UTC))
    assert _reason(zotero, mla, 0.55) is None  # the change word governs the style, not the date beside it
    paradox = _e("o", "The user is solving the birthday paradox problem for 23 people with the complement method.")
    method = _e("p", "The complement method finds the probability of no shared birthdays and then subtracting from 1 "
                     "gives the answer now.")
    assert _reason(paradox, method, 0.79) is None  # an operand of a computation
    example = _e("c", "For example, the user has a sequence with a first term of 3, so the process is new now.")
    first = _e("d", "The user's sequence has a first term of 1.")
    assert _reason(first, example, 0.6) is None
    batches = _e("e", "The user prefers submitting query letters in batches of five.")
    five = _e("f", "The user now submits query letters in batches of 5.")
    assert _reason(batches, five, 0.8) is None  # the same count
    seven = _e("g", "The user now submits query letters in batches of 7.")
    assert _reason(batches, seven, 0.8) is not None  # a new count still is
    told = _e("h", "The user has improved the API response time to 220ms after caching, as Lighthouse measured.")
    again = _e("i", "The user has also improved the average API response time to 220ms after caching.")
    assert _reason(told, again, 0.74) is None
    faster = _e("j", "The user has improved the average API response time to 150ms with a CDN.")
    assert _reason(told, faster, 0.74) is not None
    draft = _e("k", "The user is finalizing the first draft of the essay by May 15, 2024, and the user has 4,500 "
                    "words to submit, can the assistant help the user meet this deadline?")
    period = _e("l", "The user has a final submission deadline of July 20 for the conference paper, and the user is "
                     "planning to use the editing time from July 16-18 to make sure everything is perfect.")
    assert _reason(draft, period, 0.77) is None
    onset = _e("m", "The user has a new final deadline for the first draft of the essay, starting July 20 the user "
                    "edits every day.")
    assert _reason(draft, onset, 0.77) is not None  # an onset still marks the new state


def test_a_value_of_another_attribute_never_supersedes() -> None:
    """An attribute is what the value is *of*: a flight price is not a budget, whatever unit
    or rate ("per person") the two amounts share; a shared month or person is no attribute."""
    budget = _e("a", "user: Our total budget is $4,000 per person.", speaker="user", turn="t1")
    cut = _e("b", "user: We had to cut the budget to $3,200 per person.", speaker="user", turn="t2")
    flights = _e("c", "user: The flights came to $1,180 per person.", speaker="user", turn="t3")
    assert _reason(budget, cut, 0.7) is not None
    assert _reason(budget, flights, 0.7) is None and _reason(cut, flights, 0.7) is None
    conference = _e("d", "user: I'm attending the DataOps conference in Denver on April 18.", speaker="user",
                    entities=("DataOps", "Denver"), turn="t4")
    workshop = _e("e", "user: I signed up for a Kubernetes workshop in April instead.", speaker="user",
                  entities=("Kubernetes",), turn="t5")
    assert _reason(conference, workshop, 0.6) is None  # a shared month and a cue: two events
    meeting = _e("f", "user: I have a 1:1 with Tom in March about the roadmap.", speaker="user", persons=("Tom",))
    promoted = _e("g", "user: Priya got promoted to engineering manager in March.", speaker="user",
                  persons=("Priya",))
    assert _reason(meeting, promoted, 0.6) is None
    small = _e("h", "user: At Mario's the small pizza is $12.", speaker="user")
    large = _e("i", "user: The large pizza is $18, better value for four people.", speaker="user")
    assert co_true(small, large) is not None and "small / large" in str(co_true(small, large))


def test_a_replacement_names_what_was_given_up() -> None:
    """A replacement with no typed value: the new statement names the old thing as ended
    ("stopped", "gave up", "quit") and fills the same attribute with something else."""
    bus = _e("a", "user: I take the bus to work every day.", speaker="user", turn="t1")
    bike = _e("b", "user: I stopped taking the bus and ride my bike to work now.", speaker="user", turn="t2")
    assert _reason(bus, bike, 0.6) == "held value ended"  # the bus, which it held, is given up
    coffee = _e("a2", "user: I drink two cups of coffee every morning.", speaker="user", turn="t1b")
    tea = _e("b2", "user: I drink green tea in the mornings now.", speaker="user", turn="t2b")
    # given up in another sentence of the same turn
    assert _reason(coffee, tea, 0.6, "\nuser: I quit coffee.") == "state changed, given up"
    tennis = _e("c", "user: I play tennis on Saturdays.", speaker="user", turn="t3")
    padel = _e("d", "user: I gave up tennis, I play padel on Saturdays now.", speaker="user", turn="t4")
    assert _reason(tennis, padel, 0.6) == "held value ended"  # tennis, a value it held, is given up
    # an ending word about something else is no replacement of the old statement
    work = _e("e", "user: I work at Acme as an analyst.", speaker="user", entities=("Acme",), turn="t5")
    early = _e("f", "user: I left work early today to see the doctor.", speaker="user", turn="t6")
    assert _reason(work, early, 0.6) is None
    # a physical unit at the same rate is one measure when the wording marks a change
    weigh = _e("i", "user: I weigh 82 kg right now and want to get down to 75 kg.", speaker="user", turn="t9")
    weight = _e("j", "user: Checked the scale: my weight is 78.5 kg now, so it's working!", speaker="user",
                turn="t10")
    assert _reason(weigh, weight, 0.6) is not None
    hike = _e("k", "user: The hike to the lake is 12 km.", speaker="user", turn="t11")
    weekly = _e("l", "user: I've built up to 25 km a week now.", speaker="user", turn="t12")
    assert _reason(hike, weekly, 0.6) is None
    # "every Monday at 11" and "Mondays at 11:00" are one value: an echo, not a change
    sync = _e("m", "user: The weekly design sync is every Monday at 11.", speaker="user", turn="t13")
    echo = _e("n", "assistant: Added to your calendar: design sync, Mondays at 11:00.", speaker="assistant",
              turn="t14")
    assert changed_types(sync, echo) == [] and _reason(sync, echo, 0.8) is None
    # a change verb may now extend through a date ("extended the lease through December")
    lease = _e("g", "user: My lease ends on June 30.", speaker="user", turn="t7")
    longer = _e("h", "user: The landlord extended my lease through December 31.", speaker="user", turn="t8")
    assert _reason(lease, longer, 0.6) is not None


def test_a_change_word_counts_for_the_value_it_governs() -> None:
    """On user-assistant chat most false links were long restatements where a change word
    governed one value ("reduced it to 300ms") and another type of value differed (a tool
    named beside it), or where a long message lent its change word to every sentence."""
    slow = _e("a", "The user is optimizing the dashboard, which loads slowly because of SQL joins.",
              entities=("SQL",), turn="t1")
    faster = _e("b", "The user managed to reduce the dashboard load time to 300ms with Redis and SQL indexes.",
                entities=("Redis", "SQL"), turn="t2")
    assert changed_types(slow, faster) == ["name"]
    assert _reason(slow, faster, 0.7) is None
    rent = _e("c", "user: The rent is $1,450 a month.", speaker="user", turn="t3")
    now = _e("d", "user: The rent is $1,600 a month.", speaker="user", turn="t4")
    cue = _e("e", "user: The landlord pushed the inspection to June 3.", speaker="user", turn="t4")
    brief = Surroundings([cue, now])
    assert update_reason(rent, now, 0.6, Config(), brief) is not None  # a remark's cue is lent
    filler = [_e(f"f{i}", f"user: Point {i} of the plan is the garden.", speaker="user", turn="t4") for i in range(5)]
    assert update_reason(rent, now, 0.6, Config(), Surroundings([cue, *filler, now])) is None


def test_a_weekday_in_the_plural_is_a_habit_and_a_week_off_is_a_one_off() -> None:
    """"Sunday mornings" is when the groceries are done as a rule; "this week I'm doing them
    Thursday night instead" is one week's exception, and both stay true."""
    habit = _e("a", "user: I do my big grocery run Sunday mornings at Trader Joe's.", speaker="user", turn="t1")
    once = _e("b", "user: we're away this weekend (weekend of 2024-06-15) so I'm doing groceries Thursday "
                   "night this week instead.", speaker="user", turn="t2")
    assert co_true(habit, once) == "habit and one-off"
    assert _reason(habit, once, 0.7) is None


def test_a_target_and_a_measurement_are_two_attributes() -> None:
    """A value stated as a goal or limit and one stated as reached are both true."""
    goal = _e("a", "user: My goal is to reach 100% test coverage.", speaker="user", turn="t1")
    reached = _e("b", "user: We reached 85% test coverage on the core modules now.", speaker="user", turn="t2")
    assert co_true(goal, reached) == "a target and a measurement"
    target = _e("c", "user: My weekly writing target is 1,200 words.", speaker="user", turn="t3")
    adjusted = _e("d", "user: The weekly writing target was adjusted to 1,350 words.", speaker="user", turn="t4")
    assert co_true(target, adjusted) is None and _reason(target, adjusted, 0.7) is not None
    # however the aim is worded; a date "targeted" is a schedule, and schedules move
    aiming = _e("e", "user: I'm aiming at 90% test coverage on the API module.", speaker="user", turn="t5")
    measured = _e("f", "user: test coverage on the API module is currently at 88%.", speaker="user", turn="t6")
    assert co_true(aiming, measured) == "a target and a measurement"
    ends = _e("g", "user: The first sprint ends on March 29.", speaker="user", turn="t7")
    moved = _e("h", "user: The first sprint now targets completion by March 31.", speaker="user", turn="t8")
    assert co_true(ends, moved) is None


def test_one_successor_per_fact() -> None:
    """A fact with a newer state is never linked again: a later statement updates the chain
    through its latest state, so no fact has two successors."""
    old = _e("a", "The kickoff meeting is at 2 pm.", turn="t1")
    mid = _e("b", "The kickoff meeting moved to 3 pm.", turn="t2")
    new = _e("c", "The kickoff meeting moved to 4 pm.", turn="t3")
    assert decide(new, [(old, 0.8)], Config()).action is Action.LINK
    old.superseded_by = mid.id  # as the store reports it once mid is linked
    assert decide(new, [(old, 0.8)], Config()).action is Action.ADD
    d = decide(new, [(old, 0.8), (mid, 0.75)], Config())
    assert (d.action, d.target_id, d.also) == (Action.LINK, "b", ())
    old.superseded_by = None  # linked earlier in the same window: the ingest passes its id
    assert decide(new, [(old, 0.8)], Config(), superseded={"a"}).action is Action.ADD


TRIP = [
    ("user", "I'm planning a trip to Japan with Priya in April."),
    ("assistant", "Lovely! Tokyo and Kyoto are a classic pairing for a first visit."),
    ("user", "Our total budget is $4,000 per person."),
    ("assistant", "That's comfortable for two weeks."),
    ("user", "In Kyoto Priya would love to stay near Gion."),
    ("assistant", "Gion is beautiful at night."),
    ("user", "We had to cut the budget to $3,200 per person."),
    ("assistant", "Understood, I'll plan around $3,200 each."),
    ("user", "Priya booked the Hotel Kanra in Kyoto for four nights."),
    ("assistant", "Great, Hotel Kanra is near Gojo station."),
    ("user", "Is the hotel close to a station?"),
    ("assistant", "Yes, a five-minute walk."),
    ("user", "The flights came to $1,180 per person."),
    ("assistant", "That leaves $2,020 per person for the rest."),
]


def _trip_memory(make_memory):
    from datetime import timedelta

    from ariadnemem_core import Turn

    mem = make_memory("trip")
    mem._llm_checked = True  # offline answers even if the environment names an LLM
    start = datetime(2024, 3, 1, 9)
    mem.add([Turn(s, t, start + timedelta(hours=i), f"t{i}") for i, (s, t) in enumerate(TRIP)], user_id="u")
    mem.flush()
    return mem


def test_trip_budget_has_one_truth(make_memory) -> None:
    """The budget is cut once; the flight price is another attribute. history(), entries()'
    valid-until and the evidence graph's (latest) markers agree, and the offline answer
    gives the current and the original budget from the chain, citing the fact it quotes."""
    mem = _trip_memory(make_memory)
    by_turn = {e.source_turn_ids[0]: e for e in mem.entries("u")}
    budget, cut, flights = by_turn["t2"], by_turn["t6"], by_turn["t12"]
    edges = [(e.src, e.dst) for e in mem.edges("u") if e.kind == "update"]
    assert (budget.id, cut.id) in edges and all(flights.id not in pair for pair in edges)
    assert budget.superseded_by == cut.id and cut.superseded_by is None and flights.superseded_by is None
    assert [e.id for e in mem.history(budget.id, user_id="u")] == [budget.id, cut.id]
    assert [e.id for e in mem.history(flights.id, user_id="u")] == [flights.id]
    graph = mem.retrieve("What is the current budget per person?", user_id="u")
    text = graph.to_text()
    latest = [line for line in text.splitlines() if "(latest)" in line]
    assert len(latest) == 1 and "$3,200" in latest[0] and "$1,180" not in latest[0]
    now = mem.answer("What is the current budget per person?", user_id="u")
    assert "$3,200" in now.text and "$4,000" not in now.text
    assert now.fact_ids and graph.fact(cut.id) is not None
    original = mem.answer("What was the original budget?", user_id="u")
    assert "$4,000" in original.text and "$3,200" not in original.text
    labels = {f.label: f.id for f in original.graph.facts}
    assert original.fact_ids and labels[original.fact_ids[0]] == budget.id


def test_extractive_answer_picks_the_statement_that_answers(make_memory) -> None:
    """A booking answers before a wish, a statement before a question, and the answer names
    the fact it quotes."""
    mem = _trip_memory(make_memory)
    stay = mem.answer("Where is Priya staying in Kyoto?", user_id="u")
    assert "Hotel Kanra" in stay.text and "would love" not in stay.text
    labels = {f.label: f for f in stay.graph.facts}
    assert stay.fact_ids and all(label in labels for label in stay.fact_ids)
    assert "booked" in labels[stay.fact_ids[0]].text
    near = mem.answer("How far is the hotel from a station?", user_id="u")
    assert "?" not in near.text.removeprefix("[extractive, no LLM configured]")


def test_a_forked_store_shows_one_truth(make_memory, tmp_path) -> None:
    """A store written before forks were refused (one fact with two newer states, e.g. by an
    import): entries(), history() and the evidence graph name the same successor."""
    import json

    mem = _trip_memory(make_memory)
    by_turn = {e.source_turn_ids[0]: e for e in mem.entries("u")}
    budget, cut, flights = by_turn["t2"], by_turn["t6"], by_turn["t12"]
    path = tmp_path / "fork.jsonl"
    mem.export(path, user_id="u")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    edge = next(r for r in rows if r.get("type") == "edge")
    end = rows.pop()  # the end record counts the records: one more now
    rows += [{**edge, "src": budget.id, "dst": flights.id}, {**end, "records": end["records"] + 1}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    other = make_memory("forked")
    other._llm_checked = True
    other.import_(path)
    assert sum(e.src == budget.id for e in other.edges("u")) == 2  # the fork is stored
    again = {e.id: e for e in other.entries("u")}
    assert again[budget.id].superseded_by == cut.id  # the earliest newer state
    assert [e.id for e in other.history(budget.id, user_id="u")] == [budget.id, cut.id]
    assert [e.id for e in other.history(flights.id, user_id="u")] == [flights.id]
    graph = other.retrieve("What is the budget per person now? What did the flights come to?", user_id="u")
    assert graph.fact(budget.id) and graph.fact(cut.id) and graph.fact(flights.id)
    assert graph.fact(budget.id).superseded_by == cut.id
    latest = [line for line in graph.to_text().splitlines() if "(latest)" in line]
    assert len(latest) == 1 and "$3,200" in latest[0]


def test_a_value_is_of_the_words_next_to_it() -> None:
    """In a long statement the attribute of a value is what is said next to it, not every word
    of the sentence: a date the user gives for something else does not supersede a deadline."""
    deadline = _e("a", "The user has a deadline of May 2 for the first sprint, which covers the login page and the "
                       "settings screen of the mobile app.", speaker="user", turn="t1")
    moved = _e("b", "The user is updating the project plan to reflect the new sprint deadline of May 6, but is "
                    "unsure how to adjust the board.", speaker="user", turn="t2")
    other = _e("c", "The user is updating the project plan for the mobile app and the login page, since the design "
                    "review happened on May 6 with the whole team.", speaker="user", turn="t3")
    assert _reason(deadline, moved, 0.6) is not None
    assert _reason(deadline, other, 0.6) is None


def test_a_change_that_names_its_old_value_replaces_only_that_value() -> None:
    """"moved from X to Y" names what is replaced: a statement of another value is not it."""
    launch = _e("a", "user: The book launch is on November 15.", speaker="user", turn="t1")
    festival = _e("b", "user: I am speaking at the festival on September 22.", speaker="user", turn="t2")
    moved = _e("c", "user: The book launch got moved from November 15 to November 22.", speaker="user", turn="t3")
    assert _reason(launch, moved, 0.7) is not None
    assert _reason(festival, moved, 0.7) is None
    limit = _e("d", "user: Images must stay under 200KB each for the gallery.", speaker="user", turn="t4")
    shrunk = _e("e", "user: ImageOptim reduced the gallery images from 300KB to 180KB.", speaker="user",
                entities=("ImageOptim",), turn="t5")
    assert _reason(limit, shrunk, 0.7) is None  # 300KB is what was replaced, not the 200KB limit


def test_a_worked_computation_is_no_state() -> None:
    """The numbers of an exercise are steps of it: neither side of an update."""
    one = _e("a", "user: The chance of an ace is P = 4/52 = 1/13 for one card.", speaker="user", turn="t1")
    two = _e("b", "user: Now the chance of two aces is 4C2 / 52C2 = 6/1326 for two cards.", speaker="user", turn="t2")
    assert co_true(one, two) == "a document"
    assert _reason(one, two, 0.8) is None


def test_a_request_to_the_assistant_asks_unless_it_moves_a_value() -> None:
    review = _e("a", "The user: Can the assistant review this page so it meets WCAG 2.1 AA?", speaker="user",
                entities=("WCAG",), turn="t1")
    again = _e("b", "The user: Can the assistant review this code for the peer review on April 15?", speaker="user",
               turn="t2")
    assert _reason(review, again, 0.7) is None
    call = _e("c", "user: The call with the vendor is at 2 pm on Friday.", speaker="user", turn="t3")
    move = _e("d", "user: Can you move the call with the vendor to 4 pm?", speaker="user", turn="t4")
    assert _reason(call, move, 0.7) is not None
    hmm = _e("e", "hmm, so how do I get an alert when the error rate goes above 40%?", speaker="user", turn="t5")
    now = _e("f", "user: The error rate is now below 35% after the fix.", speaker="user", turn="t6")
    assert _reason(hmm, now, 0.6) is None  # a question states no value to replace


def test_long_replies_and_computations_lend_no_cue() -> None:
    """A change word somewhere in a long reply, or "\\left(" in a formula, vouches for nothing."""
    old = _e("a", "user: The team has 8 engineers.", speaker="user", turn="t1")
    new = _e("b", "user: The team has 10 engineers.", speaker="user", turn="t3")
    reply = [_e(f"r{i}", text, speaker="assistant", turn="t2") for i, text in enumerate((
        "assistant: First, we moved the standup to 10 am.", "assistant: Then list the steps.",
        "assistant: Check the logs.", "assistant: Run the tests.", "assistant: Deploy it."))]
    assert Surroundings([new], reply).strong is False
    formula = _e("f", r"user: \( d = \left( \frac{2b}{2} \right) \) left me confused", speaker="user", turn="t2")
    assert Surroundings([new], [formula]).ended == ()
    assert Surroundings([new], reply[:2]).strong is True  # a brief turn still lends its cue
    assert update_reason(old, new, 0.6, Config(), Surroundings([new], reply)) is None  # no cue, not close
    assert update_reason(old, new, 0.6, Config(), Surroundings([new], reply[:2])) is not None


def test_codes_onsets_and_corrections_are_read() -> None:
    """A password or id is a value, "from next Monday" marks a new state, a clause-opening
    "Also," is no recurrence, "the 11th, not the 9th" names the old value as wrong, and a
    relative's possessive ("my sister's due date") is the same relative."""
    wifi = _e("a", "user: The guest wifi password is sunflower22.", speaker="user", turn="t1")
    rotated = _e("b", "user: IT rotated the guest wifi password, it's tulip93 now.", speaker="user", turn="t2")
    assert changed_types(wifi, rotated) == ["code"]
    assert _reason(wifi, rotated, 0.8) is not None
    standup = _e("c", "Raj: Standup is at 9:30 every weekday.", speaker="Raj", persons=("Raj",), turn="t3")
    later = _e("d", "Raj: Finally. Also, from next Monday (2024-03-11) standup starts at 9:45 so the Berlin team "
                    "can join.", speaker="Raj", persons=("Raj",), entities=("Berlin",), turn="t4")
    assert _reason(standup, later, 0.62) is not None
    again = _e("e", "Raj: Standup is also at 9:45 on Fridays.", speaker="Raj", persons=("Raj",), turn="t5")
    assert _reason(standup, again, 0.7) is None  # one more standup, not a moved one
    surgery = _e("f", "user: The knee surgery is on the 9th.", speaker="user", turn="t6")
    fixed = _e("g", "user: I misread the letter: the knee surgery is on the 11th, not the 9th.", speaker="user",
               turn="t7")
    assert _reason(surgery, fixed, 0.6) is not None
    due = _e("h", "Sofia's sister's due date is November 3.", speaker="Sofia", persons=("Sofia",), turn="t8")
    moved = _e("i", "Sofia's sister's due date is October 27 now.", speaker="Sofia", persons=("Sofia",), turn="t9")
    assert co_true(due, moved) is None and _reason(due, moved, 0.8) is not None


def test_a_count_or_a_name_said_again_needs_a_change_word() -> None:
    """Two close statements with another count or another name are two measurements or two
    tools unless the wording says one replaced the other; a clock time or an amount, which
    holds one at a time, is replaced by a close restatement alone."""
    runs = _e("a", "user: The load test ran with 8 workers.", speaker="user", turn="t1")
    rerun = _e("b", "user: The load test ran with 12 workers.", speaker="user", turn="t3")
    assert _reason(runs, rerun, 0.9) is None
    assert _reason(runs, _e("c", "user: I raised the load test to 12 workers.", speaker="user", turn="t5"), 0.9) \
        == "number changed, shared slot, cue"
    flask = _e("d", "user: The API is served with Flask.", speaker="user", turn="t1")
    assert _reason(flask, _e("e", "user: The API is served with FastAPI.", speaker="user", turn="t3"), 0.9) is None
    workout = _e("f", "user: My workouts are at 7 pm.", speaker="user", turn="t1")
    assert _reason(workout, _e("g", "user: My workouts are at 6 am.", speaker="user", turn="t3"), 0.9) \
        == "time changed, shared slot, close"


def test_a_wrong_link_can_be_undone(make_memory) -> None:
    """``unlink`` removes one update link of one user: the older fact is current again in
    entries(), history() and the evidence graph; both entries stay, another
    user's link and a link that does not exist are refused, and nothing else changes."""
    from ariadnemem_core import NotFoundError

    mem = _trip_memory(make_memory)
    by_turn = {e.source_turn_ids[0]: e for e in mem.entries("u")}
    budget, cut = by_turn["t2"], by_turn["t6"]
    others = [(e.src, e.dst) for e in mem.edges("u") if (e.src, e.dst) != (budget.id, cut.id)]
    with pytest.raises(NotFoundError, match="no update link"):
        mem.unlink(cut.id, budget.id, user_id="u")  # the link runs old -> new only
    with pytest.raises(NotFoundError):
        mem.unlink(budget.id, cut.id, user_id="someone-else")
    mem.unlink(budget.id, cut.id, user_id="u")
    assert [(e.src, e.dst) for e in mem.edges("u")] == others
    again = {e.id: e for e in mem.entries("u")}
    assert again[budget.id].superseded_by is None and again[budget.id].valid_until is None
    assert budget.id in again and cut.id in again
    assert [e.id for e in mem.history(budget.id, user_id="u")] == [budget.id]
    graph = mem.retrieve("What is the total budget per person?", user_id="u")
    assert graph.fact(budget.id) is not None and graph.fact(budget.id).superseded_by is None
    assert not any("(latest)" in line for line in graph.to_text().splitlines())
    with pytest.raises(NotFoundError):
        mem.unlink(budget.id, cut.id, user_id="u")  # already gone


MANAGER = [
    ("user", "my manager priya wants me to present the roadmap next week. any tips?"),
    ("assistant", "Lead with the outcome, keep each slide to one idea, and rehearse the first minute aloud."),
    ("user", "ok thanks. also whats a good name for a team slack channel"),
    ("assistant", "How about #ship-it or #team-lounge?"),
    ("user", "so priya left last friday and marcus runs the team now. how do i set expectations with him?"),
    ("assistant", "Ask him early how he likes updates and what a good first month looks like to him."),
]


@pytest.mark.both_backends
def test_a_missed_change_can_be_recorded(make_memory) -> None:
    """``link`` records a change the detector did not read: the old fact gets a valid-until,
    history() runs old -> new, the evidence graph marks it and the offline answer gives the
    new state; linking again changes nothing, unlink undoes it. The wrong order, a second
    newer state, one entry twice and another user's entries are refused, leaving
    the edges as they were."""
    from datetime import timedelta

    from ariadnemem_core import InvalidInputError, NotFoundError, Turn

    mem = make_memory("manager")
    mem._llm_checked = True  # offline answers even if the environment names an LLM
    start = datetime(2024, 5, 6, 10)
    mem.add([Turn(s, t, start + timedelta(days=20 * (i // 4), minutes=i), f"m{i}")
             for i, (s, t) in enumerate(MANAGER)], user_id="u")
    mem.add([Turn("user", "my manager is dana.", start, "x0")], user_id="v")
    mem.flush()
    by_turn = {e.source_turn_ids[0]: e for e in mem.entries("u") if "priya" in e.text.lower()}
    old, new = by_turn["m0"], by_turn["m4"]
    assert not mem.edges("u")  # the detector reads no change here: no shared attribute word
    slack = next(e for e in mem.entries("u") if "slack" in e.text)
    other = mem.entries("v")[0]

    for bad in (lambda: mem.link(new.id, old.id, user_id="u"),   # the newer state said first
                lambda: mem.link(old.id, old.id, user_id="u")):  # one entry twice
        with pytest.raises(InvalidInputError):
            bad()
    with pytest.raises(NotFoundError):
        mem.link(old.id, other.id, user_id="u")  # another user's entry
    with pytest.raises(NotFoundError):
        mem.link(old.id, new.id, user_id="v")
    assert not mem.edges("u") and not mem.edges("v")

    mem.link(old.id, new.id, user_id="u")
    mem.link(old.id, new.id, user_id="u")  # again: nothing changes
    assert [(e.src, e.dst) for e in mem.edges("u")] == [(old.id, new.id)]
    now = {e.id: e for e in mem.entries("u")}
    assert now[old.id].superseded_by == new.id and now[old.id].valid_until == new.timestamp
    assert [e.id for e in mem.history(old.id, user_id="u")] == [old.id, new.id]
    with pytest.raises(InvalidInputError, match="already has the newer state"):
        mem.link(old.id, slack.id, user_id="u")  # one newer state per entry
    with pytest.raises(InvalidInputError):
        mem.link(new.id, old.id, user_id="u")  # back from the newer state
    graph = mem.retrieve("Who is my manager?", user_id="u")
    assert graph.fact(old.id) is not None and graph.fact(old.id).superseded_by == new.id
    assert "marcus" in mem.answer("Who is my manager?", user_id="u").text.lower()

    mem.unlink(old.id, new.id, user_id="u")
    assert not mem.edges("u") and mem.get(old.id, user_id="u").superseded_by is None
    # Two sentences of one message are said at one time: either may be the newer state,
    # but not both ways round.
    first, second = [e for e in mem.entries("u") if e.source_turn_ids == ["m4"]][:2]
    mem.link(first.id, second.id, user_id="u")
    with pytest.raises(InvalidInputError, match="loop"):
        mem.link(second.id, first.id, user_id="u")


@pytest.mark.both_backends
def test_racing_links_keep_one_truth(make_memory) -> None:
    """Two handles of one store (two processes, in effect) linking one old entry to two
    newer ones, or two entries to each other, at the same moment: one link is made and
    the other refused, never both (an entry with two newer states, or a loop in which
    neither fact is current). The checks run in the store's write transaction."""
    import threading
    from datetime import timedelta

    from ariadnemem_core import InvalidInputError, Turn

    first, second = make_memory("race", hashing=True), make_memory("race", hashing=True)
    start = datetime(2024, 5, 6, 10)
    texts = ["Ana's desk is by the window.", "Ana moved to the desk by the door.", "Ana sits at the standing desk.",
             "Ben parks in lot B.", "Ben parks in lot C."]
    first.add([Turn("user", t, start + timedelta(days=i if i < 3 else 9), f"r{i}") for i, t in enumerate(texts)],
              user_id="u")
    first.flush()
    for e in [(e.src, e.dst) for e in first.edges("u")]:
        first.unlink(*e, user_id="u")
    by_turn = {e.source_turn_ids[0]: e.id for e in first.entries("u")}

    def race(*calls) -> list[str]:
        barrier, outcome = threading.Barrier(len(calls)), []

        def run(mem, old, new) -> None:
            barrier.wait()
            try:
                mem.link(old, new, user_id="u")
                outcome.append("ok")
            except InvalidInputError:
                outcome.append("refused")

        threads = [threading.Thread(target=run, args=c) for c in calls]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return sorted(outcome)

    old, a, b = by_turn["r0"], by_turn["r1"], by_turn["r2"]
    assert race((first, old, a), (second, old, b)) == ["ok", "refused"]
    assert len([e for e in second.edges("u") if e.src == old]) == 1
    newer = first.get(old, user_id="u").superseded_by
    assert [e.id for e in second.history(old, user_id="u")] == [old, newer]
    x, y = by_turn["r3"], by_turn["r4"]  # said the same day: either order is allowed, not both
    first.unlink(old, newer, user_id="u")
    assert race((first, x, y), (second, y, x)) == ["ok", "refused"]
    assert sum(1 for e in first.entries("u") if e.superseded_by) == 1


def _two_handles_three_states(make_memory, name: str):
    """Two handles of one store (as two processes) and the ids of three statements of one
    thing on three days, with no update link between them."""
    from datetime import timedelta

    from ariadnemem_core import Turn

    first, second = make_memory(name, hashing=True), make_memory(name, hashing=True)
    start = datetime(2024, 5, 6, 10)
    first.add([Turn("user", t, start + timedelta(days=i), f"c{i}") for i, t in enumerate(
        ["Ana's desk is by the window.", "Ana sits by the door now.", "Ana sits at the standing desk."])], user_id="u")
    first.flush()
    for e in [(e.src, e.dst) for e in first.edges("u")]:
        first.unlink(*e, user_id="u")
    ids = tuple(next(e.id for e in first.entries("u") if e.source_turn_ids == [f"c{i}"]) for i in range(3))
    return first, second, ids


@pytest.mark.both_backends
def test_a_link_racing_a_delete_keeps_the_chain(make_memory, monkeypatch) -> None:
    """A delete of the newer entry while its link is being written waits for the link and
    bridges the chain through it (old -> deleted -> next becomes old -> next), as done one
    after the other; on Postgres the delete read the chain before the link committed and
    then removed the link with the entry."""
    import threading
    import time

    from ariadnemem_core.store import postgres, records

    first, second, (old, mid, last) = _two_handles_three_states(make_memory, "chain")
    first.link(mid, last, user_id="u")
    slow = records.link_refused

    def slowly(*args, **kwargs):
        time.sleep(1.0)  # the link's checks hold its transaction open
        return slow(*args, **kwargs)

    monkeypatch.setattr(records, "link_refused", slowly)
    monkeypatch.setattr(postgres, "link_refused", slowly)
    linker = threading.Thread(target=first.link, args=(old, mid), kwargs={"user_id": "u"})
    linker.start()
    time.sleep(0.4)
    second.delete(mid, user_id="u")
    linker.join(30)
    assert [(e.src, e.dst) for e in second.edges("u")] == [(old, last)]
    assert [e.id for e in second.history(old, user_id="u")] == [old, last]


@pytest.mark.both_backends
def test_an_unlink_racing_a_delete_stays_undone(make_memory, monkeypatch) -> None:
    """An unlink of old -> mid while mid is deleted: the delete bridges the chain as it
    stands after the unlink (old stays current), as done one after the other; on Postgres
    the delete read the link the unlink had not yet committed away and wrote old -> last."""
    import threading
    import time

    from ariadnemem_core.store import postgres

    first, second, (old, mid, last) = _two_handles_three_states(make_memory, "unchain")
    first.link(old, mid, user_id="u")
    first.link(mid, last, user_id="u")
    touch, held = postgres.PostgresStore._touch, threading.Event()

    def slowly(cur, users) -> None:  # the unlink's transaction stays open a moment
        if not held.is_set():
            held.set()
            time.sleep(1.0)
        touch(cur, users)

    monkeypatch.setattr(postgres.PostgresStore, "_touch", staticmethod(slowly))
    unlinker = threading.Thread(target=first.unlink, args=(old, mid), kwargs={"user_id": "u"})
    unlinker.start()
    time.sleep(0.4)
    second.delete(mid, user_id="u")
    unlinker.join(30)
    assert [(e.src, e.dst) for e in second.edges("u")] == []
    assert second.get(old, user_id="u").superseded_by is None


@pytest.mark.both_backends
def test_a_window_racing_a_link_keeps_one_truth(make_memory, monkeypatch) -> None:
    """The detector reads its candidates before the window commits: when another process
    gives the old fact a newer state in between (here by ``link``), the window's own link
    from it is not written, so the old fact never has two newer states. The new statement
    is kept, as a plain fact, and the refusal is counted."""
    from datetime import timedelta

    from ariadnemem_core import Turn, coarsening

    first, second = make_memory("window-race", hashing=True), make_memory("window-race", hashing=True)
    start = datetime(2024, 5, 6, 10)
    first.add([Turn("user", "The team meeting is at 2 pm on Friday.", start, "m0"),
               Turn("user", "The offsite is in Lisbon.", start + timedelta(days=1), "m1")], user_id="u")
    first.flush()
    for e in [(e.src, e.dst) for e in first.edges("u")]:
        first.unlink(*e, user_id="u")
    ids = {e.source_turn_ids[0]: e.id for e in first.entries("u")}
    decide, decided = coarsening.decide, []

    def meanwhile(new, candidates, *args, **kwargs):
        if not decided:  # another process links the old fact after the candidates were read
            second.link(ids["m0"], ids["m1"], user_id="u")
        decided.append(decision := decide(new, candidates, *args, **kwargs))
        return decision

    monkeypatch.setattr(coarsening, "decide", meanwhile)
    first.add([Turn("user", "The team meeting moved to 3 pm on Friday.", start + timedelta(days=2), "m2")],
              user_id="u")
    first.flush()
    assert any(d.action is coarsening.Action.LINK and d.target_id == ids["m0"] for d in decided)  # the race happened
    newest = next(e for e in first.entries("u") if e.source_turn_ids == ["m2"])
    assert [(e.src, e.dst) for e in first.edges("u") if e.kind == "update"] == [(ids["m0"], ids["m1"])]
    assert first.get(ids["m0"], user_id="u").superseded_by == ids["m1"]
    assert [e.id for e in first.history(ids["m0"], user_id="u")] == [ids["m0"], ids["m1"]]
    assert newest.superseded_by is None
    assert first.stats("u")["links_refused"] == 1


@pytest.mark.both_backends
def test_a_window_keeps_its_own_link_when_it_also_merges_the_old_fact(make_memory) -> None:
    """In one window, a change links the stored fact and a later turn restates that fact
    (a MERGE, which refreshes its time past the change): the commit keeps the window's own
    link, as when the turns arrive in two windows. The check at commit time voids only
    what another writer did."""
    from datetime import timedelta

    from ariadnemem_core import Turn

    start = datetime(2024, 5, 6, 10)
    outcomes = []
    for windows in (1, 2):
        mem = make_memory(f"own-link-{windows}")
        mem.add([Turn("user", "The team meeting is at 2 pm on Friday.", start, "a")], user_id="u")
        mem.flush()
        later = [Turn("user", "The team meeting moved to 3 pm on Friday.", start + timedelta(hours=1), "b"),
                 Turn("user", "The team meeting is at 2 pm on Friday.", start + timedelta(hours=2), "c")]
        for batch in ([later] if windows == 1 else [later[:1], later[1:]]):
            mem.add(batch, user_id="u")
            mem.flush()
        by_turn = {t: e.id for e in mem.entries("u") for t in e.source_turn_ids}
        links = [(e.src, e.dst) for e in mem.edges("u") if e.kind == "update"]
        outcomes.append((links == [(by_turn["a"], by_turn["b"])], mem.stats("u")["links_refused"]))
    assert outcomes == [(True, 0), (True, 0)]


def test_a_name_given_as_an_example_is_no_value() -> None:
    """After "like", "such as", "including" or "e.g." (with or without "the"), a name is an
    example, not the slot's value; the same name stated plainly is one."""
    from ariadnemem_core.coarsening import _profile

    for text in ("Dana likes venues like the Lighthouse.", "Dana likes venues such as Lighthouse.",
                 "Dana likes venues, e.g. Lighthouse.", "Dana likes bands like The Beatles."):
        name = "The Beatles" if "Beatles" in text else "Lighthouse"
        assert "name" not in _profile(_e("a", text, entities=(name,))).values, text
    assert _profile(_e("b", "Dana booked the Lighthouse.", entities=("Lighthouse",))).values["name"] == {"lighthouse"}


def test_a_passage_is_never_an_update_and_is_never_profiled() -> None:
    """An assistant's passage (markdown, code, longer than a fact) is judged before any
    profile is built: profiling them was most of coarsening's time on agent conversations."""
    from ariadnemem_core import coarsening

    plain = _e("a", "The user's dentist appointment is at 2 pm on Friday.")
    passage = _e("b", "## Updated plan\n\n- The dentist appointment is now at 3 pm.\n- Leave at 2:30 pm.",
                 speaker="assistant")
    later = _e("c", "The user moved the dentist appointment to 3 pm.")
    cfg = Config()
    coarsening._profile_of.cache_clear()
    assert update_reason(plain, passage, 0.9, cfg) is None
    assert update_reason(passage, later, 0.9, cfg) is None
    assert coarsening._profile_of.cache_info().currsize == 0  # nothing was profiled
    assert co_true(plain, passage) == "a document"
    assert update_reason(plain, later, 0.9, cfg) is not None  # the plain statements still link


def test_a_statement_that_ends_a_held_value_supersedes_it() -> None:
    """Ending what the old statement says holds is the plainest replacement, however the new
    state is worded (or left unsaid): a named tool given up, a value denied, a thing
    scratched. A dated past event holds nothing, so nothing ends it."""
    app = _e("a", "user: For work I track all my tasks in Todoist.", speaker="user", entities=("Todoist",))
    gone = _e("b", "user: I gave up on Todoist last week.", speaker="user", entities=("Todoist",))
    assert _reason(app, gone, 0.56) == "held value ended"
    race = _e("c", "user: I'm training for a 10K race in May.", speaker="user")
    half = _e("d", "user: I signed up for the half marathon in May, not the 10K anymore.", speaker="user")
    assert _reason(race, half, 0.6) == "held value ended"
    dish = _e("e", "user: I signed up to bring lasagna to the potluck.", speaker="user")
    scratched = _e("f", "user: Scratch the lasagna, four people are bringing pasta.", speaker="user")
    assert _reason(dish, scratched, 0.5) == "held value ended"
    visit = _e("g", "user: We visited Lisbon yesterday.", speaker="user", entities=("Lisbon",))
    dropped = _e("h", "user: We dropped Lisbon from the summer plan.", speaker="user", entities=("Lisbon",))
    assert _reason(visit, dropped, 0.6) is None
    kept = _e("i", "user: I quit the gym but I still track my tasks in Todoist.", speaker="user", entities=("Todoist",))
    assert _reason(app, kept, 0.6) is None  # what is given up is something else


def test_a_name_the_old_statement_holds_is_ended_by_any_verb_of_ending() -> None:
    """What ends is named by the old statement, however the new one words the ending: its
    owner closes the account, steps down, moves off the platform or bails on the trip. The
    verb of ending is no modifier ("dropped italian" is the Italian the old one holds), and
    a name said again in a clause that holds is not ended."""
    bank = _e("a", "user: My paycheck goes into my Chase account and I pay everything out of there.",
              speaker="user", entities=("Chase",))
    closed = _e("b", "user: I closed my Chase account, the monthly fees were ridiculous.", speaker="user")
    assert _reason(bank, closed, 0.58) == "held value ended"
    treasurer = _e("c", "user: Greg Palmer is the treasurer and he's always late with the reports.",
                   speaker="user", entities=("Greg Palmer",))
    stepped = _e("d", "user: so greg stepped down at the last meeting lol.", speaker="user")
    assert _reason(treasurer, stepped, 0.5) == "held value ended"
    app = _e("e", "user: Our Django app is deployed on Heroku with the Postgres add-on.", speaker="user",
             entities=("Django", "Heroku", "Postgres"))
    assert _reason(app, _e("f", "user: we finally moved off heroku.", speaker="user"), 0.56) == "held value ended"
    trip = _e("g", "user: We're doing Croatia in August, 10 days, Split and Hvar probably.", speaker="user",
              entities=("Croatia", "Split", "Hvar"))
    bailed = _e("h", "user: so after seeing the heat wave forecasts we bailed on croatia.", speaker="user")
    assert _reason(trip, bailed, 0.47) == "held value ended"
    lessons = _e("i", "user: I've been doing duolingo italian every night before bed, 40 day streak lol.",
                 speaker="user")
    dropped = _e("j", "user: ok slightly embarrassing update, I dropped italian.", speaker="user")
    assert _reason(lessons, dropped, 0.54) == "held value ended"
    # the held name is ended in one clause and said to hold in another: not ended
    other = _e("k", "user: I closed the Chase savings account, Chase checking is where my paycheck goes.",
               speaker="user", entities=("Chase",))
    assert _reason(bank, other, 0.6) is None
    # a stopword of a name is no name ("The Home Depot" / "the dentist appointment")
    depot = _e("l", "user: I buy all my tools at The Home Depot.", speaker="user", entities=("The Home Depot",))
    dentist = _e("m", "user: I cancelled the dentist appointment.", speaker="user")
    assert _reason(depot, dentist, 0.5) is None


def test_a_correction_says_what_holds_and_too_before_a_word_is_a_degree() -> None:
    """A correction of what was said is a change word: the corrected value replaces the old
    one even when the new statement names it again ("the $142 was last year's rate"). "Too"
    means "also" only where it closes a clause: "the lemon was too tart" adds nothing."""
    from ariadnemem_core.coarsening import _profile

    renewed = _e("a", "user: Just renewed my car insurance with Geico, $142 a month for full coverage.",
                 speaker="user", entities=("Geico",))
    misread = _e("b", "user: ugh I misread the renewal. it's $156 a month, the $142 was last year's rate.",
                 speaker="user")
    assert _reason(renewed, misread, 0.49) is not None
    looked = _e("c", "user: ugh I looked at the renewal. it's $156 a month, the $142 was last year's rate.",
                speaker="user")
    assert _reason(renewed, looked, 0.49) is None  # the old value is named again, no word of change
    assert not _profile(_e("d", "user: We're going with chocolate, the lemon was too tart.")).again
    assert _profile(_e("e", "user: We're getting a chocolate cake too.")).again


def test_an_ending_needs_no_closeness_and_a_person_can_go() -> None:
    """Ending a held name ties two statements however far apart their wording is ("ditched
    the Brooks" after "running in Brooks Ghost for 3 years"); a person the old statement
    names who quits, retires or moves away ends what it says of them. A person who leaves
    something ("left the party") or quits a habit is not gone."""
    shoes = _e("a", "user: been running in Brooks Ghost for like 3 years now, how many miles does a pair last?",
               speaker="user", entities=("Brooks Ghost",))
    ditched = _e("b", "user: ok so I tried on a bunch at the store and ditched the Brooks.", speaker="user")
    assert _reason(shoes, ditched, 0.35) == "held value ended"
    assert _reason(shoes, _e("c", "user: I tried on a bunch at the store.", speaker="user"), 0.35) is None
    band = _e("d", "user: I play bass in a cover band, Leo's our drummer and he's super tight.", speaker="user",
              persons=("Leo",))
    quit_ = _e("e", "user: Leo quit, he's moving to Denver :( our new drummer is Sam Okafor.", speaker="user",
               persons=("Leo", "Sam Okafor"))
    assert _reason(band, quit_, 0.43) == "held value ended"
    party = _e("f", "user: Leo left the party early and quit smoking last year.", speaker="user", persons=("Leo",))
    assert _reason(band, party, 0.5) is None
    keys = _e("g", "user: Leo left her keys at my place, and Leo left instructions for the cat.", speaker="user",
              persons=("Leo",))
    assert _reason(band, keys, 0.5) is None
    # far apart in wording, an ending word and a shared word are not enough
    assert _reason(shoes, _e("h", "user: I ditched the Brooks.", speaker="user"), 0.2) is None


def test_a_person_said_untagged_is_still_named() -> None:
    """Two entries are about different persons only when neither says the other's: the rule
    extractor tags "Mr. Haddad" but not "mr haddad", so the later statement must be read for
    the names the earlier one tagged."""
    from ariadnemem_core.coarsening import different_subjects

    tutoring = _e("a", "user: My son Eli has math tutoring with Mr. Haddad on Mondays.", speaker="user",
                  persons=("Eli", "Haddad"))
    moved = _e("b", "user: mr haddad moved away so Eli's tutor is Ms. Oyelaran starting this week.",
               speaker="user", persons=("Oyelaran",))
    assert not different_subjects(tutoring, moved) and not different_subjects(moved, tutoring)
    assert may_replace(tutoring, moved)
    other = _e("c", "user: Ms. Oyelaran teaches piano on Fridays.", speaker="user", persons=("Oyelaran",))
    assert different_subjects(tutoring, other)


def test_punctuation_parts_a_modifier_from_its_noun() -> None:
    """"(starter:flour:water)" and "cold water" are one water: a word across punctuation is
    no modifier, so the new feeding ratio may replace the old one."""
    old = _e("a", "user: I feed my sourdough starter 1:1:1 every morning (starter:flour:water).", speaker="user")
    new = _e("b", "user: starter update: feeding 1:4:4 with cold water at night now.", speaker="user")
    assert may_replace(old, new)
    assert not may_replace(_e("c", "user: I water the fern with filtered water."),
                           _e("d", "user: I use tap water for the tomatoes now."))  # filtered / tap water


def test_a_dated_change_of_a_habit_is_no_one_off() -> None:
    coffee = _e("a", "user: I drink two cups of coffee every morning before work.", speaker="user")
    tea = _e("b", "user: I quit coffee a month ago and drink green tea in the mornings now.", speaker="user")
    assert _reason(coffee, tea, 0.6) is not None
    once = _e("c", "user: I had green tea this morning.", speaker="user")
    assert _reason(coffee, once, 0.6) is None  # a one-off beside a habit


def test_what_can_replace_and_what_says_it_changed() -> None:
    """The offline answer's reading of two unlinked statements (synthesis._latest_close)."""
    boss = _e("a", "user: My boss is Dana, she runs the platform team.", speaker="user")
    wife = _e("b", "user: my wife's new boss is Karen and she's strict.", speaker="user")
    assert not may_replace(boss, wife)  # a relative the new statement brings in
    sister = _e("c", "user: My sister Jess lives in Denver.", speaker="user", persons=("Jess",))
    moved = _e("d", "user: Jess took the job at OHSU, so she's in Portland now!", speaker="user", persons=("Jess",))
    assert may_replace(sister, moved) and says_change(sister, moved)  # the relative left out is still Jess
    wedding = _e("e", "user: My cousin's wedding is on September 14.", speaker="user")
    another = _e("f", "user: just got another wedding invite, September 28.", speaker="user")
    assert not may_replace(wedding, another)  # one more of a kind
    goal = _e("g", "user: My goal is to read 40 books this year.", speaker="user")
    count = _e("h", "user: update: I'm at 22 books now!", speaker="user")
    assert not says_change(goal, count)  # a measurement after a target
    walks = _e("i", "user: On Saturdays I take the dog to Fort Funston.", speaker="user")
    once = _e("j", "user: went to Crissy Field this Saturday (2024-10-05) instead.", speaker="user",
              at=datetime(2024, 10, 7, tzinfo=UTC))
    assert not says_change(walks, once)  # a one-off
    practice = _e("k", "user: Nora's swim practice is at the downtown YMCA.", speaker="user")
    lakeside = _e("l", "user: the team moved practices to the new Lakeside Aquatic Center.", speaker="user")
    plain = _e("m", "user: Nora loves the Lakeside Aquatic Center.", speaker="user")
    assert says_change(practice, lakeside) and not says_change(practice, plain)
    # typed in lowercase, the new thing is not capitalised: one or two words closing the clause
    tracker = _e("n", "user: our team tracks everything in trello, 4 devs + 1 designer.", speaker="user")
    linear = _e("o", "user: we moved the team over to linear last sprint, bugs were getting lost.", speaker="user")
    music = _e("p", "user: ok i caved and moved to apple music since it's in the bundle.", speaker="user")
    infinitive = _e("q", "user: we moved the standup to make sure everyone can join.", speaker="user")
    assert says_change(tracker, linear) and says_change(tracker, music)
    assert not says_change(tracker, infinitive)  # an infinitive runs on: no new thing
    # where names are capitalised, a lowercase word after "to" is a common word (an infinitive)
    cased = _e("t", "user: The team set up a GitHub Actions pipeline to automate linting, testing and deploys.",
               speaker="user")
    assert not says_change(tracker, cased)
    # nor is a capitalised sentence without a name typed in lowercase: "try pottery" is no new thing
    pottery = _e("u", "user: She pushed me to try pottery last week.", speaker="user")
    assert not says_change(tracker, pottery)
    # a change verb governing a value dates the change, "today" makes no one-off of it
    major = _e("r", "user: im a sophomore majoring in biochem.", speaker="user")
    switched = _e("s", "user: i officially switched my major to data science, the form went thru today!!",
                  speaker="user")
    assert says_change(major, switched)


def test_a_statement_beside_a_question_is_no_question_and_says_what_changed() -> None:
    """An entry that asks and also states a value states it ("How much should she eat? She's
    on Purina Pro Plan."), wherever the question sits; corrections and a changed value's
    "actually" say what holds now; a change verb before an infinitive names no new value."""
    beagle = _e("a", "user: How much should a 30 lb beagle eat per day? She's on Purina Pro Plan Sport.",
                speaker="user", entities=("Purina Pro Plan Sport",))
    hills = _e("b", "user: Daisy's been eating Hill's Science Diet for about a week (vet's idea).",
               speaker="user", entities=("Hill's Science Diet",))
    assert may_replace(beagle, hills)
    asks = _e("c", "user: Has Audrey ever volunteered? It can be so rewarding.", speaker="user")
    assert not may_replace(asks, hills)  # it only asks
    captain = _e("d", "user: Jenna is captain of our rec volleyball team.", speaker="user")
    tomas = _e("e", "user: jenna moved to denver so Tomás is captain now. can you make the schedule look nice?",
               speaker="user", entities=("Tomás",))
    assert says_change(captain, tomas)
    premium = _e("f", "user: Just renewed my car insurance, $142 a month.", speaker="user")
    misread = _e("g", "user: ugh I misread the renewal. it's $156 a month, the $142 was last year's (2023) rate.",
                 speaker="user")
    assert says_change(premium, misread)
    kit = _e("h", "user: We get HelloFresh, it's $59.94 a week.", speaker="user", entities=("HelloFresh",))
    actually = _e("i", "user: HelloFresh is actually charging us $71.92 a week.", speaker="user",
                  entities=("HelloFresh",))
    emphasis = _e("j", "user: HelloFresh is actually pretty good.", speaker="user", entities=("HelloFresh",))
    assert says_change(kit, actually) and not says_change(kit, emphasis)
    paycheck = _e("k", "user: My paycheck goes into my Chase account.", speaker="user", entities=("Chase",))
    switch = _e("l", "assistant: Keep an eye on your first paycheck after the switch to make sure it lands.",
                speaker="assistant")
    assert not says_change(paycheck, switch)


#: The third validation suite, written by someone who read neither the detector nor the
#: other suites; its misses were read when the offline answer learnt corrections, ended names
#: and statements beside questions, so it tunes now.
def test_a_verb_of_change_governs_a_value_in_any_tense() -> None:
    """"Moves the deadline to April 4" and "is going up to $19.99" say a change as "moved
    ... to" and "went up to" do."""
    from datetime import timedelta

    mar = JULY.replace(tzinfo=UTC)
    later = mar + timedelta(days=9)
    due = Entry("a", "user: The Q1 report for Halvorsen is due March 28.", speaker="user", timestamp=mar)
    moves = Entry("b", "assistant: Nice, that moves the Halvorsen report deadline to April 4.", speaker="assistant",
                  timestamp=later)
    assert says_change(due, moves)
    plan = Entry("c", "user: spotify family is $16.99, netflix standard $15.49.", speaker="user", timestamp=mar)
    up = Entry("d", "user: spotify emailed me that Family is going up to $19.99 next billing cycle", speaker="user",
               timestamp=later)
    assert says_change(plan, up)
    assert not says_change(due, Entry("e", "assistant: Nice, that leaves time for the Halvorsen report.",
                                      speaker="assistant", timestamp=later))


def test_emphasis_is_no_document_and_an_open_question_says_nothing_of_now() -> None:
    """An assistant's "standup at **10:15** now" answers "when is standup these days?" (bold
    in a sentence is emphasis, not the markup of a document); "ask whether the school has
    early drop-off (often from 7:30)" does not answer when the school starts."""
    from datetime import timedelta

    from ariadnemem_core.evidence import Fact
    from ariadnemem_core.synthesis import extractive_answer

    aug = JULY.replace(tzinfo=UTC)
    later = aug + timedelta(days=9)
    standup = Fact("s", "user: Our standup is at 9:30 and usually runs 15 min, so I'm free after.", aug, ["t0"],
                   0.77, "terminal", label="F1", speaker="user")
    echo = Fact("e", "assistant: With standup at **10:15** now (ending around 10:30), I've moved your focus block.",
                later, ["t3"], 0.17, "terminal", label="F2", speaker="assistant")
    answer = extractive_answer("What time does the user's daily standup start these days?", _graph(standup, echo))
    assert "10:15" in answer.text and answer.fact_ids == ["F2"]
    school = Fact("o", "user: Owen's elementary school starts at 8:05 so we leave the house at 7:45.", aug, ["t0"],
                  0.88, "terminal", label="F1", speaker="user")
    ask = Fact("k", "assistant: Ask whether Owen's school has early drop-off (often from 7:30).", later, ["t3"], 0.29,
               "terminal", label="F2", speaker="assistant")
    assert "8:05" in extractive_answer("What time does Owen's school start?", _graph(school, ask)).text


def test_a_change_points_back_to_the_state_before_it() -> None:
    """"How much was the rent originally?" is answered by the statement the best-scoring
    one changed ("rent went up to $1,790"), though it scored lower; a present question
    still gets the new value."""
    from datetime import timedelta

    from ariadnemem_core.evidence import Fact
    from ariadnemem_core.synthesis import extractive_answer

    jan = JULY.replace(tzinfo=UTC)
    rent = Fact("r", "user: Our rent is $1,650 a month for the two-bedroom.", jan, ["t0"], 0.40, "terminal",
                label="F1", speaker="user")
    up = Fact("u", "user: Fixed stuff: rent went up to $1,790 in June.", jan + timedelta(days=40), ["t4"], 0.70,
              "terminal", label="F2", speaker="user")
    first = extractive_answer("How much was the rent originally?", _graph(rent, up))
    assert "$1,650" in first.text and "$1,790" not in first.text and first.fact_ids == ["F1"]
    assert "$1,790" in extractive_answer("How much is the rent?", _graph(rent, up)).text


VALIDATION_3 = Path(__file__).parent / "data" / "update_dialogues_validation3.json"
#: The fourth, written the same way; its misses were read when endings learnt names said in
#: any clause, persons who go and no closeness, so it tunes now.
VALIDATION_4 = Path(__file__).parent / "data" / "update_dialogues_validation4.json"
#: The fifth and sixth, written the same way; their misses were read (tenses of change verbs;
#: lowercase chat), so they tune now.
VALIDATION_5 = Path(__file__).parent / "data" / "update_dialogues_validation5.json"
VALIDATION_6 = Path(__file__).parent / "data" / "update_dialogues_validation6.json"
#: The seventh, written the same way: the last judge (read after its last measurement). What
#: the offline memory reaches on it, measured, not targets: rules written from other dialogues
#: carry little.
VALIDATION_7 = Path(__file__).parent / "data" / "update_dialogues_validation7.json"


@pytest.mark.parametrize(("path", "floors"), [
    (VALIDATION_3, {"linked": 30.0, "latest_answered": 70.0, "original_answered": 90.0, "negatives_answered": 90.0}),
    (VALIDATION_4, {"linked": 25.0, "latest_answered": 80.0, "original_answered": 90.0, "negatives_answered": 80.0}),
    (VALIDATION_5, {"latest_answered": 40.0, "original_answered": 75.0, "negatives_answered": 80.0}),
    (VALIDATION_6, {"linked": 25.0, "latest_answered": 75.0, "original_answered": 80.0, "negatives_answered": 70.0}),
    (VALIDATION_7, {"linked": 10.0, "latest_answered": 50.0, "original_answered": 95.0, "negatives_answered": 80.0}),
], ids=["validation-3", "validation-4", "validation-5", "validation-6", "validation-7"])
def test_the_validation_suites_hold_their_figures(minilm, path: Path, floors: dict[str, float]) -> None:
    suite = load_suite(path)
    assert len([d for d in suite if d["kind"] == "update"]) == 20 and len(suite) == 30
    result = run_update_suite(suite, embedder=minilm)
    summary = {k: result[k] for k in ("linked", "false_links", *floors)}
    assert result["false_links"] <= 1, summary
    assert all(result[k] >= v for k, v in floors.items()), summary


@pytest.mark.parametrize("name", ["update_dialogues_validation8.json", "update_dialogues_validation9.json"])
def test_the_next_judges_are_well_formed_and_unmeasured(name: str) -> None:
    """The eighth and ninth suites judge the next round of rules: their figures are taken
    by hand (figures only, no dialogue read) when a round is done; here they are checked
    for shape only (no memory reads them), so no figure of them is seen in between."""
    suite = load_suite(Path(__file__).parent / "data" / name)
    updates = [d for d in suite if d["kind"] == "update"]
    assert len(updates) == 20 and len(suite) == 30
    for d in suite:
        turns = [t["text"].lower() for t in d["turns"]]
        assert all(0 <= i < len(turns) for i in (*d["old"], *d["new"])), d["id"]
        said = [turns[i] for i in (d["new"] if d["kind"] == "update" else d["old"])]
        assert any(d["latest"].lower() in t for t in said), d["id"]
        if d["kind"] == "update":
            assert any(d["original"].lower() in turns[i] for i in d["old"]), d["id"]
