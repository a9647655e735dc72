"""The causal mask, recognised exactly: an additive attention mask that the graph computes from shapes alone and
that equals, at every size, 0 where a key is at or before its query and one fill value (-inf, or at most the
type's lowest finite value) after it. Such a mask is not an input of the fused op: its body computes it from q's and
v's shapes (:func:`mask_nodes`), and the kernel generates it and skips the KV blocks it masks whole.

How it is proved: each tensor the mask depends on is evaluated abstractly, as a function of its element's index:
a shape vector of symbolic dims (``Shape``, ``Gather``, ``Concat``, arithmetic), an integer tensor affine in the
index (``Range``, moved by ``Unsqueeze``, ``Expand``, ``Slice``), a boolean that is an affine inequality of the
index (``Less``, ``LessOrEqual``, ``Greater``, ``GreaterOrEqual``, ``Not``, a ``Trilu`` of a filled tensor) and a
two-valued tensor selected by one (``Where``, ``Cast``). A constant (a traced model's triangle of fixed size, a
GPT-2 bias buffer) is read and, where it is a triangle, taken as its inequality. The mask is causal when its value
is the inequality ``key - query <= Sk - Sq`` (queries aligned to the last keys: a KV cache's) with 0 on the visible
side, where Sq and Sk are its own last two dims and those of the scores. Symbolic dims are linear forms of the
model's dim names (``past + 1``), so the proof holds at every binding; nothing is sampled.

A mask that also reads data (a padding mask from ``attention_mask``) is not causal here: its rows masked
everywhere compute a softmax of every key, which a kernel that skips the masked blocks does not.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnx_graphsurgeon as gs
from onnx import TensorProto, helper

from .graph import attrs_of, const_array, onnx_dtype, producer

#: Constants read to check for a triangle: a GPT-2 bias buffer is [1, 1, 1024, 1024].
_CONST_LIMIT = 1 << 22
_DEPTH = 64


@dataclass(frozen=True)
class Lin:
    """A symbolic integer: ``const + sum(coef * name)`` over the model's dim names."""

    const: int = 0
    terms: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def of(d: object) -> Lin | None:
        """A dim as a linear form: an int, a name, or a sum/difference/multiple of names (``past + 1``)."""
        if isinstance(d, (int, np.integer)):
            return Lin(int(d)) if d >= 0 else None
        if not isinstance(d, str) or not d:
            return None
        try:
            return _linear(ast.parse(d, mode="eval").body) or Lin(0, ((d, 1),))
        except SyntaxError:
            return Lin(0, ((d, 1),))

    def __add__(self, o: Lin) -> Lin:
        terms = dict(self.terms)
        for n, c in o.terms:
            terms[n] = terms.get(n, 0) + c
        return Lin(self.const + o.const, tuple(sorted((n, c) for n, c in terms.items() if c)))

    def scale(self, k: int) -> Lin:
        return Lin(self.const * k, tuple((n, c * k) for n, c in self.terms if c * k))

    def __sub__(self, o: Lin) -> Lin:
        return self + o.scale(-1)

    @property
    def value(self) -> int | None:
        return None if self.terms else self.const

    def nonnegative(self) -> bool:
        """Provably >= 0: dims are sizes, so a form of non-negative coefficients and constant is."""
        return self.const >= 0 and all(c > 0 for _, c in self.terms)


def _linear(node: ast.AST) -> Lin | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return Lin(node.value)
    if isinstance(node, ast.Name):
        return Lin(0, ((node.id, 1),))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _linear(node.operand)
        return None if inner is None else inner.scale(-1)
    if isinstance(node, ast.BinOp):
        a, b = _linear(node.left), _linear(node.right)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult) and (a.value is not None or b.value is not None):
            return b.scale(a.value) if a.value is not None else a.scale(b.value)
    return None


# Abstract values. Index axes are counted from the end (-1 the last), so broadcasting keeps them.

@dataclass(frozen=True)
class _Vec:
    """A 1-D integer tensor of known symbolic elements (a shape and what is computed from it)."""

    items: tuple[Lin, ...]
    scalar: bool = False  # a 0-D tensor (items holds its one value)


@dataclass(frozen=True)
class _Affine:
    """An integer tensor: ``base + sum(coef[a] * index[a])``."""

    coef: tuple[tuple[int, int], ...]
    base: Lin


