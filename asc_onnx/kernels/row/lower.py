"""Stage 5, lower (row class): an op whose body reduces over trailing axes becomes a row-kernel IR.

The body is read node by node, not per pattern: any composition of elementwise ops, reductions over
a trailing group of axes (``ReduceSum/Mean/Max/Min/SumSquare/L2`` with ``keepdims=1``) and the ops
``Softmax``, ``LogSoftmax``, ``LayerNormalization`` and ``RMSNormalization`` lowers, with every value in
one of three classes:

* ``row``  -- a tile of rows, ``[rows, rowLength]`` seen flat (the data, e.g. x, x - mean, exp(x - max));
* ``stat`` -- one fp32 value per row of the tile (a sum, a max, 1/sqrt(var + eps)), in 64-byte slots;
* ``vec``  -- one row shared by every row (gamma, beta, Gemma's ``1 + w``), computed once per core.

A binary op of a row and a stat becomes a per-row scalar instruction (``Adds``/``Muls`` with the stat
read back by ``GetValue``); of a row and a vec, a per-row vector instruction. Everything computes in
fp32; Casts between float types are identities (the kernel keeps fp32 until the final cast, one
rounding fewer than the exported fp16 graph). Flatten/Reshape/Squeeze/Unsqueeze that keep the row
split are identities in flat memory.

The data's shape is the broadcast of the inputs that carry rows. Inputs are ``full`` (the data's
shape), ``vec`` (the row's trailing dims: gamma, beta) or ``bcast`` (rows of
their own repeated along leading axes by N-d index: an attention mask ``[B,1,S,S]`` over ``[B,H,S,S]``).
Outputs are ``row`` or ``stat`` (LayerNormalization's Mean and InvStdDev).

For rows too long for the unified buffer the schedule goes in passes over column chunks: each pass
re-reads the row and finishes the reductions whose inputs are ready (``avail``), so a softmax reads x
three times, an RMSNorm twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ...fusion import FusedOp
from ...graph import attr
from ..ir import IO_TYPES, LoweringError, NamedInputs, Param, snake_case
from ..vector import Builder, Step, lower_node
from .rows import MAX_LEAD, Row, RowInput, axes_const, body_shapes, classify_inputs, trailing_axes
from .schedule import STAT_SLOT, RowSchedule

REDUCE_APIS = {"ReduceSum": "ReduceSum", "ReduceMean": "ReduceSum", "ReduceMax": "ReduceMax",
               "ReduceMin": "ReduceMin", "ReduceSumSquare": "ReduceSum", "ReduceL2": "ReduceSum"}
IDENTITY_OPS = {"Cast", "Identity", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "CastLike"}
ROW_OPS = {"Softmax", "LogSoftmax", "LayerNormalization", "RMSNormalization"}


@dataclass(frozen=True)
class RowStep:
    """One instruction. Operands are register names: ``rK`` row, ``sK`` stat, ``vK`` vec.

    ``form``: ``tile`` (elementwise over a whole register), ``vec`` (per row, with a vec operand),
    ``scalar`` (per row, the scalar read from stat ``stat``), ``reduce`` (per row into a stat slot).
    ``scalar_expr`` names a runtime scalar (``invLength``) instead of ``scalar``.
    ``avail`` is the pass after which the value exists in split mode (reductions finish in pass ``avail - 1``).
    ``online`` marks split mode's one-pass forms: ``("max",)`` a running max whose previous value rescales a sum,
    ``("neg",)`` its negation, recomputed per chunk, ``("sum", max)`` a sum of exp(x - max) rescaled as the max
    grows, ``("shifted", x, sum_x, scratch)`` a sum of (x - mean)^2 taken as a sum of (x - K)^2 about the row's
    first element K and corrected once the sum of x is known.
    """

    api: str
    dst: str
    srcs: tuple[str, ...] = ()
    scalar: float | None = None
    mode: str | None = None
    form: str = "tile"
    stat: str | None = None
    scalar_expr: str | None = None
    avail: int = 0
    online: tuple[str, ...] = ()  # split mode's one-pass forms (see _online), with register names


@dataclass(frozen=True)
class RowKernel(NamedInputs):
    """Kernel IR of one row-class fused op type."""

    op_type: str
    snake: str
    inputs: tuple[RowInput, ...]
    outputs: tuple[str, ...]
    output_kinds: tuple[str, ...]
    steps: tuple[RowStep, ...]
    hoisted: tuple[RowStep, ...]  # constants and vec-class steps: once per core (per chunk in split mode)
    out_regs: tuple[str, ...]
    num_regs: Mapping[str, int]
    dtypes: tuple[int, ...]
    row_dims: int  # trailing dims of the first row input that form one row
    passes: int  # split mode: reads of the row (reductions finish in passes 0..passes-2)
    params: tuple[float, ...] = ()  # the first node's values of the scalars read from the tiling data
    schedule: RowSchedule = RowSchedule()  # the policies the kernel is rendered with

    @property
    def uses_select(self) -> bool:
        """Select writes scratch at TMP_UB_OFFSET: the host must reserve 8 KB of UB for it."""
        return any(s.api == "Select" for s in self.steps + self.hoisted)

    @property
    def data_inputs(self) -> tuple[int, ...]:
        """Inputs carrying rows of the data (``full`` and ``bcast``): the data's shape is their broadcast."""
        return tuple(i for i, x in enumerate(self.inputs) if x.kind in ("full", "bcast"))

    @property
    def broadcast_inputs(self) -> tuple[int, ...]:
        """Indexes of the ``bcast`` inputs (rows mapped by N-d index)."""
        return tuple(i for i, x in enumerate(self.inputs) if x.kind == "bcast")


