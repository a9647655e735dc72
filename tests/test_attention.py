"""Attention as one op: the pattern's optional parts, the kernel emulated in every form (fp32 and fp16, masks,
K transposed or not, scales on the scores or on q and k, a KV cache's Sq != Sk, grouped-query heads repeated in
the graph), the deployed model, and the fallback to the smaller fusions where the kernel does not ship."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import F16, F32, const, model, rules_of
from onnx import helper

import asc_onnx
from asc_onnx.pattern import Const, build_patterns, op
from asc_onnx.registry import load_rules

NP = {F32: np.float32, F16: np.float16}


def attention_model(dt=F32, b=2, h=4, sq="seq", sk=None, d=32, dv=None, mask=(2, 1, "seq", "seq"), trans=True,
                    scale="mul", cast=False, qk_scale=False, softmax="op"):
    """Softmax(scale * q @ k^T + mask) @ v as exporters write it, followed by a Transpose back to [B, S, H, Dv]
    (the attention output is read outside the region); ``softmax`` "stable" or "plain" decomposes it."""
    sk = sk or sq
    dv = dv or d
    inputs = [("q", dt, [b, h, sq, d]), ("k", dt, [b, h, sk, d] if trans else [b, h, d, sk]), ("v", dt, [b, h, sk, dv])]
    nodes, inits = [], []
    q, kt = "q", "k"
    if trans:
        nodes.append(helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]))
        kt = "kt"
    if qk_scale:  # SDPA's decomposition: sqrt(scale) on q and on k^T
        inits += [const("qs", d ** -0.25, NP[dt]), const("ks", d ** -0.25, NP[dt])]
        nodes += [helper.make_node("Mul", ["q", "qs"], ["q2"]), helper.make_node("Mul", [kt, "ks"], ["kt2"])]
        q, kt = "q2", "kt2"
    nodes.append(helper.make_node("MatMul", [q, kt], ["s"]))
    last = "s"
    if scale == "mul":
        inits.append(const("c", d ** -0.5, NP[dt]))
        nodes.append(helper.make_node("Mul", ["s", "c"], ["ss"]))
        last = "ss"
    elif scale == "div":
        inits.append(const("c", d ** 0.5, NP[dt]))
        nodes.append(helper.make_node("Div", ["s", "c"], ["ss"]))
        last = "ss"
    if mask is not None:
        inputs.append(("mask", dt, list(mask)))
        nodes.append(helper.make_node("Add", [last, "mask"], ["sm"]))
        last = "sm"
    if softmax == "op":
        nodes.append(helper.make_node("Softmax", [last], ["p"], axis=-1))
    else:
        if softmax == "stable":
            nodes += [helper.make_node("ReduceMax", [last], ["mx"], axes=[-1], keepdims=1),
                      helper.make_node("Sub", [last, "mx"], ["sc"])]
            last = "sc"
        inits.append(const("last_axis", [-1], np.int64))  # opset 13+: ReduceSum takes its axes as an input
        nodes += [helper.make_node("Exp", [last], ["e"]),
                  helper.make_node("ReduceSum", ["e", "last_axis"], ["se"], keepdims=1),
                  helper.make_node("Div", ["e", "se"], ["p"])]
    if cast:  # the legacy exporters' fp32 round trip of the probabilities
        nodes += [helper.make_node("Cast", ["p"], ["p32"], to=F32), helper.make_node("Cast", ["p32"], ["p16"], to=dt)]
        last = "p16"
    else:
        last = "p"
    nodes.append(helper.make_node("MatMul", [last, "v"], ["o"]))
    nodes.append(helper.make_node("Transpose", ["o"], ["y"], perm=[0, 2, 1, 3]))
    return model(nodes, inputs, [("y", dt, [b, sq, h, dv])], inits)


def fuse(m, **kw):
    kw.setdefault("judge", False)
    return asc_onnx.fuse(m, None, options=asc_onnx.FuseOptions(**kw))


@pytest.mark.fast
def test_optional_nodes_expand_into_variants():
    """k optional groups are 2**k variants, largest first; an input only an absent node reads drops out."""
    def pat(x, mask):
        return op.Softmax(op.Add(op.Mul(x, Const("s"), _optional="scale"), mask, _optional="mask"))

    got = {p.fn_name: (p.variables, [n.op_type for n in p.nodes]) for p in build_patterns(pat)}
    assert got == {"pat": (("x", "mask"), ["Mul", "Add", "Softmax"]), "pat-mask": (("x",), ["Mul", "Softmax"]),
                   "pat-scale": (("x", "mask"), ["Add", "Softmax"]), "pat-mask-scale": (("x",), ["Softmax"])}
    rule = next(r for r in load_rules() if r.name == "Attention")
    assert rule.variants[0].size > rule.variants[-1].size and len(rule.variants) > 16


FORMS = {
    "fp32 mask mul": {},
    "fp16 mask div": {"dt": F16, "scale": "div"},
    "fp32 no mask, k given transposed": {"mask": None, "trans": False},
    "fp16 mask [1,1,S,S], no scale": {"dt": F16, "mask": (1, 1, "seq", "seq"), "scale": None},
    "fp16 cast round trip": {"dt": F16, "cast": True},
    "fp32 scale on q and k": {"qk_scale": True, "scale": None, "mask": None},
    "fp32 head dim 64, Dv 16": {"d": 64, "dv": 16},
    "fp32 decomposed softmax (exp(s - max) / sum)": {"softmax": "stable"},
    "fp16 decomposed softmax (exp(s) / sum), div": {"dt": F16, "softmax": "plain", "scale": "div"},
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_attention_forms_fuse_emulate_and_deploy(form):
    """Each form is one Attention op, emulated at two bindings of the sequence and on captured activations, and
    the deployed model with it emulated matches the original."""
    res = fuse(attention_model(**FORMS[form]))
    assert rules_of(res) == {"Attention": 1}, res.near_misses
    assert [k.op.rule for k in res.kernels] == ["Attention"]
    checks = [c for c in res.kernel_checks if c.op_type == res.kernels[0].op.op_type]
    assert {c.inputs for c in checks} >= {"random", "dims=7", "captured"} and all(c.ok for c in checks), checks
    assert res.validation.ok and res.deployed is not None and res.deployed.ok


def test_kv_cache_decode_step():
    """A decode step: the new K/V row is concatenated to the past ones outside the op; Sq = 1 against Sk = past + 1."""
    nodes = [helper.make_node("Concat", ["past_k", "k_new"], ["k"], axis=2),
             helper.make_node("Concat", ["past_v", "v_new"], ["v"], axis=2),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "c"], ["ss"]),
             helper.make_node("Softmax", ["ss"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["o"]),
             helper.make_node("Transpose", ["o"], ["y"], perm=[0, 2, 1, 3])]
    inputs = [("q", F16, [1, 4, 1, 32]), ("past_k", F16, [1, 4, "past", 32]), ("k_new", F16, [1, 4, 1, 32]),
              ("past_v", F16, [1, 4, "past", 32]), ("v_new", F16, [1, 4, 1, 32])]
    outputs = [("y", F16, [1, 1, 4, 32]), ("k", F16, [1, 4, "total", 32]), ("v", F16, [1, 4, "total", 32])]
    m = model(nodes, inputs, outputs, [const("c", 32 ** -0.5, np.float16)])
    res = fuse(m)
    assert rules_of(res) == {"Attention": 1}
    assert res.validation.ok and res.deployed.ok and all(c.ok for c in res.kernel_checks)
    # The random checks of a decode step run over many keys (with one, the softmax is 1 and y is that key's v).
    from asc_onnx.soc import SOCS
    from asc_onnx.verify_kernels import check, random_inputs

    k = res.kernels[0]
    for dim in (4, 7):
        q, kk, v = random_inputs(k, F16, (1, 4, 1, 32), dim=dim)
        assert kk.shape == (1, 4, 16 * dim + 3, 32) and v.shape == kk.shape
        c = check(k, [q, kk, v], SOCS["Ascend910B"], f"dims={dim}")
        assert c.ok, (c.error, c.max_abs)


def _repeat_and_attend() -> list:
    """repeat_kv of k and v (shapes "shape5", "shape4", axis "ax2") and the attention over the repeats (scale "c")."""
    nodes = []
    for x in ("k", "v"):
        nodes += [helper.make_node("Unsqueeze", [x, "ax2"], [f"{x}5"]),
                  helper.make_node("Expand", [f"{x}5", "shape5"], [f"{x}e"]),
                  helper.make_node("Reshape", [f"{x}e", "shape4"], [f"{x}r"])]
    return nodes + [helper.make_node("Transpose", ["kr"], ["kt"], perm=[0, 1, 3, 2]),
                    helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "c"], ["ss"]),
                    helper.make_node("Add", ["ss", "mask"], ["sm"]),
                    helper.make_node("Softmax", ["sm"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "vr"], ["o"])]


def _gqa_model(computed: bool, dt=F32, heads: int = 8, kv_heads: int = 2, sq="seq"):
    """GQA as LLaMA's repeat_kv exports it: Unsqueeze, Expand and Reshape of the KV heads to q's, the shapes
    computed from Shape (the legacy exporter, dynamic batch and sequence) or constants."""
    g = heads // kv_heads
    nodes, inits = [], [const("ax2", [2], np.int64), const("c", 0.25, NP[dt])]
    if computed:
        inits += [const("i0", [0], np.int64), const("i1", [1], np.int64), const("i2", [2], np.int64),
                  const("gg", [g], np.int64), const("hh", [heads], np.int64), const("d16", [16], np.int64)]
        nodes += [helper.make_node("Shape", ["k"], ["ks"]),
                  helper.make_node("Gather", ["ks", "i0"], ["kb"], axis=0),
                  helper.make_node("Gather", ["ks", "i1"], ["kh"], axis=0),
                  helper.make_node("Gather", ["ks", "i2"], ["kl"], axis=0),
                  helper.make_node("Concat", ["kb", "kh", "gg", "kl", "d16"], ["shape5"], axis=0),
                  helper.make_node("Concat", ["kb", "hh", "kl", "d16"], ["shape4"], axis=0)]
    else:
        inits += [const("shape5", [1, kv_heads, g, 8, 16], np.int64), const("shape4", [1, heads, 8, 16], np.int64)]
    nodes += _repeat_and_attend()
    s = sq if computed else 8
    b = "batch" if computed else 1
    return model(nodes, [("q", dt, [b, heads, s, 16]), ("k", dt, [b, kv_heads, s, 16]),
                         ("v", dt, [b, kv_heads, s, 16]), ("mask", dt, [b, 1, s, s])],
                 [("o", dt, [b, heads, s, 16])], inits)


@pytest.mark.parametrize("computed", [True, False], ids=["shapes computed", "shapes constant"])
def test_grouped_query_attention_reads_each_kv_head_once(computed):
    """GQA's repeat of the KV heads (2 heads to 8) is part of the op: canonicalization gives the repeat constant
    shapes where shape inference shows it, the op takes K and V with their own 2 heads (nothing repeats them in
    memory), and it is emulated against onnxruntime at two bindings and on captured inputs, and deployed."""
    res = fuse(_gqa_model(computed))
    assert rules_of(res) == {"Attention": 1}, res.near_misses
    k = res.kernels[0]
    assert k.ir.kv_repeat and k.op.instances[0].input_shapes[1][1] == 2
    assert not [n for n in res.asc_model.graph.node if n.op_type in ("Expand", "Reshape", "Unsqueeze")]
    checks = [c for c in res.kernel_checks if c.op_type == k.op.op_type]
    assert len(checks) >= 2 and all(c.ok for c in checks), checks
    assert res.validation.ok and res.deployed.ok


def test_repeat_interleave_by_tile_reads_each_kv_head_once():
    """torch's legacy export of ``repeat_interleave(g, dim=1)``: Unsqueeze, Tile by [1, 1, g, 1, 1] and a Reshape to
    a target computed from the Tile's Shape. Canonicalization makes the Tile an Expand (it repeats an axis of 1)
    and the repeat is taken into the op, as LLaMA's repeat_kv is."""
    inits = [const("ax2", [2], np.int64), const("reps", [1, 1, 4, 1, 1], np.int64), const("c", 0.25, np.float32),
             const("s0", [0], np.int64), const("s1", [1], np.int64), const("s3", [3], np.int64),
             const("s5", [5], np.int64), const("m1", [-1], np.int64)]
    nodes = []
    for x in ("k", "v"):
        nodes += [helper.make_node("Unsqueeze", [x, "ax2"], [f"{x}5"]),
                  helper.make_node("Tile", [f"{x}5", "reps"], [f"{x}e"]),
                  helper.make_node("Shape", [f"{x}e"], [f"{x}s"]),
                  helper.make_node("Slice", [f"{x}s", "s0", "s1", "s0"], [f"{x}b"]),
                  helper.make_node("Slice", [f"{x}s", "s3", "s5", "s0"], [f"{x}sd"]),
                  helper.make_node("Concat", [f"{x}b", "m1", f"{x}sd"], [f"{x}shape"], axis=0),
                  helper.make_node("Reshape", [f"{x}e", f"{x}shape"], [f"{x}r"])]
    nodes += [helper.make_node("Transpose", ["kr"], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "c"], ["ss"]),
              helper.make_node("Softmax", ["ss"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "vr"], ["o"])]
    m = model(nodes, [("q", F32, ["b", 8, "s", 16]), ("k", F32, ["b", 2, "s", 16]), ("v", F32, ["b", 2, "s", 16])],
              [("o", F32, ["b", 8, "s", 16])], inits)
    res = fuse(m)
    assert rules_of(res) == {"Attention": 1} and res.kernels[0].ir.kv_repeat, res.near_misses
    assert [n.op_type for n in res.asc_model.graph.node] == ["AscAttention"]
    assert all(c.ok for c in res.kernel_checks) and res.validation.ok and res.deployed.ok


