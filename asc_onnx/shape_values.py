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

import math
from collections.abc import Sequence

import onnx
from onnx import numpy_helper

#: A dim: a number, an input dim's name, or None (unknown).
Dim = int | str | None

_INTS = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}
_SMALL = 64  # integer constants up to this many elements can be shapes


def _dims(vi: onnx.ValueInfoProto | None) -> list[Dim] | None:
    if vi is None:
        return None
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    out: list[Dim] = []
    for d in tt.shape.dim:  # (one oneof query a dim: this runs for every value, several times, on 20k-node graphs)
        which = d.WhichOneof("value")
        if which == "dim_value":
            out.append(d.dim_value)
        else:
            param = d.dim_param if which else ""
            out.append(param if param and not param.startswith("unk__") else None)
    return out


def _const(t: onnx.TensorProto) -> list[Dim] | int | None:
    if t.data_type not in _INTS or len(t.dims) > 1 or math.prod(t.dims) > _SMALL:
        return None
    a = numpy_helper.to_array(t)
    return int(a) if a.ndim == 0 else [int(v) for v in a.reshape(-1)] if a.ndim == 1 else None


def _arith(op: str, a: Dim, b: Dim) -> Dim:
    if op == "Equal":  # a named dim is never negative: it is not a -1 or 0 marker
        return int(a == b) if isinstance(a, int) and isinstance(b, int) else \
            0 if (isinstance(a, int) and a <= 0) or (isinstance(b, int) and b <= 0) else None
    if isinstance(a, int) and isinstance(b, int):
        # ONNX's integer Div truncates toward zero (Python's // floors)
        return {"Add": a + b, "Sub": a - b, "Mul": a * b,
                "Div": (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1) if b else None}[op]
    if op == "Mul" and (a == 1 or b == 1):
        return b if a == 1 else a
    if op == "Mul" and isinstance(a, str) and isinstance(b, str):
        return _product(_factors(a) + _factors(b))
    if op in ("Add", "Sub") and b == 0:
        return a
    return None


def _factors(d: str) -> list[str]:
    """The input dim names a named dim multiplies (``batch*seq``: a Reshape that merged them)."""
    return d.split("*")


def _product(names: list[str]) -> str:
    return "*".join(sorted(names))


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
        names = [f for d in src if isinstance(d, str) for f in _factors(d)]
        for d in rest:
            for f in _factors(d) if isinstance(d, str) else ():
                if f not in names:
                    return None
                names.remove(f)
        num = math.prod(d for d in src if isinstance(d, int))
        den = math.prod(d for d in rest if isinstance(d, int))
        if den == 0 or num % den:
            return None
        if names:
            if num != den:
                return None
            out[out.index(-1)] = _product(names)
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
            steps) or any(not isinstance(v, int) for v in [*starts, *axes, *steps]) or None in ends:
        return None
    out = list(src)
    for b, e, ax, st in zip(starts, ends, axes, steps):
        if not -len(src) <= ax < len(src) or st == 0:
            return None
        d = src[ax]
        if isinstance(e, str):
            # ``buffer[:seq]``: a cached table (positions, a causal mask) cut to the sequence, which the model
            # assumes fits in it (onnxruntime's symbolic inference assumes the same)
            if b != 0 or st != 1 or d is None:
                return None
            out[ax] = e
        elif isinstance(d, int):
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


def _spread(values: Sequence[list[Dim] | Dim]) -> list[list[Dim] | None]:
    """Shape values broadcast to the longest list among them: a scalar or a 1-list repeats; a list of another
    length gives None in its place."""
    n = max(len(v) for v in values if isinstance(v, list))
    return [[v] * n if not isinstance(v, list) else v if len(v) == n else v * n if len(v) == 1 else None
            for v in values]


