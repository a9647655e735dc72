"""Canonical forms of attention as exporters write it: head repeats (``repeat_kv``, ``Tile``, ``Expand`` by ones)
made constant and alike, boolean-masked scores made additive, and PyTorch's NaN guard between the softmax and P·V
moved after it. Each keeps every value the graph computes (:mod:`asc_onnx.canonicalize` says where and why); the
Attention rule then takes one form of each."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_graphsurgeon as gs

from .graph import attrs_of, const_array, masked_scores, onnx_dtype, producer, same_dim
from .graph_edit import bypass, drop_dead, fresh_name, set_inputs


def constant_head_repeats(graph: gs.Graph, outputs: set[int]) -> int:
    """Give each head repeat ``Reshape(Expand(Unsqueeze(x [B, Hkv, S, D], 2), [.., Hkv, g, S, D]), [B, H, S, D])``
    with inferred shapes the constant shapes ``[1, 1, g, 1, 1]`` and ``[0, H, -1, D]`` (see the module doc);
    returns how many. The shape computations left unread are dropped.

    What it rests on: shape inference's dims (equal sizes, or one symbol for the batch and the sequence of x and
    of the repeat); only repeats read by MatMul (directly, or through a Transpose and a scalar Mul) are rewritten,
    where a batch broadcast the Expand would have done is MatMul's own. One exception to "the same result": at a
    batch of 0 the -1 of ``[0, H, -1, D]`` cannot be inferred (onnxruntime refuses an empty tensor there)."""
    count = 0
    taken: set[str] | None = None  # tensor names, gathered at the first rewrite (most models have none)
    dropped: list[gs.Tensor] = []
    for rs in list(graph.nodes):
        if rs.op != "Reshape" or len(rs.inputs) != 2 or not rs.outputs or id(rs.outputs[0]) in outputs:
            continue
        if not _read_by_matmul(rs.outputs[0]):
            continue
        target = const_array(rs.inputs[1], limit=8)
        if target is None and rs.attrs.get("allowzero", 0) != 0:  # a 0 in [0, H, -1, D] would be a size
            continue
        ex = producer(rs.inputs[0])
        # (a Shape of the Expand may compute the Reshape's target, which the constant one replaces)
        if ex is None or ex.op != "Expand" or len(ex.inputs) != 2 \
                or any(r is not rs and (r.op != "Shape" or target is not None) for r in ex.outputs[0].outputs):
            continue
        un = producer(ex.inputs[0])
        if un is None or un.op != "Unsqueeze" or len(un.outputs[0].outputs) != 1:
            continue
        axes = attrs_of(un).get("axes")
        x = un.inputs[0]
        xs, es, ys = x.shape, ex.outputs[0].shape, rs.outputs[0].shape
        if axes not in ([2], [-3]) or xs is None or es is None or ys is None or len(xs) != 4 or len(es) != 5 \
                or len(ys) != 4:
            continue
        hkv, d, g, h = xs[1], xs[3], es[2], ys[1]
        if not all(isinstance(v, (int, np.integer)) and v > 0 for v in (hkv, d, g, h)) or h != hkv * g:
            continue
        if not (same_dim(es[0], xs[0]) and same_dim(es[1], hkv) and _same_length(es[3], x, 2)
                and same_dim(es[4], d) and same_dim(ys[0], xs[0]) and same_dim(ys[2], xs[2]) and ys[3] == d):
            continue
        if taken is None:
            taken = set(graph.tensors())
        dropped.append(ex.inputs[1])
        ex.outputs[0].shape = [*es[:3], xs[2], *es[4:]]  # (one name for the length shown equal: _same_length)
        _shapes_read_from(rs.outputs[0], x)
        ex.inputs[1] = gs.Constant(fresh_name(f"{ex.outputs[0].name}_shape", taken),
                                   np.array([1, 1, g, 1, 1], dtype=np.int64))
        if target is None:  # (a constant target already holds at every binding the model runs at)
            dropped.append(rs.inputs[1])
            rs.inputs[1] = gs.Constant(fresh_name(f"{rs.outputs[0].name}_shape", taken),
                                       np.array([0, h, -1, d], dtype=np.int64))
        count += 1
    drop_dead(dropped, outputs)
    return count


def tiles_of_ones(graph: gs.Graph) -> int:
    """``Tile(x, r)`` with a constant r whose repeats above 1 fall on axes where x is 1: ``Expand(x, r)``, the same
    elements; returns how many."""
    count = 0
    for node in graph.nodes:
        if node.op != "Tile" or len(node.inputs) != 2 or node.inputs[0].shape is None:
            continue
        reps = const_array(node.inputs[1], limit=8)
        shape = node.inputs[0].shape
        if reps is None or reps.ndim != 1 or len(reps) != len(shape) or (reps < 1).any():
            continue
        if all(int(r) == 1 or d == 1 for r, d in zip(reps, shape)) and (reps > 1).any():
            node.op = "Expand"
            count += 1
    return count


def expands_of_ones(graph: gs.Graph, outputs: set[int]) -> int:
    """Bypass ``Expand(x, [1, .., 1])`` of at most x's rank (x as it is); returns how many."""
    count = 0
    for node in list(graph.nodes):
        if node.op != "Expand" or len(node.inputs) != 2 or node.inputs[0].shape is None:
            continue
        shape = const_array(node.inputs[1], limit=8)
        if shape is None or shape.ndim != 1 or len(shape) > len(node.inputs[0].shape) or (shape != 1).any():
            continue
        count += bypass(graph, node, outputs)  # (a graph output keeps its node, both inputs)
    return count


