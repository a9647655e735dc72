"""Stage 5, lower (matmul+epilogue class): one or two MatMuls sharing x, their biases, and a pointwise
epilogue on the results, from the fused op's ONNX body (no C++ here).

The cube computes each C block in fp32 (``C = x @ W [+ b]``); the epilogue is every node after the
MatMuls and their bias Adds, lowered by the pointwise lowering onto fp32 registers of one C block, with
registers ``0 .. len(gemms)-1`` holding the C blocks. Forms read from the body:

* ``MatMul(x, W)``, ``MatMul(x, Transpose(W))`` and ``Gemm(x, W[, b], transB)``, weights rank 2;
* ``Add(C, b)`` with a formal 1-D input of N values: the bias the cube adds;
* ``Split(C, 2 equal halves, last axis)`` of one MatMul over a gate-up weight ``[K, 2N]``: two gemms
  over one weight, the second starting at column N (row N of a transposed weight).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnx import numpy_helper

from ...fusion import FusedOp
from ...graph import attr
from ..ir import IO_TYPES, IRBase, LoweringError, Param, snake_case
from ..vector import Builder, Step, allocate, lower_node, scalar, silu_products
from .schedule import MatmulSchedule


@dataclass(frozen=True)
class Gemm:
    """One matrix product of the op: ``x @ W`` (columns from ``col_offset``) plus an optional bias."""

    weight: int
    bias: int | None
    col_offset_halves: int = 0  # 0: columns [0, N); 1: columns [N, 2N) of a gate-up weight


@dataclass(frozen=True)
class MatmulKernel(IRBase):
    """Kernel IR of one matmul+epilogue fused op type.

    Attributes:
        op_type / snake: OpDef type and kernel entry name.
        inputs / outputs: formal names in kernel argument order (x first).
        gemms: the products, one C register each (0, 1).
        trans_b: weights are stored ``[N, K]`` (transB, or a Transpose in the body).
        split: one gate-up weight of 2N columns feeds both gemms.
        steps / const_steps / out_reg / num_regs: the epilogue on fp32 registers of one C block.
        dtypes: ONNX element type per dtype column (x, weights, biases and y share it).
    """

    op_type: str
    snake: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    gemms: tuple[Gemm, ...]
    trans_b: bool
    split: bool
    steps: tuple[Step, ...]
    const_steps: tuple[Step, ...]
    out_reg: int
    num_regs: int
    dtypes: tuple[int, ...]
    params: tuple[float, ...] = ()  # the first instance's values of the epilogue's parameters (td.param[i])
    schedule: MatmulSchedule = MatmulSchedule()  # the policies the kernel is rendered with

    @property
    def has_bias(self) -> bool:
        return any(g.bias is not None for g in self.gemms)

    def out_cols(self, shapes: Sequence[Sequence[int]]) -> int:
        """N, the output's columns, from the inputs' shapes (a gate-up weight holds both halves)."""
        w = shapes[self.gemms[0].weight]
        return (w[0] if self.trans_b else w[1]) // (2 if self.split else 1)

    @property
    def input_names(self) -> tuple[str, ...]:
        """Formal input names in kernel argument order."""
        return self.inputs


def lower_matmul(op: FusedOp) -> MatmulKernel:
    """Lower one matmul+epilogue fused op; raises LoweringError with the reason when it cannot."""
    dtypes = []
    for col in op.dtype_columns:
        if len(set(col)) != 1 or col[0] not in IO_TYPES:
            raise LoweringError(f"dtype column {col} mixes or uses unsupported element types")
        dtypes.append(col[0])
    formal = {n: i for i, n in enumerate(op.input_names)}
    # Constants, and the op's parameters (function attributes p0..: one kernel for every value, read from the
    # tiling data), at the first instance's values.
    refs = {n.output[0]: n.attribute[0].ref_attr_name for n in op.function.node
            if n.op_type == "Constant" and n.attribute[0].ref_attr_name}
    tensors = {n.output[0]: n.attribute[0].t for n in op.function.node
               if n.op_type == "Constant" and n.output[0] not in refs}
    sizes = {n.input[1] for n in op.function.node if n.op_type == "Split" and len(n.input) > 1}  # read below
    consts: dict[str, float] = {name: scalar(t) for name, t in tensors.items() if name not in sizes}
    index = {name: i for i, name in enumerate(op.params)}
    first = op.instances[0].params if op.instances and op.instances[0].params else (0.0,) * len(index)
    consts.update({name: Param(first[index[ref]], index[ref]) for name, ref in refs.items()})
    transposed: dict[str, int] = {}  # Transpose outputs of a formal weight
    c_of: dict[str, int] = {}  # tensor -> gemm index holding it (before the epilogue)
    gemms: list[dict] = []
    x_name: str | None = None
    trans_flags: set[bool] = set()
    epilogue = []
    readers: dict[str, int] = {}
    for node in op.function.node:
        for i in node.input:
            readers[i] = readers.get(i, 0) + 1
    for node in op.function.node:
        t = node.op_type
        if t == "Constant":
            continue
        if t == "Transpose" and node.input[0] in formal and list(attr(node, "perm", [1, 0])) == [1, 0]:
            transposed[node.output[0]] = formal[node.input[0]]
            continue
        if t in ("MatMul", "Gemm"):
            a, w = node.input[0], node.input[1]
            if a not in formal:
                raise LoweringError(f"{t} reads {a!r}, not an input of the op: the A operand must be x")
            if x_name not in (None, a):
                raise LoweringError("the MatMuls read different A operands; the kernel shares one x")
            x_name = a
            trans = False
            if w in transposed:
                trans, widx = True, transposed[w]
            elif w in formal:
                widx = formal[w]
            else:
                raise LoweringError(f"{t}'s weight {w!r} is computed inside the op, not a weight input")
            bias = None
            if t == "Gemm":
                if attr(node, "transA", 0) or attr(node, "alpha", 1.0) != 1.0 or attr(node, "beta", 1.0) != 1.0:
                    raise LoweringError("Gemm with transA or alpha/beta other than 1 is not served")
                trans = trans or bool(attr(node, "transB", 0))
                if len(node.input) > 2 and node.input[2]:
                    if node.input[2] not in formal:
                        raise LoweringError("Gemm's bias is computed inside the op")
                    bias = formal[node.input[2]]
            trans_flags.add(trans)
            c_of[node.output[0]] = len(gemms)
            gemms.append({"weight": widx, "bias": bias, "half": 0})
            continue
        if t == "Add" and any(i in c_of for i in node.input):
            c, b = node.input if node.input[0] in c_of else node.input[::-1]
            g = gemms[c_of[c]]
            if b in formal and g["bias"] is None and readers.get(c) == 1:
                g["bias"] = formal[b]
                c_of[node.output[0]] = c_of[c]
                continue
        if t == "Split" and node.input[0] in c_of and len(node.output) == 2:
            g = gemms[c_of[node.input[0]]]
            if len(gemms) != 1:
                raise LoweringError("Split of one of several MatMuls is not served")
            halves = tensors.get(node.input[1]) if len(node.input) > 1 else None
            if halves is not None and len(set(numpy_helper.to_array(halves).reshape(-1).tolist())) != 1:
                raise LoweringError("a Split into unequal parts is not served (the kernel halves the columns)")
            c_of[node.output[0]] = 0
            c_of[node.output[1]] = 1
            gemms.append({"weight": g["weight"], "bias": g["bias"], "half": 1})
            continue
        epilogue.append(node)
    if not gemms:
        raise LoweringError("the op has no MatMul or Gemm")
    if len(gemms) > 2:
        raise LoweringError(f"{len(gemms)} MatMuls in one op; the kernel takes one or two sharing x")
    if len(trans_flags) != 1:
        raise LoweringError("one MatMul's weight is transposed and the other's is not")
    split = any(g["half"] for g in gemms)
    b = Builder(len(gemms))
    values: dict[str, int | float] = dict(consts)
    for name, gi in c_of.items():
        values[name] = gi
    silu_of = silu_products(op.function)
    sig_only = {s for _, s in silu_of.values()}
    for node in epilogue:
        if len(node.output) != 1:
            raise LoweringError(f"{node.op_type} with several outputs in the epilogue is not served")
        if node.output[0] in silu_of and silu_of[node.output[0]][0] in values:
            values[node.output[0]] = b.silu(values[silu_of[node.output[0]][0]])
            continue
        if node.op_type == "Sigmoid" and node.output[0] in sig_only:
            continue
        for i in node.input:
            if i not in values:
                raise LoweringError(f"the epilogue's {node.op_type} reads {i!r}, neither a MatMul result "
                                    "nor a constant")
        values[node.output[0]] = lower_node(b, node, [values[i] for i in node.input])
    if len(op.output_names) != 1:
        raise LoweringError("the matmul kernel writes one output")
    v = values.get(op.output_names[0])
    if v is None:
        raise LoweringError("the op's output is not computed from the MatMuls")
    out = v if isinstance(v, int) else b.dup(v)
    const = [st for st in b.steps if st.api == "Duplicate"]
    body = [st for st in b.steps if st.api != "Duplicate"]
    steps, out_regs, n = allocate(const + body, len(gemms), [out], {st.dst for st in const})
    if any(s.api == "Select" for s in steps):
        raise LoweringError("Select in a matmul epilogue is not served (it needs UB scratch at TMP_UB_OFFSET)")
    order = [formal[x_name]] + [i for i in range(len(op.input_names)) if i != formal[x_name]]
    if order != list(range(len(op.input_names))):
        raise LoweringError("x must be the op's first input")
    return MatmulKernel(op.op_type, snake_case(op.op_type), tuple(op.input_names), tuple(op.output_names),
                        tuple(Gemm(g["weight"], g["bias"], g["half"]) for g in gemms), trans_flags.pop(), split,
                        tuple(steps[len(const):]), tuple(steps[:len(const)]), out_regs[0], n, tuple(dtypes),
                        tuple(float(v) for v in first))


__all__ = ["lower_matmul", "MatmulKernel", "Gemm"]
