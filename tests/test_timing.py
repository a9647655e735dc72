"""The emulator's timing model, held to calibration kernels (``tests/cpp/emu_timing.cpp``) with thresholds, on
both SoCs, under the constants of :mod:`asc_onnx.hardware`:

* a double-buffered copy of 16 KB tiles reaches >= 90% of its bandwidth bound (its HBM bytes at GM bandwidth and,
  on 910B, its writes at L2's: they go to L2); single-buffered, the same copy loses about one DMA latency a tile
  (the next tile's load still overlaps this tile's store: they use different queues). The Add sample's Cases 3
  and 4 (bench/samples.py) hold these to measurements;
* a long vector chain reaches >= 90% of the vector bound (its repeats and each instruction's issue);
* per-row ``ReduceSum`` + ``GetValue`` shows its drains: at least one V -> S drain per row, and the same sums
  as one repeat-strided ``ReduceRepeat`` with no scalar read are several times faster;
* a timing-only run (no arithmetic) times a generated kernel exactly as the full emulation does.
"""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
from conftest import ARCHES, build_cpp_tests

from asc_onnx.hardware import emulator_table


@pytest.fixture(scope="module")
def calib(tmp_path_factory):
    d = tmp_path_factory.mktemp("timing")
    exes = build_cpp_tests(d, "emu_timing")

    def run(soc: str, scenario: str, *args: str, **overrides: float) -> dict:
        table = emulator_table(soc)
        table.update(overrides)
        f = d / f"{soc}.txt"
        f.write_text("".join(f"{k} {v!r}\n" for k, v in table.items()))
        env = {**os.environ, "ASC_EMU_TIMING": str(f)}
        out = subprocess.run([str(exes[soc]), scenario, *args], check=True, capture_output=True, text=True,
                             env=env).stdout
        info = json.loads(out.strip().splitlines()[-1])
        info["table"] = table
        return info

    return run


def _transfer_times(info: dict) -> tuple[float, float]:
    """Cycles the kernel's reads and writes take at the SoC's bandwidths: its HBM bytes at GM bandwidth, the bytes L2
    serves (910B: the copy's writes, which go to L2 and are written back after the kernel while they fit) at L2's."""
    t, time = info["table"], info["time"]
    assert time["hbm_bytes"] + time["l2_bytes"] == info["bytes"]
    l2 = time["l2_bytes"] / t["l2_bytes_per_s"] if time["l2_bytes"] else 0.0
    return time["hbm_bytes"] / t["gm_bytes_per_s"] * t["clock_hz"], l2 * t["clock_hz"]


def _bandwidth_bound(info: dict) -> float:
    """The copy's bound: reads and writes one after the other on the core's port (310P), or beside each other
    (910B: writes stream into L2 beside the port)."""
    reads, writes = _transfer_times(info)
    return max(reads, writes) if writes else reads


@pytest.mark.parametrize("soc", sorted(ARCHES))
def test_double_buffered_copy_reaches_its_bandwidth_bound(calib, soc):
    tile = "4096"  # fp32 elements: 16 KB tiles
    double, single = calib(soc, "copy_double", tile), calib(soc, "copy_single", tile)
    eff_double = _bandwidth_bound(double) / double["time"]["cycles"]
    eff_single = _bandwidth_bound(single) / single["time"]["cycles"]
    assert eff_double >= 0.90, eff_double
    # single-buffered, each tile's load waits for the store before it: about one DMA latency a tile is exposed
    lost = single["time"]["cycles"] - double["time"]["cycles"]
    assert lost >= 0.5 * 64 * single["table"]["dma_latency"], (eff_single, eff_double)
    assert eff_double <= 1.0 + 1e-9  # no kernel beats its bound
    # MTE2 and MTE3 share the core's port: their busy time together is the bound's, plus each copy instruction's
    # issue (two a tile, 64 tiles)
    busy = double["time"]["busy"]
    issue = (double["table"]["dma_issue"] + double["table"]["dma_row"]) * 64  # one instruction of one row a tile
    reads, writes = _transfer_times(double)
    if writes:  # each pipe's busy time is its own transfers' and copy instructions' (64 tiles a core)
        assert busy["MTE2"] == pytest.approx(reads + issue, rel=1e-3)
        assert busy["MTE3"] == pytest.approx(writes + issue, rel=1e-3)
    else:  # reads and writes share the port
        assert busy["MTE2"] + busy["MTE3"] == pytest.approx(reads + 2 * issue, rel=1e-3)


