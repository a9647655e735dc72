"""Vector programs, shared by every kernel class that computes elementwise: the op table (ONNX op ->
emitter of level-2 vector instructions on fp32 tile registers), the program builder, register allocation by
linear scan, and the C++ call of each instruction.

Ops without a vector instruction are composed from ones every SoC has (Sigmoid = 1/(1+exp(-x)), Erf by
Abramowitz-Stegun 7.1.26, Sin/Cos by Cody-Waite reduction and a Taylor series ...), so one program serves
910B and 310P alike. :data:`EMITTERS` is the single source of truth for the ops a class built on these
programs can fuse: the region passes admit exactly its keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import TensorProto, numpy_helper

from ..graph import attr
from .ir import LoweringError, Param
from .text import f32

#: Abramowitz & Stegun 7.1.26: erf(x) ~ 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1/(1+p|x|); |error| < 1.5e-7.
ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


#: ONNX comparison -> Ascend C CMPMODE, and the mode with operands swapped.
CMP_MODES = {"Less": "LT", "Greater": "GT", "LessOrEqual": "LE", "GreaterOrEqual": "GE", "Equal": "EQ"}
SWAPPED = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "EQ": "EQ"}


@dataclass(frozen=True)
class Step:
    """One vector instruction: ``api(dst, *srcs[, scalar], count)`` on fp32 registers."""

    api: str
    dst: int
    srcs: tuple[int, ...] = ()
    scalar: float | None = None
    mode: str | None = None  # CMPMODE of Compare/Compares



class Builder:
    """Emits steps into fresh virtual registers."""

    def __init__(self, n_inputs: int) -> None:
        self.steps: list[Step] = []
        self.next = n_inputs
        self.consts: dict[float, int] = {}

    def emit(self, api: str, srcs: Sequence[int] = (), scalar: float | None = None, mode: str | None = None) -> int:
        dst = self.next
        self.next += 1
        kept = scalar if scalar is None or isinstance(scalar, Param) else float(scalar)
        self.steps.append(Step(api, dst, tuple(srcs), kept, mode))
        return dst

    def dup(self, v: float) -> int:
        """A register holding constant ``v``: one Duplicate per constant, hoisted out of the tile loop."""
        key = v if isinstance(v, Param) else float(np.float32(v)) if not math.isnan(v) else float("nan")
        if key not in self.consts:
            self.consts[key] = self.emit("Duplicate", (), v)
        return self.consts[key]

    def one_plus_exp_neg(self, x: int) -> int:
        return self.emit("Adds", (self.emit("Exp", (self.emit("Muls", (x,), -1.0),)),), 1.0)

    def sigmoid(self, x: int) -> int:
        return self.emit("Div", (self.dup(1.0), self.one_plus_exp_neg(x)))

    def silu(self, x: int) -> int:
        """x * sigmoid(x) as x / (1 + exp(-x)): four vector passes instead of five."""
        return self.emit("Div", (x, self.one_plus_exp_neg(x)))

    def tanh(self, x: int) -> int:
        # tanh(x) = 2*sigmoid(2x) - 1; absolute error ~1e-7 near 0, exact limits at +-inf.
        t = self.emit("Adds", (self.emit("Exp", (self.emit("Muls", (x,), -2.0),)),), 1.0)
        return self.emit("Adds", (self.emit("Div", (self.dup(2.0), t)),), -1.0)

    def erf(self, x: int) -> int:
        ax = self.emit("Abs", (x,))
        t = self.emit("Div", (self.dup(1.0), self.emit("Adds", (self.emit("Muls", (ax,), ERF_P),), 1.0)))
        poly = self.emit("Muls", (t,), ERF_A[4])
        for a in reversed(ERF_A[:4]):
            poly = self.emit("Mul", (self.emit("Adds", (poly,), a), t))
        e = self.emit("Exp", (self.emit("Muls", (self.emit("Mul", (x, x)),), -1.0),))
        y = self.emit("Adds", (self.emit("Muls", (self.emit("Mul", (poly, e)),), -1.0),), 1.0)
        sign = self.emit("Div", (x, self.emit("Maxs", (ax,), 1e-30)))
        return self.emit("Mul", (y, sign))

    def softplus(self, x: int) -> int:
        # max(x, 0) + ln(1 + exp(-|x|)): no overflow for large |x|.
        e = self.emit("Exp", (self.emit("Muls", (self.emit("Abs", (x,)),), -1.0),))
        return self.emit("Add", (self.emit("Maxs", (x,), 0.0), self.emit("Ln", (self.emit("Adds", (e,), 1.0),))))

    def rounded(self, x: int, mode: str) -> int:
        """x rounded to an integer (``mode``: RINT, FLOOR, CEIL) through int32: the one rounding Cast both SoCs
        have (310P's dav_m200 refuses float-to-float ones); valid for |x| < 2^31."""
        return self.emit("CastFromInt", (self.emit("CastToInt", (x,), mode=mode),))

    def magnitude_below(self, x: int, limit: float) -> int:
        """The mask |x| < limit (false for NaN)."""
        return self.emit("Compares", (self.emit("Abs", (x,)),), limit, mode="LT")

    def expm1_neg(self, x: int, alpha: float) -> int:
        """alpha * (exp(min(x, 0)) - 1)."""
        return self.emit("Muls", (self.emit("Adds", (self.emit("Exp", (self.emit("Mins", (x,), 0.0),)),), -1.0),),
                         alpha)


#: Sin and Cos (our own composition of basic vector instructions): x = q*pi + r for an integer q, by Cody and
#: Waite's reduction with pi in three parts (Cephes' DP1..DP3 times 4: q*PI_A is exact for |q| < 2^16), then for
#: Cos r - pi/2 (the same parts halved, exactly); sin of the reduced value by its Taylor series to r^11 (error
#: below 1e-7 on [-pi/2, pi/2]) and the sign of q's parity. Within the fp32 tolerance for |x| < 2^16 * pi (about
#: 2e5 radians: RoPE angles of 128k positions); beyond, q * PI_A rounds and the error grows as about 4e-8 |x|
#: (0.04 at 2^20). |x| >= 2^20, infinities and NaN give NaN: loud, not a wrong number (on 310P an infinity
#: saturates to the largest float before it gets here, and gives NaN the same way).
SIN_LIMIT = 2.0**20
PI_A, PI_B, PI_C = 3.140625, 9.67502593994140625e-4, 1.509957990978376432e-7
SIN_TAYLOR = (-1 / 6, 1 / 120, -1 / 5040, 1 / 362880, -1 / 39916800)


def _sin_cos(b: Builder, x: int, cos: bool) -> int:
    """sin(x), or cos(x) = -(-1)^q sin(x - q pi - pi/2) with q = rint(x / pi - 1/2)."""
    t = b.emit("Muls", (x,), 1 / math.pi)
    if cos:
        t = b.emit("Adds", (t,), -0.5)
    q = b.rounded(t, "RINT")
    r = x
    for part in (PI_A, PI_B, PI_C):
        r = b.emit("Sub", (r, b.emit("Muls", (q,), part)))
    if cos:
        for part in (PI_A, PI_B, PI_C):
            r = b.emit("Adds", (r,), -part / 2)
    r2 = b.emit("Mul", (r, r))
    p = b.emit("Muls", (r2,), SIN_TAYLOR[-1])
    for c in reversed(SIN_TAYLOR[:-1]):
        p = b.emit("Mul", (b.emit("Adds", (p,), c), r2))
    s = b.emit("Add", (b.emit("Mul", (r, p)), r))  # r + r * (c3 r^2 + c5 r^4 + ...)
    # (-1)^q from q's parity: q - 2 floor(q / 2) is 0 or 1, for negative q too
    half = b.rounded(b.emit("Muls", (q,), 0.5), "FLOOR")
    odd = b.emit("Add", (b.emit("Muls", (half,), -2.0), q))
    sign = b.emit("Adds", (b.emit("Muls", (odd,), 2.0 if cos else -2.0),), -1.0 if cos else 1.0)
    y = b.emit("Mul", (s, sign))
    return b.emit("Select", (b.magnitude_below(x, SIN_LIMIT), y, b.dup(float("nan"))))


#: An emitter lowers one ONNX node: ``emit(builder, node, args)`` -> the result's register, where ``args`` are
#: registers (int) or scalar constants (float) in the node's input order.
Emitter = Callable[["Builder", Any, list], int]

#: The op table: every ONNX op a vector program serves, and its emitter. The single source of truth for what
#: the pointwise class (and the elementwise parts of the row and matmul classes) can fuse: the region passes
#: admit exactly these ops.
EMITTERS: dict[str, Emitter] = {}


def _emits(*ops: str) -> Callable[[Emitter], Emitter]:
    def add(fn: Emitter) -> Emitter:
        for op in ops:
            EMITTERS[op] = fn
        return fn
    return add


def _unary(*ops: str) -> Callable[[Callable[[Builder, Any, int], int]], Emitter]:
    """An emitter of an op on one register (the node's first register argument)."""
    def add(fn: Callable[[Builder, Any, int], int]) -> Emitter:
        def emit(b: Builder, node, args: list) -> int:
            reg = [a for a in args if isinstance(a, int)]
            if not reg:
                raise LoweringError(f"{node.op_type} of constants only")
            return fn(b, node, reg[0])
        return _emits(*ops)(emit)
    return add


def lower_node(b: Builder, node, args: list[int | float]) -> int:
    """One ONNX node through the op table; ``args`` are registers (int) or scalar constants (float)."""
    emit = EMITTERS.get(node.op_type)
    if emit is None:
        raise LoweringError(f"{node.op_type} is not served by the pointwise kernel yet")
    return emit(b, node, args)


def _both(b: Builder, args: list, api: str, sapi: str, commutative: bool = True) -> int:
    """A binary op: the tensor form on two registers, the scalar form (``Adds``, ``Muls`` ...) on one."""
    x, y = args
    if isinstance(x, int) and isinstance(y, int):
        return b.emit(api, (x, y))
    if isinstance(x, int):
        return b.emit(sapi, (x,), y)
    if commutative:
        return b.emit(sapi, (y,), x)
    return b.emit(api, (b.dup(x), y))


for _op in ("Add", "Mul", "Max", "Min"):
    EMITTERS[_op] = lambda b, node, args: _both(b, args, node.op_type, node.op_type + "s")


@_emits("Sub")
def _sub(b: Builder, node, args: list) -> int:
    x, y = args
    if isinstance(x, int) and not isinstance(y, int):
        return b.emit("Adds", (x,), -y)
    if not isinstance(x, int):
        return b.emit("Adds", (b.emit("Muls", (y,), -1.0),), x)
    return b.emit("Sub", (x, y))


@_emits("Div")
def _div(b: Builder, node, args: list) -> int:
    x, y = args
    if isinstance(x, int) and not isinstance(y, int):
        return b.emit("Div", (x, b.dup(y)))
    return b.emit("Div", (x if isinstance(x, int) else b.dup(x), y))


@_emits(*CMP_MODES)
def _compare(b: Builder, node, args: list) -> int:
    x, y = args
    mode = CMP_MODES[node.op_type]
    if isinstance(x, int) and isinstance(y, int):
        return b.emit("Compare", (x, y), mode=mode)
    if isinstance(x, int):
        return b.emit("Compares", (x,), y, mode=mode)
    return b.emit("Compares", (y,), x, mode=SWAPPED[mode])


@_emits("Where")
def _where(b: Builder, node, args: list) -> int:
    cond, x, y = args
    return b.emit("Select", (cond, x if isinstance(x, int) else b.dup(x), y if isinstance(y, int) else b.dup(y)))


@_emits("Pow")
def _pow(b: Builder, node, args: list) -> int:
    x, e = args
    if not isinstance(x, int) or isinstance(e, int):
        raise LoweringError("Pow with a tensor exponent is not served by the pointwise kernel")
    if e == 0.5:
        return b.emit("Sqrt", (x,))
    if float(e).is_integer() and 1 <= abs(e) <= 64:
        # Square-and-multiply: exact sign for negative x (exp(e ln x) would be NaN there).
        acc, sq, n = None, x, int(abs(e))
        while n:
            if n & 1:
                acc = sq if acc is None else b.emit("Mul", (acc, sq))
            n >>= 1
            if n:
                sq = b.emit("Mul", (sq, sq))
        acc = acc if acc != x else b.emit("Muls", (x,), 1.0)
        return acc if e > 0 else b.emit("Div", (b.dup(1.0), acc))
    if float(e).is_integer():
        raise LoweringError(f"Pow with integer exponent {e} beyond +-64 is not served by the pointwise kernel")
    # Non-integer exponents: ONNX gives NaN for x < 0, and so does exp(e ln x).
    return b.emit("Exp", (b.emit("Muls", (b.emit("Ln", (x,)),), e),))


#: ONNX ops that are one vector instruction of the same meaning.
SIMPLE = {"Relu": "Relu", "Abs": "Abs", "Sqrt": "Sqrt", "Exp": "Exp", "Log": "Ln"}
for _op, _api in SIMPLE.items():
    def _simple(b: Builder, node, args: list, api: str = _api) -> int:
        reg = [a for a in args if isinstance(a, int)]
        if not reg:
            raise LoweringError(f"{node.op_type} of constants only")
        if len(args) != 1:
            raise LoweringError(f"{node.op_type} is not served by the pointwise kernel yet")
        return b.emit(api, (reg[0],))
    EMITTERS[_op] = _simple


_unary("Neg")(lambda b, node, x: b.emit("Muls", (x,), -1.0))
_unary("Reciprocal")(lambda b, node, x: b.emit("Div", (b.dup(1.0), x)))
_unary("Sigmoid")(lambda b, node, x: b.sigmoid(x))
_unary("Tanh")(lambda b, node, x: b.tanh(x))
_unary("Erf")(lambda b, node, x: b.erf(x))
_unary("LeakyRelu")(lambda b, node, x: b.emit("LeakyRelu", (x,), attr(node, "alpha", 0.01)))
_unary("Softplus")(lambda b, node, x: b.softplus(x))
_unary("Softsign")(lambda b, node, x: b.emit("Div", (x, b.emit("Adds", (b.emit("Abs", (x,)),), 1.0))))
_unary("Mish")(lambda b, node, x: b.emit("Mul", (x, b.tanh(b.softplus(x)))))
_unary("Sin", "Cos")(lambda b, node, x: _sin_cos(b, x, node.op_type == "Cos"))


@_unary("Elu", "Selu")
def _elu(b: Builder, node, x: int) -> int:
    op = node.op_type
    alpha = attr(node, "alpha", 1.0 if op == "Elu" else 1.67326319217681884765625)
    y = b.emit("Add", (b.emit("Maxs", (x,), 0.0), b.expm1_neg(x, alpha)))
    return y if op == "Elu" else b.emit("Muls", (y,), attr(node, "gamma", 1.05070102214813232421875))


@_unary("Celu")
def _celu(b: Builder, node, x: int) -> int:
    alpha = attr(node, "alpha", 1.0)
    neg = b.emit("Mins", (b.emit("Muls", (b.emit("Adds", (b.emit("Exp", (b.emit("Muls", (x,), 1.0 / alpha),)),),
                                                     -1.0),), alpha),), 0.0)
    return b.emit("Add", (b.emit("Maxs", (x,), 0.0), neg))


@_unary("HardSigmoid", "HardSwish")
def _hard(b: Builder, node, x: int) -> int:
    op = node.op_type
    alpha, beta = (attr(node, "alpha", 0.2), attr(node, "beta", 0.5)) if op == "HardSigmoid" else (1 / 6, 0.5)
    hs = b.emit("Mins", (b.emit("Maxs", (b.emit("Adds", (b.emit("Muls", (x,), alpha),), beta),), 0.0),), 1.0)
    return hs if op == "HardSigmoid" else b.emit("Mul", (x, hs))


@_emits("Clip")
def _clip(b: Builder, node, args: list) -> int:
    reg = [a for a in args if isinstance(a, int)]
    if not reg:
        raise LoweringError("Clip of constants only")
    x = reg[0]
    lo = args[1] if len(args) > 1 and args[1] is not None else None
    hi = args[2] if len(args) > 2 and args[2] is not None else None
    if isinstance(lo, int) or isinstance(hi, int):
        raise LoweringError("Clip with tensor bounds is not served by the pointwise kernel")
    y = x
    if lo is not None:
        y = b.emit("Maxs", (y,), lo)
    if hi is not None:
        y = b.emit("Mins", (y,), hi)
    return y if y != x else b.emit("Adds", (x,), 0.0)


@_unary("Gelu")
def _gelu(b: Builder, node, x: int) -> int:
    if attr(node, "approximate", b"none") in (b"tanh", "tanh"):
        cube = b.emit("Mul", (b.emit("Mul", (x, x)), x))
        inner = b.emit("Muls", (b.emit("Add", (x, b.emit("Muls", (cube,), 0.044715))),), math.sqrt(2 / math.pi))
        t = b.tanh(inner)
    else:
        t = b.erf(b.emit("Muls", (x,), 1 / math.sqrt(2)))
    return b.emit("Mul", (b.emit("Muls", (x,), 0.5), b.emit("Adds", (t,), 1.0)))


@_unary("Floor", "Ceil")
def _floor_ceil(b: Builder, node, x: int) -> int:
    # Floats of magnitude 2^23 and more (and infinities, NaN) are integers already and pass through.
    rounded = b.rounded(x, node.op_type.upper())
    return b.emit("Select", (b.magnitude_below(x, 8388608.0), rounded, x))


@_unary("Sign")
def _sign(b: Builder, node, x: int) -> int:
    """1 above zero, -1 below, x itself at +-0 and NaN."""
    below = b.emit("Select", (b.emit("Compares", (x,), 0.0, mode="LT"), b.dup(-1.0), x))
    return b.emit("Select", (b.emit("Compares", (x,), 0.0, mode="GT"), b.dup(1.0), below))


@_unary("ThresholdedRelu")
def _thresholded_relu(b: Builder, node, x: int) -> int:
    """x where x > alpha, else 0."""
    mask = b.emit("Compares", (x,), attr(node, "alpha", 1.0), mode="GT")
    return b.emit("Select", (mask, x, b.dup(0.0)))


@_emits("PRelu")
def _prelu_args(b: Builder, node, args: list) -> int:
    reg = [a for a in args if isinstance(a, int)]
    if not reg:
        raise LoweringError("PRelu of constants only")
    x, slope = reg[0], args[1]
    neg = b.emit("Mins", (x,), 0.0)
    neg = b.emit("Mul", (neg, slope)) if isinstance(slope, int) else b.emit("Muls", (neg,), slope)
    return b.emit("Add", (b.emit("Maxs", (x,), 0.0), neg))


def allocate(steps: list[Step], n_inputs: int, outputs: list[int],
              pinned: set[int]) -> tuple[list[Step], list[int], int]:
    """Reuse registers once their last reader has run (linear scan over the straight-line program).

    ``pinned`` registers (broadcast inputs, expanded once per core and read by every tile) are never reused.
    """
    last: dict[int, int] = {}
    for i, s in enumerate(steps):
        for r in s.srcs:
            last[r] = i
    for r in outputs:
        last[r] = len(steps)
    phys: dict[int, int] = {i: i for i in range(n_inputs)}
    free: list[int] = []
    count = n_inputs
    out: list[Step] = []
    out_values = set(outputs)
    for i, s in enumerate(steps):
        srcs = tuple(phys[r] for r in s.srcs)
        dying = [phys[r] for r in set(s.srcs) if last.get(r) == i and r not in outputs and r not in pinned]
        # A register read for the last time may be the destination (a full alias is allowed), except where
        # one side is a bit mask: Compare's result and Select's mask only partially overlap a float tile.
        masked = s.api in ("Compare", "Compares", "Select")
        if not masked:
            free.extend(dying)
        # An output gets a register of its own, not an input's: fp32 kernels compute it straight into the
        # output tile (no copy pass at the end).
        pool = [f for f in free if f >= n_inputs] if s.dst in out_values else free
        if pool:
            dst = min(pool)
            free.remove(dst)
        else:
            dst = count
            count += 1
        if masked:
            free.extend(dying)
        phys[s.dst] = dst
        out.append(Step(s.api, dst, srcs, s.scalar, s.mode))
    return out, [phys[r] for r in outputs], max(count, 1)


def scalar(tensor: TensorProto) -> float:
    arr = numpy_helper.to_array(tensor)
    if arr.size != 1:
        raise LoweringError("a non-scalar constant in the body is not served by the pointwise kernel")
    return float(np.asarray(arr, dtype=np.float64).reshape(-1)[0])


def silu_products(function) -> dict[str, tuple[str, str]]:
    """``Mul(x, Sigmoid(x))`` outputs -> (x, the Sigmoid's output), where that Sigmoid has no other reader
    and x is a tensor (a register), not a folded constant."""
    consts = {n.output[0] for n in function.node if n.op_type == "Constant"}
    readers: dict[str, int] = {}
    for node in function.node:
        for i in node.input:
            readers[i] = readers.get(i, 0) + 1
    for o in function.output:
        readers[o] = readers.get(o, 0) + 1
    sig = {n.output[0]: n.input[0] for n in function.node if n.op_type == "Sigmoid"}
    out: dict[str, tuple[str, str]] = {}
    for node in function.node:
        if node.op_type == "Mul" and len(node.input) == 2:
            for a, c in (node.input, node.input[::-1]):
                if c in sig and sig[c] == a and readers.get(c) == 1 and a not in consts:
                    out[node.output[0]] = (a, c)
    return out


def step_call(step: Step) -> str:
    """The Ascend C call of one instruction on its registers (``count`` elements; masks are the bytes of a register)."""
    dst = f"r{step.dst}"
    srcs = ", ".join(f"r{s}" for s in step.srcs)
    mask = "template ReinterpretCast<uint8_t>()"
    if step.api == "Compare":
        return (f"AscendC::Compare({dst}.{mask}, {srcs}, AscendC::CMPMODE::{step.mode}, "
                "CompareCount(count));")
    if step.api == "Compares":
        return (f"AscendC::Compares({dst}.{mask}, {srcs}, {f32(step.scalar)}, AscendC::CMPMODE::{step.mode}, "
                "CompareCount(count));")
    if step.api == "Select":
        m, a, b = (f"r{s}" for s in step.srcs)
        return (f"AscendC::Select({dst}, {m}.{mask}, {a}, {b}, AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, "
                "count);")
    if step.api == "Duplicate":
        return f"AscendC::Duplicate({dst}, {f32(step.scalar)}, count);"
    if step.api == "CastToInt":  # the register's bytes as int32
        return (f"AscendC::Cast({dst}.template ReinterpretCast<int32_t>(), {srcs}, "
                f"AscendC::RoundMode::CAST_{step.mode}, count);")
    if step.api == "CastFromInt":
        return (f"AscendC::Cast({dst}, {srcs}.template ReinterpretCast<int32_t>(), AscendC::RoundMode::CAST_NONE, "
                "count);")
    if step.scalar is not None:
        return f"AscendC::{step.api}({dst}, {srcs}, {f32(step.scalar)}, count);"
    return f"AscendC::{step.api}({dst}, {srcs}, count);"
