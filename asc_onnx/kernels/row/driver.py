"""The emulator's driver of a row kernel: the host tiling from every input's shape and the data's, the output
sizes (statistics: one per row), the files a run reads and the shapes it returns."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...soc import Soc
from ..drive import driver_tiling, keep_counters, vector_inputs, vector_main, vector_write_inputs
from .lower import RowKernel
from .render import tiling_call

#: The emulator driver's rows per tile (0 in split mode: a row walked in chunks).
DRIVER_TILE = "(tiling.chunkLength != 0 ? 0 : tiling.tileRows)"


def driver_setup(k: RowKernel, struct: str) -> str:
    """The emulator driver's host side: every input's shape and the data's from shapes.txt (the row dims too: ops
    that differ only there share one program), the tiling, then the output sizes (statistics: one per row)."""
    nin, nout = len(k.inputs), len(k.outputs)
    bc = list(k.broadcast_inputs)
    stat = [o for o, kd in enumerate(k.output_kinds) if kd == "stat"]
    call = tiling_call(k, f"shapes[{nin}].data()", f"shapes[{nin}].size()", "rowDims", "bcastDims", "bcastRanks",
                       "dtypeSize", "coreNum", "tilingUb", "st.soc.hasDataCopyPad", "&tiling")
    return f"""std::vector<std::vector<uint64_t>> shapes({nin + 1});  // every input's, then the data's
    uint32_t rowDims = 0;  // the op's, not compiled in: ops that differ only there share one program
    {{
        std::ifstream f(dir + "/shapes.txt");
        f >> rowDims;
        for (int i = 0; i < {nin + 1}; ++i) {{
            uint32_t r = 0;
            f >> r;
            shapes[i].resize(r);
            for (uint32_t d = 0; d < r; ++d) f >> shapes[i][d];
        }}
    }}
    const uint64_t* bcastDims[{max(1, len(bc))}] = {{nullptr}};
    uint32_t bcastRanks[{max(1, len(bc))}] = {{0}};
    {" ".join(f"bcastDims[{j}] = shapes[{i}].data(); bcastRanks[{j}] = shapes[{i}].size();" for j, i in enumerate(bc))}
    {driver_tiling(struct, call, k.num_params)}
    const uint64_t total = tiling.rows * tiling.rowLength;
    std::vector<uint64_t> outElems({nout}, total);
    {" ".join(f"outElems[{o}] = tiling.rows;" for o in stat)}"""


def main_source(k: RowKernel, struct: str, prefix: str = "") -> str:
    """The driver program (its entry :data:`~asc_onnx.kernels.drive.ENTRY`)."""
    return vector_main(k, struct, driver_setup(k, struct), DRIVER_TILE, prefix)


def output_shapes(k: RowKernel, inputs: Sequence[np.ndarray]) -> list[tuple[int, ...]]:
    """The data's shape, or for a per-row statistic the data's with each row dim set to 1."""
    data = tuple(np.broadcast_shapes(*(inputs[i].shape for i in k.data_inputs)))
    stat = data[:len(data) - k.row_dims] + (1,) * k.row_dims
    return [data if kd == "row" else stat for kd in k.output_kinds]


def write_inputs(k: RowKernel, folder: Path, inputs: Sequence[np.ndarray], out_shapes: Sequence[tuple[int, ...]],
                 soc: Soc, core_num: int, dtype_size: int, dtype_name: str, cube_tiling: object = None) -> list[str]:
    """The run's files beside the inputs' bytes; returns the program's arguments after the folder."""
    return vector_write_inputs(k, folder, inputs, out_shapes, soc, core_num, dtype_size, k.row_dims)


#: Seeded inputs for a check: full inputs of the data's shape, the others of their own.
random_inputs = vector_inputs
finish = keep_counters


def data_shape(k: RowKernel, inputs: Sequence[np.ndarray]) -> tuple[int, ...]:
    """The broadcast of the inputs that carry rows (which may all be masks)."""
    return tuple(np.broadcast_shapes(*(a.shape for a, x in zip(inputs, k.inputs) if x.kind in ("full", "bcast"))))


def output_bytes(k: RowKernel, shape: tuple[int, ...], itemsize: int) -> int:
    """What the outputs hold, each written once: the data's size, or one value per row for a statistic."""
    rows = int(np.prod(shape[:len(shape) - k.row_dims]))
    return sum((int(np.prod(shape)) if kd == "row" else rows) * itemsize for kd in k.output_kinds)
