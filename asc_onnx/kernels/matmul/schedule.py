"""The matmul class's schedule: its policies (:class:`MatmulSchedule`, carried by the IR and printed by the
renderer) and, in Python beside them, the traffic model of its block loop under a tiling (:func:`block_bytes`)
and the floor any schedule under that tiling could reach (:func:`tiling_min`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .lower import MatmulKernel


@dataclass(frozen=True)
class MatmulSchedule:
    """The matmul class's policies.

    Attributes:
        ring_stages: 910B: stages of the per-core C ring in the workspace. With ``n`` stages the vector core keeps
            ``n - 1`` blocks queued on the cube (``IterateAll<false>`` per block and gemm, ``WaitIterateAll`` as it
            reaches each) and runs the epilogue of a block while the cube computes the next ones; the epilogue
            takes the block in row chunks, so its UB no longer caps the L0C the tiling may use. 0: the synchronous
            block loop (one ``IterateAll`` per block and gemm, the epilogue on the whole block after it, L0C capped
            by UB). 310P's blocks are synchronous either way (its Matmul is ``MatmulImpl`` on the AI Core itself,
            which returns with C written), with the epilogue in row chunks when ``ring_stages`` > 0.
        epilogue_buffers: buffers of the epilogue's C and y queues (a second one overlaps the copies of one chunk
            or block with the compute of another).
    """

    ring_stages: int = 2
    epilogue_buffers: int = 2

    def __post_init__(self) -> None:
        if self.epilogue_buffers not in (1, 2):
            raise ValueError(f"epilogue_buffers must be 1 or 2, not {self.epilogue_buffers}")
        if not 0 <= self.ring_stages <= 4:
            raise ValueError(f"ring_stages must be 0 (synchronous blocks) to 4, not {self.ring_stages}")

    @property
    def ring(self) -> bool:
        """Blocks queued ahead on 910B and the epilogue in row chunks (both SoCs)."""
        return self.ring_stages > 0


def _core_regions(m: int, n: int, cube: Mapping[str, int]) -> Iterator[tuple[int, int]]:
    """Each core's region of the ``m x n`` output under a tiling: its rows and columns (0 past the edge)."""
    for core in range(cube["mDim"] * cube["nDim"]):
        m0, n0 = (core % cube["mDim"]) * cube["singleCoreM"], (core // cube["mDim"]) * cube["singleCoreN"]
        yield max(0, min(m - m0, cube["singleCoreM"])), max(0, min(n - n0, cube["singleCoreN"]))


def tiling_min(k: MatmulKernel, m: int, n: int, kk: int, cube: Mapping[str, int], dtype_size: int) -> int:
    """The least GM traffic a tiling allows for ``m x kk @ kk x n``: y written once, and each core's Matmul
    objects reading its x rows and weight columns (and bias) once per gemm."""
    total = m * n
    for tm, tn in _core_regions(m, n, cube):
        total += len(k.gemms) * (tm * kk + kk * tn + (1 if k.has_bias else 0) * tn)
    return total * dtype_size


def block_bytes(k: MatmulKernel, m: int, n: int, kk: int, cube: Mapping[str, int], dtype_size: int) -> int:
    """GM bytes of the block loop under a tiling: each core walks its region in base blocks; per block and gemm
    the Matmul reads the block's x rows and weight columns over all of K (and its bias columns), writes the C
    block to the core's workspace slot and a vector core reads it back; the epilogue writes y once."""
    total = 0
    base_m, base_n = cube["baseM"], cube["baseN"]
    for tm, tn in _core_regions(m, n, cube):
        for r in range(0, tm, base_m):
            rows = min(base_m, tm - r)
            for c in range(0, tn, base_n):
                cols = min(base_n, tn - c)
                for g in k.gemms:
                    total += (rows * kk + kk * cols + (cols if g.bias is not None else 0) + 2 * rows * cols)
                total += rows * cols
    return total * dtype_size


def bare(k: MatmulKernel) -> MatmulKernel:
    """The op's MatMuls alone: the same gemms, tiling and schedule with an identity epilogue (y = the first C).
    The estimate times it as the unfused MatMul nodes under the same assumptions as the fused kernel."""
    return dataclasses.replace(k, steps=(), const_steps=(), out_reg=0, num_regs=len(k.gemms))


def choose(k: MatmulKernel, soc: object) -> MatmulSchedule:
    """The schedule a kernel ships with."""
    return MatmulSchedule()


#: Schedules a benchmark may set side by side: the pipelined ring (shipped) and the synchronous block loop.
VARIANTS = {"pipelined ring": MatmulSchedule(), "synchronous blocks": MatmulSchedule(ring_stages=0)}


def traffic(k: MatmulKernel, shapes: Sequence[Sequence[int]], dtype_size: int, soc: object, block_dim: int,
            cube: Mapping[str, int] | None = None) -> int:
    """The model's GM bytes under the tiling the run used (:func:`block_bytes`; 0 without one)."""
    if not cube:
        return 0
    kk = shapes[0][-1]
    return block_bytes(k, math.prod(shapes[0]) // max(1, kk), k.out_cols(shapes), kk, cube, dtype_size)


__all__ = ["VARIANTS", "MatmulSchedule", "bare", "block_bytes", "choose", "tiling_min", "traffic"]
