"""Attention as exporters write it: ``MatMul(Softmax(scale * MatMul(q, kT) + mask), v)``.

One pattern with optional parts: K transposed in the graph (a swap of its last two axes) or handed over transposed;
the scale as ``Mul`` or ``Div`` on the scores, on q and k (SDPA's decomposition) or none; an additive mask broadcast
over the scores or none; ``Softmax`` as an op or decomposed (``exp(s - max) / sum`` or ``exp(s) / sum`` over the
last axis); the legacy exporters' fp32 round trip of the probabilities (``Cast`` to float and back). A causal mask
built in the graph (``Trilu``, ``Range``/``Less`` chains, a traced triangle, ``Where`` to an additive mask),
recognised exactly (asc_onnx.causal), is computed by the op's body from q's and v's shapes, not taken as an input;
any other mask is an input of the op; a boolean mask applied to the scores by ``Where(mask, scores, fill)`` (GPT-2's
eager form) reaches the rule as canonicalization writes it: additive, and for a finite fill a score would move off,
with a keep mask the scores are multiplied by first (see asc_onnx.canonicalize); so are K and V after a KV-cache
``Concat`` (Sq may differ from Sk) and GPT-2's ``Split`` of one QKV projection. Grouped-query attention's repeat of
the KV heads (``Unsqueeze``, ``Expand``, ``Reshape``, given constant shapes by canonicalization) is part of the op:
K and V come in with their own heads and are never repeated in memory.
"""

from __future__ import annotations

from asc_onnx.causal import causal_fill, mask_nodes
from asc_onnx.checks import broadcasts, dims_match, last_axis
from asc_onnx.graph import attrs_of, const_array, is_const, onnx_dtype, same_dim
from asc_onnx.pattern import ANY, Const, ConstTensor, op, rule


def _swap_last(perm) -> bool:
    """A Transpose that swaps the last two axes and keeps the others in place."""
    perm = list(perm)
    return len(perm) >= 2 and perm[:-2] == list(range(len(perm) - 2)) and perm[-2:] == [len(perm) - 1,
                                                                                        len(perm) - 2]


def _probs(scores, keep, mask, softmax: str = "op"):
    # (keep: Where(mask, s, fill)'s multiplicative half where its sum with s would move off the fill)
    s = op.Add(op.Mul(scores, keep, _optional="keep"), mask, _optional="mask")
    if softmax == "op":
        p = op.Softmax(s, axis=ANY)
    else:  # decomposed: exp(s - max) / sum, or exp(s) / sum
        e = op.Exp(op.Sub(s, op.ReduceMax(s, axes=ANY, keepdims=1)) if softmax == "stable" else s)
        p = op.Div(e, op.ReduceSum(e, axes=ANY, keepdims=1))
    return op.Cast(op.Cast(p, to=ANY, _optional="cast"), to=ANY, _optional="cast")


def _repeat(x):
    """Grouped-query attention's repeat of the KV heads (LLaMA's repeat_kv, with the constant shapes
    canonicalization gives it): taken into the op, which then reads each KV head once."""
    u = op.Unsqueeze(x, axes=ANY, _optional="gqa")
    return op.Reshape(op.Expand(u, ConstTensor(), _optional="gqa"), ConstTensor(), _optional="gqa")


def _scores(q, k):
    q = op.Mul(q, Const("q_scale"), _optional="qk_scale")
    kt = op.Mul(op.Transpose(_repeat(k), perm=_swap_last, _optional="k_transpose"), Const("k_scale"),
                _optional="qk_scale")
    return op.MatMul(q, kt)


def attention_mul(q, k, v, keep, mask):
    return op.MatMul(_probs(op.Mul(_scores(q, k), Const("scale"), _optional="scale"), keep, mask), _repeat(v))


def attention_div(q, k, v, keep, mask):
    return op.MatMul(_probs(op.Div(_scores(q, k), Const("scale")), keep, mask), _repeat(v))


def attention_mul_stable(q, k, v, keep, mask):
    scores = op.Mul(_scores(q, k), Const("scale"), _optional="scale")
    return op.MatMul(_probs(scores, keep, mask, "stable"), _repeat(v))


def attention_div_stable(q, k, v, keep, mask):
    return op.MatMul(_probs(op.Div(_scores(q, k), Const("scale")), keep, mask, "stable"), _repeat(v))


def attention_mul_plain(q, k, v, keep, mask):
    scores = op.Mul(_scores(q, k), Const("scale"), _optional="scale")
    return op.MatMul(_probs(scores, keep, mask, "plain"), _repeat(v))


def attention_div_plain(q, k, v, keep, mask):
    return op.MatMul(_probs(op.Div(_scores(q, k), Const("scale")), keep, mask, "plain"), _repeat(v))


