"""The deployed check on quantized models: the reference amplifies a kernel's rounding (a last-bit difference moves a
quantized value by a step), so an output is judged within its tolerance plus the reference's own spread when each
fused op's output moves within its kernel's tolerance; the verdict does not depend on the seed, and each fused node
is compared with its function body on the values it received, so a kernel that is really wrong still fails."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import asc_onnx
import asc_onnx.verify_deployed as vd
from asc_onnx import FuseOptions
from asc_onnx.dtypes import onnx_type
from asc_onnx.soc import get_soc
from asc_onnx.validate import TOLERANCES

MODELS = Path(__file__).resolve().parent.parent / "models"
QUANTIZED = ["bert_quant_dynamic", "bert_quant_qdq"]


@pytest.fixture(scope="module", params=QUANTIZED)
def fused(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "o"
    path = MODELS / f"{request.param}.onnx"
    res = asc_onnx.fuse(path, out, FuseOptions(judge=False))
    assert res.kernels and res.deployed is not None
    return path, out, res


def _check(fused, seed: int):
    path, out, res = fused
    return vd.verify_deployed(path, out / "model.atc.onnx", res.kernels, get_soc("Ascend910B"),
                              res.report["atc"]["renamed_inputs"], None, seed, 4)


def test_the_quantized_blocks_pass_at_five_seeds(fused):
    for seed in range(5):
        rep = _check(fused, seed)
        assert rep.ok, (seed, rep.why())
        assert rep.node_error is None


def _planted(monkeypatch, wrong):
    """Every emulated kernel's outputs made wrong by ``wrong(y)``."""
    real = vd.run

    def run(*args, **kwargs):
        res = real(*args, **kwargs)
        return dataclasses.replace(res, outputs=tuple(wrong(y) for y in res.outputs))

    monkeypatch.setattr(vd, "run", run)


def test_a_kernel_off_by_1e3_relative_everywhere_fails(fused, monkeypatch):
    _planted(monkeypatch, lambda y: (y.astype(np.float64) * (1 + 1e-3)).astype(y.dtype))
    rep = _check(fused, 0)
    assert not rep.ok and rep.node_error is not None and "off its function body" in rep.why()


def test_a_kernel_off_by_ten_tolerances_at_one_element_fails(fused, monkeypatch):
    def one(y):
        rtol, atol = TOLERANCES[onnx_type(y)]
        z = y.copy().reshape(-1)
        z[z.size // 2] += 10 * (atol + rtol * abs(float(z[z.size // 2])))
        return z.reshape(y.shape)

    _planted(monkeypatch, one)
    rep = _check(fused, 0)
    assert not rep.ok and rep.node_error is not None


def test_the_spread_is_what_moves_within_tolerance_do(fused):
    """The spread is the kernels' tolerance carried through the model (amplified by the quantizers it passes): far
    below what a kernel off by 1e-3 relative moves the output by."""
    path, out, res = fused
    import onnx

    atc = onnx.load(str(out / "model.atc.onnx"))
    runnable, _ = vd._bodies_as_functions(atc, res.kernels)
    feeds = vd.make_inputs(onnx.load(str(path), load_external_data=False), None, 0, 4)
    name = atc.graph.output[0].name
    spread = vd._spread(runnable, res.kernels, feeds, get_soc("Ascend910B"), [name], {})[name]
    ref = vd.ort_run(path, feeds)[name]
    assert spread.shape == ref.shape and np.isfinite(spread).all() and spread.min() >= 0
    assert spread.max() < 1e-3 * np.abs(ref).max()  # what a kernel off by 1e-3 relative would move it by


def test_a_kernel_at_the_edge_of_its_tolerance_passes_by_the_spread(fused, monkeypatch):
    """Every kernel's output moved to 0.9 of its tolerance (still within it): the quantized model amplifies that
    beyond the outputs' own tolerance, and the reference's spread, which moves as far, accounts for it."""
    rng = np.random.default_rng(7)

    def edge(y):
        rtol, atol = TOLERANCES[onnx_type(y)]
        y64 = y.astype(np.float64)
        return (y64 + 0.9 * rng.choice((-1.0, 1.0), size=y.shape) * (atol + rtol * np.abs(y64))).astype(y.dtype)

    _planted(monkeypatch, edge)
    rep = _check(fused, 0)
    assert rep.node_error is None and rep.ok, rep.why()
    if fused[0].stem == "bert_quant_dynamic":  # beyond the output's own tolerance there: the spread decided
        assert rep.amplified is not None and "amplifies" in rep.amplified
