"""Seeded random elementwise chains with comparisons and Where (the graphs a fuzzer once found emulated
wrong by more than 1.0): each fuses into one op whose kernel matches onnxruntime on both SoCs.

Each graph draws 3-7 ops over two full inputs and a bias, from arithmetic, Relu/Abs/Sigmoid/Tanh and
Less/Greater + Where, so masks die at their Select while values of other kinds are live around them."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import F16, F32, const, fuse_and_prebuild, fused, model
from onnx import helper

from asc_onnx import FuseOptions
from asc_onnx.soc import SOCS
from asc_onnx.verify_kernels import check, random_inputs

BINARY = ["Add", "Sub", "Mul", "Max", "Min"]
UNARY = ["Relu", "Abs", "Sigmoid", "Tanh"]


def _graph(seed: int, dtype: int):
    rng = np.random.default_rng(seed)
    np_t = np.float32 if dtype == F32 else np.float16
    values, nodes, k = ["a", "b"], [], 0
    for _ in range(int(rng.integers(3, 8))):
        kind = rng.choice(["binary", "unary", "where", "bias"])
        x = str(rng.choice(values))
        out = f"t{k}"
        k += 1
        if kind == "binary":
            nodes.append(helper.make_node(str(rng.choice(BINARY)), [x, str(rng.choice(values))], [out]))
        elif kind == "unary":
            nodes.append(helper.make_node(str(rng.choice(UNARY)), [x], [out]))
        elif kind == "bias":
            nodes.append(helper.make_node("Add", [x, "bias"], [out]))
        else:
            y = str(rng.choice(values))
            nodes.append(helper.make_node(str(rng.choice(["Less", "Greater"])), [x, y], [f"c{k}"]))
            nodes.append(helper.make_node("Where", [f"c{k}", y, x], [out]))
        values.append(out)
    nodes.append(helper.make_node("Identity", [values[-1]], ["y"]))
    shape = [8, 96]
    return model(nodes, [("a", dtype, shape), ("b", dtype, shape)], [("y", dtype, shape)],
                 [const("bias", np.linspace(-1, 1, 96), np_t)])


SEEDS = range(8)
DTYPES = {"fp32": F32, "fp16": F16}


def _soc(seed: int) -> str:
    return sorted(SOCS)[seed % 2]  # alternate the SoCs: every draw is a fresh kernel


@pytest.fixture(scope="module")
def chains():
    """Every draw fused once, its kernels compiled in shared batches (conftest.fuse_and_prebuild)."""
    models = {(seed, dtype): (_graph(seed, dtype), FuseOptions(judge=False, emulate=False, soc=_soc(seed)))
              for seed in SEEDS for dtype in DTYPES.values()}
    return fuse_and_prebuild(models, lambda key, _: [(key[1], _soc(key[0]))])


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("seed", SEEDS)
def test_random_where_chain_matches_onnxruntime(seed, dtype, chains):
    soc = _soc(seed)
    res = fused(chains, (seed, dtype))
    if not res.kernels:
        pytest.skip("this draw fused nothing a kernel serves")
    for k in res.kernels:
        c = check(k, random_inputs(k, dtype, (64, 96), seed=seed), SOCS[soc], "fuzz")
        assert c.ok, f"seed {seed} {soc}: {c.error or c.max_abs}"
