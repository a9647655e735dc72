"""The defects the pipe-aware emulator found in earlier kernels, kept found: each generated kernel with its
fix taken out again must fault, and the shipped kernel must pass. Plus what happens to an op whose kernel
the emulator rejects: it is not shipped."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest
from conftest import F32, MODELS, const, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.cli import main
from asc_onnx.emulator.harness import EmulatorFaultError, build, run
from asc_onnx.kernels.ir import snake_case
from asc_onnx.package import render
from asc_onnx.soc import SOCS
from asc_onnx.verify_kernels import random_inputs


def _kernel(source, rule: str, soc: str = "Ascend910B"):
    # BiasGELU after a MatMul: the LinearGELU rule would take the whole chain
    skip = frozenset({"LinearGELU"}) if rule == "BiasGELU" else frozenset()
    res = asc_onnx.fuse(source, options=FuseOptions(judge=False, soc=soc, emulate=False, skip=skip), validate=False)
    return next(k for k in res.kernels if k.op.rule == rule)


def _without(k, *lines: str):
    """The kernel's files with every line containing one of ``lines`` removed."""
    files = dict(k.files)
    rel = f"op_kernel/{k.ir.snake}.cpp"
    kept = [ln for ln in files[rel].splitlines() if not any(s in ln for s in lines)]
    assert len(kept) < len(files[rel].splitlines()), lines
    files[rel] = "\n".join(kept) + "\n"
    return files


def _run(k, files, inputs, soc="Ascend910B", core_num=None):
    return run(k.ir, files, f"{k.op.op_type}TilingData", inputs, SOCS[soc], core_num)


def test_fp16_broadcast_staging_needs_its_mte2_v_flag():
    # The fp16 RoPE chain: cos/sin are copied into a TBuf and Cast with no sync before this fix.
    k = _kernel(MODELS / "llama_tiny_dynamo_fp16.onnx", "ElementwiseChain")
    inputs = random_inputs(k, onnx.TensorProto.FLOAT16, (2, 4, 8, 8))
    _run(k, k.files, inputs)
    with pytest.raises(EmulatorFaultError, match=r"pipe race \(read after write\).*Cast \(V.*DataCopyPad GM->UB"):
        _run(k, _without(k, "SetFlag<AscendC::HardEvent::MTE2_V>", "WaitFlag<AscendC::HardEvent::MTE2_V>"), inputs)


def test_a_shared_program_reports_in_each_kernels_own_names():
    """Two ops whose files differ only in their names share one compiled program; a fault in the second is told
    with the second's file and op names, not those the program was compiled under."""
    k = _kernel(MODELS / "llama_tiny_dynamo_fp16.onnx", "ElementwiseChain")
    name = "AscRenamedEw123456"  # as long as the generated hash names: alignment padding follows a name's length
    assert len(name) == len(k.ir.op_type)
    other = render(dataclasses.replace(k.op, op_type=name),
                   dataclasses.replace(k.ir, op_type=name, snake=snake_case(name)), SOCS["Ascend910B"])
    assert other.files[f"op_kernel/{other.ir.snake}.cpp"] != k.files[f"op_kernel/{k.ir.snake}.cpp"]
    inputs = random_inputs(k, onnx.TensorProto.FLOAT16, (2, 4, 8, 8))
    flags = ("SetFlag<AscendC::HardEvent::MTE2_V>", "WaitFlag<AscendC::HardEvent::MTE2_V>")
    with pytest.raises(EmulatorFaultError, match=f"{k.ir.snake}.cpp:"):
        _run(k, _without(k, *flags), inputs)
    with pytest.raises(EmulatorFaultError) as raised:
        run(other.ir, _without(other, *flags), f"{other.ir.op_type}TilingData", inputs, SOCS["Ascend910B"])
    assert f"{other.ir.snake}.cpp:" in str(raised.value) and k.ir.snake not in str(raised.value)
    assert build(other.ir, _without(other, *flags), f"{other.ir.op_type}TilingData", onnx.TensorProto.FLOAT16,
                 SOCS["Ascend910B"]) == build(k.ir, _without(k, *flags), f"{k.op.op_type}TilingData",
                                              onnx.TensorProto.FLOAT16, SOCS["Ascend910B"])  # one program


def test_310p_end_window_needs_its_mte3_barrier():
    k = _kernel(MODELS / "cnn_silu_dynamo.onnx", "SiLU", "Ascend310P")
    inputs = random_inputs(k, F32, (1001,))  # 4004 bytes: a ragged tail, head plus end window
    _run(k, k.files, inputs, "Ascend310P")
    with pytest.raises(EmulatorFaultError, match="no PipeBarrier<PIPE_MTE3>"):
        _run(k, _without(k, "PipeBarrier<PIPE_MTE3>"), inputs, "Ascend310P")


