"""Every benchmark's smoke mode, so none can rot: it runs the benchmark end to end at a small size."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.mark.parametrize("budget", [None, "0"])
def test_llama7b_bench_smoke_from_another_working_directory(tmp_path, budget):
    """The 7B benchmark's model at two small layers, fused with default options from a folder that is not the
    model's (external weights must be found from the model's folder by every rung); with a zero memory budget
    every fused node with weights is checked on its own region, as the 7B model is."""
    out = tmp_path / "figures.json"
    cmd = [sys.executable, str(ROOT / "bench" / "bench_llama7b.py"), "--smoke", "--json", str(out)]
    proc = subprocess.run(cmd + (["--memory-budget", budget] if budget else []), cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fig = json.loads(out.read_text())
    assert fig["exit"] == 0 and fig["op_types"] == 5 and not fig["kernels_rejected"]
    assert fig["kernels_shipped"] + fig["judged_slower"] == 5 and fig["kernels_shipped"] >= 1
    rung = fig["kernel_rung"]
    assert rung["runs"] and rung["ok"] == rung["runs"] and not rung["refused"]
    if budget is None:
        assert fig["graph_rung"] is True and fig["deployed_rung"] is True and fig["whole_model"] is None
    else:
        assert fig["graph_rung"] is None and fig["deployed_rung"] is None and "memory budget" in fig["whole_model"]
        assert rung["per_region"] >= 7  # 2 layers x (2 norms with a weight, the MLP) + the final norm
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures.json"]  # nothing left in the working folder


@pytest.mark.parametrize("script,expect", [
    ("bench_kernels.py", "AscFusedEw"),  # the legacy LLaMA's RoPE chain, a pointwise kernel
    ("bench_rows.py", "AscAddRmsNorm"),
    ("bench_matmul.py", "AscSwiGlu"),
    ("bench_fuse.py", "asc-onnx --no-validate --no-emulate / load+save"),
    ("soak_dags.py", "draws"),
    ("bench_schedules.py", "single-buffered"),
    ("bench_chip.py", "GEMM 512^3"),
    ("bench_ship.py", "Ascend910B  matmul"),
    ("bench_judge.py", "all fitted"),
    ("bench_attention.py", "emulated, max abs error"),
])
def test_bench_smoke(tmp_path, script, expect):
    """Each benchmark end to end on a small input (``--smoke``): it runs, every kernel it emulates matches,
    and it prints its table."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--smoke"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert expect in proc.stdout
    assert not any(tmp_path.iterdir())


def test_no_gemm_estimate_beats_what_torch_npu_measures_by_more_than_15_percent():
    """One-sided against a chip: the bare fp16 GEMM at 1024^3 to 8192^3 on Ascend910B2, estimated at the table's
    values (launch included), is at most 1.15x torch_npu's measured TFLOPS at each size (``bench_chip.py --check``
    exits 1 otherwise, and also if a best-practice sample leaves its 0.85-1.15 band). Measured today: 0.94x,
    0.73x, 0.79x and 0.98x."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_chip.py"), "--check"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count("published:") == 4 and "OVER 15%" not in proc.stdout, proc.stdout


def test_no_attention_estimate_beats_the_hand_written_kernel_by_more_than_15_percent():
    """One-sided: our fused attention at pto-isa's shapes (b1 h1 S x S d128 fp16, S = 1K to 32K, Ascend910B2) is
    never estimated more than 15% faster than pto-isa's measured hand kernel (``bench_attention.py --pto --check``).
    Measured today: 0.56x to 0.79x its speed."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_attention.py"), "--pto", "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count("\n") >= 8 and "FASTER" not in proc.stdout, proc.stdout


def test_no_matmul_gelu_estimate_beats_the_best_measured_by_more_than_15_percent():
    """One-sided: our Linear+GELU at 8192^3 fp16 on Ascend910B2 against the faster of the matmul_gelu sample's fused
    kernel and torch_npu's MatMul plus the sample's GELU (``bench_matmul.py --gelu-sample --check``). Today 0.96."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_matmul.py"), "--gelu-sample", "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "best/estimate" in proc.stdout and "FASTER" not in proc.stdout, proc.stdout
