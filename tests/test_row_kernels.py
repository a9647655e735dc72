"""Row kernels (norms, softmax, anything reducing over trailing axes), generated and emulated.

* The ONNX backend cases shipped in the onnx package (``layer_normalization_*``, ``rms_normalization_*``,
  ``softmax_*``, ``logsoftmax_*``, their ``_expanded`` bodies too): each fuses into one row op whose
  emulated kernel reproduces the case's expected outputs in fp32, and onnxruntime's result on the same
  inputs rounded to fp16 when fed fp16. Softmax over a non-last axis is a strided reduction, not a row:
  those cases must stay unfused.
* Row lengths 1 ... 100,003 (whole-row tiles and split mode), fp16 inputs near 300 through the Cast-wrapped
  RMSNorm (their squares overflow fp16), an attention softmax with a [1,1,S,S] mask over [1,8,128,128],
  on 910B and 310P.

Tolerances are validate.TOLERANCES: fp32 rtol 1e-5/atol 1e-5, fp16 rtol 1e-3/atol 1e-2.
"""

from __future__ import annotations

import numpy as np
import pytest
from backend_cases import cases
from conftest import MODELS, fuse_and_prebuild, fused
from onnx import TensorProto, helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.emulator.harness import EmulatorFaultError, TilingRefusedError, run
from asc_onnx.soc import SOCS
from asc_onnx.validate import compare_arrays
from asc_onnx.verify_kernels import capture, reference

FAMILIES = ("test_layer_normalization", "test_rms_normalization", "test_softmax", "test_logsoftmax")
#: Softmax/LogSoftmax over axis 0 or 1 of a rank-3 input: strided reductions, no row kernel.
NOT_ROWS = ("axis_0", "axis_1")


CASES = cases(("layernormalization", "rmsnormalization", "softmax", "logsoftmax"),
              lambda name: name.startswith(FAMILIES))
ROW_CASES = [c for c in CASES if not (c.name.startswith(("test_softmax", "test_logsoftmax"))
                                      and any(a in c.name for a in NOT_ROWS))]


def _emulate(k, arrays, soc="Ascend910B"):
    return run(k.ir, k.files, f"{k.op.op_type}TilingData", arrays, SOCS[soc]).outputs


@pytest.mark.fast
def test_every_family_is_covered():
    assert {c.name.split("_")[1] for c in ROW_CASES} == {"layer", "rms", "softmax", "logsoftmax"}
    assert len(ROW_CASES) >= 120 and sum("expanded" in c.name for c in ROW_CASES) >= 60


@pytest.fixture(scope="module")
def row_cases_fused():
    """Every row case fused once, its kernel's programs (fp32 and fp16, 910B) compiled in shared batches
    (conftest.fuse_and_prebuild)."""
    options = FuseOptions(judge=False, emulate=False)
    return fuse_and_prebuild({c.name: (c.model, options) for c in ROW_CASES},
                             lambda _, k: [(TensorProto.FLOAT, "Ascend910B"), (TensorProto.FLOAT16, "Ascend910B")])


@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: c.name)
def test_backend_case_is_one_row_op_reproducing_expected_outputs(case, row_cases_fused):
    res = fused(row_cases_fused, case.name)
    fused_nodes = [n for n in res.asc_model.graph.node if n.domain == "asc_onnx"]
    assert len(fused_nodes) == 1 and len(res.ops) == 1 and res.ops[0].kernel == "row", \
        [n.op_type for n in res.asc_model.graph.node]
    assert len(res.kernels) == 1, res.report["kernels"]["not_generated"]
    k = res.kernels[0]
    inputs, expected = case.data_sets[0]
    names = [i.name for i in case.model.graph.input]
    feeds = {n: np.asarray(v) for n, v in zip(names, inputs)}
    inner = [n for n in k.op.instances[0].inputs if n not in feeds]  # a Flatten left outside, say
    values = {**feeds, **(capture(case.model, inner, feeds) if inner else {})}
    arrays = [values[n] for n in k.op.instances[0].inputs]
    outs = [o.name for o in case.model.graph.output]
    got = _emulate(k, arrays)
    for name, g in zip(k.op.instances[0].outputs, got):
        want = np.asarray(expected[outs.index(name)])
        c = compare_arrays(name, want.reshape(g.shape), g, TensorProto.FLOAT)
        assert c.ok, f"{case.name} {name}: max abs {c.max_abs}"
    # fp16 data through the same kernel: onnxruntime on the fp16 values, widened, rounded back.
    half = [a.astype(np.float16) for a in arrays]
    for name, g, r in zip(k.op.output_names, _emulate(k, half), reference(k.op, half)):
        c = compare_arrays(name, r.reshape(g.shape), g, TensorProto.FLOAT16)
        assert c.ok, f"{case.name} fp16 {name}: max abs {c.max_abs}"


