"""Edits of an onnx-graphsurgeon graph that keep every value it computes: a node bypassed, a node's inputs set, dead
nodes dropped, a fresh tensor name. The canonicalization passes share them."""

from __future__ import annotations

import onnx_graphsurgeon as gs

from .graph import producer


def replace_node(node: gs.Node, old: gs.Tensor, new: gs.Tensor) -> None:
    """Every reader of ``old`` (``node``'s output) reads ``new`` instead, and ``node`` is detached."""
    for consumer in list(old.outputs):
        for i, t in enumerate(consumer.inputs):
            if t is old:
                consumer.inputs[i] = new
    node.inputs.clear()
    node.outputs.clear()


def bypass(graph: gs.Graph, node: gs.Node, outputs: set[int]) -> bool:
    """Reroute the consumers of a single-input pass-through node to its input; False if kept."""
    src, dst = node.inputs[0], node.outputs[0]
    if id(dst) in outputs:
        return False
    replace_node(node, dst, src)
    return True


def fresh_name(name: str, taken: set[str]) -> str:
    """``name``, or it with a number, not in ``taken`` (which then holds it)."""
    new, i = name, 1
    while new in taken:
        new, i = f"{name}{i}", i + 1
    taken.add(new)
    return new


def set_inputs(node: gs.Node, inputs: list[gs.Tensor]) -> None:
    """Replace a node's inputs (graphsurgeon's synchronized lists take no slice assignment)."""
    node.inputs.clear()
    node.inputs.extend(inputs)


def drop_dead(tensors: list[gs.Tensor], outputs: set[int]) -> None:
    """Detach the producers of ``tensors`` nothing reads any more, and theirs in turn (the shape arithmetic a
    rewrite left behind); the caller drops nodes without outputs."""
    while tensors:
        t = tensors.pop()
        node = producer(t)
        if node is None or any(o.outputs or id(o) in outputs for o in node.outputs):
            continue
        ins = list(node.inputs)
        node.inputs.clear()
        node.outputs.clear()
        tensors.extend(ins)
