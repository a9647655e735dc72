"""The toy class's emulator driver, built from the shared vector driver."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from asc_onnx.kernels.drive import driver_tiling, keep_counters, vector_inputs, vector_main, vector_write_inputs

from .lower import AbsKernel
from .render import struct_name, tiling_call


def main_source(k: AbsKernel, struct: str, prefix: str = "") -> str:
    call = tiling_call(k, "total", "st.soc.hasDataCopyPad", "&tiling")
    setup = (f"const uint64_t total = bufs[0].size() / dtypeSize;\n    {driver_tiling(struct_name(k), call, 0)}\n"
             "    std::vector<uint64_t> outElems(1, total);")
    return vector_main(k, struct, setup, "0", prefix)


def output_shapes(k: AbsKernel, inputs: Sequence[np.ndarray]) -> list[tuple[int, ...]]:
    return [inputs[0].shape]


def write_inputs(k: AbsKernel, folder: Path, inputs, out_shapes, soc, core_num, dtype_size, dtype_name,
                 cube_tiling=None) -> list[str]:
    return vector_write_inputs(k, folder, inputs, out_shapes, soc, core_num, dtype_size)


random_inputs = vector_inputs
finish = keep_counters


def data_shape(k: AbsKernel, inputs: Sequence[np.ndarray]) -> tuple[int, ...]:
    return inputs[0].shape


def output_bytes(k: AbsKernel, shape: tuple[int, ...], itemsize: int) -> int:
    return int(np.prod(shape)) * itemsize