@pytest.mark.fast
@pytest.mark.parametrize("case", [c for c in CASES if c not in ROW_CASES], ids=lambda c: c.name)
def test_softmax_over_a_leading_axis_is_not_a_row_op(case):
    res = asc_onnx.fuse(case.model, options=FuseOptions(judge=False, emulate=False), validate=False)
    assert all(op.kernel != "row" for op in res.ops)
    # the report says why (YOLOv8's distribution-focal-loss head is such a softmax); the expanded bodies are plain
    # reductions over leading axes, which many models have and which need no word
    said = any("reduces across rows with a stride" in m["reason"] for m in res.report["near_misses"])
    assert "expanded" in case.name or said, res.report["near_misses"]


def test_backend_rows_that_are_not_32_byte_blocks_are_refused_on_310p():
    case = next(c for c in ROW_CASES if c.name == "test_rms_normalization_3d_axis_negative_1_epsilon")
    k = asc_onnx.fuse(case.model, options=FuseOptions(judge=False, emulate=False), validate=False).kernels[0]
    inputs, _ = case.data_sets[0]
    with pytest.raises(EmulatorFaultError, match="reason 3"):  # rows of 5 floats: no DataCopyPad on 310P
        _emulate(k, [np.asarray(a) for a in inputs], "Ascend310P")


# --- row lengths, split mode, both SoCs --------------------------------------------------------------------


def _softmax_model(rows: int, d: int, dtype=TensorProto.FLOAT):
    x = helper.make_tensor_value_info("x", dtype, [rows, d])
    y = helper.make_tensor_value_info("y", dtype, [rows, d])
    node = helper.make_node("Softmax", ["x"], ["y"], axis=-1)
    return helper.make_model(helper.make_graph([node], "softmax", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 17)])


