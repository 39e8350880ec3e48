"""Write tests/data/minilm_reference.npz: reference vectors of all-MiniLM-L6-v2 made by
sentence-transformers (torch), which the torch-free default embedder must reproduce.

Needs the ``torch`` extra (``pip install -e ".[torch]"``); the test that reads the file
does not. Run from the repository root: ``python scripts/make_minilm_reference.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ariadnemem_core.embedding import TorchMiniLMEmbedder

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "minilm_reference.npz"

_STORY = (
    "Maya signed up for the bouldering gym on Elm Street in March, climbed twice a week with Leo, "
    "and by June she could finish the overhang route that had beaten her all spring. "
)
_CODE = '''def merge(entries, threshold=0.85):
    """Merge near-duplicate entries by cosine similarity."""
    kept = []
    for e in sorted(entries, key=lambda x: x.ts):
        if all(float(e.vec @ k.vec) < threshold for k in kept):
            kept.append(e)
    return kept
'''

TEXTS: list[str] = [
    # short dialogue turns and questions
    "Hey Mel! Good to see you! How have you been?",
    "I went climbing yesterday and my forearms are still sore.",
    "By the way, the project kickoff meeting is at 2 pm on Friday.",
    "What is Bob's phone number?",
    "My phone number is 555-0199.",
    "When did Caroline go to the LGBTQ support group?",
    "I moved to Berlin on 3 May 2021 and started at the hospital a week later.",
    "ok",
    "Thanks!!! 😊🎉",
    "lol same",
    "",
    "   ",
    "  leading and trailing spaces are stripped before tokenising  ",
    "Tabs\tand\nnew lines\r\nin one turn.",
    "UPPER CASE AND lower case are the same to an uncased model.",
    "Numbers: 3.14159, 2,718, -42, 1e-12, 10^6, $1,299.99, 50%.",
    "Dates: 2023-05-08, 8 May 2023, May 8th, 08/05/23, last Tuesday.",
    "email me at maya.k@example.org or visit https://example.org/path?q=1&x=2",
    "Recommend a good sci-fi book?",
    "She adopted a rescue dog named Biscuit after her old cat passed away.",
    # non-English
    "Ich habe gestern mit dem Klettern angefangen und meine Unterarme tun weh.",
    "Je suis allée au marché samedi matin acheter des fraises et du fromage.",
    "¿Dónde está la estación de tren más cercana? Necesito llegar a Madrid.",
    "Это сообщение написано по-русски, чтобы проверить кириллицу.",
    "我昨天去了北京的博物馆，看到了很多古代的文物。",
    "明日の会議は午後二時から始まります。よろしくお願いします。",
    "هذه جملة باللغة العربية لاختبار النص من اليمين إلى اليسار.",
    "नमस्ते, आज मौसम बहुत अच्छा है।",
    "Ελληνικά: η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "Café naïve coöperate façade — accents, dashes – and “quotes”.",
    # code and markup
    _CODE,
    "SELECT id, text FROM entries WHERE user_id = ? AND ts >= ? ORDER BY ts DESC LIMIT 10;",
    '{"speaker": "Maya", "text": "hello", "timestamp": "2024-03-04T09:00:00"}',
    "<div class=\"card\"><p>Hello <b>world</b></p></div>",
    "git rebase main && python -m pytest tests/test_embedding.py -q -x",
    "x = [i ** 2 for i in range(10) if i % 2 == 0]  # squares of even numbers",
    # medium
    _STORY,
    _STORY * 2,
    "The store keeps every entry in SQLite with its provenance and embedding, and a chroma "
    "collection per user holds the vectors for nearest-neighbour search with metadata filters.",
    # long: beyond the 256-token window (truncated the same way by both paths)
    _STORY * 8,
    _STORY * 20,
    _CODE * 6,
    "word " * 600,
    " ".join(str(i) for i in range(700)),
    "Ich habe gestern mit dem Klettern angefangen. " * 40,
    "我昨天去了北京的博物馆，看到了很多古代的文物。" * 30,
    ("Q: what did we decide about the budget? A: we moved the offsite to October and cut the "
     "catering line by a third, pending Leo's numbers. ") * 12,
    "a" * 3000,
    "🙂 " * 300,
    "The end.",
]


def main() -> None:
    assert len(TEXTS) == 50, len(TEXTS)
    vectors = TorchMiniLMEmbedder().embed(TEXTS)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, texts=np.array(TEXTS), vectors=vectors.astype(np.float32))
    print(f"wrote {OUT}: {vectors.shape}")


if __name__ == "__main__":
    main()
