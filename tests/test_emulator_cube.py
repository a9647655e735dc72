"""The emulator's basic cube API (LoadData, Mmad, Fixpipe on a cube core's MTE1, M and FIX pipes) and its rules.

``tests/cpp/emu_cube.cpp`` computes a small C = A x B^T the way Huawei's basic-API matmul sample does (ND2NZ into
L1, img2col into L0A, fractal loads into L0B, two K steps of Mmad, Fixpipe with NZ2ND and F322F16 to GM) and checks
C against a double reference; each rule has a scenario that breaks it (the fault names both operations) and one
that obeys it. The layouts and the unit-flag handshake follow dav_c220 and the Mmad/Fixpipe pages in
``asc-devkit/docs``."""

from __future__ import annotations

import pytest
from conftest import ARCHES, cpp_scenarios


@pytest.fixture(scope="module")
def cube(tmp_path_factory):
    return cpp_scenarios(tmp_path_factory.mktemp("cube"), "emu_cube")


# scenario that breaks a rule -> (what the fault says, the scenario that obeys it, the SoCs it concerns)
RULES = {
    # MTE1 reads what MTE2 wrote into L1 only after an MTE2_MTE1 flag
    "no_mte2_mte1": (["read after write", "on L1", "LoadData L1->L0A (3Dv2) (MTE1", "DataCopy GM->L1 (ND2NZ) (MTE2"],
                     "ok", ARCHES),
    # the cube reads L0A only after MTE1_M
    "no_mte1_m": (["read after write", "on L0A", "Mmad (M", "LoadData L1->L0A (3Dv2) (MTE1"], "ok", ARCHES),
    # MTE1 refills L0A only after the Mmad reading it released it (M_MTE1)
    "no_m_mte1": (["write after read", "on L0A", "LoadData L1->L0A (3Dv2) (MTE1", "Mmad (M"], "ok", ARCHES),
    # an L0A tensor fits L0A's 64 KB
    "l0a_past": (["ends past the 65536-byte L0A Buffer"], "l0c_fits", ARCHES),
    # the fixpipe reads L0C after the Mmads: unit flags or an M_FIX flag
    "no_unitflag": (["read after write", "on L0C", "Fixpipe L0C->GM (FIX", "Mmad (M"], "no_unitflag_m_fix_flag",
                    {"Ascend910B": "2201"}),
    # the next block's Mmad overwrites L0C only after the Fixpipe read it: unit flags or a FIX_M flag
    "two_blocks_no_unitflag_m_fix_flag": (["write after read", "on L0C", "Mmad (M", "Fixpipe L0C->GM (FIX"],
                                          "two_blocks_no_unitflag_m_fix_flag_fix_m_flag", {"Ascend910B": "2201"}),
    # a unit-flagged Fixpipe needs a unit-flagged Mmad (3) before it
    "unitflag_fixpipe_only": (["Fixpipe with unitFlag 3", "no Mmad with unitFlag 3"], "two_blocks",
                              {"Ascend910B": "2201"}),
    # C starts 1024-byte aligned in L0C (kernel_operator_mm_check.h)
    "mmad_unaligned": (["Mmad: C must start 1024-byte aligned"], "ok", {"Ascend910B": "2201"}),
    # a half destination takes F322F16, not F322BF16 (mm_check.h); a Fixpipe may read part of C's rows with unit
    # flags, clearing only the units it reads
    "quant_mismatch": (["type pair and quantPre are not emulated"], "split_m", {"Ascend910B": "2201"}),
    # 910B's vector cores have no cube unit
    "cube_on_aiv": (["on a vector core (AIV)", "no cube unit"], "ok", {"Ascend910B": "2201"}),
    # 310P has no fixpipe to GM (dav_m200 reports it unsupported)
    "fixpipe": (["not emulated on Ascend310P", "dav_m200"], "ok", {"Ascend310P": "2002"}),
}


@pytest.mark.parametrize("scenario", sorted(RULES))
def test_cube_rule_fires_and_obeying_kernel_passes(cube, scenario):
    words, obeying, socs = RULES[scenario]
    for soc in socs:
        out = cube(soc, scenario)
        assert out.startswith("FAULT"), (soc, out)
        for w in words:
            assert w in out, (soc, out)
        assert cube(soc, obeying) == f"OK {soc}", soc


@pytest.mark.parametrize("soc", sorted(ARCHES))
def test_basic_api_matmul_computes_c(cube, soc):
    """ND2NZ -> img2col/fractal loads -> two accumulating Mmads -> Fixpipe NZ2ND (910B) or L0C read (310P): C
    within fp16's 2^-10 of a double reference (relative to sum |a b|), M not a multiple of 16."""
    assert cube(soc, "ok") == f"OK {soc}"
    if soc == "Ascend910B":
        assert cube(soc, "two_blocks") == f"OK {soc}"  # unit flags order M and FIX both ways
