"""What the encoder graphs Calypso writes share: token ids and mask in, the last hidden states out.

``minilm_graph`` and ``e5_graph`` each build their layers from their own weights; this wraps the nodes in the
graph and model onnxruntime loads.
"""

from __future__ import annotations

from typing import Any


def encoder_model(
    nodes: list[Any], name: str, initializers: list[Any], hidden: int, *, opset: int, ir_version: int
) -> bytes:
    """The serialized ONNX model of an encoder: ``input_ids`` and ``attention_mask`` (batch, pieces) in,
    ``last_hidden_state`` (batch, pieces, ``hidden``) out, with onnxruntime's fused operators' domain."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        name,
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "pieces"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "pieces"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "pieces", hidden])],
        initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)],
        ir_version=ir_version,
    )
    return bytes(model.SerializeToString())
