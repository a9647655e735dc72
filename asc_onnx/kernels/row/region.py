"""The generic pass for the row kernel class: a reduction over trailing axes and the elementwise
chain around it, fused as one op (an L2-normalize, a logsumexp, a LogSoftmax or LayerNorm written
out by an exporter, a lone LayerNormalization or RMSNormalization op).

A region starts at a root: a ``Reduce*`` over a trailing group of axes with ``keepdims=1``, or a
Softmax/LogSoftmax over the last axis, or a LayerNormalization/RMSNormalization. It grows

* backwards through elementwise ops and views (Cast, Flatten, Reshape ...) whose outputs have the data's
  rows and are read only inside the region;
* forwards through consumers that combine region values with acceptable outside operands: data-shaped
  tensors, rows repeated along leading axes (masks), row vectors (gamma), scalar constants; further
  reductions over the same rows join too (softmax's sum after its max).

Every value keeps the row split: ``data`` (rows x D elements), ``stat`` (one per row) or ``vec`` (D).
A region whose outside operand depends on the region itself is dropped (it would be a cycle), as is
one with more than three outputs.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_graphsurgeon as gs

from ...fusion import Fusion
from ...graph import COMMUTATIVE, FLOAT_TYPES, attrs_of, const_array, onnx_dtype, producer
from ...pattern import Rule
from ..regions import operand_key
from ..vector import EMITTERS

REDUCTIONS = frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2"})
ROW_OPS = frozenset({"Softmax", "LogSoftmax", "LayerNormalization", "RMSNormalization"})
VIEWS = frozenset({"Cast", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity"})
MAX_OUTPUTS = 3


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape)


def _prod(dims) -> int | None:
    return int(np.prod(dims)) if _static(dims) else None


class _Split:
    """The row split of a region: the data's shape and how many trailing dims form a row."""

    def __init__(self, shape, row_dims: int) -> None:
        self.shape = list(shape)
        self.row_dims = row_dims
        self.lead = self.shape[:len(self.shape) - row_dims]
        self.row = self.shape[len(self.shape) - row_dims:]
        self.d = _prod(self.row)
        self.rows = _prod(self.lead)

    def kind(self, t: gs.Tensor) -> str | None:
        """``data``, ``stat``, ``vec``, ``mask`` (rows repeated along leading axes) or None."""
        shape = t.shape
        if shape is None:
            return None
        shape = list(shape)
        if shape == self.shape:
            return "data"
        if shape == self.lead + [1] * self.row_dims:
            return "stat"
        n = _prod(shape)
        if n is not None and self.d is not None and self.rows is not None and self.d > 1:
            # A view of the data with the same rows ([B, S, D] as [B*S, D]) or of the stats ([B*S, 1]).
            if n == self.rows * self.d and len(shape) >= 1 and _prod(shape[-1:]) is not None and \
                    any(_prod(shape[k:]) == self.d for k in range(len(shape))):
                return "data"
            if n == self.rows and shape and shape[-1] == 1:
                return "stat"
        core = list(shape)
        while core and core[0] == 1:
            core.pop(0)
        if core and core == self.row[len(self.row) - len(core):] and _prod(core) == self.d:
            return "vec"
        if len(shape) <= len(self.shape) and shape[len(shape) - self.row_dims:] == self.row and \
                all(d == 1 or d == o for d, o in zip(shape[::-1], self.shape[::-1])):
            return "mask"
        return None


def _root_split(node: gs.Node, floats: frozenset[int] = FLOAT_TYPES) -> _Split | None:
    """The row split a root reduces over, or None when it is not a trailing-axes row reduction."""
    if (node.domain or "") not in ("", "ai.onnx") or not node.inputs or node.inputs[0].shape is None:
        return None
    if onnx_dtype(node.inputs[0]) not in floats:
        return None
    shape = list(node.inputs[0].shape)
    rank = len(shape)
    if rank == 0:
        return None
    attrs = attrs_of(node)
    if node.op in REDUCTIONS:
        axes = attrs.get("axes")
        if attrs.get("keepdims", 1) != 1:
            return None
        if axes is None:
            if len(node.inputs) > 1 and node.inputs[1].name:
                return None  # computed axes
            axes = list(range(rank))
        norm = sorted(a % rank for a in axes)
        if norm != list(range(rank - len(norm), rank)):
            return None
        return _Split(shape, len(norm))
    if node.op in ("Softmax", "LogSoftmax"):
        return _Split(shape, 1) if attrs.get("axis", -1) % rank == rank - 1 else None
    if node.op in ("LayerNormalization", "RMSNormalization"):
        axis = attrs.get("axis", -1) % rank
        return _Split(shape, rank - axis)
    return None


