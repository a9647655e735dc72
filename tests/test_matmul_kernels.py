"""Matmul+epilogue kernels (Linear+SiLU, SwiGLU, Linear+GELU) in the emulator against onnxruntime.

Shapes: M in {1, 7, 128, 1000} rows with K = 40 and N = 72 (neither a multiple of 16) on 910B; 310P takes
N = 80 (no DataCopyPad: 32-byte rows of y) and half inputs only. fp16 kernels are compared with the fp32
body rounded to fp16 once (validate.TOLERANCES[FLOAT16]); fp32 with the fp32 tolerances. Every kernel
also runs under forced tilings (smallest and largest base blocks, K split into steps, ORDER_N, stepN 2)
and, where ../shared/ascend is present, under the tiling CANN's own MultiCoreMatmulTiling computes."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import F16, F32, model
from onnx import TensorProto, helper, numpy_helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.emulator import cann_tiling
from asc_onnx.kernels.matmul.driver import CUBE_FIELDS
from asc_onnx.kernels.matmul.lower import MatmulKernel
from asc_onnx.soc import get_soc
from asc_onnx.verify_kernels import check, matmul_inputs

K, N, N310 = 40, 72, 80
NP = {F32: np.float32, F16: np.float16}


def _w(name, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(NP[dtype]), name)


def linear_silu(dtype=F32, n=N, bias=True, form="matmul", k=K):
    """SiLU(x @ W [+ b]): MatMul+Add, Gemm (transB) or MatMul of a Transpose (a dynamo export)."""
    inits = []
    if form == "gemm":
        inits.append(_w("W", (n, k), dtype, 1))
        ins = ["x", "W"] + (["b"] if bias else [])
        nodes = [helper.make_node("Gemm", ins, ["h"], transB=1)]
    elif form == "transpose":
        inits.append(_w("W", (n, k), dtype, 1))
        nodes = [helper.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]),
                 helper.make_node("MatMul", ["x", "Wt"], ["mm"])]
    else:
        inits.append(_w("W", (k, n), dtype, 1))
        nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"])]
    if form != "gemm":
        nodes.append(helper.make_node("Add", ["mm", "b"], ["h"]) if bias
                     else helper.make_node("Identity", ["mm"], ["h"]))
    if bias:
        inits.append(numpy_helper.from_array(np.linspace(-1, 1, n).astype(NP[dtype]), "b"))
    nodes += [helper.make_node("Sigmoid", ["h"], ["s"]), helper.make_node("Mul", ["h", "s"], ["y"])]
    rank2 = form == "gemm"
    lead = [7] if rank2 else [2, "S"]
    return model(nodes, [("x", dtype, lead + [k])], [("y", dtype, lead + [n])], inits)


def swiglu(dtype=F32, n=N, bias=False, split=False, k=K):
    """silu(x @ Wg [+ bg]) * (x @ Wu [+ bu]), or Split of one gate-up MatMul (Phi-3)."""
    if split:
        inits = [_w("Wgu", (k, 2 * n), dtype, 2)]
        nodes = [helper.make_node("MatMul", ["x", "Wgu"], ["gu"]),
                 helper.make_node("Split", ["gu"], ["g", "u"], axis=-1, num_outputs=2)]
        opset = 18
    else:
        inits = [_w("Wg", (k, n), dtype, 3), _w("Wu", (k, n), dtype, 4)]
        nodes = [helper.make_node("MatMul", ["x", "Wg"], ["g0"]), helper.make_node("MatMul", ["x", "Wu"], ["u0"])]
        if bias:
            inits += [numpy_helper.from_array(np.linspace(-1, 1, n).astype(NP[dtype]), "bg"),
                      numpy_helper.from_array(np.linspace(1, -1, n).astype(NP[dtype]), "bu")]
            nodes += [helper.make_node("Add", ["g0", "bg"], ["g"]), helper.make_node("Add", ["u0", "bu"], ["u"])]
        else:
            nodes += [helper.make_node("Identity", ["g0"], ["g"]), helper.make_node("Identity", ["u0"], ["u"])]
        opset = 17
    nodes += [helper.make_node("Sigmoid", ["g"], ["s"]), helper.make_node("Mul", ["g", "s"], ["a"]),
              helper.make_node("Mul", ["a", "u"], ["y"])]
    return model(nodes, [("x", dtype, [2, "S", k])], [("y", dtype, [2, "S", n])], inits, opset=opset)


def linear_gelu(dtype=F32, n=N, tanh=False, k=K):
    """GELU(x @ W + b), exact (Erf, BERT) or tanh (GPT-2)."""
    nt = NP[dtype]
    inits = [_w("W", (k, n), dtype, 5), numpy_helper.from_array(np.linspace(-1, 1, n).astype(nt), "b"),
             numpy_helper.from_array(np.array(0.5, nt), "half"), numpy_helper.from_array(np.array(1.0, nt), "one")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["h"])]
    if tanh:
        inits += [numpy_helper.from_array(np.array(0.044715, nt), "c"),
                  numpy_helper.from_array(np.array(np.sqrt(2 / np.pi), nt), "r")]
        nodes += [helper.make_node("Mul", ["h", "h"], ["h2"]), helper.make_node("Mul", ["h", "h2"], ["h3"]),
                  helper.make_node("Mul", ["h3", "c"], ["ch3"]), helper.make_node("Add", ["h", "ch3"], ["in0"]),
                  helper.make_node("Mul", ["in0", "r"], ["in1"]), helper.make_node("Tanh", ["in1"], ["t"])]
    else:
        inits.append(numpy_helper.from_array(np.array(np.sqrt(2), nt), "sq"))
        nodes += [helper.make_node("Div", ["h", "sq"], ["d"]), helper.make_node("Erf", ["d"], ["t"])]
    nodes += [helper.make_node("Add", ["t", "one"], ["t1"]), helper.make_node("Mul", ["h", "t1"], ["p"]),
              helper.make_node("Mul", ["p", "half"], ["y"])]
    return model(nodes, [("x", dtype, [2, "S", k])], [("y", dtype, [2, "S", n])], inits)


def _kernel(m, soc="Ascend910B"):
    res = asc_onnx.fuse(m, options=FuseOptions(judge=False, soc=soc, emulate=False), validate=False)
    ks = [k for k in res.kernels if isinstance(k.ir, MatmulKernel)]
    assert len(ks) == 1, [(k.op.op_type, k.op.kernel) for k in res.kernels]
    return ks[0]


def _run(k, rows, soc="Ascend910B", dtype=F32, cube_tiling=None, seed=0):
    inputs = matmul_inputs(k, dtype, (rows,) if k.op.instances[0].input_shapes[0].__len__() == 2 else (1, rows),
                           np.random.default_rng(seed))
    return check(k, inputs, get_soc(soc), f"M={rows}", cube_tiling=cube_tiling)


CASES = {
    "silu_bias": lambda d, n: linear_silu(d, n),
    "silu_nobias": lambda d, n: linear_silu(d, n, bias=False),
    "silu_gemm_transB": lambda d, n: linear_silu(d, n, form="gemm"),
    "silu_transpose": lambda d, n: linear_silu(d, n, bias=False, form="transpose"),
    "swiglu": lambda d, n: swiglu(d, n),
    "swiglu_bias": lambda d, n: swiglu(d, n, bias=True),
    "swiglu_split": lambda d, n: swiglu(d, n, split=True),
    "gelu_erf": lambda d, n: linear_gelu(d, n),
    "gelu_tanh": lambda d, n: linear_gelu(d, n, tanh=True),
}


@pytest.mark.parametrize("rows", [1, 7, 128, 1000])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fp32_on_910b_every_m(case, rows):
    k = _kernel(CASES[case](F32, N))
    c = _run(k, rows)
    assert c.ok, (c.error, c.max_abs)
    assert c.cube and c.cube["macs"] >= rows * K * N * len(k.ir.gemms)


@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend310P"])
@pytest.mark.parametrize("case", ["silu_bias", "swiglu", "swiglu_split", "gelu_tanh", "silu_gemm_transB"])
def test_fp16_against_fp32_reference_both_socs(case, soc):
    n = N310 if soc == "Ascend310P" else N
    k = _kernel(CASES[case](F16, n), soc)
    for rows in (7, 128):
        c = _run(k, rows, soc, F16)
        assert c.ok, (soc, rows, c.error, c.max_abs)


def test_310p_refuses_float_matmul_and_ragged_n():
    res = asc_onnx.fuse(linear_silu(F32, N310), options=FuseOptions(judge=False, soc="Ascend310P", emulate=False),
                        validate=False)
    assert not [k for k in res.kernels if isinstance(k.ir, MatmulKernel)]
    k = _kernel(linear_silu(F16, N), "Ascend310P")
    c = _run(k, 7, "Ascend310P", F16)
    assert not c.ok and "reason 3" in c.error


def _default_tiling(k, rows):
    c = _run(k, rows)
    assert c.ok
    return {f: c.cube[f] for f in CUBE_FIELDS}


def _forced(base, **kw):
    t = dict(base)
    t.update(kw)
    return t


@pytest.mark.parametrize("case", ["swiglu", "silu_bias", "swiglu_split"])
def test_kernels_under_several_valid_tilings(case):
    k = _kernel(CASES[case](F32, N))
    rows = 1000
    base = dict(_default_tiling(k, rows), stepM=1, stepN=1, iterateOrder=0)
    one = dict(base, usedCoreNum=1, singleCoreM=rows, singleCoreN=80)
    variants = {
        "smallest base": _forced(base, baseM=16, baseN=16, baseK=8, stepKa=1, stepKb=1, depthA1=1, depthB1=1),
        "largest base the UB holds, one core": _forced(one, baseK=40, stepKa=1, stepKb=1, depthA1=2, depthB1=2,
                                                       dbL0C=1),
        "K in steps, ORDER_N": _forced(base, baseK=8, stepKa=2, stepKb=1, depthA1=4, depthB1=2, iterateOrder=1,
                                       stepM=1),
        "stepN 2, tails in M N K": _forced(one, baseM=48, baseN=32, baseK=16, stepN=2, depthB1=6, stepKb=3,
                                           stepKa=3, depthA1=3, stepM=1),
    }
    for name, t in variants.items():
        c = _run(k, rows, cube_tiling=t)
        assert c.ok, (name, c.error, c.max_abs)
        assert c.cube["baseM"] == t["baseM"] and c.cube["iterateOrder"] == t["iterateOrder"]


def test_tiling_that_overflows_l0_is_a_fault():
    k = _kernel(swiglu(F32, N))
    base = _default_tiling(k, 128)
    c = _run(k, 128, cube_tiling=_forced(base, baseM=16, baseN=16, baseK=1024, stepKa=1, stepKb=1, dbL0A=2))
    assert not c.ok and "L0A overflow" in c.error


def test_gm_traffic_counts_the_tiling_and_beats_the_unfused_chain():
    from asc_onnx.verify_kernels import data_movement

    k = _kernel(swiglu(F16, 256))
    inputs = matmul_inputs(k, F16, (1, 1000), np.random.default_rng(0))
    c = check(k, inputs, get_soc("Ascend910B"), "M=1000")
    assert c.ok
    dm = data_movement(k, inputs, c.gm_bytes, c.vec_elems, c.cube)
    # What the cube reads is at least what the tiling must read; y is written once; C crosses GM in fp32.
    assert c.cube["a_read"] + c.cube["b_read"] >= dm.tiling_min - 1000 * 256 * 2
    assert dm.fused < dm.unfused


# -- CANN's own tiling algorithm, built at test time from ../shared/ascend ------------------------------

needs_cann = pytest.mark.skipif(cann_tiling.source_root() is None, reason="../shared/ascend is not present")


@needs_cann
@pytest.mark.parametrize("case", ["swiglu", "silu_bias", "gelu_tanh", "silu_gemm_transB"])
def test_kernels_under_the_tiling_cann_picks(case):
    k = _kernel(CASES[case](F32, N))
    for rows in (1, 7, 128, 1000):
        t = cann_tiling.cann_tilings(k.ir, k.files, get_soc("Ascend910B"), F32, [(rows, N, K)])[0]
        c = _run(k, rows)  # the check asks CANN's tiling itself
        assert c.ok and c.tiling == "CANN", (rows, t, c.error, c.max_abs)
        assert c.cube["baseK"] == t["baseK"] and c.cube["depthA1"] == t["depthA1"]


# -- planted misuse of the Matmul API: tests/cpp/emu_matmul.cpp ----------------------------------------


def _matmul_program(folder: Path, *defines: str):
    from asc_onnx.emulator import INCLUDE_DIR

    exe = folder / ("emu_matmul" + "".join(defines))
    subprocess.run(["g++", "-std=c++17", "-O1", "-w", *(f"-D{d}" for d in defines), "-I", str(INCLUDE_DIR),
                    str(Path(__file__).resolve().parent / "cpp" / "emu_matmul.cpp"), "-o", str(exe)],
                   check=True, capture_output=True)
    return lambda s: subprocess.run([str(exe), s], capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def matmul_exe(tmp_path_factory):
    return _matmul_program(tmp_path_factory.mktemp("mm"))


def test_the_cube_only_matmul_runs_on_the_aic_and_only_there(matmul_exe, tmp_path):
    """With ASCENDC_CUBE_ONLY the Matmul is the cube core's own (a __cube__ kernel, Huawei's matmul sample): the same C
    on the AIC, refused on a vector core; without it, the vector core's KFC client, refused on an AIC (no server)."""
    cube_only = _matmul_program(tmp_path, "ASCENDC_CUBE_ONLY")
    assert cube_only("aic") == matmul_exe("ok") and matmul_exe("ok").startswith("OK"), cube_only("aic")
    out = cube_only("ok")
    assert out.startswith("FAULT") and "on a vector core with ASCENDC_CUBE_ONLY" in out, out
    out = matmul_exe("aic")
    assert out.startswith("FAULT") and "on a cube core without ASCENDC_CUBE_ONLY" in out, out


