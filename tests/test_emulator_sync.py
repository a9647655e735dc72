"""SyncAll between the blocks of a launch (``emu_blocks.h``): a small kernel in ``tests/cpp/emu_sync.cpp`` where
each block writes its part of a workspace and, after the barrier, reads its neighbour's. The obeying kernel gives
the right values and every block leaves the barrier together; each way of breaking the rule that the chip would
turn into a wrong answer or a hang is a fault, on the SoC it concerns."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from conftest import build_cpp_tests


@pytest.fixture(scope="module")
def sync(tmp_path_factory):
    exes = build_cpp_tests(tmp_path_factory.mktemp("sync"), "emu_sync")
    return lambda soc, scenario, blocks=4: subprocess.run(
        [str(exes[soc]), scenario, str(blocks)], check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("blocks", [2, 4, 48])
def test_every_block_reads_its_neighbours_part_after_the_barrier(sync, blocks):
    """Right values, and one release time for every block however late each arrived."""
    out = sync("Ascend910B", "ok", blocks)
    assert out.startswith("OK"), out
    words = out.split()
    y = np.array([float(w) for w in words[1:1 + 8 * blocks]])
    x = np.arange(8 * blocks, dtype=np.float64)
    assert np.array_equal(y, 4 * np.roll(x, -8)), y  # twice the neighbour's doubled part
    ends = {float(m) for m in re.findall(r"t\d+=([\d.e+]+)", out)}
    # the blocks did different work before the barrier, the same after it (at GM shares that differ by a hair)
    assert max(ends) - min(ends) < 1e-3 * max(ends), ends
    assert "phases=1" in out


def test_another_blocks_bytes_may_be_written_after_the_barrier(sync):
    """Each block overwrites its neighbour's part once all have passed the barrier: ordered, no fault."""
    assert sync("Ascend910B", "rewrite").startswith("OK")


# scenario -> what the fault says
FAULTS = {
    "no_sync": ["no SyncAll between", "nothing orders the two cores"],
    "own_read": ["writes bytes", "that block 0 (mod 64) read with no SyncAll"],  # a reader besides the writer
    "getvalue": ["GlobalTensor::GetValue", "wrote with no SyncAll between"],
    "missing": ["block 1 ended while other blocks wait", "wait forever"],
    "dirty": ["SetValue", "DataCacheCleanAndInvalid", "before SyncAll"],
    "aiv_false": ["SyncAll<false>()", "wait forever"],
    "aiv_only": ["KERNEL_TYPE_AIV_ONLY", "MIX kernel type"],
}


@pytest.mark.parametrize("scenario", sorted(FAULTS))
def test_breaking_the_barrier_is_a_fault(sync, scenario):
    out = sync("Ascend910B", scenario)
    assert out.startswith("FAULT"), out
    for w in FAULTS[scenario]:
        assert w in out, out


def test_a_mixed_kernels_block_num_counts_ai_cores(sync):
    """GetBlockNum is the logical AI Cores (blockDim): half the vector blocks of a MIX_AIC_1_2 launch."""
    out = sync("Ascend910B", "blocknum", 8)
    assert out.startswith("GetBlockNum=4 OK"), out


def test_more_blocks_than_cores_never_meet(sync):
    out = sync("Ascend910B", "ok", 49)
    assert out.startswith("FAULT") and "49 blocks on 48 cores" in out, out


def test_310p_has_no_hard_sync(sync):
    out = sync("Ascend310P", "ok", 4)
    assert out.startswith("FAULT") and "310P's AI Core has no hard SyncAll" in out, out