#: Inside a region, values may also be double: an exporter's fp16 LayerNorm takes its variance through
#: Cast(double) and back. The kernel computes every value in fp32, which holds fp16 and fp32 results exactly
#: as well; a double value may not leave the region (``find_row_chains`` then grows it again without).
WIDE = FLOAT_TYPES | {onnx.TensorProto.DOUBLE}


def _joins(node: gs.Node, split: _Split, region: dict[int, gs.Node], claimed: set[int],
           floats: frozenset[int] = FLOAT_TYPES) -> bool:
    """A node may join: an op the row kernel lowers, on this split, with outputs that keep it, of ``floats``."""
    if id(node) in claimed or id(node) in region or (node.domain or "") not in ("", "ai.onnx"):
        return False
    if node.op not in EMITTERS.keys() | VIEWS | REDUCTIONS | ROW_OPS:
        return False
    outs = [t for t in node.outputs if t.name]
    if not outs or any(onnx_dtype(t) not in floats | {onnx.TensorProto.BOOL} for t in outs):
        return False
    if node.op in REDUCTIONS | ROW_OPS:
        s = _root_split(node, floats)
        if s is None or s.d != split.d or s.d is None and s.row != split.row:
            return False
        if split.kind(node.inputs[0]) != "data":
            return False
    if node.op in VIEWS:
        if node.op == "Cast" and node.attrs.get("to") not in floats:
            return False
        if node.op in ("Reshape", "Squeeze", "Unsqueeze") and len(node.inputs) > 1 and \
                const_array(node.inputs[1], limit=64) is None:
            return False
    return all(split.kind(t) in ("data", "stat") for t in outs[:1]) and \
        (node.op != "LayerNormalization" or all(split.kind(t) in ("data", "stat") for t in outs))


def _body_const(t: gs.Tensor) -> bool:
    """Constants that go into the body: float scalars, and integer axes or shapes. Float tensors (a gamma
    of 32 elements) are inputs of the fused op, read from GM like any weight."""
    arr = const_array(t, limit=64)
    return arr is not None and (arr.size == 1 or arr.dtype.kind in "iub")


def _operand_ok(t: gs.Tensor, split: _Split, region: dict[int, gs.Node]) -> bool:
    p = producer(t)
    if p is not None and id(p) in region:
        return True
    if not t.name or _body_const(t):
        return True
    if onnx_dtype(t) not in FLOAT_TYPES:
        return False
    if split.kind(t) in ("data", "vec", "mask"):
        return True
    # The weight of a view inside the region (Flatten(gamma) of a LayerNorm expansion): D elements.
    return any(id(c) in region and c.op in VIEWS for c in t.outputs) and _prod(t.shape) == split.d


def _grow(root: gs.Node, split: _Split, claimed: set[int], outputs: set[int],
          order: dict[int, int], floats: frozenset[int] = FLOAT_TYPES) -> dict[int, gs.Node]:
    region = {id(root): root}

    def joins(node: gs.Node) -> bool:
        return _joins(node, split, region, claimed, floats)

    def add(node: gs.Node, checked: bool = False) -> bool:
        if not checked and not all(_operand_ok(i, split, region) for i in node.inputs):
            return False
        outside = [t for t in node.inputs if t.name and not _body_const(t)
                   and (producer(t) is None or id(producer(t)) not in region)]
        if _cyclic(region, outside, order):
            return False  # an operand computed from the region itself
        region[id(node)] = node
        return True

    changed = True
    while changed:
        changed = False
        # Backwards: producers whose every reader is inside (views of a weight too).
        for node in list(region.values()):
            for t in node.inputs:
                p = producer(t)
                if p is None or id(p) in region or p.op in REDUCTIONS | ROW_OPS:
                    continue
                vec_view = p.op in VIEWS and split.kind(t) == "vec" and bool(p.inputs) and \
                    onnx_dtype(p.inputs[0]) in FLOAT_TYPES and _prod(p.inputs[0].shape) == split.d
                if not vec_view and not joins(p):
                    continue
                if id(p) in claimed or any(id(o) in outputs for o in p.outputs) or \
                        any(id(c) not in region for o in p.outputs for c in o.outputs):
                    continue
                changed |= add(p, checked=vec_view)
        # Forwards: consumers of region values whose other operands are acceptable.
        for node in list(region.values()):
            for o in node.outputs:
                for c in o.outputs:
                    if joins(c):
                        changed |= add(c)
        # Sideways: a consumer of the region's data operand that feeds the region or a reduction of these
        # rows (the x * x of a LayerNorm written as E[x^2] - E[x]^2).
        for node in list(region.values()):
            for t in node.inputs:
                if split.kind(t) != "data" or (producer(t) is not None and id(producer(t)) in region):
                    continue
                for c in t.outputs:
                    if not joins(c) or not c.outputs:
                        continue
                    feeds = [r for r in c.outputs[0].outputs if id(r) in region or (r.op in REDUCTIONS and joins(r))]
                    if feeds and add(c):
                        changed = True
                        for r in feeds:
                            if id(r) not in region:
                                add(r)
    return region


