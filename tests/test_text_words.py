"""The word tokenizers of ``text.py``: what each splits, and why they differ."""

from __future__ import annotations

from pathlib import Path

from ariadnemem_core import AriadneMemory, Config, HashEmbedder, Turn
from ariadnemem_core.store import fts_query
from ariadnemem_core.text import COUNTER_STOPWORDS, QUERY_STOPWORDS, index_words, letter_words, value_tokens, words


def test_words_are_ascii_letter_and_digit_runs() -> None:
    assert words("Jean-Luc's 5pm CAFÉ, x_y!") == ["jean", "luc", "s", "5pm", "caf", "x", "y"]
    assert words("") == [] and words("?!") == []


def test_letter_words_split_at_digits_for_word_lists() -> None:
    assert letter_words("Meet at 5pm on May5") == ["meet", "at", "pm", "on", "may"]
    assert value_tokens("Moved to 5pm on 2023-05-07, gate B12") == ["5pm", "2023", "05", "07", "b12"]


def test_index_words_split_like_the_fts5_unicode61_tokenizer(tmp_path: Path) -> None:
    assert index_words("Café 東京 snake_case Ünïcode 42") == ["café", "東京", "snake", "case", "ünïcode", "42"]
    with AriadneMemory(tmp_path / "m", Config(window_size=1), embedder=HashEmbedder()) as mem:
        mem.add(Turn("Ana", "Ana met Lola at the Café in Zürich."), user_id="ana")
        # the query is cut into the index's words: the non-ASCII ones are found
        assert mem.storage.lexical_search("café zürich", 5, user_id="ana")
        assert words("zürich") == ["z", "rich"]  # the comparison tokenizer would not find it


def test_query_stopwords_leave_the_lexical_query() -> None:
    assert fts_query("What is the café of Ana?") == '"café" OR "ana"'
    assert fts_query("what is the") is None
    assert {"what", "the"} <= QUERY_STOPWORDS and {"times", "often", "total"} <= COUNTER_STOPWORDS


def test_hash_embedder_features_are_the_words() -> None:
    emb = HashEmbedder(dim=64)
    # same words in any case and punctuation: the same vector
    assert (emb.embed(["Jean-Luc's CAT"]) == emb.embed(["jean luc s cat"])).all()
    assert not (emb.embed(["jean luc"]) == emb.embed(["luc jean"])).all()  # bigrams keep the order


def test_keywords_keep_combining_marks_in_their_word() -> None:
    """A vowel sign or virama is part of its word in every script (Python's re would cut
    "हिन्दी" into consonants), and a decomposed accent stays on its letter."""
    from ariadnemem_core.text import keywords

    assert keywords("मैं हिन्दी बोलती हूँ, தமிழ் also, and cafe\u0301 ❤️") == [
        "मैं", "हिन्दी", "बोलती", "हूँ", "தமிழ்", "cafe\u0301"]


def test_keywords_keep_numbers_before_a_keycap_and_numeric_letters() -> None:
    from ariadnemem_core.text import keywords

    assert keywords("1️⃣ Book flights, 2️⃣ at 2 pm: H₂O, 50 m²") == [
        "1", "book", "flights", "2", "2pm", "h₂o", "50", "m²"]
