"""An output's tolerance follows precision through the graph (the narrowest float type on any path into it
after a fused op, fp16 kernels feeding fp32 ops included), and a failed deployed check names the output, its
error and tolerance, and the fused op whose kernel alone makes it fail."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.cli import main
from asc_onnx.soc import get_soc
from asc_onnx.verify_deployed import verify_deployed

F16, F32 = TensorProto.FLOAT16, TensorProto.FLOAT


def ln_fp16_then_fp32(d: int = 64) -> onnx.ModelProto:
    """A decomposed fp16 LayerNorm (a row op) whose result is cast to fp32 and run through fp32 ops (a pointwise
    op): the form of an fp16 BERT's embedding LayerNorm feeding fp32 layers."""
    inits = [numpy_helper.from_array(np.array(1e-5, np.float16), "eps"),
             numpy_helper.from_array(np.linspace(0.5, 1.5, d).astype(np.float16), "g"),
             numpy_helper.from_array(np.linspace(-0.2, 0.2, d).astype(np.float16), "b"),
             numpy_helper.from_array(np.array(2.0, np.float16), "two"),
             numpy_helper.from_array(np.array(3.0, np.float32), "three")]
    n = helper.make_node
    nodes = [n("ReduceMean", ["x"], ["mu"], axes=[-1]), n("Sub", ["x", "mu"], ["xc"]), n("Pow", ["xc", "two"], ["sq"]),
             n("ReduceMean", ["sq"], ["var"], axes=[-1]), n("Add", ["var", "eps"], ["ve"]), n("Sqrt", ["ve"], ["sd"]),
             n("Div", ["xc", "sd"], ["xn"]), n("Mul", ["xn", "g"], ["xg"]), n("Add", ["xg", "b"], ["h"]),
             n("Cast", ["h"], ["h32"], to=F32), n("Mul", ["h32", "three"], ["t"]), n("Tanh", ["t"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F16, [2, 8, d])],
                          [helper.make_tensor_value_info("y", F32, [2, 8, d])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_fp16_kernel_feeding_fp32_ops_gets_the_fp16_tolerance(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(ln_fp16_then_fp32(), str(path))
    assert main(["fuse", str(path), "-o", str(tmp_path / "o"), "-q"]) == 0
    res = asc_onnx.fuse(str(path), str(tmp_path / "o2"))
    assert {k.op.op_type for k in res.kernels} >= {"AscLayerNorm"}
    (y,) = res.deployed.outputs
    assert res.deployed.ok and y.rtol == 1e-3 and y.max_abs > 1e-5  # beyond fp32's, within fp16's


def _tampered(k: asc_onnx.package.Kernel) -> asc_onnx.package.Kernel:
    """The kernel with 0.25 added to its output register just before the output tile is written."""
    rel = next(r for r in k.files if r.startswith("op_kernel/") and r.endswith(".cpp"))
    lines = k.files[rel].splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("FromFloat(") and "Local" in line)
    reg = re.search(r"FromFloat\(\w+, (r\d+)", lines[at]).group(1)
    lines.insert(at, f"        AscendC::Adds({reg}, {reg}, 0.25f, count);")
    return dataclasses.replace(k, files={**k.files, rel: "\n".join(lines) + "\n"})


def test_a_failing_check_names_output_error_tolerance_and_the_op(tmp_path):
    res = asc_onnx.fuse(ln_fp16_then_fp32(), str(tmp_path / "o"))
    bad = next(k for k in res.kernels if k.op.op_type.startswith("AscFusedEw"))
    kernels = [_tampered(k) if k is bad else k for k in res.kernels]
    atc = onnx.load(str(tmp_path / "o" / "model.atc.onnx"))
    rep = verify_deployed(ln_fp16_then_fp32(), atc, kernels, get_soc("Ascend910B"))
    assert not rep.ok
    why = rep.why()
    # the node off its body on the values it received, then the output with its error and tolerance, then the op
    assert why.startswith(f"fused node '{bad.op.op_type}_0' ({bad.op.op_type}) is off its function body"), why
    assert "; y: max abs error" in why and "float16 tolerance (rtol 0.001, atol 0.01)" in why, why
    assert f"{bad.op.op_type}'s kernel alone makes it fail" in why, why


def test_cli_prints_the_reason_not_a_number(tmp_path, monkeypatch, capsys):
    """A failed deployed check is one line that says what failed (it once printed only a float)."""
    import asc_onnx.prove as prove

    real = prove.verify_deployed

    def with_tampered_pointwise(original, atc, kernels, *args, **kw):
        kernels = [_tampered(k) if k.op.op_type.startswith("AscFusedEw") else k for k in kernels]
        return real(original, atc, kernels, *args, **kw)

    monkeypatch.setattr(prove, "verify_deployed", with_tampered_pointwise)
    path = tmp_path / "m.onnx"
    onnx.save(ln_fp16_then_fp32(), str(path))
    assert main(["fuse", str(path), "-o", str(tmp_path / "o"), "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("asc-onnx: the deployed model") and "y: max abs error" in err and "kernel alone" in err, err


def _quantized_block(rows: int = 16):
    """RMSNorm (fused) -> DynamicQuantizeLinear (a run-time 0-d scale) -> MatMulInteger -> dequantize: the shape
    of a dynamically quantized OCR or BERT block."""
    f = TensorProto.FLOAT
    rng = np.random.default_rng(0)
    d, n = 64, 32
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["mse"]), helper.make_node("Sqrt", ["mse"], ["rms"]),
             helper.make_node("Div", ["x", "rms"], ["xn"]), helper.make_node("Mul", ["xn", "g"], ["h"]),
             helper.make_node("DynamicQuantizeLinear", ["h"], ["hq", "hs", "hz"]),
             helper.make_node("MatMulInteger", ["hq", "wq", "hz", "wz"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["accf"], to=f), helper.make_node("Mul", ["hs", "ws"], ["scale"]),
             helper.make_node("Mul", ["accf", "scale"], ["y"])]
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "axes"),
             numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, d).astype(np.float32), "g"),
             numpy_helper.from_array(rng.integers(0, 255, (d, n)).astype(np.uint8), "wq"),
             numpy_helper.from_array(np.array(128, np.uint8), "wz"),
             numpy_helper.from_array(np.array(0.01, np.float32), "ws")]
    graph = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", f, ["B", rows, d])],
                              [helper.make_tensor_value_info("y", f, ["B", rows, n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_quantized_outputs_are_judged_from_the_deployed_quantized_values(tmp_path):
    """The rule for outputs behind a quantizer that a fused op feeds: the deployed quantized values may be one
    step from the original's where the float input agrees within tolerance (a last-bit difference across a
    rounding boundary moves the output by a whole step times the weights); the outputs are then compared with the
    original run from the deployed quantized values. Two steps, or a step where the float input is off, are
    not explained and the reference stays the original's."""
    from asc_onnx.verify_deployed import _quantizers_after_kernels, _requantized
    from asc_onnx.verify_kernels import capture

    m = _quantized_block()
    path = tmp_path / "q.onnx"
    onnx.save(m, path)
    res = asc_onnx.fuse(path, tmp_path / "out", FuseOptions(judge=False))
    assert res.deployed.ok and "1 quantizer(s) after fused ops" in res.deployed.requantized
    atc = onnx.load(tmp_path / "out" / "model.atc.onnx")
    quantizers = _quantizers_after_kernels(atc, res.kernels)
    assert [q.op_type for q in quantizers] == ["DynamicQuantizeLinear"]
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 16, 64)).astype(np.float32)}
    base = capture(m, ["h", "hq", "hs", "hz", "y"], feeds)
    ref = {"y": base["y"]}
    types = {"h": TensorProto.FLOAT, "hs": TensorProto.FLOAT, "hz": TensorProto.UINT8}

    def deployed(step: int, nudge: float) -> dict:
        got = {k: v.copy() for k, v in base.items()}
        got["h"].reshape(-1)[5] += nudge
        got["hq"].reshape(-1)[5] = min(255, int(base["hq"].reshape(-1)[5]) + step)
        got["y"] = capture(m, ["y"], {**feeds, "hq": got["hq"], "hs": got["hs"], "hz": got["hz"]},
                           ["hq", "hs", "hz"])["y"]
        return got

    got = deployed(1, 1e-7)
    assert not np.allclose(got["y"], ref["y"], rtol=1e-5, atol=1e-5)  # one step moves a whole output row
    rule, rerun = _requantized(m, quantizers, feeds, got, ref, types)
    assert rule is not None and "1 of 2048 quantized values one step" in rule
    np.testing.assert_allclose(got["y"], rerun["y"], rtol=1e-5, atol=1e-5)
    for step, nudge in ((2, 1e-7), (1, 1e-2)):  # two steps; one step where the float input is far off
        rule, kept = _requantized(m, quantizers, feeds, deployed(step, nudge), ref, types)
        assert rule is None and kept is ref