def test_matmul_api_matches_numpy(matmul_exe):
    out = matmul_exe("ok")
    assert out.startswith("OK"), out
    got = np.array([float(v) for v in out.split()[1:]], np.float32)
    a = (np.arange(20 * 24, dtype=np.float32).reshape(20, 24) % 7 - 3).astype(np.float16).astype(np.float32)
    b = (np.arange(24 * 40, dtype=np.float32).reshape(24, 40) % 5 - 2).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(got.reshape(20, 40), a @ b + 0.5, rtol=0, atol=0)


@pytest.mark.parametrize("scenario,message", [
    ("getc_before_iterate", "with no C block: call Iterate first"),
    ("iterate_twice", "never fetched"),
    ("missing_wait", "may still be writing on the cube core"),
    ("l0_overflow", "L0A overflow"),
    ("l1_two_objects", "L1 overflow"),
    ("slot_race", "cube write after MTE2 read"),
    ("regist_after_initbuffer", "before any other use of the pipe"),
    ("wait_without_signal", "never signals"),
    ("regist_out_of_scope", "after the scope of its REGIST_MATMUL_OBJ"),
    ("interleave", "call End() on one before switching"),
    ("bias_not_resent", "SetBias was not repeated"),
    ("ring_unreleased", "cube write after MTE2 read"),
    ("ring_read_early", "may still be writing on the cube core"),
    ("notify_overflow", "would overflow"),
    ("trans_b_undeclared", "ISTRANS is false"),
    ("org_short", "row pitch"),
    ("org_mid_round", "its message clears them"),
    ("org_pitch_16bit", "16 bits"),
    ("async_input_written", "the cube core takes the product when it reaches the message"),
    ("launch_syncall_outstanding", "SyncAll<true> orders the vector cores only"),
])
def test_planted_matmul_misuse_faults(matmul_exe, scenario, message):
    out = matmul_exe(scenario)
    assert out.startswith("FAULT") and message in out, out


