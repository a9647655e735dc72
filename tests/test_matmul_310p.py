"""Matmul kernels as each SoC's own Matmul API path runs them, under the tiling CANN's own host code computes.

On 310P the Matmul is ``MatmulImpl``, not the KFC client: its ``IterateAll`` writes every block at its place in
a C of N columns whatever ``enSequentialWrite`` says, its ``GetTensorC`` writes through the core's own MTE3, its
cube takes only a float bias, it reserves ``shareUbSize`` of UB at registration and it checks ``transLength``
against its NORM configuration; CANN's tiling splits N unevenly over cores. Each rule has a planted kernel
(``tests/cpp/emu_matmul_soc.cpp``) that breaks it and one that obeys it, and the generated kernels run at real
model sizes under CANN's tiling on 310P (big ones cut down by ``kernels/matmul/budget.cut``, which keeps the
real shape's base blocks, steps, depths and uneven last core)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import F16, F32
from onnx import TensorProto
from test_matmul_kernels import CASES, _kernel

from asc_onnx.emulator import INCLUDE_DIR, cann_tiling
from asc_onnx.kernels.matmul.budget import MATMUL_EMU_MACS
from asc_onnx.kernels.matmul.budget import cut as reduced_tiling
from asc_onnx.soc import get_soc
from asc_onnx.verify_kernels import check, matmul_inputs

needs_cann = pytest.mark.skipif(cann_tiling.source_root() is None, reason="../shared/ascend is not present")
ARCH = {"Ascend910B": 2201, "Ascend310P": 2002}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    exes = {}
    for soc, arch in ARCH.items():
        exe = tmp_path_factory.mktemp(soc) / "emu_matmul_soc"
        subprocess.run(["g++", "-std=c++17", "-O1", "-w", f"-D__NPU_ARCH__={arch}", "-I", str(INCLUDE_DIR),
                        str(Path(__file__).resolve().parent / "cpp" / "emu_matmul_soc.cpp"), "-o", str(exe)],
                       check=True, capture_output=True)
        exes[soc] = exe
    return lambda soc, s: subprocess.run([str(exes[soc]), s], capture_output=True, text=True).stdout.strip()


# scenario that breaks a rule -> (the SoCs it concerns, what the fault says); its obeying twin passes everywhere.
PLANTED = {
    "iterateall_seq_slot": ("iterate_getc_slot", {"Ascend310P"}, "outside every global-memory tensor"),
    "getc_read_unordered": ("getc_read_ordered", {"Ascend310P"}, "MTE3_MTE2"),
    "bias_half": ("bias_float", {"Ascend310P"}, "only as float"),
    "mdl_tiling_steps": ("norm_tiling_steps", {"Ascend310P"}, "SetMatmulConfigParams(0)"),
    "share_ub_ignored": ("share_ub_counted", {"Ascend310P"}, "unified buffer overflow"),
    "event_ids_exhausted": ("event_ids_spare", {"Ascend910B", "Ascend310P"}, "event IDs of V_MTE2 are held"),
}


@pytest.mark.parametrize("soc", sorted(ARCH))
@pytest.mark.parametrize("bad", sorted(PLANTED))
def test_planted_soc_rules(planted, bad, soc):
    good, socs, message = PLANTED[bad]
    out = planted(soc, bad)
    if soc in socs:
        assert out.startswith("FAULT") and message in out, out
    else:
        assert out == "OK", out
    assert planted(soc, good) == "OK"


#: A kernel that waits for an asynchronous IterateAll. On 310P the Matmul is ``MatmulImpl``, whose WaitIterateAll
#: exists for ``__NPU_ARCH__`` 5102 only (``impl/adv_api/detail/matmul/matmul_impl.h``): the device build fails.
WAITS = """#include "kernel_operator.h"
#include "lib/matmul_intf.h"
using namespace AscendC;
using AT = MatmulType<TPosition::GM, CubeFormat::ND, half>;
using CT = MatmulType<TPosition::GM, CubeFormat::ND, float>;
void Wait(Matmul<AT, AT, CT, CT>& mm) { mm.WaitIterateAll(); }
int main() { return 0; }
"""


def test_wait_iterate_all_is_no_member_of_the_310p_matmul(tmp_path):
    """The planted kernel compiles for 910B (the KFC client's member) and not for 310P, as on the device."""
    src = tmp_path / "waits.cpp"
    src.write_text(WAITS)
    for soc, arch in ARCH.items():
        proc = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-w", f"-D__NPU_ARCH__={arch}",
                               "-I", str(INCLUDE_DIR), str(src)], capture_output=True, text=True)
        if soc == "Ascend310P":
            assert proc.returncode != 0 and "has no such member" in proc.stderr, proc.stderr[-2000:]
        else:
            assert proc.returncode == 0, proc.stderr[-2000:]


# -- generated kernels at real sizes on 310P, under CANN's tiling ----------------------------------------

SHAPES = [(64, 512, 256), (16, 2000, 32), (128, 4864, 896), (512, 11008, 4096), (256, 3072, 768)]  # (M, N, K)