@dataclass(frozen=True)
class _Pred:
    """A boolean tensor: ``sum(coef[a] * index[a]) + base <= 0`` (``always``: true everywhere)."""

    coef: tuple[tuple[int, int], ...] = ()
    base: Lin = field(default_factory=lambda: Lin(-1))

    @property
    def always(self) -> bool:
        """True everywhere: no index term, and a base that is a number at most 0."""
        return not self.coef and self.base.value is not None and self.base.value <= 0

    def negated(self) -> _Pred:
        # not (e <= 0)  <=>  e >= 1  <=>  -e + 1 <= 0 (integers)
        return _Pred(tuple((a, -c) for a, c in self.coef), self.base.scale(-1) + Lin(1))


@dataclass(frozen=True)
class _Select:
    """A tensor of two values: ``hi`` where ``pred`` holds, else ``lo``."""

    pred: _Pred
    hi: float
    lo: float


def _coef_add(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...], k: int = 1) -> tuple:
    out = dict(a)
    for ax, c in b:
        out[ax] = out.get(ax, 0) + k * c
    return tuple(sorted((ax, c) for ax, c in out.items() if c))


class _Eval:
    """The abstract value of each tensor of a mask's construction (memoized by tensor)."""

    def __init__(self) -> None:
        self.memo: dict[int, object] = {}

    def value(self, t: gs.Tensor, depth: int = 0) -> object:
        key = id(t)
        if key not in self.memo:
            self.memo[key] = None  # (a cycle or a repeat while computing: unknown)
            self.memo[key] = self._compute(t, depth)
        return self.memo[key]

    def _compute(self, t: gs.Tensor, depth: int) -> object:
        if depth > _DEPTH:
            return None
        arr = const_array(t, limit=_CONST_LIMIT)
        if arr is not None:
            return _from_const(arr)
        node = producer(t)
        if node is None or (node.domain or "") not in ("", "ai.onnx"):
            return None
        args = [self.value(x, depth + 1) if x.name else None for x in node.inputs]
        return _flat_ones(_transfer(node, args, t), t.shape)


def _flat_ones(value: object, shape: object) -> object:
    """``value`` without a coefficient on an axis of one element: its index there is always 0, and a broadcast
    copies that one element along the axis, so the value must not vary along it."""
    if not isinstance(value, (_Affine, _Pred, _Select)) or shape is None:
        return value
    ones = {i - len(shape) for i, d in enumerate(shape) if isinstance(d, (int, np.integer)) and d == 1}
    if not ones:
        return value
    return _rebuilt(value, lambda coef: tuple((a, c) for a, c in coef if a not in ones))


def _from_const(arr: np.ndarray) -> object:
    """A constant: small integer vectors as :class:`_Vec`, a triangle as its inequality, else the array."""
    if arr.dtype.kind in "iu" and arr.ndim <= 1 and arr.size <= 64:
        return _Vec(tuple(Lin(int(v)) for v in arr.reshape(-1)), scalar=arr.ndim == 0)
    if arr.dtype.kind in "iu" and arr.size > 0:
        return _affine_const(arr)
    if arr.ndim >= 2 and arr.size > 0:
        tri = _triangle(arr)
        if tri is not None:
            return tri
    if arr.size == 1:
        return _Select(_Pred(), float(arr.reshape(-1)[0]), float(arr.reshape(-1)[0]))  # a filled scalar
    return None


def _triangle(arr: np.ndarray) -> _Select | None:
    """A constant that is the same along its leading dims and, over its last two, ``hi`` where
    ``col - row <= k`` and ``lo`` elsewhere: that inequality (exact on the constant's whole extent)."""
    m = arr.reshape(-1, *arr.shape[-2:])
    if m.shape[0] > 1 and not (m == m[:1]).all():
        return None
    m = m[0].astype(np.float64)
    rows, cols = m.shape
    values = np.unique(m)
    if values.size != 2:
        return None
    hi = m[0, 0]
    lo = values[0] if values[1] == hi else values[1]
    visible = m == hi
    k = int(visible[0].sum()) - 1  # the first row sees columns 0..k
    diff = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    if not np.array_equal(visible, diff <= k):
        return None
    return _Select(_Pred(((-1, 1), (-2, -1)), Lin(-k)), float(hi), float(lo))


