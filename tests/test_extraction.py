"""RuleExtractor and the grounding rules: concrete sentences with exact expected output.

All offline and fast (no embedder, no store). The reference turn time is Monday
2023-05-08 13:56 UTC, so "yesterday" is 2023-05-07, "last Friday" 2023-05-05, etc.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from ariadnemem_core import text as lex
from ariadnemem_core.extraction import ExtractionContext, Extractor, RuleExtractor, dates, other_party_for
from ariadnemem_core.extraction import grounding as g
from ariadnemem_core.models import Turn

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday
PAIR = ["Caroline", "Melanie"]


def mk(speaker: str, text: str, when: datetime | None = T0, turn_id: str | None = None, **metadata) -> Turn:
    return Turn(speaker, text, when, turn_id, metadata)


def one(text: str, speaker: str = "Caroline", when: datetime | None = T0, previous: list[Turn] | None = None,
        participants: list[str] | None = None, **metadata):
    """Extract a single turn; the other party defaults to the other member of PAIR."""
    if previous is None:
        other = next(p for p in PAIR if p != speaker)
        previous = [mk(other, "Hi!")]
    turn = mk(speaker, text, when, **metadata)
    (entry,) = RuleExtractor().extract([turn], ExtractionContext(previous, participants or list(PAIR)))
    return entry


def grounded(text: str, when: datetime | None = T0) -> str:
    return dates.ground_time(lex.normalize_text(text), when)


# --------------------------------------------------------------------------- pronouns
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'm so happy today", "Caroline is so happy"),
        ("I’m so happy", "Caroline is so happy"),  # curly apostrophe
        ("I am tired", "Caroline is tired"),
        ("I've been painting", "Caroline has been painting"),
        ("I'll call you", "Caroline will call Melanie"),
        ("I'd love that", "Caroline would love that"),
        ("I'd been there before", "Caroline had been there before"),
        ("I was at the park", "Caroline was at the park"),
        ("My sister and I went hiking", "Caroline's sister and Caroline went hiking"),
        ("This book is mine.", "This book is Caroline's."),
        ("Let me know", "Let Caroline know"),
        ("i think so", "Caroline thinks so"),
        ("You're amazing and your art is too", "Melanie is amazing and Melanie's art is too"),
        ("You’ve grown so much", "Melanie has grown so much"),
        ("YOU did it!", "Melanie did it!"),
        ("you have a great eye", "Melanie has a great eye"),
        ("Do you have a dog?", "Does Melanie have a dog?"),  # the inverted auxiliary agrees
        ("Is that book yours?", "Is that book Melanie's?"),
    ],
)
def test_pronouns_are_grounded(text: str, expected: str) -> None:
    out = g.ground_pronouns(lex.normalize_text(text), "Caroline", "Melanie")
    assert expected in out, out


@pytest.mark.parametrize(
    "text",
    [
        "It's hard, you know?",
        "That was a gold mine of ideas.",
        "Miami is mine-free myth youth YouTube",
        "We use i.e. shorthand",
    ],
)
def test_pronoun_lookalikes_and_fillers_are_left_alone(text: str) -> None:
    out = g.ground_pronouns(text, "Caroline", "Melanie")
    assert "Caroline" not in out and "Melanie" not in out, out


def test_unicode_case_lookalikes_are_not_pronouns() -> None:
    """Found by the fuzz test: IGNORECASE lets "İ" match "i", but it lowers to "i̇"."""
    assert g.ground_pronouns("İ", "Caroline", "Melanie") == "İ"
    assert g.ground_pronouns("İstanbul trip, mİne. I am back", "Caroline", "Melanie") == \
        "İstanbul trip, mİne. Caroline is back"


def test_second_person_is_left_alone_without_other_party() -> None:
    assert g.ground_pronouns("I saw your photo", "Caroline", None) == "Caroline saw your photo"
    assert g.ground_pronouns_ex("I saw your photo", "Caroline", "Melanie") == ("Caroline saw Melanie's photo", True)
    assert g.ground_pronouns_ex("I saw it", "Caroline", "Melanie")[1] is False


def test_speaker_is_prefixed_only_when_not_named() -> None:
    assert one("That's awesome!", speaker="Melanie").text == "Melanie: That's awesome!"
    assert one("I'm fine, thanks.").text == "Caroline is fine, thanks."
    assert one("Thanks, Caroline! Great news.", speaker="Melanie").text == "Melanie: Thanks, Caroline! Great news."


def test_restatement_normalizes_whitespace_and_control_characters() -> None:
    e = one("I   love\tpainting\x07 and\n\nhiking  ")
    assert e.text == "Caroline loves painting and hiking"


# --------------------------------------------------------------------------- relative time
@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("yesterday", "yesterday (2023-05-07)"),
        ("today", "today (2023-05-08)"),
        ("tonight", "tonight (2023-05-08)"),
        ("this morning", "this morning (2023-05-08)"),
        ("tomorrow", "tomorrow (2023-05-09)"),
        ("last night", "last night (2023-05-07)"),
        ("the day before yesterday", "the day before yesterday (2023-05-06)"),
        ("two days ago", "two days ago (2023-05-06)"),
        ("3 days ago", "3 days ago (2023-05-05)"),
        ("a few days ago", "a few days ago (around 2023-05-05)"),
        ("a week ago", "a week ago (week of 2023-05-01)"),
        ("a couple of weeks ago", "a couple of weeks ago (around the week of 2023-04-24)"),
        ("two months ago", "two months ago (March 2023)"),
        ("three years ago", "three years ago (2020)"),
        ("a few years ago", "a few years ago (around 2020)"),
        ("last week", "last week (week of 2023-05-01)"),
        ("this week", "this week (week of 2023-05-08)"),
        ("next week", "next week (week of 2023-05-15)"),
        ("last month", "last month (April 2023)"),
        ("this month", "this month (May 2023)"),
        ("next month", "next month (June 2023)"),
        ("last year", "last year (2022)"),
        ("this year", "this year (2023)"),
        ("next year", "next year (2024)"),
        ("last weekend", "last weekend (weekend of 2023-05-06)"),
        ("this past weekend", "this past weekend (weekend of 2023-05-06)"),
        ("next weekend", "next weekend (weekend of 2023-05-13)"),
        ("last Friday", "last Friday (2023-05-05)"),
        ("last fri", "last fri (2023-05-05)"),
        ("this past Sunday", "this past Sunday (2023-05-07)"),
        ("next Friday", "next Friday (2023-05-12)"),
        ("this coming Monday", "this coming Monday (2023-05-15)"),
        ("last summer", "last summer (summer 2022)"),
        ("Yesterday", "Yesterday (2023-05-07)"),
    ],
)
def test_relative_time_is_grounded(phrase: str, expected: str) -> None:
    assert grounded(f"We talked about it {phrase}.") == f"We talked about it {expected}."


def test_weekday_direction_follows_the_sentence_tense() -> None:
    assert grounded("I went hiking on Friday.") == "I went hiking on Friday (2023-05-05)."
    assert grounded("I will go hiking on Friday.") == "I will go hiking on Friday (2023-05-12)."
    assert grounded("We're gonna paint on Saturday!") == "We're gonna paint on Saturday (2023-05-13)!"
    # Only the sentence around the weekday counts: the earlier "will" does not leak into it.
    assert grounded("I will rest. I ran on Friday.") == "I will rest. I ran on Friday (2023-05-05)."
    assert grounded("I have a concert this Friday.") == "I have a concert this Friday (2023-05-12)."
    assert grounded("I had a great time this Sunday.") == "I had a great time this Sunday (2023-05-07)."
    assert grounded("We went camping this weekend.") == "We went camping this weekend (weekend of 2023-05-06)."
    assert grounded("I'm going hiking this weekend.") == "I'm going hiking this weekend (weekend of 2023-05-13)."


def test_a_rescheduled_time_points_forward() -> None:
    # "moved" is past tense, but the time it moves to is the coming one ...
    assert grounded("The kickoff moved to 3 pm on Friday.") == "The kickoff moved to 3 pm on Friday (2023-05-12)."
    assert grounded("We rescheduled it to Monday.") == "We rescheduled it to Monday (2023-05-15)."
    # ... while moving to a place on a weekday is a past event.
    assert grounded("I moved to Boston on Friday.") == "I moved to Boston on Friday (2023-05-05)."
    # An acknowledgement is not a past event; getting something on a weekday is.
    assert grounded("Got it, the review is at 2 pm on Friday.") == \
        "Got it, the review is at 2 pm on Friday (2023-05-12)."
    assert grounded("I got it on Friday.") == "I got it on Friday (2023-05-05)."
    assert grounded("Noted, Thursday at 10 am with Tom.") == "Noted, Thursday (2023-05-11) at 10 am with Tom."
    # Only an opening acknowledgement: "agreed" inside the sentence is its past tense.
    assert grounded("We agreed, on Friday, to split the bill.") == \
        "We agreed, on Friday (2023-05-05), to split the bill."


def test_keywords_keep_words_of_any_script_whole() -> None:
    """Accented letters were word breaks ("reunión" -> "reuni", "München" -> "nchen") and
    other scripts gave no keyword at all."""
    assert lex.keywords("La reunión en München, crème brûlée") == ["la", "reunión", "en", "münchen", "crème",
                                                                  "brûlée"]
    assert lex.keywords("Мой рейс во вторник") == ["мой", "рейс", "во", "вторник"]


def test_time_edges_month_end_year_start_and_same_weekday() -> None:
    mar31 = datetime(2023, 3, 31, 12, tzinfo=UTC)
    assert grounded("next month", mar31) == "next month (April 2023)"
    assert grounded("a month ago", mar31) == "a month ago (February 2023)"
    jan = datetime(2023, 1, 2, 9, tzinfo=UTC)
    assert grounded("last month and last year", jan) == "last month (December 2022) and last year (2022)"
    friday = datetime(2023, 5, 12, 18, tzinfo=UTC)
    assert grounded("last Friday", friday) == "last Friday (2023-05-05)"  # never the day itself
    sunday = datetime(2023, 5, 14, 18, tzinfo=UTC)
    assert grounded("last weekend", sunday) == "last weekend (weekend of 2023-05-06)"
    assert grounded("yesterday", datetime(2024, 3, 1, tzinfo=UTC)) == "yesterday (2024-02-29)"  # leap day


def test_no_grounding_without_timestamp_or_inside_words() -> None:
    assert grounded("I saw it yesterday and last week.", None) == "I saw it yesterday and last week."
    for text in ("Yesterdays are gone.", "Happy birthday!", "I swim on Mondays.", "Weekdays are busy.",
                 "A lot happened in the last month.", "Last time we talked, it rained.",
                 # a habit names no one day
                 "I do my big grocery run Sunday mornings.", "We call grandma every Sunday.",
                 "Friday nights are pizza nights."):
        assert grounded(text) == text
    assert grounded("See you Friday night.") != "See you Friday night."  # one evening, grounded


def test_possessive_time_expression_keeps_its_apostrophe() -> None:
    assert grounded("yesterday's game") == "yesterday's (2023-05-07) game"


def test_restatement_grounds_pronouns_and_time_together() -> None:
    e = one("I went to a LGBTQ support group yesterday and you inspired me!")
    assert e.text == ("Caroline went to a LGBTQ support group yesterday (2023-05-07) and Melanie inspired "
                      "Caroline!")


# --------------------------------------------------------------------------- fields
def test_keywords_are_content_words_with_joined_times() -> None:
    kw = lex.keywords("Oh wow, yeah I went to the LGBTQ support group at 2 pm! It was at 3:30pm, you know.")
    assert kw == ["lgbtq", "support", "group", "2pm", "3:30pm"]
    assert lex.keywords("The kids' kids, the KIDS and Caroline's 2 cats") == ["kids", "caroline", "2", "cats"]
    assert lex.keywords("a b c 7") == ["7"]  # min length 2 except digits


def test_persons_entities_location_topic() -> None:
    e = one("Thanks, Mel! My friend Jenna and I visited Sweden and walked in the Pride Parade.")
    assert e.persons == ["Caroline", "Melanie", "Jenna"]  # "Mel" is a nickname of a participant
    assert "Sweden" in e.entities and "Pride Parade" in e.entities
    assert not {"Caroline", "Melanie", "Jenna", "Mel", "Thanks", "My"} & set(e.entities)
    assert e.location == "Sweden"
    assert "mel" not in e.keywords and "jenna" not in e.keywords  # names live in persons


def test_persons_are_precise() -> None:
    # Sentence-initial capitals, months, weekdays and interjections are not persons.
    e = one("Wow! Awesome stuff. On Friday in May I bought Nike shoes at Target.")
    assert e.persons == ["Caroline"]
    assert e.entities == ["Nike", "Target"]
    assert e.location == "Target"
    # "you" grounded -> the other party is a person of the entry.
    assert one("Did you like it?").persons == ["Caroline", "Melanie"]
    # A greeted or introduced name is a person; "Mom" counts too.
    assert one("Hey Jenna, I called Mom.").persons == ["Caroline", "Jenna", "Mom"]


def test_location_skips_persons_dates_and_common_words() -> None:
    assert one("I moved to New York City last year.").location == "New York City"
    assert one("I talked to Jenna in May.").location is None
    assert one("See you on Friday at noon!").location is None
    assert one("Say hi to Melanie for me!").location is None


@pytest.mark.parametrize(
    ("text", "topic"),
    [
        ("I adopted a puppy and took my dog to the vet.", "pets"),
        ("My kids and my husband went to see my parents.", "family"),
        ("I got a promotion at my job and my boss is happy.", "work"),
        ("I painted a sunrise on a canvas for the art gallery.", "art"),
        ("Just chatting, nothing much.", None),
    ],
)
def test_topic(text: str, topic: str | None) -> None:
    assert one(text).topic == topic


def test_image_caption_is_folded_in() -> None:
    e = one("Look at this!", blip_caption="a photo of a sunset over the lake")
    assert e.text == "Caroline: Look at this! [shared image: a photo of a sunset over the lake]"
    assert "sunset" in e.keywords and "lake" in e.keywords
    assert e.metadata["blip_caption"] == "a photo of a sunset over the lake"
    e2 = one("Here it is.", image_caption="a red bicycle")
    assert e2.text.endswith(" [shared image: a red bicycle]")


@pytest.mark.parametrize(
    ("text", "attributes"),
    [
        ("My phone number is 555-0199.", {"phone number": "555-0199"}),
        ("Btw my dog's name is Max, he's cute.", {"dog's name": "Max"}),
        ("my favorite color is blue and my car is a red Tesla!", {"favorite color": "blue", "car": "a red Tesla"}),
        ("My dog is named Max.", {"dog's name": "Max"}),
        ("My email is bob@example.com. Write me!", {"email": "bob@example.com"}),
        ("My favorite food is mac and cheese but I eat it rarely.", {"favorite food": "mac and cheese"}),
        ("My phone number is 555-0142 in case you need to reach me.", {"phone number": "555-0142"}),
        ("My email is ann@example.org unless it bounces.", {"email": "ann@example.org"}),
        ("My new phone number is 555-0199.", {"phone number": "555-0199"}),
    ],
)
def test_self_stated_attributes(text: str, attributes: dict[str, str]) -> None:
    assert one(text).metadata["attributes"] == attributes


@pytest.mark.parametrize("text", ["My mom is so supportive.", "I love my job.", "Your phone number is 123.",
                                  "My life is just crazy right now."])
def test_no_attributes_means_no_key(text: str) -> None:
    assert "attributes" not in one(text).metadata


def test_attributes_value_is_capped_at_six_words() -> None:
    attrs = g.find_attributes("My motto is one two three four five six seven eight")
    assert attrs == {"motto": "one two three four five six"}


# --------------------------------------------------------------------------- the extractor
def test_one_entry_per_turn_with_provenance_and_fields() -> None:
    turns = [mk("Caroline", "I joined a pottery class yesterday!", turn_id="c1", dia_id="D1:1"),
             mk("Melanie", "Wow!", T0 + timedelta(minutes=1), turn_id="m1"),
             mk("Caroline", "Do you want to come with me next week?", T0 + timedelta(minutes=2), turn_id="c2")]
    rx = RuleExtractor()
    assert isinstance(rx, Extractor)
    entries = rx.extract(turns, ExtractionContext([], []))
    assert [e.source_turn_ids for e in entries] == [["c1"], ["m1"], ["c2"]]
    assert [e.speaker for e in entries] == ["Caroline", "Melanie", "Caroline"]
    assert len({e.id for e in entries}) == 3 and all(e.id.startswith("e-") for e in entries)
    for e, t in zip(entries, turns, strict=True):
        assert e.timestamp == e.first_timestamp == t.timestamp
        assert e.embedding is None and e.user_id == "default"
    # The caller's metadata, and the speaker's own words (Config.own_words) where the
    # restatement differs from them; a turn already context-free keeps none.
    assert entries[0].metadata == {"dia_id": "D1:1", "said": "I joined a pottery class yesterday (2023-05-07)!"}
    assert "said" not in entries[1].metadata
    assert entries[0].metadata is not turns[0].metadata
    assert entries[1].text == "Melanie: Wow!"
    assert entries[2].text == "Does Melanie want to come with Caroline next week (week of 2023-05-15)?"
    assert entries[0].text == "Caroline joined a pottery class yesterday (2023-05-07)!"


def test_own_words_are_kept_with_time_grounded_and_never_taken_from_the_caller() -> None:
    turns = [mk("Nate", "I played Catan with my friends yesterday. Loved it!", turn_id="n1", said="forged"),
             mk("Nate", "Here's my script:\n\n```python\nprint('hi')\n```", T0 + timedelta(minutes=1))]
    first, second, lead, code = RuleExtractor(split_sentences=True).extract(turns,
                                                                           ExtractionContext([], ["Nate", "Joanna"]))
    assert first.text == "Nate played Catan with Nate's friends yesterday (2023-05-07)."
    assert first.metadata["said"] == "I played Catan with my friends yesterday (2023-05-07)."
    assert first.metadata["turn_said"] == "forged"  # caller data is kept, under another key
    assert second.text == "Nate: Loved it!" and "said" not in second.metadata  # nothing re-worded
    assert lead.metadata["said"] == "Here's my script:" and lead.text == "Here's Nate's script:"
    assert code.metadata["segment"] == "code" and "said" not in code.metadata  # a block is shown as laid out


def test_you_resolves_across_the_window_boundary() -> None:
    before = [mk("Melanie", "How was your week?", T0 - timedelta(minutes=1))]
    first = mk("Caroline", "Great, thank you! How about yours?")
    (e,) = RuleExtractor().extract([first], ExtractionContext(before, []))
    assert e.text == "Caroline: Great, thank Melanie! How about Melanie's?"
    assert e.persons == ["Caroline", "Melanie"]


def test_other_party_for() -> None:
    a1, b1, a2 = mk("Ana", "x"), mk("Ben", "y"), mk("Ana", "z")
    assert other_party_for(a2, [a1, b1], ["Ana", "Ben"]) == "Ben"
    assert other_party_for(a2, [b1, mk("Cat", "w"), a1], []) == "Cat"  # the most recent other speaker
    assert other_party_for(a1, [], ["Ana", "Ben"]) == "Ben"  # no history: another participant
    assert other_party_for(a1, [a2], ["Ana"]) is None  # nobody else known
    # Unknown other party: "you" stays, "I" is still grounded.
    (e,) = RuleExtractor().extract([mk("Ana", "I like your hat")], ExtractionContext([], []))
    assert e.text == "Ana likes your hat" and e.persons == ["Ana"]


def test_caller_metadata_attributes_are_not_read_as_self_stated() -> None:
    e = one("Nothing to see.", attributes={"phone": "fake"})
    assert "attributes" not in e.metadata and e.metadata["turn_attributes"] == {"phone": "fake"}


def test_sentence_mode_gives_atomic_entries_covering_the_turn() -> None:
    turn = mk("Caroline", "Wow! I adopted a cat yesterday. It is grey. My sister loves hiking.", turn_id="t1",
              blip_caption="a grey cat")
    rx = RuleExtractor(split_sentences=True)
    entries = rx.extract([turn], ExtractionContext([], PAIR))
    assert [e.text for e in entries] == [
        "Caroline adopted a cat yesterday (2023-05-07). It is grey.",
        "Caroline's sister loves hiking.",
        "Caroline [shared image: a grey cat]",
    ]
    assert all(e.source_turn_ids == ["t1"] for e in entries)
    (only,) = rx.extract([mk("Melanie", "Wow, thanks!", turn_id="m")], ExtractionContext([], PAIR))
    assert only.text == "Melanie: Wow, thanks!"


def test_many_turns_extract_and_threads_agree() -> None:
    speakers = ["Caroline", "Melanie"]
    texts = ["I went to the beach with my kids yesterday!", "That's awesome! Did you swim?",
             "Yes, my son loved it. Next month we're going camping in Oregon.", "My phone number is 555-0199.",
             "Thanks, Mel! I'll call you on Friday at 2 pm."]
    turns = [mk(speakers[i % 2], texts[i % len(texts)], T0 + timedelta(minutes=i), f"t{i}",
                **({"blip_caption": "a photo of a beach"} if i % 7 == 0 else {}))
             for i in range(2000)]
    rx = RuleExtractor()
    entries = [e for i in range(0, len(turns), 20)
               for e in rx.extract(turns[i:i + 20], ExtractionContext(turns[max(0, i - 5):i], speakers))]
    assert len(entries) == 2000
    assert [e.source_turn_ids[0] for e in entries] == [t.turn_id for t in turns]

    results: list[list[str]] = []

    def work() -> None:
        results.append([e.text for e in rx.extract(turns[:200], ExtractionContext([], speakers))])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(r == results[0] for r in results)
    assert results[0] == [e.text for e in entries[:200]]