@needs_cann
@pytest.mark.parametrize("case", ["swiglu", "silu_bias", "gelu_erf"])
def test_310p_fp16_at_model_sizes_under_canns_tiling(case):
    soc = get_soc("Ascend310P")
    k = _kernel(CASES[case](F16, 80), "Ascend310P")  # the kernel is shape-generic: N and K come from the inputs
    tilings = cann_tiling.cann_tilings(k.ir, k.files, soc, F16, [(m, n, kk) for m, n, kk in SHAPES])
    for (m, n, kk), t in zip(SHAPES, tilings):
        assert isinstance(t, dict), f"the host tiling refuses {(m, n, kk)} under CANN's tiling: reason {t}"
        forced = None
        if m * n * kk * len(k.ir.gemms) > MATMUL_EMU_MACS:
            forced, m, n, kk = reduced_tiling(t, m, n, kk, 2 if k.ir.split else 1)
        inputs = matmul_inputs(k, F16, (1, m), np.random.default_rng(0), kk, n)
        c = check(k, inputs, soc, f"M={m} N={n} K={kk}", cube_tiling=forced)
        assert c.ok, (case, (m, n, kk), t, c.error, c.max_abs)
        assert c.cube["singleCoreN"] % 16 == 0 and c.cube["transLength"] == t["transLength"]


@needs_cann
def test_regressions_of_the_310p_review():
    """The three defects, each at the shape that showed it, on today's kernel under CANN's tiling."""
    soc = get_soc("Ascend310P")
    k = _kernel(CASES["swiglu"](F16, 80), "Ascend310P")
    # 1: N > baseN (the 310P IterateAll would lay each block's rows out with pitch N, past its slot).
    inputs = matmul_inputs(k, F16, (1, 64), np.random.default_rng(1), 256, 512)
    c = check(k, inputs, soc, "N > baseN")
    assert c.ok and c.tiling == "CANN" and c.cube["N"] > c.cube["baseN"], (c.error, c.cube)
    # 2: CANN splits N = 2000 over 8 cores as 250 columns: each core's N is rounded to 256 by the host.
    t = cann_tiling.cann_tilings(k.ir, k.files, soc, F16, [(16, 2000, 32)])[0]
    assert t["singleCoreN"] == 256 and -(-2000 // t["singleCoreN"]) * t["singleCoreN"] > 2000
    c = check(k, matmul_inputs(k, F16, (1, 16), np.random.default_rng(2), 32, 2000), soc, "uneven N")
    assert c.ok, c.error
    # 3: the host asks for NORM: CANN's transLength at LLaMA-7B's FFN fits UB and the kernel is not refused. NORM's
    # is the largest single A, B or C base tile (MDL's would hold stepKa of them).
    t = cann_tiling.cann_tilings(k.ir, k.files, soc, F16, [(512, 11008, 4096)])[0]
    tiles = (t["baseM"] * t["baseK"], t["baseK"] * t["baseN"], t["baseM"] * t["baseN"])
    assert isinstance(t, dict) and t["transLength"] <= 2 * max(tiles) + 16 * 1024 and t["transLength"] <= 64 * 1024, t


# -- our tiling against CANN's over a grid ----------------------------------------------------------------

GRID_M = (1, 7, 16, 64, 128, 512, 2048)
GRID_NK = ((512, 256), (2000, 32), (4864, 896), (11008, 4096), (768, 768), (3072, 768), (1024, 4096),
           (80, 40), (1200, 1200), (4000, 512), (2048, 2048), (160, 8192), (14336, 4096), (896, 4864),
           (256, 11008), (96, 64), (6144, 1536), (384, 1152), (48, 16), (5120, 1280), (13696, 5120),
           (2816, 1024), (640, 160), (18944, 3584), (1536, 8960), (9728, 2560), (3584, 18944), (112, 224),
           (32000, 4096), (4096, 4096))


@needs_cann
@pytest.mark.parametrize("soc_name", ["Ascend910B", "Ascend310P"])
def test_our_tiling_against_canns_on_a_grid(soc_name, capsys):
    """Where our MultiCoreMatmulTiling and CANN's choose differently (base blocks, core split, depths,
    transLength), printed; the host calc never lets CANN refuse a shape that the emulator's tiling accepts, so
    nothing the emulator ships fails TilingFunc on the device."""
    soc = get_soc(soc_name)
    shapes = [(m, n, kk) for m in GRID_M for n, kk in GRID_NK]
    assert len(shapes) >= 200
    keys = ("baseM", "baseN", "baseK", "singleCoreM", "singleCoreN", "depthA1", "depthB1", "stepKa", "transLength")
    dtypes = (F16, F32) if soc_name == "Ascend310P" else (F16, TensorProto.BFLOAT16)
    for dtype in dtypes:
        k = _kernel(CASES["swiglu"](F16, 80), soc_name)  # the calc takes the dtype per shape
        cann = cann_tiling.cann_tilings(k.ir, k.files, soc, dtype, shapes)
        ours = cann_tiling.cann_tilings(k.ir, k.files, soc, dtype, shapes, own=True)
        differ = refused = 0
        lines = []
        for sh, c, o in zip(shapes, cann, ours):
            if isinstance(c, int) or isinstance(o, int):
                if c != o:
                    refused += 1
                    lines.append(f"  {sh}: CANN {'refused ' + str(c) if isinstance(c, int) else 'ok'}, ours "
                                 f"{'refused ' + str(o) if isinstance(o, int) else 'ok'}")
                assert not (isinstance(c, int) and not isinstance(o, int)), (sh, c, o)
                continue
            diff = {f: (c[f], o[f]) for f in keys if c[f] != o[f]}
            if diff:
                differ += 1
                if len(lines) < 12:
                    lines.append(f"  {sh}: " + ", ".join(f"{f} {a} vs {b}" for f, (a, b) in diff.items()))
        with capsys.disabled():
            print(f"\n{soc_name} {dtype}: {len(shapes)} shapes, CANN's tiling and ours differ at {differ}, "
                  f"refuse differently at {refused} (CANN vs ours):")
            print("\n".join(lines))