def _values(op: str, got: list, attrs: dict, info: dict, ins: list[str]) -> list[Dim] | int | None:
    """The value of a shape computation's output (a dim or a 1-D list of dims), or None."""
    if op == "Constant" and "value" in attrs:
        return _const(attrs["value"])
    if op == "Shape" and ins:
        dims = _dims(info.get(ins[0]))
        return None if dims is None else dims[attrs.get("start", 0):attrs.get("end", len(dims))]
    if op in ("Identity", "Cast") and got and got[0] is not None:
        return got[0]
    if op == "Gather" and len(got) == 2 and isinstance(got[0], list) and got[1] is not None \
            and attrs.get("axis", 0) == 0:
        idx, src = got[1], got[0]
        if isinstance(idx, int) and -len(src) <= idx < len(src):
            return src[idx]
        if isinstance(idx, list) and all(isinstance(i, int) and -len(src) <= i < len(src) for i in idx):
            return [src[i] for i in idx]
        return None
    if op == "Unsqueeze" and got and got[0] is not None and not isinstance(got[0], list):
        return [got[0]]
    if op == "Squeeze" and got and isinstance(got[0], list) and len(got[0]) == 1:
        return got[0][0]
    if op == "Reshape" and len(got) == 2 and isinstance(got[0], list) and isinstance(got[1], list) \
            and got[1] in ([-1], [len(got[0])]):
        return got[0]
    if op == "Concat" and got and all(isinstance(v, list) for v in got):
        return [d for v in got for d in v]
    if op == "ConstantOfShape" and got and isinstance(got[0], list) and len(got[0]) == 1 \
            and isinstance(got[0][0], int) and got[0][0] <= _SMALL:
        fill = _const(attrs["value"]) if "value" in attrs else 0
        fill = fill[0] if isinstance(fill, list) and len(fill) == 1 else fill
        return [fill] * got[0][0] if isinstance(fill, int) else None
    if op == "Slice" and len(got) >= 3 and isinstance(got[0], list) and all(
            isinstance(v, list) and len(v) == 1 for v in got[1:]):
        axes, steps = (got[3] if len(got) > 3 else [0]), (got[4] if len(got) > 4 else [1])
        ok = axes in ([0], [-1]) and all(isinstance(v[0], int) for v in (got[1], got[2], steps)) and steps[0] != 0
        return got[0][slice(got[1][0], got[2][0], steps[0])] if ok else None
    if len(got) < 2 or any(v is None for v in got):
        return None
    if op in ("Add", "Sub", "Mul", "Div", "Equal") and len(got) == 2:
        a, b = got
        if isinstance(a, list) or isinstance(b, list):
            aa, bb = _spread((a, b))
            return None if aa is None or bb is None else [_arith(op, x, y) for x, y in zip(aa, bb)]
        return _arith(op, a, b)
    if op == "Where" and len(got) == 3:
        if not any(isinstance(v, list) for v in got):
            return got[1] if got[0] else got[2]
        c, x, y = _spread(got)
        if c is None or x is None or y is None or any(not isinstance(v, int) for v in c):
            return None
        return [xv if cv else yv for cv, xv, yv in zip(c, x, y)]
    return None


#: Ops whose output has the shape of their first input.
_SAME = {"Cast", "CastLike", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Sqrt", "Exp", "Log", "Erf", "Reciprocal",
         "Softmax", "LogSoftmax", "Identity", "Sin", "Cos", "Not", "Gelu", "LayerNormalization", "HardSigmoid",
         "LeakyRelu", "Elu", "Softplus", "Clip", "Floor", "Ceil", "Round", "Sign", "IsNaN", "IsInf", "Dropout"}
#: Ops whose output is their inputs' broadcast shape.
_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "Where", "Equal", "Less", "LessOrEqual", "Greater",
              "GreaterOrEqual", "And", "Or", "Max", "Min", "Mod", "PRelu"}
#: Ops whose output dims :func:`name_dims` carries from their inputs' (onnx's inference does too, but only after
#: the named Reshape outputs are written back: carrying them here saves a round of it per Reshape in a chain).
_CARRIED = _SAME | _BROADCAST | {"Transpose", "MatMul", "Unsqueeze", "Concat", "Gather", "GatherElements", "Gemm"}


def _carried(op: str, attrs: dict, dims: list[list[Dim] | None], got: list) -> list[Dim] | None:
    """The output dims of a shape-carrying op from its inputs' dims (``got``: the inputs' values), or None."""
    if op == "Unsqueeze":
        given = got[1] if len(got) > 1 else attrs.get("axes")
        if not dims or dims[0] is None or None in dims[0] or not isinstance(given, list):
            return None
        rank = len(dims[0]) + len(given)
        axes = sorted(a % rank for a in given if isinstance(a, int) and -rank <= a < rank)
        if len(axes) != len(given):
            return None
        out = list(dims[0])
        for a in axes:
            out.insert(a, 1)
        return out
    if not dims or any(d is None or None in d for d in dims):
        return None
    if op in _SAME:
        return list(dims[0])
    if op in _BROADCAST:
        out: list[Dim] | None = dims[0]
        for d in dims[1:]:
            out = _broadcast(out, d) if out is not None else None
        return out
    if op == "Concat":
        if len(dims) == 1:
            return list(dims[0])
        axis = attrs.get("axis", 0) % len(dims[0]) if dims[0] else 0
        if any(len(d) != len(dims[0]) or d[:axis] + d[axis + 1:] != dims[0][:axis] + dims[0][axis + 1:]
               for d in dims) or not all(isinstance(d[axis], int) for d in dims):
            return None
        return [*dims[0][:axis], sum(d[axis] for d in dims), *dims[0][axis + 1:]]
    if op == "Gather" and len(dims) == 2:  # an embedding lookup: the indices' dims in place of the axis
        axis = attrs.get("axis", 0) % max(1, len(dims[0]))
        return [*dims[0][:axis], *dims[1], *dims[0][axis + 1:]]
    if op == "GatherElements" and len(dims) == 2:
        return list(dims[1])
    if op == "Gemm" and len(dims) >= 2 and len(dims[0]) == 2 and len(dims[1]) == 2:
        m = dims[0][1] if attrs.get("transA", 0) else dims[0][0]
        n = dims[1][0] if attrs.get("transB", 0) else dims[1][1]
        return [m, n]
    if op == "Transpose":
        perm = attrs.get("perm", list(range(len(dims[0])))[::-1])
        return [dims[0][p] for p in perm] if sorted(perm) == list(range(len(dims[0]))) else None
    if op == "MatMul" and len(dims) == 2 and len(dims[0]) >= 2 and len(dims[1]) >= 2 \
            and dims[0][-1] == dims[1][-2]:
        batch = _broadcast(dims[0][:-2], dims[1][:-2]) if dims[0][:-2] or dims[1][:-2] else []
        return None if batch is None else [*batch, dims[0][-2], dims[1][-1]]
    return None


