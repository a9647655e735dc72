"""Canonicalization rewrites exporter variants into one form without changing results."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import F16, F32, const, model
from onnx import helper

from asc_onnx.canonicalize import canonicalize
from asc_onnx.graph import attrs_of, to_gs
from asc_onnx.load import infer_shapes

pytestmark = pytest.mark.fast  # (no g++, no emulator run: tests/conftest.py)

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


def _flat_gemm_gelu(extra=None, bias_shape=None):
    """x [2, S, 8] -> Reshape [-1, 8] -> Gemm(W, b) -> Reshape back to [2, S, 4] -> 0.5 * h * (1 + tanh(h)),
    optionally with a bias Add after the unflatten (``bias_shape``) or a residual read inside the chain (``extra``)."""
    nodes = [NODE("Reshape", ["x", "flat"], ["x2"]), NODE("Gemm", ["x2", "W", "b"], ["g"]),
             NODE("Reshape", ["g", "back"], ["h0"])]
    inits = [helper.make_tensor("flat", 7, [2], [-1, 8]), helper.make_tensor("back", 7, [3], [2, -1, 4]),
             helper.make_tensor("W", F32, [8, 4], np.linspace(-1, 1, 32).tolist()),
             helper.make_tensor("b", F32, [4], [0.1, 0.2, 0.3, 0.4]), const("half", 0.5), const("one", 1.0)]
    h = "h0"
    if bias_shape is not None:
        inits.append(helper.make_tensor("c", F32, bias_shape, [0.5] * int(np.prod(bias_shape))))
        nodes.append(NODE("Add", ["h0", "c"], ["h1"]))
        h = "h1"
    nodes += [NODE("Tanh", [h], ["t"]), NODE("Add", ["t", "one"], ["t1"]), NODE("Mul", [h, "t1"], ["p"])]
    if extra:
        nodes.append(NODE("Add", ["p", "x3"], ["p2"]))
        inits.append(helper.make_tensor("x3", F32, [2, 1, 4], [0.0] * 8))
    nodes.append(NODE("Mul", ["p2" if extra else "p", "half"], ["y"]))
    return model(nodes, [("x", F32, [2, "S", 8])], [("y", F32, [2, "S", 4])], inits)


def test_unflatten_moves_below_the_elementwise_chain_exactly():
    """GPT-2's Conv1D: the Reshape back to [2, S, 4] moves below the GELU-like chain (a [4] bias Add after it too),
    the chain then reads the 2-D Gemm result; onnxruntime gives the same bits before and after."""
    import onnxruntime as ort
    from onnx_graphsurgeon import export_onnx

    for bias_shape in (None, [4]):
        m = _flat_gemm_gelu(bias_shape=bias_shape)
        g, _ = _canon(m)
        ops = [n.op for n in g.nodes]
        assert ops[:2] == ["Reshape", "Gemm"] and ops[-1] == "Reshape" and ops.count("Reshape") == 2, ops
        chain = g.nodes[2:-1]
        assert all(len(t.shape) == 2 for n in chain for t in n.outputs), [(n.op, n.outputs) for n in chain]
        x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
        before = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
        after_model = export_onnx(g)
        after_model.opset_import[0].version = 17
        after = ort.InferenceSession(after_model.SerializeToString()).run(None, {"x": x})[0]
        assert np.array_equal(before, after)


def test_unflatten_stops_where_a_tensor_would_broadcast_differently():
    """A bias of rank 3 read right after the unflatten would widen the 2-D view: the Reshape stays. A [2, 1, 4]
    tensor read inside the chain stops it just before that read, with the same bits out."""
    import onnxruntime as ort
    from onnx_graphsurgeon import export_onnx

    g, _ = _canon(_flat_gemm_gelu(bias_shape=[1, 1, 4]))
    assert [n.op for n in g.nodes][:3] == ["Reshape", "Gemm", "Reshape"]
    m = _flat_gemm_gelu(extra=True)
    g, _ = _canon(m)
    ops = [n.op for n in g.nodes]
    assert ops == ["Reshape", "Gemm", "Tanh", "Add", "Mul", "Reshape", "Add", "Mul"], ops
    x = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)
    after_model = export_onnx(g)
    after_model.opset_import[0].version = 17
    assert np.array_equal(ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0],
                          ort.InferenceSession(after_model.SerializeToString()).run(None, {"x": x})[0])


def _masked_attention(dt, fill):
    """GPT-2's eager masking: Softmax(Where(causal, q @ k^T / 8, fill))."""
    npd = np.float32 if dt == F32 else np.float16
    nodes = [NODE("MatMul", ["q", "kt"], ["s"]), NODE("Div", ["s", "c"], ["ss"]),
             NODE("Where", ["causal", "ss", "fill"], ["sm"]), NODE("Softmax", ["sm"], ["y"], axis=-1)]
    return model(nodes, [("q", dt, [1, 2, 6, 8]), ("kt", dt, [1, 2, 8, 6]), ("causal", helper.TensorProto.BOOL,
                                                                          [1, 1, 6, 6])],
                 [("y", dt, [1, 2, 6, 6])], [const("c", 8.0, npd), const("fill", fill, npd)])


