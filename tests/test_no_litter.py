"""A run leaves nothing outside its output folder but the cache (~/.cache/asc-onnx or ASC_ONNX_CACHE): nothing
beside the output, nothing in the working directory, nothing in TMPDIR, on success, on failure and on SIGINT;
two runs into one folder cannot both proceed, two runs into sibling folders both can."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import onnx
from conftest import MODELS, messages, wait_for_staging
from onnx import TensorProto, helper

from asc_onnx.output import lock_path


def _dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    work, tmpd, outs = tmp_path / "work", tmp_path / "tmp", tmp_path / "outs"
    for d in (work, tmpd, outs):
        d.mkdir()
    return work, tmpd, outs


def _cli(args: list[str], work: Path, tmpd: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, TMPDIR=str(tmpd))
    return subprocess.Popen([sys.executable, "-m", "asc_onnx", *args], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _empty(*dirs: Path) -> None:
    for d in dirs:
        assert sorted(p.name for p in d.iterdir()) == [], (d, sorted(p.name for p in d.iterdir()))


def test_success_leaves_only_the_output(tmp_path):
    work, tmpd, outs = _dirs(tmp_path)
    proc = _cli(["fuse", str(MODELS / "llama_tiny_dynamo.onnx"), "-o", str(outs / "o")], work, tmpd)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    _empty(work, tmpd)
    assert [p.name for p in outs.iterdir()] == ["o"]
    assert lock_path(outs / "o").is_file()  # the lock stays in the cache, never deleted (no race with a taker)


def _gives_up(path: Path) -> None:
    """A model onnxruntime's symbolic shape inference gives up on (a Reshape whose shape a custom op makes),
    where it would save sym_shape_infer_temp.onnx into the working directory, and that onnxruntime cannot
    run: the run fails after loading."""
    nodes = [helper.make_node("Foo", ["x"], ["s"], domain="my.ops"), helper.make_node("Reshape", ["x", "s"], ["y"]),
             helper.make_node("Sigmoid", ["y"], ["sg"]), helper.make_node("Mul", ["y", "sg"], ["z"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 1)]),
              str(path))


def test_failure_leaves_nothing(tmp_path):
    work, tmpd, outs = _dirs(tmp_path)
    _gives_up(tmp_path / "m.onnx")
    proc = _cli(["fuse", str(tmp_path / "m.onnx"), "-o", str(outs / "o")], work, tmpd)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 2 and len(messages(err)) == 1, err
    _empty(work, tmpd, outs)


def test_sigint_leaves_nothing(tmp_path):
    work, tmpd, outs = _dirs(tmp_path)
    proc = _cli(["fuse", str(MODELS / "llama_tiny_dynamo.onnx"), "-o", str(outs / "o")], work, tmpd)
    wait_for_staging(proc, outs / ".o.asc-onnx-tmp")
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130 and err.strip().endswith("asc-onnx: interrupted"), (proc.returncode, err)
    _empty(work, tmpd, outs)


def test_two_runs_into_one_folder_and_into_siblings(tmp_path):
    """The first run is stopped (SIGSTOP) while it holds its folder, so the second surely meets it."""
    work, tmpd, outs = _dirs(tmp_path)
    model = str(MODELS / "llama_tiny_dynamo.onnx")
    first = _cli(["fuse", model, "-o", str(outs / "o")], work, tmpd)
    wait_for_staging(first, outs / ".o.asc-onnx-tmp")
    first.send_signal(signal.SIGSTOP)
    try:
        assert first.poll() is None, "the first run ended before the second could meet it"
        second = _cli(["fuse", model, "-o", str(outs / "o"), "--force"], work, tmpd)
        _, err2 = second.communicate(timeout=600)
        assert second.returncode == 2 and f"another asc-onnx run (pid {first.pid})" in err2, err2
        sibling = _cli(["fuse", model, "-o", str(outs / "p")], work, tmpd)
    finally:
        first.send_signal(signal.SIGCONT)
    _, err1 = first.communicate(timeout=600)
    _, err3 = sibling.communicate(timeout=600)
    assert first.returncode == 0 and sibling.returncode == 0, (err1, err3)
    _empty(work, tmpd)
    assert sorted(p.name for p in outs.iterdir()) == ["o", "p"]
