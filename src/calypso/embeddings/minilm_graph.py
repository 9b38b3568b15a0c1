"""A compact inference graph for the bundled all-MiniLM-L6-v2, built from the shipped model's own weights.

The shipped ``model.onnx`` is a PyTorch (dynamo) export whose int8 weights are dequantized by ``Cast``/``Mul``
nodes: onnxruntime folds them into fp32 copies at load (96 MB RssAnon) and runs some 300 small
operators per call, most of them the export's shape plumbing around attention. This module reads the same
initializers and writes the standard BERT encoder with onnxruntime's fused operators instead: per layer one
QKV product, ``MultiHeadAttention``, ``SkipLayerNormalization`` and ``Gelu`` (about 12 operators).

``precision="int8"`` keeps the weights int8 (per output column, the shipped scales) and multiplies with
``DynamicQuantizeMatMul`` (activations quantized per tensor at run time, int8 kernels with VNNI/AMX where the
CPU has them), except the products in ``INT8_FP32_PRODUCTS``; the word-embedding table stays int8 and only
the looked-up rows are dequantized.
``precision="fp32"`` multiplies with the shipped weights dequantized, as the export does: its vectors are the
export's (cosine 0.9999998 or more on SciFact claims) at 1.3 times its passages/s.

Built with the ``onnx`` package; ``local_onnx`` keeps the bytes in the user's cache, so later processes skip
this module's work and ``onnx`` itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

from calypso.embeddings.encoder_graph import GraphBuilder

Precision = Literal["int8", "fp32"]

HIDDEN = 384
HEADS = 12
LAYERS = 6
EPSILON = 1e-12
_PREFIX = "inner."


class _Weights:
    """The export's initializers by module name (``encoder.layer.0.attention.self.query`` …)."""

    def __init__(self, model: Any) -> None:
        from onnx import numpy_helper

        self._arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        produced_by = {out: node for node in model.graph.node for out in node.output}
        consumers: dict[str, list[Any]] = {}
        for node in model.graph.node:
            for name in node.input:
                consumers.setdefault(name, []).append(node)
        # A linear layer is MatMul(x, Mul(Cast(W_q), W_scale)) followed by Add(·, <module>.bias).
        self.linear: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for node in model.graph.node:
            if node.op_type != "MatMul" or node.input[1] not in produced_by:
                continue
            dequant = produced_by[node.input[1]]
            cast = produced_by.get(dequant.input[0])
            if dequant.op_type != "Mul" or cast is None or cast.op_type != "Cast":
                continue
            adds = [n for n in consumers.get(node.output[0], []) if n.op_type == "Add"]
            bias_names = [i for n in adds for i in n.input if i.endswith(".bias") and i in self._arrays]
            if len(bias_names) != 1:
                continue
            module = bias_names[0][len(_PREFIX) : -len(".bias")]
            self.linear[module] = (
                self._arrays[cast.input[0]],  # int8 [in, out]
                self._arrays[dequant.input[1]].reshape(-1).astype(np.float32),  # per output column
                self._arrays[bias_names[0]].astype(np.float32),
            )

    def array(self, name: str) -> np.ndarray:
        return self._arrays[_PREFIX + name]


# At int8 precision, the feed-forward output product stays fp32: its input (GELU's output) has the outliers that
# quantizing a whole tensor with one scale handles worst. Chosen on SciFact's train claims (809), dense nDCG@10
# against the passages' fp32 vectors: fp32 queries 0.6400, every product int8 0.6323 (cosine to fp32 median
# 0.9945), this 0.6375 (median 0.9971) for about 0.4 ms more a query (docs/benchmarks/hybrid.md, "session 17").
INT8_FP32_PRODUCTS = frozenset({"ffn_out"})


