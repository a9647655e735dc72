"""Pointwise kernels at the sizes real models have, on both SoCs: biases of hidden 768 to 11008 (a
period longer than one tile goes to chunk mode), RoPE with [1,1,S,128] tables up to S=2048, Where
chains that fill the unified buffer (Select's reserved scratch), five full inputs (merged queues),
one element and 10,000,023 elements."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import F16, F32, MODELS, const, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.soc import SOCS
from asc_onnx.verify_kernels import check, random_inputs


def _kernel(source, rule: str, soc: str):
    # BiasGELU after a MatMul: the LinearGELU rule would take the whole chain
    skip = frozenset({"LinearGELU"}) if rule == "BiasGELU" else frozenset()
    res = asc_onnx.fuse(source, options=FuseOptions(judge=False, soc=soc, emulate=False, skip=skip), validate=False)
    return next(k for k in res.kernels if k.op.rule == rule)


def _ok(c):
    assert c.ok, f"{c.op_type} {c.shape} {c.dtype}: max abs {c.max_abs} {c.error or ''}"
    return c


@pytest.mark.parametrize("soc", sorted(SOCS))
@pytest.mark.parametrize("hidden,dtype", [(768, F32), (3072, F32), (4096, F32), (11008, F16)])
def test_bias_gelu_at_model_hidden_sizes(soc, hidden, dtype):
    k = _kernel(MODELS / "bert_tiny_legacy.onnx", "BiasGELU", soc)
    rows = 64
    c = _ok(check(k, random_inputs(k, dtype, (rows, hidden), broadcast_shapes=[(hidden,)]), SOCS[soc], "hidden"))
    # x read once, y written once, the bias once per core and chunk: within 5% of the minimum
    itemsize = 4 if dtype == F32 else 2
    compulsory = (2 * rows * hidden + hidden) * itemsize
    assert c.gm_bytes <= 1.05 * compulsory + c.block_dim * hidden * itemsize


@pytest.mark.parametrize("soc", sorted(SOCS))
@pytest.mark.parametrize("shape", [(1, 8, 512, 128), (1, 32, 2048, 128)])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_rope_with_long_tables(soc, shape, dtype):
    k = _kernel(MODELS / "llama_tiny_dynamo.onnx", "ElementwiseChain", soc)
    table = (1, 1, shape[2], shape[3])
    _ok(check(k, random_inputs(k, dtype, shape, broadcast_shapes=[table, table]), SOCS[soc], "rope"))


def _where_chain(dtype: int):
    np_t = np.float32 if dtype == F32 else np.float16
    nodes = [helper.make_node("Less", ["x", "z"], ["c"]), helper.make_node("Mul", ["x", "k"], ["m"]),
             helper.make_node("Where", ["c", "m", "x"], ["y"])]
    return model(nodes, [("x", dtype, [64, 3000])], [("y", dtype, [64, 3000])],
                 [const("z", 0.0, np_t), const("k", 0.1, np_t)])


@pytest.mark.parametrize("soc", sorted(SOCS))
@pytest.mark.parametrize("dtype", [F32, F16])
def test_where_chain_filling_the_unified_buffer(soc, dtype):
    k = _kernel(_where_chain(dtype), "ElementwiseChain", soc)
    assert k.ir.uses_select and "RESERVED_SIZE_8K" in k.files[f"op_host/{k.ir.snake}.cpp"]
    c = _ok(check(k, random_inputs(k, dtype, (64, 3000)), SOCS[soc], "where"))
    assert c.block_dim >= 1


def test_five_full_inputs_share_one_queue():
    names = [f"a{i}" for i in range(5)]
    nodes = [helper.make_node("Add", ["a0", "a1"], ["s1"]), helper.make_node("Mul", ["s1", "a2"], ["s2"]),
             helper.make_node("Sub", ["s2", "a3"], ["s3"]), helper.make_node("Div", ["s3", "a4"], ["y"])]
    m = model(nodes, [(n, F32, [300, 1000]) for n in names], [("y", F32, [300, 1000])])
    for soc in SOCS:
        k = _kernel(m, "ElementwiseChain", soc)
        src = k.files[f"op_kernel/{k.ir.snake}.cpp"]
        assert "inQueueX;" in src and "inQueueA0" not in src  # 5 x 2 buffers would exceed 8 event IDs
        inputs = random_inputs(k, F32, (300, 1000))
        inputs[4] = np.abs(inputs[4]) + np.float32(0.5)
        _ok(check(k, inputs, SOCS[soc], "five"))


@pytest.mark.parametrize("soc", sorted(SOCS))
@pytest.mark.parametrize("n", [1, 10_000_023])
def test_silu_at_one_and_ten_million_elements(soc, n):
    k = _kernel(MODELS / "cnn_silu_dynamo.onnx", "SiLU", soc)
    c = _ok(check(k, random_inputs(k, F32, (n,)), SOCS[soc], "size"))
    # every byte read and written once; 310P's ragged tail re-reads and re-writes one 32-byte window
    assert 8 * n <= c.gm_bytes <= 8 * n + (0 if soc == "Ascend910B" else 128 + 64)