def _exits(region: dict[int, gs.Node], outputs: set[int]) -> list[gs.Tensor]:
    outs = []
    for n in region.values():
        for t in n.outputs:
            if t.name and (id(t) in outputs or any(id(c) not in region for c in t.outputs)):
                outs.append(t)
    return outs


def _cyclic(region: dict[int, gs.Node], inputs: list[gs.Tensor], order: dict[int, int]) -> bool:
    """True when an outside operand is computed from a region value (a path leaves and re-enters)."""
    first = min(order[i] for i in region)
    seen: set[int] = set()
    stack = [producer(t) for t in inputs]
    while stack:
        p = stack.pop()
        if p is None or id(p) in seen or order.get(id(p), -1) < first:
            continue
        seen.add(id(p))
        if id(p) in region:
            return True
        stack.extend(producer(t) for t in p.inputs)
    return False


def find_row_chains(graph: gs.Graph, rule: Rule, claimed: set[int], outputs: set[int],
                    order: dict[int, int]) -> list[Fusion]:
    """Find row regions among unclaimed nodes; claims what it returns."""
    fusions: list[Fusion] = []
    for root in list(graph.nodes):
        if id(root) in claimed or root.op not in REDUCTIONS | ROW_OPS:
            continue
        split = _root_split(root)
        if split is None:
            continue
        region = _grow(root, split, claimed, outputs, order, WIDE)
        if any(onnx_dtype(t) == onnx.TensorProto.DOUBLE for t in _exits(region, outputs)):
            region = _grow(root, split, claimed, outputs, order)
        if not any(split.kind(t) == "data" for n in region.values() for t in n.outputs if t.name) and \
                root.op in REDUCTIONS:
            continue  # a bare reduction (a mean pooling): nothing to fuse around it
        exits = _exits(region, outputs)
        if not exits or len(exits) > MAX_OUTPUTS:
            continue
        nodes = tuple(sorted(region.values(), key=lambda n: order[id(n)]))
        operands: dict[int, tuple[gs.Tensor, ...]] = {}
        for n in nodes:
            ins = tuple(n.inputs)
            if n.op in COMMUTATIVE and len(ins) == 2:
                ins = tuple(sorted(ins, key=lambda t: operand_key(t, region)))
            operands[id(n)] = ins
        inputs: list[gs.Tensor] = []
        for n in nodes:
            for t in operands[id(n)]:
                p = producer(t)
                if t.name and (p is None or id(p) not in region) and not _body_const(t) \
                        and all(t is not i for i in inputs):
                    inputs.append(t)
        if not inputs or _cyclic(region, inputs, order):
            continue
        # The main output first: a data-shaped one (the row kernel writes it in blocks).
        exits.sort(key=lambda t: split.kind(t) != "data")
        if split.kind(exits[0]) != "data":
            continue
        fusions.append(Fusion(rule.name, rule.op_name, rule.kernel, rule.family, nodes, tuple(inputs),
                              tuple(f"x{i}" for i in range(len(inputs))), tuple(exits),
                              tuple(f"y{i}" for i in range(len(exits))), operands))
        claimed.update(region)
    return fusions


__all__ = ["find_row_chains"]
