"""A ``__mix__(1, 2)`` launch and its cross-core flags (``emu_mix.h``).

``tests/cpp/emu_mix.cpp`` runs two AI Cores: each AIC computes C = A x B^T with the basic cube API into GM and sets
flag 8 in mode 2 after its Fixpipe; each AIV waits for it, doubles its half of C and writes Y, which the obeying
scenario checks against a double reference. The other scenarios break one rule of CrossCoreSetFlag(ISASI).md /
关键特性说明.md and the emulator must say which."""

from __future__ import annotations

import pytest
from conftest import cpp_scenarios


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    return cpp_scenarios(tmp_path_factory.mktemp("mix"), "emu_mix")


# scenario -> what the fault says
RULES = {
    # an AIV reads C the AIC wrote with no flag between: nothing orders the two cores
    "no_wait": ["AIV 0 of AI Core 0", "reads bytes of 'c'", "the AIC of AI Core 0", "nor a CrossCoreSetFlag"],
    # a flag set before the Fixpipe covers nothing the Fixpipe writes
    "flag_before_write": ["reads bytes of 'c'", "the AIC of AI Core 0"],
    # a wait nobody answers: the chip hangs
    "no_set": ["CrossCoreWaitFlag(8)", "waits forever"],
    "wrong_id": ["CrossCoreWaitFlag(9)", "waits forever"],
    "mode0": ["mode 0", "not emulated"],
    "pipe_s": ["PIPE_S and PIPE_ALL are not supported"],
    # an AIV_ONLY kernel has no cross-core scheduler
    "aiv_only": ["outside a __mix__(1, 2) launch", "does not start the scheduler"],
    # the AIC has no vector unit
    "vector_on_aic": ["Muls", "on a cube core (AIC): it has no vector unit"],
}


@pytest.mark.parametrize("scenario", sorted(RULES))
def test_cross_core_rule_fires(mix, scenario):
    out = mix("Ascend910B", scenario)
    assert out.startswith("FAULT"), out
    for w in RULES[scenario]:
        assert w in out, out


def test_mix_launch_computes_and_times_the_three_cores(mix):
    """C through the cube, GELU-like epilogue on the AIVs after the flag: Y = 2 A B^T within 1e-4; the kernel's
    time is the AIVs' (they wait for the AIC's Fixpipe), and both kinds of pipe are busy."""
    import json

    out = mix("Ascend910B", "ok")
    assert out.startswith("OK "), out
    t = json.loads(out[3:])
    assert t["blocks"] == 6  # two AI Cores, each an AIC and two AIVs
    assert t["busy"]["M"] > 0 and t["busy"]["FIX"] > 0 and t["busy"]["V"] > 0 and t["busy"]["MTE3"] > 0
    assert t["cycles"] > t["busy"]["FIX"] + t["busy"]["MTE3"]


def test_cross_core_flags_are_not_on_310p(mix):
    out = mix("Ascend310P", "aiv_only")
    assert out.startswith("FAULT") and "not on 310P" in out, out