def _affine_const(arr: np.ndarray) -> _Affine | None:
    """An integer constant that is ``base + sum(coef[a] * index[a])`` (positions a traced model folded), exactly."""
    a = arr.astype(np.int64)
    base = int(a.reshape(-1)[0])
    coef, expect = [], np.full(a.shape, base, np.int64)
    for axis, n in enumerate(a.shape):
        if n > 1:
            step = int(np.take(a, [1], axis=axis).reshape(-1)[0]) - base
            if step:
                coef.append((axis - a.ndim, step))
                grid = np.arange(n, dtype=np.int64).reshape([n if i == axis else 1 for i in range(a.ndim)])
                expect = expect + step * grid
    return _Affine(tuple(sorted(coef)), Lin(base)) if np.array_equal(a, expect) else None


def _scalar(v: object) -> Lin | None:
    if isinstance(v, _Vec) and len(v.items) == 1:
        return v.items[0]
    return None


def _affine(v: object) -> _Affine | None:
    """An integer value as affine in the index (a scalar is constant)."""
    if isinstance(v, _Affine):
        return v
    s = _scalar(v)
    if s is not None:
        return _Affine((), s)
    if isinstance(v, _Vec) and not v.scalar and all(i.value is not None for i in v.items):
        return _affine_const(np.array([i.value for i in v.items], np.int64))
    return None


def _move_axes(coef: tuple[tuple[int, int], ...], rank: int, inserted: list[int]) -> tuple | None:
    """Axes (from the end) of a rank-``rank`` value after ``inserted`` axes (of the result) are added."""
    out_rank = rank + len(inserted)
    norm = sorted(a % out_rank for a in inserted)
    kept = [p for p in range(out_rank) if p not in norm]
    out = []
    for ax, c in coef:
        p = rank + ax
        if not 0 <= p < rank:
            return None
        out.append((kept[p] - out_rank, c))
    return tuple(sorted(out))


