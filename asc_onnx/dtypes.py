"""The float element types a kernel takes, between ONNX and numpy: one map, read both ways by the stages and the
emulator harness (bf16 is ml_dtypes', which onnx itself depends on: numpy has none of its own)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import TensorProto

from .errors import AscOnnxError

#: ONNX element type -> numpy type, for the three a kernel takes.
NP_TYPES: dict[int, type] = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16,
                             TensorProto.BFLOAT16: ml_dtypes.bfloat16}


def np_type(dtype: int) -> type:
    """numpy type of an ONNX float type."""
    return NP_TYPES[dtype]


def onnx_type(a: np.ndarray) -> int:
    """ONNX element type of a kernel's float input or output."""
    for dtype, t in NP_TYPES.items():
        if a.dtype == t:
            return dtype
    raise AscOnnxError(f"kernel inputs must be float32, float16 or bfloat16, not {a.dtype}")
