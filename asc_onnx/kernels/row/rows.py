"""Which axes of a row op are its row, and what each input is to it: full, a weight row, a per-row statistic or
broadcast over the rows, decided on the shapes before --input-shape (every shape ATC will accept)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from ...dims import show
from ...fusion import FusedOp
from ...graph import attr
from ..ir import LoweringError

#: fp32 elements per stat slot: 64 bytes, so a slot cast to fp16 is one 32-byte block (DataCopyPad rows).
#: Leading axes a ``bcast`` input's row index is mapped through.
MAX_LEAD = 6


@dataclass(frozen=True)
class RowInput:
    """A kernel input: ``full`` (the data's shape), ``vec`` or ``bcast`` (see the module docstring)."""

    name: str
    kind: str


def body_shapes(op: FusedOp) -> dict[str, tuple[object, ...] | None]:
    """Shapes of every body value for the first instance (shape inference over the inlined body)."""
    inst = op.instances[0]
    dtype = inst.input_dtypes[0]
    opset = next(o.version for o in op.function.opset_import if o.domain in ("", "ai.onnx"))

    def vi(name, elem, shape):
        dims = None if shape is None else [d if isinstance(d, int) else str(d) for d in shape]
        return helper.make_tensor_value_info(name, elem, dims)

    # A parameter is a Constant that refers to an attribute of the function: outside the function it has no
    # value, and onnx's inference would lose every shape after it; any scalar of its type stands in here.
    types = dict(zip(op.params, op.param_types))
    nodes = [helper.make_node("Constant", [], list(n.output), value=helper.make_tensor(
        "", types.get(n.attribute[0].ref_attr_name, onnx.TensorProto.FLOAT), [], [0]))
        if n.op_type == "Constant" and n.attribute and n.attribute[0].ref_attr_name else n for n in op.function.node]
    graph = helper.make_graph(nodes, "body",
                              [vi(n, t, s) for n, t, s in zip(op.input_names, inst.input_dtypes, inst.input_shapes)],
                              [vi(n, dtype, None) for n in op.output_names])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception as exc:  # noqa: BLE001 - shape inference errors are many and varied
        raise LoweringError(f"shape inference of the body failed: {exc}") from None
    out: dict[str, tuple[object, ...] | None] = {n: s for n, s in zip(op.input_names, inst.input_shapes)}
    for v in list(inferred.graph.value_info) + list(inferred.graph.output):
        t = v.type.tensor_type
        if t.HasField("shape"):
            out[v.name] = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                                for d in t.shape.dim)
    return out


def same(a: object, b: object) -> bool:
    return a == b and (isinstance(a, int) or (isinstance(a, str) and a not in ("", "?")))


def prod(dims: Sequence[object]) -> object:
    if all(isinstance(d, int) for d in dims):
        return int(np.prod(dims)) if dims else 1
    return tuple(dims)


class Row:
    """The row split every reduction of the body must agree on."""

    def __init__(self) -> None:
        self.length: object = None
        self.rank = 0  # rank of the first reduced tensor, and its trailing dims reduced
        self.count = 0

    def agree(self, dims: Sequence[object], what: str, rank: int = 0) -> None:
        if not self.count:
            self.rank, self.count = rank, len(dims)
        n = prod(dims)
        if self.length is None:
            self.length = n
        elif isinstance(n, int) and isinstance(self.length, int) and n != self.length:
            raise LoweringError(f"{what} reduces rows of {n} elements where the body's other reductions take "
                                f"{self.length}")


def trailing_axes(node, rank: int, shapes, row: Row) -> None:
    """A reduction's axes must be a trailing group of its input (``keepdims=1``)."""
    axes = attr(node, "axes", None)
    if axes is None and len(node.input) > 1 and node.input[1]:
        raise LoweringError(f"{node.op_type} takes its axes from a computed tensor")
    if axes is None:
        if attr(node, "noop_with_empty_axes", 0):
            raise LoweringError(f"{node.op_type} with no axes is a no-op here")
        axes = list(range(rank))
    norm = sorted(a % rank for a in axes)
    if norm != list(range(rank - len(norm), rank)):
        raise LoweringError(f"{node.op_type} reduces over axes {list(axes)} of a rank-{rank} tensor, not a trailing "
                            "group; the row kernel reduces rows")
    if not attr(node, "keepdims", 1):
        raise LoweringError(f"{node.op_type} with keepdims=0 is not served by the row kernel")
    row.agree(shapes[node.input[0]][rank - len(norm):], node.op_type, rank)


