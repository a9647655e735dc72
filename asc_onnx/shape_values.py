"""Values of shape tensors, as numbers and dim names, so Reshape and Expand outputs in control-flow bodies get
named dims.

Exporters compute the target shape of a Reshape or Expand from the data's own shape (``Shape``, ``Gather``,
``Unsqueeze``, ``Concat``) or write ``-1``. onnx's shape inference gives such outputs fresh dims (``unk__7``)
when a dim is dynamic, so two tensors of one shape look unrelated and a chain over both cannot fuse.
onnxruntime's symbolic inference follows the arithmetic in the main graph but does not enter If, Loop and Scan
bodies. This module follows the few ops those chains use, in one pass over a graph, and writes the dims it can
prove into the graph's value_info (a ``-1`` is what is left once the named dims cancel); onnx's inference then
carries them downstream (``load.infer_shapes``).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

#: A dim: a number, an input dim's name, or None (unknown).
Dim = int | str | None

_INTS = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}
_SMALL = 64  # integer constants up to this many elements can be shapes


def _dims(vi: onnx.ValueInfoProto | None) -> list[Dim] | None:
    if vi is None or not vi.type.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else
            (d.dim_param if d.dim_param and not d.dim_param.startswith("unk__") else None)
            for d in vi.type.tensor_type.shape.dim]


def _const(t: onnx.TensorProto) -> list[Dim] | int | None:
    if t.data_type not in _INTS or np.prod(t.dims, dtype=np.int64) > _SMALL:
        return None
    a = numpy_helper.to_array(t)
    return int(a) if a.ndim == 0 else [int(v) for v in a.reshape(-1)] if a.ndim == 1 else None


def _arith(op: str, a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        # ONNX's integer Div truncates toward zero (Python's // floors)
        return {"Add": a + b, "Sub": a - b, "Mul": a * b,
                "Div": (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1) if b else None}[op]
    if op == "Mul" and (a == 1 or b == 1):
        return b if a == 1 else a
    if op in ("Add", "Sub") and b == 0:
        return a
    return None


def _reshaped(src: list[Dim] | None, target: list[Dim], allowzero: bool) -> list[Dim] | None:
    """Reshape's output dims: 0 copies the input's dim, -1 is what is left once the named dims cancel."""
    out = [src[i] if d == 0 and not allowzero and src is not None and i < len(src) else d
           for i, d in enumerate(target)]
    if out.count(-1) > 1 or any(d is None or (d == 0 and not allowzero) for d in out):
        return None
    if -1 in out:
        if src is None or any(d is None for d in src):
            return None
        rest = [d for d in out if d != -1]
        names = [d for d in src if isinstance(d, str)]
        for d in rest:
            if isinstance(d, str):
                if d not in names:
                    return None
                names.remove(d)
        num = int(np.prod([d for d in src if isinstance(d, int)], dtype=np.int64))
        den = int(np.prod([d for d in rest if isinstance(d, int)], dtype=np.int64))
        if den == 0 or num % den:
            return None
        if names:
            if len(names) != 1 or num != den:
                return None
            out[out.index(-1)] = names[0]
        else:
            out[out.index(-1)] = num // den
    return out


def _sliced(src: list[Dim] | None, params: list) -> list[Dim] | None:
    """Slice's output dims from constant starts, ends, axes and steps: untouched axes keep their dims (names
    included), sliced ones need a number, or a name sliced whole."""
    if src is None or not all(isinstance(v, list) for v in params[:2]):
        return None
    starts, ends = params[0], params[1]
    axes = params[2] if len(params) > 2 and params[2] is not None else list(range(len(starts)))
    steps = params[3] if len(params) > 3 and params[3] is not None else [1] * len(starts)
    if not (isinstance(axes, list) and isinstance(steps, list)) or not len(starts) == len(ends) == len(axes) == len(
            steps) or any(not isinstance(v, int) for v in [*starts, *ends, *axes, *steps]):
        return None
    out = list(src)
    for b, e, ax, st in zip(starts, ends, axes, steps):
        if not -len(src) <= ax < len(src) or st == 0:
            return None
        d = src[ax]
        if isinstance(d, int):
            out[ax] = len(range(*slice(b, e, st).indices(d)))
        elif b == 0 and st == 1 and e >= 2**31 - 1:
            out[ax] = d
        else:
            return None
    return out


def _broadcast(a: list[Dim], b: list[Dim]) -> list[Dim] | None:
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    out: list[Dim] = []
    for x, y in zip(a, b):
        if x == 1 or x == y:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            return None
    return out if all(d is not None for d in out) else None


def name_dims(g: onnx.GraphProto, outer: dict[str, onnx.ValueInfoProto] | None = None) -> int:
    """Follow a graph's shape arithmetic and write the dims of Reshape, Expand, ConstantOfShape, Range and
    Slice outputs that onnx left unknown into its value_info (``outer``: the enclosing scopes' tensors, for a
    control-flow body); return how many tensors got dims."""
    info = {**(outer or {}), **{vi.name: vi for vi in [*g.input, *g.value_info, *g.output]}}
    vals: dict[str, list[Dim] | int] = {}
    for t in g.initializer:
        v = _const(t)
        if v is not None:
            vals[t.name] = v
    named = 0
    for n in g.node:
        op, ins = n.op_type, list(n.input)
        got = [vals.get(i) for i in ins]
        res: list[Dim] | int | None = None
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        if op == "Constant" and "value" in attrs:
            res = _const(attrs["value"])
        elif op == "Shape" and ins:
            dims = _dims(info.get(ins[0]))
            if dims is not None:
                res = dims[attrs.get("start", 0):attrs.get("end", len(dims))]
        elif op in ("Identity", "Cast") and got and got[0] is not None:
            res = got[0]
        elif op == "Gather" and len(got) == 2 and isinstance(got[0], list) and got[1] is not None \
                and attrs.get("axis", 0) == 0:
            idx = got[1]
            if isinstance(idx, int) and -len(got[0]) <= idx < len(got[0]):
                res = got[0][idx]
            elif isinstance(idx, list) and all(isinstance(i, int) and -len(got[0]) <= i < len(got[0]) for i in idx):
                res = [got[0][i] for i in idx]
        elif op == "Unsqueeze" and got and got[0] is not None and not isinstance(got[0], list):
            res = [got[0]]
        elif op == "Squeeze" and got and isinstance(got[0], list) and len(got[0]) == 1:
            res = got[0][0]
        elif op == "Concat" and got and all(isinstance(v, list) for v in got):
            res = [d for v in got for d in v]
        elif op == "Slice" and len(got) >= 3 and isinstance(got[0], list) and all(
                isinstance(v, list) and len(v) == 1 for v in got[1:]):
            axes, steps = (got[3] if len(got) > 3 else [0]), (got[4] if len(got) > 4 else [1])
            if axes in ([0], [-1]) and steps[0] != 0:
                res = got[0][slice(got[1][0], got[2][0], steps[0])]
        elif op in ("Add", "Sub", "Mul", "Div") and len(got) == 2 and all(v is not None for v in got):
            a, b = got
            if isinstance(a, int) and isinstance(b, int):
                res = _arith(op, a, b)
            elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
                res = [_arith(op, x, y) for x, y in zip(a, b)]
        if res is not None and not (isinstance(res, list) and len(res) > _SMALL):
            vals[n.output[0]] = res
        # Outputs whose dims the shape values give.
        out: list[Dim] | None = None
        if op == "Reshape" and len(got) == 2 and isinstance(got[1], list):
            out = _reshaped(_dims(info.get(ins[0])), got[1], bool(attrs.get("allowzero", 0)))
        elif op == "Expand" and len(got) == 2 and isinstance(got[1], list):
            src = _dims(info.get(ins[0]))
            out = _broadcast(src, got[1]) if src is not None and None not in src else None
        elif op == "ConstantOfShape" and got and isinstance(got[0], list):
            out = got[0] if None not in got[0] else None
        elif op == "Range" and len(got) == 3 and all(not isinstance(v, list) and v is not None for v in got):
            start, limit, delta = got
            if start == 0 and delta == 1:
                out = [limit]
            elif all(isinstance(v, int) for v in got) and delta != 0:
                out = [len(range(start, limit, delta))]
        elif op == "Slice" and res is None and len(got) >= 3:
            out = _sliced(_dims(info.get(ins[0])), got[1:])
        if out is None or any(d is None or (isinstance(d, int) and d < 0) for d in out):
            continue
        vi = info.get(n.output[0])
        have = _dims(vi)
        if have is not None and None not in have:
            continue
        if vi is None:
            vi = g.value_info.add()
            vi.name = n.output[0]
            info[vi.name] = vi
        if not vi.type.tensor_type.elem_type and ins and ins[0] in info and op != "ConstantOfShape":
            vi.type.tensor_type.elem_type = info[ins[0]].type.tensor_type.elem_type
        shape = vi.type.tensor_type.shape
        shape.ClearField("dim")
        for d in out:
            dim = shape.dim.add()
            if isinstance(d, int):
                dim.dim_value = d
            else:
                dim.dim_param = d
        named += 1
    return named


def known(vi: onnx.ValueInfoProto | None) -> bool:
    """A rank and every dim a number or a name."""
    dims = _dims(vi)
    return dims is not None and None not in dims


def name_body_dims(model: onnx.ModelProto) -> bool:
    """:func:`name_dims` in every control-flow body (nested too, each seeing its enclosing scopes); where it
    names a tensor, the body's entries with unknown dims are dropped so that onnx's inference, run again by the
    caller, recomputes them from the named ones. True when anything was named."""
    changed = False

    def walk(graph: onnx.GraphProto, outer: dict[str, onnx.ValueInfoProto]) -> None:
        nonlocal changed
        scope = {**outer, **{vi.name: vi for vi in [*graph.input, *graph.value_info, *graph.output]}}
        for node in graph.node:
            for a in node.attribute:
                bodies = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
                for body in bodies:
                    if name_dims(body, scope):
                        changed = True
                        keep = [vi for vi in body.value_info if known(vi)]
                        del body.value_info[:]
                        body.value_info.extend(keep)
                    walk(body, scope)

    walk(model.graph, {})
    return changed
