"""Grounding keeps grammar: substituted subjects agree with their verbs, role speakers
read as "the user" / "the assistant", and the speaker prefix names roles the same way."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

import pytest

from ariadnemem_core import text as lex
from ariadnemem_core.config import Config
from ariadnemem_core.extraction import ExtractionContext, RuleExtractor
from ariadnemem_core.extraction import grounding as g
from ariadnemem_core.models import Turn

# (speaker, other party, said, expected restatement)
CASES: list[tuple[str, str, str, str]] = [
    # third-person agreement after a substituted subject
    ("Priya", "Sam", "I need to plan the sprint.", "Priya needs to plan the sprint."),
    ("Caroline", "Melanie", "I think so.", "Caroline thinks so."),
    ("Caroline", "Melanie", "I really love it!", "Caroline really loves it!"),
    ("Jon", "Gina", "I go there every week.", "Jon goes there every week."),
    ("Jon", "Gina", "I try to run daily.", "Jon tries to run daily."),
    ("Jon", "Gina", "I watch movies on Fridays.", "Jon watches movies on Fridays."),
    ("Jon", "Gina", "I miss my dog.", "Jon misses Jon's dog."),
    ("Jon", "Gina", "I also have two cats.", "Jon also has two cats."),
    ("Jon", "Gina", "I do miss nature.", "Jon does miss nature."),
    ("Caroline", "Melanie", "I think you need a break.", "Caroline thinks Melanie needs a break."),
    ("Caroline", "Melanie", "When you paint, you feel calm.", "When Melanie paints, Melanie feels calm."),
    # "you" opening a subordinate clause is its subject
    ("Maya", "Leo", "My phone number is 555-0142 in case you need to reach me.",
     "Maya's phone number is 555-0142 in case Leo needs to reach Maya."),
    ("Leo", "Maya", "Before you go, do you have the keys?", "Before Maya goes, does Maya have the keys?"),
    ("Leo", "Maya", "Call me after you land.", "Call Leo after Maya lands."),
    ("Leo", "Maya", "It is bigger than you think.", "It is bigger than Maya thinks."),
    ("user", "assistant", "Just in case you need it, my number is 555-0142.",
     "Just in case the assistant needs it, the user's number is 555-0142."),
    # past tense, modals, -ing and ambiguous past forms stay as said
    ("Caroline", "Melanie", "I went to the park.", "Caroline went to the park."),
    ("Caroline", "Melanie", "I painted a lake.", "Caroline painted a lake."),
    ("Caroline", "Melanie", "I can swim.", "Caroline can swim."),
    ("Caroline", "Melanie", "I should really rest.", "Caroline should really rest."),
    ("Caroline", "Melanie", "I read that book last year.", "Caroline read that book last year."),
    ("Caroline", "Melanie", "I'm painting again.", "Caroline is painting again."),
    ("Caroline", "Melanie", "I was there.", "Caroline was there."),
    # questions: an inverted auxiliary carries the agreement
    ("Priya", "Sam", "Do I need a visa?", "Does Priya need a visa?"),
    ("Caroline", "Melanie", "Do you have a dog?", "Does Melanie have a dog?"),
    ("Caroline", "Melanie", "What do you think?", "What does Melanie think?"),
    ("Caroline", "Melanie", "How are you?", "How is Melanie?"),
    ("Caroline", "Melanie", "Have you been there?", "Has Melanie been there?"),
    ("Caroline", "Melanie", "Were you at the show?", "Was Melanie at the show?"),
    ("Caroline", "Melanie", "What're you working on?", "What's Melanie working on?"),
    ("Caroline", "Melanie", "Did you go?", "Did Melanie go?"),
    ("Caroline", "Melanie", "So do I.", "So does Caroline."),
    # negations and contractions
    ("Caroline", "Melanie", "I don't know.", "Caroline doesn't know."),
    ("Caroline", "Melanie", "I do not know.", "Caroline does not know."),
    ("Caroline", "Melanie", "Don't you think so?", "Doesn't Melanie think so?"),
    ("Caroline", "Melanie", "I haven't seen it.", "Caroline hasn't seen it."),
    ("Caroline", "Melanie", "You're right and I'm glad.", "Melanie is right and Caroline is glad."),
    ("Caroline", "Melanie", "I'd love that.", "Caroline would love that."),
    # possessives, objects, reflexives
    ("Caroline", "Melanie", "My sister loves your art.", "Caroline's sister loves Melanie's art."),
    ("Caroline", "Melanie", "Let me know.", "Let Caroline know."),
    ("Caroline", "Melanie", "I'll give you hope.", "Caroline will give Melanie hope."),
    ("Caroline", "Melanie", "I taught myself guitar.", "Caroline taught themselves guitar."),
    ("Caroline", "Melanie", "Is that book yours?", "Is that book Melanie's?"),
    # role speakers
    ("user", "assistant", "Can you help me create a sprint plan?",
     "Can the assistant help the user create a sprint plan?"),
    ("user", "assistant", "I need to plan the sprint.", "The user needs to plan the sprint."),
    ("user", "assistant", "My team has five people.", "The user's team has five people."),
    ("human", "AI", "Do you know my name?", "Does the assistant know the user's name?"),
    ("assistant", "user", "You need to rest. I know you can.",
     "The user needs to rest. The assistant knows the user can."),
    ("assistant", "user", "If you need further details, feel free to let me know!",
     "If the user needs further details, feel free to let the assistant know!"),
    ("bot", "user", "I don't have access to your calendar.",
     "The assistant doesn't have access to the user's calendar."),
    ("user", "assistant", "Thanks, that helps me a lot.", "Thanks, that helps the user a lot."),
]


@pytest.mark.parametrize(("speaker", "other", "said", "expected"), CASES)
def test_grounding_keeps_grammar(speaker: str, other: str, said: str, expected: str) -> None:
    assert g.ground_pronouns(lex.normalize_text(said), speaker, other) == expected


@pytest.mark.parametrize(
    "said",
    ["I love you guys!", "It's hard, you know?", "I mean, it was fine."],
)
def test_plural_you_and_fillers_are_not_the_other_party(said: str) -> None:
    assert "Melanie" not in g.ground_pronouns(said, "Caroline", "Melanie")


def test_third_person_forms() -> None:
    assert [g.third_person(w) for w in ("need", "try", "watch", "go", "am", "Have", "do")] == \
        ["needs", "tries", "watches", "goes", "is", "Has", "does"]
    assert [g.third_person(w) for w in ("went", "can", "too", "read", "painting")] == [None] * 5


def test_role_speakers_are_named_as_roles() -> None:
    assert g.speaker_label("User") == "the user"
    assert g.speaker_label("assistant") == "the assistant"
    assert g.speaker_label("Jarvis", ("jarvis",)) == "the assistant"
    assert g.speaker_label("Priya") == "Priya"


def _entries(speaker: str, other: str, text: str, config: Config) -> list[str]:
    ts = datetime(2024, 3, 1, 9, 0)
    turns = [Turn(other, "Hi!", ts, "t0"), Turn(speaker, text, ts, "t1")]
    extractor = RuleExtractor(split_sentences=True, assistant_speakers=config.assistant_speakers)
    return [e.text for e in extractor.extract(turns[1:], ExtractionContext(turns[:1], [other, speaker]))]


def test_extracted_entries_name_role_speakers() -> None:
    cfg = Config()
    assert _entries("assistant", "user", "Here is a sprint plan for the team.", cfg) == \
        ["The assistant: Here is a sprint plan for the team."]
    assert _entries("user", "assistant", "I need a sprint plan.", cfg) == ["The user needs a sprint plan."]
    # A custom assistant name from the config is a role too.
    custom = cfg.replace(assistant_speakers=("jarvis",))
    assert _entries("Jarvis", "user", "I can draft it.", custom) == ["The assistant can draft it."]
    # A person keeps their name.
    assert _entries("Priya", "Sam", "Sounds good to the team.", cfg) == ["Priya: Sounds good to the team."]


def test_extracted_entries_agree_in_subordinate_clauses() -> None:
    assert _entries("Maya", "Leo", "My phone number is 555-0142 in case you need to reach me.", Config()) == \
        ["Maya's phone number is 555-0142 in case Leo needs to reach Maya."]


def test_a_note_is_not_prefixed_with_its_speaker() -> None:
    """A note (``metadata["note"] is True``) about the conversation reads as written; a
    first-person word in it still stands for its speaker, and it has no "own words"."""
    ts = datetime(2024, 3, 1, 9, 0)
    extractor = RuleExtractor(split_sentences=True)
    notes = [Turn("user", "Maya is vegetarian since 2021.", ts, "n1", {"note": True}),
             Turn("user", "I need a vegan cake for Saturday.", ts, "n2", {"note": True}),
             Turn("user", "Maya is vegetarian since 2021.", ts, "n3", {"note": "yes"})]  # only True marks a note
    entries = extractor.extract(notes, ExtractionContext([], ["user"]))
    assert [e.text for e in entries] == ["Maya is vegetarian since 2021.",
                                         "The user needs a vegan cake for Saturday (2024-03-02).",
                                         "The user: Maya is vegetarian since 2021."]
    assert "said" not in entries[1].metadata


def test_config_round_trip_keeps_assistant_speakers_a_tuple() -> None:
    cfg = Config.from_dict(Config(assistant_speakers=("jarvis",)).to_dict() | {"assistant_speakers": ["jarvis"]})
    assert cfg.assistant_speakers == ("jarvis",)
    assert hash(cfg)


def test_sentences_end_before_lowercase_words_but_not_after_titles() -> None:
    """Chat is often written in lowercase, and a title's period ends no sentence: split,
    "the coach is Mr." lost the coach's name to the next entry."""
    assert g.split_atomic("ok small update, I dropped the choir. the orchestra is my thing now. too much?") == [
        "ok small update, I dropped the choir.", "the orchestra is my thing now.", "too much?"]
    assert g.split_atomic("My son's coach is Mr. Alvarez, he's strict. Dr. Lee agrees.") == [
        "My son's coach is Mr. Alvarez, he's strict.", "Dr. Lee agrees."]
    one = "we meet at 9 a.m. tomorrow, e.g. in room 4."
    assert g.split_atomic(one) == [one]
    # typed in lowercase, a title is still a title (split, "my dentist dr." lost the name)
    assert g.split_atomic("my dentist dr. halvorsen said i grind my teeth. a guard costs $300.") == [
        "my dentist dr. halvorsen said i grind my teeth.", "a guard costs $300."]
    assert g.split_atomic("The page took 300 ms. Then it crashed.") == ["The page took 300 ms.", "Then it crashed."]