class _RowBuilder(Builder):
    """Emits class-annotated steps; mixed-class binary ops become per-row forms."""

    def __init__(self, classes: Mapping[int, str]) -> None:
        super().__init__(len(classes))
        self.cls: dict[int, str] = dict(classes)
        self.extra: dict[int, dict] = {}
        self.const_of: dict[tuple[float, str], int] = {}
        self.pending: dict[int, float] = {}  # dup() values not yet given a class

    def dup(self, v: float) -> int:
        reg = self.next
        self.next += 1
        self.pending[reg] = v if isinstance(v, Param) else float(v)
        self.cls[reg] = "const"
        return reg

    def _const(self, v: float, cls: str) -> int:
        key = (v if isinstance(v, Param) else float(np.float32(v)), cls)
        if key not in self.const_of:
            reg = self._raw("Duplicate", (), v, None, cls, form="tile")
            self.const_of[key] = reg
        return self.const_of[key]

    def _raw(self, api: str, srcs, scalar, mode, cls: str, **extra) -> int:
        dst = self.next
        self.next += 1
        self.cls[dst] = cls
        self.extra[dst] = extra
        kept = scalar if scalar is None or isinstance(scalar, Param) else float(scalar)
        self.steps.append(Step(api, dst, tuple(srcs), kept, mode))
        return dst

    def emit(self, api: str, srcs=(), scalar=None, mode=None) -> int:
        srcs = list(srcs)
        classes = [self.cls[s] for s in srcs]
        real = [c for c in classes if c != "const"]
        if not real and srcs:
            raise LoweringError(f"{api} of constants only")
        target = "row" if "row" in real else ("vec" if "vec" in real else ("stat" if real else "row"))
        srcs = [self._const(self.pending[s], target) if self.cls[s] == "const" else s for s in srcs]
        classes = [self.cls[s] for s in srcs]
        if len(set(classes)) <= 1:
            return self._raw(api, srcs, scalar, mode, classes[0] if classes else "row")
        if api == "Select" or api == "Compare":
            raise LoweringError(f"{api} mixing per-row statistics or weights with row data is not served")
        if set(classes) == {"stat", "vec"}:
            raise LoweringError(f"{api} of a per-row statistic and a weight vector is not served by the row kernel")
        a, b = srcs
        if set(classes) == {"row", "vec"}:
            return self._raw(api, (a, b), None, None, "row", form="vec")
        row, stat = (a, b) if self.cls[a] == "row" else (b, a)
        row_first = self.cls[a] == "row"
        scalar_api = {"Add": "Adds", "Mul": "Muls", "Max": "Maxs", "Min": "Mins"}
        if api in scalar_api:
            return self._raw(scalar_api[api], (row,), None, None, "row", form="scalar", stat=stat)
        if api == "Sub":
            if row_first:  # row - stat
                neg = self._raw("Muls", (stat,), -1.0, None, "stat")
                return self._raw("Adds", (row,), None, None, "row", form="scalar", stat=neg)
            negrow = self._raw("Muls", (row,), -1.0, None, "row")  # stat - row
            return self._raw("Adds", (negrow,), None, None, "row", form="scalar", stat=stat)
        if api == "Div":
            if row_first:  # row / stat: one reciprocal per row, then a multiply
                inv = self._raw("Div", (self._const(1.0, "stat"), stat), None, None, "stat")
                return self._raw("Muls", (row,), None, None, "row", form="scalar", stat=inv)
            inv = self._raw("Div", (self._const(1.0, "row"), row), None, None, "row")
            return self._raw("Muls", (inv,), None, None, "row", form="scalar", stat=stat)
        raise LoweringError(f"{api} of row data and a per-row statistic is not served by the row kernel")

    def reduce(self, api: str, src: int) -> int:
        if self.cls[src] != "row":
            raise LoweringError("a reduction of a per-row statistic or a weight is not served by the row kernel")
        return self._raw(api, (src,), None, None, "stat", form="reduce")

    def mean(self, src: int) -> int:
        s = self.reduce("ReduceSum", src)
        return self._raw("Muls", (s,), None, None, "stat", scalar_expr="invLength")


