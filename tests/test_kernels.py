"""Every pointwise op type made from the fixture models, run in the emulator against onnxruntime on
its function body: real shapes and edge shapes, Ascend910B and Ascend310P, fp32/fp16/bf16.

Tolerances are validate.TOLERANCES (fp32 1e-5 rel + 1e-5 abs, fp16 1e-3 rel + 1e-2 abs, bf16 1e-2 rel
+ 5e-2 abs). fp16 and bf16 runs of an fp32 body compare with the body on the exactly widened inputs,
rounded back: the kernel's one rounding at the end must land within that tolerance."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import MODELS
from onnx import TensorProto
from test_fixtures import FRONT_DOOR

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.emulator.harness import EmulatorFaultError, run
from asc_onnx.soc import SOCS
from asc_onnx.verify_kernels import check, concrete, random_inputs

F32, F16, BF16 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16
#: Rules of the matmul+epilogue class (tests/test_matmul_kernels.py).
MATMUL_RULES = frozenset({"LinearGELU", "LinearGELUTanh", "LinearSiLU", "LinearSiLUNoBias", "SwiGLU", "SwiGLUBias",
                          "SwiGLUSplit"})


#: The fixtures the kernels come from; fp32 first: a form found in both keeps its fp32 body (fp32 data through an
#: fp16 body is rounded). The front door's fixtures (models/make_fixtures.py DOORS) are proven by their own tests
#: (test_fixtures, test_deployed_tolerance): their kernels are the CNN's, attention's and the quantized BERT's.
FIXTURES = sorted((p for p in MODELS.glob("*.onnx") if p.stem not in FRONT_DOOR),
                  key=lambda p: ("fp16" in p.name, p.name))


@pytest.fixture(scope="module")
def all_kernels() -> list:
    """The fixtures' pointwise kernels (row kernels: tests/test_row_kernels.py), each from the first fixture that
    makes it, with the Linear+activation rules skipped so that the activations after a MatMul (BiasGELU) are
    collected as pointwise kernels too. Fused when a test first asks, not at collection."""
    first: dict[str, object] = {}
    for path in FIXTURES:
        res = asc_onnx.fuse(path, options=FuseOptions(judge=False, emulate=False, skip=MATMUL_RULES), validate=False)
        for k in res.kernels:
            if k.op.kernel == "pointwise":
                first.setdefault(k.op.signature, k)
    return sorted(first.values(), key=lambda k: k.op.op_type)


@pytest.fixture(scope="module")
def ks(all_kernels) -> list:
    """Every pointwise kernel the fixtures make: a test walks them all (the list is known only once the fixtures
    are fused, which is not done at collection); a failure names its op type."""
    return all_kernels


@pytest.mark.fast
def test_fixtures_give_every_pointwise_family(all_kernels):
    rules = {k.op.rule for k in all_kernels}
    assert {"SiLU", "BiasGELU", "GELUTanh", "ElementwiseChain"} <= rules


def _edge_inputs(k, n_rows: int, period: int, dtype: int):
    """Full inputs of (n_rows, period) or (n_rows*period,), broadcast inputs of (period,)."""
    if k.ir.broadcast_inputs:
        return random_inputs(k, dtype, (n_rows, period), seed=n_rows,
                             broadcast_shapes=[(period,)] * len(k.ir.broadcast_inputs))
    return random_inputs(k, dtype, (n_rows * period,), seed=n_rows)


def _assert_ok(c):
    assert c.ok, f"{c.op_type} {c.inputs} {c.shape} {c.dtype}: max abs {c.max_abs} {c.error or ''}"


@pytest.mark.parametrize("soc", sorted(SOCS))
def test_real_shapes(ks, soc):
    for k in ks:
        for dtype in k.ir.dtypes:
            inputs = random_inputs(k, dtype, concrete(k.op.instances[0].output_shapes[0], 4))
            _assert_ok(check(k, inputs, SOCS[soc], "real"))


def _dtypes(k) -> tuple:
    """fp16 data always (widened exactly into an fp32 body); fp32 data only through an fp32 body."""
    return (F32, F16) if k.op.instances[0].input_dtypes[0] == F32 else (F16,)


EDGES = {
    "one_element": (1, 1),
    "tail_not_32B": (3, 333),       # 999 elements: neither 32-byte multiple in fp32 nor fp16
    "fewer_than_cores": (7, 1),     # 7 elements on 48 cores; under 32 bytes on 310P (scalar copies)
    "multi_core_tail": (6061, 33),  # 200013 elements: several cores, ragged last core
}


@pytest.mark.parametrize("edge", sorted(EDGES))
def test_edge_shapes_910b(ks, edge):
    rows, period = EDGES[edge]
    for k in ks:
        for dtype in _dtypes(k):
            _assert_ok(check(k, _edge_inputs(k, rows, period, dtype), SOCS["Ascend910B"], edge))


@pytest.mark.parametrize("edge", sorted(EDGES))
def test_edge_shapes_310p(ks, edge):
    rows, period = EDGES[edge]
    for k, dtype in [(one, d) for one in ks for d in _dtypes(one)]:
        inputs = _edge_inputs(k, rows, period, dtype)
        c = check(k, inputs, SOCS["Ascend310P"], edge)
        # Ragged tails with broadcasts are served on 310P too (the window tile takes each period at its phase);
        # what stays refused is a period that is not whole 32-byte blocks and too long for a tile of
        # lcm(16, period) elements (chunk mode), as a refusal with its reason.
        if c.refused:
            assert k.ir.broadcast_inputs and period * inputs[0].itemsize % 32 and "reason 3" in c.error, c.error
            continue
        _assert_ok(c)


def test_more_than_ten_million_elements(ks):
    rows, period = (303031, 33)  # 10,000,023 elements
    for k in ks:
        c = check(k, _edge_inputs(k, rows, period, _dtypes(k)[0]), SOCS["Ascend910B"], "10M")
        _assert_ok(c)
        assert c.block_dim == 48


def test_bf16_through_fp32(ks):
    wide = [k for k in ks if F32 in _dtypes(k)]  # (an fp16 body: bf16 data would be rounded to fp16 by the reference)
    if not wide:
        pytest.skip("only fp16 bodies")
    for k in wide:
        _assert_ok(check(k, _edge_inputs(k, 129, 33, BF16), SOCS["Ascend910B"], "bf16"))


def test_bf16_refused_on_310p(all_kernels):
    k = all_kernels[0]
    c = check(k, _edge_inputs(k, 4, 16, BF16), SOCS["Ascend310P"], "bf16")
    assert not c.ok and "bfloat16 is not supported on Ascend310P" in c.error


def test_gm_traffic_is_the_compulsory_minimum_on_910b(all_kernels):
    for k in all_kernels:
        inputs = _edge_inputs(k, 6061, 33, _dtypes(k)[0])
        res = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, SOCS["Ascend910B"])
        full = next(a.nbytes for a, x in zip(inputs, k.ir.inputs) if x.kind == "full")
        broadcast = sum(a.nbytes for a, x in zip(inputs, k.ir.inputs) if x.kind == "broadcast")
        assert res.gm_write_bytes == full * len(k.ir.outputs)
        # every full input once, each broadcast period once per core
        assert res.gm_read_bytes == full * (len(inputs) - len(k.ir.broadcast_inputs)) + broadcast * res.block_dim


def test_planted_tail_bug_is_caught(all_kernels):
    """Drop the last element of every store: the emulator must report the unwritten output bytes."""
    k = next(k for k in all_kernels if not k.ir.broadcast_inputs)
    path = f"op_kernel/{k.ir.snake}.cpp"
    buggy = dict(k.files)
    buggy[path] = buggy[path].replace("Store({0}Gm[offset], {0}Local, len);".format(k.ir.outputs[0]),
                                      "Store({0}Gm[offset], {0}Local, len - 1);".format(k.ir.outputs[0]))
    assert buggy[path] != k.files[path]
    with pytest.raises(EmulatorFaultError, match="was never written by any block"):
        run(k.ir, buggy, f"{k.op.op_type}TilingData", _edge_inputs(k, 3, 333, F32), SOCS["Ascend910B"])


def test_planted_wrong_math_is_caught(all_kernels):
    k = next(k for k in all_kernels if k.op.rule == "SiLU")
    path = f"op_kernel/{k.ir.snake}.cpp"
    wrong = dict(k.files)
    wrong[path] = wrong[path].replace("AscendC::Exp(", "AscendC::Relu(", 1)
    c = check(dataclasses.replace(k, files=wrong), _edge_inputs(k, 3, 333, F32), SOCS["Ascend910B"], "mutant")
    assert not c.ok and c.error is None and c.max_abs > 1e-2
