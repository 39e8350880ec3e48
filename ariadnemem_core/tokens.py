"""Token counting that works offline.

tiktoken downloads its BPE files on first use; llama-index-core (a dependency) ships the
cl100k and o200k files, so we point ``TIKTOKEN_CACHE_DIR`` at them before first use unless
the user has set it. Counts are those of ``cl100k_base`` (GPT-4 / GPT-3.5 family), the
encoding LoCoMo-era papers report.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

ENCODING = "cl100k_base"


def _bundled_cache_dir() -> str | None:
    try:
        import llama_index.core as lic
    except ImportError:  # pragma: no cover - llama-index-core is a hard dependency
        return None
    path = Path(lic.__file__).resolve().parent / "_static" / "tiktoken_cache"
    return str(path) if path.is_dir() else None


@functools.lru_cache(maxsize=1)
def _encoding():
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        bundled = _bundled_cache_dir()
        if bundled:
            os.environ["TIKTOKEN_CACHE_DIR"] = bundled
    import tiktoken

    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    """Number of ``cl100k_base`` tokens in ``text``."""
    if not text:
        return 0
    return len(_encoding().encode(text, disallowed_special=()))