def lower_row(op: FusedOp, symbolic: Mapping[str, tuple[object, ...] | None] | None = None,
              kinds: Sequence[str] | None = None) -> RowKernel:
    """Lower one row-class fused op; raises LoweringError with the reason when it cannot."""
    dtypes = []
    for col in op.dtype_columns:
        if len(set(col)) != 1 or col[0] not in IO_TYPES:
            raise LoweringError(f"dtype column {col} mixes or uses unsupported element types")
        dtypes.append(col[0])
    shapes = body_shapes(op)
    consts: dict[str, np.ndarray] = {}
    row = Row()
    params = {name: i for i, name in enumerate(op.params)}
    first = op.instances[0].params if op.instances and op.instances[0].params else (0.0,) * len(params)
    for node in op.function.node:  # the row length first: it decides which inputs are vectors
        if node.op_type == "Constant" and not node.attribute[0].ref_attr_name:
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
        elif node.op_type in REDUCE_APIS or node.op_type in ROW_OPS:
            shape = shapes.get(node.input[0])
            if shape is None:
                raise LoweringError(f"{node.op_type}'s input has an unknown rank")
            rank = len(shape)
            if node.op_type in REDUCE_APIS:
                axes = axes_const(node, consts)
                fake = helper.make_node(node.op_type, [node.input[0]], ["_"], keepdims=attr(node, "keepdims", 1),
                                        **({"axes": axes} if axes is not None else {}))
                trailing_axes(fake, rank, shapes, row)
            else:
                axis = attr(node, "axis", -1) % rank
                if node.op_type in ("Softmax", "LogSoftmax") and axis != rank - 1:
                    raise LoweringError(f"{node.op_type} over axis {axis} of a rank-{rank} tensor, not the last axis")
                row.agree(shape[axis:], node.op_type, rank)
    if row.length is None:
        raise LoweringError("the body has no reduction over trailing axes")
    inputs, row_dims = classify_inputs(op, symbolic, row)
    if kinds is not None:  # as decided when the package was written
        inputs = tuple(RowInput(n, k) for n, k in zip(op.input_names, kinds))
    cls = {i: ("vec" if x.kind == "vec" else "row") for i, x in enumerate(inputs)}
    b = _RowBuilder(cls)
    values: dict[str, int | float | None] = {n: i for i, n in enumerate(op.input_names)}
    values[""] = None
    for node in op.function.node:
        if node.op_type == "Constant" and node.attribute[0].ref_attr_name:
            ref = node.attribute[0].ref_attr_name
            values[node.output[0]] = Param(first[params[ref]], params[ref])
            continue
        if node.op_type == "Constant":
            arr = consts[node.output[0]]
            values[node.output[0]] = float(arr.reshape(-1)[0]) if arr.size >= 1 and np.all(arr == arr.reshape(-1)[0]) \
                and arr.dtype.kind == "f" else None
            if values[node.output[0]] is None and node.output[0] not in _shape_consumers(op.function):
                raise LoweringError("a non-uniform constant tensor in the body is not served by the row kernel")
            continue
        args = [values.get(i) for i in node.input]
        outs = _lower_row_node(b, node, args, shapes)
        for name, v in zip(node.output, outs):
            if name:
                values[name] = v
    out_regs, out_kinds = [], []
    for name in op.output_names:
        v = values[name]
        if not isinstance(v, int):
            raise LoweringError(f"output {name} is a constant")
        if b.cls[v] == "vec":
            raise LoweringError(f"output {name} does not depend on the row data")
        out_kinds.append("stat" if b.cls[v] == "stat" else "row")
        out_regs.append(v)
    if "row" not in out_kinds:
        raise LoweringError("no output has the data's shape")
    return replace(_finish(op, b, inputs, out_regs, out_kinds, tuple(dtypes), row_dims), params=tuple(first))