def build(
    model_path: Path, precision: Precision = "int8", *, fp32_products: frozenset[str] = INT8_FP32_PRODUCTS
) -> bytes:
    """The compact graph's serialized ``ModelProto``: inputs ``input_ids``, ``attention_mask``; output
    ``last_hidden_state`` [batch, pieces, 384], as the export's. ``fp32_products``: products kept in fp32 at
    int8 precision, by kind (``qkv``, ``attn_out``, ``ffn_in``, ``ffn_out``) or ``kind.layer``."""
    import onnx
    from onnx import TensorProto, helper

    weights = _Weights(onnx.load(str(model_path)))
    graph = GraphBuilder()
    constant, node = graph.constant, graph.node

    def int8(out: str) -> bool:
        return precision == "int8" and out.split(".")[0] not in fp32_products and out not in fp32_products

    def dequantized(out: str, w_q: np.ndarray, scale: np.ndarray) -> str:
        """The export's own dequantization, which onnxruntime folds into an fp32 weight at load."""
        w = node("Cast", [constant(f"{out}.wq", w_q)], f"{out}.wf", to=TensorProto.FLOAT)
        return node("Mul", [w, constant(f"{out}.scale", scale[None, :])], f"{out}.w")

    def linear(x: str, module: str, out: str) -> str:
        """x @ W + b."""
        w_q, scale, bias = weights.linear[module]
        if int8(out):
            inputs = [x, constant(f"{out}.w", w_q), constant(f"{out}.scale", scale), "", constant(f"{out}.b", bias)]
            return node("DynamicQuantizeMatMul", inputs, out, domain="com.microsoft")
        product = node("MatMul", [x, dequantized(out, w_q, scale)], f"{out}.mm")
        return node("Add", [product, constant(f"{out}.b", bias)], out)

    def attention(x: str, module: str, out: str, key_mask: str) -> str:
        """Self-attention over x: the QKV product and the heads in one operator (``QAttention`` on int8
        weights, ``Attention`` on fp32 ones), the query, key and value weights side by side."""
        members = [weights.linear[f"{module}.{part}"] for part in ("query", "key", "value")]
        w_q, scale, bias = (np.concatenate([m[i] for m in members], axis=-1) for i in range(3))
        if not int8(out):
            inputs = [x, dequantized(out, w_q, scale), constant(f"{out}.b", bias), key_mask]
            return node("Attention", inputs, f"{out}.context", domain="com.microsoft", num_heads=HEADS)
        x_q, x_scale, x_zero = f"{out}.xq", f"{out}.xs", f"{out}.xz"
        graph.nodes.append(helper.make_node("DynamicQuantizeLinear", [x], [x_q, x_scale, x_zero], name=x_q))
        w, b, w_scale = constant(f"{out}.w", w_q), constant(f"{out}.b", bias), constant(f"{out}.scale", scale)
        inputs = [x_q, w, b, x_scale, w_scale, key_mask, x_zero]
        return node("QAttention", inputs, f"{out}.context", domain="com.microsoft", num_heads=HEADS)

    # Embeddings: the word table stays int8, only the looked-up rows are dequantized. Token types are all 0,
    # so their row is folded into the position table.
    word_q = weights.array("embeddings.word_embeddings.weight_q")
    word_scale = weights.array("embeddings.word_embeddings.weight_scale").astype(np.float32)
    positions = weights.array("embeddings.position_embeddings.weight_q").astype(np.float32) * weights.array(
        "embeddings.position_embeddings.weight_scale"
    )
    positions = positions + weights.array("embeddings.token_type_embeddings.weight")[0][None, :]
    rows = node("Gather", [constant("word_q", word_q), "input_ids"], "word_rows_q")
    rows = node("Cast", [rows], "word_rows", to=TensorProto.FLOAT)
    rows = node(
        "Mul", [rows, node("Gather", [constant("word_scale", word_scale), "input_ids"], "word_rows_scale")], "words"
    )
    shape = node("Shape", ["input_ids"], "ids_shape")
    length = node("Slice", [shape, constant("one_i", np.array([1])), constant("two_i", np.array([2]))], "pieces")
    table = constant("positions", positions.astype(np.float32))
    position_rows = node("Slice", [table, constant("zero_i", np.array([0])), length], "position_rows")
    x = node("Add", [rows, position_rows], "embedded")
    x = node(
        "LayerNormalization",
        [
            x,
            constant("emb.ln.g", weights.array("embeddings.LayerNorm.weight")),
            constant("emb.ln.b", weights.array("embeddings.LayerNorm.bias")),
        ],
        "layer_in.0",
        axis=-1,
        epsilon=EPSILON,
    )
    key_mask = node("Cast", ["attention_mask"], "key_mask", to=TensorProto.INT32)
    for layer in range(LAYERS):
        prefix = f"encoder.layer.{layer}"
        context = attention(x, f"{prefix}.attention.self", f"qkv.{layer}", key_mask)
        attended = linear(context, f"{prefix}.attention.output.dense", f"attn_out.{layer}")
        x1 = node(
            "SkipLayerNormalization",
            [
                attended,
                x,
                constant(f"ln1.g.{layer}", weights.array(f"{prefix}.attention.output.LayerNorm.weight")),
                constant(f"ln1.b.{layer}", weights.array(f"{prefix}.attention.output.LayerNorm.bias")),
            ],
            f"attn_norm.{layer}",
            domain="com.microsoft",
            epsilon=EPSILON,
        )
        hidden = linear(x1, f"{prefix}.intermediate.dense", f"ffn_in.{layer}")
        hidden = node("Gelu", [hidden], f"gelu.{layer}", domain="com.microsoft")
        out = linear(hidden, f"{prefix}.output.dense", f"ffn_out.{layer}")
        x = node(
            "SkipLayerNormalization",
            [
                out,
                x1,
                constant(f"ln2.g.{layer}", weights.array(f"{prefix}.output.LayerNorm.weight")),
                constant(f"ln2.b.{layer}", weights.array(f"{prefix}.output.LayerNorm.bias")),
            ],
            "last_hidden_state" if layer == LAYERS - 1 else f"layer_in.{layer + 1}",
            domain="com.microsoft",
            epsilon=EPSILON,
        )

    return graph.model("minilm-compact", HIDDEN, opset=17, ir_version=8)
