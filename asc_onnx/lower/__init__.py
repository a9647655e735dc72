"""Stage 5, lower: a fused op's function body becomes the kernel IR of its class (no C++ here).

``pointwise`` serves elementwise bodies, ``row`` bodies that reduce over trailing axes; both share the
element types, the error and the naming rule of ``common``, and the row lowering reuses the pointwise
lowering of each elementwise node."""

from .common import IO_TYPES, LoweringError, snake_case
from .pointwise import PointwiseKernel, PwInput, Step, lower_pointwise
from .row import RowInput, RowKernel, RowStep, lower_row

__all__ = ["IO_TYPES", "LoweringError", "snake_case", "PointwiseKernel", "PwInput", "Step", "lower_pointwise",
           "RowInput", "RowKernel", "RowStep", "lower_row"]