def _shape_consumers(function) -> set[str]:
    """Constants read only as shapes or axes (Reshape targets, Unsqueeze axes ...)."""
    out = set()
    for node in function.node:
        if node.op_type in IDENTITY_OPS or node.op_type in REDUCE_APIS:
            out.update(node.input[1:])
    return out


def _lower_row_node(b: _RowBuilder, node, args, shapes) -> list[int | float | None]:
    op = node.op_type
    x = args[0] if args else None
    if op in IDENTITY_OPS:
        if op == "Cast" and attr(node, "to", TensorProto.FLOAT) not in (TensorProto.FLOAT, TensorProto.FLOAT16,
                                                                          TensorProto.BFLOAT16, TensorProto.DOUBLE):
            raise LoweringError("a Cast to a non-float type is not served by the row kernel")
        return [x]
    if op in REDUCE_APIS:
        if not isinstance(x, int):
            raise LoweringError(f"{op} of a constant")
        src = b.emit("Mul", (x, x)) if op in ("ReduceSumSquare", "ReduceL2") else x
        if op == "ReduceMean":
            return [b.mean(src)]
        s = b.reduce(REDUCE_APIS[op], src)
        return [b.emit("Sqrt", (s,)) if op == "ReduceL2" else s]
    if op in ("Softmax", "LogSoftmax"):
        m = b.reduce("ReduceMax", x)
        d = b.emit("Sub", (x, m))
        e = b.emit("Exp", (d,))
        s = b.reduce("ReduceSum", e)
        if op == "Softmax":
            return [b.emit("Div", (e, s))]
        return [b.emit("Sub", (d, b.emit("Ln", (s,))))]
    if op == "LayerNormalization":
        eps = attr(node, "epsilon", 1e-5)
        mean = b.mean(x)
        d = b.emit("Sub", (x, mean))
        var = b.mean(b.emit("Mul", (d, d)))
        rstd = b.emit("Div", (b.dup(1.0), b.emit("Sqrt", (b.emit("Adds", (var,), eps),))))
        y = b.emit("Mul", (b.emit("Mul", (d, rstd)), args[1]))
        if len(args) > 2 and args[2] is not None:
            y = b.emit("Add", (y, args[2]))
        return [y, mean, rstd]
    if op == "RMSNormalization":
        eps = attr(node, "epsilon", 1e-5)
        ms = b.mean(b.emit("Mul", (x, x)))
        rstd = b.emit("Div", (b.dup(1.0), b.emit("Sqrt", (b.emit("Adds", (ms,), eps),))))
        return [b.emit("Mul", (b.emit("Mul", (x, rstd)), args[1]))]
    if len(node.output) != 1:
        raise LoweringError(f"{op} with several outputs is not served by the row kernel")
    try:
        return [lower_node(b, node, args)]
    except LoweringError as exc:
        raise LoweringError(str(exc).replace("pointwise kernel", "row kernel")) from None