def _transfer(node: gs.Node, args: list[object], out: gs.Tensor) -> object:
    """The abstract value of ``node``'s output ``out`` from its inputs' values (None: unknown)."""
    op = node.op
    a = attrs_of(node)
    if op == "Identity":
        return args[0]
    if op == "Shape":
        shape = node.inputs[0].shape
        if shape is None:
            return None
        dims = [Lin.of(d) for d in shape]
        start, end = a.get("start", 0), a.get("end", None)
        dims = dims[slice(start, end)]
        return None if any(d is None for d in dims) else _Vec(tuple(dims))
    if op == "Gather" and isinstance(args[0], _Vec) and isinstance(args[1], _Vec) and a.get("axis", 0) == 0:
        n = len(args[0].items)
        idx = [i.value for i in args[1].items]
        if any(i is None or not -n <= i < n for i in idx):
            return None
        return _Vec(tuple(args[0].items[i] for i in idx), scalar=args[1].scalar)
    if op in ("Unsqueeze", "Squeeze", "Reshape") and isinstance(args[0], _Vec):
        if op == "Reshape" and len(args[0].items) != 1:
            return _Vec(args[0].items) if out.shape is not None and len(out.shape) == 1 else None
        return _Vec(args[0].items, scalar=op == "Squeeze" or (op == "Reshape" and out.shape == []))
    if op == "Concat" and all(isinstance(v, _Vec) for v in args):
        return _Vec(tuple(i for v in args for i in v.items))
    if op in ("Add", "Sub", "Mul") and all(isinstance(v, _Vec) for v in args):
        x, y = args
        if len(x.items) != len(y.items) and 1 not in (len(x.items), len(y.items)):
            return None
        n = max(len(x.items), len(y.items))
        xs = x.items * n if len(x.items) == 1 else x.items
        ys = y.items * n if len(y.items) == 1 else y.items
        if op == "Mul":
            if not all(p.value is not None or q.value is not None for p, q in zip(xs, ys)):
                return None
            items = tuple(q.scale(p.value) if p.value is not None else p.scale(q.value) for p, q in zip(xs, ys))
        else:
            items = tuple(p + q if op == "Add" else p - q for p, q in zip(xs, ys))
        return _Vec(items, scalar=x.scalar and y.scalar)
    if op in ("Add", "Sub") and all(_affine(v) is not None for v in args):
        x, y = _affine(args[0]), _affine(args[1])
        k = 1 if op == "Add" else -1
        return _Affine(_coef_add(x.coef, y.coef, k), x.base + y.base.scale(k))
    if op == "Range":
        start, limit, delta = (_scalar(v) for v in args)
        if start is None or delta is None or delta.value is None or delta.value == 0 or limit is None:
            return None
        return _Affine(((-1, delta.value),), start)
    rank_in = len(node.inputs[0].shape) if node.inputs and node.inputs[0].shape is not None else None
    value = args[0] if args else None
    if op == "Unsqueeze" and isinstance(value, (_Affine, _Pred, _Select)) and rank_in is not None:
        axes = a.get("axes")
        if axes is None:
            return None

        def move(coef: tuple) -> tuple | None:
            return _move_axes(coef, rank_in, list(axes))
        return _rebuilt(value, move)
    if op == "Expand" and isinstance(value, (_Affine, _Pred, _Select)):
        return value  # broadcast: axes from the end stay
    if op == "Slice" and isinstance(value, (_Affine, _Pred, _Select)) and rank_in is not None:
        return _sliced(node, args, value, rank_in)
    if op in ("Less", "LessOrEqual", "Greater", "GreaterOrEqual"):
        x, y = _affine(args[0]), _affine(args[1])
        if x is None or y is None:
            return None
        lhs, rhs = (x, y) if op in ("Less", "LessOrEqual") else (y, x)  # lhs < rhs, or lhs <= rhs
        coef = _coef_add(lhs.coef, rhs.coef, -1)
        base = lhs.base - rhs.base + (Lin(1) if op in ("Less", "Greater") else Lin(0))
        return _Pred(coef, base)
    if op == "Not" and isinstance(value, _Pred):
        return value.negated()
    if op == "Not" and isinstance(value, _Select) and {value.hi, value.lo} == {0.0, 1.0}:
        return _Select(value.pred, value.lo, value.hi)
    if op == "Cast" and isinstance(value, (_Pred, _Select)):
        to = a.get("to")
        sel = value if isinstance(value, _Select) else _Select(value, 1.0, 0.0)
        if to == TensorProto.BOOL:
            return _Select(sel.pred, float(sel.hi != 0), float(sel.lo != 0))
        return sel if to in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT64,
                             TensorProto.INT32, TensorProto.BFLOAT16) else None
    if op in ("Equal",) and len(args) == 2:
        sel, other = (args[0], args[1]) if isinstance(args[0], (_Pred, _Select)) else (args[1], args[0])
        if isinstance(sel, _Pred):
            sel = _Select(sel, 1.0, 0.0)
        if isinstance(sel, _Select) and isinstance(other, _Select) and other.hi == other.lo and not other.pred.coef:
            c = other.hi
            if sel.hi == sel.lo:
                return None
            if c == sel.hi:
                return sel.pred
            if c == sel.lo:
                return sel.pred.negated()
        return None
    if op == "Where" and len(args) == 3:
        cond, x, y = args
        if isinstance(cond, _Select) and {cond.hi, cond.lo} == {0.0, 1.0}:
            cond = cond.pred if cond.hi == 1.0 else cond.pred.negated()
        if isinstance(cond, _Pred) and all(isinstance(v, _Select) and v.hi == v.lo and v.pred.always for v in (x, y)):
            return _Select(cond, x.hi, y.hi)
        return None
    if op == "ConstantOfShape":
        fill = a.get("value")
        arr = const_array(fill) if isinstance(fill, gs.Constant) else np.zeros(1, np.float32)
        if arr is None or arr.size != 1:
            return None
        v = float(arr.reshape(-1)[0])
        return _Select(_Pred(), v, v)
    if op == "Trilu" and isinstance(value, _Select) and value.hi == value.lo and not value.pred.coef:
        k = _scalar(args[1]) if len(args) > 1 and node.inputs[1].name else Lin(0)
        if k is None:
            return None
        if a.get("upper", 1):  # keeps col - row >= k:  row - col + k <= 0
            pred = _Pred(((-1, -1), (-2, 1)), k)
        else:  # keeps col - row <= k
            pred = _Pred(((-1, 1), (-2, -1)), k.scale(-1))
        return _Select(pred, value.hi, 0.0)
    if op == "And" and all(isinstance(v, (_Pred, _Select)) for v in args):
        preds = [v if isinstance(v, _Pred) else (v.pred if (v.hi, v.lo) == (1.0, 0.0) else None) for v in args]
        always = [p is not None and p.always for p in preds]
        if all(p is not None for p in preds) and any(always):
            return preds[always.index(False)] if False in always else preds[0]
        return None
    return None


