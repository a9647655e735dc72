"""The emulator's reductions and scalar read-back, against numpy, with a planted misuse per rule.

``tests/cpp/emu_reduce.cpp`` runs one API on numbers from stdin. Sizes follow the API reference
(归约计算/ReduceSum.md, ReduceMax.md, ReduceRepeat.md, ReduceDataBlock.md): a repeat is 256 bytes;
``sharedTmpBuffer`` must hold one result per repeat for ReduceSum on 310P (none on A2) and a value-index
pair per repeat for ReduceMax/ReduceMin on both."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from asc_onnx.emulator import INCLUDE_DIR

HERE = Path(__file__).resolve().parent / "cpp"
BUILDS = {"2201": [], "2002": [], "2201-nosync": ["-DASC_EMU_AUTO_SYNC=0"]}
#: fp32 sums of up to 16k uniform(-1, 1) values in a different order: relative to sum(|x|).
SUM_RTOL = 1e-6


@pytest.fixture(scope="module")
def reduce_exe(tmp_path_factory):
    d = tmp_path_factory.mktemp("reduce")
    exes = {}
    for name, extra in BUILDS.items():
        arch = name.split("-")[0]
        exes[name] = d / f"reduce{name}"
        subprocess.run(["g++", "-std=c++17", "-O1", "-w", f"-D__NPU_ARCH__={arch}", *extra, "-I", str(INCLUDE_DIR),
                        str(HERE / "emu_reduce.cpp"), "-o", str(exes[name])], check=True, capture_output=True)

    def run(build: str, scenario: str, x: np.ndarray, count: int, repeat: int = 1) -> str:
        text = " ".join(repr(float(v)) for v in x)
        return subprocess.run([str(exes[build]), scenario, str(count), str(repeat)], input=text, check=True,
                              capture_output=True, text=True).stdout.strip()

    return run


def _values(out: str) -> np.ndarray:
    assert out.startswith("OK"), out
    return np.array([float(v) for v in out.split()[1:]]).astype(np.float32)


@pytest.mark.parametrize("arch", ["2201", "2002"])
@pytest.mark.parametrize("count", [1, 31, 64, 65, 768, 4096, 16000])
def test_reduce_sum_max_min_match_numpy(reduce_exe, arch, count):
    x = np.random.default_rng(count).uniform(-1, 1, count).astype(np.float32)
    got = _values(reduce_exe(arch, "sum", x, count))[0]
    assert abs(got - x.astype(np.float64).sum()) <= SUM_RTOL * np.abs(x).sum() + 1e-7
    v, idx = _values(reduce_exe(arch, "max", x, count))
    assert v == x.max() and int(idx) == int(np.argmax(x))
    assert _values(reduce_exe(arch, "min", x, count))[0] == x.min()


def test_reduce_sum_scratch_rule_per_soc(reduce_exe):
    # 4096 floats = 64 repeats: 310P's ReduceSum needs 64 scratch floats (256 B); a 32-byte buffer is short.
    x = np.ones(4096, np.float32)
    out = reduce_exe("2002", "sum_small_tmp", x, 4096)
    assert out.startswith("FAULT") and "sharedTmpBuffer holds 8 elements, 64 needed" in out, out
    # A2's count form does not use the scratch at all (ReduceSum.md, way 1).
    assert _values(reduce_exe("2201", "sum_small_tmp", x, 4096))[0] == 4096.0
    # ReduceMax with its index keeps each round's value-index pairs on both SoCs (ReduceMax.md): 64 repeats
    # need 128 + 8 + 8 = 144 floats; 4 repeats 8 + 8 = 16, more than the 32-byte buffer.
    for arch in ("2201", "2002"):
        out = reduce_exe(arch, "max_small_tmp", x, 4096)
        assert out.startswith("FAULT") and "144 needed" in out, out
        out = reduce_exe(arch, "max_small_tmp", np.arange(256, dtype=np.float32), 256)
        assert out.startswith("FAULT") and "16 needed" in out, out


@pytest.mark.parametrize("arch, scenario, words", [("2201", "sum_over_src", "destination overlaps the source"),
                                                   ("2002", "sum_tmp_over_src", "sharedTmpBuffer overlaps the source")])
def test_reduce_overlap_faults(reduce_exe, arch, scenario, words):
    out = reduce_exe(arch, scenario, np.ones(256, np.float32), 256)
    assert out.startswith("FAULT") and words in out, out


def test_reduce_max_scratch_may_reuse_the_source(reduce_exe):
    # ReduceMax.md allows the scratch in the source's space (the result is read before it is overwritten).
    x = np.random.default_rng(3).uniform(-1, 1, 256).astype(np.float32)
    assert _values(reduce_exe("2201", "max_tmp_over_src", x, 256))[0] == x.max()


def test_reduce_max_with_index_keeps_every_round(reduce_exe):
    # 8320 floats = 130 repeats: ReduceMax.md's formula with the index gives 264 + 24 = 288 scratch floats;
    # without the index 264 would do.
    x = np.random.default_rng(4).uniform(-1, 1, 8320).astype(np.float32)
    out = reduce_exe("2201", "max_index_sized", x, 8320, 264)
    assert out.startswith("FAULT") and "264 elements, 288 needed" in out, out
    assert _values(reduce_exe("2201", "max_index_sized", x, 8320, 288))[0] == x.max()


@pytest.mark.parametrize("mask, repeat", [(64, 4), (5, 3), (33, 7)])
def test_reduce_repeat_one_result_per_repeat(reduce_exe, mask, repeat):
    x = np.random.default_rng(mask).uniform(-2, 2, 64 * repeat).astype(np.float32)
    rows = x.reshape(repeat, 64)[:, :mask]
    np.testing.assert_allclose(_values(reduce_exe("2201", "repeat_sum", x, mask, repeat)), rows.sum(1),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(_values(reduce_exe("2201", "repeat_max", x, mask, repeat)), rows.max(1))


def test_reduce_repeat_mask_beyond_a_repeat_faults(reduce_exe):
    out = reduce_exe("2201", "repeat_bad_mask", np.ones(256, np.float32), 65, 2)
    assert out.startswith("FAULT") and "continuous mask 65 outside [0, 64]" in out, out


def test_reduce_data_block_sums_each_block(reduce_exe):
    x = np.arange(128, dtype=np.float32)
    got = _values(reduce_exe("2201", "block_sum", x, 64, 2))
    np.testing.assert_array_equal(got, x.reshape(16, 8).sum(1))


def test_scalar_read_back_needs_v_s_order_without_auto_sync(reduce_exe):
    x = np.arange(64, dtype=np.float32)
    # Custom-op projects build with --cce-auto-sync: the compiler orders GetValue after the vector write.
    assert _values(reduce_exe("2201", "getvalue_after_vec", x, 0))[0] == 6.0
    # With auto-sync off the same kernel reads a result still in flight.
    out = reduce_exe("2201-nosync", "getvalue_after_vec", x, 0)
    assert out.startswith("FAULT") and "read after write" in out and "LocalTensor::GetValue (S" in out, out
    assert _values(reduce_exe("2201-nosync", "getvalue_flagged", x, 0))[0] == 6.0
    out = reduce_exe("2201-nosync", "setvalue_then_vec", x, 0)
    assert out.startswith("FAULT") and "LocalTensor::SetValue (S" in out, out
    assert _values(reduce_exe("2201-nosync", "setvalue_flagged", x, 0))[0] == 10.0


@pytest.mark.parametrize("arch", ["2201", "2002"])
def test_brcb_fills_one_block_per_value(reduce_exe, arch):
    """Brcb.md's pseudo-code: value j of repeat i fills block i * dstRepStride + j * dstBlkStride; with strides
    (2, 16) value r fills the first 32 bytes of the 64-byte slot r (310P: by scalar reads and Duplicates)."""
    x = np.arange(1, 17, dtype=np.float32)
    got = _values(reduce_exe(arch, "brcb_slots", x, 16)).reshape(16, 16)
    np.testing.assert_array_equal(got[:, :8], np.repeat(x[:, None], 8, 1))


@pytest.mark.parametrize("arch, scenario, words", [
    ("2201", "brcb_zero_stride", "dstBlkStride 0 is undefined"),
    ("2201", "brcb_in_place", "source and destination share memory"),
    ("2201", "rows_overlapping_repeats", "repeat 1 reads a block repeat 0 wrote"),
    ("2201", "rows_dst_blk0", "dstBlkStride 0 is undefined"),
    ("2201", "rows_past_end", "run past its tensor"),
])
def test_repeat_form_misuses_fault(reduce_exe, arch, scenario, words):
    out = reduce_exe(arch, scenario, np.ones(1024, np.float32), 64 if "rows" in scenario else 16,
                     255 if scenario == "rows_past_end" else 2)
    assert out.startswith("FAULT") and words in out, out


@pytest.mark.parametrize("mask", [64, 17, 8])
def test_rows_times_their_slot_value(reduce_exe, mask):
    """A level-0 Mul over rows of a tile: src1 reads one 32-byte block per repeat (block stride 0, repeat stride
    2 blocks), the lanes past the mask keep their bytes."""
    repeat = 5
    x = np.random.default_rng(mask).uniform(-2, 2, 64 * repeat).astype(np.float32)
    got = _values(reduce_exe("2201", "rows_times_slot", x, mask, repeat)).reshape(repeat, 64)
    want = x.reshape(repeat, 64).copy()
    want[:, :mask] *= (np.arange(repeat) + 2)[:, None]
    np.testing.assert_array_equal(got, want)


def test_accumulating_into_dst_at_repeat_stride_0_is_the_documented_exception(reduce_exe):
    """通用地址重叠约束: Add with src1 = dst and dst/src1 repeat stride 0 sums the rows into dst."""
    x = np.random.default_rng(3).uniform(-1, 1, 64 * 6).astype(np.float32)
    got = _values(reduce_exe("2201", "accumulate_rows", x, 64, 6))
    np.testing.assert_allclose(got, x.reshape(6, 64).sum(0), rtol=1e-6, atol=1e-6)
