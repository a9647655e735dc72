"""The emulator's driver of a matmul kernel: GM buffers and the workspace, the host tiling (or a forced
TCubeTiling), vector cores one after another (two per cube core on 910B), the files a run reads, the shapes it
returns, and the least GM traffic the tiling it ran under allows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import AscOnnxError
from ...soc import Soc
from ..drive import EMU_SYS_WORKSPACE, concrete, driver_helpers, param_reads, write_shapes
from .lower import MatmulKernel
from .render import tiling_call
from .schedule import tiling_min

#: TCubeTiling's fields (kernel_tiling.h), the keys of a forced tiling and of the run's report.
CUBE_FIELDS = ("usedCoreNum M N Ka Kb singleCoreM singleCoreN singleCoreK baseM baseN baseK depthA1 depthB1 stepM "
               "stepN isBias transLength iterateOrder shareMode shareL1Size shareL0CSize shareUbSize batchM batchN "
               "singleBatchM singleBatchN stepKa stepKb depthAL1CacheUB depthBL1CacheUB dbL0A dbL0B dbL0C").split()



def main_source(k: MatmulKernel, struct: str, prefix: str = "") -> str:
    """The driver of a matmul kernel: GM buffers and the workspace, the host tiling (or a forced
    TCubeTiling from cube_tiling.txt), vector cores one after another (two per cube core on 910B)."""
    nin = len(k.inputs)
    args = ", ".join(f"bufs[{i}].data()" for i in range(nin + 1))
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
    if (argc != 5) return Report("usage", "dir coreNum dtypeSize dtypeName");
    const std::string dir = argv[1];
    auto& st = asc_emu::St();
    const uint32_t coreNum = static_cast<uint32_t>(std::stoul(argv[2]));
    const uint32_t dtypeSize = static_cast<uint32_t>(std::stoul(argv[3]));
    const std::string dtypeName = argv[4];
    std::vector<asc_emu::Bytes> bufs({nin + 1});
    for (int i = 0; i < {nin}; ++i) bufs[i] = ReadFile(dir + "/in" + std::to_string(i) + ".bin");
    std::vector<std::vector<uint64_t>> shapes({nin});
    {{
        std::ifstream f(dir + "/shapes.txt");
        for (int i = 0; i < {nin}; ++i) {{
            uint32_t r = 0;
            f >> r;
            shapes[i].resize(r);
            for (uint32_t d = 0; d < r; ++d) f >> shapes[i][d];
        }}
    }}
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
    const bool coupled = __NPU_ARCH__ == 2002;
    const auto caps = asc_emu::Cube();
    matmul_tiling::PlatformInfo platform;
    platform.socVersion = coupled ? platform_ascendc::SocVersion::ASCEND310P : platform_ascendc::SocVersion::ASCEND910B;
    platform.l1Size = caps.l1;
    platform.l0CSize = caps.l0c;
    platform.ubSize = st.soc.ubBytes;
    platform.l0ASize = caps.l0a;
    platform.l0BSize = caps.l0b;
    {struct} tiling{{}};
    const int rc = {call[0]}
    {call[1]};
    if (rc != 0) return Report("tiling", "tiling refused the shape, reason " + std::to_string(rc));
    {params}
    Fill(bufs[{nin}], mm * nn * dtypeSize);
    std::vector<uint8_t> workspace({EMU_SYS_WORKSPACE} + static_cast<size_t>(tiling.userWorkspace), 0xFF);
    AscendC::emu_ws::Sys() = workspace.data();
    AscendC::emu_ws::SysBytes() = {EMU_SYS_WORKSPACE};
    st.gm.reserve({nin + 2});
    for (int i = 0; i <= {nin}; ++i) {{
        const bool out = i == {nin};
        st.gm.push_back({{out ? "output 0" : "input " + std::to_string(i), bufs[i].data(), bufs[i].size(), out,
                         std::vector<int32_t>(out && asc_emu::Values() ? bufs[i].size() : 0, -1)}});
    }}
    st.gm.push_back({{"workspace", workspace.data(), workspace.size(), true,
                     std::vector<int32_t>(workspace.size(), -1)}});
    st.gm.back().cubeShared = true;
    std::vector<uint8_t> tilingBuf(sizeof(tiling));
    std::memcpy(tilingBuf.data(), &tiling, sizeof(tiling));
    const uint32_t blocks = coupled ? tiling.blockDim : 2 * tiling.blockDim;  // 910B: two vector cores per cube core
    if (const int rc = RunBlocks(blocks, [&] {{ {k.snake}({args}, workspace.data(), tilingBuf.data()); }})) return rc;
    for (size_t i = 0; i < st.gm[{nin}].writer.size(); ++i) {{  // (a timing-only run keeps no byte map)
        if (st.gm[{nin}].writer[i] == -1)
            return Report("fault", "byte " + std::to_string(i) + " of output 0 was never written by any block");
    }}
    if (asc_emu::Values()) {{
        std::ofstream f(dir + "/out0.bin", std::ios::binary);
        f.write(reinterpret_cast<const char*>(bufs[{nin}].data()), bufs[{nin}].size());
    }}
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


def output_shapes(k: MatmulKernel, inputs: Sequence[np.ndarray]) -> list[tuple[int, ...]]:
    """x's leading dims and N."""
    return [tuple(inputs[0].shape[:-1]) + (k.out_cols([a.shape for a in inputs]),)]


def write_inputs(k: MatmulKernel, folder: Path, inputs: Sequence[np.ndarray], out_shapes: Sequence[tuple[int, ...]],
                 soc: Soc, core_num: int, dtype_size: int, dtype_name: str,
                 cube_tiling: Mapping[str, int] | None = None) -> list[str]:
    """shapes.txt (every input's), cube_tiling.txt (a forced TCubeTiling, if any); returns the program's arguments
    after the folder."""
    write_shapes(folder / "shapes.txt", [a.shape for a in inputs])
    if cube_tiling:
        (folder / "cube_tiling.txt").write_text("".join(f"{key} {int(v)}\n" for key, v in cube_tiling.items()))
    return [str(core_num), str(dtype_size), dtype_name]


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


def output_bytes(k: MatmulKernel, shape: tuple[int, ...], itemsize: int) -> int:
    """y, written once."""
    return int(np.prod(shape)) * itemsize
