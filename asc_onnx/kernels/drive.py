"""What every emulator driver shares: the C++ helpers a driver starts with, the driver of the vector classes, and
the entry point every driver defines.

A driver is a C++ program around one generated kernel, compiled against the emulator's headers: it reads the
inputs from files, computes the tiling with the op's own ``<op>ComputeTiling``, runs the blocks and prints one
JSON line of counters. Each defines ``int Drive(int argc, char** argv)`` (:data:`ENTRY`); the harness adds the
``main`` that calls it, or one ``main`` that picks among several drivers of a batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..soc import Soc
from .skeleton import tiling_ub_bytes

#: Every driver's entry point.
ENTRY = "Drive"


#: Bytes of the system workspace the emulator hands GetSysWorkSpacePtr() to a kernel with Matmul objects (the
#: chip's is 16 MiB on 910B; the emulated Matmul keeps its state on the host, so only the address matters).
EMU_SYS_WORKSPACE = 4096


def cube_inputs(nin: int) -> str:
    """Driver lines (at four spaces) of a kernel with Matmul objects: its arguments, the input buffers and every
    input's shape from shapes.txt."""
    return f"""if (argc != 5) return Report("usage", "dir coreNum dtypeSize dtypeName");
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
    }}"""


#: TCubeTiling's fields (kernel_tiling.h), the keys of a forced tiling and of the run's report.
CUBE_FIELDS = ("usedCoreNum M N Ka Kb singleCoreM singleCoreN singleCoreK baseM baseN baseK depthA1 depthB1 stepM "
               "stepN isBias transLength iterateOrder shareMode shareL1Size shareL0CSize shareUbSize batchM batchN "
               "singleBatchM singleBatchN stepKa stepKb depthAL1CacheUB depthBL1CacheUB dbL0A dbL0B dbL0C").split()

#: Driver lines (at four spaces): the PlatformInfo a host tiling with Matmul objects reads, from the emulated SoC.
CUBE_PLATFORM = """const bool coupled = __NPU_ARCH__ == 2002;
    const auto caps = asc_emu::Cube();
    matmul_tiling::PlatformInfo platform;
    platform.socVersion = coupled ? platform_ascendc::SocVersion::ASCEND310P : platform_ascendc::SocVersion::ASCEND910B;
    platform.l1Size = caps.l1;
    platform.l0CSize = caps.l0c;
    platform.ubSize = st.soc.ubBytes;
    platform.l0ASize = caps.l0a;
    platform.l0BSize = caps.l0b;"""


def cube_run(nin: int, snake: str) -> str:
    """Driver lines (at four spaces) of a kernel with Matmul objects, after its tiling (``tiling``) and ``blocks``:
    the system and user workspace, the GM buffers, the blocks one after another, the output's coverage and file."""
    args = ", ".join(f"bufs[{i}].data()" for i in range(nin + 1))
    return f"""std::vector<uint8_t> workspace({EMU_SYS_WORKSPACE} + static_cast<size_t>(tiling.userWorkspace), 0xFF);
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
    if (const int rc = RunBlocks(blocks, [&] {{ {snake}({args}, workspace.data(), tilingBuf.data()); }})) return rc;
    for (size_t i = 0; i < st.gm[{nin}].writer.size(); ++i) {{  // (a timing-only run keeps no byte map)
        if (st.gm[{nin}].writer[i] == -1)
            return Report("fault", "byte " + std::to_string(i) + " of output 0 was never written by any block");
    }}
    if (asc_emu::Values()) {{
        std::ofstream f(dir + "/out0.bin", std::ios::binary);
        f.write(reinterpret_cast<const char*>(bufs[{nin}].data()), bufs[{nin}].size());
    }}"""


def write_shapes(path: Path, shapes: Sequence[Sequence[int]], head: str | None = None) -> None:
    """``shapes.txt``: one line per array, its rank then its dims (after an optional first line)."""
    lines = ([head] if head is not None else []) + [" ".join(str(v) for v in (len(sh), *sh)) for sh in shapes]
    path.write_text("\n".join(lines))