def _online(b: _RowBuilder) -> dict[int, tuple[object, ...]]:
    """Split mode's one-pass forms, by value: an online softmax (``ReduceSum(Exp(x - ReduceMax(x)))``: the max and
    the rescaled sum in one pass over the row) and a variance about a mean of the same row (``ReduceSum((x -
    ReduceSum(x) * invLength)^2)``: the sum of squares about a shifted origin in the mean's pass)."""
    prod = {st.dst: st for st in b.steps}

    def ex(v: int) -> dict:
        return b.extra.get(v, {})

    def centred(d: Step | None) -> tuple[Step, Step] | None:
        """``d = x + (-stat)``: the negation and the stat."""
        if d is None or d.api != "Adds" or ex(d.dst).get("form") != "scalar":
            return None
        neg = prod.get(ex(d.dst)["stat"])
        if neg is None or neg.api != "Muls" or neg.scalar != -1.0 or neg.srcs[0] not in prod:
            return None
        return neg, prod[neg.srcs[0]]

    out: dict[int, tuple[object, ...]] = {}
    for st in b.steps:
        if st.api != "ReduceSum" or ex(st.dst).get("form") != "reduce" or st.srcs[0] not in prod:
            continue
        src = prod[st.srcs[0]]
        if src.api == "Exp" and (c := centred(prod.get(src.srcs[0]))):
            neg, m = c
            if m.api == "ReduceMax" and ex(m.dst).get("form") == "reduce" and m.srcs[0] == prod[src.srcs[0]].srcs[0]:
                out[m.dst], out[neg.dst], out[st.dst] = ("max",), ("neg",), ("sum", m.dst)
        elif src.api == "Mul" and src.srcs[0] == src.srcs[1] and (c := centred(prod.get(src.srcs[0]))):
            neg, mean = c
            d = prod[src.srcs[0]]
            sx = prod.get(mean.srcs[0]) if mean.api == "Muls" and ex(mean.dst).get("scalar_expr") == "invLength" \
                else None
            if sx is not None and sx.api == "ReduceSum" and ex(sx.dst).get("form") == "reduce" \
                    and sx.srcs[0] == d.srcs[0]:
                out[st.dst] = ("shifted", d.srcs[0], sx.dst, src.dst)
    return out


def _avail(b: _RowBuilder, online: Mapping[int, tuple[object, ...]]) -> dict[int, int]:
    """The pass after which each value exists (split mode): inputs 0; a reduction one pass after its input, an
    online sum with its max and a shifted variance with its mean's sum."""
    av: dict[int, int] = {}
    for st in b.steps:
        base = max((av.get(s, 0) for s in st.srcs), default=0)
        stat = b.extra.get(st.dst, {}).get("stat")
        if stat is not None:
            base = max(base, av.get(stat, 0))
        kind = online.get(st.dst, ("",))
        if kind[0] == "sum":
            av[st.dst] = av[kind[1]]
        elif kind[0] == "shifted":
            av[st.dst] = av[kind[2]]
        else:
            av[st.dst] = base + 1 if b.extra.get(st.dst, {}).get("form") == "reduce" else base
    return av