def test_waited_async_and_flagged_slot_pass(matmul_exe):
    assert matmul_exe("waited").startswith("OK")
    assert matmul_exe("slot_flagged").startswith("OK")
    assert matmul_exe("interleave_ended").startswith("OK")
    assert matmul_exe("l1_shared").startswith("OK")  # objects share one L1 region: each fits, not their sum
    assert matmul_exe("ring").startswith("OK")  # two blocks in flight, each stage released before reuse
    assert matmul_exe("stage").startswith("OK")  # the message itself orders this core's MTE3 writes before it
    assert matmul_exe("org_wide").startswith("OK")  # C's rows 48 apart (SetOrgShape's orgKc): room for 40 columns
    assert matmul_exe("async_input_after_wait").startswith("OK")  # the stage written again once the product is in
    assert matmul_exe("launch_syncall_waited").startswith("OK")  # the product waited for, then the barrier


@pytest.mark.parametrize("case", ["silu_bias", "swiglu", "gelu_erf"])
def test_bf16_inputs_on_910b(case):
    """bf16 x, weights and bias through the same kernel (the fp32 body is the reference, bf16 tolerances)."""

    k = _kernel(CASES[case](F32, N))
    c = _run(k, 128, dtype=TensorProto.BFLOAT16)
    assert c.ok and c.dtype == "bfloat16_t", (c.error, c.max_abs)


