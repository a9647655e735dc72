"""The ship guard: every fused op is judged by the timing model at the judged shapes, and one it estimates slower
than the nodes it replaces (with every assumed constant at its slow end) goes back to those nodes in
``model.atc.onnx``, with a warning; ``--strict`` makes that exit 1 and ``--keep-slower`` ships it anyway. A
shipped op stays faster wherever its assumptions move within their ranges. The report carries both estimates, the
whole model's time by op type and a roofline chart."""

from __future__ import annotations

import json

import onnx
import pytest
from conftest import ROOT

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.cli import main
from asc_onnx.estimate import bindings, judge
from asc_onnx.hardware import FACTS, SHARED_ASSUMPTIONS, corner
from asc_onnx.soc import SOCS

MODELS = ROOT / "models"
LLAMA = MODELS / "llama_tiny_dynamo.onnx"
#: A fixture with ops of both kinds at the sweep's corners: its Add+LayerNorm (against ATC's own LayerNorm, at a
#: tiny model's few rows per core) is estimated slower than its nodes, its other ops faster.
GUARDED = MODELS / "bert_tiny_dynamo.onnx"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """bert_tiny_dynamo fused with the guard on (no emulation, no validation: the guard needs neither)."""
    out = tmp_path_factory.mktemp("guard") / "o"
    return out, main(["fuse", str(GUARDED), "-o", str(out), "--no-emulate", "--no-validate"])


def test_an_op_estimated_slower_goes_back_to_its_nodes(guarded, capsys):
    out, code = guarded
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    ops = {o["op_type"]: o for o in report["estimates"]["ops"]}
    slower = [t for t, o in ops.items() if o["judged_slower"]]
    shipped = [t for t, o in ops.items() if o["shipped"]]
    assert slower and shipped  # the fixture has both kinds at the sweep's corners
    atc = onnx.load(str(out / "model.atc.onnx"))
    types = {n.op_type for n in atc.graph.node}
    for t in slower:
        o = ops[t]
        assert not o["shipped"] and t not in types and "slower than its" in o["reason"]
        # both estimates at the shape it loses at, at the slow corner: fused is not below unfused
        assert any(e["fused_us"] >= e["unfused_us"] for e in o["slow_corner"] if not e["error"])
        assert t in {r["op_type"] for r in report["kernels"]["not_generated"]}
    for t in shipped:
        assert t in types
        assert all(e["fused_us"] < e["unfused_us"] for e in ops[t]["slow_corner"] if not e["error"])
    # the sweep: batch-like dims at 1 and 8, sequence-like dims at 128 and 2048
    sweep = bindings(onnx.load(str(GUARDED), load_external_data=False), {})
    assert [m["binding"] for m in report["estimates"]["model"]] == sweep and len(sweep) == 2


def test_the_guard_warns_strict_fails_and_keep_slower_ships(tmp_path, capsys):
    code = main(["fuse", str(GUARDED), "-o", str(tmp_path / "a"), "--no-emulate", "--no-validate"])
    err = capsys.readouterr().err
    assert code == 0 and "not shipped: the timing model estimates it slower" in err
    assert main(["fuse", str(GUARDED), "-o", str(tmp_path / "b"), "--no-emulate", "--no-validate", "--strict"]) == 1
    assert "estimated slower than the nodes they replace" in capsys.readouterr().err
    code = main(["fuse", str(GUARDED), "-o", str(tmp_path / "c"), "--no-emulate", "--no-validate", "--keep-slower"])
    err = capsys.readouterr().err
    assert code == 0 and "shipped anyway (--keep-slower)" in err
    report = json.loads((tmp_path / "c" / "report.json").read_text())
    assert all(o["shipped"] for o in report["estimates"]["ops"])
    kept = {n.op_type for n in onnx.load(str(tmp_path / "c" / "model.atc.onnx")).graph.node}
    assert all(o["op_type"] in kept for o in report["estimates"]["ops"])


@pytest.mark.fast
def test_the_users_shapes_are_the_only_judged_shapes():
    model = onnx.load(str(LLAMA), load_external_data=False)
    assert bindings(model, {"input_ids": (3, 8)}) == [{"batch": 3}]
    assert bindings(model, {}) == [{"batch": 1}, {"batch": 8}]


def test_the_report_shows_the_model_split_and_a_roofline(guarded):
    out, _ = guarded
    report = json.loads((out / "report.json").read_text())
    for m in report["estimates"]["model"]:
        assert m["unfused_us"] == pytest.approx(sum(m["unfused_by_op_type"].values()))
        assert m["fused_us"] == pytest.approx(sum(m["fused_by_op_type"].values()))
        assert m["fused_us"] < m["unfused_us"]  # what shipped is faster, so the model is
    page = (out / "report.html").read_text()
    assert 'aria-label="roofline"' in page and 'aria-label="time by op type"' in page
    assert "timing model" in page and "estimate" in page


def _one_at_a_time(soc: str) -> list[dict[str, float]]:
    """Every assumed constant of ``soc`` at each end of its range, the others at the table's values."""
    out = []
    names = {n for n, f in FACTS[soc].items() if f.assumed} | set(SHARED_ASSUMPTIONS)
    for n in sorted(names):
        f = FACTS[soc].get(n) or FACTS["Ascend910B"][n]
        out += [{n: f.assumed[0]}, {n: f.assumed[1]}]
    return out


@pytest.mark.parametrize("soc", sorted(SOCS))
def test_no_assumption_within_its_range_makes_a_shipped_op_slower(soc):
    """The decision is made at the slow corner; an op shipped there is faster at the fast corner, at the table's
    values and with each assumption alone at either end of its range: no ship decision flips."""
    checked = 0
    for name in ("llama_tiny_dynamo", "cnn_silu_dynamo"):
        res = asc_onnx.fuse(MODELS / f"{name}.onnx", options=FuseOptions(judge=False, emulate=False, soc=soc),
                            validate=False)
        model = onnx.load(str(MODELS / f"{name}.onnx"), load_external_data=False)
        decided = judge(res.kernels, model, {}, SOCS[soc])
        shipped = [k for k, j in zip(res.kernels, decided) if j.ship]
        checked += len(shipped)
        for overrides in [corner(soc, slow=False), *_one_at_a_time(soc)]:
            for j in judge(shipped, model, {}, SOCS[soc], overrides):
                assert all(e.faster for e in j.estimates if e.error is None), (name, j.op_type, overrides)
    assert checked >= 1
