"""The hardware constants table: every figure has a source; those from the open Ascend sources beside the repository
are found there verbatim; the assumptions carry ranges that hold their value; derived figures agree with each other;
and the SoC objects and benchmarks read their numbers from this one table."""

from __future__ import annotations

import math

import pytest
from conftest import ROOT

from asc_onnx.hardware import CHIPS, FACTS, assumptions, fact
from asc_onnx.soc import SOCS

pytestmark = pytest.mark.fast  # (no g++, no emulator run: tests/conftest.py)

WORK = ROOT.parent  # the folder that holds the repository and shared/


def test_every_fact_has_a_unit_and_a_source():
    for soc, table in FACTS.items():
        for name, f in table.items():
            assert f.unit and f.source and f.value > 0, (soc, name)
            if f.source == "none published" or f.source.startswith("none published"):
                assert f.assumed is not None, f"{soc}.{name}: an unpublished figure needs a range"


def test_every_range_holds_its_value():
    assert assumptions()
    for soc, name, f in assumptions():
        lo, hi = f.assumed
        assert lo <= f.value <= hi and lo > 0, (soc, name)


@pytest.mark.skipif(not (WORK / "shared" / "ascend").is_dir(), reason="the open Ascend sources are not beside the repo")
def test_quoted_facts_are_in_their_sources():
    """A quote is the source's own phrase: if a document changes, the table must be looked at again."""
    checked = 0
    tables = [*FACTS.items(), *((c.name, c.facts) for c in CHIPS.values())]
    for soc, table in tables:
        for name, f in table.items():
            if not f.quote:
                continue
            path = WORK / f.source
            assert path.is_file(), f"{soc}.{name}: {f.source} is missing"
            assert f.quote in path.read_text(errors="replace"), f"{soc}.{name}: {f.quote!r} not in {f.source}"
            checked += 1
    assert checked >= 6


def test_derived_figures_agree():
    a2 = "Ascend910B"
    # The cube peak is 24 cores x one 16x16x16 fp16 fractal per cycle x 2 FLOP per MAC at the clock.
    assert math.isclose(fact(a2, "cube_cores") * 16**3 * 2 * fact(a2, "clock"), fact(a2, "cube_fp16_flops"),
                        rel_tol=1e-3)
    # The vector peak is one 256-byte repeat (128 fp16 lanes) per cycle on each of 48 vector cores.
    lanes = fact(a2, "vector_repeat_bytes") / 2
    assert math.isclose(fact(a2, "vector_cores") * lanes * fact(a2, "clock"), fact(a2, "vector_fp16_elems"),
                        rel_tol=1e-3)
    assert fact(a2, "vector_cores") == 2 * fact(a2, "cube_cores")


def test_socs_and_benchmarks_read_the_table():

    for name, soc in SOCS.items():
        assert soc.gm_bandwidth == fact(name, "gm_bandwidth")
    assert SOCS["Ascend910B"].vector_cores == fact("Ascend910B", "vector_cores")
    assert SOCS["Ascend310P"].vector_cores == fact("Ascend310P", "ai_cores")
    assert SOCS["Ascend310P"].ub_bytes == fact("Ascend310P", "ub_bytes")
    # the benchmarks print the timing model's estimates, not formulas of their own
    for script in sorted((ROOT / "bench").glob("bench_*.py")):
        text = script.read_text()
        assert "time_us" not in text and "LAUNCH_US" not in text and "CLOCK" not in text, script.name
    assert "estimate_at" in (ROOT / "bench" / "bench_kernels.py").read_text()
