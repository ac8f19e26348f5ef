"""The same BERT encoder as bert.py, run by ONNX Runtime: the graph is built in memory from the
model's ``model.safetensors`` (no ONNX file is downloaded or written), then handed to an
``onnxruntime.InferenceSession``.

The graph uses ONNX Runtime's fused CPU operators (domain ``com.microsoft``): one
``EmbedLayerNormalization`` (word and position embeddings, layer norm, and each text's length for
the attention), then per layer an ``Attention`` (query, key and value in one product, softmax over
the real tokens only), ``SkipLayerNormalization`` (bias, residual and layer norm in one pass) and
``BiasGelu`` (exact erf GELU); then mean pooling over the real tokens and L2 normalisation, as
bert.py does. Arithmetic is float32; with ``quantize`` the dense products' weights are int8 (ONNX
Runtime's dynamic quantisation: activations are quantised per product at run time).
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["OrtBert", "build_graph"]

F32 = NDArray[np.float32]
MS = "com.microsoft"


def build_graph(folder: Path, weights: dict[str, Any]) -> Any:
    """The encoder as an ``onnx.ModelProto``: inputs ``ids`` and ``mask`` (batch, length) int32,
    output ``vectors`` (batch, hidden) float32, unit length."""
    from onnx import (  # type: ignore[import-not-found,unused-ignore]
        TensorProto,
        helper,
        numpy_helper,
    )

    raw = json.loads((folder / "config.json").read_text())
    hidden, heads, layers = (int(raw[k]) for k in
                             ("hidden_size", "num_attention_heads", "num_hidden_layers"))
    eps = float(raw["layer_norm_eps"])
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
    inits: list[Any] = []
    nodes: list[Any] = []

    def init(name: str, array: NDArray[Any]) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def w(name: str) -> F32:
        return np.asarray(weights[prefix + name], dtype=np.float32)

    def node(op: str, inputs: list[str], output: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output

    # every token is of type 0: its embedding is folded into the positions' (as bert.py does)
    position = w("embeddings.position_embeddings.weight") + w("embeddings.token_type_embeddings.weight")[0]
    nodes.append(helper.make_node(
        "EmbedLayerNormalization",
        ["ids", "", init("word", w("embeddings.word_embeddings.weight")), init("position", position),
         "", init("emb_ln_w", w("embeddings.LayerNorm.weight")),
         init("emb_ln_b", w("embeddings.LayerNorm.bias")), "mask"],
        ["x0", "lengths"], name="embed", domain=MS, epsilon=eps))
    x = "x0"
    for i in range(layers):
        p = f"encoder.layer.{i}."
        qkv_w = np.concatenate([w(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")]).T
        qkv_b = np.concatenate([w(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")])
        att = node("Attention", [x, init(f"l{i}_qkv_w", qkv_w), init(f"l{i}_qkv_b", qkv_b), "lengths"],
                   f"l{i}_att", MS, num_heads=heads)
        t = node("MatMul", [att, init(f"l{i}_o_w", w(p + "attention.output.dense.weight").T)], f"l{i}_o")
        y = node("SkipLayerNormalization",
                 [t, x, init(f"l{i}_ln1_w", w(p + "attention.output.LayerNorm.weight")),
                  init(f"l{i}_ln1_b", w(p + "attention.output.LayerNorm.bias")),
                  init(f"l{i}_o_b", w(p + "attention.output.dense.bias"))], f"l{i}_y", MS, epsilon=eps)
        h = node("MatMul", [y, init(f"l{i}_i_w", w(p + "intermediate.dense.weight").T)], f"l{i}_h")
        g = node("BiasGelu", [h, init(f"l{i}_i_b", w(p + "intermediate.dense.bias"))], f"l{i}_g", MS)
        t = node("MatMul", [g, init(f"l{i}_out_w", w(p + "output.dense.weight").T)], f"l{i}_out")
        x = node("SkipLayerNormalization",
                 [t, y, init(f"l{i}_ln2_w", w(p + "output.LayerNorm.weight")),
                  init(f"l{i}_ln2_b", w(p + "output.LayerNorm.bias")),
                  init(f"l{i}_out_b", w(p + "output.dense.bias"))], f"l{i}_x", MS, epsilon=eps)
    # mean over the real tokens: (batch, 1, length) @ (batch, length, hidden), then / length
    m = node("Cast", ["mask"], "mask_f", to=TensorProto.FLOAT)
    m3 = node("Unsqueeze", [m, init("axis1", np.array([1], np.int64))], "mask_3d")
    pooled = node("MatMul", [m3, x], "pooled_3d")
    pooled = node("Squeeze", [pooled, "axis1"], "pooled_sum")
    count = node("ReduceSum", [m, "axis1"], "count", keepdims=1)
    pooled = node("Div", [pooled, node("Max", [count, init("one", np.array(1e-9, np.float32))],
                                       "count_min")], "pooled")
    norm = node("ReduceL2", [pooled, "axis1"], "norm", keepdims=1)
    node("Div", [pooled, node("Max", [norm, init("tiny", np.array(1e-12, np.float32))], "norm_min")],
         "vectors")
    graph = helper.make_graph(
        nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info("ids", TensorProto.INT32, ["batch", "length"]),
         helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "length"])],
        [helper.make_tensor_value_info("vectors", TensorProto.FLOAT, ["batch", hidden])],
        initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                   helper.make_opsetid(MS, 1)],
                             producer_name="hermes-core")


def quantized(model: Any) -> bytes:
    """``model`` with int8 weights in its dense products (ONNX Runtime's dynamic quantisation);
    the quantiser writes a file, so it goes through a temporary folder, deleted at once."""
    from onnx import TensorProto  # type: ignore[import-not-found,unused-ignore]
    from onnxruntime.quantization import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
        QuantType,
        quantize_dynamic,
    )

    def not_the_quantizers(record: logging.LogRecord) -> bool:
        # it logs advice for offline model preparation (pre-processing, shape inference of the
        # fused operators) to the root logger at WARNING: not for a user of the embedder
        return "onnxruntime" not in record.pathname

    root = logging.getLogger()
    root.addFilter(not_the_quantizers)
    try:
        with tempfile.TemporaryDirectory(prefix="hermes-minilm-") as tmp:
            out = Path(tmp) / "int8.onnx"
            # per output column scales (one scale per matrix moved vectors to cosine 0.88);
            # the pooling product multiplies two activations and stays float32
            quantize_dynamic(model, out, weight_type=QuantType.QInt8, per_channel=True,
                             nodes_to_exclude=["pooled_3d"],
                             extra_options={"DefaultTensorType": TensorProto.FLOAT})
            return out.read_bytes()
    finally:
        root.removeFilter(not_the_quantizers)


class OrtBert:
    """The encoder in an ONNX Runtime session; :meth:`encode` is thread-safe (a session's run
    is) and takes what ``bert.Bert.encode`` takes. ``weights`` (from safetensors) is emptied."""

    def __init__(self, folder: Path, weights: dict[str, Any], threads: int | None,
                 quantize: bool = False) -> None:
        import onnxruntime as ort  # type: ignore[import-untyped,import-not-found,unused-ignore]

        model = build_graph(folder, weights)
        weights.clear()  # the graph holds copies: ~90 MB less at the peak of loading
        data = quantized(model) if quantize else model.SerializeToString()
        del model
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or 0  # 0: ONNX Runtime's own choice (every core)
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # threads that have no work sleep instead of spinning: the embedder shares the machine
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        self.quantize = quantize

    def encode(self, ids: NDArray[np.int64], mask: NDArray[np.int64]) -> F32:
        out = self.session.run(["vectors"], {"ids": ids.astype(np.int32, copy=False),
                                             "mask": mask.astype(np.int32, copy=False)})
        return np.asarray(out[0], dtype=np.float32)