def _rebuilt(value: object, move=None, shift: Lin = Lin(0)) -> object:
    """``value`` (affine, predicate or selection) with its index terms moved by ``move`` (None: where ``move`` cannot
    place one) and ``shift`` added to its base."""
    pred = value.pred if isinstance(value, _Select) else value
    coef = pred.coef if move is None else move(pred.coef)
    if coef is None:
        return None
    if isinstance(value, _Affine):
        return _Affine(coef, value.base + shift)
    moved = _Pred(coef, pred.base + shift)
    return moved if isinstance(value, _Pred) else _Select(moved, value.hi, value.lo)


def _sliced(node: gs.Node, args: list[object], value: object, rank: int) -> object:
    """A Slice of unit steps: index ``i`` of the result is ``i + start`` of its input (a start past the end, or from
    the end, needs the dim, read symbolically)."""
    if len(node.inputs) < 3:
        return None
    starts = args[1]
    axes_v = args[3] if len(args) > 3 and node.inputs[3].name else _Vec(tuple(Lin(i) for i in range(rank)))
    steps = args[4] if len(args) > 4 and node.inputs[4].name else None
    if not isinstance(starts, _Vec) or not isinstance(axes_v, _Vec):
        return None
    if steps is not None and (not isinstance(steps, _Vec) or any(s.value != 1 for s in steps.items)):
        return None
    shape = node.inputs[0].shape
    shift: dict[int, Lin] = {}
    for s, ax in zip(starts.items, axes_v.items):
        if ax.value is None:
            return None
        axis = ax.value % rank - rank
        if s.value is not None and s.value < 0:
            dim = Lin.of(shape[axis]) if shape is not None else None
            if dim is None or dim.value is None or dim.value + s.value < 0:
                return None
            s = dim + s
        elif s.value is not None and s.value > 2 ** 40:
            return None
        shift[axis] = s
    moved = Lin(0)
    for ax, c in (value.pred if isinstance(value, _Select) else value).coef:
        if ax in shift:
            moved = moved + shift[ax].scale(c)
    return _rebuilt(value, shift=moved)


def lowest(dtype: int) -> float:
    """The I/O type's lowest finite value (a fill at or below it masks as -inf does)."""
    return float(np.finfo(np.float16).min) if dtype == TensorProto.FLOAT16 else \
        float(np.finfo(np.float32).min)


def causal_fill(mask: gs.Tensor, sq: object, sk: object) -> float | None:
    """The fill of ``mask`` if it is exactly the causal mask of scores of ``sq`` queries and ``sk`` keys (0 where
    ``key - query <= sk - sq``, the fill elsewhere, at every binding of the dims; the fill -inf or at most the
    mask type's lowest finite value), else None. ``sk - sq`` must be provably >= 0: every query sees a key."""
    # Every layer's attention reads one mask: the answer is kept on the tensor (the graph above it does not change
    # between a match and a re-match).
    memo = mask.__dict__.setdefault("_asc_onnx_causal", {})
    if (sq, sk) not in memo:
        memo[(sq, sk)] = _causal_fill(mask, sq, sk)
    return memo[(sq, sk)]


def _causal_fill(mask: gs.Tensor, sq: object, sk: object) -> float | None:
    shape = mask.shape
    q, k = Lin.of(sq), Lin.of(sk)
    if shape is None or len(shape) < 2 or q is None or k is None:
        return None
    if Lin.of(shape[-2]) != q or Lin.of(shape[-1]) != k or not (k - q).nonnegative():
        return None
    v = _Eval().value(mask)
    if not isinstance(v, _Select) or any(ax not in (-1, -2) for ax, _ in v.pred.coef):
        return None
    coef = dict(v.pred.coef)
    offset = k - q
    if coef == {-1: 1, -2: -1} and v.pred.base == offset.scale(-1):  # visible: col - row - offset <= 0
        zero, fill = v.hi, v.lo
    elif coef == {-1: -1, -2: 1} and v.pred.base == offset + Lin(1):  # masked: col - row >= offset + 1
        zero, fill = v.lo, v.hi
    else:
        return None
    dtype = onnx_dtype(mask)
    if zero != 0.0 or not (fill == -math.inf or fill <= lowest(dtype or TensorProto.FLOAT)):
        return None
    return fill