@pytest.mark.parametrize("dt,fill,keep", [(F32, float(np.finfo(np.float32).min), False), (F32, -np.inf, False),
                                          (F16, -np.inf, False), (F16, float(np.finfo(np.float16).min), True),
                                          (F32, -1e4, True)])
def test_scores_masked_by_where_become_additive_where_the_sum_is_the_fill(dt, fill, keep):
    """Where(mask, s, fill) before a Softmax becomes s + Where(mask, 0, fill) for a fill of -inf or float32's
    lowest, and s x Cast(mask) + Where(mask, 0, fill) for a fill a score would move the sum off (float16's -65504,
    HF's -1e4): bit for bit the same, a row masked everywhere included (uniform at a finite fill, NaN at -inf)."""
    import onnx_graphsurgeon as gs
    import onnxruntime as ort

    m = _masked_attention(dt, fill)
    g, _ = _canon(m)
    ops = [n.op for n in g.nodes]
    assert ops.count("Add") == 1 and ops.count("Mul") == int(keep) and "Where" in ops
    rng = np.random.default_rng(0)
    npd = np.float32 if dt == F32 else np.float16
    feeds = {"q": (4 * rng.standard_normal((1, 2, 6, 8))).astype(npd),
             "kt": (4 * rng.standard_normal((1, 2, 8, 6))).astype(npd),
             "causal": np.tril(np.ones((6, 6), bool))[None, None].copy()}
    feeds["causal"][0, 0, 3] = False  # a row masked everywhere
    out = gs.export_onnx(g)
    out.opset_import[0].version = m.opset_import[0].version
    got, want = (ort.InferenceSession(x.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
                 for x in (out, m))
    assert np.array_equal(got, want, equal_nan=True)
    assert np.isnan(want[0, :, 3]).all() == (fill == -np.inf)


@pytest.mark.parametrize("reps,expand", [([1, 3, 1], True), ([2, 3, 1], False), ([1, 1, 1], False)])
def test_tile_of_axes_of_one_becomes_expand(reps, expand):
    """Tile repeating only axes of size 1 is Expand to the same shape (the same elements); a Tile that repeats a
    longer axis, or nothing, stays."""
    m = model([NODE("Tile", ["x", "r"], ["y"])], [("x", F32, [2, 1, 4])], [("y", F32, [2 * reps[0], reps[1], 4])],
              [const("r", reps, np.int64)])
    g, _ = _canon(m)
    assert g.nodes[0].op == ("Expand" if expand else "Tile")


def _same_on_ort(m, g, feeds):
    """The canonicalized graph ``g`` of ``m`` gives ``m``'s outputs bit for bit (NaN where they are NaN)."""
    import onnx_graphsurgeon as gs
    import onnxruntime as ort

    out = gs.export_onnx(g)
    out.opset_import[0].version = m.opset_import[0].version
    got, want = (ort.InferenceSession(x.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
                 for x in (out, m))
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want))