def test_select_kernel_needs_reserved_ub():
    nodes = [helper.make_node("Less", ["x", "z"], ["c"]), helper.make_node("Mul", ["x", "k"], ["m"]),
             helper.make_node("Where", ["c", "m", "x"], ["y"])]
    m = model(nodes, [("x", F32, [64, 3000])], [("y", F32, [64, 3000])], [const("z", 0.0), const("k", 0.1)])
    k = _kernel(m, "ElementwiseChain")
    inputs = random_inputs(k, F32, (64, 3000))
    res = _run(k, k.files, inputs, core_num=1)  # one core: its tiles fill the unified buffer
    assert res.ub_peak_bytes <= SOCS["Ascend910B"].ub_bytes - 8192
    # Without the host's 8 KB reservation, tiles fill the UB over Select's scratch at TMP_UB_OFFSET.
    unreserved = type(k.ir).__dict__["uses_select"]
    try:
        type(k.ir).uses_select = property(lambda self: False)
        with pytest.raises(EmulatorFaultError, match="TMP_UB_OFFSET"):
            _run(k, k.files, inputs, core_num=1)
    finally:
        type(k.ir).uses_select = unreserved


def test_chunk_reload_needs_its_v_mte2_flag():
    k = _kernel(MODELS / "bert_tiny_legacy.onnx", "BiasGELU")
    inputs = random_inputs(k, F32, (4, 11008), broadcast_shapes=[(11008,)])
    _run(k, k.files, inputs, core_num=1)  # one core walks every chunk: the bias is reloaded twice
    with pytest.raises(EmulatorFaultError, match=r"write after read"):
        _run(k, _without(k, "SetFlag<AscendC::HardEvent::V_MTE2>", "WaitFlag<AscendC::HardEvent::V_MTE2>"), inputs,
             core_num=1)


def test_pow_with_odd_exponent_keeps_the_sign():
    m = model([helper.make_node("Pow", ["x", "e"], ["p"]), helper.make_node("Add", ["p", "x"], ["y"])],
              [("x", F32, [4, 64])], [("y", F32, [4, 64])], [const("e", 5.0)])
    res = asc_onnx.fuse(m)
    assert res.kernel_checks and all(c.ok for c in res.kernel_checks)
    assert not any(s.api in ("Ln", "Exp") for s in res.kernels[0].ir.steps)


@pytest.mark.fast
def test_equal_infinities_compare_equal():
    from asc_onnx.validate import compare_arrays
    a = np.array([np.inf, -np.inf, 1.0], np.float32)
    assert compare_arrays("y", a, a.copy(), onnx.TensorProto.FLOAT).ok


@pytest.fixture
def unservable(tmp_path):
    # Softmax over rows of 5 fp32 (20 bytes): on 310P (no DataCopyPad) the row tiling refuses it (reason 3).
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=-1)]
    m = model(nodes, [("x", F32, [3, 5])], [("y", F32, [3, 5])], [])
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    return path


def test_rejected_kernel_is_not_shipped(unservable, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["fuse", str(unservable), "-o", str(out), "--soc", "Ascend310P"]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "not shipped" in err and "rows shorter than 32 bytes" in err and "reason 3" in err
    assert "failed in the emulator" not in err  # a refusal with its reason, not a kernel failure
    atc = onnx.load(out / "model.atc.onnx")
    assert not any(n.op_type.startswith("Asc") for n in atc.graph.node)
    text = (out / "report.json").read_text()

    def no_constants(name):
        raise AssertionError(f"report.json is not strict JSON: {name}")

    report = json.loads(text, parse_constant=no_constants)  # the rejected run's error is infinite
    assert report["kernels"]["generated"] == [] and report["kernels"]["rejected"]
    assert report["kernels"]["emulated"][0]["max_abs"] == "inf"
    assert not (out / "op_package").exists()
    assert main(["fuse", str(unservable), "-o", str(tmp_path / "s"), "--soc", "Ascend310P", "--strict"]) == 1


def test_input_shape_binding_does_not_make_a_broadcast_input_full(tmp_path):
    # An SE-block gate: p = GlobalAveragePool(x) is [N,C,1,1], s is [1,C,1,1]. With --input-shape x:1,...
    # both look [1,C,1,1]; the ATC model still accepts any batch, so s must stay a broadcast input (it
    # used to be read at the output's length, past its end at batch 6).
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]), helper.make_node("Sigmoid", ["p"], ["g"]),
             helper.make_node("Mul", ["g", "s"], ["h"]), helper.make_node("Add", ["h", "p"], ["y"])]
    m = model(nodes, [("x", F32, ["N", 64, 7, 7])], [("y", F32, ["N", 64, 1, 1])],
              [const("s", np.linspace(-1, 1, 64).reshape(1, 64, 1, 1))])
    path = tmp_path / "se.onnx"
    onnx.save(m, path)
    out = tmp_path / "o"
    res = asc_onnx.fuse(path, out, FuseOptions(judge=False, input_shapes=(("x", (1, 64, 7, 7)),)))
    k = res.kernels[0]
    assert [x.kind for x in k.ir.inputs] == ["full", "broadcast"]
    rep = asc_onnx.validate_kernels(path, out, FuseOptions(judge=False, input_shapes=(("x", (6, 64, 7, 7)),)))
    assert rep.ok and rep.emulated_nodes == 1


