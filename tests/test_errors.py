"""Bad input: one clear line on stderr, exit code 2, no traceback, no output folder, input untouched."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import F32, MODELS, const, model
from onnx import helper

NODE = helper.make_node


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asc_onnx", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def assert_clean_error(proc: subprocess.CompletedProcess, needle: str, out: Path) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert needle in lines[0], lines[0]
    assert not out.exists()
    assert not any(p.name.startswith(f".{out.name}.tmp") for p in out.parent.iterdir())


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _external_model(tmp_path: Path, location: str) -> Path:
    """A MatMul+SiLU model whose weight lives in external data at ``location``."""
    w = const("w", np.ones((8, 8)))
    m = model([NODE("MatMul", ["x", "w"], ["h"]), NODE("Sigmoid", ["h"], ["s"]), NODE("Mul", ["h", "s"], ["y"])],
              [("x", F32, [2, 8])], [("y", F32, [2, 8])], [w])
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    path = folder / "model.onnx"
    onnx.save(m, path, save_as_external_data=True, location="w.bin", size_threshold=0)
    raw = onnx.load(path, load_external_data=False)
    for e in raw.graph.initializer[0].external_data:
        if e.key == "location":
            e.value = location
    onnx.save(raw, path)
    return path


def test_missing_file(tmp_path):
    assert_clean_error(run_cli("fuse", str(tmp_path / "nope.onnx"), "-o", str(tmp_path / "o")),
                       "does not exist", tmp_path / "o")


def test_garbage_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\xfe this is not protobuf \x00\x01")
    assert_clean_error(run_cli("fuse", str(bad), "-o", str(tmp_path / "o")), "not a readable ONNX model",
                       tmp_path / "o")


def test_truncated_file(tmp_path):
    data = (MODELS / "cnn_silu_legacy.onnx").read_bytes()
    bad = tmp_path / "cut.onnx"
    bad.write_bytes(data[: len(data) // 2])
    proc = run_cli("fuse", str(bad), "-o", str(tmp_path / "o"))
    assert_clean_error(proc, str(bad.name), tmp_path / "o")


def test_missing_external_data(tmp_path):
    path = _external_model(tmp_path, "w.bin")
    (path.parent / "w.bin").unlink()
    assert_clean_error(run_cli("fuse", str(path), "-o", str(tmp_path / "o")), "missing", tmp_path / "o")


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "sub/../../outside.bin"])
def test_external_data_traversal_refused(tmp_path, location):
    (tmp_path / "outside.bin").write_bytes(b"\0" * 256)
    path = _external_model(tmp_path, location)
    assert_clean_error(run_cli("fuse", str(path), "-o", str(tmp_path / "o")), "leaves the model's folder",
                       tmp_path / "o")


def test_external_data_symlink_out_of_folder_refused(tmp_path):
    path = _external_model(tmp_path, "w.bin")
    real = tmp_path / "elsewhere.bin"
    (path.parent / "w.bin").rename(real)
    os.symlink(real, path.parent / "w.bin")
    assert_clean_error(run_cli("fuse", str(path), "-o", str(tmp_path / "o")), "resolves outside",
                       tmp_path / "o")


def test_unknown_dtype(tmp_path):
    m = model([NODE("Relu", ["x"], ["y"])], [("x", F32, [2])], [("y", F32, [2])])
    m.graph.input[0].type.tensor_type.elem_type = 99
    path = tmp_path / "dt.onnx"
    path.write_bytes(m.SerializeToString())
    assert_clean_error(run_cli("fuse", str(path), "-o", str(tmp_path / "o")), "unknown element type 99",
                       tmp_path / "o")


def test_existing_output_needs_force_and_input_untouched(tmp_path):
    src = MODELS / "cnn_silu_legacy.onnx"
    before = _digest(src)
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    proc = run_cli("fuse", str(src), "-o", str(out))
    assert proc.returncode == 2 and "--force" in proc.stderr and "Traceback" not in proc.stderr
    assert (out / "keep.txt").read_text() == "mine"
    assert run_cli("fuse", str(src), "-o", str(out), "--force").returncode == 0
    assert not (out / "keep.txt").exists() and (out / "model.asc.onnx").exists()
    assert _digest(src) == before


def test_bad_input_shape_argument(tmp_path):
    proc = run_cli("fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(tmp_path / "o"),
                   "--input-shape", "nosuch:1,2")
    assert_clean_error(proc, "not an input", tmp_path / "o")


def test_unknown_pattern_name(tmp_path):
    proc = run_cli("fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(tmp_path / "o"), "--only", "Nope")
    assert_clean_error(proc, "unknown pattern name", tmp_path / "o")