def test_an_expand_of_ones_that_writes_a_graph_output_stays_whole():
    """Expand by ones is bypassed, except where it writes a graph output: then it keeps both inputs (a review found
    it cut to one input, which onnxruntime refuses)."""
    m = model([NODE("Expand", ["x", "ones"], ["y"]), NODE("Expand", ["y", "ones"], ["z"]), NODE("Relu", ["z"], ["w"])],
              [("x", F32, [2, 3])], [("y", F32, [2, 3]), ("w", F32, [2, 3])], [const("ones", [1, 1], np.int64)])
    g, _ = _canon(m)
    assert [n.op for n in g.nodes] == ["Expand", "Relu"] and len(g.nodes[0].inputs) == 2
    _same_on_ort(m, g, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})


def test_a_fill_of_exactly_minus_2_to_120_takes_the_keep_form():
    """-2^120 is a power of two: the float32 step above it is 2^96, so a score over 2^95 would move s + fill off the
    fill (a review's counterexample). It takes the keep form, s x Cast(mask) + Where(mask, 0, fill), bit for bit the
    same with scores near 2^96 and a row masked everywhere."""
    m = _masked_attention(F32, -(2.0 ** 120))
    g, _ = _canon(m)
    assert [n.op for n in g.nodes].count("Mul") == 1
    rng = np.random.default_rng(1)
    causal = np.tril(np.ones((6, 6), bool))[None, None].copy()
    causal[0, 0, 2] = False
    _same_on_ort(m, g, {"q": (2.0 ** 48 * rng.standard_normal((1, 2, 6, 8))).astype(np.float32),
                        "kt": (2.0 ** 48 * rng.standard_normal((1, 2, 8, 6))).astype(np.float32), "causal": causal})


def test_tile_stays_a_tile_before_opset_8():
    m = model([NODE("Tile", ["x", "r"], ["y"])], [("x", F32, [2, 1, 4])], [("y", F32, [2, 3, 4])],
              [const("r", [1, 3, 1], np.int64)], opset=7)
    g, _ = _canon(m, 7)
    assert g.nodes[0].op == "Tile"


def test_a_tile_of_the_heads_read_for_its_length_still_becomes_the_repeat():
    """k.repeat(1, g, 1, 1) whose length LLaMA-style code reads (Shape, Gather 2): the Tile becomes the repeat and
    the Shape reads the Tile's input (the same length), bit for bit."""
    nodes = [NODE("Tile", ["k", "reps"], ["kr"]), NODE("Transpose", ["kr"], ["kt"], perm=[0, 1, 3, 2]),
             NODE("MatMul", ["q", "kt"], ["s"]), NODE("Shape", ["kr"], ["ks"]), NODE("Gather", ["ks", "two"], ["n"])]
    m = model(nodes, [("q", F32, [1, 4, "t", 8]), ("k", F32, [1, 2, "s", 8])],
              [("s", F32, [1, 4, "t", "s"]), ("n", helper.TensorProto.INT64, [])],
              [const("reps", [1, 2, 1, 1], np.int64), const("two", 2, np.int64)])
    g, _ = _canon(m)
    shape = next(n for n in g.nodes if n.op == "Shape")
    assert shape.inputs[0].name == "k" and "Tile" not in [n.op for n in g.nodes]
    rng = np.random.default_rng(0)
    _same_on_ort(m, g, {"q": rng.standard_normal((1, 4, 3, 8)).astype(np.float32),
                        "k": rng.standard_normal((1, 2, 5, 8)).astype(np.float32)})