def tiled_heads(graph: gs.Graph, outputs: set[int]) -> int:
    """``Tile(x [B, Hkv, S, D], [1, g, 1, 1])`` read by MatMul: ``Reshape(Expand(Unsqueeze(x, 1), [1, g, 1, 1, 1]),
    [0, g * Hkv, -1, D])``, the same elements (head h is KV head h mod Hkv); returns how many."""
    count = 0
    taken: set[str] | None = None
    for node in list(graph.nodes):
        if node.op != "Tile" or len(node.inputs) != 2 or id(node.outputs[0]) in outputs:
            continue
        x, reps = node.inputs[0], const_array(node.inputs[1], limit=8)
        xs = x.shape
        if reps is None or reps.ndim != 1 or len(reps) != 4 or xs is None or len(xs) != 4:
            continue
        g, hkv, d = int(reps[1]), xs[1], xs[3]
        if reps[0] != 1 or reps[2] != 1 or reps[3] != 1 or g < 2 or not isinstance(hkv, (int, np.integer)) \
                or not isinstance(d, (int, np.integer)) or hkv <= 0 or d <= 0 or not _read_by_matmul(node.outputs[0]):
            continue
        _shapes_read_from(node.outputs[0], x)
        if taken is None:
            taken = set(graph.tensors())
        base = node.outputs[0].name
        dtype = x.dtype
        unsq = gs.Variable(fresh_name(f"{base}_heads", taken), dtype=dtype, shape=[xs[0], 1, hkv, xs[2], d])
        wide = gs.Variable(fresh_name(f"{base}_tiled", taken), dtype=dtype, shape=[xs[0], g, hkv, xs[2], d])
        at = graph.nodes.index(node)
        graph.nodes.insert(at, gs.Node("Unsqueeze", name=fresh_name(f"{node.name}_unsqueeze", taken),
                                       inputs=[x, gs.Constant(fresh_name(f"{base}_axis", taken),
                                                              np.array([1], np.int64))], outputs=[unsq]))
        graph.nodes.insert(at + 1, gs.Node("Expand", name=fresh_name(f"{node.name}_expand", taken),
                                           inputs=[unsq, gs.Constant(fresh_name(f"{base}_reps", taken),
                                                                     np.array([1, g, 1, 1, 1], np.int64))],
                                           outputs=[wide]))
        node.op = "Reshape"
        node.attrs.clear()
        set_inputs(node, [wide, gs.Constant(fresh_name(f"{base}_shape", taken),
                                             np.array([0, g * int(hkv), -1, int(d)], np.int64))])
        count += 1
    return count


def _dim_sum(d: object) -> tuple[tuple[str, ...], int] | None:
    """A dim as a sum of symbols and a constant (``"past + 1"``, the form symbolic inference writes), or None where
    it is anything else."""
    if isinstance(d, (int, np.integer)):
        return (), int(d)
    if not isinstance(d, str) or not d:
        return None
    names, const = [], 0
    for term in d.split("+"):
        term = term.strip()
        if term.isdigit():
            const += int(term)
        elif term.isidentifier():
            names.append(term)
        else:
            return None
    return tuple(sorted(names)), const


