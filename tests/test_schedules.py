"""Schedules are data: every kernel IR carries the schedule it is rendered with, two schedules of one op are two
IRs, and each class's traffic model (Python, beside its schedule) predicts the GM bytes the emulated kernel moves.

The model is held to the emulator exactly on 910B (byte-exact copies): the row class's whole-row/split decision and
its bytes over row lengths on both sides of the unified buffer, with resident and streamed masks, under both
buffering policies; the pointwise class's with broadcast inputs; the matmul class's under its tiling."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
from conftest import F16, F32, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.api import _load_kernels
from asc_onnx.emulator.harness import prebuild
from asc_onnx.kernels import of
from asc_onnx.kernels.row.schedule import RowSchedule, plan
from asc_onnx.kernels.schedule import VectorSchedule
from asc_onnx.kernels.skeleton import tiling_ub_bytes
from asc_onnx.package import render
from asc_onnx.soc import SOCS
from asc_onnx.verify_kernels import check, np_type, random_inputs

NODE = helper.make_node
B910 = SOCS["Ascend910B"]


def _rmsnorm(dtype: int):
    """x / sqrt(mean(x^2) + eps) * w over rows of a dynamic length: one kernel for every row length."""
    nodes = [NODE("Mul", ["x", "x"], ["sq"]), NODE("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             NODE("Add", ["ms", "eps"], ["e"]), NODE("Sqrt", ["e"], ["r"]), NODE("Div", ["x", "r"], ["n"]),
             NODE("Mul", ["n", "w"], ["y"])]
    eps = helper.make_tensor("eps", dtype, [], [1e-6])
    return model(nodes, [("x", dtype, ["n", "d"]), ("w", dtype, ["d"])], [("y", dtype, ["n", "d"])], [eps])


def _masked_softmax():
    """softmax(x * s + mask) with a mask shared by the heads: [1, 1, S, S] against [1, H, S, S]."""
    nodes = [NODE("Mul", ["x", "s"], ["xs"]), NODE("Add", ["xs", "mask"], ["a"]),
             NODE("Softmax", ["a"], ["y"], axis=-1)]
    s = helper.make_tensor("s", F32, [], [0.125])
    return model(nodes, [("x", F32, [1, "h", "q", "k"]), ("mask", F32, [1, 1, "q", "k"])],
                 [("y", F32, [1, "h", "q", "k"])], [s])


def _kernel(m):
    res = asc_onnx.fuse(m, options=FuseOptions(judge=False, emulate=False), validate=False)
    (k,) = res.kernels
    return k


def _variants(k):
    return [render(k.op, dataclasses.replace(k.ir, schedule=s), B910) for s in of(k).schedule.VARIANTS.values()]


def _inputs(k, shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [np.asarray(rng.standard_normal(s), np.float32).astype(np_type(k.ir.dtypes[0])) for s in shapes]


@pytest.mark.fast
def test_an_ir_carries_its_schedule_and_the_renderer_prints_it():
    k = _kernel(_rmsnorm(F16))
    assert k.ir.schedule == RowSchedule()
    single = render(k.op, dataclasses.replace(k.ir, schedule=RowSchedule(buffer_num=1)), B910)
    kernel = next(t for p, t in single.files.items() if p.startswith("op_kernel/") and p.endswith(".cpp"))
    calc = next(t for p, t in single.files.items() if p.endswith("_tiling_calc.h"))
    assert "constexpr int32_t BUFFER_NUM = 1;  // single buffering" in kernel
    # the host tries the bufferings from the schedule's down: single only, or double, inputs-only, single
    first = re.compile(r"static constexpr uint64_t firstOption = (\d);")
    assert first.search(calc)[1] == "2" and first.search(
        next(t for p, t in k.files.items() if p.endswith("_tiling_calc.h")))[1] == "0"
    with pytest.raises(ValueError, match="buffer_num must be 1 or 2"):
        VectorSchedule(buffer_num=3)


@pytest.mark.fast
def test_a_written_package_is_reloaded_with_the_schedule_it_was_rendered_with(tmp_path):
    out = tmp_path / "out"
    asc_onnx.fuse(_rmsnorm(F32), out, options=FuseOptions(judge=False, emulate=False), validate=False)
    report = json.loads((out / "report.json").read_text())
    (entry,) = report["kernels"]["generated"]
    assert entry["schedule"] == {"buffer_num": 2, "min_core_bytes": 16384, "resident_share": 3}
    entry["schedule"]["buffer_num"] = 1
    (out / "report.json").write_text(json.dumps(report))
    _, (k,) = _load_kernels(out)
    assert k.ir.schedule == RowSchedule(buffer_num=1)


#: (rows, row length) on both sides of 910B's unified buffer for fp16 and fp32 RMSNorm under either buffering.
ROW_SHAPES = [(6, 1000), (3, 8192), (2, 12000), (2, 30000)]


@pytest.mark.parametrize("dtype", [F16, F32])
def test_row_traffic_model_is_the_emulated_kernels(dtype):
    k = _kernel(_rmsnorm(dtype))
    ks = _variants(k)
    prebuild([(v.ir, v.files, f"{v.op.op_type}TilingData", dtype, B910) for v in ks])
    modes = set()
    for v in ks:
        for rows, d in ROW_SHAPES:
            inputs = _inputs(v, [(rows, d), (d,)])
            c = check(v, inputs, B910, f"{rows}x{d}")
            assert c.ok, c
            p = plan(v.ir, [a.shape for a in inputs], inputs[0].itemsize, B910.ub_bytes, B910.vector_cores)
            modes.add((v.ir.schedule.buffer_num, d, p.mode))
            assert c.tile_length == (0 if p.chunk else p.tile_rows), (v.ir.schedule, rows, d, p)
            assert c.block_dim == p.block_dim
            model_bytes = of(v).schedule.traffic(v.ir, [a.shape for a in inputs], inputs[0].itemsize, B910)
            assert model_bytes == c.gm_bytes, (v.ir.schedule, rows, d, p)
    if dtype == F16:  # an fp16 row of 8192 fits whole under either schedule (double: its inputs only), 12000 not
        assert {(2, 8192, "whole"), (1, 8192, "whole"), (2, 12000, "split"), (1, 12000, "split")} <= modes


def test_row_traffic_model_with_resident_and_streamed_masks():
    k = _kernel(_masked_softmax())
    resident, grouped = set(), set()
    for v in _variants(k):
        for h, q, kk in [(4, 16, 64), (2, 8, 5000), (8, 128, 128), (2, 2, 16384)]:
            inputs = _inputs(v, [(1, h, q, kk), (1, 1, q, kk)])
            c = check(v, inputs, B910, f"{h}x{q}x{kk}")
            assert c.ok, c
            p = plan(v.ir, [a.shape for a in inputs], 4, tiling_ub_bytes(v.ir, B910), B910.vector_cores)
            assert of(v).schedule.traffic(v.ir, [a.shape for a in inputs], 4, B910) == c.gm_bytes, (h, q, kk, p)
            resident.add(p.resident)
            grouped.add(bool(p.group))
    # the mask loaded once per core, a core's slice of it under every head (grouped), and streamed row by row
    assert resident == {(True,), (False,)} and grouped == {True, False}


def test_pointwise_traffic_model_is_the_emulated_kernels():
    m = model([NODE("Mul", ["x", "b"], ["a"]), NODE("Sigmoid", ["a"], ["s"]), NODE("Add", ["s", "c"], ["y"])],
              [("x", F32, ["n", 512]), ("b", F32, [512]), ("c", F32, [1, 512])], [("y", F32, ["n", 512])])
    k = _kernel(m)
    for v in _variants(k):
        for n in (3, 700):
            shapes = {"full": (n, 512)}
            inputs = _inputs(v, [shapes.get(x.kind) or (512,) for x in v.ir.inputs])
            c = check(v, inputs, B910, str(n))
            assert c.ok, c
            assert of(v).schedule.traffic(v.ir, [a.shape for a in inputs], 4, B910, c.block_dim) == c.gm_bytes


def _silu_linear(m: int, kk: int, n: int):
    w1 = helper.make_tensor("w1", F16, [kk, n], [0.01] * (kk * n))
    return model([NODE("MatMul", ["x", "w1"], ["g"]), NODE("Sigmoid", ["g"], ["s"]), NODE("Mul", ["g", "s"], ["y"])],
                 [("x", F16, [m, kk])], [("y", F16, [m, n])], [w1]), [(m, kk), (kk, n)]


def _swiglu(m: int, kk: int, n: int):
    w1 = helper.make_tensor("w1", F16, [kk, n], [0.01] * (kk * n))
    w3 = helper.make_tensor("w3", F16, [kk, n], [0.02] * (kk * n))
    nodes = [NODE("MatMul", ["x", "w1"], ["g"]), NODE("Sigmoid", ["g"], ["s"]), NODE("Mul", ["g", "s"], ["a"]),
             NODE("MatMul", ["x", "w3"], ["u"]), NODE("Mul", ["a", "u"], ["y"])]
    return model(nodes, [("x", F16, [m, kk])], [("y", F16, [m, n])], [w1, w3]), [(m, kk), (kk, n), (kk, n)]


@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend310P"])
def test_matmul_traffic_model_is_the_emulated_kernels(soc):
    """The block loop's bytes under the tiling each run used, with one block per core and with several."""
    blocks = set()
    for g, shapes in [_silu_linear(24, 64, 96), _swiglu(256, 128, 512)]:
        res = asc_onnx.fuse(g, options=FuseOptions(judge=False, emulate=False, soc=soc), validate=False)
        (k,) = res.kernels
        assert of(k).cube
        for s in of(k).schedule.VARIANTS.values():
            v = render(k.op, dataclasses.replace(k.ir, schedule=s), SOCS[soc])
            inputs = random_inputs(v, F16, (shapes[0][0], shapes[1][1]))  # weights scaled as trained layers are
            assert [a.shape for a in inputs] == shapes
            c = check(v, inputs, SOCS[soc], str(shapes), core_num=4)  # few cores: several blocks each
            assert c.ok, c
            assert of(v).schedule.traffic(v.ir, shapes, 2, SOCS[soc], c.block_dim, c.cube) == c.gm_bytes
            blocks.add(-(-c.cube["singleCoreN"] // c.cube["baseN"]) * -(-c.cube["singleCoreM"] // c.cube["baseM"]))
    assert len(blocks) > 1 and 1 in blocks, blocks


def _attention_inputs(k, shapes, rng):
    """q, k, v (unit variance) and the additive mask (0, with large negatives past three quarters of the keys)."""
    out = [rng.standard_normal(s).astype(np.float16) for s in shapes[:3]]
    if k.ir.has_mask:
        mask = np.zeros(shapes[3], np.float16)
        mask[..., (3 * shapes[3][-1]) // 4:] = -1e4
        out.append(mask)
    return out


@pytest.mark.parametrize("b, h, sq, sk, mask_rows", [
    (1, 2, 64, 64, "per row"),      # one KV block, one base block of each product
    (1, 2, 16, 2048, "per row"),    # the keys in parts, KV blocks of 1024 (512 under the variant) in chunks of 8
    (2, 2, 1, 4096, "broadcast"),   # decode: eight parts a head, combined after the barrier
    (1, 1, 256, 640, "broadcast"),  # a KV block of 640 (or 512 and 128), products of several base blocks
])
def test_attention_traffic_model_is_the_emulated_kernels(b, h, sq, sk, mask_rows):
    """The flash loop's bytes under the tiling each run used, exactly, under both schedules: the cube's loads
    of q, k, P and v, the fp32 scores and products through the workspace, the mask's rows chunk by chunk, y once
    (or the parts, their statistics and the combine)."""
    from test_attention import attention_model

    mask = (1, 1, 1 if mask_rows == "broadcast" else sq, sk)
    g = attention_model(dt=F16, b=b, h=h, sq=sq, sk=sk, mask=mask)
    res = asc_onnx.fuse(g, options=FuseOptions(judge=False, emulate=False), validate=False)
    (k,) = [k for k in res.kernels if k.op.kernel == "attention"]
    shapes = [(b, h, sq, 32), (b, h, sk, 32), (b, h, sk, 32), mask]
    rng = np.random.default_rng(0)
    seen = set()
    for s in of(k).schedule.VARIANTS.values():
        v = render(k.op, dataclasses.replace(k.ir, schedule=s), B910)
        inputs = _attention_inputs(v, shapes, rng)
        c = check(v, inputs, B910, f"{b}x{h}x{sq}x{sk}")
        assert c.ok, c
        assert c.cube["mask_broadcast"] == (mask_rows == "broadcast")
        assert of(v).schedule.traffic(v.ir, shapes, 2, B910, c.block_dim, c.cube) == c.gm_bytes, (s, c.cube)
        seen.add((c.cube["kv_block"], c.cube["splits"] > 1, c.cube["chunk_rows"] < c.cube["mBlock"]))
    if sk == 2048:  # the variant's blocks are its own
        assert {kv for kv, _, _ in seen} == {1024, 512}, seen
    if sq == 1:
        assert all(split for _, split, _ in seen), seen


@pytest.mark.parametrize("sq, sk", [(64, 300), (1, 4096)], ids=["prefill", "decode, split keys"])
def test_attention_traffic_model_with_a_padded_head_dim(sq, sk):
    """Head dim 20: the cube writes 20 columns of each P @ v row, the vector core reads and combines rows of 32."""
    from test_attention import attention_model

    g = attention_model(dt=F16, b=1, h=2, sq=sq, sk=sk, d=20, mask=None)
    res = asc_onnx.fuse(g, options=FuseOptions(judge=False, emulate=False), validate=False)
    (k,) = [k for k in res.kernels if k.op.kernel == "attention"]
    shapes = [(1, 2, sq, 20), (1, 2, sk, 20), (1, 2, sk, 20)]
    c = check(k, _attention_inputs(k, shapes, np.random.default_rng(0)), B910, f"head dim 20, {sq}x{sk}")
    assert c.ok and c.cube["dv_rows"] == 32 and (sq > 1 or c.cube["splits"] > 1), c
    assert of(k).schedule.traffic(k.ir, shapes, 2, B910, c.block_dim, c.cube) == c.gm_bytes, c.cube


@pytest.mark.parametrize("sq, sk", [(1100, 1100), (300, 2200)], ids=["square", "kv cache"])
def test_attention_traffic_model_with_a_causal_mask(sq, sk):
    """The causal mask generated: each Q block reads k and v, and writes and reads its scores, P and products, only
    up to its last row's last visible key; no mask is read."""
    from test_causal import causal_model

    res = asc_onnx.fuse(causal_model(F16, "range", d=32), options=FuseOptions(judge=False, emulate=False),
                        validate=False)
    (k,) = [k for k in res.kernels if k.op.kernel == "attention"]
    shapes = [(1, 2, sq, 32), (1, 2, sk, 32), (1, 2, sk, 32)]
    c = check(k, _attention_inputs(k, shapes, np.random.default_rng(0)), B910, f"causal, {sq}x{sk}")
    assert c.ok and c.cube["causal"] == 1, c
    assert of(k).schedule.traffic(k.ir, shapes, 2, B910, c.block_dim, c.cube) == c.gm_bytes, c.cube