#: Value names of the mask's construction inside a fused op's body (no clash with the body's own t0.., c0..).
_NAMES = ("causal_q_shape", "causal_v_shape", "causal_rows", "causal_cols", "causal_first", "causal_row_pos",
          "causal_key_pos", "causal_row_col", "causal_after", "causal_m2", "causal_zero", "causal_one",
          "causal_fill", "causal_none", "causal_axes")


def mask_nodes(fill: float, dtype: int, opset: int, out: str = "mask") -> list[onnx.NodeProto]:
    """The body's own construction of the causal mask ``out`` ([Sq, Sk], broadcast over the scores) from the shapes
    of ``q`` ([.., Sq, D]) and ``v`` ([.., Sk, Dv]): ``fill`` where a key is after its query, 0 elsewhere."""
    np_type = onnx.helper.tensor_dtype_to_np_dtype(dtype)

    def const(name: str, value: np.ndarray) -> onnx.NodeProto:
        t = onnx.numpy_helper.from_array(value)
        t.name = ""  # (as the body's other constants: a fused model read back and fused again is the same)
        return helper.make_node("Constant", [], [name], value=t)

    nodes = [
        const("causal_m2", np.array(-2, np.int64)),
        const("causal_zero", np.array(0, np.int64)),
        const("causal_one", np.array(1, np.int64)),
        const("causal_fill", np.array(fill, np_type)),
        const("causal_none", np.array(0, np_type)),
        helper.make_node("Shape", ["q"], ["causal_q_shape"]),
        helper.make_node("Shape", ["v"], ["causal_v_shape"]),
        helper.make_node("Gather", ["causal_q_shape", "causal_m2"], ["causal_rows"], axis=0),
        helper.make_node("Gather", ["causal_v_shape", "causal_m2"], ["causal_cols"], axis=0),
        helper.make_node("Sub", ["causal_cols", "causal_rows"], ["causal_first"]),  # the first query's key position
        helper.make_node("Range", ["causal_first", "causal_cols", "causal_one"], ["causal_row_pos"]),
        helper.make_node("Range", ["causal_zero", "causal_cols", "causal_one"], ["causal_key_pos"]),
    ]
    if opset >= 13:
        nodes += [const("causal_axes", np.array([1], np.int64)),
                  helper.make_node("Unsqueeze", ["causal_row_pos", "causal_axes"], ["causal_row_col"])]
    else:
        nodes.append(helper.make_node("Unsqueeze", ["causal_row_pos"], ["causal_row_col"], axes=[1]))
    nodes += [
        helper.make_node("Greater", ["causal_key_pos", "causal_row_col"], ["causal_after"]),  # [Sq, Sk]
        helper.make_node("Where", ["causal_after", "causal_fill", "causal_none"], [out]),
    ]
    return nodes


def split_mask_nodes(nodes: list[onnx.NodeProto], dtype: int, opset: int, out: str = "mask"
                     ) -> tuple[list[onnx.NodeProto], float] | None:
    """``nodes`` without the causal mask's construction :func:`mask_nodes` writes, and its fill; None where the
    body has no such construction (or another one under its names)."""
    made = [n for n in nodes if any(o in _NAMES or o == out for o in n.output)]
    where = next((n for n in made if n.op_type == "Where" and list(n.output) == [out]), None)
    fill_node = next((n for n in made if list(n.output) == ["causal_fill"]), None)
    if where is None or fill_node is None:
        return None
    fill = float(onnx.numpy_helper.to_array(fill_node.attribute[0].t).reshape(-1)[0])
    want = mask_nodes(fill, dtype, opset, out)
    key = [n.SerializeToString(deterministic=True) for n in want]
    if sorted(key) != sorted(n.SerializeToString(deterministic=True) for n in made):
        return None
    rest = [n for n in nodes if n not in made]
    if any(x in _NAMES for n in rest for x in n.input):
        return None
    return rest, fill


__all__ = ["Lin", "causal_fill", "lowest", "mask_nodes", "split_mask_nodes"]
