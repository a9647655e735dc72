"""The pipeline runs each stage once, in the order the data flows: the model file is read once, every kernel is
rendered once (a re-match keeps the kernels it did not change), and the ship decision is one frozen value that the
report and the written package agree with."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import onnx
import pytest

import asc_onnx
import asc_onnx.package as package_mod
from asc_onnx.decide import KEPT, NO_KERNEL, REJECTED, SLOWER, Decision, Verdict

MODELS = Path(__file__).resolve().parent.parent / "models"


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    """gpt2_tiny_legacy fused with every rung, counting reads of its file and kernel renders. Its attention op (4
    heads of 8) is declined at the sweep's corners, so the run matches again once: the case where reads and renders
    could repeat."""
    model = MODELS / "gpt2_tiny_legacy.onnx"
    reads: list[str] = []
    rendered: list[object] = []
    real_load, real_render = onnx.load_model, package_mod.render

    def load(f, *a, **k):
        if sys._getframe(1).f_globals.get("__name__", "").startswith("asc_onnx."):  # (not the digest recorder's)
            reads.append(str(f))
        return real_load(f, *a, **k)

    def render(op, ir, soc, atc_mode="compat"):
        rendered.append(op)
        return real_render(op, ir, soc, atc_mode)

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(onnx, "load_model", load)
        mp.setattr(onnx, "load", load)
        mp.setattr(package_mod, "render", render)
        out = tmp_path_factory.mktemp("pipeline") / "o"
        res = asc_onnx.fuse(model, out)
    finally:
        mp.undo()
    return model, out, res, reads, rendered


def test_the_model_file_is_read_once(counted):
    model, _, res, reads, _ = counted
    assert res.validation is not None and res.validation.ok and res.deployed is not None and res.deployed.ok
    assert res.kernel_checks  # every rung ran: the kernel rung's captured inputs, the graph and deployed rungs
    assert sum(Path(r).resolve() == model.resolve() for r in reads) == 1, reads


def test_every_kernel_is_rendered_once(counted):
    _, _, res, _, rendered = counted
    assert res.decision is not None and res.decision.declined  # (the re-match happened)
    no_kernel = {v.op_type for v in res.decision.verdicts if v.status == NO_KERNEL}
    for op in res.ops:  # (the guard's own renders of an attention body's smaller fusions are other ops)
        assert sum(1 for r in rendered if r == op) == (0 if op.op_type in no_kernel else 1), op.op_type


def test_the_decision_is_frozen_and_the_output_agrees(counted):
    _, out, res, _, _ = counted
    d = res.decision
    assert isinstance(d, Decision)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.verdicts = ()  # type: ignore[misc]
    assert {v.op_type for v in d.verdicts} == {op.op_type for op in res.ops}
    assert all(isinstance(v, Verdict) for v in d.verdicts)
    assert all(v.reason for v in d.verdicts if v.status in (SLOWER, REJECTED, KEPT, NO_KERNEL))
    # the package holds exactly the shipped kernels, and the ATC model runs exactly those as custom ops
    assert {k.op.op_type for k in res.kernels} == d.shipped()
    atc = onnx.load(str(out / "model.atc.onnx"), load_external_data=False)
    assert {n.op_type for n in atc.graph.node if n.op_type.startswith("Asc")} == d.shipped()
    report = json.loads((out / "report.json").read_text())
    assert report["decision"] == json.loads(json.dumps(d.record()))
    # every declined region is named with why, and its op is gone from the final rewrite
    declined = [r for r in report["decision"] if r["status"] == "declined"]
    assert declined and all("not shipped" in r["reason"] for r in declined)
    assert "AscAttention" not in {op.op_type for op in res.ops}