@pytest.mark.parametrize("soc", sorted(ARCHES))
def test_long_vector_chain_reaches_the_vector_bound(calib, soc):
    info = calib(soc, "chain")
    cores = info["table"]["cores"]
    # fp32: 64 lanes of one 256-byte repeat per cycle, and each instruction's issue (512 of 256 repeats a core)
    bound = info["vec_elems"] / cores / 64 + 512 * info["table"]["vec_issue"]
    eff = bound / info["time"]["cycles"]
    assert 0.90 <= eff <= 1.0, eff
    assert max(info["time"]["busy"], key=info["time"]["busy"].get) == "V"


@pytest.mark.parametrize("soc", sorted(ARCHES))
def test_per_row_getvalue_shows_its_drains(calib, soc):
    per_row, whole = calib(soc, "rows_getvalue"), calib(soc, "rows_repeat")
    rows = 64
    drain = per_row["table"]["v_to_s"]
    extra = per_row["time"]["cycles"] - whole["time"]["cycles"]
    assert extra >= rows * drain  # one drain per row at least (ReduceSum's own V -> S, then GetValue's)
    assert per_row["time"]["cycles"] >= 3 * whole["time"]["cycles"]
    # the drains move to the scalar unit's account, the vector work does not grow by as much
    assert per_row["time"]["busy"]["S"] > 10 * whole["time"]["busy"]["S"]


@pytest.mark.parametrize("soc", sorted(ARCHES))
def test_slower_assumptions_give_slower_kernels(calib, soc):
    """Every assumed cost moves the estimate the way it should (a latency up: never faster)."""
    base = calib(soc, "copy_single")["time"]["cycles"]
    assert calib(soc, "copy_single", dma_latency=1000)["time"]["cycles"] > base
    assert calib(soc, "copy_single", dma_latency=100)["time"]["cycles"] < base
    rows = calib(soc, "rows_getvalue")["time"]["cycles"]
    assert calib(soc, "rows_getvalue", v_to_s=100)["time"]["cycles"] > rows


def test_timing_only_run_times_like_the_full_emulation():
    """``values=False`` skips the arithmetic, not the pipes: the estimate is the same to the cycle."""
    from conftest import ROOT

    import asc_onnx
    from asc_onnx import FuseOptions
    from asc_onnx.emulator.harness import run
    from asc_onnx.kernels import of
    from asc_onnx.soc import SOCS
    from asc_onnx.verify_kernels import concrete, random_inputs

    res = asc_onnx.fuse(ROOT / "models" / "llama_tiny_dynamo.onnx", options=FuseOptions(emulate=False),
                        validate=False)
    checked = 0
    for k in res.kernels:
        for soc in ("Ascend910B", "Ascend310P"):
            if of(k).unsupported(k.ir, SOCS[soc]):
                continue
            shape = concrete(k.op.instances[0].output_shapes[0], 64)
            inputs = random_inputs(k, k.ir.dtypes[0], shape, dim=64)
            full = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, SOCS[soc])
            fast = run(k.ir, k.files, f"{k.op.op_type}TilingData", [np.zeros_like(a) for a in inputs], SOCS[soc],
                       values=False)
            assert fast.time["values"] is False and full.time["values"] is True
            assert fast.time["cycles"] == pytest.approx(full.time["cycles"], rel=1e-12), k.op.op_type
            assert fast.time["busy"] == full.time["busy"]
            checked += 1
    assert checked >= 4