@pytest.mark.parametrize("sq,keys", [(8, 8), (1, 6000)], ids=["prefill", "decode, split keys"])
def test_a_tile_of_the_heads_reads_each_kv_head_once(sq, keys):
    """``k.repeat(1, g, 1, 1)`` as torch's legacy export writes it (an Expand by ones, then Tile by [1, g, 1, 1]):
    query head h reads KV head h mod Hkv. Canonicalization writes the Tile as an Unsqueeze at axis 1, an Expand and
    a Reshape, the op takes it in, and its kernel maps the heads so: emulated against onnxruntime, prefill and a
    decode step whose keys split over cores (no fold of a KV head's query heads, which lie Hkv apart)."""
    from asc_onnx.emulator.harness import run
    from asc_onnx.soc import SOCS
    from asc_onnx.verify_kernels import check

    inits = [const("ones", [1, 1, 1, 1], np.int64), const("reps", [1, 4, 1, 1], np.int64),
             const("c", 0.25, np.float16)]
    nodes = []
    for x in ("k", "v"):
        nodes += [helper.make_node("Expand", [x, "ones"], [f"{x}1"]),
                  helper.make_node("Tile", [f"{x}1", "reps"], [f"{x}r"])]
    nodes += [helper.make_node("Transpose", ["kr"], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "c"], ["ss"]),
              helper.make_node("Softmax", ["ss"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "vr"], ["o"])]
    m = model(nodes, [("q", F16, [1, 8, "sq", 16]), ("k", F16, [1, 2, "sk", 16]), ("v", F16, [1, 2, "sk", 16])],
              [("o", F16, [1, 8, "sq", 16])], inits)
    res = fuse(m, emulate=False)
    k = res.kernels[0]
    assert rules_of(res) == {"Attention": 1} and k.ir.kv_repeat and k.ir.kv_tiled
    assert [n.op_type for n in res.asc_model.graph.node] == ["AscAttention"]
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 8, sq, 16)).astype(np.float16)
    kk, v = (rng.standard_normal((1, 2, keys, 16)).astype(np.float16) for _ in range(2))
    got = run(k.ir, k.files, f"{k.op.op_type}TilingData", [q, kk, v], SOCS["Ascend910B"])
    assert (got.cube["splits"] > 1) == (sq == 1)
    c = check(k, [q, kk, v], SOCS["Ascend910B"], "tiled heads")
    assert c.ok, (c.error, c.max_abs)