def _rmsnorm_model(rows: int, d: int, dtype=TensorProto.FLOAT, eps: float = 1e-6):
    """RMSNorm as LLaMA's exporters write it: Cast to fp32, x * rsqrt(mean(x^2) + eps), Cast back, * w."""
    f32 = TensorProto.FLOAT
    nodes = [
        helper.make_node("Cast", ["x"], ["xf"], to=f32),
        helper.make_node("Mul", ["xf", "xf"], ["sq"]),
        helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
        helper.make_node("Add", ["ms", "eps"], ["mse"]),
        helper.make_node("Sqrt", ["mse"], ["rms"]),
        helper.make_node("Reciprocal", ["rms"], ["inv"]),
        helper.make_node("Mul", ["xf", "inv"], ["nf"]),
        helper.make_node("Cast", ["nf"], ["n"], to=dtype),
        helper.make_node("Mul", ["w", "n"], ["y"]),
    ]
    inits = [helper.make_tensor("axes", TensorProto.INT64, [1], [-1]), helper.make_tensor("eps", f32, [], [eps])]
    graph = helper.make_graph(nodes, "rmsnorm", [helper.make_tensor_value_info("x", dtype, [rows, d]),
                                                 helper.make_tensor_value_info("w", dtype, [d])],
                              [helper.make_tensor_value_info("y", dtype, [rows, d])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _one_kernel(model):
    res = asc_onnx.fuse(model, options=FuseOptions(judge=False, emulate=False), validate=False)
    assert len(res.kernels) == 1 and res.ops[0].kernel == "row", res.report["kernels"]["not_generated"]
    return res.kernels[0]


def _check(k, arrays, soc, dtype):
    got = _emulate(k, arrays, soc)
    for name, g, r in zip(k.op.output_names, got, reference(k.op, arrays)):
        c = compare_arrays(name, r, g, dtype)
        assert c.ok, f"{name} on {soc}: max abs {c.max_abs} rel {c.max_rel}"


@pytest.mark.parametrize("d", [1, 31, 768, 4096, 8192, 32000, 100003])
def test_softmax_and_rmsnorm_rows_of_every_length_on_910b(d):
    rows = 3 if d > 10000 else 5
    rng = np.random.default_rng(d)
    x = (rng.standard_normal((rows, d)) * 3).astype(np.float32)
    _check(_one_kernel(_softmax_model(rows, d)), [x], "Ascend910B", TensorProto.FLOAT)
    w = rng.uniform(0.5, 1.5, d).astype(np.float32)
    _check(_one_kernel(_rmsnorm_model(rows, d)), [x, w], "Ascend910B", TensorProto.FLOAT)


@pytest.mark.parametrize("d", [768, 4096, 32000])
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_aligned_rows_on_310p(d, dtype):
    np_t = np.float32 if dtype == TensorProto.FLOAT else np.float16
    rng = np.random.default_rng(d + dtype)
    x = (rng.standard_normal((4, d)) * 2).astype(np_t)
    w = rng.uniform(0.5, 1.5, d).astype(np_t)
    k = _one_kernel(_rmsnorm_model(4, d, dtype))
    _check(k, [x, w], "Ascend310P", dtype)
    _check(_one_kernel(_softmax_model(4, d, dtype)), [x], "Ascend310P", dtype)


@pytest.mark.parametrize("d", [31, 77, 100003])
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_ragged_rows_on_310p(d, dtype):
    """Rows that end inside a 32-byte block on 310P (no DataCopyPad): loaded rounded up to whole blocks (the last
    row of the tensor as blocks plus a window), stored as whole blocks plus a 32-byte window per row; 100,003
    elements run in split mode, whose last chunk must stay at least 32 bytes long."""
    np_t = np.float32 if dtype == TensorProto.FLOAT else np.float16
    rows = 3 if d > 10000 else 77
    rng = np.random.default_rng(d + dtype)
    x = (rng.standard_normal((rows, d)) * 2).astype(np_t)
    w = rng.uniform(0.5, 1.5, d).astype(np_t)
    k = _one_kernel(_rmsnorm_model(rows, d, dtype))
    res = run(k.ir, k.files, f"{k.op.op_type}TilingData", [x, w], SOCS["Ascend310P"])
    c = compare_arrays("y", reference(k.op, [x, w])[0], res.outputs[0], dtype)
    assert c.ok, c
    assert res.scalar_instr > 0  # the windows are staged by the scalar unit
    _check(_one_kernel(_softmax_model(rows, d, dtype)), [x], "Ascend310P", dtype)


def test_ragged_masked_softmax_on_310p():
    """CLIP's text tower: a 77 x 77 causal softmax over 8 heads, the mask streamed and (two cores) resident."""
    rng = np.random.default_rng(77)
    x = rng.standard_normal((1, 8, 77, 77)).astype(np.float32) * 4
    causal = np.triu(np.full((77, 77), -1e4, np.float32), 1)[None, None]
    k = _one_kernel(_mask_softmax_model(1, 8, 77))
    for cores in (None, 2):
        res = run(k.ir, k.files, f"{k.op.op_type}TilingData", [x, causal], SOCS["Ascend310P"], core_num=cores)
        c = compare_arrays("y", reference(k.op, [x, causal])[0], res.outputs[0], TensorProto.FLOAT)
        assert c.ok, (cores, c)


def _layernorm_model(rows: int, d: int, dtype=TensorProto.FLOAT):
    names = ["x", "g", "b"]
    ins = [helper.make_tensor_value_info("x", dtype, [rows, d]), helper.make_tensor_value_info("g", dtype, [d]),
           helper.make_tensor_value_info("b", dtype, [d])]
    node = helper.make_node("LayerNormalization", names, ["y"], axis=-1, epsilon=1e-5)
    graph = helper.make_graph([node], "ln", ins, [helper.make_tensor_value_info("y", dtype, [rows, d])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend310P"])
@pytest.mark.parametrize("d", [8, 17, 200, 768])
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_short_rows_reduce_a_whole_tile_per_instruction(soc, d, dtype):
    """Rows of at most 64 floats: each reduction is one repeat-strided ReduceRepeat over the tile (248 rows a call);
    on 910B rows up to FOLD_MAX fold their 64-column chunks lane by lane first (200: a short last chunk). Each
    statistic is broadcast into its slot by Brcb and applied by one level-0 instruction per tile and 64 columns, so
    no statistic is read back by the scalar unit (310P: Brcb has no block stride there, the rows read theirs with
    GetValue)."""
    np_t = np.float32 if dtype == TensorProto.FLOAT else np.float16
    rng = np.random.default_rng(d)
    x = (rng.standard_normal((600, d)) * 3).astype(np_t)
    g, b = rng.uniform(0.5, 1.5, d).astype(np_t), rng.standard_normal(d).astype(np_t)
    for model, arrays in ((_softmax_model(600, d, dtype), [x]), (_layernorm_model(600, d, dtype), [x, g, b])):
        k = _one_kernel(model)
        if soc == "Ascend310P" and d * x.itemsize < 32:  # no DataCopyPad: rows shorter than a block are refused
            with pytest.raises(TilingRefusedError, match="rows shorter than 32 bytes"):
                run(k.ir, k.files, f"{k.op.op_type}TilingData", arrays, SOCS[soc], core_num=2)
            continue
        res = run(k.ir, k.files, f"{k.op.op_type}TilingData", arrays, SOCS[soc], core_num=2)
        c = compare_arrays("y", reference(k.op, arrays)[0], res.outputs[0], dtype)
        assert c.ok, (soc, d, c)
        assert res.tile_length > 10  # many rows per instruction
        if soc == "Ascend910B":
            assert res.scalar_instr == 0


def test_split_mode_reads_the_row_twice():
    """A 100,003-float row does not fit the unified buffer. Softmax keeps a running max and a sum rescaled as the
    max grows (online softmax), LayerNorm sums (x - K)^2 about the row's first element beside the sum of x: each
    reads x twice (the statistics, then the output), as RMSNorm does. Weights are read once per row and pass that
    uses them."""
    rows, d = 2, 100003
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, d)).astype(np.float32)
    k = _one_kernel(_softmax_model(rows, d))
    assert k.ir.passes == 2
    res = run(k.ir, k.files, f"{k.op.op_type}TilingData", [x], SOCS["Ascend910B"])
    assert res.gm_read_bytes == 2 * x.nbytes and res.gm_write_bytes == x.nbytes
    w = np.ones(d, np.float32)
    k = _one_kernel(_rmsnorm_model(rows, d))
    assert k.ir.passes == 2
    res = run(k.ir, k.files, f"{k.op.op_type}TilingData", [x, w], SOCS["Ascend910B"])
    assert res.gm_read_bytes == 2 * x.nbytes + rows * w.nbytes and res.gm_write_bytes == x.nbytes
    # A weight that fits half the unified buffer stays there in its I/O type: once per core, not per row.
    xh = rng.standard_normal((6, 40000)).astype(np.float16)
    wh = rng.uniform(0.5, 1.5, 40000).astype(np.float16)
    k = _one_kernel(_rmsnorm_model(6, 40000, TensorProto.FLOAT16))
    res = run(k.ir, k.files, f"{k.op.op_type}TilingData", [xh, wh], SOCS["Ascend910B"], core_num=2)
    c = compare_arrays("y", reference(k.op, [xh, wh])[0], res.outputs[0], TensorProto.FLOAT16)
    assert c.ok, c
    assert res.tile_length == 0 and res.gm_read_bytes == 2 * xh.nbytes + 2 * wh.nbytes
    # LayerNorm far from the origin: a one-pass sum of squares about 0 would lose 3 of fp32's 7 digits here
    # (variance 1, mean square 900). Against float64: the fp32 mean of 1e5 values near 30 is itself good to
    # about 1e-6 relative, so 3e-5 absolute on outputs of size 2 (ORT's fp32 kernel is 3e-6 off).
    shifted = (x + 30.0).astype(np.float32)
    g, b = rng.uniform(0.5, 1.5, d).astype(np.float32), rng.standard_normal(d).astype(np.float32)
    k = _one_kernel(_layernorm_model(rows, d))
    assert k.ir.passes == 2
    res = run(k.ir, k.files, f"{k.op.op_type}TilingData", [shifted, g, b], SOCS["Ascend910B"])
    x64 = shifted.astype(np.float64)
    exact = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * g + b
    assert np.abs(res.outputs[0] - exact).max() < 3e-5
    assert res.gm_read_bytes == 2 * x.nbytes + rows * (g.nbytes + b.nbytes)  # the weights in the output pass


@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend310P"])
def test_online_softmax_where_the_max_grows_late_and_a_chunk_is_all_minus_inf(soc):
    """The running sum is rescaled whenever a later chunk raises the max (here by 80, so exp(x - max) of the first
    chunks must shrink by e^-80); a first chunk of -inf (a padding mask) sums to 0, not NaN."""
    rows, d = 3, 100003
    rng = np.random.default_rng(5)
    x = rng.standard_normal((rows, d)).astype(np.float32)
    x[0, -10:] += 80.0
    x[1, :40000] = -np.inf
    x[2, 50000] += 30.0
    k = _one_kernel(_softmax_model(rows, d))
    _check(k, [x], soc, TensorProto.FLOAT)


def test_whole_rows_read_x_once_and_weights_once_per_core():
    rows, d = 256, 768
    x = np.random.default_rng(1).standard_normal((rows, d)).astype(np.float32)
    w = np.ones(d, np.float32)
    k = _one_kernel(_rmsnorm_model(rows, d))
    res = run(k.ir, k.files, f"{k.op.op_type}TilingData", [x, w], SOCS["Ascend910B"])
    assert res.gm_read_bytes == x.nbytes + res.block_dim * w.nbytes and res.gm_write_bytes == x.nbytes
    assert res.block_dim > 1 and res.tile_length > 1  # several cores, several rows per tile


@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend310P"])
def test_fp16_near_300_through_the_cast_wrapped_rmsnorm(soc):
    """x ~ 300: x^2 ~ 9e4 overflows fp16 (max 65504); the kernel squares and sums in fp32 like the model."""
    rows, d = 8, 4096
    rng = np.random.default_rng(300)
    x = (rng.choice([-1, 1], (rows, d)) * rng.uniform(250, 350, (rows, d))).astype(np.float16)
    w = rng.uniform(0.5, 1.5, d).astype(np.float16)
    k = _one_kernel(_rmsnorm_model(rows, d, TensorProto.FLOAT16))
    got = _emulate(k, [x, w], soc)[0]
    xf = x.astype(np.float64)
    want = (w.astype(np.float64) * (xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-6)).astype(np.float16)
            .astype(np.float64)).astype(np.float16)
    assert np.isfinite(got.astype(np.float32)).all()
    c = compare_arrays("y", want, got, TensorProto.FLOAT16)
    assert c.ok, c


def _mask_softmax_model(b=1, h=8, s=128, dtype=TensorProto.FLOAT):
    nodes = [helper.make_node("Mul", ["x", "scale"], ["xs"]), helper.make_node("Add", ["xs", "mask"], ["xm"]),
             helper.make_node("Softmax", ["xm"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "attn", [helper.make_tensor_value_info("x", dtype, [b, h, s, s]),
                                              helper.make_tensor_value_info("mask", dtype, [b, 1, s, s])],
                              [helper.make_tensor_value_info("y", dtype, [b, h, s, s])],
                              [helper.make_tensor("scale", dtype, [], [0.125])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend310P"])
def test_mask_softmax_broadcasts_the_mask_over_heads(soc):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 8, 128, 128)).astype(np.float32) * 4
    causal = np.triu(np.full((128, 128), -1e4, np.float32), 1)[None, None]
    k = _one_kernel(_mask_softmax_model())
    assert [i.kind for i in k.ir.inputs] == ["full", "bcast"]
    res = run(k.ir, k.files, f"{k.op.op_type}TilingData", [x, causal], SOCS[soc])
    c = compare_arrays("y", reference(k.op, [x, causal])[0], res.outputs[0], TensorProto.FLOAT)
    assert c.ok, c
    # x read once, y written once, the mask once: the cores split the mask's 128 rows (the grouped walk), each
    # holds its slice in UB and walks it under all 8 heads (mask rows by N-d index: row q reads mask row q mod 128).
    assert res.gm_read_bytes == x.nbytes + causal.nbytes
    assert res.gm_write_bytes == x.nbytes


def test_a_mask_a_core_would_reread_is_loaded_once_per_core():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((1, 8, 64, 64)).astype(np.float32)
    causal = np.triu(np.full((64, 64), -1e4, np.float32), 1)[None, None]  # 16 KiB
    k = _one_kernel(_mask_softmax_model(1, 8, 64))
    res = run(k.ir, k.files, f"{k.op.op_type}TilingData", [x, causal], SOCS["Ascend910B"], core_num=2)
    c = compare_arrays("y", reference(k.op, [x, causal])[0], res.outputs[0], TensorProto.FLOAT)
    assert c.ok, c
    # two cores of four heads each: the mask once per core instead of once per head
    assert res.block_dim == 2 and res.gm_read_bytes == x.nbytes + 2 * causal.nbytes


def test_a_mask_larger_than_the_ub_is_read_once_in_slices():
    """A 1 MiB mask over two heads: the cores split its rows, each holds its slice and walks it under both heads."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 2, 512, 512)).astype(np.float32)
    causal = np.triu(np.full((512, 512), -1e4, np.float32), 1)[None, None]  # 1 MiB
    k = _one_kernel(_mask_softmax_model(1, 2, 512))
    res = run(k.ir, k.files, f"{k.op.op_type}TilingData", [x, causal], SOCS["Ascend910B"])
    c = compare_arrays("y", reference(k.op, [x, causal])[0], res.outputs[0], TensorProto.FLOAT)
    assert c.ok, c
    assert res.gm_read_bytes == x.nbytes + causal.nbytes


def test_a_per_batch_mask_too_large_for_the_ub_streams_one_row_per_data_row():
    """A [2, 1, S, S] mask varies along the batch, before the heads it repeats over: no core can walk one slice
    under every repeat, and 512 KiB do not fit, so each data row streams its mask row (once per head)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 2, 256, 256)).astype(np.float32)
    mask = np.where(rng.random((2, 1, 256, 256)) < 0.2, -1e4, 0.0).astype(np.float32)
    k = _one_kernel(_mask_softmax_model(2, 2, 256))
    res = run(k.ir, k.files, f"{k.op.op_type}TilingData", [x, mask], SOCS["Ascend910B"])
    c = compare_arrays("y", reference(k.op, [x, mask])[0], res.outputs[0], TensorProto.FLOAT)
    assert c.ok, c
    assert res.gm_read_bytes == x.nbytes + 2 * mask.nbytes


def test_l2_normalize_and_logsumexp_fuse_through_the_generic_pass():
    """An elementwise chain around one last-axis reduction, with no named pattern."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("ReduceL2", ["x", "axes"], ["n"], keepdims=1),
             helper.make_node("Max", ["n", "tiny"], ["nc"]), helper.make_node("Div", ["x", "nc"], ["y"])]
    graph = helper.make_graph(nodes, "l2n", [helper.make_tensor_value_info("x", f, [6, 96])],
                              [helper.make_tensor_value_info("y", f, [6, 96])],
                              [helper.make_tensor("axes", TensorProto.INT64, [1], [-1]),
                               helper.make_tensor("tiny", f, [], [1e-12])])
    k = _one_kernel(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    assert k.op.rule == "RowChain"
    x = np.random.default_rng(2).standard_normal((6, 96)).astype(np.float32)
    for soc in ("Ascend910B", "Ascend310P"):
        _check(k, [x], soc, TensorProto.FLOAT)
    # logsumexp written out: max + log(sum(exp(x - max)))
    nodes = [helper.make_node("ReduceMax", ["x", "axes"], ["m"], keepdims=1),
             helper.make_node("Sub", ["x", "m"], ["d"]), helper.make_node("Exp", ["d"], ["e"]),
             helper.make_node("ReduceSum", ["e", "axes"], ["s"], keepdims=1),
             helper.make_node("Log", ["s"], ["ls"]), helper.make_node("Add", ["ls", "m"], ["lse"]),
             helper.make_node("Sub", ["x", "lse"], ["y"])]
    graph = helper.make_graph(nodes, "lse", [helper.make_tensor_value_info("x", f, [6, 96])],
                              [helper.make_tensor_value_info("y", f, [6, 96])],
                              [helper.make_tensor("axes", TensorProto.INT64, [1], [-1])])
    k = _one_kernel(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    _check(k, [x], "Ascend910B", TensorProto.FLOAT)


def _graph_model(nodes, inputs, inits=(), opset=18):
    f = TensorProto.FLOAT
    graph = helper.make_graph(nodes, "forms", [helper.make_tensor_value_info(n, f, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", f, inputs[0][1])], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


AXES = helper.make_tensor("axes", TensorProto.INT64, [1], [-1])
EPS = helper.make_tensor("eps", TensorProto.FLOAT, [], [1e-5])
ONE = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])


def _layernorm_nodes(x: str, out: str) -> list:
    return [helper.make_node("ReduceMean", [x, "axes"], ["m"], keepdims=1), helper.make_node("Sub", [x, "m"], ["d"]),
            helper.make_node("Mul", ["d", "d"], ["d2"]),
            helper.make_node("ReduceMean", ["d2", "axes"], ["v"], keepdims=1),
            helper.make_node("Add", ["v", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["s"]),
            helper.make_node("Div", ["d", "s"], [out])]


def _rms_nodes(x: str, out: str) -> list:
    return [helper.make_node("Mul", [x, x], ["sq"]), helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
            helper.make_node("Add", ["ms", "eps"], ["e"]), helper.make_node("Sqrt", ["e"], ["r"]),
            helper.make_node("Div", [x, "r"], [out])]


@pytest.mark.parametrize("form", ["layernorm_no_affine", "rmsnorm_no_weight", "gemma_one_plus_w"])
def test_exporter_forms_fuse_into_one_row_kernel(form):
    d = 256
    if form == "layernorm_no_affine":
        m = _graph_model(_layernorm_nodes("x", "y"), [("x", [6, d])], [AXES, EPS])
    elif form == "rmsnorm_no_weight":
        m = _graph_model(_rms_nodes("x", "y"), [("x", [6, d])], [AXES, EPS])
    else:  # Gemma: x / rms(x) * (1 + w), the 1 + w inside the fused op (computed once per core)
        nodes = _rms_nodes("x", "n") + [helper.make_node("Add", ["w", "one"], ["w1"]),
                                        helper.make_node("Mul", ["n", "w1"], ["y"])]
        m = _graph_model(nodes, [("x", [6, d]), ("w", [d])], [AXES, EPS, ONE])
    res = asc_onnx.fuse(m, options=FuseOptions(judge=False, emulate=False), validate=False)
    assert len(res.ops) == 1 and len(res.kernels) == 1, [(o.rule, o.kernel) for o in res.ops]
    k = res.kernels[0]
    assert len([n for n in res.asc_model.graph.node if n.op_type != "Constant"]) == 1
    rng = np.random.default_rng(7)
    arrays = [(rng.standard_normal((6, d)) * 2).astype(np.float32)]
    if form == "gemma_one_plus_w":
        arrays.append(rng.standard_normal(d).astype(np.float32) * 0.1)
        assert any(st.api == "Adds" and st.dst[0] == "v" for st in k.ir.hoisted)  # 1 + w once per core
    for soc in ("Ascend910B", "Ascend310P"):
        _check(k, arrays, soc, TensorProto.FLOAT)


def test_fixture_row_kernels_on_310p():
    """The fp16 LLaMA on 310P: its norms (rows of 32 fp16, whole 32-byte blocks) ship and pass on captured
    activations; the attention softmax over rows of 8 fp16 (16 bytes) is refused by the tiling and goes
    back to its nodes."""
    from conftest import MODELS

    res = asc_onnx.fuse(MODELS / "llama_tiny_dynamo_fp16.onnx", options=FuseOptions(judge=False, soc="Ascend310P"))
    shipped = {k.op.rule for k in res.kernels if k.op.kernel == "row"}
    assert {"RMSNorm", "AddRMSNorm"} <= shipped
    rejected = {r["op_type"]: r["reason"] for r in res.report["kernels"]["rejected"]}
    assert all("reason 3" in why for why in rejected.values()), rejected
    assert any(op.rule == "ScaleMaskSoftmax" and op.op_type in rejected for op in res.ops)
    assert res.deployed is not None and res.deployed.ok
    for k in res.kernels:
        if k.op.kernel == "row":
            assert {c.inputs for c in res.kernel_checks if c.op_type == k.op.op_type and c.ok} >= {"random",
                                                                                                 "captured"}


def test_a_models_vector_kernels_compile_as_one_batch_program(tmp_path):
    """Every vector kernel of a model is one g++ run (a batch program, each kernel in a namespace of its own): a file
    the kernels share (the row tiling header) must compile once per kernel there, or every kernel falls back to a
    compile of its own, silently, several times slower."""
    from asc_onnx import config
    from asc_onnx.emulator.harness import prebuild
    from asc_onnx.kernels import of

    res = asc_onnx.fuse(MODELS / "llama_tiny_dynamo.onnx", options=FuseOptions(judge=False, emulate=False),
                        validate=False)
    items = [(k.ir, k.files, f"{k.op.op_type}TilingData", k.ir.dtypes[0], SOCS["Ascend910B"])
             for k in res.kernels if not of(k).cube]
    assert sum(of(it[0]).name == "row" for it in items) >= 3
    with config.using(config.Config.of(tmp_path / "cache", config.current().cann_source)):
        assert prebuild(items) == len(items)  # each one's program is an entry of the batch


def test_processes_prebuilding_the_same_kernels_split_the_batches(tmp_path):
    """Two prebuilds of one list at once with ``shared=True`` (the suite's workers, here two threads: each takes a
    batch's file lock as a process would) make every batch once between them, and both find every program built;
    a prebuild after them makes nothing."""
    from concurrent.futures import ThreadPoolExecutor

    from asc_onnx import config
    from asc_onnx.emulator.harness import prebuild

    items, seen = [], set()
    for case in ROW_CASES:  # 30 kernels and dtypes (some one program): batches of 12, one op several times in each
        for k in asc_onnx.fuse(case.model, options=FuseOptions(judge=False, emulate=False), validate=False).kernels:
            for d in (TensorProto.FLOAT, TensorProto.FLOAT16):
                if (tuple(sorted(k.files.items())), d) not in seen:
                    seen.add((tuple(sorted(k.files.items())), d))
                    items.append((k.ir, k.files, f"{k.op.op_type}TilingData", d, SOCS["Ascend910B"]))
        if len(items) >= 30:
            break
    assert len({it[0].snake for it in items}) < len(items) // 2
    cfg = config.Config.of(tmp_path / "cache", config.current().cann_source)

    def one(_):
        with config.using(cfg):
            return prebuild(items, shared=True)

    with ThreadPoolExecutor(2) as pool:
        made = list(pool.map(one, range(2)))
    with config.using(cfg):
        emu = tmp_path / "cache" / "emu"
        batches = list(emu.glob("batch-*/prog"))
        entries = [p for p in emu.glob("*/prog") if p.read_bytes()[:2] == b"#!"]  # an item's run of its batch
        # each batch made once: the programs the two made are the batch entries, no more
        assert len(batches) >= 2 and sum(made) == len(entries) > 12, (made, len(entries))
        assert prebuild(items, shared=True) == 0
        again = prebuild(items)  # nothing left to build
    assert again == 0