def _finish(op: FusedOp, b: _RowBuilder, inputs, out_regs, out_kinds, dtypes, row_dims) -> RowKernel:
    online = _online(b)
    av = _avail(b, online)
    # Reachable steps only (a LayerNormalization's unused Mean output computes nothing).
    needed: set[int] = set(out_regs)
    for st in reversed(b.steps):
        if st.dst in needed:
            needed.update(st.srcs)
            stat = b.extra.get(st.dst, {}).get("stat")
            if stat is not None:
                needed.add(stat)
    steps = [st for st in b.steps if st.dst in needed]
    hoist = [st for st in steps if st.api == "Duplicate" or b.cls[st.dst] == "vec"]
    body = [st for st in steps if st not in hoist]
    names = _allocate(b, body, hoist, inputs, out_regs)
    rows = []
    for st in hoist + body:
        ex = b.extra.get(st.dst, {})
        kind = online.get(st.dst, ())
        rows.append(RowStep(st.api, names[st.dst], tuple(names[s] for s in st.srcs), st.scalar, st.mode,
                            ex.get("form", "tile"), names[ex["stat"]] if ex.get("stat") is not None else None,
                            ex.get("scalar_expr"), av.get(st.dst, 0),
                            tuple(str(kind[0]) if i == 0 else names[v] for i, v in enumerate(kind))))
    counts = {c: 1 + max([int(n[1:]) for n in names.values() if n[0] == c[0]], default=-1) for c in ("row", "stat",
                                                                                                      "vec")}
    # Reads of the row in split mode: one per reduction level the row outputs wait for; stat outputs may
    # need their last reduction finished too.
    passes = max([1 + av.get(r, 0) for r, k in zip(out_regs, out_kinds) if k == "row"]
                 + [av.get(r, 0) for r, k in zip(out_regs, out_kinds) if k == "stat"])
    return RowKernel(op.op_type, snake_case(op.op_type), inputs, tuple(op.output_names), tuple(out_kinds),
                     tuple(rows[len(hoist):]), tuple(rows[:len(hoist)]), tuple(names[r] for r in out_regs),
                     counts, dtypes, row_dims, passes)


def _allocate(b: _RowBuilder, body, hoist, inputs, out_regs) -> dict[int, str]:
    """Physical registers per class. Row registers are reused once dead (valid for any order-preserving
    subset of the program, as split-mode passes are); stats and vecs live for the whole kernel."""
    names: dict[int, str] = {}
    count = {"r": 0, "s": 0, "v": 0}
    for i, x in enumerate(inputs):
        c = "v" if x.kind == "vec" else "r"
        names[i] = f"{c}{count[c]}"
        count[c] += 1
    pinned = {st.dst for st in hoist}
    for st in hoist:
        c = b.cls[st.dst][0]
        names[st.dst] = f"{c}{count[c]}"
        count[c] += 1
    last: dict[int, int] = {}
    for i, st in enumerate(body):
        for s in st.srcs:
            last[s] = i
        stat = b.extra.get(st.dst, {}).get("stat")
        if stat is not None:
            last[stat] = i
    for r in out_regs:
        last[r] = len(body)
    inputs_r = {int(names[i][1:]) for i, x in enumerate(inputs) if x.kind != "vec"}
    free: list[int] = []
    for i, st in enumerate(body):
        c = b.cls[st.dst][0]
        # A dying source's register is free for this step's result (in place) and later ones; an input's too
        # (fp32: the input tile itself, freed after compute). A reduction frees its source as well.
        dying = {int(names[s][1:]) for s in st.srcs
                 if b.cls[s] == "row" and last.get(s) == i and s not in pinned and s not in out_regs}
        masked = st.api in ("Compare", "Compares", "Select")
        if c != "r":
            free.extend(sorted(dying))
            names[st.dst] = f"{c}{count[c]}"
            count[c] += 1
            continue
        if not masked:
            free.extend(sorted(dying))
        # An output takes a free register that is not an input's (it is then computed straight into its tile).
        pick = [k for k in free if st.dst not in out_regs or k not in inputs_r]
        if pick:
            k = min(pick)
            free.remove(k)
        else:
            k = count["r"]
            count["r"] += 1
        if masked:
            free.extend(sorted(dying))
        names[st.dst] = f"r{k}"
    return names


__all__ = ["lower_row", "RowKernel", "RowStep", "RowInput", "STAT_SLOT", "MAX_LEAD"]
