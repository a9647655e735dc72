"""Each built-in pattern: positive cases for its variants, negative cases that must not fuse.

Every positive case also runs the graph rung of validation (onnxruntime, per-dtype tolerance).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import F16, F32, const, model, rules_of
from onnx import TensorProto, helper

import asc_onnx
from asc_onnx import FuseOptions

D = 16
X = ("x", F32, [2, 4, D])
Y = ("y", F32, [2, 4, D])
NODE = helper.make_node


def fuse(m, **kw):
    """Match, rewrite and the graph rung (onnxruntime): what a pattern decides needs no kernel run (the kernels of
    every rule are proven by the class tests)."""
    return asc_onnx.fuse(m, options=FuseOptions(judge=False, emulate=False, **kw))


def only(m, name):
    return rules_of(fuse(m, only=frozenset({name})))


# ---------------------------------------------------------------- SiLU family
@pytest.mark.parametrize("order", [("x", "s"), ("s", "x")])
def test_silu_either_operand_order(order):
    m = model([NODE("Sigmoid", ["x"], ["s"]), NODE("Mul", list(order), ["y"])], [X], [Y])
    res = fuse(m)
    assert rules_of(res) == {"SiLU": 1}
    assert res.validation.ok
    assert [n.op_type for n in res.asc_model.graph.node] == ["AscSilu"]


def test_silu_after_conv_fp16():
    w = const("w", np.random.default_rng(0).standard_normal((4, 3, 3, 3)), np.float16)
    m = model([NODE("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), NODE("Sigmoid", ["c"], ["s"]),
               NODE("Mul", ["c", "s"], ["y"])],
              [("x", F16, [1, 3, 8, 8])], [("y", F16, [1, 4, 8, 8])], [w])
    res = fuse(m)
    assert rules_of(res) == {"SiLU": 1}
    assert res.ops[0].dtype_columns == ((F16, F16),)


def _linear(bias: bool, gemm: bool):
    rng = np.random.default_rng(1)
    inits = [const("w", rng.standard_normal((D, 8)))]
    nodes = []
    if gemm:
        ins = ["x", "w"] + (["b"] if bias else [])
        nodes.append(NODE("Gemm", ins, ["h"]))
        x = ("x", F32, [3, D])
    else:
        nodes.append(NODE("MatMul", ["x", "w"], ["mm" if bias else "h"]))
        if bias:
            nodes.append(NODE("Add", ["b", "mm"], ["h"]))
        x = ("x", F32, [2, 3, D])
    if bias:
        inits.append(const("b", rng.standard_normal(8)))
    nodes += [NODE("Sigmoid", ["h"], ["s"]), NODE("Mul", ["s", "h"], ["y"])]
    return model(nodes, [x], [("y", F32, x[2][:-1] + [8])], inits)


@pytest.mark.parametrize("gemm", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_silu_variants(bias, gemm):
    res = fuse(_linear(bias, gemm))
    assert rules_of(res) == {"LinearSiLU" if bias else "LinearSiLUNoBias": 1}
    assert res.validation.ok


def test_intermediate_graph_output_refuses_and_reports():
    m = model([NODE("Sigmoid", ["x"], ["s"]), NODE("Mul", ["x", "s"], ["y"])], [X], [Y, ("s", F32, [2, 4, D])])
    res = fuse(m)
    assert rules_of(res) == {}
    assert any("graph output" in n.reason for n in res.near_misses if n.rule == "SiLU")


def test_extra_consumer_refuses():
    m = model([NODE("Sigmoid", ["x"], ["s"]), NODE("Mul", ["x", "s"], ["y"]), NODE("Relu", ["s"], ["z"])],
              [X], [Y, ("z", F32, [2, 4, D])])
    res = fuse(m, generic=False)
    assert rules_of(res) == {}
    assert any("outside the match" in n.reason for n in res.near_misses)


def test_unsupported_dtype_refuses():
    m = model([NODE("Sigmoid", ["x"], ["s"]), NODE("Mul", ["x", "s"], ["y"])],
              [("x", TensorProto.DOUBLE, [4])], [("y", TensorProto.DOUBLE, [4])])
    res = fuse(m)
    assert rules_of(res) == {}
    assert any("DOUBLE" in n.reason for n in res.near_misses)


def test_different_variable_binding_refuses():
    m = model([NODE("Sigmoid", ["x"], ["s"]), NODE("Mul", ["z", "s"], ["y"])], [X, ("z", F32, [2, 4, D])], [Y])
    assert "SiLU" not in only(m, "SiLU")


# ---------------------------------------------------------------- SwiGLU
def _swiglu(bias: bool = False, split: bool = False):
    rng = np.random.default_rng(2)
    inits, nodes = [], []
    if split:
        inits.append(const("w", rng.standard_normal((D, 16))))
        inits.append(const("sp", [8, 8], np.int64))
        nodes += [NODE("MatMul", ["x", "w"], ["gu"]), NODE("Split", ["gu", "sp"], ["g", "u"], axis=-1)]
    else:
        inits += [const("wg", rng.standard_normal((D, 8))), const("wu", rng.standard_normal((D, 8)))]
        nodes += [NODE("MatMul", ["x", "wg"], ["g0" if bias else "g"]),
                  NODE("MatMul", ["x", "wu"], ["u0" if bias else "u"])]
        if bias:
            inits += [const("bg", rng.standard_normal(8)), const("bu", rng.standard_normal(8))]
            nodes += [NODE("Add", ["g0", "bg"], ["g"]), NODE("Add", ["bu", "u0"], ["u"])]
    nodes += [NODE("Sigmoid", ["g"], ["s"]), NODE("Mul", ["s", "g"], ["sg"]), NODE("Mul", ["u", "sg"], ["y"])]
    return model(nodes, [X], [("y", F32, [2, 4, 8])], inits, opset=18)


@pytest.mark.parametrize("kind,rule", [({}, "SwiGLU"), ({"bias": True}, "SwiGLUBias"),
                                       ({"split": True}, "SwiGLUSplit")])
def test_swiglu_variants(kind, rule):
    res = fuse(_swiglu(**kind))
    assert rules_of(res) == {rule: 1}, "the larger SwiGLU pattern must win over SiLU"
    assert res.validation.ok


def test_swiglu_split_unequal_parts_refuses():
    m = _swiglu(split=True)
    for init in m.graph.initializer:
        if init.name == "sp":
            init.CopyFrom(const("sp", [6, 10], np.int64))
    m.graph.output[0].type.tensor_type.shape.dim[-1].dim_param = "n"
    res = asc_onnx.fuse(m, options=FuseOptions(judge=False, emulate=False, only=frozenset({"SwiGLUSplit"})),
                        validate=False)
    assert rules_of(res) == {}
    assert any("equal halves" in n.reason for n in res.near_misses)


# ---------------------------------------------------------------- GELU
def _gelu(form: str, scale: float = math.sqrt(2.0), bias: bool = False, dtype=F32):
    np_t = np.float16 if dtype == F16 else np.float32
    c = lambda n, v: const(n, v, np_t)  # noqa: E731
    inits = [c("k", scale), c("one", 1.0), c("half", 0.5)]
    nodes = []
    x = "x"
    if bias:
        inits.append(c("b", np.linspace(-1, 1, D)))
        nodes.append(NODE("Add", ["x", "b"], ["xb"]))
        x = "xb"
    if form.startswith("erf"):
        nodes += [NODE("Div", [x, "k"], ["d"]), NODE("Erf", ["d"], ["e"]), NODE("Add", ["e", "one"], ["t"])]
    else:
        inits += [c("three", 3.0), c("a", 0.044715), c("r", math.sqrt(2 / math.pi))]
        nodes += [NODE("Pow", [x, "three"], ["p"]), NODE("Mul", ["p", "a"], ["pa"]), NODE("Add", [x, "pa"], ["in"]),
                  NODE("Mul", ["r", "in"], ["ri"]), NODE("Tanh", ["ri"], ["th"]), NODE("Add", ["one", "th"], ["t"])]
    if form.endswith("legacy"):
        nodes += [NODE("Mul", [x, "t"], ["xt"]), NODE("Mul", ["xt", "half"], ["y"])]
    else:
        nodes += [NODE("Mul", ["half", "t"], ["ht"]), NODE("Mul", [x, "ht"], ["y"])]
    return model(nodes, [("x", dtype, [2, 4, D])], [("y", dtype, [2, 4, D])], inits)


@pytest.mark.parametrize("form", ["erf_legacy", "erf_dynamo", "tanh_legacy", "tanh_dynamo"])
@pytest.mark.parametrize("bias", [False, True])
def test_gelu_forms(form, bias):
    res = fuse(_gelu(form, bias=bias))
    name = ("BiasGELU" if bias else "GELU") + ("Tanh" if form.startswith("tanh") else "")
    assert rules_of(res) == {name: 1}
    assert res.validation.ok


def test_gelu_fp16_constants_match_with_fp16_tolerance():
    res = fuse(_gelu("erf_dynamo", dtype=F16))
    assert rules_of(res) == {"GELU": 1}
    assert res.validation.ok


def test_gelu_wrong_constant_is_a_near_miss_not_a_gelu():
    res = fuse(_gelu("erf_legacy", scale=2.0))
    assert "GELU" not in rules_of(res)
    assert any(n.rule == "GELU" and "1.4142" in n.reason for n in res.near_misses)
    assert res.validation.ok  # still fused generically, and still right


def test_bias_gelu_with_gelu_op():
    m = model([NODE("Add", ["x", "b"], ["h"]), NODE("Gelu", ["h"], ["y"])], [X], [Y],
              [const("b", np.ones(D))], opset=20)
    res = asc_onnx.fuse(m, options=FuseOptions(judge=False, emulate=False), validate=False)  # (no converter needed)
    assert rules_of(res) == {"BiasGELU": 1}


# ---------------------------------------------------------------- LayerNorm / RMSNorm
def _layernorm(recip: bool = False, residual: bool = False, axes_input: bool = False, eps=1e-5):
    opset = 18 if axes_input else 13
    inits = [const("eps", eps), const("g", np.linspace(0.5, 1.5, D)), const("bt", np.linspace(-1, 1, D)),
             const("two", 2.0)]

    def rmean(i, o):
        if axes_input:
            return NODE("ReduceMean", [i, "axes"], [o])
        return NODE("ReduceMean", [i], [o], axes=[-1])

    if axes_input:
        inits.append(const("axes", [-1], np.int64))
    nodes, x = [], "x"
    if residual:
        nodes.append(NODE("Add", ["x", "r"], ["s"]))
        x = "s"
    nodes += [rmean(x, "m"), NODE("Sub", [x, "m"], ["d"]), NODE("Pow", ["d", "two"], ["d2"]), rmean("d2", "v"),
              NODE("Add", ["v", "eps"], ["ve"]), NODE("Sqrt", ["ve"], ["sd"])]
    if recip:
        nodes += [NODE("Reciprocal", ["sd"], ["rs"]), NODE("Mul", ["d", "rs"], ["n"])]
    else:
        nodes += [NODE("Div", ["d", "sd"], ["n"])]
    nodes += [NODE("Mul", ["n", "g"], ["ng"]), NODE("Add", ["ng", "bt"], ["y"])]
    ins = [X] + ([("r", F32, [2, 4, D])] if residual else [])
    outs = [Y] + ([("s", F32, [2, 4, D])] if residual else [])
    return model(nodes, ins, outs, inits, opset=opset)


@pytest.mark.parametrize("recip", [False, True])
@pytest.mark.parametrize("axes_input", [False, True])
def test_layernorm_decomposed(recip, axes_input):
    res = fuse(_layernorm(recip=recip, axes_input=axes_input))
    assert rules_of(res) == {"LayerNorm": 1}
    assert res.validation.ok


def test_add_layernorm_exposes_residual_sum():
    res = fuse(_layernorm(residual=True))
    assert rules_of(res) == {"AddLayerNorm": 1}
    assert res.ops[0].output_names == ("y", "y1")
    assert res.validation.ok


def test_add_layernorm_op():
    m = model([NODE("Add", ["x", "r"], ["s"]), NODE("LayerNormalization", ["s", "g", "b"], ["y"], epsilon=1e-6)],
              [X, ("r", F32, [2, 4, D])], [Y], [const("g", np.ones(D)), const("b", np.zeros(D))])
    res = fuse(m)
    assert rules_of(res) == {"AddLayerNorm": 1}
    assert res.ops[0].output_names == ("y",), "the sum has no outside reader, so it is not an output"


def test_layernorm_not_last_axis_refuses():
    m = _layernorm()
    for n in m.graph.node:
        if n.op_type == "ReduceMean":
            n.attribute[0].ints[:] = [1]
    res = fuse(m, only=frozenset({"LayerNorm"}))
    assert rules_of(res) == {}
    assert any("axis" in n.reason for n in res.near_misses)


def _rmsnorm(cast: bool = False, div: bool = False, residual: bool = False, dtype=F32):
    np_t = np.float16 if dtype == F16 else np.float32
    inits = [const("eps", 1e-6), const("two", 2.0), const("one", 1.0), const("w", np.linspace(0.5, 1.5, D), np_t)]
    nodes, x = [], "x"
    if residual:
        nodes.append(NODE("Add", ["x", "r"], ["s"]))
        x = "s"
    if cast:
        nodes.append(NODE("Cast", [x], ["xf"], to=TensorProto.FLOAT))
        x = "xf"
    nodes += [NODE("Pow", [x, "two"], ["p"]), NODE("ReduceMean", ["p"], ["m"], axes=[-1]),
              NODE("Add", ["m", "eps"], ["me"]), NODE("Sqrt", ["me"], ["sq"])]
    if div:
        nodes.append(NODE("Div", [x, "sq"], ["n"]))
    else:
        nodes += [NODE("Div", ["one", "sq"], ["rs"]), NODE("Mul", [x, "rs"], ["n"])]
    if cast:
        nodes.append(NODE("Cast", ["n"], ["nc"], to=dtype))
    nodes.append(NODE("Mul", ["w", "nc" if cast else "n"], ["y"]))
    ins = [("x", dtype, [2, 4, D])] + ([("r", dtype, [2, 4, D])] if residual else [])
    outs = [("y", dtype, [2, 4, D])] + ([("s", dtype, [2, 4, D])] if residual else [])
    return model(nodes, ins, outs, inits)


@pytest.mark.parametrize("div", [False, True])
@pytest.mark.parametrize("cast,dtype", [(False, F32), (True, F16), (True, F32)])
def test_rmsnorm_variants(div, cast, dtype):
    res = fuse(_rmsnorm(cast=cast, div=div, dtype=dtype))
    assert rules_of(res) == {"RMSNorm": 1}
    assert res.validation.ok


@pytest.mark.parametrize("dtype", [F32, F16])
def test_add_rmsnorm(dtype):
    res = fuse(_rmsnorm(residual=True, cast=dtype == F16, dtype=dtype))
    assert rules_of(res) == {"AddRMSNorm": 1}
    assert res.validation.ok


def test_rmsnorm_wrong_eps_still_fuses_with_its_own_eps():
    """eps is captured, not fixed: it is the op's parameter, so two eps values share one op type (one kernel)
    and each node carries its own."""
    a, b = _rmsnorm(), _rmsnorm()
    b.graph.initializer[0].CopyFrom(const("eps", 1e-5))
    ra, rb = asc_onnx.fuse(a), asc_onnx.fuse(b)
    assert ra.ops[0].signature == rb.ops[0].signature and ra.ops[0].params == ("p0",)
    assert ra.ops[0].instances[0].params != rb.ops[0].instances[0].params == (float(np.float32(1e-5)),)
    assert ra.validation.ok and rb.validation.ok and ra.deployed.ok and rb.deployed.ok


# ---------------------------------------------------------------- HardSwish
@pytest.mark.parametrize("form", ["hardsigmoid", "div_outer", "mul_inner"])
def test_hardswish_decompositions(form):
    inits = [const("three", 3.0), const("zero", 0.0), const("six", 6.0), const("sixth", 1 / 6)]
    if form == "hardsigmoid":
        nodes = [NODE("HardSigmoid", ["x"], ["h"], alpha=1 / 6, beta=0.5), NODE("Mul", ["x", "h"], ["y"])]
    else:
        nodes = [NODE("Add", ["x", "three"], ["a"]), NODE("Clip", ["a", "zero", "six"], ["c"])]
        if form == "div_outer":
            nodes += [NODE("Mul", ["x", "c"], ["m"]), NODE("Div", ["m", "six"], ["y"])]
        else:
            nodes += [NODE("Mul", ["c", "sixth"], ["m"]), NODE("Mul", ["x", "m"], ["y"])]
    res = fuse(model(nodes, [X], [Y], inits))
    assert rules_of(res) == {"HardSwish": 1}
    assert res.validation.ok


def test_lone_hardswish_op_is_left_alone():
    res = fuse(model([NODE("HardSwish", ["x"], ["y"])], [X], [Y]))
    assert rules_of(res) == {}


# ---------------------------------------------------------------- Softmax
@pytest.mark.parametrize("stable", [False, True])
def test_softmax_decomposed(stable):
    nodes = []
    src = "x"
    if stable:
        nodes += [NODE("ReduceMax", ["x"], ["mx"], axes=[-1]), NODE("Sub", ["x", "mx"], ["sh"])]
        src = "sh"
    nodes += [NODE("Exp", [src], ["e"]), NODE("ReduceSum", ["e", "axes"], ["s"]), NODE("Div", ["e", "s"], ["y"])]
    res = fuse(model(nodes, [X], [Y], [const("axes", [-1], np.int64)], opset=13))
    assert rules_of(res) == {"SoftmaxDecomposed": 1}
    assert res.validation.ok


def test_scale_mask_softmax():
    nodes = [NODE("Mul", ["x", "sc"], ["xs"]), NODE("Add", ["mask", "xs"], ["xm"]), NODE("Softmax", ["xm"], ["y"])]
    m = model(nodes, [X, ("mask", F32, [1, 1, D])], [Y], [const("sc", 0.125)])
    res = fuse(m)
    assert rules_of(res) == {"ScaleMaskSoftmax": 1}
    assert res.validation.ok


# ---------------------------------------------------------------- generic chains
def test_generic_chain_with_broadcast_bias():
    nodes = [NODE("Add", ["x", "b"], ["h"]), NODE("Relu", ["h"], ["r"]), NODE("Mul", ["r", "k"], ["y"])]
    m = model(nodes, [X], [Y], [const("b", np.ones(D)), const("k", 0.5)])
    res = fuse(m)
    assert rules_of(res) == {"ElementwiseChain": 1}
    op = res.ops[0]
    assert op.op_type.startswith("AscFusedEw") and op.input_names == ("x0", "x1")
    assert [n.op_type for n in op.function.node] == ["Constant", "Add", "Relu", "Mul"]
    assert res.validation.ok


def test_generic_chain_skips_int_shape_math_and_single_ops():
    nodes = [NODE("Shape", ["x"], ["sh"]), NODE("Mul", ["sh", "two"], ["s2"]), NODE("Add", ["s2", "two"], ["s3"]),
             NODE("Reshape", ["x", "s3"], ["y0"], allowzero=0), NODE("Relu", ["x"], ["y"])]
    m = model(nodes, [X], [Y], [const("two", [1, 1, 1], np.int64)])
    m.graph.node.remove(m.graph.node[3])
    assert rules_of(fuse(m)) == {}


def test_identical_instances_share_one_op_type():
    nodes = []
    prev = "x"
    for i in range(3):
        nodes += [NODE("Sigmoid", [prev], [f"s{i}"]), NODE("Mul", [f"s{i}", prev], [f"m{i}"]),
                  NODE("Softmax", [f"m{i}"], [f"o{i}"], axis=1)]  # over a leading axis: no row op, a separator
        prev = f"o{i}"
    m = model(nodes, [X], [("o2", F32, [2, 4, D])])
    res = fuse(m)
    assert [(op.op_type, len(op.instances)) for op in res.ops] == [("AscSilu", 3)]
    assert len(res.asc_model.functions) == 1
