"""PyTorch's NaN guard between the softmax and P·V (the dynamo exporter's SDPA with a boolean mask,
``Where(IsNaN(p), 0, p)``): the attention is taken into the op and the guard moves after P·V, exact: a row masked
everywhere gives zeros, in the graph rung, on the emulated kernel and in the deployed model."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import F16, F32, const, model
from onnx import TensorProto, helper

import asc_onnx
from asc_onnx import FuseOptions

NP = {F32: np.float32, F16: np.float16}
B, H, S, D = 1, 2, 24, 32


def guarded_attention(dt=F32, guard: bool = True, axis: int = -1):
    """SDPA with a boolean mask as onnxscript decomposes it: Where(mask, 0, -inf) added to the scaled scores,
    Softmax, Where(IsNaN(p), 0, p), MatMul with v."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "c"], ["ss"]),
             helper.make_node("Where", ["mask", "zero", "ninf"], ["add_mask"]),
             helper.make_node("Add", ["ss", "add_mask"], ["sm"]), helper.make_node("Softmax", ["sm"], ["p"], axis=axis)]
    last = "p"
    if guard:
        nodes += [helper.make_node("IsNaN", ["p"], ["nan"]), helper.make_node("Where", ["nan", "zero", "p"], ["pg"])]
        last = "pg"
    nodes += [helper.make_node("MatMul", [last, "v"], ["o"]),
              helper.make_node("Transpose", ["o"], ["y"], perm=[0, 2, 1, 3])]
    inputs = [("q", dt, [B, H, S, D]), ("k", dt, [B, H, S, D]), ("v", dt, [B, H, S, D]),
              ("mask", TensorProto.BOOL, [B, 1, S, S])]
    inits = [const("c", D ** -0.5, NP[dt]), const("zero", 0.0, NP[dt]), const("ninf", -np.inf, NP[dt])]
    return model(nodes, inputs, [("y", dt, [B, S, H, D])], inits)


def _mask() -> np.ndarray:
    """Causal, with row 5 masked everywhere."""
    m = np.tril(np.ones((S, S), bool))
    m[5] = False
    return m.reshape(B, 1, S, S)


@pytest.mark.parametrize("dt", [F32, F16])
def test_the_guarded_attention_is_one_op_and_a_row_masked_everywhere_is_zero(dt, tmp_path):
    m = guarded_attention(dt)
    mask = tuple(float(x) for x in _mask().reshape(-1))
    res = asc_onnx.fuse(m, tmp_path / "o", FuseOptions(judge=False, input_values=(("mask", mask),)))
    assert [op.kernel for op in res.ops] == ["attention"] and res.kernels
    assert res.report["canonicalize"]["nan_guards"] == 1
    assert res.kernel_checks and all(c.ok for c in res.kernel_checks)
    assert res.validation is not None and res.validation.ok
    assert res.deployed is not None and res.deployed.ok
    # the original and the rewritten model agree bit for bit where the row is masked: zeros, not NaN
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((B, H, S, D)).astype(NP[dt]) for n in "qkv"}
    feeds["mask"] = _mask()
    want = ort.InferenceSession(m.SerializeToString()).run(None, feeds)[0]
    got = ort.InferenceSession(str(tmp_path / "o" / "model.asc.onnx")).run(None, feeds)[0]
    assert not np.isnan(want).any() and np.all(want[:, 5] == 0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-3 if dt == F16 else 1e-5, atol=1e-3 if dt == F16 else 1e-6)
    assert np.all(got[:, 5] == 0)


@pytest.mark.fast
def test_a_guard_of_a_softmax_over_another_axis_is_left_alone():
    m = guarded_attention(axis=2)
    res = asc_onnx.fuse(m, None, FuseOptions(judge=False, emulate=False), validate=False)
    assert res.report["canonicalize"]["nan_guards"] == 0
    assert "attention" not in [op.kernel for op in res.ops]


@pytest.mark.fast
def test_the_rewrite_is_exact_on_onnxruntime_with_a_row_masked_everywhere():
    """The canonical graph alone (no fusion), against the original, on a mask with a row masked everywhere."""
    import onnx_graphsurgeon as gs

    from asc_onnx.canonicalize import canonicalize

    m = guarded_attention()
    g = gs.import_onnx(m)
    assert canonicalize(g, 17).nan_guards == 1
    canon = gs.export_onnx(g.cleanup().toposort())
    onnx.checker.check_model(canon)
    ops = [n.op_type for n in canon.graph.node]
    assert ops.index("MatMul", ops.index("Softmax")) < ops.index("IsNaN")  # the guard reads P·V
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal((B, H, S, D)).astype(np.float32) for n in "qkv"}
    feeds["mask"] = _mask()
    a = ort.InferenceSession(m.SerializeToString()).run(None, feeds)[0]
    b = ort.InferenceSession(canon.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(a, b)
