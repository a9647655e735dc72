"""The pointwise class's schedule: its policies (the shared :class:`~asc_onnx.kernels.schedule.VectorSchedule`)
and, beside them, the traffic model: the global-memory bytes the kernel moves for a shape."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..schedule import VectorSchedule

if TYPE_CHECKING:
    from .lower import PointwiseKernel


def choose(k: PointwiseKernel, soc: object) -> VectorSchedule:
    """The schedule a kernel ships with."""
    return VectorSchedule()


#: Schedules a benchmark may set side by side.
VARIANTS = {"double-buffered": VectorSchedule(), "single-buffered": VectorSchedule(buffer_num=1)}


def gm_bytes(k: PointwiseKernel, shapes: Sequence[Sequence[int]], dtype_size: int, block_dim: int) -> int:
    """Global-memory bytes in flat mode on 910B (byte-exact copies): full inputs and outputs once, each broadcast
    input's period once per core (expanded in UB and read by every tile)."""
    total = 0
    out = 0
    for x, shape in zip(k.inputs, shapes):
        if x.kind == "full":
            total += math.prod(shape) * dtype_size
            out = math.prod(shape)
        else:
            total += block_dim * math.prod(shape) * dtype_size
    return total + len(k.outputs) * out * dtype_size


def traffic(k: PointwiseKernel, shapes: Sequence[Sequence[int]], dtype_size: int, soc: object, block_dim: int,
            cube: object = None) -> int:
    """The model's GM bytes for a launch of ``block_dim`` cores (:func:`gm_bytes`)."""
    return gm_bytes(k, shapes, dtype_size, block_dim)


__all__ = ["VARIANTS", "choose", "gm_bytes", "traffic"]