#: C++ helpers every emulator driver starts with: GM buffers from files, the counters' sum, one-line JSON errors
#: (which name the op the driver was compiled for: a program may serve kernels of other names, see the harness).
DRIVER_HELPERS = r"""static asc_emu::Bytes ReadFile(const std::string& path) {
    std::ifstream size(path + ".size");  // a timing-only run: zeros of the size the harness wrote, no data
    if (size) {
        size_t n = 0;
        size >> n;
        asc_emu::Bytes zeros;
        zeros.resize(n);  // zero pages, touched only where the run's blocks read
        return zeros;
    }
    std::ifstream f(path, std::ios::binary);
    return asc_emu::Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// An output buffer: 0xEE bytes (unwritten output shows), or untouched zero pages in a timing-only run.
static void Fill(asc_emu::Bytes& b, size_t n) {
    if (asc_emu::Values()) b.assign(n, 0xEE);
    else b.resize(n);
}

static uint64_t VecElems() {
    uint64_t n = 0;
    for (auto& kv : asc_emu::St().vecElems) n += kv.second;
    return n;
}

// The vector instructions by kind, closing the run's JSON line.
static void PrintVecAndClose() {
    bool first = true;
    for (auto& kv : asc_emu::St().vecInstr) {
        std::cout << (first ? "" : ", ") << "\"" << kv.first << "\": " << kv.second;
        first = false;
    }
    std::cout << "}}" << std::endl;
}

static int Report(const std::string& kind, const std::string& msg) {
    std::string m;
    for (char c : msg) m += (c == '"' || c == '\\') ? '?' : c;
    std::cout << "{\"error\": \"" << kind << "\", \"message\": \"" << m << "\", \"op_type\": \"" << kOpType
              << "\", \"snake\": \"" << kSnake << "\"}" << std::endl;
    return 2;
}

// Blocks 0..n-1 one after another, each up to the next SyncAll (ASC_EMU_CORES=ends: only the blocks of the first
// two and last two cores, which hold the longest core); a fault becomes the run's one-line JSON error.
template <typename F>
static int RunBlocks(uint32_t n, F&& launch) {
    auto& st = asc_emu::St();
    st.blockNum = n;
    const char* only = std::getenv("ASC_EMU_CORES");
    const uint32_t cores = static_cast<uint32_t>(st.tm.cores), used = n < cores ? n : cores;
    std::vector<uint32_t> blocks;
    for (uint32_t b = 0; b < n; ++b) {
        if (only == nullptr || b % cores < 2 || b % cores + 2 >= used) blocks.push_back(b);
    }
    std::string fault;
    const int64_t bad = asc_emu::RunFibers(blocks, [&] { launch(); }, fault);
    if (bad >= 0) return Report("fault", "block " + std::to_string(bad) + ": " + fault);
    return 0;
}
"""


def driver_helpers(k: Any) -> str:
    """:data:`DRIVER_HELPERS` after the names of the op they are compiled for."""
    return (f'static const char* const kOpType = "{k.op_type}";\n'
            f'static const char* const kSnake = "{k.snake}";\n\n{DRIVER_HELPERS}')


