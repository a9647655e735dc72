"""Stage 2, canonicalize: make exporter variants look alike without changing a single result bit.

* Identity nodes and Casts to the input's own type are bypassed (kept where they write a
  graph output, so the model's interface stays as it was).
* ``Div(1, x)`` becomes ``Reciprocal(x)``; ``Pow(x, 2)`` becomes ``Mul(x, x)``. Both are
  exact in IEEE arithmetic (one correctly rounded operation each), so numerics do not change.
* ``Sum`` of two inputs becomes ``Add`` (the same single rounding).
* ``Mul(x, 1)`` and ``Div(x, 1)`` are bypassed (exact for every x), where the 1 does not broadcast.
* Tiny constant subexpressions are folded: ``CastLike``/``Cast`` of a constant (to the other
  operand's type), and ``Add``/``Sub``/``Mul``/``Div``/``Sqrt``/``Neg``/``Reciprocal`` of
  constants, each one correctly rounded IEEE operation in the constant's own type, which is
  what the runtime computes. ONNX function expansions are full of these.
* Shape arithmetic on integers is evaluated where the shapes are static: ``Shape`` of a tensor of
  known shape, then ``Size``/``Range``/``Slice``/``Concat``/``Gather``/``Sub`` ... of such constants
  (ONNX function expansions compute their Reshape targets and reduction axes this way). Integer
  results are exact.
* Two Slices taking the two halves of one tensor's last axis become one ``Split`` (the same elements).
* A Reshape that unflattens a 2-D MatMul/Gemm result (GPT-2's Conv1D: ``Reshape(x, [-1, K]) -> Gemm ->
  Reshape(back)``) moves below the elementwise chain that reads it (the GELU), when every other operand of the
  chain is a constant that broadcasts over the last axis alone: the same elements meet the same operations, only
  viewed 2-D, so ``GELU(Gemm(x2, W, b))`` is matched as Linear+GELU and the Reshapes stay outside it as views.
* ``Tile`` by a constant that repeats only axes of size 1 becomes ``Expand`` to the same shape (the same elements):
  ``repeat_interleave`` of the KV heads exports as ``Tile(Unsqueeze(x, 2), [1, 1, g, 1, 1])``.
* ``Expand`` by ones of at most the input's rank is bypassed (the input unchanged); a repeat of the heads by ``Tile``
  (``k.repeat(1, g, 1, 1)``: head h reads KV head h mod Hkv) read by MatMul becomes the same repeat written as
  ``Unsqueeze`` at axis 1, ``Expand`` by ``[1, g, 1, 1, 1]`` and ``Reshape`` to ``[0, H, -1, D]``, which the
  Attention rule takes into the op like ``repeat_kv`` (whose Unsqueeze is at axis 2); a Shape of it read for its
  length or head dim reads the Tile's input instead. As for ``repeat_kv``, the -1 cannot be inferred at a batch of 0.
* A head repeat as LLaMA's ``repeat_kv`` exports it (``Unsqueeze`` at axis 2, ``Expand`` by g, ``Reshape`` merging
  the KV heads and g) with its shapes computed from ``Shape`` gets constant shapes, ``[1, 1, g, 1, 1]`` and (where
  the Reshape's target is computed) ``[0, H, -1, D]``, where shape inference shows the repeat and MatMul reads it:
  the same elements at any sequence and non-empty batch, so the Attention rule can take it into the op, which then
  reads each KV head once.
* Scores masked by a boolean before a Softmax, ``Where(mask, s, fill)`` (GPT-2's and GPT-J's eager attention),
  become ``s + Where(mask, 0, fill)``, the additive form every other exporter writes (SDPA's ``Where(mask, 0,
  -inf)``), where the sum is the fill: a fill of -inf, or below -2^120 in float32 (``finfo.min``), to which
  a finite score under 2^96 in magnitude adds nothing. Any other finite fill (float16's -65504, where a score
  would move the sum off the fill) becomes ``s x Cast(mask) + Where(mask, 0, fill)``: s x 1 + 0 is s and
  s x 0 + fill is the fill (a -0 score becomes +0, the same to the Softmax that alone reads it). The exception in
  both: an infinite or NaN score at a masked place gives NaN where the Where gave the fill. The Attention rule
  then takes the masks as its inputs.
* PyTorch's NaN guard between the softmax and P·V, ``MatMul(Where(IsNaN(p), 0, p), v)`` (the dynamo exporter's
  SDPA with a boolean mask: a row masked everywhere gives zeros), becomes ``Where(IsNaN(p @ v), 0, p @ v)`` where p
  is a Softmax over its last axis, whose rows are NaN everywhere or nowhere: the same rows are zeroed, for finite v
  (an infinite or NaN value of v gives NaN where 0 x inf met it before). The Attention rule then takes ``p @ v``.
* Default attributes that the patterns read are made explicit (``keepdims``, Softmax
  ``axis``, Gemm ``alpha``/``beta``/``transA``/``transB``, LeakyRelu ``alpha`` ...).

Forms that differ numerically (``x / sqrt(v)`` vs ``x * (1/sqrt(v))``) are *not* rewritten:
the patterns list them as separate variants instead. Axes given as an input or as an
attribute are read alike by :func:`asc_onnx.graph.attrs_of`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import onnx_graphsurgeon as gs

from .canonicalize_attention import (
    additive_masks,
    constant_head_repeats,
    expands_of_ones,
    nan_guards_after_pv,
    tiled_heads,
    tiles_of_ones,
)
from .graph import (
    FLOAT_TYPES,
    const_array,
    graph_output_ids,
    has_subgraphs,
    numel,
    onnx_dtype,
    producer,
)
from .graph_edit import bypass, fresh_name, replace_node, set_inputs

#: Defaults made explicit: op type -> {attribute: default}. Softmax's default axis depends
#: on the opset and is filled in by :func:`_fill_defaults`.
DEFAULTS: dict[str, dict[str, object]] = {
    "ReduceMean": {"keepdims": 1},
    "ReduceSum": {"keepdims": 1},
    "ReduceMax": {"keepdims": 1},
    "ReduceMin": {"keepdims": 1},
    "Gemm": {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0},
    "LeakyRelu": {"alpha": 0.01},
    "Elu": {"alpha": 1.0},
    "HardSigmoid": {"alpha": 0.2, "beta": 0.5},
    "LayerNormalization": {"axis": -1, "epsilon": 1e-5, "stash_type": 1},
    "Gelu": {"approximate": "none"},
}


@dataclass(frozen=True)
class CanonStats:
    """What canonicalization changed, for the report."""

    identities_removed: int
    casts_removed: int
    reciprocals: int
    squares: int
    folded: int = 0
    unit_products: int = 0
    head_repeats: int = 0  # KV-head repeats given constant shapes, Tiles made Expands, Tiles of the heads rewritten
    additive_masks: int = 0  # Where(mask, s, fill) before a Softmax made s + Where(mask, 0, fill)
    nan_guards: int = 0  # Where(IsNaN(p), 0, p) @ v made Where(IsNaN(p @ v), 0, p @ v)


def _fill_defaults(node: gs.Node, opset: int) -> None:
    for key, value in DEFAULTS.get(node.op, {}).items():
        node.attrs.setdefault(key, value)
    if node.op in ("Softmax", "LogSoftmax"):
        node.attrs.setdefault("axis", -1 if opset >= 13 else 1)


def canonicalize(graph: gs.Graph, opset: int) -> CanonStats:
    """Rewrite ``graph`` in place into canonical form (see module doc); returns counts."""
    outputs = graph_output_ids(graph)
    subgraphs = has_subgraphs(graph)
    ids = casts = recips = squares = units = 0
    for node in list(graph.nodes):
        if (node.domain or "") not in ("", "ai.onnx"):
            continue
        _fill_defaults(node, opset)
        if node.op == "Identity" and not subgraphs and len(node.inputs) == 1:
            ids += bypass(graph, node, outputs)
        elif node.op == "Cast" and not subgraphs and len(node.inputs) == 1:
            src = node.inputs[0]
            if onnx_dtype(src) is not None and onnx_dtype(src) == node.attrs.get("to"):
                casts += bypass(graph, node, outputs)
        elif node.op == "Div" and len(node.inputs) == 2:
            one = const_array(node.inputs[0], limit=1)
            if one is not None and one.size == 1 and float(one.reshape(-1)[0]) == 1.0 \
                    and onnx_dtype(node.inputs[1]) in FLOAT_TYPES \
                    and _broadcast_free(node.inputs[0], node.inputs[1]):
                node.op = "Reciprocal"
                set_inputs(node, [node.inputs[1]])
                recips += 1
            elif not subgraphs:
                units += _drop_unit(graph, node, outputs)
        elif node.op == "Pow" and len(node.inputs) == 2:
            two = const_array(node.inputs[1], limit=1)
            if two is not None and two.size == 1 and float(two.reshape(-1)[0]) == 2.0 \
                    and onnx_dtype(node.inputs[0]) in FLOAT_TYPES \
                    and _broadcast_free(node.inputs[1], node.inputs[0]):
                node.op = "Mul"
                set_inputs(node, [node.inputs[0], node.inputs[0]])
                squares += 1
        elif node.op == "Sum" and len(node.inputs) == 2:
            node.op = "Add"
        elif node.op == "Mul" and len(node.inputs) == 2 and not subgraphs:
            units += _drop_unit(graph, node, outputs)
    folded = _fold_constants(graph, outputs)
    tiles = tiles_of_ones(graph) if opset >= 8 else 0  # (Expand is opset 8's)
    ones = 0 if subgraphs else expands_of_ones(graph, outputs)
    tiled = tiled_heads(graph, outputs) if opset >= 13 and not subgraphs else 0
    repeats = constant_head_repeats(graph, outputs) if opset >= 13 and not subgraphs else 0
    masks = 0 if subgraphs else additive_masks(graph)
    guards = 0 if subgraphs else nan_guards_after_pv(graph, outputs, opset)
    splits = 0 if subgraphs else _halves_to_split(graph, opset, outputs)
    sunk = 0 if subgraphs else _sink_unflatten(graph, outputs)
    if any((ids, casts, units, folded, splits, sunk, repeats, masks, ones, tiled, guards)):
        # (nodes left without outputs)
        graph.nodes = [n for n in graph.nodes if n.outputs]
    if folded:
        _propagate_shapes(graph)
    return CanonStats(ids, casts, recips, squares, folded, units, repeats + tiles + tiled, masks, guards)


def _drop_unit(graph: gs.Graph, node: gs.Node, outputs: set[int]) -> bool:
    """Bypass ``Mul(x, 1)``, ``Mul(1, x)`` and ``Div(x, 1)`` (Paddle writes swish as ``x*Sigmoid(x*1.0)``):
    exact for every x, NaN and -0 included, where the 1 neither widens the shape nor changes the type."""
    for k in ((0, 1) if node.op == "Mul" else (1,)):
        one, x = node.inputs[k], node.inputs[1 - k]
        value = const_array(one, limit=1)
        if value is None or value.size != 1 or float(value.reshape(-1)[0]) != 1.0:
            continue
        if onnx_dtype(x) not in FLOAT_TYPES or onnx_dtype(x) != onnx_dtype(node.outputs[0]) \
                or not _broadcast_free(one, x) or id(node.outputs[0]) in outputs:
            continue  # (a graph output keeps its node: the model's interface stays as it was)
        set_inputs(node, [x])
        return bypass(graph, node, outputs)
    return False


#: Ops whose output has the broadcast shape (and the dtype) of their float inputs.
_SAME_SHAPE = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sqrt", "Exp", "Log", "Neg", "Reciprocal", "Abs",
               "Relu", "Sigmoid", "Tanh", "Erf", "Identity", "Softmax", "LogSoftmax", "Cast", "CastLike"}
_REDUCE = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2"}


def _propagate_shapes(graph: gs.Graph) -> None:
    """Fill the shapes (and dtypes) the loader's inference could not know before shape arithmetic folded:
    elementwise broadcasts, keepdims reductions over constant axes, Reshape/Flatten to static shapes.
    Known shapes are never changed."""
    for node in graph.nodes:
        if (node.domain or "") not in ("", "ai.onnx") or len(node.outputs) != 1:
            continue
        out = node.outputs[0]
        if out.shape is not None:
            continue
        ins = [t for t in node.inputs if t.name]
        if not ins or ins[0].shape is None:
            continue
        shape = None
        if node.op in _SAME_SHAPE:
            shapes = [t.shape for t in ins[:2]] if node.op in ("Cast", "CastLike") else [t.shape for t in ins]
            if all(sh is not None and all(isinstance(d, (int, np.integer)) for d in sh) for sh in shapes):
                try:
                    shape = list(np.broadcast_shapes(*(tuple(int(d) for d in sh) for sh in shapes[:1 if node.op in
                                                                                               ("Cast", "CastLike")
                                                                                               else None])))
                except ValueError:
                    shape = None
        elif node.op in _REDUCE and node.attrs.get("keepdims", 1) == 1:
            axes = node.attrs.get("axes")
            if axes is None and len(node.inputs) > 1 and node.inputs[1].name:
                arr = const_array(node.inputs[1], limit=64)
                axes = None if arr is None else [int(a) for a in arr.reshape(-1)]
            if axes is not None:
                rank = len(ins[0].shape)
                shape = [1 if i in {a % rank for a in axes} else d for i, d in enumerate(ins[0].shape)]
        elif node.op == "Reshape" and len(ins) > 1 and numel(ins[0]) is not None:
            target = const_array(ins[1], limit=64)
            if target is not None:
                dims = [int(ins[0].shape[i]) if d == 0 else int(d) for i, d in enumerate(target.reshape(-1))]
                if dims.count(-1) == 1:
                    rest = int(np.prod([d for d in dims if d != -1]))
                    dims[dims.index(-1)] = numel(ins[0]) // max(rest, 1)
                shape = dims if -1 not in dims else None
        elif node.op == "Flatten" and numel(ins[0]) is not None:
            axis = node.attrs.get("axis", 1) % max(len(ins[0].shape), 1)
            shape = [int(np.prod(ins[0].shape[:axis])), int(np.prod(ins[0].shape[axis:]))]
        if shape is None:
            continue
        out.shape = shape
        if out.dtype is None:
            out.dtype = onnx.helper.tensor_dtype_to_np_dtype(node.attrs["to"]) if node.op == "Cast" \
                else ins[0].dtype


#: Ops folded when every input is a tiny constant: one correctly rounded operation each.
FOLDABLE = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Sqrt": np.sqrt,
            "Neg": np.negative, "Reciprocal": lambda a: np.divide(np.ones_like(a), a)}


#: Integer shape-arithmetic ops evaluated on constant inputs (exact: integers only).
SHAPE_OPS = {"Size", "Range", "Slice", "Concat", "Gather", "Unsqueeze", "Squeeze", "ConstantOfShape", "Identity",
             "Add", "Sub", "Mul", "Div", "Cast", "Reshape", "Max", "Min", "Neg", "Abs"}
#: Largest integer constant folded (shapes and axes are short).
SHAPE_LIMIT = 64


def _fold_shape_op(node: gs.Node) -> np.ndarray | None:
    """The integer value of a shape-arithmetic node whose inputs are known, else None."""
    if node.op == "Shape" and node.inputs and node.inputs[0].shape is not None:
        dims = node.inputs[0].shape
        if all(isinstance(d, (int, np.integer)) and d >= 0 for d in dims):
            start, end = node.attrs.get("start", 0), node.attrs.get("end", len(dims))
            return np.array(list(dims)[start:end], dtype=np.int64)
        return None
    if node.op == "Gather" and len(node.inputs) == 2 and node.inputs[0].inputs \
            and node.inputs[0].inputs[0].op == "Shape" and node.attrs.get("axis", 0) == 0:
        return _static_dims(node.inputs[0].inputs[0], const_array(node.inputs[1], limit=SHAPE_LIMIT))
    if node.op not in SHAPE_OPS:
        return None
    args = []
    for t in node.inputs:  # the first input that is not a constant settles it
        a = const_array(t, limit=SHAPE_LIMIT) if t.name else None
        if a is None and t.name:
            return None
        args.append(a)
    if not args:
        return None
    if not all(a.dtype.kind in "iub" for a in args if a is not None):
        return None
    if node.op == "Cast" and onnx.helper.tensor_dtype_to_np_dtype(node.attrs.get("to", 1)).kind not in "iub":
        return None
    if node.op == "ConstantOfShape":
        value = node.attrs.get("value")
        if value is None or np.asarray(value.values).dtype.kind not in "iub" or int(np.prod(args[0])) > SHAPE_LIMIT:
            return None
    quick = _quick_shape_op(node, args)
    if quick is not None:
        return quick if quick.size <= SHAPE_LIMIT else None
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [f"i{k}" if t.name else "" for k, t in enumerate(node.inputs)]
    proto = helper.make_node(node.op, names, ["o"], **{k: v for k, v in node.attrs.items()
                                                        if not isinstance(v, gs.Tensor)} if node.op != "ConstantOfShape"
                             else {"value": onnx.numpy_helper.from_array(np.asarray(node.attrs["value"].values))})
    try:
        out = ReferenceEvaluator(proto).run(None, {n: a for n, a in zip(names, args) if n})[0]
    except Exception:  # noqa: BLE001 - an op we cannot evaluate stays as it is
        return None
    out = np.asarray(out)
    return out if out.dtype.kind in "iub" and out.size <= SHAPE_LIMIT else None


def _quick_shape_op(node: gs.Node, args: list[np.ndarray | None]) -> np.ndarray | None:
    """The shape ops exporters write most (a 20k-node LLaMA has thousands), in numpy with ONNX's semantics;
    None leaves the node to onnx's reference evaluator, which costs a fraction of a millisecond each."""
    op, a = node.op, args[0]
    if op == "Identity" and a is not None:
        return a.copy()
    if op == "Cast" and a is not None:
        return a.astype(onnx.helper.tensor_dtype_to_np_dtype(node.attrs.get("to", 7)))
    if op == "Unsqueeze" and a is not None and len(args) > 1 and args[1] is not None and a.ndim == 0 \
            and args[1].reshape(-1).tolist() in ([0], [-1]):
        return a.reshape(1)
    if op == "Concat" and all(x is not None and x.ndim == 1 for x in args) and node.attrs.get("axis") in (0, -1) \
            and len({x.dtype for x in args}) == 1:
        return np.concatenate(args)
    if op == "Gather" and a is not None and a.ndim == 1 and len(args) == 2 and args[1] is not None \
            and node.attrs.get("axis", 0) == 0 and np.all((args[1] >= -a.size) & (args[1] < a.size)):
        return a[args[1]]
    if op in ("Add", "Sub", "Mul") and len(args) == 2 and all(x is not None for x in args) \
            and args[0].dtype == args[1].dtype:
        return {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op](args[0], args[1]).astype(args[0].dtype)
    if op == "Div" and len(args) == 2 and all(x is not None and x.dtype.kind in "iu" for x in args) \
            and args[0].dtype == args[1].dtype and np.all(args[1] != 0):
        # ONNX's integer Div truncates toward zero (numpy's // floors)
        return (np.abs(args[0]) // np.abs(args[1]) * np.sign(args[0]) * np.sign(args[1])).astype(args[0].dtype)
    return None


def _static_dims(shape_node: gs.Node, idx: np.ndarray | None) -> np.ndarray | None:
    """``Gather(Shape(x), idx)`` where the dims picked are static though others are not (the hidden size of a
    [batch, seq, 128] activation)."""
    dims = shape_node.inputs[0].shape if shape_node.inputs else None
    if dims is None or idx is None or idx.dtype.kind not in "iu":
        return None
    dims = list(dims)[shape_node.attrs.get("start", 0):shape_node.attrs.get("end", len(dims))]
    picked = [dims[i] if -len(dims) <= i < len(dims) else None for i in idx.reshape(-1).tolist()]
    if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in picked):
        return None
    return np.array(picked, dtype=np.int64).reshape(idx.shape)


