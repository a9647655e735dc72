"""Stage 5, lower (pointwise class): turn a pointwise fused op into a kernel IR (no C++ here).

The IR is a straight-line program over tile-sized float32 registers: every input tile is
cast to fp32 (fp16 and bf16 compute in fp32, so transcendentals are fp32 everywhere), the
body's ONNX ops become level-2 vector instructions (``Add``, ``Muls``, ``Exp`` ...), and the
output registers are cast back. Ops without a vector instruction are composed from ones that
exist on every SoC (Sigmoid = 1/(1+exp(-x)), Erf by Abramowitz-Stegun 7.1.26, ...), so the
same kernel serves 310B, which lacks the advanced activation APIs.

Inputs are ``full`` (the output's shape) or ``broadcast`` (a scalar or trailing-dims tensor
that repeats with a period); the schedule itself (core split, tiles, copies) is decided by
the host tiling arithmetic that the renderer emits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...dims import show
from ...fusion import FusedOp
from ..ir import IO_TYPES, LoweringError, NamedInputs, Param, snake_case
from ..schedule import VectorSchedule
from ..vector import Builder, Step, allocate, lower_node, scalar, silu_products


@dataclass(frozen=True)
class PwInput:
    """A kernel input: ``full`` tiles, or a ``broadcast`` vector repeated along the flat index."""

    name: str
    kind: str


@dataclass(frozen=True)
class PointwiseKernel(NamedInputs):
    """Kernel IR of one pointwise fused op type.

    Attributes:
        op_type / snake: OpDef type and kernel entry name (snake_case per CANN's rule).
        inputs / outputs: formal names in kernel argument order.
        steps: the program; registers ``0..len(inputs)-1`` hold the inputs as fp32.
        out_regs: register holding each output.
        num_regs: registers after reuse (each is one fp32 tile in the unified buffer).
        dtypes: ONNX element type per dtype column (all inputs and outputs share it).
        params: the op's parameters (:class:`~asc_onnx.kernels.ir.Param` scalars in ``steps``), which the
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
    schedule: VectorSchedule = VectorSchedule()  # the policies the kernel is rendered with

    @property
    def broadcast_inputs(self) -> tuple[int, ...]:
        """Indexes of the broadcast inputs."""
        return tuple(i for i, x in enumerate(self.inputs) if x.kind == "broadcast")

    @property
    def uses_select(self) -> bool:
        """Select writes scratch at TMP_UB_OFFSET: the host must reserve 8 KB of UB for it."""
        return any(s.api == "Select" for s in self.steps)


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
                raise LoweringError(f"input {name} {show(shape)} may differ from the output {show(out)} "
                                    "at run time (unknown dims)")
            else:
                raise LoweringError(f"input {name} {show(shape)} broadcasts to {show(out)} along inner axes; "
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
    b = Builder(len(inputs))
    values: dict[str, int | float] = {n: i for i, n in enumerate(op.input_names)}
    values[""] = None  # type: ignore[assignment]
    silu_of = silu_products(op.function)
    params = {name: i for i, name in enumerate(op.params)}
    first = op.instances[0].params if op.instances and op.instances[0].params else (0.0,) * len(params)
    for node in op.function.node:
        if node.op_type == "Constant":
            ref = node.attribute[0].ref_attr_name
            values[node.output[0]] = Param(first[params[ref]], params[ref]) if ref else scalar(node.attribute[0].t)
            continue
        if len(node.output) != 1:
            raise LoweringError(f"{node.op_type} with several outputs is not served by the pointwise kernel")
        if node.output[0] in silu_of:
            values[node.output[0]] = b.silu(values[silu_of[node.output[0]][0]])
            continue
        if node.op_type == "Sigmoid" and node.output[0] in {s for _, s in silu_of.values()}:
            continue  # only read by the x * sigmoid(x) product, lowered as one SiLU
        values[node.output[0]] = lower_node(b, node, [values[i] for i in node.input])
    outs = []
    for name in op.output_names:
        v = values[name]
        outs.append(v if isinstance(v, int) else b.dup(v))
    consts = [st for st in b.steps if st.api == "Duplicate"]
    body = [st for st in b.steps if st.api != "Duplicate"]
    pinned = {i for i, x in enumerate(inputs) if x.kind == "broadcast"} | {st.dst for st in consts}
    steps, out_regs, n = allocate(consts + body, len(inputs), outs, pinned)
    return PointwiseKernel(op.op_type, snake_case(op.op_type), inputs, op.output_names, tuple(steps[len(consts):]),
                           tuple(out_regs), n, tuple(dtypes), tuple(steps[:len(consts)]), tuple(first))


__all__ = ["lower_pointwise", "PointwiseKernel", "Step", "PwInput", "LoweringError", "snake_case", "IO_TYPES"]
