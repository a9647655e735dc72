"""The causal mask, recognised exactly and generated in the kernel: every exporter form the fixtures and the
exporters write is taken (the op then has no mask input, and its body computes the mask from q's and v's shapes),
a mask that is not exactly the triangle at every size stays an input, and the kernel that skips the blocks the
mask covers whole matches onnxruntime over many KV blocks, fp16 and fp32, queries aligned to the last keys (a KV
cache) or not, under CANN's tilings where its sources are beside the repository."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import F16, F32, MODELS, const, model
from onnx import helper

import asc_onnx
from asc_onnx.soc import SOCS

NP = {F32: np.float32, F16: np.float16}
I64 = onnx.TensorProto.INT64


def causal_model(dt=F32, form: str = "range", b: int = 1, h: int = 2, cache: bool = True, d: int = 32,
                 fill: float | None = None, buffer: int = 1024, group: int = 1) -> onnx.ModelProto:
    """Softmax(q @ k^T / sqrt(d) + mask) @ v whose mask the graph computes from the shapes of q and k, the last
    query at the last key (a KV cache's alignment; with ``cache``, k and v are a past's ``past`` rows and the new
    ``seq``, else ``seq`` rows), in one of the forms exporters write:

    * ``range``: key and query positions by Range, ``LessOrEqual`` and Where to 0 / fill (HF's legacy export);
    * ``trilu``: ``Trilu(upper=1, k=Sk-Sq+1)`` of a filled [Sq, Sk] tensor (``torch.triu(full(fill), 1)``);
    * ``buffer``: a Slice of a constant lower triangle, GPT-2's bias buffer, then Where;
    * near misses: ``less`` (Less for LessOrEqual: the diagonal masked), ``aligned top`` (query positions from 0:
      right only where Sq == Sk), ``upper`` (Trilu keeping the lower part: the mask inverted)."""
    npd = NP[dt]
    fill = float(np.finfo(npd).min) if fill is None else fill
    hk = h // group  # (grouped-query attention: K and V of h / group heads, repeated as repeat_kv does)
    inputs = [("q", dt, [b, h, "seq", d]), ("k_new", dt, [b, hk, "seq", d]), ("v_new", dt, [b, hk, "seq", d])]
    kv = ("kc", "vc") if group > 1 else ("k", "v")
    if cache:
        inputs += [("k_past", dt, [b, hk, "past", d]), ("v_past", dt, [b, hk, "past", d])]
        head = [helper.make_node("Concat", ["k_past", "k_new"], [kv[0]], axis=2),
                helper.make_node("Concat", ["v_past", "v_new"], [kv[1]], axis=2)]
    else:
        head = [helper.make_node("Identity", ["k_new"], [kv[0]]), helper.make_node("Identity", ["v_new"], [kv[1]])]
    if group > 1:
        for x in ("k", "v"):
            head += [helper.make_node("Unsqueeze", [f"{x}c", "ax2"], [f"{x}5"]),
                     helper.make_node("Shape", [f"{x}c"], [f"{x}c_shape"]),
                     helper.make_node("Gather", [f"{x}c_shape", "two"], [f"{x}len"], axis=0),
                     helper.make_node("Unsqueeze", [f"{x}len", "ax0"], [f"{x}len1"]),
                     helper.make_node("Concat", ["lead5", f"{x}len1", "dim1"], [f"{x}shape5"], axis=0),
                     helper.make_node("Expand", [f"{x}5", f"{x}shape5"], [f"{x}e"]),
                     helper.make_node("Concat", ["lead4", f"{x}len1", "dim1"], [f"{x}shape4"], axis=0),
                     helper.make_node("Reshape", [f"{x}e", f"{x}shape4"], [x])]
    inits = [const("scale", d ** -0.5, npd), const("two", 2, np.int64), const("zero", 0, np.int64),
             const("one", 1, np.int64), const("fill", fill, npd), const("none", 0.0, npd),
             const("ax0", [0], np.int64), const("ax1", [1], np.int64), const("ax2", [2], np.int64),
             const("lead5", [b, hk, group], np.int64), const("lead4", [b, h], np.int64), const("dim1", [d], np.int64)]
    nodes = [*head, helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "scale"], ["ss"]),
             helper.make_node("Shape", ["q"], ["qs"]), helper.make_node("Shape", ["k"], ["ks"]),
             helper.make_node("Gather", ["qs", "two"], ["nq"], axis=0),
             helper.make_node("Gather", ["ks", "two"], ["nk"], axis=0),
             helper.make_node("Sub", ["nk", "nq"], ["past"])]
    if form == "one row":
        nodes += _one_position_mask("nk")
    elif form in ("range", "less", "aligned top"):
        start = "zero" if form == "aligned top" else "past"
        stop = "nq" if form == "aligned top" else "nk"
        nodes += [helper.make_node("Range", [start, stop, "one"], ["rows"]),
                  helper.make_node("Range", ["zero", "nk", "one"], ["cols"]),
                  helper.make_node("Unsqueeze", ["rows", "ax1"], ["rows2"]),
                  helper.make_node("Unsqueeze", ["cols", "ax0"], ["cols2"]),
                  helper.make_node("Less" if form == "less" else "LessOrEqual", ["cols2", "rows2"], ["vis"]),
                  helper.make_node("Where", ["vis", "none", "fill"], ["mask"])]
    elif form in ("trilu", "upper"):
        nodes += [helper.make_node("Unsqueeze", ["nq", "ax0"], ["nq1"]), helper.make_node("Unsqueeze", ["nk", "ax0"],
                                                                                          ["nk1"]),
                  helper.make_node("Concat", ["nq1", "nk1"], ["full_shape"], axis=0),
                  helper.make_node("Expand", ["fill", "full_shape"], ["full"]),
                  helper.make_node("Add", ["past", "one"], ["diag"]),
                  helper.make_node("Trilu", ["full", "diag"], ["mask"], upper=0 if form == "upper" else 1)]
    elif form == "buffer":
        inits.append(onnx.numpy_helper.from_array(np.tril(np.ones((buffer, buffer), bool))[None, None], "bias"))
        inits.append(const("axes23", [2, 3], np.int64))
        nodes += [helper.make_node("Unsqueeze", ["past", "ax0"], ["past1"]),
                  helper.make_node("Unsqueeze", ["nk", "ax0"], ["nk1"]),
                  helper.make_node("Concat", ["past1", "zero_1"], ["starts"], axis=0),
                  helper.make_node("Concat", ["nk1", "nk1"], ["ends"], axis=0),
                  helper.make_node("Slice", ["bias", "starts", "ends", "axes23"], ["vis"]),
                  helper.make_node("Where", ["vis", "none", "fill"], ["mask"])]
        inits.append(const("zero_1", [0], np.int64))
    else:
        raise ValueError(form)
    nodes += [helper.make_node("Add", ["ss", "mask"], ["sm"]), helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["o"]), helper.make_node("Transpose", ["o"], ["y"],
                                                                                perm=[0, 2, 1, 3])]
    return model(nodes, inputs, [("y", dt, [b, "seq", h, d])], inits)


def _one_position_mask(keys: str) -> list[onnx.NodeProto]:
    """``mask`` over ``nq`` rows and ``keys`` keys from one query position (Range(0, 1)) broadcast down every row:
    each row sees key 0 only (the constants zero, one, ax0, ax1, none and fill, and ``nq``, are the caller's)."""
    return [helper.make_node("Range", ["zero", "one", "one"], ["row"]),
            helper.make_node("Unsqueeze", ["row", "ax1"], ["row2"]),
            helper.make_node("Unsqueeze", ["nq", "ax0"], ["nq1"]),
            helper.make_node("Concat", ["nq1", "ax1"], ["rows_shape"], axis=0),
            helper.make_node("Expand", ["row2", "rows_shape"], ["rows2"]),
            helper.make_node("Range", ["zero", keys, "one"], ["cols"]),
            helper.make_node("Unsqueeze", ["cols", "ax0"], ["cols2"]),
            helper.make_node("LessOrEqual", ["cols2", "rows2"], ["vis"]),
            helper.make_node("Where", ["vis", "none", "fill"], ["mask"])]


def fuse(m, **kw):
    kw.setdefault("judge", False)
    kw.setdefault("emulate", False)
    return asc_onnx.fuse(m, None, options=asc_onnx.FuseOptions(**kw), validate=False)


def attention_op(res):
    ops = [op for op in res.ops if op.kernel == "attention"]
    assert len(ops) == 1, [op.op_type for op in res.ops]
    return ops[0]


@pytest.mark.parametrize("form", ["range", "trilu", "buffer"])
@pytest.mark.parametrize("dt", [F32, F16])
def test_each_exporter_form_is_taken_exactly(form, dt):
    res = fuse(causal_model(dt, form))
    op = attention_op(res)
    assert tuple(op.input_names) == ("q", "k", "v")  # the mask is no input
    assert res.kernels[0].ir.causal
    # the body computes the same mask: the graph rung (onnxruntime on the rewritten model) agrees with the source
    checked = asc_onnx.fuse(causal_model(dt, form), None, asc_onnx.FuseOptions(judge=False, emulate=False),
                            validate=True)
    assert checked.validation.ok


@pytest.mark.parametrize("fixture", ["llama_tiny_legacy", "llama_tiny_dynamo", "llama_sdpa_legacy",
                                     "phi3_tiny_legacy", "gpt2_tiny_legacy", "qwen2_tiny_dynamo",
                                     "llama_tiny_dynamo_fp16"])
def test_the_fixtures_causal_masks_are_generated(fixture):
    """HF's legacy Range/LessOrEqual masks, dynamo's traced triangles, SDPA's Trilu with -inf, Phi-3's sliced
    constant: each attention op of the exported models takes q, k and v alone."""
    res = fuse(MODELS / f"{fixture}.onnx")
    op = attention_op(res)
    assert tuple(op.input_names) == ("q", "k", "v"), op.input_names
    assert all(k.ir.causal for k in res.kernels if k.op.kernel == "attention")


def test_the_report_says_the_mask_is_computed_in_the_op():
    from asc_onnx.report_text import summary

    res = fuse(MODELS / "llama_tiny_legacy.onnx")
    row = next(op for op in res.report["ops"] if op["kernel"] == "attention")
    assert row["computed_in_op"] == ["mask"] and "mask" not in row["inputs"]
    assert f"{row['op_type']}" in summary(res.report) and "(mask computed in the op, not read)" in summary(res.report)


@pytest.mark.parametrize("form,why", [("less", "the diagonal masked"), ("aligned top", "queries from key 0"),
                                      ("upper", "the mask inverted"),
                                      ("one row", "a position of one element broadcast: every row sees key 0")])
def test_a_near_triangular_mask_stays_an_input(form, why):
    res = fuse(causal_model(F32, form, cache=form != "one row"))  # (one row: where Sq == Sk, j <= 0 vs j <= i)
    op = attention_op(res)
    assert "mask" in op.input_names, why
    assert not res.kernels[0].ir.causal


def test_a_fill_a_score_could_outweigh_stays_an_input():
    """-1e4 (GPT-2's old masked_bias) is not below every score's reach in fp32: the mask is read, not generated."""
    op = attention_op(fuse(causal_model(F32, "range", fill=-1e4)))
    assert "mask" in op.input_names


def test_a_padding_mask_added_stays_an_input():
    """The causal triangle And a padding row read from data: rows whose keys are all padding are a softmax of every
    key in onnxruntime, which skipping blocks would not compute; the mask stays an input."""
    res = fuse(MODELS / "llama_causal_fp16_mask_legacy.onnx")
    assert "mask" in attention_op(res).input_names


def test_queries_aligned_to_the_first_key_are_causal_where_sq_is_sk():
    """``aligned top`` equals the KV-cache alignment when Sq and Sk are one dim: a self-attention's mask."""
    op = attention_op(fuse(causal_model(F32, "aligned top", cache=False)))
    assert tuple(op.input_names) == ("q", "k", "v")


def _kernel_and_inputs(dt, sq: int, sk: int, d: int = 64, h: int = 2, form: str = "range", group: int = 1):
    res = fuse(causal_model(dt, form, h=h, d=d, group=group))
    k = res.kernels[0]
    assert k.ir.causal and k.ir.kv_repeat == (group > 1)
    rng = np.random.default_rng(7)
    npd = NP[dt]
    q = rng.standard_normal((1, h, sq, d)).astype(npd)
    kk = rng.standard_normal((1, h // group, sk, d)).astype(npd)
    v = rng.standard_normal((1, h // group, sk, d)).astype(npd)
    return k, [q, kk, v]


@pytest.mark.parametrize("dt,sq,sk,group", [(F16, 1100, 1100, 1), (F32, 300, 2200, 1), (F16, 37, 37, 1),
                                            (F32, 129, 1153, 1), (F16, 600, 1300, 4)],
                         ids=["fp16 square", "fp32 kv cache", "fp16 one block", "fp32 tails", "fp16 gqa 4:1 cache"])
def test_skipped_blocks_match_onnxruntime(dt, sq, sk, group):
    """The kernel walks each Q block's keys only up to its last row's last visible one (whole masked blocks are
    never computed), generates the triangle on the blocks the diagonal crosses (a row's first masked key mid-block
    included) and matches onnxruntime on every row; checked under CANN's tilings where its sources are here."""
    from asc_onnx.emulator import cann_tiling
    from asc_onnx.emulator.harness import run
    from asc_onnx.verify_kernels import check

    k, inputs = _kernel_and_inputs(dt, sq, sk, h=2 * group, group=group)
    soc = SOCS["Ascend910B"]
    got = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, soc)
    assert got.cube["causal"] == 1
    c = check(k, inputs, soc, "causal")
    assert c.ok, (c.error, c.max_abs)
    if cann_tiling.source_root() is not None:
        assert c.tiling == "CANN"


def test_the_masked_blocks_cost_nothing():
    """At Sq = Sk = 2048 (KV blocks of 1024, Q blocks of 128, 8 heads on 48 vector cores) the cube works about half
    what the same kernel works without the mask: each Q block's keys end at its last row's, and the items go to the
    cores by falling Q block in a snake, so no core takes every head's last block (timing model, table values)."""
    from test_attention import attention_model

    from asc_onnx.emulator.harness import run
    from asc_onnx.hardware import emulator_table

    soc = SOCS["Ascend910B"]
    table = emulator_table(soc.chip, {})
    k, inputs = _kernel_and_inputs(F16, 2048, 2048, h=8)
    causal = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, soc, values=False, timing=table)
    plain = fuse(attention_model(dt=F16, b=1, h=8, sq="sq", d=64, mask=None))
    kp = plain.kernels[0]
    full = run(kp.ir, kp.files, f"{kp.op.op_type}TilingData", inputs, soc, values=False, timing=table)
    cube = causal.time["busy"]["CUBE_MTE2"] / full.time["busy"]["CUBE_MTE2"]
    assert 0.45 < cube < 0.62, cube
    assert causal.time["cycles"] < 0.9 * full.time["cycles"]


def test_a_position_of_one_element_broadcast_is_not_a_row_index():
    """The analysis alone, on the graph as exported (nothing folded): a Range of one element broadcast down the rows
    holds one position, so the mask sees key 0 only: not causal. An axis of one element carries no index."""
    import onnx_graphsurgeon as gs

    from asc_onnx.causal import causal_fill

    f32 = F32
    inits = [const("zero", 0, np.int64), const("one", 1, np.int64), const("ax0", [0], np.int64),
             const("ax1", [1], np.int64), const("fill", np.finfo(np.float32).min), const("none", 0.0)]
    nodes = [helper.make_node("Shape", ["q"], ["qs"]), helper.make_node("Gather", ["qs", "zero"], ["nq"], axis=0),
             *_one_position_mask("nq")]
    m = model(nodes, [("q", f32, ["seq", 8])], [("mask", f32, ["seq", "seq"])], inits)
    m = onnx.shape_inference.infer_shapes(m, data_prop=True)
    g = gs.import_onnx(m)
    mask = g.outputs[0]
    assert g.tensors()["row"].shape == [1]
    assert causal_fill(mask, "seq", "seq") is None


def _random_mask_model(rng: np.random.Generator) -> tuple[onnx.ModelProto, str]:
    """A mask [Sq, Sk] built from q's and k's shapes (k a KV cache: past + seq rows) by a random pick of the forms
    the analysis reads: positions by Range from random offsets, a random comparison either way round, a Not, Where
    to 0 / fill either way round; or Trilu of a filled tensor at a random diagonal, kept upper or lower."""
    fill = float(np.finfo(np.float32).min)
    inits = [const(n, v, np.int64) for n, v in (("zero", 0), ("one", 1), ("two", 2), ("m1", -1))]
    inits += [const("ax0", [0], np.int64), const("ax1", [1], np.int64), const("fill", fill), const("none", 0.0)]
    nodes = [helper.make_node("Concat", ["k_past", "k_new"], ["k"], axis=0),
             helper.make_node("Shape", ["q"], ["qs"]), helper.make_node("Shape", ["k"], ["ks"]),
             helper.make_node("Gather", ["qs", "zero"], ["nq"], axis=0),
             helper.make_node("Gather", ["ks", "zero"], ["nk"], axis=0),
             helper.make_node("Sub", ["nk", "nq"], ["past"]), helper.make_node("Add", ["past", "one"], ["past1"]),
             helper.make_node("Sub", ["past", "one"], ["pastm1"])]
    starts = ["zero", "past", "past1", "pastm1", "one"]
    if rng.random() < 0.7:
        r0 = str(rng.choice(starts))
        c0 = str(rng.choice(["zero", "zero", "one"]))
        nodes += [helper.make_node("Add", [r0, "nq"], ["rows_end"]),
                  helper.make_node("Range", [r0, "rows_end", "one"], ["rows"]),
                  helper.make_node("Add", [c0, "nk"], ["cols_end"]),
                  helper.make_node("Range", [c0, "cols_end", "one"], ["cols"]),
                  helper.make_node("Unsqueeze", ["rows", "ax1"], ["rows2"]),
                  helper.make_node("Unsqueeze", ["cols", "ax0"], ["cols2"])]
        cmp = str(rng.choice(["Less", "LessOrEqual", "Greater", "GreaterOrEqual"]))
        a, b = ("cols2", "rows2") if rng.random() < 0.5 else ("rows2", "cols2")
        nodes.append(helper.make_node(cmp, [a, b], ["vis0"]))
        last = "vis0"
        if rng.random() < 0.3:
            nodes.append(helper.make_node("Not", ["vis0"], ["vis1"]))
            last = "vis1"
        arms = ["none", "fill"] if rng.random() < 0.5 else ["fill", "none"]
        nodes.append(helper.make_node("Where", [last, *arms], ["mask"]))
    else:
        diag = str(rng.choice(["zero", "one", "past", "past1", "pastm1", "m1"]))
        nodes += [helper.make_node("Unsqueeze", ["nq", "ax0"], ["nq1"]), helper.make_node("Unsqueeze", ["nk", "ax0"],
                                                                                          ["nk1"]),
                  helper.make_node("Concat", ["nq1", "nk1"], ["full_shape"], axis=0),
                  helper.make_node("Expand", ["fill", "full_shape"], ["full"]),
                  helper.make_node("Trilu", ["full", diag], ["mask"], upper=int(rng.random() < 0.7))]
    nodes += [helper.make_node("Identity", ["mask"], ["mask_out"]), helper.make_node("Identity", ["k"], ["k_out"])]
    g = helper.make_graph(nodes, "mask", [helper.make_tensor_value_info(n, F32, s) for n, s in
                                          (("q", ["seq", 8]), ("k_past", ["past", 8]), ("k_new", ["seq", 8]))],
                          [helper.make_tensor_value_info(n, F32, None) for n in ("mask_out", "k_out")], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, fill


def test_what_the_analysis_takes_is_the_triangle_at_every_size_onnxruntime_tries():
    """Soundness, by sampling what the proof claims for all sizes: of 300 random mask constructions, each the analysis
    takes as causal (25 with this seed) is run by onnxruntime at 12 sizes (1 to 5 queries after 0 to 6 cached keys)
    and must be the triangle there, 0 at and before each query's key and the fill after it. Some are taken and most
    refused, so neither answer is vacuous."""
    import onnx_graphsurgeon as gs
    import onnxruntime as ort
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    from asc_onnx.causal import causal_fill

    rng = np.random.default_rng(3)
    taken = refused = 0
    for _ in range(300):
        m, fill = _random_mask_model(rng)
        # the dims a load names (the cache's length is past + seq: onnxruntime's symbolic inference, as a load
        # runs it where onnx's leaves a dim fresh)
        shaped = SymbolicShapeInference.infer_shapes(m, auto_merge=True)
        tensors = gs.import_onnx(shaped).tensors()
        mask, k = tensors["mask"], tensors["k"]
        if mask.shape is None or k.shape is None or len(mask.shape) != 2:
            refused += 1
            continue
        got = causal_fill(mask, tensors["q"].shape[0], k.shape[0])
        if got is None:
            refused += 1
            continue
        taken += 1
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        for sq, past in [(1, 0), (2, 0), (3, 0), (5, 0), (1, 3), (2, 2), (4, 1), (5, 6), (3, 6), (2, 5), (4, 4),
                         (1, 6)]:
            out = sess.run(["mask_out"], {"q": np.zeros((sq, 8), np.float32), "k_past": np.zeros((past, 8), np.float32),
                                      "k_new": np.zeros((sq, 8), np.float32)})[0]
            sk = past + sq
            want = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + past, 0.0, got).astype(np.float32)
            assert out.shape == (sq, sk) and np.array_equal(out, want), (sq, past, out)
    assert taken >= 10 and refused >= 100, (taken, refused)