def axes_const(node, consts: Mapping[str, np.ndarray]) -> list[int] | None:
    for a in node.attribute:
        if a.name == "axes":
            return list(helper.get_attribute_value(a))
    if len(node.input) > 1 and node.input[1]:
        if node.input[1] not in consts:
            raise LoweringError(f"{node.op_type} takes its axes from a computed tensor")
        return [int(v) for v in consts[node.input[1]].reshape(-1)]
    return None


def _relation(d: object, o: object) -> str:
    """How an input dim meets the data's dim: ``same``, ``repeat`` (a 1 the kernel repeats) or ``bad``.

    Two different symbolic dims may be equal or one of them 1 at run time (ORT's inference names dims apart
    even where they are one): an input with such dims is ``bcast``, whose row mapping the host tiling
    computes from the real shapes, so it serves both cases."""
    if d == o:
        return "same"
    if d == 1:
        return "repeat"
    if not isinstance(d, int) or not isinstance(o, int):
        return "same"
    return "bad"


def _kind(shape: Sequence[object], out: Sequence[object], row_dims: int, row_len: object) -> str | None:
    rel = [_relation(d, o) for d, o in zip(list(shape)[::-1], list(out)[::-1])][::-1]
    if len(shape) > len(out) or "bad" in rel:
        return None
    if len(shape) == len(out) and all(same(d, o) for d, o in zip(shape, out)):
        return "full"  # provably the data's shape: read in blocks of rows
    core = list(shape)
    while core and core[0] == 1:
        core.pop(0)
    if len(core) <= row_dims and prod(core) == row_len:
        return "vec"
    if all(r == "same" for r in rel[len(rel) - row_dims:]) and len(shape) >= row_dims:
        return "bcast"
    return None


def row_dims_of(out: Sequence[object], row: Row) -> int:
    """Trailing dims of the data that form one row: the reductions' own count where they reduce the data's
    rank, else the trailing group whose product is the row length (a Flatten-ed body)."""
    if row.rank == len(out) and row.count and (not isinstance(row.length, int)
                                               or prod(list(out[len(out) - row.count:])) == row.length):
        return row.count
    for k in range(len(out) - 1, -1, -1):
        if prod(list(out[k:])) == row.length:
            return len(out) - k
    raise LoweringError(f"rows of {row.length} elements are not a trailing group of the data's shape {show(out)}")


def classify_inputs(op: FusedOp, symbolic, row: Row) -> tuple[tuple[RowInput, ...], int]:
    """Input kinds from the instance shapes; returns them and the trailing dims forming a row.

    An input that is full-shaped in one use and repeated in another (a position embedding added to the
    first layer's residual) is read as ``bcast`` everywhere: a full tensor is a mask that repeats nowhere."""
    sym = symbolic or {}
    out_shapes = [sym.get(i.outputs[0]) or i.output_shapes[0] for i in op.instances]
    if any(o is None for o in out_shapes):
        raise LoweringError("the output has an unknown shape")
    row_dims = row_dims_of(out_shapes[0], row)
    kinds: list[str] = []
    for i, name in enumerate(op.input_names):
        seen = set()
        for inst, out in zip(op.instances, out_shapes):
            shape = sym.get(inst.inputs[i]) or inst.input_shapes[i]
            if shape is None:
                raise LoweringError(f"input {name} has an unknown shape")
            kind = _kind(shape, out, row_dims, row.length)
            if kind is None:
                raise LoweringError(f"input {name} {list(shape)} neither has the data's shape {show(out)} nor is a "
                                    "row vector or whole rows repeated along leading axes")
            if kind == "bcast" and len(out) - row_dims > MAX_LEAD:
                raise LoweringError(f"input {name} repeats over more than {MAX_LEAD} leading axes")
            seen.add(kind)
        if seen == {"full", "bcast"}:
            seen = {"bcast"}
        if len(seen) > 1:
            raise LoweringError(f"input {name} is used as {' and '.join(sorted(seen))}")
        kinds.append(seen.pop())
    if "full" not in kinds and "bcast" not in kinds:
        raise LoweringError("no input carries rows of the data")
    return tuple(RowInput(n, k) for n, k in zip(op.input_names, kinds)), row_dims
