"""The emulator's driver of a matmul kernel: GM buffers and the workspace, the host tiling (or a forced
TCubeTiling), vector cores one after another (two per cube core on 910B), the files a run reads, the shapes it
returns, and the least GM traffic the tiling it ran under allows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import AscOnnxError
from ..drive import (
    CUBE_FIELDS,
    CUBE_PLATFORM,
    concrete,
    cube_inputs,
    cube_run,
    cube_write_inputs,
    driver_helpers,
    one_output_bytes,
    param_reads,
)
from .lower import MatmulKernel
from .render import tiling_call
from .schedule import tiling_min


def main_source(k: MatmulKernel, struct: str, prefix: str = "") -> str:
    """The driver of a matmul kernel: GM buffers and the workspace, the host tiling (or a forced
    TCubeTiling from cube_tiling.txt), vector cores one after another (two per cube core on 910B)."""
    nin = len(k.inputs)
    w0 = k.gemms[0].weight
    n_dim = 0 if k.trans_b else 1
    parse = " ".join(f'if (key == "{f}") forced.{f} = v;' for f in CUBE_FIELDS)
    params = param_reads(k.num_params)
    show = " << ".join(f'", \\"{f}\\": " << c.{f}' for f in CUBE_FIELDS)
    call = tiling_call(k, "static_cast<uint32_t>(mm)", "static_cast<uint32_t>(nn)", "static_cast<uint32_t>(kk)",
                       "dtypeSize", 'dtypeName == "float"', 'dtypeName == "bfloat16_t"', "coreNum", "platform",
                       "coupled", "haveForced ? &forced : nullptr", "&tiling")
    return f"""// asc-onnx emulator driver for {k.op_type} (matmul+epilogue).
#include <cstring>
#include <fstream>
#include <iostream>
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "{prefix}op_kernel/{k.snake}.cpp"
#include "{prefix}op_host/{k.snake}_tiling_calc.h"

{driver_helpers(k)}
int Drive(int argc, char** argv) {{
    {cube_inputs(nin)}
    const uint64_t kk = shapes[0].back();
    const uint64_t mm = bufs[0].size() / dtypeSize / kk;
    const uint64_t nn = shapes[{w0}][{n_dim}]{' / 2' if k.split else ''};
    AscendC::tiling::TCubeTiling forced{{}};
    bool haveForced = false;
    {{
        std::ifstream f(dir + "/cube_tiling.txt");
        std::string key;
        int64_t v = 0;
        while (f >> key >> v) {{
            haveForced = true;
            {parse}
        }}
    }}
    {CUBE_PLATFORM}
    {struct} tiling{{}};
    const int rc = {call[0]}
    {call[1]};
    if (rc != 0) return Report("tiling", "tiling refused the shape, reason " + std::to_string(rc));
    {params}
    Fill(bufs[{nin}], mm * nn * dtypeSize);
    const uint32_t blocks = coupled ? tiling.blockDim : 2 * tiling.blockDim;  // 910B: two vector cores per cube core
    {cube_run(nin, k.snake)}
    const auto& c = tiling.cubeTiling;
    std::cout << "{{\\"block_dim\\": " << blocks << ", \\"gm_read\\": " << st.gmReadBytes
              << ", \\"gm_write\\": " << st.gmWriteBytes
              << ", \\"time\\": " << asc_emu::TimingJson() << ", \\"ub_peak\\": " << st.ubPeak
              << ", \\"scalar\\": " << st.scalarInstr << ", \\"tile_length\\": " << tiling.blockElems
              << ", \\"vec_elems\\": " << VecElems() << ", \\"cube\\": {{\\"macs\\": " << st.cube.macs
              << ", \\"blocks\\": " << st.cube.blocks << ", \\"a_read\\": " << st.cube.aReadBytes
              << ", \\"b_read\\": " << st.cube.bReadBytes << ", \\"c_bytes\\": " << st.cube.cBytes
              << ", \\"l1_peak\\": " << st.cube.l1Peak
              << ", \\"mDim\\": " << tiling.mDim << ", \\"nDim\\": " << tiling.nDim << {show}
              << "}}, \\"vec\\": {{";
    PrintVecAndClose();
    return 0;
}}
"""


def tiling_case(k: MatmulKernel, shapes: Sequence[Sequence[int]]) -> list[int]:
    """The case of the class's tiling program (``cann/tiling_main.cpp``) for inputs of ``shapes``: M, N, K."""
    kk = int(shapes[0][-1])
    return [int(np.prod(shapes[0][:-1])), k.out_cols(shapes), kk]


def output_shapes(k: MatmulKernel, inputs: Sequence[np.ndarray]) -> list[tuple[int, ...]]:
    """x's leading dims and N."""
    return [tuple(inputs[0].shape[:-1]) + (k.out_cols([a.shape for a in inputs]),)]


write_inputs = cube_write_inputs


def finish(k: MatmulKernel, inputs: Sequence[np.ndarray], info: dict[str, Any], dtype_size: int) -> dict[str, Any]:
    """The run's counters with the tiling's traffic floor beside the cube's."""
    kk = inputs[0].shape[-1]
    n = k.out_cols([a.shape for a in inputs])
    info["cube"]["tiling_min"] = tiling_min(k, inputs[0].size // max(1, kk), n, kk, info["cube"], dtype_size)
    return info


def inputs_at(k: MatmulKernel, inst: Any, np_dtype: type, lead: Sequence[int], rng: np.random.Generator,
              k_dim: int | None = None, n_dim: int | None = None) -> list[np.ndarray]:
    """x of shape ``lead + (K,)`` with unit-variance values, weights of their instance shape (or K, N given)
    scaled by 1/sqrt(K) as trained Linear layers are, biases of N values."""
    w_shape = tuple(concrete(inst.input_shapes[k.gemms[0].weight], 1))
    kk = k_dim or (w_shape[1] if k.trans_b else w_shape[0])
    nn = (n_dim * (2 if k.split else 1)) if n_dim else (w_shape[0] if k.trans_b else w_shape[1])
    weights = {g.weight for g in k.gemms}
    biases = {g.bias for g in k.gemms if g.bias is not None}
    out = []
    for i in range(len(k.inputs)):
        if i == 0:
            a = rng.standard_normal(tuple(lead) + (kk,))
        elif i in weights:
            a = rng.standard_normal((nn, kk) if k.trans_b else (kk, nn)) / np.sqrt(kk)
        elif i in biases:
            a = rng.standard_normal((nn,)) * 0.5
        else:
            raise AscOnnxError(f"{k.op_type}: input {i} is neither x, a weight nor a bias")
        out.append(a.astype(np.float32).astype(np_dtype))
    return out


def random_inputs(k: MatmulKernel, inst: Any, np_dtype: type, out_shape: tuple[int, ...], rng: np.random.Generator,
                  broadcast_shapes: Sequence[tuple[int, ...]] | None = None, dim: int = 4) -> list[np.ndarray]:
    """Seeded inputs for a check: x with y's leading dims, the weights and biases of the instance."""
    return inputs_at(k, inst, np_dtype, out_shape[:-1], rng)


def data_shape(k: MatmulKernel, inputs: Sequence[np.ndarray]) -> tuple[int, ...]:
    """y's shape: x's leading dims and N."""
    return output_shapes(k, inputs)[0]


output_bytes = one_output_bytes