def _halves_to_split(graph: gs.Graph, opset: int, outputs: set[int]) -> int:
    """Two Slices taking the first and second half of one tensor's last axis become one Split (Phi-3's
    gate-up projection as the legacy exporter writes ``chunk(2, -1)``): the same elements, bit for bit."""
    count = 0
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        if node.op != "Slice" or not node.inputs or not node.outputs:
            continue
        t = node.inputs[0]
        halves = {}
        for c in t.outputs:
            half = _half(c)
            if half is not None and id(c.outputs[0]) not in outputs:
                halves.setdefault(half, c)
        if set(halves) != {0, 1}:
            continue
        first, second = halves[0], halves[1]
        d = int(t.shape[-1])
        split = gs.Constant(f"{first.outputs[0].name}_halves", np.array([d // 2, d // 2], dtype=np.int64))
        ins, attrs = ([t, split], {"axis": -1}) if opset >= 13 else ([t], {"axis": -1, "split": [d // 2, d // 2]})
        outs = [first.outputs[0], second.outputs[0]]
        at = min(position[id(first)], position[id(second)])  # before both slices' readers: order is kept
        for s in (first, second):
            s.inputs.clear()
            s.outputs.clear()
        graph.nodes[at] = gs.Node("Split", f"{first.name}_split", attrs, ins, outs)
        count += 1
    return count


#: Elementwise ops a Reshape may move below (one output element from the same-position input elements).
ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Tanh", "Erf", "Sigmoid", "Relu", "Neg",
                         "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Gelu", "LeakyRelu", "Elu", "HardSigmoid",
                         "Softplus", "Clip"})


def _sink_unflatten(graph: gs.Graph, outputs: set[int]) -> int:
    """Move each Reshape of a 2-D MatMul/Gemm result below the elementwise region that reads it (see the module
    doc); returns how many moved."""
    moved = 0
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        if node.op != "Reshape" or len(node.inputs) != 2 or not node.outputs:
            continue
        z, z2 = node.inputs[0], node.outputs[0]
        src = producer(z)
        if src is None or src.op not in ("MatMul", "Gemm") or id(z2) in outputs:
            continue
        if z.shape is None or len(z.shape) != 2 or z2.shape is None or not isinstance(z.shape[-1], int) \
                or z2.shape[-1] != z.shape[-1]:
            continue
        region = _elementwise_region(z2, z.shape[-1], position, outputs)
        if region is None:
            continue
        nodes, out = region
        taken = set(graph.tensors())
        for n in nodes:
            set_inputs(n, [z if t is z2 else t for t in n.inputs])
            for t in n.outputs:
                t.shape = list(z.shape)
                if t is not out:
                    t.name = fresh_name(f"{t.name}_2d", taken)  # a 2-D value: a name of its own
        last = next(n for n in nodes if any(o is out for o in n.outputs))
        flat = gs.Variable(fresh_name(f"{out.name}_2d", taken), dtype=out.dtype, shape=list(z.shape))
        last.outputs[next(i for i, o in enumerate(last.outputs) if o is out)] = flat
        shape_in = node.inputs[1]
        node.inputs.clear()
        node.outputs.clear()
        at = max(position[id(n)] for n in nodes) + 1
        graph.nodes.insert(at, gs.Node("Reshape", f"{node.name}_sunk", {}, [flat, shape_in], [out]))
        position = {id(n): i for i, n in enumerate(graph.nodes)}
        moved += 1
    return moved


def _elementwise_region(z2: gs.Tensor, last: int, position: dict[int, int], outputs: set[int]
                        ) -> tuple[list[gs.Node], gs.Tensor] | None:
    """The elementwise nodes reachable from ``z2`` whose other operands are constants broadcasting over the last
    axis alone (a scalar, or ``last`` values), in graph order, and the one tensor the rest of the graph reads
    from them; None unless ``z2`` feeds only that region and exactly one of its tensors leaves it."""
    inside = {id(z2)}
    nodes: list[gs.Node] = []
    members: set[int] = set()  # (by identity: graphsurgeon compares nodes by content)
    frontier = [z2]
    while frontier:
        t = frontier.pop()
        for n in t.outputs:
            if id(n) in members or n.op not in ELEMENTWISE or (n.domain or "") not in ("", "ai.onnx") \
                    or len(n.outputs) != 1:
                continue
            if all(id(a) in inside or _trailing_const(a, last) for a in n.inputs if a.name):
                nodes.append(n)
                members.add(id(n))
                inside.add(id(n.outputs[0]))
                frontier.append(n.outputs[0])
    if not nodes or any(id(c) not in members for c in z2.outputs):
        return None
    leaving = [n.outputs[0] for n in nodes
               if id(n.outputs[0]) in outputs or any(id(c) not in members for c in n.outputs[0].outputs)]
    if len(leaving) != 1:
        return None
    nodes.sort(key=lambda n: position[id(n)])
    return nodes, leaving[0]


def _trailing_const(t: gs.Tensor, last: int) -> bool:
    """A constant that broadcasts the same way over ``[M, last]`` as over ``[..., last]``: a scalar or ``last``
    values along the last axis."""
    arr = const_array(t, limit=max(1, last))
    if arr is None or arr.ndim > 2:  # (a higher rank would widen the 2-D result)
        return False
    return arr.size == 1 or (arr.size == last and arr.shape[-1] == last)


def _half(node: gs.Node) -> int | None:
    """0 or 1 for a Slice of the first or second half of its input's last axis (static and even), else None."""
    if node.op != "Slice" or len(node.inputs) < 3 or not node.outputs:
        return None
    shape = node.inputs[0].shape
    if not shape or not isinstance(shape[-1], (int, np.integer)) or shape[-1] % 2:
        return None
    d, rank = int(shape[-1]), len(shape)
    args = [const_array(t, limit=4) for t in node.inputs[1:]]
    if any(a is None or a.size != 1 for a in args):
        return None
    start, end = int(args[0].reshape(-1)[0]), int(args[1].reshape(-1)[0])
    axis = int(args[2].reshape(-1)[0]) if len(args) > 2 else 0
    step = int(args[3].reshape(-1)[0]) if len(args) > 3 else 1
    if axis % rank != rank - 1 or step != 1:
        return None
    start, end = start + d if start < 0 else start, min(end + d if end < 0 else end, d)
    return {(0, d // 2): 0, (d // 2, d): 1}.get((start, end))


def _fold_constants(graph: gs.Graph, outputs: set[int]) -> int:
    """Replace tiny constant subexpressions by constants (see module doc); returns the count."""
    count = 0
    for node in graph.nodes:
        if (node.domain or "") not in ("", "ai.onnx") or len(node.outputs) != 1 or id(node.outputs[0]) in outputs:
            continue
        value = _fold_shape_op(node)
        if value is not None:
            pass
        elif node.op in ("CastLike", "Cast") and node.inputs:
            src = const_array(node.inputs[0])
            to = onnx_dtype(node.inputs[1]) if node.op == "CastLike" and len(node.inputs) > 1 \
                else node.attrs.get("to")
            if src is not None and to in FLOAT_TYPES | {onnx.TensorProto.DOUBLE} and src.dtype.kind == "f":
                value = src.astype(onnx.helper.tensor_dtype_to_np_dtype(to))
        elif node.op in FOLDABLE:
            args = [const_array(t) for t in node.inputs]
            if args and all(a is not None and a.dtype.kind == "f" for a in args) and len({a.dtype for a in args}) == 1:
                with np.errstate(all="ignore"):
                    value = np.asarray(FOLDABLE[node.op](*args), dtype=args[0].dtype)
        if value is None:
            continue
        out = node.outputs[0]
        # np.array, not ascontiguousarray: that one turns a rank-0 value into rank 1 (a scalar output would grow)
        replace_node(node, out, gs.Constant(f"{out.name}__folded", np.array(value, order="C")))
        count += 1
    return count


def _broadcast_free(scalar: gs.Tensor, other: gs.Tensor) -> bool:
    """True when dropping ``scalar`` cannot change the output shape (its rank is not larger)."""
    if numel(scalar) != 1:
        return False
    return other.shape is not None and len(scalar.shape) <= len(other.shape)


__all__ = ["canonicalize", "CanonStats"]