def test_fp16_llama_swiglu_ships_on_310p_on_captured_activations():
    from conftest import MODELS

    res = asc_onnx.fuse(MODELS / "llama_tiny_dynamo_fp16.onnx", options=FuseOptions(judge=False, soc="Ascend310P"))
    swiglu = [k for k in res.kernels if isinstance(k.ir, MatmulKernel)]
    assert swiglu
    for k in swiglu:
        labels = {c.inputs for c in res.kernel_checks if c.op_type == k.op.op_type and c.ok}
        assert {"random", "captured"} <= labels
    assert res.deployed is not None and res.deployed.ok


def test_deployed_check_runs_matmul_nodes_over_the_budget_as_their_bodies(tmp_path, capsys):
    """A SwiGLU of 2 x 2048 x 2048 at 8 tokens is 67M multiply-accumulates, over what the emulator runs at full
    size: the kernel rung proves it at reduced K and N, and the deployed check runs that node as its function
    body (counted apart) instead of emulating it for minutes; the summary says so."""
    from asc_onnx.cli import main
    from asc_onnx.kernels.matmul.budget import MATMUL_EMU_MACS

    assert 8 * 2048 * 2048 * 2 > MATMUL_EMU_MACS
    path = tmp_path / "ffn.onnx"
    onnx.save(swiglu(F16, n=2048, k=2048), path)
    assert main(["fuse", str(path), "-o", str(tmp_path / "out"), "--keep-slower"]) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    dep = report["deployed"]
    assert dep["ok"] and dep["over_budget"] == 1 and dep["emulated_nodes"] == 0, dep
    assert "1 matmul nodes over the emulation budget ran as their function bodies" in out
    checks = [c for c in report["kernels"]["emulated"] if c["op_type"] == "AscSwiGlu"]
    assert checks and all(c["ok"] and " K=" in c["inputs"] for c in checks), checks