def vector_main(k: Any, struct: str, setup: str, tile: str, prefix: str = "") -> str:
    """The driver of a vector kernel (pointwise, row): GM buffers from files, the host tiling (``setup``: the
    class's tiling call and output sizes), blocks one after another. ``tile`` is the C++ expression of the
    elements per tile the run reports; ``prefix`` the folder of the op's files (``op_kernel/``, ``op_host/``)
    relative to the compile's include root."""
    nin, nout = len(k.inputs), len(k.outputs)
    args = ", ".join(f"bufs[{i}].data()" for i in range(nin + nout))
    return f"""// asc-onnx emulator driver for {k.op_type}.
#include <cstring>
#include <fstream>
#include <iostream>
#include "kernel_operator.h"
#include "{prefix}op_kernel/{k.snake}.cpp"
#include "{prefix}op_host/{k.snake}_tiling_calc.h"

{driver_helpers(k)}
int Drive(int argc, char** argv) {{
    if (argc != 5) return Report("usage", "dir coreNum dtypeSize tilingUbBytes");
    const std::string dir = argv[1];
    auto& st = asc_emu::St();  // the SoC follows __NPU_ARCH__, as the kernel's own code paths do
    const uint32_t coreNum = static_cast<uint32_t>(std::stoul(argv[2]));
    const uint32_t dtypeSize = static_cast<uint32_t>(std::stoul(argv[3]));
    const uint64_t tilingUb = std::stoull(argv[4]);  // GetCoreMemSize(UB) after ReserveLocalMemory
    std::vector<asc_emu::Bytes> bufs({nin + nout});
    for (int i = 0; i < {nin}; ++i) bufs[i] = ReadFile(dir + "/in" + std::to_string(i) + ".bin");
    {setup}
    for (int o = 0; o < {nout}; ++o) Fill(bufs[{nin} + o], outElems[o] * dtypeSize);
    st.gm.reserve({nin + nout});
    for (int i = 0; i < {nin + nout}; ++i) {{
        const bool out = i >= {nin};
        st.gm.push_back({{(out ? "output " : "input ") + std::to_string(out ? i - {nin} : i), bufs[i].data(),
                         bufs[i].size(), out,
                         std::vector<int32_t>(out && asc_emu::Values() ? bufs[i].size() : 0, -1)}});
    }}
    std::vector<uint8_t> tilingBuf(sizeof(tiling));
    std::memcpy(tilingBuf.data(), &tiling, sizeof(tiling));
    std::vector<uint8_t> workspace(32);
    if (const int rc = RunBlocks(tiling.blockDim, [&] {{ {k.snake}({args}, workspace.data(), tilingBuf.data()); }}))
        return rc;
    for (auto& g : st.gm) {{
        if (!g.output || g.writer.empty()) continue;  // (a timing-only run keeps no byte map)
        for (size_t i = 0; i < g.bytes; ++i) {{
            if (g.writer[i] == -1)
                return Report("fault", "byte " + std::to_string(i) + " of " + g.name +
                              " was never written by any block");
        }}
    }}
    for (int o = 0; o < (asc_emu::Values() ? {nout} : 0); ++o) {{
        std::ofstream f(dir + "/out" + std::to_string(o) + ".bin", std::ios::binary);
        f.write(reinterpret_cast<const char*>(bufs[{nin} + o].data()), bufs[{nin} + o].size());
    }}
    std::cout << "{{\\"block_dim\\": " << tiling.blockDim << ", \\"gm_read\\": " << st.gmReadBytes
              << ", \\"gm_write\\": " << st.gmWriteBytes
              << ", \\"time\\": " << asc_emu::TimingJson() << ", \\"ub_peak\\": " << st.ubPeak
              << ", \\"scalar\\": " << st.scalarInstr << ", \\"tile_length\\": " << {tile}
              << ", \\"vec_elems\\": " << VecElems() << ", \\"vec\\": {{";
    PrintVecAndClose();
    return 0;
}}
"""


def param_reads(num_params: int) -> str:
    """The driver line that sets ``tiling.param`` from params.txt (fp32 bits), as TilingFunc does from the node's
    attributes ("" without parameters)."""
    return "" if not num_params else (
        f"{{ std::ifstream pf(dir + \"/params.txt\"); for (int i = 0; i < {num_params}; ++i) "
        "{ uint32_t bits = 0; pf >> bits; std::memcpy(&tiling.param[i], &bits, sizeof(bits)); } }")


