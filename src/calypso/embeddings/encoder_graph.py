"""What the encoder graphs Calypso writes share: token ids and mask in, the last hidden states out.

``minilm_graph`` and ``e5_graph`` each build their layers from their own weights into a ``GraphBuilder``
(constants and nodes named by their output), which wraps them in the model onnxruntime loads.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class GraphBuilder:
    """The nodes and initializers of one graph, each named by what it outputs."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []

    def constant(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], output: str, domain: str = "", **attributes: Any) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attributes))
        return output

    def model(self, name: str, hidden: int, *, opset: int, ir_version: int, inputs: list[Any] | None = None) -> bytes:
        """The serialized encoder model of what was built (``encoder_model``)."""
        return encoder_model(
            self.nodes, name, self.initializers, hidden, opset=opset, ir_version=ir_version, inputs=inputs
        )


def encoder_model(
    nodes: list[Any],
    name: str,
    initializers: list[Any],
    hidden: int,
    *,
    opset: int,
    ir_version: int,
    inputs: list[Any] | None = None,
) -> bytes:
    """The serialized ONNX model of an encoder: ``input_ids`` and ``attention_mask`` (batch, pieces) in, unless
    ``inputs`` (value infos) says otherwise; ``last_hidden_state`` (batch, pieces, ``hidden``) out, with
    onnxruntime's fused operators' domain."""
    from onnx import TensorProto, helper

    if inputs is None:
        inputs = [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "pieces"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "pieces"]),
        ]
    graph = helper.make_graph(
        nodes,
        name,
        inputs,
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "pieces", hidden])],
        initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)],
        ir_version=ir_version,
    )
    return bytes(model.SerializeToString())
