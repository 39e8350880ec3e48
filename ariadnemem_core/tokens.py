"""Token counting that works offline and starts fast.

tiktoken downloads its BPE files on first use; llama-index-core (a dependency) ships the
``cl100k_base`` file. We find that file through the package's import spec, without importing
llama-index (which costs ~2 s), and build tiktoken's own ``Encoding`` from it, so nothing
process-wide (such as ``TIKTOKEN_CACHE_DIR``) is changed. When the user has set
``TIKTOKEN_CACHE_DIR``, or the shipped file is absent, tiktoken's usual lookup is used.
Counts are those of ``cl100k_base`` (GPT-4 / GPT-3.5 family), the encoding LoCoMo-era papers
report.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

ENCODING = "cl100k_base"
#: Where tiktoken fetches the file, and its SHA-256 (both as in ``tiktoken_ext.openai_public``).
_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
#: ``cl100k_base``'s split pattern and special tokens (as in ``tiktoken_ext.openai_public``).
_PAT_STR = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
            r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
_SPECIAL = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}


def _bundled_file() -> Path | None:
    """llama-index-core's copy of the ``cl100k_base`` file, found without importing it.

    The file sits in the package's tiktoken cache directory under the SHA-1 of its URL
    (tiktoken's cache naming).
    """
    try:
        spec = importlib.util.find_spec("llama_index.core")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    name = hashlib.sha1(_URL.encode()).hexdigest()
    for location in spec.submodule_search_locations:
        path = Path(location) / "_static" / "tiktoken_cache" / name
        if path.is_file():
            return path
    return None


@functools.lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    import tiktoken

    bundled = None if "TIKTOKEN_CACHE_DIR" in os.environ else _bundled_file()
    if bundled is None:
        return tiktoken.get_encoding(ENCODING)
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(bundled), expected_hash=_SHA256)
    return tiktoken.Encoding(name=ENCODING, pat_str=_PAT_STR, mergeable_ranks=ranks, special_tokens=_SPECIAL)


#: Texts up to this many characters have their count cached: a query's budget counts the
#: same facts, excerpts and lines again and again (about 400 counts a query on BEAM, 12% of
#: its time before the cache), and a fact is short.
_CACHED_CHARS = 2000


def count_tokens(text: str) -> int:
    """Number of ``cl100k_base`` tokens in ``text``."""
    if not text:
        return 0
    return _cached_count(text) if len(text) <= _CACHED_CHARS else _count(text)


def _count(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


_cached_count = functools.lru_cache(maxsize=65536)(_count)


def is_common_word(word: str) -> bool:
    """Whether ``word`` (lowercase) is one token of cl100k after a space: the vocabulary
    holds the common words of English whole ("wants", "appointment") and splits rare names
    ("mbeki", "halvorsen") into pieces."""
    return count_tokens(" " + word) == 1