def _group(m) -> tuple[int, str | None]:
    """The KV heads' repeat factor g (1 without the repeat), or why the repeat is not a plain one of the heads:
    Unsqueeze at axis 2 of a rank-4 tensor, Expand by [1, 1, g, 1, 1] (repeat_kv: head h reads KV head h / g), or
    at axis 1 and by [1, g, 1, 1, 1] (a Tile of the heads: KV head h mod Hkv), the same for K and V; Reshape (to a
    constant target) merging the KV heads and g."""
    if not m.has_node("Expand"):
        return 1, None
    groups, axes = set(), set()
    for node in m.nodes:
        if node.op not in ("Unsqueeze", "Expand", "Reshape"):
            continue
        if node.op == "Unsqueeze":
            got = list(attrs_of(node).get("axes") or [])
        else:
            value = const_array(node.inputs[1], limit=64)
            got = [] if value is None else value.reshape(-1).tolist()
        src = node.inputs[0].shape
        if node.op == "Unsqueeze":
            if got not in ([2], [-3], [1], [-4]) or src is None or len(src) != 4:
                return 1, f"the Unsqueeze before the KV repeat is at axes {got}, not 1 or 2 of a rank-4 tensor"
            axes.add(got[0] % 5)
        if node.op == "Expand":
            if len(got) != 5 or got[0] != 1 or got[3:] != [1, 1] or min(got[1:3]) != 1 or max(got[1:3]) < 1:
                return 1, f"the KV repeat expands to {got}, not [1, 1, g, 1, 1] or [1, g, 1, 1, 1] (of the heads)"
            groups.add(max(got[1:3]))
            axes.add(1 if got[1] > 1 else 2)
        if node.op == "Reshape":  # merges the KV heads and g, keeping batch, sequence and head dim
            kv, out = node.inputs[0].shape, node.outputs[0].shape
            if kv is None or out is None or len(kv) != 5 or len(out) != 4 or not isinstance(kv[1], int) \
                    or out[1] != kv[1] * kv[2] or out[3] != kv[4] or not same_dim(out[0], kv[0]) \
                    or not same_dim(out[2], kv[3]):
                return 1, f"the KV repeat reshapes {kv} to {out} (by {got}), not [batch, heads, seq, head dim]"
    if len(groups) != 1:
        return 1, f"K and V are repeated by different factors {sorted(groups)}"
    if len(axes) != 1:
        return 1, "K and V are repeated in different orders of the heads (repeat_kv's and a Tile's)"
    return groups.pop(), None


def _check(m) -> str | None:
    reason = last_axis(m)
    if reason:
        return reason
    if m.has_node("Cast"):
        first, second = (n for n in m.nodes if n.op == "Cast")
        src = first.inputs[0]
        if int(first.attrs.get("to", 0)) != 1 or onnx_dtype(src) != onnx_dtype(second.outputs[0]):
            return "the Casts after Softmax are not a round trip through float32"
    q, kt, v = m.shape("q"), m.shape("k"), m.shape("v")
    if q is None or kt is None or v is None:
        return "q, k or v has an unknown shape (shape inference could not follow it); --input-shape may help"
    if not (len(q) == len(kt) == len(v) >= 3):
        return f"q {list(q)}, k {list(kt)} and v {list(v)} are not of one rank of at least 3 ([batch, heads, seq, dim])"
    if m.has_node("Transpose"):
        kt = [*kt[:-2], kt[-1], kt[-2]]
    group, reason = _group(m)
    if reason:
        return reason
    if group > 1:  # k and v reach the op before their repeat: H / g heads
        heads = kt[-3] * group if isinstance(kt[-3], int) else None
        if len(q) != 4 or heads is None or heads != q[-3] or v[-3] != kt[-3]:
            return f"q {list(q)}, k and v do not share their heads once K and V are repeated {group} times"
        kt, v = [*kt[:-3], heads, *kt[-2:]], [*v[:-3], heads, *v[-2:]]
    if not all(map(dims_match, q[:-2], kt[:-2])) or not all(map(dims_match, q[:-2], v[:-2])):
        return (f"q {list(q)}, k and v do not share their leading dims: a broadcast of K/V over heads (grouped-query "
                "attention without its repeat in the graph) is not served")
    d, dv = q[-1], v[-1]
    if not isinstance(d, int) or not isinstance(dv, int):
        return f"the head dims ({d}, {dv}) are not known: the kernel's tiling needs them"
    if not dims_match(kt[-2], d) or not dims_match(kt[-1], v[-2]):
        return f"q {list(q)}, k^T {list(kt)} and v {list(v)} do not chain as q @ k^T @ v"
    if m.has("keep"):  # Where's multiplicative half (canonicalization): beside the additive mask, of its shape
        if not m.has("mask") or m.dtype("keep") != m.dtype("q") or m.shape("keep") is None or m.shape("mask") is None \
                or list(m.shape("keep")) != list(m.shape("mask")) or is_const(m.tensor("keep")):
            return "a Mul of the scores before the mask is not a keep mask of the additive mask's shape"
    if m.has("mask"):
        ms = m.shape("mask")
        out = [*q[:-1], kt[-1]]
        if m.dtype("mask") != m.dtype("q"):
            return "the mask's dtype is not the scores'"
        if ms is None or not broadcasts(ms, out):
            return f"mask shape {ms} does not broadcast to the scores {out}"
    return None


def _derive(m) -> dict:
    """A mask that is exactly the causal triangle (asc_onnx.causal) is not an input: the body computes it from q's
    and v's shapes, and the kernel generates it and skips the KV blocks it masks whole."""
    if not m.has("mask") or m.has("keep"):
        return {}
    q, v = m.shape("q"), m.shape("v")
    fill = causal_fill(m.tensor("mask"), q[-2], v[-2])
    if fill is None:
        return {}
    dtype = m.dtype("mask")
    return {"mask": lambda opset: mask_nodes(fill, dtype, opset)}


RULES = [
    rule("Attention", attention_mul, attention_div, attention_mul_stable, attention_div_stable, attention_mul_plain,
         attention_div_plain, op_name="Attention", kernel="attention",
         doc="Softmax(scale * q @ k^T + mask) @ v: scaled dot-product attention (optional scale, mask, K transpose "
             "and fp32 round trip; Softmax as an op or decomposed), one kernel whose scores never form the whole "
             "[B, H, Sq, Sk] tensor in global memory",
         check=_check, derive=_derive),
]
