"""The ONNX backend cases shipped inside the onnx package whose ``_expanded`` bodies are pointwise:
each expanded body fuses into exactly one op, and the emulated kernel reproduces the case's
expected outputs (fp32 as given; fp16 by casting the inputs; bf16 cases as shipped)."""

from __future__ import annotations

import numpy as np
import pytest
from backend_cases import cases
from conftest import fuse_and_prebuild, fused
from onnx import TensorProto

from asc_onnx import FuseOptions
from asc_onnx.emulator.harness import run
from asc_onnx.soc import SOCS
from asc_onnx.validate import compare_arrays

FAMILIES = ["gelu", "hardswish", "hardsigmoid", "elu", "selu", "celu", "softplus", "softsign", "leakyrelu", "mish",
            "shrink", "thresholdedrelu", "clip", "prelu", "swish"]
#: Cases with nothing for a float kernel to do: int8 data, or both Clip bounds absent (a lone Identity).
NOT_FLOAT_WORK = {"test_clip_default_inbounds_expanded", "test_clip_default_int8_inbounds_expanded",
                  "test_clip_default_int8_max_expanded", "test_clip_default_int8_min_expanded"}


CASES = cases(FAMILIES, lambda name: "expanded" in name and name.split("_")[1] in FAMILIES)


@pytest.mark.fast
def test_every_family_has_cases():
    assert {c.name.split("_")[1] for c in CASES} == set(FAMILIES)
    assert len(CASES) >= 45


@pytest.fixture(scope="module")
def fused_cases():
    """Every case fused once, and the programs its tests run (910B in its dtype and fp16, 310P in its dtype, bf16
    aside) compiled in shared batches (conftest.fuse_and_prebuild)."""
    def runs(_, k):
        return [*((d, "Ascend910B") for d in sorted({*k.ir.dtypes, TensorProto.FLOAT16})),
                *((d, "Ascend310P") for d in k.ir.dtypes if d != TensorProto.BFLOAT16)]

    options = FuseOptions(judge=False, emulate=False)
    return fuse_and_prebuild({c.name: (c.model, options) for c in CASES}, runs)


def _feed(case, kernel, cast=None):
    inputs, _ = case.data_sets[0]
    names = [i.name for i in case.model.graph.input]
    arrays = [np.asarray(inputs[names.index(n)]) for n in kernel.op.instances[0].inputs]
    return [a.astype(cast) for a in arrays] if cast is not None else arrays


def _compare(case, got, dtype):
    expected = np.asarray(case.data_sets[0][1][0])
    if dtype == TensorProto.FLOAT16:
        expected = expected.astype(np.float16)
    c = compare_arrays("y", expected, got, dtype)
    assert c.ok, f"{case.name}: max abs {c.max_abs} rel {c.max_rel}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_expanded_body_is_one_fused_op_reproducing_expected_outputs(case, fused_cases):
    res = fused(fused_cases, case.name)
    if case.name in NOT_FLOAT_WORK:
        assert res.kernels == ()
        return
    assert len(res.asc_model.graph.node) == 1, [n.op_type for n in res.asc_model.graph.node]
    assert len(res.kernels) == 1, res.report["kernels"]["not_generated"]
    k = res.kernels[0]
    feed = _feed(case, k)
    dtype = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16}.get(
        feed[0].dtype, TensorProto.BFLOAT16)
    out = run(k.ir, k.files, f"{k.op.op_type}TilingData", feed, SOCS["Ascend910B"]).outputs[0]
    _compare(case, out, dtype)
    if dtype == TensorProto.FLOAT:
        half = run(k.ir, k.files, f"{k.op.op_type}TilingData", _feed(case, k, np.float16), SOCS["Ascend910B"])
        _compare(case, half.outputs[0], TensorProto.FLOAT16)


@pytest.mark.parametrize("case", [c for c in CASES if c.name not in NOT_FLOAT_WORK and "bfloat16" not in c.name],
                         ids=lambda c: c.name)
def test_expanded_cases_on_310p(case, fused_cases):
    k = fused(fused_cases, case.name).kernels[0]
    feed = _feed(case, k)
    # 310P has no DataCopyPad: ragged tails and broadcasts take the window path, nothing is refused.
    out = run(k.ir, k.files, f"{k.op.op_type}TilingData", feed, SOCS["Ascend310P"]).outputs[0]
    _compare(case, out, TensorProto.FLOAT if feed[0].dtype == np.float32 else TensorProto.FLOAT16)