def test_a_titled_name_is_a_person() -> None:
    persons, _, _ = lex.scan_names("Mr. Alvarez retired, the new coach is Ms. Okafor.")
    assert persons == ["Alvarez", "Okafor"]
    # in lowercase chat too, but only with the title's period, and "ms." is a duration's unit
    persons, _, surfaces = lex.scan_names("i'm with dr. mbeki now, it took 300 ms. later on, dr appt at 3")
    assert persons == ["Mbeki"] and surfaces == {"mbeki"}
    # a title after a determiner is the noun, and a common word after one is no surname
    for text in ("the dr. wants more tests", "my dr. appointment got moved", "dr. visit went fine"):
        assert lex.scan_names(text)[0] == [], text


@pytest.mark.parametrize(("stamp", "said", "day"), [
    # 23:30 in New York is 04:30 the next day in UTC: "tomorrow" is the next day in New York
    ("2024-03-01T23:30:00-05:00", "I'm flying to Lisbon tomorrow.", "2024-03-02"),
    # 00:30 in Tokyo is 15:30 the day before in UTC: "yesterday" is the day before in Tokyo
    ("2024-03-02T00:30:00+09:00", "I had sushi yesterday.", "2024-03-01"),
    # no offset: UTC, as documented
    ("2024-03-01T23:30:00", "I'm flying to Lisbon tomorrow.", "2024-03-02"),
])
def test_relative_days_are_read_in_the_speakers_own_offset(stamp: str, said: str, day: str) -> None:
    """A turn keeps the offset it was given (the same instant as in UTC), and pending
    storage keeps it too, so relative time is grounded in the speaker's calendar."""
    from ariadnemem_core import AriadneMemory

    turn = Turn("Maya", said, stamp, "t1")
    back = Turn.from_dict(turn.to_dict())
    assert back.timestamp == turn.timestamp and back.timestamp.utcoffset() == turn.timestamp.utcoffset()
    with AriadneMemory(None) as mem:
        mem.add([turn], user_id="u")
        assert mem.storage.pending("u")[0][2].timestamp.utcoffset() == turn.timestamp.utcoffset()
        mem.flush()
        (entry,) = mem.entries("u")
    assert f"({day})" in entry.text
    assert entry.timestamp == turn.timestamp and entry.timestamp.utcoffset() == timedelta(0)  # same instant, UTC


