"""The toy class's region pass: every unclaimed float32 ``Abs`` node, alone."""

from __future__ import annotations

import onnx
import onnx_graphsurgeon as gs

from asc_onnx.fusion import Fusion
from asc_onnx.graph import onnx_dtype
from asc_onnx.pattern import Rule


def find(graph: gs.Graph, rule: Rule, claimed: set[int], outputs: set[int], order: dict[int, int]) -> list[Fusion]:
    found = []
    for node in graph.nodes:
        if node.op != "Abs" or id(node) in claimed or onnx_dtype(node.outputs[0]) != onnx.TensorProto.FLOAT:
            continue
        x, y = node.inputs[0], node.outputs[0]
        claimed.add(id(node))
        found.append(Fusion(rule.name, rule.op_name, rule.kernel, rule.family, (node,), (x,), ("x",), (y,), ("y",),
                            {id(node): (x,)}))
    return found
