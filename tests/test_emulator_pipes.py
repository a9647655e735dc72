"""The emulator's pipe, reserved-memory, queue-budget and data-cache rules.

Each rule is proven twice by a small hand-written kernel in ``tests/cpp/emu_pipes.cpp``: one that
breaks it (the fault fires, naming both operations and their kernel lines) and one that obeys it.
The rules come from the open implementation (``asc-devkit/impl``) and the synchronisation docs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import ARCHES, cpp_scenarios

from asc_onnx.emulator import INCLUDE_DIR

HERE = Path(__file__).resolve().parent / "cpp"


@pytest.fixture(scope="module")
def pipes(tmp_path_factory):
    return cpp_scenarios(tmp_path_factory.mktemp("pipes"), "emu_pipes")


# scenario that breaks a rule -> (what the fault says, the scenario that obeys it)
RULES = {
    "mte2_v_race": (["read after write", "Muls (V, emu_pipes.cpp:", "DataCopy GM->UB (MTE2, emu_pipes.cpp:"],
                    "mte2_v_flag"),
    "v_mte3_race": (["read after write", "DataCopy UB->GM (MTE3", "Duplicate (V"], "v_mte3_flag"),
    "v_mte2_war": (["write after read", "DataCopy GM->UB (MTE2", "Add (V"], "v_mte2_flag"),
    "queue_skips_deque": (["read after write", "Muls (V"], "queue_ordered"),
    "mte3_overlap": (["overlapping global-memory writes", "no PipeBarrier<PIPE_MTE3>"], "mte3_barrier"),
    "select_tmp_ub": (["TMP_UB_OFFSET", "reserve 8 KB"], "select_reserved"),
    "queue_budget": (["10 queue buffers at one position", "8 event IDs"], "queue_budget_ok"),
    "setvalue_no_flush": (["GlobalTensor::SetValue (S, emu_pipes.cpp:", "DataCacheCleanAndInvalid"],
                          "setvalue_flushed"),
    "setvalue_then_dma": (["left in the data cache"], "setvalue_flushed"),
    "wait_without_set": (["without a SetFlag", "wait forever"], "mte2_v_flag"),
    "ub_over": (["unified buffer overflow"], "ub_full"),
    "select_over_mask": (["destination overlaps the mask"], "select_own_dst"),
    "compare_over_source": (["mask it writes overlaps its source"], "select_own_dst"),
    "mte2_waw_read": (["write after write", "Muls (V", "DataCopy GM->UB (MTE2", "undefined"], "mte2_waw_barrier"),
    "static_tensor_past_ub": (["ends past the", "unified buffer"], "static_tensor_fits"),
    "l1_tensor_past_l1": (["ends past the", "L1 Buffer"], "l1_tensor_fits"),
    "scalar_reads_l1": (["L1 tensor", "scalar unit"], "l1_tensor_fits"),
}


def test_nd2nz_row_stride_is_refused_on_310p_only(pipes):
    """dav_m200 stages ND2NZ through UB and ignores dstNzNStride; dav_c220 honours it."""
    out = pipes("Ascend310P", "nd2nz_row_stride_on_310p")
    assert out.startswith("FAULT") and "dav_m200" in out and "dstNzNStride" in out, out
    assert pipes("Ascend910B", "nd2nz_row_stride_on_310p") == "OK Ascend910B"


@pytest.mark.parametrize("soc", sorted(ARCHES))
@pytest.mark.parametrize("scenario", sorted(RULES))
def test_rule_fires_and_obeying_kernel_passes(pipes, soc, scenario):
    words, obeying = RULES[scenario]
    out = pipes(soc, scenario)
    assert out.startswith("FAULT"), out
    for w in words:
        assert w in out, out
    good = pipes(soc, obeying)
    assert good.endswith(f"OK {soc}"), good


def test_race_names_both_kernel_lines(pipes):
    out = pipes("Ascend910B", "mte2_v_race")
    src = (HERE / "emu_pipes.cpp").read_text().splitlines()
    copy = next(i for i, t in enumerate(src, 1) if "DataCopy(a, xGm, 64);" in t)
    muls = next(i for i, t in enumerate(src, 1) if "Muls(b, a, 2.0f, 64);" in t)
    assert f"emu_pipes.cpp:{copy}" in out and f"emu_pipes.cpp:{muls}" in out, out


def test_ub_sizes_as_get_core_mem_size_reports(pipes):
    # 910B: 196608 - 256 (KFC); 310P: the whole 256 KiB (platform_ascendc.cpp GetCoreMemSize)
    assert "196384 bytes requested, 196352 available" in pipes("Ascend910B", "ub_over")
    assert "262176 bytes requested, 262144 available" in pipes("Ascend310P", "ub_over")


def test_select_scratch_offset_per_soc(pipes):
    assert "offset 188416" in pipes("Ascend910B", "select_tmp_ub")  # 184 KiB
    assert "offset 253952" in pipes("Ascend310P", "select_tmp_ub")  # 248 KiB


def test_setvalue_reaches_gm_only_after_clean(pipes):
    assert pipes("Ascend910B", "setvalue_flushed").startswith("GM 7.5")


@pytest.mark.parametrize("scenario", ["reenque", "scalar_orders", "mte2_waw_unread", "nd2nz_layout"])
def test_allowed_patterns(pipes, scenario):
    # re-EnQue of a dequeued tensor is allowed (kernel_tquebind_impl.h); a scalar read orders later work; two
    # unordered copies into one buffer nothing reads leave no wrong answer; ND2NZ lays matrices out as documented
    assert pipes("Ascend910B", scenario) == "OK Ascend910B"


@pytest.mark.parametrize("arch,ktype,ok", [("2002", "KERNEL_TYPE_AIV_ONLY", False),
                                           ("2002", "KERNEL_TYPE_AICORE", True),
                                           ("2201", "KERNEL_TYPE_AIV_ONLY", True)])
def test_kernel_type_per_soc(tmp_path, arch, ktype, ok):
    src = tmp_path / "k.cpp"
    src.write_text(f'#include "kernel_operator.h"\nvoid k() {{ KERNEL_TASK_TYPE_DEFAULT({ktype}); }}\n')
    proc = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", f"-D__NPU_ARCH__={arch}", "-I", str(INCLUDE_DIR),
                           str(src)], capture_output=True, text=True)
    assert (proc.returncode == 0) == ok, proc.stderr
    if not ok:
        assert "310P kernels are KERNEL_TYPE_AICORE" in proc.stderr


@pytest.mark.parametrize("soc,cast,exp", [("Ascend910B", "inf", "inf"), ("Ascend310P", "65504", "3.40282e+38")])
def test_overflow_saturates_on_310p_only(pipes, soc, cast, exp):
    assert pipes(soc, "overflow") == f"CAST {cast} EXP {exp} OK {soc}"


COMPILE_RULES = {
    # a float scalar into a half tensor: CANN's Muls/Duplicate take the tensor's element type
    "muls_float_into_half": ("2201", "AscendC::LocalTensor<half> h; AscendC::Muls(h, h, 0.5f, 16);",
                             "AscendC::LocalTensor<half> h; AscendC::Muls(h, h, static_cast<half>(0.5f), 16);"),
    "duplicate_float_into_half": ("2201", "AscendC::LocalTensor<half> h; AscendC::Duplicate(h, 0.0f, 16);",
                                  "AscendC::LocalTensor<half> h; AscendC::Duplicate(h, static_cast<half>(0), 16);"),
    # 310P has DataCacheCleanAndInvalid<T, CacheLine> only
    "dcci_three_params_on_310p": (
        "2002", "AscendC::GlobalTensor<float> g; AscendC::DataCacheCleanAndInvalid<float, "
        "AscendC::CacheLine::ENTIRE_DATA_CACHE, AscendC::DcciDst::CACHELINE_OUT>(g);",
        "AscendC::GlobalTensor<float> g; AscendC::DataCacheCleanAndInvalid<float, "
        "AscendC::CacheLine::ENTIRE_DATA_CACHE>(g);"),
    "leaky_relu_int16": ("2201", "AscendC::LocalTensor<int16_t> t; AscendC::LeakyRelu(t, t, int16_t(1), 16);",
                         "AscendC::LocalTensor<float> t; AscendC::LeakyRelu(t, t, 0.1f, 16);"),
}


def _compiles(tmp_path, arch: str, body: str) -> bool:
    src = tmp_path / "k.cpp"
    src.write_text(f'#include "kernel_operator.h"\nvoid k() {{ {body} }}\n')
    return subprocess.run(["g++", "-std=c++17", "-fsyntax-only", f"-D__NPU_ARCH__={arch}", "-I", str(INCLUDE_DIR),
                           str(src)], capture_output=True).returncode == 0


@pytest.mark.parametrize("rule", sorted(COMPILE_RULES))
def test_api_signatures_are_as_strict_as_cann(tmp_path, rule):
    arch, bad, good = COMPILE_RULES[rule]
    assert not _compiles(tmp_path, arch, bad)
    assert _compiles(tmp_path, arch, good)
