"""The emulator itself: each API against numpy semantics, each hardware check firing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from asc_onnx.emulator import INCLUDE_DIR

HERE = Path(__file__).resolve().parent / "cpp"
A = np.array([-3.5, -1.0, -0.25, 0.0, 0.5, 1.0, 2.0, 7.25], np.float32)
B = np.array([2.0, -4.0, 0.5, 3.0, -0.5, 1.0, 8.0, -2.0], np.float32)
BP = np.abs(B) + np.float32(0.25)


def _build(name: str, tmp: Path) -> Path:
    exe = tmp / name
    subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-I", str(INCLUDE_DIR), str(HERE / f"{name}.cpp"), "-o",
                    str(exe)], check=True, capture_output=True)
    return exe


@pytest.fixture(scope="module")
def api(tmp_path_factory) -> dict:
    exe = _build("emu_api", tmp_path_factory.mktemp("emu"))
    return json.loads(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    exe = _build("emu_faults", tmp_path_factory.mktemp("emu"))
    return lambda s: subprocess.run([str(exe), s], check=True, capture_output=True, text=True).stdout.strip()


EXPECTED = {
    "Add": A + B, "Sub": A - B, "Mul": A * B, "Div": A / B, "Max": np.maximum(A, B), "Min": np.minimum(A, B),
    "Adds": A + 1.5, "Muls": A * 1.5, "Maxs": np.maximum(A, 1.5), "Mins": np.minimum(A, 1.5),
    "LeakyRelu": np.where(A >= 0, A, A * np.float32(0.1)), "Exp": np.exp(A), "Ln": np.log(BP), "Abs": np.abs(A),
    "Sqrt": np.sqrt(BP), "Rsqrt": 1 / np.sqrt(BP), "Reciprocal": 1 / BP, "Relu": np.maximum(A, 0),
    "Duplicate": np.full(8, 0.75), "InPlace": A * 2,
    "CastHalf": (np.float32(1.0) + np.arange(8, dtype=np.float32) * np.float32(0.0001)).astype(np.float16),
    "CastBf16": (A * np.float32(1.00390625) + np.float32(0.001)).astype(ml_dtypes.bfloat16).astype(np.float32),
    "HalfAdd": np.full(8, np.float16(1.0) + np.float16(0.0001)),
    # float -> int32 (-2.5, -0.5, 0.5, 1.5, 2.5, 3e9, -3e9, NaN): RINT ties to even, ROUND away from zero,
    # out of range saturates, NaN gives 0 (precision_conversion.md and the A2/A3 boundary-value appendix)
    **{f"CastInt{mode}": np.array([*vals, 2**31 - 1, -2**31, 0], np.float32) for mode, vals in (
        ("RINT", [-2, 0, 0, 2, 2]), ("FLOOR", [-3, -1, 0, 1, 2]), ("CEIL", [-2, 0, 1, 2, 3]),
        ("ROUND", [-3, -1, 1, 2, 3]), ("TRUNC", [-2, 0, 0, 1, 2]))},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_vector_api_matches_numpy(api, name):
    np.testing.assert_allclose(np.array(api[name], np.float64), np.asarray(EXPECTED[name], np.float64),
                               rtol=1e-6, atol=1e-7)


def test_compare_and_select(api):
    x = (np.arange(8) % 7 - 3).astype(np.float32)
    assert api["SelectLtZero"] == list(np.where(x < 0, x, 100))
    assert api["SelectGeHalf"] == list(np.where(x >= 0.5, x, 100))
    # a count under one 256-byte repeat computes nothing: the GE mask from before is still there
    assert api["ComparePartialRepeat"] == api["SelectGeHalf"]


def test_datacopy_rounds_down_to_32_bytes(api):
    # 11 floats = 44 bytes: only 8 floats (32 bytes) arrive; the rest keeps its old value
    assert api["DataCopyRoundsDown"] == [0, 1, 2, 3, 4, 5, 6, 7, -7, -7, -7, -7]


def test_datacopypad_is_byte_exact_and_pads(api):
    assert api["DataCopyPadIn"][:8] == [3, 4, 5, 6, 7, 9, 9, 9]
    assert api["DataCopyPadDummy"] == [3, 4, 5, 6, 7, 3, 3, 3]  # no padding: the first element fills, as the chip
    assert api["DataCopyPadOut"] == [-1, 3, 4, 5, -1, -1]
    assert api["gm_read"] == 32 + 20 + 20 and api["gm_write"] == 12
    assert api["vec_add"] == 2  # one fp32 Add, one fp16 Add


FAULTS = {
    "ub_overflow": "unified buffer overflow on Ascend910B",
    "unaligned": "not 32-byte aligned",
    "gm_read_oob": "past the end of 'in'",
    "gm_write_oob": "past the end of 'out'",
    "write_input": "write into input tensor",
    "two_blocks": "blocks 0 and 1 both write byte 32",
    "deque_empty": "DeQue before EnQue",
    "double_free": "double free",
    "depth": "queue depth 1 exceeded",
    "alloc_exhausted": "all 2 buffers are in use",
    "partial_overlap": "partially overlaps",
    "pad_on_310p": "DataCopyPad is not available on Ascend310P",
    "bf16_cast_none": "does not allow CAST_NONE",
    "int_cast_none": "Cast float->int32_t takes CAST_RINT/FLOOR/CEIL/ROUND/TRUNC",
    "int_to_float_rounding_on_310p": "Cast int32_t->float: only CAST_NONE",
    "count_too_big": "exceeds the operand's 16 elements",
}


@pytest.mark.parametrize("scenario", sorted(FAULTS))
def test_hardware_check_fires(faults, scenario):
    out = faults(scenario)
    assert out.startswith("FAULT") and FAULTS[scenario] in out, out


def test_full_ub_fits(faults):
    assert faults("ub_fits") == "OK Ascend910B"
