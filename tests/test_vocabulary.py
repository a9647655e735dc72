"""The pointwise chain pass admits exactly what the lowering serves: a fused op with no kernel cannot happen.

The row regions take their elementwise ops from the same table, so this covers them too. No g++ here: the
kernels are lowered and rendered, not emulated (the property and fuzz tests emulate the ops)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import F16, F32, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.kernels.pointwise.region import CLIP, COMPARE, ELEMENTWISE, WHERE
from asc_onnx.kernels.vector import EMITTERS
from asc_onnx.soc import SOCS
from asc_onnx.verify_kernels import check

NODE = helper.make_node
F = helper.make_tensor
#: How each admitted op is called in a test chain: the binary ones take a second tensor or constant.
BINARY = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"})
UNARY = ELEMENTWISE - BINARY - COMPARE - {CLIP, WHERE}


@pytest.mark.fast
def test_the_chain_pass_admits_exactly_the_op_table():
    assert ELEMENTWISE == frozenset(EMITTERS) and BINARY <= ELEMENTWISE


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


@pytest.mark.fast
@pytest.mark.parametrize("op", sorted(ELEMENTWISE))
def test_every_admitted_op_fuses_and_lowers(op):
    res = asc_onnx.fuse(_chain(op), options=FuseOptions(judge=False, emulate=False), validate=False)
    (fused,) = res.ops
    assert op in [n.op_type for n in fused.function.node]
    assert not res.report["kernels"]["not_generated"] and len(res.kernels) == 1


@pytest.mark.fast
@pytest.mark.parametrize("op", ["Round", "Tan"])
def test_ops_the_lowering_does_not_serve_are_not_fused(op):
    """Relu -> op -> Sigmoid: the op stays an ONNX node, and nothing without a kernel is fused."""
    m = model([NODE("Relu", ["x"], ["r"]), NODE(op, ["r"], ["s"]), NODE("Sigmoid", ["s"], ["t"]),
               NODE("Tanh", ["t"], ["y"])], [("x", F32, [4, 8])], [("y", F32, [4, 8])])
    res = asc_onnx.fuse(m, options=FuseOptions(judge=False, emulate=False), validate=False)
    assert all(op not in [n.op_type for n in f.function.node] for f in res.ops)
    assert op in [n.op_type for n in res.asc_model.graph.node]
    assert not res.report["kernels"]["not_generated"]


@pytest.mark.fast
@pytest.mark.parametrize("op", sorted(ELEMENTWISE))
def test_every_admitted_op_lowers_inside_a_row_region(op):
    """The same chain feeding a Softmax is one row region, lowered by the row class (whose body shapes once
    went unknown after a parameter: Mul by a scalar, then any op, then Softmax had no kernel)."""
    m = _chain(op)
    m.graph.node.append(NODE("Softmax", ["y"], ["z"], axis=-1))
    m.graph.output[0].name = "z"
    res = asc_onnx.fuse(m, options=FuseOptions(judge=False, emulate=False), validate=False)
    # the row region takes the chain, or (comparisons, Gelu) leaves it to a pointwise op: a kernel either way
    assert any(op in [n.op_type for n in f.function.node] for f in res.ops)
    assert "row" in {f.kernel for f in res.ops}
    assert not res.report["kernels"]["not_generated"] and len(res.kernels) == len(res.ops)


#: Floor and Ceil at the values their implementation must get right: NaN, infinities, signed zeros, halves,
#: the 2^23 boundary above which every float is an integer, and magnitudes past int32.
EDGES = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, -0.5, 0.5, -2.5, 2.5, 8388607.5, -8388607.5, 8388609.0,
                  -8388609.0, 3e9, -3e9, 1.5e38, -1.5e38, 1e-30, -1e-30, 4.7, -4.7, 1e4 + 0.3, -1e4 - 0.3])


@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend310P"])
@pytest.mark.parametrize("op", ["Floor", "Ceil", "Sign"])
def test_floor_ceil_and_sign_are_exact_at_their_edges(op, soc):
    """Floor and Ceil through int32 (310P has no float-to-float rounding Cast), with |x| >= 2^23, infinities
    and NaN passed through; Sign by two Compares and Selects: exact against onnxruntime in fp32 and fp16, on
    both SoCs. One value is left out: onnxruntime's fp16 Sign gives 0 for NaN (its fp32 Sign and ONNX's
    reference give NaN, as the kernel does)."""
    for dtype, np_type in ((F32, np.float32), (F16, np.float16)):
        edges = EDGES[~np.isnan(EDGES)] if op == "Sign" and dtype == F16 else EDGES
        m = model([NODE("Mul", ["x", "half"], ["a"]), NODE(op, ["a"], ["y"])], [("x", dtype, ["n", 64])],
                  [("y", dtype, ["n", 64])], [helper.make_tensor("half", dtype, [], [0.5])])
        res = asc_onnx.fuse(m, options=FuseOptions(judge=False, soc=soc))
        assert res.deployed.ok and all(c.ok for c in res.kernel_checks)
        with np.errstate(over="ignore"):
            x = np.resize(edges * 2, (3, 64)).astype(np_type)
        c = check(res.kernels[0], [x], SOCS[soc], "edges")
        assert c.ok and c.max_abs == 0.0, c


@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend310P"])
@pytest.mark.parametrize("op", ["Sin", "Cos"])
def test_sin_and_cos_hold_the_tolerance_over_the_angles_models_reach(op, soc):
    """Our reduction by pi in three parts and a Taylor series: within the fp32 tolerance up to 2e5 radians
    (RoPE at 128k positions), at infinities and NaN (NaN, as onnxruntime), and NaN past 2^20 (stated: loud)."""
    from asc_onnx.emulator.harness import run

    rng = np.random.default_rng(1)
    for dtype, np_type, reach in ((F32, np.float32, 2e5), (F16, np.float16, 1e4)):
        m = model([NODE("Mul", ["x", "two"], ["a"]), NODE(op, ["a"], ["y"])], [("x", dtype, ["n", 64])],
                  [("y", dtype, ["n", 64])], [helper.make_tensor("two", dtype, [], [2.0])])
        res = asc_onnx.fuse(m, options=FuseOptions(judge=False, soc=soc))
        assert res.deployed.ok and all(c.ok for c in res.kernel_checks)
        k = res.kernels[0]
        for lim in (1.0, 100.0, 1e4, reach):
            c = check(k, [rng.uniform(-lim / 2, lim / 2, (16, 64)).astype(np_type)], SOCS[soc], f"|x| < {lim:g}")
            assert c.ok and (dtype != F32 or c.max_abs < 3e-6), c
        edges = np.resize(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, np.pi / 4, -np.pi / 8]), (1, 64))
        assert check(k, [edges.astype(np_type)], SOCS[soc], "edges").ok
        if dtype == F32:  # 1.2e6 after the Mul: past 2^20
            far = np.full((1, 64), 6e5, np.float32)
            assert np.isnan(run(k.ir, k.files, f"{k.op.op_type}TilingData", [far], SOCS[soc]).outputs[0]).all()
