"""The ship guard never crashes and no error ships: a timing run that faults or crashes, or a tiling that refuses a
judged shape, leaves its op "not judged" (not shipped, the reason in the warning and the report) and the run goes on
to exit 0; a timing run's memory is bounded by what its cores touch, so an image model with dynamic N, H and W is
fused with default options under 4 GiB for the whole process tree; crash messages end with their reason."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import onnx
import pytest
from conftest import ROOT

import asc_onnx
import asc_onnx.estimate as est
from asc_onnx import FuseOptions
from asc_onnx.cli import main
from asc_onnx.emulator.harness import EmulatorFaultError
from asc_onnx.errors import AscOnnxError, crash_reason
from asc_onnx.estimate import Judgement, OpEstimate

MODELS = ROOT / "models"
IMAGE = MODELS / "cnn_dynamic_hw_legacy.onnx"


def _estimate(fused: float, unfused: float, error: str | None = None) -> OpEstimate:
    return OpEstimate("AscX", {"batch": 1}, [[1, 8]], fused, fused, 1.0, unfused, 1.0, 1.0, "MTE2", error=error)


@pytest.mark.fast
def test_an_error_is_a_loss_and_no_estimate_is_no_judgement():
    ok, bad = _estimate(1.0, 2.0), _estimate(float("inf"), 2.0, "fault: block 0: boom")
    assert Judgement("AscX", [ok], [ok]).ship
    j = Judgement("AscX", [ok, bad], [ok, bad])
    assert not j.ship and not j.judged and j.status == "not judged"
    assert "not judged" in j.reason() and "boom" in j.reason()
    empty = Judgement("AscX", [], [])
    assert not empty.ship and not empty.judged
    slower = Judgement("AscX", [ok], [_estimate(3.0, 2.0)])
    assert not slower.ship and slower.judged and slower.status == "slower" and "slower than" in slower.reason()


def test_a_planted_timing_fault_is_not_judged_not_shipped_and_exit_0(tmp_path, monkeypatch, capsys):
    real = est.run

    def run(k, *args, **kwargs):
        if not kwargs.get("values", True) and k.op_type == "AscSilu":
            raise EmulatorFaultError(f"{k.op_type} on Ascend910B: fault: block 0: a planted timing fault")
        return real(k, *args, **kwargs)

    monkeypatch.setattr(est, "run", run)
    out = tmp_path / "o"
    # (a seed of its own: tests/digests.py keys runs by input and options, and this run's outputs are planted)
    code = main(["fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(out), "--no-validate", "--no-emulate",
                 "--seed", "101"])
    err = capsys.readouterr().err
    assert code == 0
    assert "AscSilu not shipped: not judged" in err and "a planted timing fault" in err
    report = json.loads((out / "report.json").read_text())
    op = next(o for o in report["estimates"]["ops"] if o["op_type"] == "AscSilu")
    assert op["not_judged"] and not op["shipped"] and "a planted timing fault" in op["reason"]
    assert "AscSilu" not in {n.op_type for n in onnx.load(str(out / "model.atc.onnx")).graph.node}
    assert main(["fuse", str(MODELS / "cnn_silu_legacy.onnx"), "-o", str(tmp_path / "s"), "--no-validate",
                 "--no-emulate", "--strict", "--seed", "101"]) == 1


def test_a_crashed_timing_run_is_not_judged(tmp_path, monkeypatch):
    def run(k, *args, **kwargs):
        raise AscOnnxError(f"emulator run of {k.op_type} crashed, {crash_reason(-9, '')}")

    monkeypatch.setattr(est, "run", run)
    res = asc_onnx.fuse(MODELS / "cnn_silu_legacy.onnx", None, validate=False,
                        options=FuseOptions(emulate=False, seed=102))  # (planted: a key of its own in the digests)
    ops = res.report["estimates"]["ops"]
    assert ops and all(o["not_judged"] and not o["shipped"] for o in ops)
    assert all("out-of-memory killer" in o["reason"] for o in ops)
    assert res.atc_model is not None and not any(n.op_type.startswith("Asc") for n in res.atc_model.graph.node)


@pytest.mark.fast
def test_crash_messages_end_with_their_reason():
    assert crash_reason(-9, "").startswith("killed by SIGKILL (most likely the out-of-memory killer")
    assert crash_reason(-6, "terminate called after throwing an instance of 'std::bad_alloc'\n") == (
        "killed by SIGABRT (it could not allocate memory): terminate called after throwing an instance of "
        "'std::bad_alloc'")
    assert crash_reason(3, "") == "exit status 3"


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and every process under it (from /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:")), 0)
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return total


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_an_image_model_with_dynamic_n_h_and_w_fuses_by_default_under_4_gib(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "asc_onnx", "fuse", str(IMAGE), "-o", str(tmp_path / "o"), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]

    def watch() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            time.sleep(0.05)

    t = threading.Thread(target=watch)
    t.start()
    try:
        out, err = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        raise
    t.join()
    assert proc.returncode == 0, err
    assert 0 < peak[0] < 4 << 30, peak[0]
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    bindings = [m["binding"] for m in report["estimates"]["model"]]
    assert bindings == [{"batch": 1, "height": 224, "width": 224}, {"batch": 8, "height": 640, "width": 640},
                        {"batch": 1, "height": 640, "width": 640}, {"batch": 8, "height": 224, "width": 224}]
    assert all(not o["not_judged"] for o in report["estimates"]["ops"])