def test_linear_gelu_instances_with_different_constants_share_one_kernel():
    """Two Linear+GELUs whose 1/sqrt(2) differ in the last float32 bits (both within the rule's tolerance): one op
    type, one kernel, the constant an op parameter per node (attribute p0..); each instance checked in the
    emulator at its own value and the rewritten model against onnxruntime."""
    nt = np.float32
    inits = [_w("W1", (K, N), F32, 5), _w("W2", (K, N), F32, 6),
             numpy_helper.from_array(np.linspace(-1, 1, N).astype(nt), "b"),
             numpy_helper.from_array(np.array(0.5, nt), "half"), numpy_helper.from_array(np.array(1.0, nt), "one"),
             numpy_helper.from_array(np.array(0.70710678, nt), "r1"),
             numpy_helper.from_array(np.array(0.7071067, nt), "r2")]
    nodes = []
    for i in (1, 2):
        nodes += [helper.make_node("MatMul", ["x", f"W{i}"], [f"mm{i}"]),
                  helper.make_node("Add", [f"mm{i}", "b"], [f"h{i}"]),
                  helper.make_node("Mul", [f"h{i}", f"r{i}"], [f"d{i}"]), helper.make_node("Erf", [f"d{i}"], [f"t{i}"]),
                  helper.make_node("Add", [f"t{i}", "one"], [f"u{i}"]),
                  helper.make_node("Mul", [f"h{i}", f"u{i}"], [f"p{i}"]),
                  helper.make_node("Mul", [f"p{i}", "half"], [f"y{i}"])]
    m = model(nodes, [("x", F32, [2, "S", K])], [("y1", F32, [2, "S", N]), ("y2", F32, [2, "S", N])], inits)
    res = asc_onnx.fuse(m, options=FuseOptions(judge=False))
    (k,) = [k for k in res.kernels if isinstance(k.ir, MatmulKernel)]
    assert len(k.op.instances) == 2 and k.ir.num_params >= 1
    values = {inst.params for inst in k.op.instances}
    assert len(values) == 2, values  # one kernel, two sets of constants
    assert "td.param[" in k.files[f"op_kernel/{k.ir.snake}.cpp"]
    assert res.validation is not None and res.validation.ok
    checked = [c for c in res.kernel_checks if c.op_type == k.op.op_type]
    assert checked and all(c.ok for c in checked)