@pytest.mark.parametrize("dim", [2, 1], ids=["key length", "heads"])
def test_a_repeat_whose_length_is_read_is_still_taken_in(dim):
    """LLaMA's legacy export reads the repeated K's length (``key_states.shape[-2]``, to slice its causal mask):
    the Shape then reads the KV heads' K, whose length is the same, and the repeat is taken into the op. A read of
    the repeated head count keeps the repeat outside."""
    m = _gqa_model(True)
    g = m.graph
    g.initializer.append(const("which", [dim], np.int64))
    g.node.extend([helper.make_node("Shape", ["kr"], ["krs"]), helper.make_node("Gather", ["krs", "which"], ["n"])])
    g.output.append(helper.make_tensor_value_info("n", helper.TensorProto.INT64, [1]))
    res = fuse(m)
    assert rules_of(res) == {"Attention": 1}, res.near_misses
    assert res.kernels[0].ir.kv_repeat == (dim == 2)
    assert all(c.ok for c in res.kernel_checks) and res.validation.ok and res.deployed.ok


def test_a_repeat_of_k_alone_stays_outside():
    """K repeated in the graph but V handed over with every head already: the op takes both as they reach the
    attention (the variant without the repeat), and K's repeat stays a node of the model."""
    m = _gqa_model(False)
    g = m.graph
    keep = [n for n in g.node if n.output[0] not in ("v5", "ve", "vr")]
    for n in keep:
        if n.op_type == "MatMul" and n.input[1] == "vr":
            n.input[1] = "v"
    del g.node[:]
    g.node.extend(keep)
    g.input[2].type.tensor_type.shape.dim[1].dim_value = 8
    res = fuse(m)
    assert rules_of(res) == {"Attention": 1}
    assert not res.kernels[0].ir.kv_repeat
    assert [n.op_type for n in res.asc_model.graph.node if n.op_type == "Expand"] == ["Expand"]
    assert all(c.ok for c in res.kernel_checks) and res.validation.ok