def _same_length(dim: object, x: gs.Tensor, axis: int) -> bool:
    """``dim`` is known equal to ``x``'s dim ``axis``: one size or symbol, or, where ``x`` is a Concat along that
    axis (a KV cache: past and new keys), the sum of its inputs' dims, which symbolic inference may write for the
    same length under another name (``past + 1`` against the cache output's declared ``total``)."""
    if same_dim(dim, x.shape[axis]):
        return True
    cat = producer(x)
    rank = len(x.shape)
    if cat is None or cat.op != "Concat" or int(cat.attrs.get("axis", 0)) % rank != axis:
        return False
    parts = [_dim_sum(t.shape[axis]) if t.shape is not None and len(t.shape) == rank else None for t in cat.inputs]
    want = _dim_sum(dim)
    if want is None or any(p is None for p in parts):
        return False
    return want == (tuple(sorted(n for p in parts for n in p[0])), sum(p[1] for p in parts))


#: Float32 fills below this one (their step is 2^97 or more) take any finite score under 2^96 in magnitude back to
#: the fill itself; -2^120 itself is a power of two, whose step upwards is only 2^96.
_FILL_FLOOR = -(2.0 ** 120)


def additive_masks(graph: gs.Graph) -> int:
    """``Where(mask, s, fill)`` before a Softmax to ``s + Where(mask, 0, fill)`` where the sum is the fill (see the
    module doc); returns how many."""
    count = 0
    taken: set[str] | None = None
    for node in list(graph.nodes):
        found = masked_scores(node)
        if found is None:
            continue
        mask, s, fill = found
        exact = fill == -np.inf or (onnx_dtype(s) == onnx.TensorProto.FLOAT and fill < _FILL_FLOOR)
        if not exact and not np.isfinite(fill):
            continue
        if taken is None:
            taken = set(graph.tensors())
        dtype = onnx.helper.tensor_dtype_to_np_dtype(onnx_dtype(s))
        name = fresh_name(f"{node.outputs[0].name}_mask", taken)
        zero = gs.Constant(fresh_name(f"{name}_zero", taken), np.zeros((), dtype))
        fill_t = node.inputs[2]
        wide = fill_t.shape is None or mask.shape is None or len(fill_t.shape) > len(mask.shape)
        additive = gs.Variable(name, dtype=dtype, shape=None if wide else mask.shape)
        at = graph.nodes.index(node)
        graph.nodes.insert(at, gs.Node("Where", name=fresh_name(f"{node.name}_mask", taken),
                                       inputs=[mask, zero, fill_t], outputs=[additive]))
        if not exact:  # s x keep + additive: s x 0 + fill is the fill itself
            keep = gs.Variable(fresh_name(f"{name}_keep", taken), dtype=dtype, shape=additive.shape)
            kept = gs.Variable(fresh_name(f"{name}_kept", taken), dtype=dtype, shape=s.shape)
            graph.nodes.insert(at, gs.Node("Cast", name=fresh_name(f"{node.name}_keep", taken), inputs=[mask],
                                           outputs=[keep], attrs={"to": int(onnx_dtype(s))}))
            graph.nodes.insert(at + 2, gs.Node("Mul", name=fresh_name(f"{node.name}_kept", taken), inputs=[s, keep],
                                               outputs=[kept]))
            s = kept
        node.op = "Add"
        set_inputs(node, [s, additive])
        count += 1
    return count


def _softmax_rows(p: gs.Tensor, opset: int) -> bool:
    """``p`` is a Softmax whose reduction covers the last axis: each of its last-axis rows is NaN everywhere (all of
    its scores -inf, or one NaN or +inf) or nowhere."""
    node = producer(p)
    if node is None or node.op != "Softmax":
        return False
    if opset < 13:  # the input is coerced to 2-D at the axis: a row is every axis from it on
        return True
    axis = node.attrs.get("axis", -1)
    return axis == -1 or (p.shape is not None and axis == len(p.shape) - 1)


