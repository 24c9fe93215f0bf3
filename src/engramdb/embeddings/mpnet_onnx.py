"""all-mpnet-base-v2 on onnxruntime, int8: the ``mpnet`` embedder's weights as an ONNX graph built at first use.

The numpy forward pass (:mod:`engramdb.embeddings.mpnet`) streams 340 MB of fp32 weights per query. The same
weights as an ONNX graph with dynamic int8 quantisation of every linear layer but the feed-forward
down-projections run ~5x faster (bench/RESULTS.md, "Issue 21, models, second round"); quantising the
down-projections too breaks the model (cosine 0.89-0.92 to the fp32 vector), so they stay fp32.

The graph is built once, on first use, from the extracted safetensors with the ``onnx`` package (in the ``mpnet``
extra; no torch, nothing downloaded), quantised by onnxruntime and written next to the weights under a temporary
name then renamed, so a killed process never leaves half a file. Later opens only load it. The relative-position
bias is computed in numpy per batch length and fed to the graph, as is the attention mask.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import onnxruntime as ort
else:
    from engramdb._lazy import numpy as np

from engramdb.embeddings.mpnet import (
    _HEADS,
    _LAYERS,
    _PAD_ID,
    DIM,
    MPNET_PROFILE,
    MpnetEmbedder,
    _buckets,
    load_safetensors,
)
from engramdb.embeddings.profile import FusionProfile
from engramdb.errors import ConfigError, EmbeddingError, ModelIntegrityError

__all__ = ["INT8_MODEL_ID", "MpnetInt8Embedder", "build_graph"]

#: The int8 graph's vectors differ from the fp32 ones (cosine ~0.99), so stores are stamped apart.
INT8_MODEL_ID: Final = "all-mpnet-base-v2-int8"
_GRAPH: Final = "model-int8.onnx"
_EPS: Final = 1e-5
_OPSET: Final = 17
#: The linear layers quantised to int8: queries, keys, values, attention output, feed-forward up-projection.
_QUANTISED: Final = ("q", "k", "v", "o", "up")
_MISSING_ONNX: Final = 'embedder "mpnet" builds its ONNX graph with the onnx package: pip install "engramdb[mpnet]"'


def build_graph(weights: Path, dest: Path) -> None:
    """Write the int8 ONNX graph of the safetensors at ``weights`` to ``dest`` (atomically)."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise ConfigError(_MISSING_ONNX) from None
    w = load_safetensors(weights)
    inits: list[Any] = []
    nodes: list[Any] = []

    def init(name: str, arr: npt.NDArray[Any]) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def norm(x: str, key: str, out: str) -> str:
        return node(
            "LayerNormalization",
            [x, init(out + "_w", w[key + ".weight"]), init(out + "_b", w[key + ".bias"])],
            out,
            axis=-1,
            epsilon=_EPS,
        )

    try:
        x = node(
            "Add",
            [
                node("Gather", [init("wemb", w["embeddings.word_embeddings.weight"]), "input_ids"], "we"),
                node("Gather", [init("pemb", w["embeddings.position_embeddings.weight"]), "position_ids"], "pe"),
            ],
            "emb",
        )
        x = norm(x, "embeddings.LayerNorm", "x0")
        init("split", np.array([0, 0, _HEADS, DIM // _HEADS], dtype=np.int64))
        init("merge", np.array([0, 0, DIM], dtype=np.int64))
        for name, value in (("scale", 1.0 / np.sqrt(DIM // _HEADS)), ("isqrt2", 1.0 / np.sqrt(2)), ("one", 1.0)):
            init(name, np.array(value, dtype=np.float32))
        init("half", np.array(0.5, dtype=np.float32))
        for i in range(_LAYERS):
            p, q = f"encoder.layer.{i}.", f"l{i}_"

            def linear(inp: str, key: str, tag: str, p: str = p, q: str = q) -> str:
                # Node names matter: the down-projections are excluded from quantisation by name.
                product = node("MatMul", [inp, init(q + tag + "_w", w[p + key + ".weight"].T)], q + tag + "_mm")
                return node("Add", [product, init(q + tag + "_b", w[p + key + ".bias"])], q + tag)

            def heads(t: str, tag: str, perm: list[int], q: str = q) -> str:
                return node("Transpose", [node("Reshape", [t, "split"], q + tag + "_r")], q + tag + "_t", perm=perm)

            qh = heads(linear(x, "attention.attn.q", "q"), "q", [0, 2, 1, 3])
            kh = heads(linear(x, "attention.attn.k", "k"), "k", [0, 2, 3, 1])
            vh = heads(linear(x, "attention.attn.v", "v"), "v", [0, 2, 1, 3])
            s = node("Mul", [node("MatMul", [qh, kh], q + "qk"), "scale"], q + "qks")
            s = node("Add", [node("Add", [s, "rel_bias"], q + "sb"), "add_mask"], q + "sm")
            ctx = node("MatMul", [node("Softmax", [s], q + "att", axis=-1), vh], q + "ctx")
            ctx = node("Reshape", [node("Transpose", [ctx], q + "ctxt", perm=[0, 2, 1, 3]), "merge"], q + "ctxm")
            attended = norm(
                node("Add", [linear(ctx, "attention.attn.o", "o"), x], q + "res1"), p + "attention.LayerNorm", q + "a1"
            )
            up = linear(attended, "intermediate.dense", "up")
            erf = node("Erf", [node("Mul", [up, "isqrt2"], q + "gs")], q + "ge")
            gelu = node("Mul", [node("Mul", [up, "half"], q + "gh"), node("Add", [erf, "one"], q + "g1")], q + "gelu")
            down = node("Add", [linear(gelu, "output.dense", "down"), attended], q + "res2")
            x = norm(down, p + "output.LayerNorm", q + "x")
    except KeyError as exc:
        raise ModelIntegrityError(f"all-mpnet-base-v2's weights lack {exc}") from None
    nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        nodes,
        "all-mpnet-base-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "l"]),
            helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["b", "l"]),
            helper.make_tensor_value_info("add_mask", TensorProto.FLOAT, ["b", 1, 1, "l"]),
            helper.make_tensor_value_info("rel_bias", TensorProto.FLOAT, [1, _HEADS, "l", "l"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["b", "l", DIM])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 8
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".onnx-build-") as scratch:
        fp32, int8 = Path(scratch) / "fp32.onnx", Path(scratch) / "int8.onnx"
        onnx.save(model, str(fp32))
        del model, graph
        quantize_dynamic(
            str(fp32),
            str(int8),
            weight_type=QuantType.QInt8,
            # Only the linear layers' weight products: not the down-projections, not the attention's products of
            # activations, not the embedding tables.
            nodes_to_quantize=[f"l{i}_{t}_mm" for i in range(_LAYERS) for t in _QUANTISED],
        )
        os.replace(int8, dest)


class MpnetInt8Embedder(MpnetEmbedder):
    """all-mpnet-base-v2 as an int8 ONNX graph (the ``mpnet`` embedder): 768-d unit vectors, model id
    ``all-mpnet-base-v2-int8``. The graph is built into the model's cache folder on first use (~1 minute)."""

    model_id: str = INT8_MODEL_ID
    profile: FusionProfile = MPNET_PROFILE

    def __init__(self, *, cache_dir: str | os.PathLike[str] | None = None, threads: int | None = None) -> None:
        super().__init__(cache_dir=cache_dir)
        # One text per run: dynamic quantisation scales activations per run, so a text embedded beside others got
        # another vector than alone (cosine 0.97 for "Sign into FB"); alone, a text always gets the same vector
        # whether it is a query or one of a batch stored, and no padding is computed.
        self.batch_size = 1
        if threads is not None and threads < 1:
            raise ConfigError("threads must be at least 1")
        self.threads = threads or max(1, min(os.cpu_count() or 1, 4))
        self._session: ort.InferenceSession | None = None
        self._rel_bias: npt.NDArray[np.float32] = np.zeros((0, _HEADS), dtype=np.float32)
        self._session_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MpnetInt8Embedder(model_id={self.model_id!r}, cache_dir={str(self.cache_dir)!r})"

    def load(self) -> None:
        """Unpack, build the graph (first use) and open it now; otherwise it happens on the first :meth:`embed`."""
        self._ensure_session()

    def _ensure_session(self) -> ort.InferenceSession:
        session = self._session
        if session is not None:
            return session
        with self._session_lock:
            if self._session is None:
                folder = self._verified()
                tensors = load_safetensors(folder / "model.safetensors")
                if "encoder.relative_attention_bias.weight" not in tensors:
                    raise ModelIntegrityError("all-mpnet-base-v2's weights lack its relative attention bias")
                # Only the small bias table is read here: the graph holds every other weight.
                self._rel_bias = np.array(tensors["encoder.relative_attention_bias.weight"], dtype=np.float32)
                path = folder / _GRAPH
                if not path.is_file():
                    build_graph(folder / "model.safetensors", path)
                try:
                    self._session = self._open(path)
                except EmbeddingError:
                    # A damaged graph (a disk error, a foreign file) is built again once.
                    path.unlink(missing_ok=True)
                    build_graph(folder / "model.safetensors", path)
                    self._session = self._open(path)
            return self._session

    def _open(self, path: Path) -> ort.InferenceSession:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own untyped errors for unreadable graphs
            raise EmbeddingError(f"cannot open {path}: {' '.join(str(exc).split())[:200]}") from exc

    def _pooled(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        session = self._ensure_session()
        length = ids.shape[1]
        feeds = {
            "input_ids": ids,
            "position_ids": np.cumsum(mask, axis=1) * mask + _PAD_ID,
            "add_mask": ((1.0 - mask[:, None, None, :]) * -1e9).astype(np.float32),
            "rel_bias": np.ascontiguousarray(self._rel_bias[_buckets(length)].transpose(2, 0, 1)[None]),
        }
        hidden = session.run(None, feeds)[0]
        m = mask[..., None].astype(np.float32)
        pooled: npt.NDArray[np.float32] = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return pooled