@pytest.mark.parametrize("dt,fill", [(F32, float(np.finfo(np.float32).min)), (F16, -np.inf),
                                     (F16, float(np.finfo(np.float16).min))],
                         ids=["fp32 lowest", "-inf", "fp16 lowest"])
def test_a_boolean_mask_through_where_on_the_scores(dt, fill):
    """GPT-2's eager form, Softmax(Where(causal, scores, fill)): canonicalization makes the mask additive where that
    is exact (a fill of -inf or float32's lowest) and the op takes Where(causal, 0, fill) as its mask; a float16
    fill of -65504 also takes Cast(causal) as a keep mask the kernel multiplies the scores by first. Each emulated
    and deployed."""
    from onnx import TensorProto

    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Div", ["s", "c"], ["ss"]),
             helper.make_node("Where", ["causal", "ss", "fill"], ["sm"]),
             helper.make_node("Softmax", ["sm"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["o"])]
    m = model(nodes, [("q", dt, [1, 4, "s", 32]), ("k", dt, [1, 4, "s", 32]), ("v", dt, [1, 4, "s", 32]),
                      ("causal", TensorProto.BOOL, [1, 1, "s", "s"])], [("o", dt, [1, 4, "s", 32])],
              [const("c", 32 ** 0.5, NP[dt]), const("fill", fill, NP[dt])])
    res = fuse(m)
    assert res.validation.ok and res.deployed.ok and all(c.ok for c in res.kernel_checks)
    assert rules_of(res) == {"Attention": 1}, res.near_misses
    k = res.kernels[0]
    assert k.ir.has_keep == (fill != -np.inf and dt == F16)
    if k.ir.has_keep:  # a causal mask with a row masked everywhere: the uniform row, as onnxruntime computes it
        from asc_onnx.soc import SOCS
        from asc_onnx.verify_kernels import check, reference

        rng = np.random.default_rng(4)
        q, kk, v = (rng.standard_normal((1, 4, 16, 32)).astype(np.float16) for _ in range(3))
        keep = np.tril(np.ones((16, 16), np.float16))[None, None].copy()
        keep[..., 3, :] = 0
        mask = np.where(keep == 1, 0, fill).astype(np.float16)
        ref = reference(k.op, [q, kk, v, keep, mask])[0]
        assert np.allclose(ref[0, :, 3], v.astype(np.float32).mean(axis=2), atol=1e-2)
        c = check(k, [q, kk, v, keep, mask], SOCS["Ascend910B"], "masked row")
        assert c.ok, (c.error, c.max_abs)


def test_310p_keeps_the_smaller_fusions():
    """310P has no attention kernel: the region is matched again and keeps ScaleMaskSoftmax, not its nodes, and
    the report says why."""
    res = fuse(attention_model(dt=F16), soc="Ascend310P")
    assert rules_of(res) == {"ScaleMaskSoftmax": 1}
    assert res.validation.ok
    miss = [n for n in res.near_misses if n.rule == "Attention"]
    assert len(miss) == 1 and "310P" in miss[0].reason and "smaller fusions" in miss[0].reason