def nan_guards_after_pv(graph: gs.Graph, outputs: set[int], opset: int) -> int:
    """PyTorch's guard of the probabilities against rows masked everywhere, ``MatMul(Where(IsNaN(p), 0, p), v)``
    with ``p`` a Softmax (the dynamo exporter's SDPA with a boolean mask), to ``Where(IsNaN(o), 0, o)`` of
    ``o = MatMul(p, v)``: a row of p is NaN everywhere or nowhere, so the guard zeroes exactly the rows of o that
    it zeroed before (a NaN row of p gives a NaN row of o, a zero row a zero row), for finite v. The exception: an
    infinite or NaN value in v gives NaN where the guarded p met it with 0 (0 x inf); the Attention rule then takes
    ``MatMul(p, v)``. Returns how many."""
    count = 0
    taken: set[str] | None = None
    for node in list(graph.nodes):
        if node.op != "Where" or len(node.inputs) != 3 or not node.outputs:
            continue
        cond, zero, p = node.inputs
        isnan = producer(cond)
        z = const_array(zero, limit=1)
        guarded = node.outputs[0]
        if isnan is None or isnan.op != "IsNaN" or isnan.inputs[0] is not p or z is None or z.size != 1 \
                or float(z.reshape(-1)[0]) != 0.0 or len(zero.shape or ()) > len(p.shape or ()) \
                or not _softmax_rows(p, opset) or id(guarded) in outputs or len(guarded.outputs) != 1:
            continue
        mm = guarded.outputs[0]
        if mm.op != "MatMul" or mm.inputs[0] is not guarded or mm.inputs[1] is guarded:
            continue
        if taken is None:
            taken = set(graph.tensors())
        o = mm.outputs[0]
        raw = gs.Variable(fresh_name(f"{o.name}_unguarded", taken), dtype=o.dtype, shape=o.shape)
        nan = gs.Variable(fresh_name(f"{o.name}_isnan", taken), dtype=np.bool_, shape=o.shape)
        set_inputs(mm, [p, mm.inputs[1]])
        mm.outputs.clear()
        mm.outputs.append(raw)
        at = graph.nodes.index(mm) + 1
        graph.nodes.insert(at, gs.Node("IsNaN", name=fresh_name(f"{isnan.name or 'isnan'}_after", taken), inputs=[raw],
                                       outputs=[nan]))
        graph.nodes.insert(at + 1, gs.Node("Where", name=fresh_name(f"{node.name or 'where'}_after", taken),
                                           inputs=[nan, zero, raw], outputs=[o]))
        node.inputs.clear()
        node.outputs.clear()
        if not cond.outputs and id(cond) not in outputs:
            isnan.inputs.clear()
            isnan.outputs.clear()
        count += 1
    return count


def _read_by_matmul(t: gs.Tensor, depth: int = 0) -> bool:
    """Every reader of ``t`` is a MatMul, or a Transpose or a Mul by a scalar constant (SDPA's scale of k^T) whose
    readers are, in turn; or a Shape of which only the length or the head dim is read (LLaMA's key length for
    slicing its causal mask), which the rewrite points at the repeat's input (the same dims there)."""
    if not t.outputs or depth > 2:
        return False
    for r in t.outputs:
        if r.op == "MatMul" or (r.op == "Shape" and depth == 0 and _reads_length(r)):
            continue
        scalar = r.op == "Mul" and any(const_array(x, limit=1) is not None for x in r.inputs)
        if not ((r.op == "Transpose" or scalar) and _read_by_matmul(r.outputs[0], depth + 1)):
            return False
    return True


def _shapes_read_from(repeat: gs.Tensor, x: gs.Tensor) -> None:
    """The Shapes of a head repeat (read for its length or head dim alone: ``_reads_length``) read ``x``, the
    repeat's input, whose length and head dim are the same."""
    for r in [r for r in repeat.outputs if r.op == "Shape"]:
        r.inputs[0] = x


def _reads_length(shape: gs.Node) -> bool:
    """A whole Shape of a rank-4 tensor read only by Gathers of its dim 2 or 3 (a constant index)."""
    if shape.attrs.get("start", 0) != 0 or "end" in shape.attrs or not shape.outputs[0].outputs:
        return False
    for g in shape.outputs[0].outputs:
        index = const_array(g.inputs[1], limit=1) if g.op == "Gather" and len(g.inputs) == 2 else None
        if index is None or index.size != 1 or g.attrs.get("axis", 0) != 0 or int(index.reshape(-1)[0]) % 4 < 2:
            return False
    return True