@pytest.mark.fast
def test_inner_axis_broadcast_is_refused_not_computed_wrongly(tmp_path):
    # A user pattern with no shape check matches tanh(x * s) with a per-channel s [1,C,1,1] of an NCHW x:
    # the kernel (which repeats inputs along leading axes only) must refuse it, with the reason.
    pat = tmp_path / "pat.py"
    pat.write_text("from asc_onnx.pattern import op, rule\n\n"
                   "def scaled_tanh(x, s):\n    return op.Tanh(op.Mul(x, s))\n\n"
                   "RULES = [rule('ScaledTanh', scaled_tanh, op_name='ScaledTanh', kernel='pointwise',\n"
                   "              doc='tanh(x*s)')]\n")
    nodes = [helper.make_node("Mul", ["x", "s"], ["h"]), helper.make_node("Tanh", ["h"], ["y"])]
    m = model(nodes, [("x", F32, [2, 8, 4, 4])], [("y", F32, [2, 8, 4, 4])], [const("s", np.ones((1, 8, 1, 1)))])
    res = asc_onnx.fuse(m, options=FuseOptions(judge=False, pattern_files=(str(pat),)))
    assert [op.rule for op in res.ops] == ["ScaledTanh"] and not res.kernels
    why = " ".join(r["reason"] for r in res.report["kernels"]["not_generated"])
    assert "along inner axes" in why
    assert res.validation.ok


def _if_with_reshaped_operands():
    """An If whose branches compute sigmoid(a) * b + a, with a = Reshape(x, [N, 8] from Shape arithmetic) and
    b = Reshape(-x, [-1, 8]): onnx names b's first dim unk__N apart from a's, and symbolic inference does not
    enter bodies."""
    def branch(p):
        nodes = [helper.make_node("Shape", ["x"], [f"{p}s"]),
                 helper.make_node("Gather", [f"{p}s", f"{p}i0"], [f"{p}n"], axis=0),
                 helper.make_node("Unsqueeze", [f"{p}n", f"{p}ax"], [f"{p}nu"]),
                 helper.make_node("Concat", [f"{p}nu", f"{p}c8"], [f"{p}shape"], axis=0),
                 helper.make_node("Reshape", ["x", f"{p}shape"], [f"{p}a"]),
                 helper.make_node("Neg", ["x"], [f"{p}nx"]),
                 helper.make_node("Reshape", [f"{p}nx", f"{p}flat"], [f"{p}b"]),
                 helper.make_node("Sigmoid", [f"{p}a"], [f"{p}sg"]),
                 helper.make_node("Mul", [f"{p}sg", f"{p}b"], [f"{p}m"]),
                 helper.make_node("Add", [f"{p}m", f"{p}a"], [f"{p}y"])]
        inits = [const(f"{p}i0", 0, np.int64), const(f"{p}ax", [0], np.int64), const(f"{p}c8", [8], np.int64),
                 const(f"{p}flat", [-1, 8], np.int64)]
        return helper.make_graph(nodes, p, [], [helper.make_tensor_value_info(f"{p}y", F32, ["N", 8])], inits)

    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("t"), else_branch=branch("e"))
    return model([node], [("x", F32, ["N", 8]), ("c", onnx.TensorProto.BOOL, [])], [("y", F32, ["N", 8])])


def test_dims_onnx_names_apart_in_if_branches_are_proven_equal(tmp_path):
    """Reshape's -1 is what is left once the named dims cancel: b is [N, 8] like a, so each branch's chain
    fuses, is emulated on both bindings of N, and the deployed model matches."""
    path = tmp_path / "if.onnx"
    onnx.save(_if_with_reshaped_operands(), path)
    res = asc_onnx.fuse(path, tmp_path / "out")
    assert [(op.rule, len(op.instances)) for op in res.ops] == [("ElementwiseChain", 2)]
    assert all(inst.input_shapes[0] == ("N", 8) for inst in res.ops[0].instances)
    assert res.validation.ok and res.deployed is not None and res.deployed.ok and res.deployed.in_bodies == 2
    assert {c.inputs for c in res.kernel_checks if c.ok} >= {"random", "dims=7"}