#: Ops whose output value or output dims :func:`name_dims` follows; every other node is passed over.
_FOLLOWED = {"Constant", "Shape", "Identity", "Cast", "Gather", "Unsqueeze", "Squeeze", "Reshape", "Concat",
             "ConstantOfShape", "Slice", "Add", "Sub", "Mul", "Div", "Equal", "Where", "Expand", "Range"}


class _Info(dict):
    """Tensor name -> ValueInfoProto, initializers included (typed on first use: a model has thousands)."""

    def __init__(self, infos: dict[str, onnx.ValueInfoProto], inits: dict[str, onnx.TensorProto]) -> None:
        super().__init__(infos)
        self.inits = inits

    def get(self, name: str, default: onnx.ValueInfoProto | None = None) -> onnx.ValueInfoProto | None:
        vi = super().get(name)
        if vi is None and name in self.inits:
            t = self.inits[name]
            vi = self[name] = onnx.helper.make_tensor_value_info(name, t.data_type, list(t.dims))
        return default if vi is None else vi


def name_dims(g: onnx.GraphProto, outer: dict[str, onnx.ValueInfoProto] | None = None) -> int:
    """Follow a graph's shape arithmetic and write the dims of Reshape, Expand, ConstantOfShape, Range and
    Slice outputs that onnx left unknown into its value_info, and carry them through the elementwise, Transpose
    and MatMul nodes after them (``outer``: the enclosing scopes' tensors, for a control-flow body); return how
    many tensors got dims."""
    info = _Info({**(outer or {}), **{vi.name: vi for vi in [*g.input, *g.value_info, *g.output]}},
                 {t.name: t for t in g.initializer})
    vals: dict[str, list[Dim] | int] = {}
    for t in g.initializer:
        v = _const(t)
        if v is not None:
            vals[t.name] = v
    named = 0
    for n in g.node:
        op = n.op_type
        follow = op in _FOLLOWED
        carry = op in _CARRIED and bool(n.output) and not known(info.get(n.output[0]))
        if not (follow or carry):
            continue
        ins = list(n.input)
        got = [vals.get(i) for i in ins]
        if not carry and op not in ("Constant", "Shape") and all(v is None for v in got):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        res = _values(op, got, attrs, info, ins) if follow else None
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
        elif carry:
            out = _carried(op, attrs, [_dims(info.get(i)) if i else None for i in ins], got)
        if out is None or any(d is None or (isinstance(d, int) and d < 0) for d in out):
            continue
        vi = info.get(n.output[0])
        have = _dims(vi)
        if (have is not None and (None not in have or len(have) != len(out))) or (vi is None and carry):
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
                        _drop_unknown(body)
                    walk(body, scope)

    walk(model.graph, {})
    return changed


def name_graph_dims(model: onnx.ModelProto, rounds: int = 4) -> bool:
    """:func:`name_dims` on the main graph of a model onnx's inference has run on, then that inference again so
    the named dims flow downstream, until nothing more is named (each round reaches one Reshape further down a
    chain whose target shape is computed from a reshaped tensor). True when every output of every main-graph
    node then has a rank and named or numeric dims: onnxruntime's symbolic inference has nothing to add."""
    g = model.graph
    for _ in range(rounds):
        if _complete(g) or not name_dims(g):
            break
        _drop_unknown(g)
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
        del g.value_info[:]
        g.value_info.extend(inferred.graph.value_info)
    return _complete(g)


def _drop_unknown(g: onnx.GraphProto) -> None:
    """Drop the value_info entries with an unknown dim, so onnx's inference, run again, recomputes them from the
    named ones (it keeps an entry it finds rather than widen it)."""
    keep = [vi for vi in g.value_info if known(vi)]
    del g.value_info[:]
    g.value_info.extend(keep)


def _complete(g: onnx.GraphProto) -> bool:
    info = {vi.name: vi for vi in [*g.value_info, *g.output]}
    return all(known(info.get(o)) for n in g.node for o in n.output if o)
