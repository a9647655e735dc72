"""Models with external data: fused without loading the weights, outputs reference copied files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import onnx
from conftest import F32, const, model
from onnx import helper

import asc_onnx

NODE = helper.make_node


def _save_external(tmp_path, rows: int = 64):
    rng = np.random.default_rng(0)
    inits = [const("wg", rng.standard_normal((16, rows))), const("wu", rng.standard_normal((16, rows)))]
    nodes = [NODE("MatMul", ["x", "wg"], ["g"]), NODE("MatMul", ["x", "wu"], ["u"]), NODE("Sigmoid", ["g"], ["s"]),
             NODE("Mul", ["g", "s"], ["sg"]), NODE("Mul", ["sg", "u"], ["y"])]
    m = model(nodes, [("x", F32, [2, 16])], [("y", F32, [2, rows])], inits)
    folder = tmp_path / "src"
    (folder / "weights").mkdir(parents=True)

    onnx.save(m, folder / "m.onnx", save_as_external_data=True, location="weights/m.bin", size_threshold=0)
    return folder / "m.onnx"


def test_external_weights_are_copied_and_referenced(tmp_path):
    src = _save_external(tmp_path)
    res = asc_onnx.fuse(src, tmp_path / "out")
    assert res.validation.ok and res.ops[0].rule == "SwiGLU"
    copied = tmp_path / "out" / "weights" / "m.bin"
    assert copied.read_bytes() == (src.parent / "weights" / "m.bin").read_bytes()
    for name in ("model.asc.onnx", "model.atc.onnx"):
        raw = onnx.load(tmp_path / "out" / name, load_external_data=False)
        locs = {e.value for t in raw.graph.initializer for e in t.external_data if e.key == "location"}
        assert locs == {"weights/m.bin"}
        assert all(len(t.raw_data) == 0 for t in raw.graph.initializer)


def test_peak_memory_does_not_grow_with_weight_bytes(tmp_path):
    """A 1 GiB sparse weight file: fusing (without validation) keeps peak RSS far below it."""
    src = _save_external(tmp_path, rows=64)
    big = 1 << 30
    raw = onnx.load(src, load_external_data=False)
    rows = big // (16 * 4)
    data = src.parent / "weights" / "big.bin"
    with open(data, "wb") as f:
        f.truncate(big)
    for t in raw.graph.initializer:
        del t.dims[:]
        t.dims.extend([16, rows])
        for e in t.external_data:
            if e.key == "location":
                e.value = "weights/big.bin"
            elif e.key == "offset":
                e.value = "0"
            elif e.key == "length":
                e.value = str(big)
    raw.graph.output[0].type.tensor_type.shape.dim[1].dim_value = rows
    onnx.save(raw, src)
    script = textwrap.dedent(f"""
        import json, asc_onnx
        res = asc_onnx.fuse({str(src)!r}, {str(tmp_path / 'out')!r}, validate=False)
        # VmHWM is this process's own peak; ru_maxrss would also carry the forking parent's (Linux keeps the
        # pre-exec high-water mark), which under pytest-xdist is a worker's whole history.
        hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
        print(json.dumps({{"rss_kb": hwm, "rules": [op.rule for op in res.ops]}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["rules"] == ["SwiGLU"]
    assert got["rss_kb"] * 1024 < big // 2, f"peak RSS {got['rss_kb'] / 1024:.0f} MiB for a 1 GiB weight file"
    assert (tmp_path / "out" / "weights" / "big.bin").stat().st_size == big


def _inode(p):
    return p.stat().st_ino


def test_weights_are_cloned_or_copied_never_shared_by_default(tmp_path):
    src = _save_external(tmp_path)
    res = asc_onnx.fuse(src, tmp_path / "out", validate=False)
    w = res.report["weights"]
    assert w["files"] == 1 and w["bytes"] == (src.parent / "weights" / "m.bin").stat().st_size
    assert w["method"] in ("reflink", "copy")  # what this file system allows
    assert _inode(tmp_path / "out" / "weights" / "m.bin") != _inode(src.parent / "weights" / "m.bin")


def test_link_weights_hard_links_and_a_replaced_output_leaves_the_input(tmp_path):
    src = _save_external(tmp_path)
    before = (src.parent / "weights" / "m.bin").read_bytes()
    proc = subprocess.run([sys.executable, "-m", "asc_onnx", "fuse", str(src), "-o", str(tmp_path / "out"),
                           "--link-weights", "--no-emulate"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "by hard link" in proc.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["weights"]["method"] == "hard link"
    assert _inode(tmp_path / "out" / "weights" / "m.bin") == _inode(src.parent / "weights" / "m.bin")
    res = asc_onnx.fuse(src, tmp_path / "out", force=True, validate=False)  # replaces the linked folder
    assert res.report["weights"]["method"] in ("reflink", "copy")
    assert (src.parent / "weights" / "m.bin").read_bytes() == before


def test_weights_are_reflinked_where_the_file_system_clones(tmp_path):
    """On an XFS loop mount with reflinks (root and mkfs.xfs needed, else skipped): the output's weight file is
    a clone, its own file, and the file system's free space does not drop by its size."""
    import os
    import shutil

    import pytest

    if os.geteuid() != 0 or shutil.which("mkfs.xfs") is None:
        pytest.skip("needs root and mkfs.xfs for an XFS loop mount")
    img, mnt = tmp_path / "xfs.img", tmp_path / "mnt"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(600 << 20)
    if subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", str(img)], capture_output=True).returncode or \
            subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot make or mount an XFS loop file system here")
    try:
        src = _save_external(mnt, rows=64)
        data = src.parent / "weights" / "m.bin"
        raw = onnx.load(src, load_external_data=False)
        big = 256 << 20  # real bytes, so that a copy would show in the free space
        with open(data, "r+b") as f:
            f.seek(0, 2)
            f.write(np.random.default_rng(0).bytes(big))
        os.sync()
        free = shutil.disk_usage(mnt).free
        res = asc_onnx.fuse(src, mnt / "out", validate=False)
        os.sync()
        assert res.report["weights"]["method"] == "reflink"
        out = mnt / "out" / "weights" / "m.bin"
        assert _inode(out) != _inode(data) and out.stat().st_size == data.stat().st_size
        assert free - shutil.disk_usage(mnt).free < big // 4, "the weights were copied, not cloned"
        del raw
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_a_model_over_the_memory_budget_is_proven_op_by_op(tmp_path, capsys):
    """Every whole-model run (the graph and deployed rungs, the captured activations) loads every weight into one
    onnxruntime session. Over --memory-budget none of them runs: the kernel rung proves each op on random inputs,
    the report and the summary say so, and the run succeeds."""
    from asc_onnx.cli import main

    src = _save_external(tmp_path)
    weights = (src.parent / "weights" / "m.bin").stat().st_size
    res = asc_onnx.fuse(src, tmp_path / "out", options=asc_onnx.FuseOptions(judge=False, memory_budget=weights - 1))
    assert res.validation is None and res.deployed is None
    assert "exceed" in res.report["whole_model"] and res.report["validation"] is None
    assert res.kernel_checks and all(c.ok and c.inputs != "captured" for c in res.kernel_checks)
    # each fused node that reads weights: its kernel with that node's own weights, against its region's nodes
    regions = [c for c in res.kernel_checks if c.inputs.startswith("weights of ")]
    assert [c.inputs for c in regions] == [f"weights of {res.ops[0].instances[0].node}"]
    within = asc_onnx.fuse(src, tmp_path / "in", options=asc_onnx.FuseOptions(judge=False, memory_budget=weights))
    assert within.validation.ok and within.deployed.ok and within.report["whole_model"] is None
    assert "captured" in {c.inputs for c in within.kernel_checks}
    assert main(["fuse", str(src), "-o", str(tmp_path / "cli"), "--memory-budget", "1e-9"]) == 0
    assert "whole-model checks not run" in capsys.readouterr().out
