"""What every kernel class's lowering shares: the I/O element types, the error that says why an op has
no kernel, and CANN's op-type to kernel-name rule."""

from __future__ import annotations

import re

from onnx import TensorProto

from ..errors import AscOnnxError

#: Element types a kernel reads and writes, by ONNX type: C++ name, size.
IO_TYPES = {TensorProto.FLOAT: ("float", 4), TensorProto.FLOAT16: ("half", 2), TensorProto.BFLOAT16: ("bfloat16_t", 2)}


class LoweringError(AscOnnxError):
    """The op cannot be served by its kernel class; the message says why."""


def snake_case(op_type: str) -> str:
    """CANN's OpType -> kernel name rule (cann_facts §1.2): ``AscFusedEw3f`` -> ``asc_fused_ew3f``."""
    s = op_type[0].lower() + op_type[1:]
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", s)
    s = re.sub(r"(?<=[A-Z])([A-Z])(?=[a-z])", r"_\1", s)
    return s.lower()



__all__ = ["IO_TYPES", "LoweringError", "snake_case"]
