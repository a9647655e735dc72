"""Bad input: one clear line on stderr, exit code 2, no traceback, no output folder, input untouched."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import F32, MODELS, const, messages, model, wait_for_staging
from onnx import helper

from asc_onnx.output import lock_path

NODE = helper.make_node


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asc_onnx", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def assert_clean_error(proc: subprocess.CompletedProcess, needle: str, out: Path) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = messages(proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert needle in lines[0], lines[0]
    assert not out.exists()
    assert not any(p.name.startswith(f".{out.name}.asc-onnx") for p in out.parent.iterdir())


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
    assert run_cli("fuse", str(src), "-o", str(out), "--no-emulate").returncode == 0
    (out / "extra.txt").write_text("from the first run")
    proc = run_cli("fuse", str(src), "-o", str(out))
    assert proc.returncode == 2 and "--force" in proc.stderr and "Traceback" not in proc.stderr
    assert (out / "extra.txt").exists()
    assert run_cli("fuse", str(src), "-o", str(out), "--force", "--no-emulate").returncode == 0
    assert not (out / "extra.txt").exists() and (out / "model.asc.onnx").exists() and (out / ".asc-onnx").is_file()
    assert _digest(src) == before


def test_force_never_replaces_a_folder_asc_onnx_did_not_write(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    proc = run_cli("fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(out), "--force")
    assert proc.returncode == 2 and "not written by asc-onnx" in proc.stderr, proc.stderr
    assert (out / "thesis.tex").read_text() == "years of work"


@pytest.mark.parametrize("where", ["model folder", "parent of the model folder", "dot"])
def test_output_folder_may_not_hold_the_input(tmp_path, where):
    folder = tmp_path / "d"
    folder.mkdir()
    src = folder / "m.onnx"
    src.write_bytes((MODELS / "cnn_silu_legacy.onnx").read_bytes())
    (folder / "notes.txt").write_text("keep")
    out, cwd = {"model folder": ("d", tmp_path), "parent of the model folder": (".", folder.parent),
                "dot": (".", folder)}[where]
    proc = run_cli("fuse", str(src), "-o", out, "--force", cwd=cwd)
    assert proc.returncode == 2 and "contains the input" in proc.stderr, proc.stderr
    assert len(messages(proc.stderr)) == 1
    assert src.read_bytes() == (MODELS / "cnn_silu_legacy.onnx").read_bytes() and (folder / "notes.txt").exists()


def test_output_folder_may_not_hold_external_data(tmp_path):
    path = _external_model(tmp_path, "w.bin")
    weights = path.parent / "weights"
    weights.mkdir()
    (path.parent / "w.bin").rename(weights / "w.bin")
    raw = onnx.load(path, load_external_data=False)
    for e in raw.graph.initializer[0].external_data:
        if e.key == "location":
            e.value = "weights/w.bin"
    onnx.save(raw, path)
    (weights / ".asc-onnx").write_text("{}")  # even a folder that looks like ours
    proc = run_cli("fuse", str(path), "-o", str(weights), "--force")
    assert proc.returncode == 2 and "contains the input" in proc.stderr, proc.stderr
    assert (weights / "w.bin").is_file()


def test_output_that_is_the_current_folder_is_refused(tmp_path):
    first = tmp_path / "o"
    assert run_cli("fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(first), "--no-emulate").returncode == 0
    proc = run_cli("fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", ".", "--force", cwd=first)
    assert proc.returncode == 2 and "current folder" in proc.stderr, proc.stderr
    assert (first / "model.asc.onnx").is_file()


def test_a_second_run_into_the_same_folder_fails_while_the_first_writes(tmp_path):
    out = tmp_path / "o"
    lock = lock_path(out)  # in the cache, named by the output's real path
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"f = open({str(lock)!r}, 'a+'); fcntl.flock(f, fcntl.LOCK_EX); f.truncate(0); f.write(str(os.getpid()))\n"
        "f.flush(); print('locked', flush=True); time.sleep(300)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        proc = run_cli("fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(out))
        assert proc.returncode == 2 and f"another asc-onnx run (pid {holder.pid})" in proc.stderr, proc.stderr
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    # Its holder is gone: the kernel dropped the lock. A staging folder a killed run left is cleared.
    (tmp_path / ".o.asc-onnx-tmp").mkdir()
    (tmp_path / ".o.asc-onnx-tmp" / "half.bin").write_bytes(b"\0" * 64)
    assert run_cli("fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(out), "--no-emulate").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]
    assert (out / "model.asc.onnx").is_file() and not (out / "half.bin").exists()


def test_sigterm_during_a_run_leaves_no_temporary_folder(tmp_path):
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "asc_onnx", "fuse", str(MODELS / "llama_tiny_dynamo.onnx"),
                             "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_staging(proc, tmp_path / ".o.asc-onnx-tmp")
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and err.strip() == "asc-onnx: terminated", (proc.returncode, err)
    assert [p.name for p in tmp_path.iterdir()] == []  # nothing beside it (the lock lives in the cache)


def test_ctrl_c_at_start_up_is_one_line(tmp_path):
    """SIGINT while onnx and onnxruntime are still importing: one line, exit 130, no traceback. (A signal that
    lands while the interpreter itself starts, before any asc-onnx code, is Python's to report; a later delay
    then tries again.)"""
    codes = []
    for delay in (0.02, 0.1, 0.3, 0.5):
        proc = subprocess.Popen([sys.executable, "-m", "asc_onnx", "inspect", str(MODELS / "cnn_silu_legacy.onnx")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        codes.append(proc.returncode)
        if "init_import_site" in err or proc.returncode == -signal.SIGINT:
            continue  # the interpreter's own start-up, before any asc-onnx code: out of our reach
        assert "Traceback" not in err, err
        if proc.returncode == 130:
            assert err.strip() == "asc-onnx: interrupted", err
            return
    pytest.fail(f"never interrupted inside Python: exit codes {codes}")


def test_closed_pipe_is_quiet():
    model = MODELS / "llama_tiny_dynamo.onnx"
    proc = subprocess.run(f"{sys.executable} -m asc_onnx inspect -q --json {model} | head -c1", shell=True,
                          capture_output=True, text=True, timeout=300)
    assert proc.stdout == "{" and proc.stderr == "", proc.stderr


def test_unwritable_output_is_a_clean_error(tmp_path):
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "o"
    proc = run_cli("fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(out))
    assert proc.returncode == 2 and len(messages(proc.stderr)) == 1, proc.stderr
    assert "cannot create" in proc.stderr


def test_bad_input_shape_argument(tmp_path):
    proc = run_cli("fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(tmp_path / "o"),
                   "--input-shape", "nosuch:1,2")
    assert_clean_error(proc, "not an input", tmp_path / "o")


def test_unknown_pattern_name(tmp_path):
    proc = run_cli("fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(tmp_path / "o"), "--only", "Nope")
    assert_clean_error(proc, "unknown pattern name", tmp_path / "o")


def test_an_empty_output_folder_is_filled_in_place(tmp_path):
    """An empty folder given as -o (a mounted volume, say) is used as it is: the same folder, filled."""
    out = tmp_path / "vol"
    out.mkdir()
    inode = out.stat().st_ino
    assert run_cli("fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(out), "--no-emulate").returncode == 0
    assert out.stat().st_ino == inode and (out / "model.asc.onnx").is_file() and (out / ".asc-onnx").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vol"]


@pytest.mark.fast
def test_a_signal_inside_the_command_lines_own_import_is_one_line(monkeypatch, capsys):
    """SIGINT landing while the console script imports the command line (numpy's C modules turn it into an
    ImportError, before cli.run's handling exists): one line and 130, not a traceback. Seen under load."""
    import asc_onnx.entry as entry
    from asc_onnx import errors

    monkeypatch.setitem(sys.modules, "asc_onnx.cli", None)  # its import now raises ImportError
    monkeypatch.setattr(errors, "STOPPING_SIGNAL", [signal.SIGINT])
    monkeypatch.setattr(entry, "STOPPING_SIGNAL", errors.STOPPING_SIGNAL)
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        assert entry.main(["inspect", "x.onnx"]) == 130
        assert capsys.readouterr().err.strip() == "asc-onnx: interrupted"
        errors.STOPPING_SIGNAL[0] = 0
        with pytest.raises(ImportError):  # no signal: an ImportError is a real failure and stays one
            entry.main(["inspect", "x.onnx"])
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])