# -- issue 19's deployment shapes: right under CANN's tiling (cut down), timed at full size ---------------------

#: (name, epilogue, M, K, N), as bench/bench_matmul.py reports them.
TARGETS = [("BERT-base FFN GELU", "gelu", 512, 768, 3072), ("LLaMA-7B SwiGLU", "swiglu", 2048, 4096, 11008),
           ("LLaMA-7B SwiGLU decode", "swiglu", 16, 4096, 11008), ("Qwen2-0.5B SwiGLU", "swiglu", 512, 896, 4864),
           ("Linear+SiLU", "silu", 512, 768, 768)]
BUILDERS = {"gelu": linear_gelu, "swiglu": swiglu, "silu": linear_silu}


def full_shapes(k, m: int, kk: int, n: int) -> list[list[int]]:
    """The inputs' shapes of a matmul kernel at M x K x N (the kernel is the same at every size: its host tiling
    reads the shapes), so a target's kernel is made from a small model and run or timed at the target's size."""
    weights = {g.weight for g in k.ir.gemms}
    biases = {g.bias for g in k.ir.gemms if g.bias is not None}
    cols = 2 * n if k.ir.split else n
    out = []
    for i in range(len(k.ir.inputs)):
        if i == 0:
            out.append([m, kk])
        elif i in weights:
            out.append([cols, kk] if k.ir.trans_b else [kk, cols])
        elif i in biases:
            out.append([cols])
    return out


@needs_cann
@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend310P"])
@pytest.mark.parametrize("target", TARGETS, ids=[t[0] for t in TARGETS])
def test_deployment_shapes_right_under_cann_tiling_and_timed_at_full_size(target, soc):
    """Each target in fp16 on both SoCs: CANN's tiling at the real M x K x N (the ring's, uncapped by UB on
    910B), cut to a size the emulator runs, against the fp32 body rounded once; then the timing-only path at the
    full size, whose estimate must exist; on 910B the op must beat what ATC would run at the table values, but for
    the SwiGLU prefills (LLaMA-7B 2048x4096x11008, Qwen2-0.5B 512x896x4864), which the Matmul API sample's
    calibration (issue 35) puts at 1.13x and 1.18x of it and which must not fall further behind. 310P's synchronous
    loop does not hide its epilogue and is not asked to."""
    from asc_onnx.estimate import estimate_at
    from asc_onnx.hardware import corner
    from asc_onnx.kernels.matmul.budget import cut as reduced_tiling

    _, kind, m, kk, n = target
    k = _kernel(BUILDERS[kind](F16, 64, k=32), soc)
    got = cann_tiling.cann_tilings(k.ir, k.files, get_soc(soc), F16, [(m, n, kk)])[0]
    assert not isinstance(got, int), got
    tiling, m2, n2, k2 = reduced_tiling(got, m, n, kk)
    inputs = matmul_inputs(k, F16, (1, m2), np.random.default_rng(0), k2, n2)
    c = check(k, inputs, get_soc(soc), f"M={m2} K={k2} N={n2} cut from {m}x{kk}x{n}", cube_tiling=tiling)
    assert c.ok, (c.error, c.max_abs)
    e = estimate_at(k, full_shapes(k, m, kk, n), get_soc(soc))
    assert not e.error and 0 < e.fused_us < math.inf and e.unfused_us > 0
    if soc == "Ascend910B":
        # Faster than CANN's MatMul and its epilogue kernels at the table values, but for the two SwiGLU prefills:
        # since the Matmul sample's calibration (issue 35: its ND -> NZ copies cost by the row) they are 1.13x and
        # 1.18x ATC's, held here so they cannot drift further. At the slow corner (ATC's fastest measured runs, our
        # slowest launch and DMA) this mixed design does not beat them, so the guard keeps the CANN kernels: the
        # cube-driven design is issue 38's.
        behind = {("swiglu", 2048): 1.16, ("swiglu", 512): 1.21}.get((kind, m), 1.0)
        assert e.fused_us < e.unfused_us * behind, (e.fused_us, e.unfused_us)
        slow = estimate_at(k, full_shapes(k, m, kk, n), get_soc(soc), corner(soc, slow=True))
        assert not slow.error and slow.unfused_us <= e.unfused_us