def test_a_refused_shape_keeps_the_smaller_fusions():
    """A mask broadcast along the keys ([.., Sq, 1]) is refused by the kernel's host tiling: the emulator rung
    rejects the op and the region keeps its softmax fusion."""
    res = fuse(attention_model(mask=(2, 1, "seq", 1)))
    assert rules_of(res) == {"ScaleMaskSoftmax": 1}
    miss = [n for n in res.near_misses if n.rule == "Attention"]
    assert len(miss) == 1 and "broadcasts along the keys" in miss[0].reason


def test_outputs_of_the_probabilities_stop_the_match():
    """A model that also outputs the attention probabilities (output_attentions) keeps them: no Attention op."""
    m = attention_model()
    m.graph.output.append(helper.make_tensor_value_info("p", F32, [2, 4, "seq", "seq"]))
    res = fuse(m)
    assert "Attention" not in rules_of(res)


@pytest.mark.fast
def test_attention_ops_in_the_model_get_a_clear_line():
    """ONNX's opset-23 Attention and onnxruntime's com.microsoft attention ops are not served, each with its
    reason in the report's near misses."""
    nodes = [helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="com.microsoft", num_heads=2),
             helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "mha", [helper.make_tensor_value_info(n, F32, [1, 8, 16]) for n in "qkv"],
                          [helper.make_tensor_value_info("z", F32, [1, 8, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    r = asc_onnx.inspect(m)
    assert any(n.rule == "Attention" and "com.microsoft.MultiHeadAttention" in n.reason for n in r.near_misses)
    nodes = [helper.make_node("Attention", ["q", "k", "v"], ["y"])]
    g = helper.make_graph(nodes, "att23", [helper.make_tensor_value_info(n, F32, [1, 2, 8, 16]) for n in "qkv"],
                          [helper.make_tensor_value_info("y", F32, [1, 2, 8, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
    r = asc_onnx.inspect(m)
    assert any(n.rule == "Attention" and "opset 23" in n.reason for n in r.near_misses)


def test_the_guard_weighs_attention_against_the_smaller_fusions():
    """The region without the attention op keeps ScaleMaskSoftmax: the estimate of that (the MatMuls unfused, the
    softmax fused) is what an attention op must beat, and it is below the unfused nodes' estimate."""
    from asc_onnx.decide import smaller_kernels, smaller_us
    from asc_onnx.estimate import estimate_at
    from asc_onnx.soc import SOCS

    res = asc_onnx.fuse(attention_model(dt=F16, b=1, h=8, sq=512, d=64, mask=(1, 1, 512, 512)), None,
                        options=asc_onnx.FuseOptions(emulate=False, judge=False), validate=False)
    k = res.kernels[0]
    soc = SOCS["Ascend910B"]
    e = estimate_at(k, [[1, 8, 512, 64]] * 3 + [[1, 1, 512, 512]], soc)
    smaller = smaller_kernels(k, e.shapes, soc)
    assert smaller is not None and [s.op.rule for s, _ in smaller] == ["ScaleMaskSoftmax"]
    assert 0 < smaller_us(smaller, e, None, soc) < e.unfused_us


@pytest.mark.parametrize("dt", [F32, F16])
def test_rows_of_whole_repeats_keep_their_statistics_in_vector_registers(dt):
    """Rows of a multiple of 64 keys take the max and sum by ReduceRepeat and Brcb (no scalar wait): emulated
    against onnxruntime with a causal mask (a fully masked row never occurs in a causal mask) at Sk = 128."""
    m = attention_model(dt=dt, b=1, h=2, sq=128, d=64, mask=(1, 1, 128, 128))
    res = fuse(m)
    assert rules_of(res) == {"Attention": 1}
    assert all(c.ok for c in res.kernel_checks) and res.deployed.ok


@pytest.mark.parametrize("dt,sk", [(F32, 8), (F16, 64)])
def test_fully_masked_rows_are_what_onnxruntime_computes(dt, sk):
    """A row masked with -inf everywhere is NaN in onnxruntime's Softmax, and in the kernel (the count forms and
    the whole-repeat form). A row at the dtype's lowest finite value (HF's masks): in fp32 the mask absorbs the
    scores and onnxruntime gives the plain average of v; in fp16 it keeps them (-65504 plus a score is still
    ordered), and the row is the unmasked softmax's. The kernel matches either, element by element, NaN positions
    included."""
    from asc_onnx.soc import SOCS
    from asc_onnx.verify_kernels import check, reference

    npd = NP[dt]
    res = fuse(attention_model(dt=dt, b=1, h=2, sq=sk, d=16, mask=(1, 1, sk, sk)), emulate=False)
    k = res.kernels[0]
    rng = np.random.default_rng(0)
    q, kk, v = (rng.standard_normal((1, 2, sk, 16)).astype(npd) for _ in range(3))
    for fill, nan in ((-np.inf, True), (np.finfo(npd).min, False)):
        mask = np.zeros((1, 1, sk, sk), npd)
        mask[0, 0, 1, :] = fill
        ref = reference(k.op, [q, kk, v, mask])[0]
        assert bool(np.isnan(ref[0, :, 1]).all()) == nan
        if not nan:  # what onnxruntime computes there, as the docstring says
            s = q.astype(np.float64) @ np.swapaxes(kk.astype(np.float64), -1, -2) * 16 ** -0.5
            p = np.exp(s - s.max(-1, keepdims=True))
            soft = (p / p.sum(-1, keepdims=True) @ v.astype(np.float64))[0, :, 1]
            want = v.astype(np.float64).mean(axis=2)[0] if dt == F32 else soft
            np.testing.assert_allclose(ref[0, :, 1], want, atol=1e-5 if dt == F32 else 2e-3)
        c = check(k, [q, kk, v, mask], SOCS["Ascend910B"], "masked row")
        assert c.ok, (fill, c.error, c.max_abs)


def test_attention_runs_under_cann_tilings_at_deployment_shapes():
    """Where the open CANN sources are beside the repository, every attention check runs under the two tilings
    CANN's own MultiCoreMatmulTiling computes in the generated calc, and that calc finds tilings for the
    benchmark's deployment shapes (prefill and decode, fp16, head dims 64 and 128)."""
    from asc_onnx.emulator import cann_tiling
    from asc_onnx.soc import SOCS

    if cann_tiling.source_root() is None:
        pytest.skip("the open CANN sources are not beside the repository")
    res = fuse(attention_model(dt=F16))
    assert {c.tiling for c in res.kernel_checks} == {"CANN"} and all(c.ok for c in res.kernel_checks)
    k = res.kernels[0]
    cases = [[[1, 32, 2048, 128], [1, 32, 2048, 128], [1, 32, 2048, 128], [1, 1, 2048, 2048]],
             [[4, 8, 4096, 64], [4, 8, 4096, 64], [4, 8, 4096, 64], [4, 1, 4096, 4096]],
             [[4, 32, 1, 128], [4, 32, 4096, 128], [4, 32, 4096, 128], [4, 1, 1, 4096]]]
    got = cann_tiling.tilings_for(k.ir, k.files, SOCS["Ascend910B"], F16, cases)
    assert all(isinstance(t, dict) and t["qk.baseM"] > 0 and t["pv.baseN"] > 0 for t in got), got


def _long_rows(dt, sq: int, sk: int, d: int = 64, trans: bool = True):
    """An Attention op over symbolic Sq and Sk (fp16 or fp32, causal-style mask [1,1,Sq,Sk]; k as [Sk, D] or given
    transposed) and seeded q, k, v and a mask whose last 50 keys sit at the dtype's lowest finite value."""
    res = fuse(attention_model(dt=dt, b=1, h=2, sq="sq", sk="sk", d=d, mask=(1, 1, "sq", "sk"), trans=trans),
               emulate=False)
    npd = NP[dt]
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, sq, d)).astype(npd)
    kk = rng.standard_normal((1, 2, sk, d) if trans else (1, 2, d, sk)).astype(npd)
    v = rng.standard_normal((1, 2, sk, d)).astype(npd)
    mask = np.zeros((1, 1, sq, sk), npd)
    mask[..., sk - 50:] = np.finfo(npd).min
    return res.kernels[0], [q, kk, v, mask]


@pytest.mark.parametrize("dt,sq,sk,trans", [(F16, 64, 1100, True), (F32, 40, 2048, True), (F16, 1, 1500, True),
                                            (F16, 24, 1100, False)])
def test_the_online_softmax_walks_the_keys_in_blocks(dt, sq, sk, trans):
    """Rows longer than one KV block: the kernel rescales its running max, sum and output block by block (a tail
    block of 76 keys takes a repeat of its own, whole blocks one instruction per chunk; a decode row of 1500 keys;
    k given transposed, its KV blocks read as columns Sk apart by SetOrgShape), and matches onnxruntime on the whole
    row."""
    from asc_onnx.emulator.harness import run
    from asc_onnx.soc import SOCS
    from asc_onnx.verify_kernels import check

    k, inputs = _long_rows(dt, sq, sk, trans=trans)
    got = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, SOCS["Ascend910B"])
    assert got.cube["kv_blocks"] == -(-sk // got.cube["kv_block"]) > 1
    c = check(k, inputs, SOCS["Ascend910B"], "long rows")
    assert c.ok, (c.error, c.max_abs)


@pytest.mark.parametrize("dt,sq,trans", [(F16, 1, True), (F32, 4, True), (F16, 4, False)])
def test_decode_splits_the_keys_over_cores(dt, sq, trans):
    """Decode with two items for 48 vector cores: the keys in parts on cores of their own, each part's rows of
    output and their max and sum into the workspace, combined after SyncAll. Left padding with -inf over whole parts
    (their weight is exp(lowest - max) = 0), the last keys at the lowest finite value, a row masked everywhere
    (NaN, as onnxruntime computes it); fp16 and fp32, k given transposed. Emulated against onnxruntime."""
    from asc_onnx.emulator.harness import run
    from asc_onnx.soc import SOCS
    from asc_onnx.verify_kernels import check, reference

    k, (q, kk, v, mask) = _long_rows(dt, sq, 5000, trans=trans)
    mask[..., 0, :1200] = -np.inf
    if sq > 1:
        mask[0, 0, 2, :] = -np.inf
    ref = reference(k.op, [q, kk, v, mask])[0]
    assert np.isfinite(ref[0, :, 0]).all() and (sq == 1 or np.isnan(ref[0, :, 2]).all())
    got = run(k.ir, k.files, f"{k.op.op_type}TilingData", [q, kk, v, mask], SOCS["Ascend910B"])
    assert got.cube["splits"] > 2 and got.cube["units"] == 2 * got.cube["splits"]
    c = check(k, [q, kk, v, mask], SOCS["Ascend910B"], "split keys")
    assert c.ok, (c.error, c.max_abs)


def test_a_row_masked_over_its_first_kv_block_is_finite():
    """Left padding with -inf over more keys than one KV block: the first block's running max stays at the lowest
    finite value (exp of the masked keys is 0, not NaN) and the row is the softmax of its other keys; a row masked
    everywhere is NaN, as in onnxruntime."""
    from asc_onnx.soc import SOCS
    from asc_onnx.verify_kernels import check, reference

    k, (q, kk, v, mask) = _long_rows(F16, 16, 1200)
    mask[0, 0, 3, :1030] = -np.inf
    mask[0, 0, 5, :] = -np.inf
    ref = reference(k.op, [q, kk, v, mask])[0]
    assert np.isfinite(ref[0, :, 3]).all() and np.isnan(ref[0, :, 5]).all()
    c = check(k, [q, kk, v, mask], SOCS["Ascend910B"], "left padding")
    assert c.ok, (c.error, c.max_abs)


@pytest.mark.parametrize("form", ["plain", "gqa"])
def test_bf16_inputs_over_kv_blocks(form):
    """bf16 q, k, v and mask through the same kernel (the fp32 body is the reference, bf16 tolerances): 1100 keys
    in two KV blocks, and GQA 4:1 at 600."""
    from onnx import TensorProto

    from asc_onnx.soc import SOCS
    from asc_onnx.verify_kernels import check, matmul_inputs

    m, lead = ((attention_model(b=1, h=2, d=64, mask=(1, 1, "seq", "seq")), (1, 2, 1100)) if form == "plain"
               else (_gqa_model(True), (1, 8, 600)))
    k = fuse(m, emulate=False).kernels[0]
    inputs = matmul_inputs(k, TensorProto.BFLOAT16, lead, np.random.default_rng(0))
    c = check(k, inputs, SOCS["Ascend910B"], "bf16")
    assert c.ok and c.dtype == "bfloat16_t", (c.error, c.max_abs)


@pytest.mark.parametrize("mask,keys", [((1, 1, 1, "total"), 1100), ((1, 8, 1, "total"), 1100),
                                      ((2, 8, 1, "total"), 1100), ((2, 8, 1, "total"), 6000)],
                         ids=["mask over heads", "mask per head", "batch 2, mask per batch and head",
                              "batch 2, split keys"])
def test_grouped_decode_folds_a_kv_heads_query_heads_into_one_item(mask, keys):
    """A decode step (one query row) with 2 KV heads for 8 query heads: an item is a KV head's 4 query heads (rows
    of q and y that lie together), so the cube reads each KV block once per group; the mask broadcast over heads or
    one row per head. Emulated against onnxruntime at 1100 keys (two KV blocks), and at 6000 keys, where the four
    items' keys are split over cores."""
    from asc_onnx.emulator.harness import run
    from asc_onnx.soc import SOCS
    from asc_onnx.verify_kernels import check

    nodes = _repeat_and_attend()
    inits = [const("ax2", [2], np.int64), const("shape5", [1, 1, 4, 1, 1], np.int64),
             const("shape4", [0, 8, -1, 16], np.int64), const("c", 0.25, np.float16)]
    b = mask[0]
    m = model(nodes, [("q", F16, [b, 8, 1, 16]), ("k", F16, [b, 2, "total", 16]), ("v", F16, [b, 2, "total", 16]),
                      ("mask", F16, list(mask))], [("o", F16, [b, 8, 1, 16])], inits)
    res = fuse(m)
    assert rules_of(res) == {"Attention": 1} and res.kernels[0].ir.kv_repeat
    assert all(c.ok for c in res.kernel_checks) and res.validation.ok and res.deployed.ok
    k = res.kernels[0]
    rng = np.random.default_rng(2)
    q = rng.standard_normal((b, 8, 1, 16)).astype(np.float16)
    kk, v = (rng.standard_normal((b, 2, keys, 16)).astype(np.float16) for _ in range(2))
    mk = np.zeros(tuple(keys if d == "total" else d for d in mask), np.float16)
    mk[..., 1000:] = np.finfo(np.float16).min
    if mask[1] == 8:
        mk[-1, 5, 0, :300] = np.finfo(np.float16).min  # one head's own padding (in the last batch)
    got = run(k.ir, k.files, f"{k.op.op_type}TilingData", [q, kk, v, mk], SOCS["Ascend910B"])
    assert got.cube["items"] == 2 * b  # each KV head of each batch one item
    assert (got.cube["kv_blocks"], got.cube["splits"]) == (2, 1) if keys == 1100 else got.cube["splits"] > 1
    c = check(k, [q, kk, v, mk], SOCS["Ascend910B"], "grouped decode")
    assert c.ok, (c.error, c.max_abs)


@pytest.mark.fast
def test_a_where_fill_with_no_additive_form_gets_a_near_miss():
    """Where(causal, scores, +inf) has no additive form (the fill is neither finite nor -inf): the region keeps its
    smaller fusions and the report says why."""
    from onnx import TensorProto

    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Where", ["causal", "s", "fill"], ["sm"]),
             helper.make_node("Softmax", ["sm"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["o"])]
    m = model(nodes, [("q", F32, [1, 4, 8, 16]), ("kt", F32, [1, 4, 16, 8]), ("v", F32, [1, 4, 8, 16]),
                      ("causal", TensorProto.BOOL, [1, 1, 8, 8])], [("o", F32, [1, 4, 8, 16])],
              [const("fill", np.inf, np.float32)])
    res = fuse(m, emulate=False)
    assert "Attention" not in rules_of(res)
    assert any(n.rule == "Attention" and "no additive form" in n.reason for n in res.near_misses), res.near_misses


def test_a_where_fill_wider_than_its_mask_falls_back_cleanly():
    """A finite fill of shape [1, 1, 1, 1] against a [S, S] mask: the additive mask's shape is left unknown and the
    keep form does not match (a review found the check crashing the whole fuse); the region keeps its smaller
    fusions and the model validates."""
    from onnx import TensorProto

    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Where", ["causal", "s", "fill"], ["sm"]),
             helper.make_node("Softmax", ["sm"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["o"])]
    m = model(nodes, [("q", F16, [1, 4, "s", 16]), ("kt", F16, [1, 4, 16, "s"]), ("v", F16, [1, 4, "s", 16]),
                      ("causal", TensorProto.BOOL, ["s", "s"])], [("o", F16, [1, 4, "s", 16])],
              [const("fill", np.full((1, 1, 1, 1), np.finfo(np.float16).min), np.float16)])
    res = fuse(m)
    assert "Attention" not in rules_of(res) and res.validation.ok


def test_the_host_tiling_asks_for_each_product_shape_once():
    """TilingFunc's two Matmul tilings (q @ k^T, P @ v) depend on the blocks only: a launch at a key count seen
    before, or at another past one KV block, makes no GetTiling call (counted by the emulator's tiling, which the
    tiling program runs against here); a new block shape asks again."""
    from asc_onnx.emulator import cann_tiling
    from asc_onnx.soc import SOCS

    k = fuse(attention_model(dt=F16, b=1, h=8, d=64, mask=None), emulate=False).kernels[0]
    decode = [[(1, 8, 1, 64), (1, 8, sk, 64), (1, 8, sk, 64)] for sk in (3000, 3000, 5000, 9000)]
    prefill = [[(1, 8, 256, 64), (1, 8, 256, 64), (1, 8, 256, 64)]]  # a KV block of 256 keys: new products
    got = cann_tiling.tilings_for(k.ir, k.files, SOCS["Ascend910B"], F16, decode + prefill, own=True)
    assert all(isinstance(g, dict) for g in got), got
    assert [g["getTilingCalls"] for g in got] == [2, 2, 2, 2, 4], got
    assert got[3]["qk.baseN"] == got[0]["qk.baseN"] and got[4]["qk.N"] == 256


@pytest.mark.parametrize("dt,sq,sk,dv", [(F16, 5, 67, 40), (F32, 33, 1100, 24), (F16, 1, 6000, 64)],
                         ids=["ragged fp16", "fp32 two KV blocks", "decode, split keys"])
def test_the_workspace_ring_is_512_byte_aligned(dt, sq, sk, dv):
    """Every stage of scores, of P and of P @ v, and every vector core's ring, start on a 512-byte boundary, at
    block shapes whose plain products are not multiples of it; the kernel still matches onnxruntime there."""
    from asc_onnx.soc import SOCS
    from asc_onnx.verify_kernels import check

    npd = NP[dt]
    k = fuse(attention_model(dt=dt, b=1, h=2, sq="seq", sk="keys", d=32, dv=dv, mask=None), emulate=False).kernels[0]
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 2, sq, 32)).astype(npd)
    kk = rng.standard_normal((1, 2, sk, 32)).astype(npd)
    v = rng.standard_normal((1, 2, sk, dv)).astype(npd)
    c = check(k, [q, kk, v], SOCS["Ascend910B"], "aligned ring")
    assert c.ok, (c.error, c.max_abs)
    size = np.dtype(npd).itemsize
    assert c.cube["score_stage"] * 4 % 512 == 0 and c.cube["score_stage"] * size % 512 == 0, c.cube
    assert c.cube["out_stage"] * 4 % 512 == 0 and c.cube["ws_core_bytes"] % 512 == 0, c.cube


@pytest.mark.parametrize("dt,d,sq,sk", [(F16, 15, 37, 37), (F32, 15, 37, 37), (F16, 20, 5, 1100), (F16, 15, 1, 6000)],
                         ids=["fp16 15", "fp32 15", "fp16 20, two KV blocks", "fp16 15, decode split keys"])
def test_head_dims_of_no_multiple_of_8_are_padded_not_refused(dt, d, sq, sk):
    """A head dim like PP-OCR's 15: P @ v's rows are padded to 16 in the workspace and UB (the cube writes d columns
    of each, y gets d), emulated against onnxruntime under CANN's tilings; the combine of split keys too."""
    from asc_onnx.soc import SOCS
    from asc_onnx.verify_kernels import check

    npd = NP[dt]
    k = fuse(attention_model(dt=dt, b=1, h=2, sq="seq", sk="keys", d=d, mask=None), emulate=False).kernels[0]
    rng = np.random.default_rng(4)
    q = rng.standard_normal((1, 2, sq, d)).astype(npd)
    kk, v = (rng.standard_normal((1, 2, sk, d)).astype(npd) for _ in range(2))
    c = check(k, [q, kk, v], SOCS["Ascend910B"], f"head dim {d}")
    assert c.ok and not c.refused, (c.error, c.max_abs)
    assert c.cube["dv_rows"] == (d + 15) // 16 * 16 and (sq > 1 or c.cube["splits"] > 1), c.cube