def driver_tiling(struct: str, call: str, num_params: int) -> str:
    """Emulator driver lines (at four spaces) that run the host tiling ``call`` into ``tiling`` and report a
    refusal, then set the tiling data's parameters (:func:`param_reads`)."""
    return "\n    ".join([f"{struct} tiling{{}};", f"const int rc = {call};",
                          'if (rc != 0) return Report("tiling", "tiling refused the shape, reason " + '
                          'std::to_string(rc));', param_reads(num_params)])


def cube_write_inputs(k: Any, folder: Path, inputs: Sequence[np.ndarray], out_shapes: Sequence[tuple[int, ...]],
                      soc: Soc, core_num: int, dtype_size: int, dtype_name: str,
                      cube_tiling: Mapping[str, int] | None = None) -> list[str]:
    """A cube kernel's run folder: shapes.txt (every input's), cube_tiling.txt (forced tilings of its Matmul objects,
    if any); returns the program's arguments after the folder."""
    write_shapes(folder / "shapes.txt", [a.shape for a in inputs])
    if cube_tiling:
        (folder / "cube_tiling.txt").write_text("".join(f"{key} {int(v)}\n" for key, v in cube_tiling.items()))
    return [str(core_num), str(dtype_size), dtype_name]


def one_output_bytes(k: Any, shape: tuple[int, ...], itemsize: int) -> int:
    """A kernel with one output y of ``shape``, written once."""
    return int(np.prod(shape)) * itemsize


def vector_write_inputs(k: Any, folder: Path, inputs: Sequence[np.ndarray], out_shapes: Sequence[tuple[int, ...]],
                        soc: Soc, core_num: int, dtype_size: int, row_dims: int = 0) -> list[str]:
    """A vector kernel's run: shapes.txt (the row dims, 0 for pointwise; every input's shape; the first
    output's); returns the program's arguments after the folder: coreNum, dtypeSize and the UB the host
    tiling sees."""
    write_shapes(folder / "shapes.txt", [a.shape for a in inputs] + [out_shapes[0]], head=str(row_dims))
    return [str(core_num), str(dtype_size), str(tiling_ub_bytes(k, soc))]


def concrete(shape: Sequence[object] | None, default_dim: int) -> tuple[int, ...]:
    """A shape with symbolic dims replaced by ``default_dim``."""
    return tuple(d if isinstance(d, int) and d >= 0 else default_dim for d in (shape or ()))


def vector_inputs(ir: Any, inst: Any, np_dtype: type, out_shape: tuple[int, ...], rng: np.random.Generator,
                  broadcast_shapes: Sequence[tuple[int, ...]] | None = None, dim: int = 4) -> list[np.ndarray]:
    """Normal inputs of a vector kernel: full inputs of ``out_shape``; the others of their instance shape with
    dynamic dims bound to the data's at the aligned axis (or ``dim``), or ``broadcast_shapes`` in order."""
    given = iter(broadcast_shapes or ())
    out = []
    for i, x in enumerate(ir.inputs):
        if x.kind == "full":
            shape = out_shape
        elif broadcast_shapes:
            shape = next(given)
        else:  # dynamic dims take the data's binding at the aligned axis (they are that axis, or 1 there)
            dims = list(inst.input_shapes[i] or ())
            shape = tuple(d if isinstance(d, int) and d >= 0 else
                          (out_shape[len(out_shape) - len(dims) + j] if len(out_shape) - len(dims) + j >= 0 else dim)
                          for j, d in enumerate(dims))
        # asarray: a rank-0 draw is a numpy scalar, which onnxruntime does not take as a tensor
        out.append(np.asarray(rng.standard_normal(shape) * 2, dtype=np.float32).astype(np_dtype))
    return out


__all__ = ["DRIVER_HELPERS", "ENTRY", "concrete", "driver_helpers", "driver_tiling", "vector_inputs", "vector_main",
           "vector_write_inputs", "write_shapes"]


def keep_counters(k: Any, inputs: Sequence[np.ndarray], info: dict[str, Any], dtype_size: int) -> dict[str, Any]:
    """A driver's ``finish`` for a class that adds no figures to a run's counters."""
    return info
