"""Stage 5, lower (pointwise class): turn a pointwise fused op into a kernel IR (no C++ here).

The IR is a straight-line program over tile-sized float32 registers: every input tile is
cast to fp32 (fp16 and bf16 compute in fp32, so transcendentals are fp32 everywhere), the
body's ONNX ops become level-2 vector instructions (``Add``, ``Muls``, ``Exp`` ...), and the
output registers are cast back. Ops without a vector instruction are composed from ones that
exist on every SoC (Sigmoid = 1/(1+exp(-x)), Erf by Abramowitz-Stegun 7.1.26, ...), so the
same kernel serves 310B, which lacks the advanced activation APIs.

Inputs are ``full`` (the output's shape) or ``broadcast`` (a scalar or trailing-dims tensor
that repeats with a period); the schedule itself (core split, tiles, copies) is decided by
the host tiling arithmetic that codegen emits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ..rewrite import FusedOp
from .common import IO_TYPES, LoweringError, Param, snake_case

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


@dataclass(frozen=True)
class PwInput:
    """A kernel input: ``full`` tiles, or a ``broadcast`` vector repeated along the flat index."""

    name: str
    kind: str


@dataclass(frozen=True)
class PointwiseKernel:
    """Kernel IR of one pointwise fused op type.

    Attributes:
        op_type / snake: OpDef type and kernel entry name (snake_case per CANN's rule).
        inputs / outputs: formal names in kernel argument order.
        steps: the program; registers ``0..len(inputs)-1`` hold the inputs as fp32.
        out_regs: register holding each output.
        num_regs: registers after reuse (each is one fp32 tile in the unified buffer).
        dtypes: ONNX element type per dtype column (all inputs and outputs share it).
        params: the op's parameters (:class:`~asc_onnx.lower.common.Param` scalars in ``steps``), which the
            host copies from the node's attributes into the tiling data: one kernel for every value. The IR
            keeps the first node's values, which a run uses unless given others.
    """

    op_type: str
    snake: str
    inputs: tuple[PwInput, ...]
    outputs: tuple[str, ...]
    steps: tuple[Step, ...]
    out_regs: tuple[int, ...]
    num_regs: int
    dtypes: tuple[int, ...]
    const_steps: tuple[Step, ...] = ()  # Duplicates of constants: run once per core, their registers pinned
    params: tuple[float, ...] = ()  # the first node's values of the scalars read from the tiling data

    @property
    def num_params(self) -> int:
        """Scalars read from the tiling data (``td.param[i]``), set per node from its attributes."""
        return len(self.params)

    @property
    def broadcast_inputs(self) -> tuple[int, ...]:
        """Indexes of the broadcast inputs."""
        return tuple(i for i, x in enumerate(self.inputs) if x.kind == "broadcast")

    @property
    def uses_select(self) -> bool:
        """Select writes scratch at TMP_UB_OFFSET: the host must reserve 8 KB of UB for it."""
        return any(s.api == "Select" for s in self.steps)


class _Builder:
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


def _attr(node, name: str, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


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


def _sin_cos(b: _Builder, x: int, cos: bool) -> int:
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


def _lower_node(b: _Builder, node, args: list[int | float]) -> int:
    """One ONNX node; ``args`` are registers (int) or scalar constants (float)."""
    op = node.op_type
    reg = [a for a in args if isinstance(a, int)]

    def both(api: str, sapi: str, commutative: bool = True) -> int:
        x, y = args
        if isinstance(x, int) and isinstance(y, int):
            return b.emit(api, (x, y))
        if isinstance(x, int):
            return b.emit(sapi, (x,), y)
        if commutative:
            return b.emit(sapi, (y,), x)
        return b.emit(api, (b.dup(x), y))

    if op == "Add":
        return both("Add", "Adds")
    if op == "Mul":
        return both("Mul", "Muls")
    if op == "Max":
        return both("Max", "Maxs")
    if op == "Min":
        return both("Min", "Mins")
    if op == "Sub":
        x, y = args
        if isinstance(x, int) and not isinstance(y, int):
            return b.emit("Adds", (x,), -y)
        if not isinstance(x, int):
            return b.emit("Adds", (b.emit("Muls", (y,), -1.0),), x)
        return b.emit("Sub", (x, y))
    if op == "Div":
        x, y = args
        if isinstance(x, int) and not isinstance(y, int):
            return b.emit("Div", (x, b.dup(y)))
        return b.emit("Div", (x if isinstance(x, int) else b.dup(x), y))
    if op in CMP_MODES:
        x, y = args
        mode, swapped = CMP_MODES[op], SWAPPED[CMP_MODES[op]]
        if isinstance(x, int) and isinstance(y, int):
            return b.emit("Compare", (x, y), mode=mode)
        if isinstance(x, int):
            return b.emit("Compares", (x,), y, mode=mode)
        return b.emit("Compares", (y,), x, mode=swapped)
    if op == "Where":
        cond, x, y = args
        return b.emit("Select", (cond, x if isinstance(x, int) else b.dup(x), y if isinstance(y, int) else b.dup(y)))
    if op == "Pow":
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
    if not reg:
        raise LoweringError(f"{op} of constants only")
    x = reg[0]
    simple = {"Relu": "Relu", "Abs": "Abs", "Sqrt": "Sqrt", "Exp": "Exp", "Log": "Ln"}
    if op in simple and len(args) == 1:
        return b.emit(simple[op], (x,))
    if op == "Neg":
        return b.emit("Muls", (x,), -1.0)
    if op == "Reciprocal":
        return b.emit("Div", (b.dup(1.0), x))
    if op == "Sigmoid":
        return b.sigmoid(x)
    if op == "Tanh":
        return b.tanh(x)
    if op == "Erf":
        return b.erf(x)
    if op == "LeakyRelu":
        return b.emit("LeakyRelu", (x,), _attr(node, "alpha", 0.01))
    if op == "Softplus":
        return b.softplus(x)
    if op == "Softsign":
        return b.emit("Div", (x, b.emit("Adds", (b.emit("Abs", (x,)),), 1.0)))
    if op in ("Elu", "Selu"):
        alpha = _attr(node, "alpha", 1.0 if op == "Elu" else 1.67326319217681884765625)
        y = b.emit("Add", (b.emit("Maxs", (x,), 0.0), b.expm1_neg(x, alpha)))
        return y if op == "Elu" else b.emit("Muls", (y,), _attr(node, "gamma", 1.05070102214813232421875))
    if op == "Celu":
        alpha = _attr(node, "alpha", 1.0)
        neg = b.emit("Mins", (b.emit("Muls", (b.emit("Adds", (b.emit("Exp", (b.emit("Muls", (x,), 1.0 / alpha),)),),
                                                         -1.0),), alpha),), 0.0)
        return b.emit("Add", (b.emit("Maxs", (x,), 0.0), neg))
    if op in ("HardSigmoid", "HardSwish"):
        alpha, beta = (_attr(node, "alpha", 0.2), _attr(node, "beta", 0.5)) if op == "HardSigmoid" else (1 / 6, 0.5)
        hs = b.emit("Mins", (b.emit("Maxs", (b.emit("Adds", (b.emit("Muls", (x,), alpha),), beta),), 0.0),), 1.0)
        return hs if op == "HardSigmoid" else b.emit("Mul", (x, hs))
    if op == "Clip":
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
    if op == "Mish":
        return b.emit("Mul", (x, b.tanh(b.softplus(x))))
    if op == "Gelu":
        if _attr(node, "approximate", b"none") in (b"tanh", "tanh"):
            cube = b.emit("Mul", (b.emit("Mul", (x, x)), x))
            inner = b.emit("Muls", (b.emit("Add", (x, b.emit("Muls", (cube,), 0.044715))),), math.sqrt(2 / math.pi))
            t = b.tanh(inner)
        else:
            t = b.erf(b.emit("Muls", (x,), 1 / math.sqrt(2)))
        return b.emit("Mul", (b.emit("Muls", (x,), 0.5), b.emit("Adds", (t,), 1.0)))
    if op in ("Sin", "Cos"):
        return _sin_cos(b, x, op == "Cos")
    if op in ("Floor", "Ceil"):
        # Floats of magnitude 2^23 and more (and infinities, NaN) are integers already and pass through.
        rounded = b.rounded(x, op.upper())
        return b.emit("Select", (b.magnitude_below(x, 8388608.0), rounded, x))
    if op == "Sign":  # 1 above zero, -1 below, x itself at +-0 and NaN
        below = b.emit("Select", (b.emit("Compares", (x,), 0.0, mode="LT"), b.dup(-1.0), x))
        return b.emit("Select", (b.emit("Compares", (x,), 0.0, mode="GT"), b.dup(1.0), below))
    if op == "ThresholdedRelu":  # x where x > alpha, else 0
        mask = b.emit("Compares", (x,), _attr(node, "alpha", 1.0), mode="GT")
        return b.emit("Select", (mask, x, b.dup(0.0)))
    if op == "PRelu":
        slope = args[1]
        neg = b.emit("Mins", (x,), 0.0)
        neg = b.emit("Mul", (neg, slope)) if isinstance(slope, int) else b.emit("Muls", (neg,), slope)
        return b.emit("Add", (b.emit("Maxs", (x,), 0.0), neg))
    raise LoweringError(f"{op} is not served by the pointwise kernel yet")


def _allocate(steps: list[Step], n_inputs: int, outputs: list[int],
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


def _scalar(tensor: TensorProto) -> float:
    arr = numpy_helper.to_array(tensor)
    if arr.size != 1:
        raise LoweringError("a non-scalar constant in the body is not served by the pointwise kernel")
    return float(np.asarray(arr, dtype=np.float64).reshape(-1)[0])


def _same_dim(a: object, b: object) -> bool:
    """Two dims that are equal for every binding: equal numbers, or one named symbol."""
    return a == b and (isinstance(a, int) or (isinstance(a, str) and a not in ("", "None", "?")))


def _trailing(shape: Sequence[object], out: Sequence[object]) -> bool:
    """``shape`` broadcasts to ``out`` by repeating along leading axes only (a scalar, a bias vector, RoPE's
    [1,1,S,D] tables): without its leading 1s it equals the trailing dims of ``out``."""
    dims = list(shape)
    while dims and dims[0] == 1:
        dims.pop(0)
    return len(dims) <= len(out) and all(_same_dim(a, b) for a, b in zip(dims, list(out)[len(out) - len(dims):]))


def _input_kinds(op: FusedOp, symbolic: Mapping[str, tuple[object, ...] | None] | None = None
                 ) -> tuple[PwInput, ...]:
    """``full`` where an input has the output's shape for every binding of its dynamic dims, ``broadcast``
    where it repeats along leading axes; anything else is refused. ``symbolic`` gives the shapes without the
    user's --input-shape, so that a dim bound to 1 there does not make a broadcast input look full."""
    sym = symbolic or {}
    kinds: list[str] = []
    for i, name in enumerate(op.input_names):
        seen = set()
        for inst in op.instances:
            shape = sym.get(inst.inputs[i]) or inst.input_shapes[i]
            out = sym.get(inst.outputs[0]) or inst.output_shapes[0]
            if shape is None or out is None:
                raise LoweringError(f"input {name} has an unknown shape")
            if len(shape) == len(out) and all(_same_dim(a, b) for a, b in zip(shape, out)):
                seen.add("full")
            elif _trailing(shape, out):
                seen.add("broadcast")
            elif list(shape) == list(out):
                raise LoweringError(f"input {name} {list(shape)} may differ from the output {list(out)} "
                                    "at run time (unknown dims)")
            else:
                raise LoweringError(f"input {name} {list(shape)} broadcasts to {list(out)} along inner axes; "
                                    "the pointwise kernel repeats inputs along leading axes only")
        if len(seen) > 1:
            raise LoweringError(f"input {name} is full-shaped in one use and broadcast in another")
        kinds.append(seen.pop())
    return tuple(PwInput(n, k) for n, k in zip(op.input_names, kinds))


def lower_pointwise(op: FusedOp, symbolic: Mapping[str, tuple[object, ...] | None] | None = None,
                    kinds: Sequence[str] | None = None) -> PointwiseKernel:
    """Lower one pointwise fused op; raises LoweringError with the reason when it cannot.

    ``symbolic`` maps tensor names to their shapes before any --input-shape binding (see _input_kinds);
    ``kinds`` gives the input kinds decided when the kernel was generated (re-lowering a written package)."""
    if op.kernel != "pointwise":
        raise LoweringError(f"{op.kernel} kernels are not generated yet (pointwise only)")
    dtypes = []
    for col in op.dtype_columns:
        if len(set(col)) != 1 or col[0] not in IO_TYPES:
            raise LoweringError(f"dtype column {col} mixes or uses unsupported element types")
        dtypes.append(col[0])
    inputs = tuple(PwInput(n, kd) for n, kd in zip(op.input_names, kinds)) if kinds is not None \
        else _input_kinds(op, symbolic)
    if not any(x.kind == "full" for x in inputs):
        raise LoweringError("no input has the output's shape")
    b = _Builder(len(inputs))
    values: dict[str, int | float] = {n: i for i, n in enumerate(op.input_names)}
    values[""] = None  # type: ignore[assignment]
    silu_of = _silu_products(op.function)
    params = {name: i for i, name in enumerate(op.params)}
    first = op.instances[0].params if op.instances and op.instances[0].params else (0.0,) * len(params)
    for node in op.function.node:
        if node.op_type == "Constant":
            ref = node.attribute[0].ref_attr_name
            values[node.output[0]] = Param(first[params[ref]], params[ref]) if ref else _scalar(node.attribute[0].t)
            continue
        if len(node.output) != 1:
            raise LoweringError(f"{node.op_type} with several outputs is not served by the pointwise kernel")
        if node.output[0] in silu_of:
            values[node.output[0]] = b.silu(values[silu_of[node.output[0]][0]])
            continue
        if node.op_type == "Sigmoid" and node.output[0] in {s for _, s in silu_of.values()}:
            continue  # only read by the x * sigmoid(x) product, lowered as one SiLU
        values[node.output[0]] = _lower_node(b, node, [values[i] for i in node.input])
    outs = []
    for name in op.output_names:
        v = values[name]
        outs.append(v if isinstance(v, int) else b.dup(v))
    consts = [st for st in b.steps if st.api == "Duplicate"]
    body = [st for st in b.steps if st.api != "Duplicate"]
    pinned = {i for i, x in enumerate(inputs) if x.kind == "broadcast"} | {st.dst for st in consts}
    steps, out_regs, n = _allocate(consts + body, len(inputs), outs, pinned)
    return PointwiseKernel(op.op_type, snake_case(op.op_type), inputs, op.output_names, tuple(steps[len(consts):]),
                           tuple(out_regs), n, tuple(dtypes), tuple(steps[:len(consts)]), tuple(first))


def _silu_products(function) -> dict[str, tuple[str, str]]:
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


__all__ = ["lower_pointwise", "PointwiseKernel", "Step", "PwInput", "LoweringError", "snake_case", "IO_TYPES"]
