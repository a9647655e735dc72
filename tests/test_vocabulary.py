"""The pointwise chain pass admits exactly what the lowering serves: a fused op with no kernel cannot happen.

The row regions take their elementwise ops from the same table, so this covers them too. No g++ here: the
kernels are lowered and rendered, not emulated (the property and fuzz tests emulate the ops)."""

from __future__ import annotations

import pytest
from conftest import F32, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.chains.pointwise import BINARY, CLIP, COMPARE, ELEMENTWISE, UNARY, WHERE

NODE = helper.make_node
F = helper.make_tensor


def _chain(op: str):
    """``Add(x, 1)`` then ``op`` reading it: a chain of two, the smallest the pass fuses."""
    nodes = [NODE("Add", ["x", "one"], ["a"])]
    inits = [F("one", F32, [], [1.0])]
    if op in UNARY:
        nodes.append(NODE(op, ["a"], ["y"]))
    elif op == "PRelu":
        nodes.append(NODE(op, ["a", "slope"], ["y"]))
        inits.append(F("slope", F32, [8], [0.25] * 8))
    elif op == "Pow":
        nodes.append(NODE(op, ["a", "three"], ["y"]))
        inits.append(F("three", F32, [], [3.0]))  # a square would be canonicalized to a Mul
    elif op in BINARY:
        nodes.append(NODE(op, ["a", "x"], ["y"]))
    elif op == CLIP:
        nodes.append(NODE(op, ["a", "lo", "hi"], ["y"]))
        inits += [F("lo", F32, [], [-1.0]), F("hi", F32, [], [1.0])]
    elif op in COMPARE or op == WHERE:
        cmp = "Less" if op == WHERE else op
        nodes += [NODE(cmp, ["a", "x"], ["m"]), NODE("Where", ["m", "a", "x"], ["y"])]
    opset = {"Gelu": 20, "Mish": 18}.get(op, 17)  # the opsets that define them
    return model(nodes, [("x", F32, [4, 8])], [("y", F32, [4, 8])], inits, opset=opset)


@pytest.mark.parametrize("op", sorted(ELEMENTWISE))
def test_every_admitted_op_fuses_and_lowers(op):
    res = asc_onnx.fuse(_chain(op), options=FuseOptions(emulate=False), validate=False)
    (fused,) = res.ops
    assert op in [n.op_type for n in fused.function.node]
    assert not res.report["kernels"]["not_generated"] and len(res.kernels) == 1


@pytest.mark.parametrize("op", ["Sin", "Cos", "Floor", "Ceil", "Sign"])
def test_ops_the_lowering_does_not_serve_are_not_fused(op):
    """Relu -> op -> Sigmoid: the op stays an ONNX node, and nothing without a kernel is fused."""
    m = model([NODE("Relu", ["x"], ["r"]), NODE(op, ["r"], ["s"]), NODE("Sigmoid", ["s"], ["t"]),
               NODE("Tanh", ["t"], ["y"])], [("x", F32, [4, 8])], [("y", F32, [4, 8])])
    res = asc_onnx.fuse(m, options=FuseOptions(emulate=False), validate=False)
    assert all(op not in [n.op_type for n in f.function.node] for f in res.ops)
    assert op in [n.op_type for n in res.asc_model.graph.node]
    assert not res.report["kernels"]["not_generated"]
