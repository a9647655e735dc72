"""The toy class's IR: one float32 input, one output, ``y = |x|``."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from asc_onnx.fusion import FusedOp
from asc_onnx.kernels.ir import LoweringError, snake_case


@dataclass(frozen=True)
class ToyInput:
    name: str
    kind: str = "full"


@dataclass(frozen=True)
class AbsKernel:
    op_type: str
    snake: str
    inputs: tuple[ToyInput, ...]
    outputs: tuple[str, ...]
    dtypes: tuple[int, ...]
    params: tuple[float, ...] = ()
    uses_select: bool = False

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(x.name for x in self.inputs)

    @property
    def num_params(self) -> int:
        return 0


def lower(op: FusedOp, symbolic=None, kinds=None) -> AbsKernel:
    if [n.op_type for n in op.function.node] != ["Abs"]:
        raise LoweringError("the toy class computes one Abs")
    if any(set(col) != {onnx.TensorProto.FLOAT} for col in op.dtype_columns):
        raise LoweringError("the toy class takes float32 only")
    return AbsKernel(op.op_type, snake_case(op.op_type), (ToyInput(op.input_names[0]),), op.output_names,
                     (onnx.TensorProto.FLOAT,))
