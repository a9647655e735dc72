"""The generic pass of the match stage: fuse any remaining chain of elementwise ops.

A chain grows backwards from a root node: a producer joins when it is an eligible
elementwise op and every reader of its output is already in the chain (so the chain has
exactly one output and no value leaves and re-enters it). Eligible means: a known
elementwise op in the default domain, float inputs and output, output shape equal to the
root's, and every outside input either of that shape, a scalar, or a trailing vector that
broadcasts along the last axes (what the pointwise kernel class serves). Chains of two or
more nodes become fused ops named by their body's hash.
"""

from __future__ import annotations

import onnx
import onnx_graphsurgeon as gs

from ...fusion import Fusion
from ...graph import COMMUTATIVE, FLOAT_TYPES, const_array, is_const, onnx_dtype, producer
from ...pattern import Rule
from ..regions import operand_key
from ..vector import CMP_MODES, EMITTERS

#: The ops a chain may hold: exactly the vector op table's (what the lowering serves), so a chain holding any
#: other op is never fused into model.asc.onnx without a kernel.
ELEMENTWISE = frozenset(EMITTERS)
#: Ops whose extra inputs must be scalar constants (Clip's min and max).
CLIP = "Clip"
#: Comparisons: float operands, a bool mask that only a Where inside the chain may read.
COMPARE = frozenset(CMP_MODES)
WHERE = "Where"


def _broadcastable(t: gs.Tensor, out_shape: list) -> bool:
    """Same shape as the output, a scalar, or [1,...,1,D...] matching the output's trailing dims."""
    shape = t.shape
    if shape is None:
        return False
    if list(shape) == list(out_shape):
        return True
    if all(d == 1 for d in shape):
        return len(shape) <= len(out_shape)
    if len(shape) > len(out_shape):
        return False
    dims = list(shape)
    while dims and dims[0] == 1:
        dims.pop(0)
    return dims == list(out_shape)[len(out_shape) - len(dims):]


def _eligible(node: gs.Node, claimed: set[int]) -> bool:
    if id(node) in claimed or node.op not in ELEMENTWISE or (node.domain or "") not in ("", "ai.onnx"):
        return False
    if len(node.outputs) != 1 or node.outputs[0].shape is None or 0 in node.outputs[0].shape:
        return False  # no shape, or empty: nothing to compute
    ins = [t for t in node.inputs if t.name]
    if node.op == CLIP:
        if any(const_array(t, limit=1) is None for t in ins[1:]):
            return False
        ins = ins[:1]
    out_ok = onnx_dtype(node.outputs[0]) == onnx.TensorProto.BOOL if node.op in COMPARE \
        else onnx_dtype(node.outputs[0]) in FLOAT_TYPES
    if node.op == WHERE:
        cond = producer(ins[0])
        if cond is None or cond.op not in COMPARE:
            return False  # only a mask computed inside the chain
        ins = ins[1:]
    if not out_ok or any(onnx_dtype(t) not in FLOAT_TYPES for t in ins):
        return False
    out_shape = node.outputs[0].shape
    if not any(list(t.shape or []) == list(out_shape) and not is_const(t) for t in ins):
        return False  # all-constant or all-broadcast nodes are constant folding, not fusion
    return all(_broadcastable(t, out_shape) for t in ins)


def _grow(root: gs.Node, claimed: set[int], outputs: set[int]) -> list[gs.Node]:
    group = {id(root): root}
    shape = list(root.outputs[0].shape)
    changed = True
    while changed:
        changed = False
        for node in list(group.values()):
            for t in node.inputs:
                p = producer(t)
                if p is None or id(p) in group or not _eligible(p, claimed):
                    continue
                out = p.outputs[0]
                if id(out) in outputs or list(out.shape) != shape:
                    continue
                if all(id(c) in group for c in out.outputs):
                    group[id(p)] = p
                    changed = True
    return list(group.values())


def _outside_inputs(root: gs.Node, operands: dict[int, tuple[gs.Tensor, ...]],
                    members: dict[int, gs.Node]) -> list[gs.Tensor]:
    """Non-constant inputs from outside the chain, in depth-first order from the root."""
    inputs: list[gs.Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[gs.Node, int]] = [(root, 0)]
    while stack:
        node, i = stack.pop()
        ops = operands[id(node)]
        if i == len(ops):
            continue
        stack.append((node, i + 1))
        t = ops[i]
        p = producer(t)
        if p is not None and id(p) in members:
            stack.append((p, 0))
        elif t.name and id(t) not in seen and const_array(t, limit=1) is None:
            seen.add(id(t))
            inputs.append(t)
    return inputs


def find_chains(graph: gs.Graph, rule: Rule, claimed: set[int], outputs: set[int],
                order: dict[int, int]) -> list[Fusion]:
    """Find elementwise chains among unclaimed nodes; claims what it returns."""
    fusions: list[Fusion] = []
    for root in reversed(graph.nodes):
        if root.op in COMPARE or not _eligible(root, claimed):
            continue
        group = _grow(root, claimed, outputs)
        if len(group) < 2 or any(n.op == WHERE and id(producer(n.inputs[0])) not in {id(g) for g in group}
                                 for n in group):
            continue
        members = {id(n): n for n in group}
        nodes = tuple(sorted(group, key=lambda n: order[id(n)]))
        operands: dict[int, tuple[gs.Tensor, ...]] = {}
        for n in nodes:
            ins = tuple(n.inputs)
            if n.op in COMMUTATIVE and len(ins) == 2:
                ins = tuple(sorted(ins, key=lambda t: operand_key(t, members)))
            operands[id(n)] = ins
        inputs = _outside_inputs(root, operands, members)
        if not inputs:
            continue
        fusions.append(Fusion(rule.name, rule.op_name, rule.kernel, rule.family, nodes, tuple(inputs),
                              tuple(f"x{i}" for i in range(len(inputs))), (root.outputs[0],), ("y",),
                              operands))
        claimed.update(members)
    return fusions


__all__ = ["find_chains", "ELEMENTWISE", "CLIP", "COMPARE", "WHERE"]
