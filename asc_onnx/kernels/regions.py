"""What the generic region passes of every kernel class share."""

from __future__ import annotations

import onnx_graphsurgeon as gs

from ..graph import const_array, producer


def operand_key(t: gs.Tensor, members: dict[int, gs.Node]) -> str:
    """A tensor's place in a region as text (the producing ops inside ``members``, constants by value, ``in``
    for anything from outside): commutative operands sorted by it give equal regions equal bodies."""
    p = producer(t)
    if p is not None and id(p) in members:
        return "n:" + p.op + "(" + ",".join(operand_key(i, members) for i in p.inputs) + ")"
    arr = const_array(t, limit=1)
    if arr is not None:
        return f"c:{arr.reshape(-1)[0]!r}"
    return "in"