@pytest.mark.parametrize("flush_between", [False, True])
def test_an_update_is_linked_alike_in_one_window_or_across_two(flush_between: bool) -> None:
    """The day a stored entry was said is read in its speaker's offset, as in the window it
    came from: "by Friday" said on a Friday evening in New York is that Friday, not a day
    already past in UTC, whether or not it was stored before its update arrived."""
    from ariadnemem_core import AriadneMemory

    with AriadneMemory(None) as mem:
        mem.add([Turn("Maya", "I need to finish the report by Friday.", "2024-03-01T20:00:00-05:00", "t1")],
                user_id="u")
        if flush_between:
            mem.flush()
        mem.add([Turn("Maya", "I need to finish the report by Monday.", "2024-03-02T10:00:00-05:00", "t2")],
                user_id="u")
        mem.flush()
        old, new = mem.entries("u")
    assert "(2024-03-01)" in old.text and old.valid_until is not None and new.valid_until is None


def test_an_offset_turn_keeps_a_fixed_offset_and_an_offsetless_zone_reads_as_utc() -> None:
    from zoneinfo import ZoneInfo

    class NoOffset(tzinfo):
        def utcoffset(self, dt):  # type: ignore[no-untyped-def]
            return None

    # A zone's time in a DST gap (02:30 on 2024-03-10 does not exist in New York) round-trips.
    t = Turn("Ana", "hello", datetime(2024, 3, 10, 2, 30, tzinfo=ZoneInfo("America/New_York")), "z")
    assert Turn.from_dict(t.to_dict()).timestamp == t.timestamp
    naive_like = Turn("Ana", "hello", datetime(2024, 3, 1, 12, tzinfo=NoOffset()), "n").timestamp
    assert naive_like is not None and naive_like.utcoffset() is not None  # comparable with every other turn
