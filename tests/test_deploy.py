"""What reaches CANN and the NPU: the deployed model proven end to end with its emulated kernels (and a
planted wiring bug it catches), atc.sh run against a stand-in atc, CMake calls as func.cmake parses them,
plugin keys as ge::AscendString."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import F32, MODELS, ROOT, const, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.cli import main

SHARED = ROOT.parent / "shared" / "ascend"


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    out = tmp_path_factory.mktemp("deploy") / "out"
    asc_onnx.fuse(MODELS / "llama_tiny_dynamo.onnx", out, FuseOptions(judge=False))
    return out


def test_validate_kernels_passes_on_the_written_folder(llama):
    rep = asc_onnx.validate_kernels(MODELS / "llama_tiny_dynamo.onnx", llama)
    # 4 pointwise chains, 7 row ops (RMSNorm, 4 Add+RMSNorm, 2 attention softmaxes) and 2 SwiGLU matmul
    # kernels: every Asc node
    atc = onnx.load(llama / "model.atc.onnx")
    assert rep.ok and rep.emulated_nodes == len([n for n in atc.graph.node if n.op_type.startswith("Asc")]) == 13
    assert main(["validate", str(MODELS / "llama_tiny_dynamo.onnx"), str(llama), "--kernels"]) == 0


def test_planted_wiring_bug_is_caught(llama, tmp_path):
    # Swap two inputs of every fused RoPE node in model.atc.onnx: each kernel is still right on its own.
    bad = tmp_path / "bad"
    shutil.copytree(llama, bad)
    atc = onnx.load(bad / "model.atc.onnx")
    swapped = 0
    for n in atc.graph.node:
        if n.op_type.startswith("AscFusedEw"):
            n.input[1], n.input[3] = n.input[3], n.input[1]  # cos <-> sin
            swapped += 1
    assert swapped
    onnx.save(atc, bad / "model.atc.onnx")
    rep = asc_onnx.validate_kernels(MODELS / "llama_tiny_dynamo.onnx", bad)
    assert not rep.ok and not all(o.ok for o in rep.outputs)
    assert main(["validate", str(MODELS / "llama_tiny_dynamo.onnx"), str(bad), "--kernels"]) == 1


def _fake_cann(tmp_path: Path, out: Path, atc_body: str) -> dict[str, str]:
    """A stand-in `atc` on PATH (CANN is not installed here) and the vendor env file `asc-onnx build` writes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "atc").write_text("#!/usr/bin/env bash\nprintf '%s\\n' \"$@\" > \"$ATC_ARGS\"\n" + atc_body)
    (bin_dir / "atc").chmod(0o755)
    env_file = out / "opp" / "vendors" / "asc_onnx" / "bin" / "set_env.bash"
    env_file.parent.mkdir(parents=True)
    env_file.write_text("export ASC_VENDOR_SOURCED=1\n")
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ASCEND_HOME_PATH": str(tmp_path),
            "ATC_ARGS": str(tmp_path / "args")}


HOSTILE_INPUT = 'x"; touch pwned; echo "'


@pytest.fixture
def hostile(tmp_path):
    nodes = [helper.make_node("Sigmoid", [HOSTILE_INPUT], ["s"]), helper.make_node("Mul", [HOSTILE_INPUT, "s"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["y"])]
    m = model(nodes, [(HOSTILE_INPUT, F32, ["batch", 64])], [("y", F32, ["batch", 64])], [const("b", np.ones(64))])
    out = tmp_path / "out"
    res = asc_onnx.fuse(m, out)
    assert res.deployed.ok
    return out


def test_atc_script_quotes_and_renames_hostile_names(hostile, tmp_path):
    script = (hostile / "atc.sh").read_text()
    assert "touch pwned" not in script
    atc = onnx.load(hostile / "model.atc.onnx")
    assert [i.name for i in atc.graph.input] == ["input_0"]
    report = (hostile / "report.json").read_text()
    assert '"input_0": "x\\"; touch pwned; echo \\""' in report
    env = _fake_cann(tmp_path, hostile, 'echo "ATC run success, welcome to the next use."\n')
    proc = subprocess.run(["bash", str(hostile / "atc.sh")], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    args = (tmp_path / "args").read_text().splitlines()
    assert "--input_shape=input_0:-1,64" in args and "--soc_version=Ascend910B1" in args
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("body,code", [("echo 'ATC run failed'\nexit 1\n", 1), ("exit 0\n", 1),
                                       ("echo 'ATC run success, welcome to the next use.'\n", 0)])
def test_atc_script_takes_atc_exit_status_and_result_line(hostile, tmp_path, body, code):
    env = _fake_cann(tmp_path, hostile, body)
    proc = subprocess.run(["bash", str(hostile / "atc.sh")], env=env, capture_output=True, text=True)
    assert proc.returncode == code, proc.stderr
    assert ("ATC failed" in proc.stderr) == (code != 0)


def test_atc_script_uses_the_users_input_shape(tmp_path):
    out = tmp_path / "o"
    asc_onnx.fuse(MODELS / "llama_tiny_dynamo.onnx", out,
                  FuseOptions(judge=False, input_shapes=(("input_ids", (2, 8)),)))
    assert "INPUT_SHAPE='input_ids:2,8'\n" in (out / "atc.sh").read_text()


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_generated_shell_is_shellcheck_clean(hostile):
    proc = subprocess.run(["shellcheck", str(hostile / "atc.sh"), str(hostile / "op_package" / "build.sh")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def _parse_keywords(func_cmake: str, fn: str) -> set[str]:
    body = func_cmake[func_cmake.index(f"function({fn} "):]
    m = re.search(r"cmake_parse_arguments\(\w+ \"([^\"]*)\" \"([^\"]*)\" \"([^\"]*)\"", body)
    return {k for group in m.groups() for k in group.split(";") if k}


@pytest.mark.skipif(not (SHARED / "asc-devkit").is_dir(), reason="../shared/ascend is not present")
def test_cmake_calls_use_func_cmake_keywords(llama):
    func = (SHARED / "asc-devkit/cmake/asc/fwk_modules/func.cmake").read_text()
    text = (llama / "op_package/op_kernel/CMakeLists.txt").read_text()
    calls = re.findall(r"^(npu_op_kernel_sources|npu_op_kernel_library)\((\S+) ([^)]*)\)", text, re.M)
    assert calls
    for fn, _target, args in calls:
        allowed = _parse_keywords(func, fn)
        words = [w for w in args.split() if re.fullmatch(r"[A-Z][A-Z0-9_]*", w)]
        assert set(words) <= allowed, (fn, words, allowed)
        if fn == "npu_op_kernel_sources":
            assert "OP_TYPE" in args and "KERNEL_FILE" in args  # func.cmake stops if one comes without the other


def test_plugin_keys_are_ascend_strings(llama):
    for cc in (llama / "op_package/framework/onnx_plugin").glob("*.cc"):
        text = cc.read_text()
        assert "std::vector<ge::AscendString>{" in text and 'ge::AscendString("ai.onnx::11::' in text
