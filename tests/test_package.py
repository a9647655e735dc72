"""The op package: every file the CANN build expects, plugin keys matching the ATC model, kernel
entry names, atc.sh; and model node names full of C++ that only ever reach escaped comments."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from conftest import F32, MODELS, const, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.kernels.ir import snake_case

PROJECT_FILES = ["CMakePresets.json", "CMakeLists.txt", "build.sh", "op_host/CMakeLists.txt",
                 "op_kernel/CMakeLists.txt", "framework/CMakeLists.txt", "framework/onnx_plugin/CMakeLists.txt"]


@pytest.fixture(scope="module", params=["compat", "custom"])
def out(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("pkg") / "out"
    asc_onnx.fuse(MODELS / "llama_tiny_dynamo_fp16.onnx", d,
                  options=FuseOptions(judge=False, atc_domain_mode=request.param, emulate=False), validate=False)
    return d, request.param


@pytest.mark.fast
def test_every_expected_file_exists(out):
    d, _ = out
    pkg = d / "op_package"
    for rel in PROJECT_FILES:
        assert (pkg / rel).is_file(), rel
    assert (pkg / "build.sh").stat().st_mode & 0o111 and (d / "atc.sh").stat().st_mode & 0o111
    report = json.loads((d / "report.json").read_text())
    for k in report["kernels"]["generated"]:
        s = k["entry"]
        for rel in (f"op_kernel/{s}.cpp", f"op_kernel/{s}_tiling.h", f"op_host/{s}.cpp", f"op_host/{s}_tiling_calc.h",
                    f"framework/onnx_plugin/{s}_plugin.cc"):
            assert (pkg / rel).is_file(), rel
        assert f"KERNEL_FILE {s}.cpp" in (pkg / "op_kernel/CMakeLists.txt").read_text()


@pytest.mark.fast
def test_every_atc_node_has_a_plugin_key(out):
    d, mode = out
    atc = onnx.load(d / "model.atc.onnx")
    versions = {o.domain or "ai.onnx": o.version for o in atc.opset_import}
    keys = set()
    for f in (d / "op_package/framework/onnx_plugin").glob("*.cc"):
        keys |= set(re.findall(r'"([\w.]+::\d+::\w+)"', f.read_text()))
    fused = [n for n in atc.graph.node if n.op_type.startswith("Asc")]
    assert fused
    for n in fused:
        domain = n.domain or "ai.onnx"
        assert f"{domain}::{versions[domain]}::{n.op_type}" in keys
    assert len(atc.opset_import) == (1 if mode == "compat" else 2)


@pytest.mark.fast
def test_kernel_entry_is_the_snake_case_of_its_opdef(out):
    d, _ = out
    pkg = d / "op_package"
    for host in (pkg / "op_host").glob("*.cpp"):
        op_type = re.search(r"OP_ADD\((\w+)\);", host.read_text()).group(1)
        kernel = (pkg / "op_kernel" / host.name).read_text()
        assert re.search(rf'extern "C" __global__ __aicore__ void {snake_case(op_type)}\(', kernel)
        assert host.stem == snake_case(op_type)
        for inc in re.findall(r'#include "([^"]+)"', kernel):
            assert inc in ("kernel_operator.h", "lib/matmul_intf.h") or (pkg / "op_kernel" / inc).is_file(), inc


@pytest.mark.fast
def test_compute_unit_and_atc_command(out):
    d, _ = out
    presets = json.loads((d / "op_package/CMakePresets.json").read_text())
    unit = presets["configurePresets"][0]["cacheVariables"]["ASCEND_COMPUTE_UNIT"]["value"]
    assert unit == "ascend910b"
    for host in (d / "op_package/op_host").glob("*.cpp"):
        assert f'AddConfig("{unit}")' in host.read_text()
    atc = (d / "atc.sh").read_text()
    for flag in ("--framework=5", '--soc_version="$SOC"', "--input_format=ND", '--input_shape="$INPUT_SHAPE"',
                 "model.atc.onnx"):
        assert flag in atc
    # the batch dim is dynamic in the model: ATC gets -1, never a placeholder
    assert "INPUT_SHAPE='input_ids:-1,8'\n" in atc


def test_soc_310p_package():
    res = asc_onnx.fuse(MODELS / "cnn_silu_legacy.onnx", options=FuseOptions(judge=False, soc="Ascend310P"))
    files = res.kernels[0].files
    assert 'AddConfig("ascend310p")' in files["op_host/asc_silu.cpp"]
    assert all(c.ok for c in res.kernel_checks) and res.kernel_checks


HOSTILE = ['evil"name', "line1\nline2", "end */ of comment", '#include <cstdlib>\nint x = system("rm -rf /");',
           "trailing backslash \\"]


def test_model_names_reach_generated_code_only_as_escaped_comments(tmp_path):
    nodes = [helper.make_node("Add", ["x", "b"], ["h"], name=HOSTILE[0]),
             helper.make_node("Sigmoid", ["h"], ["s"], name=HOSTILE[1]),
             helper.make_node("Mul", ["h", "s"], ["m"], name=HOSTILE[2]),
             helper.make_node("Tanh", ["m"], ["t"], name=HOSTILE[3]),
             helper.make_node("Mul", ["t", "k"], ["y"], name=HOSTILE[4])]
    m = model(nodes, [("x", F32, [4, 40])], [("y", F32, [4, 40])], [const("b", np.ones(40)), const("k", 0.5)])
    res = asc_onnx.fuse(m, tmp_path / "o")
    assert res.kernel_checks and all(c.ok for c in res.kernel_checks)
    for path in (tmp_path / "o").rglob("*"):
        if path.suffix not in (".cpp", ".cc", ".h", ".txt", ".sh", ".json") or path.name == "report.json":
            continue
        text = path.read_text()
        for bad in ('evil"', "*/", "#include <cstdlib>", 'system("'):
            assert bad not in text, (path, bad)
        for line in text.splitlines():
            if any(w in line for w in ("evil", "line2", "comment", "backslash", "cstdlib", "rm -rf")):
                assert line.lstrip().startswith("//"), (path, line)
                assert not line.rstrip().endswith("\\")


def test_plugin_reads_int_attributes_from_atcs_json_including_absent_zero(tmp_path):
    """The parser plugin's FindIntAttr, compiled with g++ and fed the JSON ATC builds from a node's attributes:
    any key order and spacing, a quoted value, and +0.0 (bits 0), whose "i" field proto3 drops."""
    import shutil
    import subprocess

    from asc_onnx.kernels.skeleton import FIND_INT_ATTR

    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    main = tmp_path / "t.cpp"
    main.write_text("#include <cstdint>\n#include <iostream>\n#include <string>\n" + FIND_INT_ATTR
                    + r'''
int main(int argc, char** argv) {
    const std::string json = argv[1];
    for (int i = 2; i < argc; ++i) {
        int64_t v = -1;
        std::cout << (FindIntAttr(json, argv[i], v) ? std::to_string(v) : std::string("missing")) << " ";
    }
    return 0;
}
''')
    subprocess.run(["g++", "-std=c++17", str(main), "-o", str(tmp_path / "t")], check=True)
    cases = {
        '{"attribute":[{"name":"p0","type":2,"i":1065353216},{"name":"p1","type":2}]}': "1065353216 0 missing",
        '{ "attribute": [ { "i": 3212836864, "type": 2, "name": "p1" }, {"type":2, "name":"p0", "i":"7"} ] }':
            "7 3212836864 missing",
        '{"attribute":[]}': "missing missing missing",
        '{"attribute":[{"name":"p0","type":2,"i":-5}]}': "-5 missing missing",
    }
    for json_text, want in cases.items():
        got = subprocess.run([str(tmp_path / "t"), json_text, "p0", "p1", "p2"], capture_output=True, text=True,
                             check=True).stdout.strip()
        assert got == want, json_text
