"""Canonicalization rewrites exporter variants into one form without changing results."""

from __future__ import annotations

import numpy as np
from conftest import F16, F32, const, model
from onnx import helper

from asc_onnx.canonicalize import canonicalize
from asc_onnx.graph import attrs_of, to_gs
from asc_onnx.load import infer_shapes

NODE = helper.make_node


def _canon(m, opset=17):
    g = to_gs(infer_shapes(m))
    stats = canonicalize(g, opset)
    return g, stats


def test_div_one_and_pow_two_and_identity_and_noop_cast():
    nodes = [NODE("Identity", ["x"], ["xi"]), NODE("Cast", ["xi"], ["xc"], to=F32), NODE("Pow", ["xc", "two"], ["p"]),
             NODE("Div", ["one", "p"], ["y"])]
    m = model(nodes, [("x", F32, [4])], [("y", F32, [4])], [const("two", 2.0), const("one", 1.0)])
    g, stats = _canon(m)
    assert [n.op for n in g.nodes] == ["Mul", "Reciprocal"]
    assert g.nodes[0].inputs[0].name == "x" and g.nodes[0].inputs[1].name == "x"
    assert (stats.identities_removed, stats.casts_removed, stats.reciprocals, stats.squares) == (1, 1, 1, 1)


def test_real_cast_and_graph_output_identity_kept():
    nodes = [NODE("Cast", ["x"], ["xh"], to=F16), NODE("Identity", ["xh"], ["y"])]
    m = model(nodes, [("x", F32, [4])], [("y", F16, [4])])
    g, _ = _canon(m)
    assert [n.op for n in g.nodes] == ["Cast", "Identity"]


def test_pow_three_and_div_by_two_untouched():
    nodes = [NODE("Pow", ["x", "three"], ["p"]), NODE("Div", ["two", "p"], ["y"])]
    m = model(nodes, [("x", F32, [4])], [("y", F32, [4])], [const("three", 3.0), const("two", 2.0)])
    g, _ = _canon(m)
    assert [n.op for n in g.nodes] == ["Pow", "Div"]


def test_axes_as_input_and_as_attribute_read_alike():
    a = model([NODE("ReduceMean", ["x"], ["y"], axes=[-1])], [("x", F32, [2, 4])], [("y", F32, [2, 1])], opset=13)
    b = model([NODE("ReduceMean", ["x", "ax"], ["y"])], [("x", F32, [2, 4])], [("y", F32, [2, 1])],
              [const("ax", [-1], np.int64)], opset=18)
    ga, _ = _canon(a, 13)
    gb, _ = _canon(b, 18)
    assert attrs_of(ga.nodes[0])["axes"] == attrs_of(gb.nodes[0])["axes"] == [-1]
    assert attrs_of(ga.nodes[0])["keepdims"] == attrs_of(gb.nodes[0])["keepdims"] == 1


def test_mul_and_div_by_one_are_bypassed_but_a_graph_output_keeps_its_node():
    """Paddle's swish is x * Sigmoid(x * 1.0); a property draw found Mul(x, 1) writing a graph output left
    with one input when it was bypassed."""
    import asc_onnx

    nodes = [NODE("Mul", ["x", "one"], ["x1"]), NODE("Div", ["x1", "one"], ["x2"]), NODE("Sigmoid", ["x2"], ["s"]),
             NODE("Mul", ["x", "s"], ["y"]), NODE("Mul", ["s", "one"], ["z"])]
    m = model(nodes, [("x", F32, [4, 8])], [("y", F32, [4, 8]), ("z", F32, [4, 8])], [const("one", 1.0)])
    g, stats = _canon(m)
    assert stats.unit_products == 2
    assert sorted(n.op for n in g.nodes) == ["Mul", "Mul", "Sigmoid"] and all(len(n.inputs) == 2 or n.op == "Sigmoid"
                                                                              for n in g.nodes)
    res = asc_onnx.fuse(m, options=asc_onnx.FuseOptions(judge=False, emulate=False))
    assert res.validation.ok


def test_folded_scalar_keeps_rank_zero():
    """Cast of a rank-0 constant folds to a rank-0 constant (np.ascontiguousarray made it [1], and a scalar
    graph output grew a dim: found by a property draw)."""
    import asc_onnx

    nodes = [NODE("Cast", ["c"], ["cf"], to=F32), NODE("Cast", ["cf"], ["y"], to=F16), NODE("Relu", ["x"], ["z"])]
    m = model(nodes, [("x", F16, [4])], [("y", F16, []), ("z", F16, [4])], [const("c", 0.5, np.float16)])
    g, stats = _canon(m)
    assert stats.folded == 1
    assert next(n for n in g.nodes if n.outputs[0].name == "y").inputs[0].shape == ()
    assert asc_onnx.fuse(m, options=asc_onnx.FuseOptions(judge=False, emulate=False)).validation.ok
