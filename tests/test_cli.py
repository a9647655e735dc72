"""The command line: patterns, inspect (writes nothing), json output, selection, user patterns."""

from __future__ import annotations

import json
import textwrap

import pytest
from conftest import MODELS

from asc_onnx.cli import main


@pytest.mark.fast
def test_patterns_lists_every_rule_once(capsys):
    assert main(["patterns", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in rows]
    assert len(names) == len(set(names)) and {"SiLU", "SwiGLU", "RMSNorm", "ElementwiseChain"} <= set(names)


@pytest.mark.fast
def test_inspect_writes_nothing_and_reports(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", str(MODELS / "bert_tiny_legacy.onnx"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {f["rule"] for f in out["fusions"]} == {"AddLayerNorm", "LinearGELU", "Attention"}
    assert list(tmp_path.iterdir()) == []


@pytest.mark.fast
def test_only_and_skip(capsys):
    main(["inspect", str(MODELS / "llama_tiny_dynamo.onnx"), "--json", "--only", "SwiGLU"])
    assert {f["rule"] for f in json.loads(capsys.readouterr().out)["fusions"]} == {"SwiGLU"}
    main(["inspect", str(MODELS / "llama_tiny_dynamo.onnx"), "--json", "--skip", "SwiGLU,ElementwiseChain"])
    rules = {f["rule"] for f in json.loads(capsys.readouterr().out)["fusions"]}
    assert "SwiGLU" not in rules and "ElementwiseChain" not in rules and "LinearSiLUNoBias" in rules


def test_user_pattern_file_is_loaded_by_the_same_loader(tmp_path, capsys):
    f = tmp_path / "mine.py"
    f.write_text(textwrap.dedent("""
        from asc_onnx.pattern import op, rule

        def scaled_tanh(x):
            return op.Tanh(op.Mul(x, 0.7978845834732056))

        RULES = [rule("MyScaledTanh", scaled_tanh, op_name="MyScaledTanh", kernel="pointwise",
                      doc="tanh(x * sqrt(2/pi))")]
    """))
    assert main(["patterns", "--patterns", str(f)]) == 0
    assert "MyScaledTanh" in capsys.readouterr().out
    out = tmp_path / "o"
    assert main(["fuse", str(MODELS / "gpt2_tiny_dynamo.onnx"), "-o", str(out), "--patterns", str(f),
                 "--skip", "GELUTanh,BiasGELUTanh,LinearGELUTanhNoBias", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["fused_by_rule"].get("MyScaledTanh") == 2
    assert report["validation"]["ok"]


def test_validate_command_and_input_shape(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["fuse", str(MODELS / "llama_tiny_dynamo.onnx"), "-o", str(out),
                 "--input-shape", "input_ids:3,8"]) == 0
    capsys.readouterr()
    assert main(["validate", str(MODELS / "llama_tiny_dynamo.onnx"), str(out), "--input-shape", "input_ids:1,8",
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] and rep["outputs"][0]["shape"] == [1, 8, 32]


def test_validation_mismatch_exits_1(tmp_path, capsys):
    """Tamper with a function body: validate must catch it."""
    import onnx

    out = tmp_path / "o"
    assert main(["fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(out)]) == 0
    m = onnx.load(out / "model.asc.onnx")
    for f in m.functions:
        for n in f.node:
            if n.op_type == "Sigmoid":
                n.op_type = "Tanh"
    onnx.save(m, out / "model.asc.onnx")
    capsys.readouterr()
    assert main(["validate", str(MODELS / "cnn_silu_legacy.onnx"), str(out)]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_fuse_writes_package_and_emulate_reruns_its_kernels(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["fuse", str(MODELS / "cnn_silu_legacy_fp16.onnx"), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "AscSilu" in text and "captured" in text and "1.00x minimum" in text
    assert (out / "op_package" / "op_kernel" / "asc_silu.cpp").is_file() and (out / "atc.sh").is_file()
    assert main(["emulate", str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["inputs"] for r in rows} == {"random", "dims=7", "captured"} and all(r["ok"] for r in rows)
    # emulate runs the package's own files: a broken kernel on disk is caught
    kernel = out / "op_package" / "op_kernel" / "asc_silu.cpp"
    kernel.write_text(kernel.read_text().replace("AscendC::Exp(", "AscendC::Relu(", 1))
    assert main(["emulate", str(out)]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_no_emulate_and_310p(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(out), "--no-emulate", "--soc", "Ascend310P",
                 "--json", "--keep-slower"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kernels"]["emulated"] == [] and report["atc"]["soc"] == "Ascend310P"
    assert "ascend310p" in (out / "op_package" / "CMakePresets.json").read_text()


def test_build_and_convert_without_cann_stop_clearly(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    out = tmp_path / "o"
    assert main(["fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(out), "--no-emulate", "--no-validate"]) == 0
    capsys.readouterr()
    for cmd in ("build", "convert"):
        assert main([cmd, str(out)]) == 2
        err = capsys.readouterr().err
        assert "CANN is not installed here" in err and len(err.strip().splitlines()) == 1
