"""The emulator's driver of a pointwise kernel: the host tiling from the full input's length and each broadcast's
period, the output sizes, the files a run reads and the shapes it returns."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...soc import Soc
from ..drive import driver_tiling, keep_counters, vector_inputs, vector_main, vector_write_inputs
from .lower import PointwiseKernel
from .render import tiling_call

#: The emulator driver's elements per tile (for its traffic counters).
DRIVER_TILE = "tiling.tileLength"


def driver_setup(k: PointwiseKernel, struct: str) -> str:
    """The emulator driver's host side: the tiling from the full input's length and each broadcast's period, then
    the output sizes (the driver's ``bufs`` hold the inputs as read from their files)."""
    nout = len(k.outputs)
    bc = list(k.broadcast_inputs)
    full0 = next(i for i, x in enumerate(k.inputs) if x.kind == "full")
    call = tiling_call(k, "total", "periods", "dtypeSize", "coreNum", "tilingUb", "st.soc.hasDataCopyPad", "&tiling")
    return f"""const uint64_t total = bufs[{full0}].size() / dtypeSize;
    uint64_t periods[{max(1, len(bc))}] = {{0}};
    {" ".join(f"periods[{j}] = bufs[{i}].size() / dtypeSize;" for j, i in enumerate(bc))}
    {driver_tiling(struct, call, k.num_params)}
    std::vector<uint64_t> outElems({nout}, total);"""


def main_source(k: PointwiseKernel, struct: str, prefix: str = "") -> str:
    """The driver program (its entry :data:`~asc_onnx.kernels.drive.ENTRY`)."""
    return vector_main(k, struct, driver_setup(k, struct), DRIVER_TILE, prefix)


def output_shapes(k: PointwiseKernel, inputs: Sequence[np.ndarray]) -> list[tuple[int, ...]]:
    """Every output has the full inputs' shape."""
    full = next(a for a, x in zip(inputs, k.inputs) if x.kind == "full")
    return [full.shape] * len(k.outputs)


def write_inputs(k: PointwiseKernel, folder: Path, inputs: Sequence[np.ndarray], out_shapes: Sequence[tuple[int, ...]],
                 soc: Soc, core_num: int, dtype_size: int, dtype_name: str, cube_tiling: object = None) -> list[str]:
    """The run's files beside the inputs' bytes; returns the program's arguments after the folder."""
    return vector_write_inputs(k, folder, inputs, out_shapes, soc, core_num, dtype_size)


#: Seeded inputs for a check: full inputs of the data's shape, broadcast ones of their own.
random_inputs = vector_inputs
finish = keep_counters


def data_shape(k: PointwiseKernel, inputs: Sequence[np.ndarray]) -> tuple[int, ...]:
    """The shape the kernel computes over: its full inputs'."""
    return tuple(np.broadcast_shapes(*(a.shape for a, x in zip(inputs, k.inputs) if x.kind == "full")))


def output_bytes(k: PointwiseKernel, shape: tuple[int, ...], itemsize: int) -> int:
    """What the outputs hold, each written once: the data's size each."""
    return len(k.outputs) * int(np.prod(shape)) * itemsize