def test_the_ring_overlaps_the_epilogue_with_the_cube():
    """One tiling, two schedules, timing only: the ring (the next block queued on the cube before this block's
    epilogue) against the synchronous loop (cube, then epilogue, block after block) at BERT-base's FFN. The ring's
    critical core takes less than the synchronous one's by more than half the epilogue's vector time: the
    epilogue runs while the cube computes (and the cube's round trips no longer wait for it)."""
    import dataclasses

    from asc_onnx.emulator.harness import run
    from asc_onnx.hardware import emulator_table
    from asc_onnx.kernels.matmul.schedule import MatmulSchedule
    from asc_onnx.package import render

    soc = get_soc("Ascend910B")
    k = _kernel(linear_gelu(F16, 64, k=32))
    sync = render(k.op, dataclasses.replace(k.ir, schedule=MatmulSchedule(ring_stages=0)), soc)
    zero = np.zeros((), np.float16)
    inputs = [np.broadcast_to(zero, tuple(s)) for s in full_shapes(k, 512, 768, 3072)]
    table = emulator_table(soc.name, {})
    rs = run(sync.ir, sync.files, f"{k.op.op_type}TilingData", inputs, soc, values=False, timing=table)
    forced = {f: rs.cube[f] for f in CUBE_FIELDS}  # the synchronous loop's (UB-capped) tiling for both
    rr = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, soc, cube_tiling=forced, values=False, timing=table)
    assert rr.cube["baseN"] == rs.cube["baseN"] and rr.cube["baseM"] == rs.cube["baseM"]
    ring, loop = float(rr.time["cycles"]), float(rs.time["cycles"])
    vec = float(rs.time["busy"]["V"])
    assert vec > 0 and rr.time["busy"]["V"] == vec  # the same epilogue work in both
    assert ring < loop - 0.5 * vec, (ring, loop, vec)


def test_the_cube_runs_float_at_a_quarter_of_the_half_rate():
    """NPU架构版本2201.md: "Cube计算场景float算力为half算力的1/4" (torch_npu measures 84.5 TFLOPS fp32 at 4096^3 on
    910B2 against 314.5 fp16). The same Linear+SiLU at 2048 x 4096 x 4096, timing only: the M pipe's busy time in
    float is four times its time in half (it was twice: the 16 x 16 x 8 fractal's halved K)."""
    from asc_onnx.estimate import estimate_at

    busy = {}
    for dtype in (F16, TensorProto.FLOAT):
        k = _kernel(BUILDERS["silu"](dtype, 64, k=32), "Ascend910B")
        e = estimate_at(k, full_shapes(k, 2048, 4096, 4096), get_soc("Ascend910B"))
        assert not e.error, e.error
        busy[dtype] = e.busy_us["M"]
    assert 3.8 < busy[TensorProto.FLOAT] / busy[F16] < 4.2, busy


def test_a_run_says_when_its_cube_kernels_were_proven_under_our_own_tiling(tmp_path):
    """Without CANN's sources a cube kernel is proven under asc-onnx's own Matmul tiling, which the device never
    runs: the summary and the page say so, not only the check table's column. With them, nothing is said."""
    from asc_onnx import config
    from asc_onnx.report_text import summary

    here = config.current()
    m = linear_silu(F32, 64, k=32)
    own = asc_onnx.fuse(m, tmp_path / "own", FuseOptions(judge=False, config=config.Config(here.cache_dir, None)))
    assert own.report["kernels"]["own_tiling"] == [own.ops[0].op_type]
    assert "proven under asc-onnx's own Matmul tiling" in summary(own.report)
    assert "Proven under asc-onnx's own Matmul tiling" in (tmp_path / "own" / "report.html").read_text()
    if cann_tiling.source_root() is not None:  # the suite's default: ../shared/ascend
        cann = asc_onnx.fuse(m, tmp_path / "cann", FuseOptions(judge=False))
        assert cann.report["kernels"]["own_tiling"] == []
        assert "own Matmul tiling" not in summary(cann.report)
