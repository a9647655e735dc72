"""Compile a generated pointwise kernel with its tiling arithmetic against the emulator headers
(g++, cached by a hash of every source), run blocks 0..blockDim-1 on numpy inputs, and return
the outputs with the emulator's counters (GM bytes, vector instructions by kind, UB peak)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from onnx import TensorProto

from ..cache import cache_root
from ..errors import AscOnnxError
from ..kernels import of
from ..lower import IO_TYPES, PointwiseKernel, RowKernel
from ..lower.matmul import MatmulKernel
from ..soc import Soc
from . import INCLUDE_DIR

NP_TYPES = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16}


class EmulatorFaultError(AscOnnxError):
    """The kernel broke a hardware rule in the emulator (or its tiling refused the shape)."""


class TilingRefusedError(EmulatorFaultError):
    """The kernel's host tiling refused the shape, so the kernel never ran: a refusal with a stated reason,
    not a kernel that failed (ATC would get the same refusal from the op's TilingFunc)."""


def refusal_text(k: PointwiseKernel | RowKernel | MatmulKernel, code: int) -> str:
    """The words for a non-zero return of a kernel's ``<op>ComputeTiling``, from its class's table."""
    why = of(k).refusals.get(code, "an unknown reason")
    return f"the host tiling refused the shape: {why} (reason {code})"


@dataclass(frozen=True)
class EmuResult:
    """Outputs and counters of one emulated kernel run."""

    outputs: tuple[np.ndarray, ...]
    block_dim: int
    gm_read_bytes: int
    gm_write_bytes: int
    vec_instr: Mapping[str, int]
    ub_peak_bytes: int
    scalar_instr: int = 0
    tile_length: int = 0
    vec_elems: int = 0
    cube: Mapping[str, int] | None = None  # matmul kernels: cube counters and the tiling the run used


def cache_dir() -> Path:
    """Where compiled emulator programs are kept (``ASC_ONNX_CACHE`` or ~/.cache/asc-onnx)."""
    return cache_root() / "emu"  # absolute: batch entries name their program by path


#: C++ helpers every emulator driver starts with: GM buffers from files, the counters' sum, one-line JSON errors.
DRIVER_HELPERS = r"""static std::vector<uint8_t> ReadFile(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
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
    std::cout << "{\"error\": \"" << kind << "\", \"message\": \"" << m << "\"}" << std::endl;
    return 2;
}

// Blocks 0..n-1 one after another; a fault becomes the run's one-line JSON error.
template <typename F>
static int RunBlocks(uint32_t n, F&& launch) {
    auto& st = asc_emu::St();
    st.blockNum = n;
    for (uint32_t b = 0; b < n; ++b) {
        st.blockIdx = b;
        try {
            launch();
            asc_emu::EndBlock();
        } catch (const asc_emu::Fault& e) {
            return Report("fault", "block " + std::to_string(b) + ": " + e.what());
        }
    }
    return 0;
}
"""


def main_source(k: PointwiseKernel | RowKernel, struct: str) -> str:
    """The emulator's ``main``: GM buffers from files, host tiling, blocks one after another."""
    nin, nout = len(k.inputs), len(k.outputs)
    args = ", ".join(f"bufs[{i}].data()" for i in range(nin + nout))
    driver = of(k).codegen
    setup = driver.driver_setup(k, struct)
    tile = driver.DRIVER_TILE
    return f"""// asc-onnx emulator driver for {k.op_type}.
#include <cstring>
#include <fstream>
#include <iostream>
#include "kernel_operator.h"
#include "{k.snake}.cpp"
#include "{k.snake}_tiling_calc.h"

{DRIVER_HELPERS}
int main(int argc, char** argv) {{
    if (argc != 5) return Report("usage", "dir coreNum dtypeSize tilingUbBytes");
    const std::string dir = argv[1];
    auto& st = asc_emu::St();  // the SoC follows __NPU_ARCH__, as the kernel's own code paths do
    const uint32_t coreNum = static_cast<uint32_t>(std::stoul(argv[2]));
    const uint32_t dtypeSize = static_cast<uint32_t>(std::stoul(argv[3]));
    const uint64_t tilingUb = std::stoull(argv[4]);  // GetCoreMemSize(UB) after ReserveLocalMemory
    std::vector<std::vector<uint8_t>> bufs({nin + nout});
    for (int i = 0; i < {nin}; ++i) bufs[i] = ReadFile(dir + "/in" + std::to_string(i) + ".bin");
    {setup}
    for (int o = 0; o < {nout}; ++o) bufs[{nin} + o].assign(outElems[o] * dtypeSize, 0xEE);
    st.gm.reserve({nin + nout});
    for (int i = 0; i < {nin + nout}; ++i) {{
        const bool out = i >= {nin};
        st.gm.push_back({{(out ? "output " : "input ") + std::to_string(out ? i - {nin} : i), bufs[i].data(),
                         bufs[i].size(), out, std::vector<int32_t>(out ? bufs[i].size() : 0, -1)}});
    }}
    std::vector<uint8_t> tilingBuf(sizeof(tiling));
    std::memcpy(tilingBuf.data(), &tiling, sizeof(tiling));
    std::vector<uint8_t> workspace(32);
    if (const int rc = RunBlocks(tiling.blockDim, [&] {{ {k.snake}({args}, workspace.data(), tilingBuf.data()); }}))
        return rc;
    for (auto& g : st.gm) {{
        if (!g.output) continue;
        for (size_t i = 0; i < g.bytes; ++i) {{
            if (g.writer[i] == -1)
                return Report("fault", "byte " + std::to_string(i) + " of " + g.name +
                              " was never written by any block");
        }}
    }}
    for (int o = 0; o < {nout}; ++o) {{
        std::ofstream f(dir + "/out" + std::to_string(o) + ".bin", std::ios::binary);
        f.write(reinterpret_cast<const char*>(bufs[{nin} + o].data()), bufs[{nin} + o].size());
    }}
    std::cout << "{{\\"block_dim\\": " << tiling.blockDim << ", \\"gm_read\\": " << st.gmReadBytes
              << ", \\"gm_write\\": " << st.gmWriteBytes << ", \\"ub_peak\\": " << st.ubPeak
              << ", \\"scalar\\": " << st.scalarInstr << ", \\"tile_length\\": " << {tile}
              << ", \\"vec_elems\\": " << VecElems() << ", \\"vec\\": {{";
    PrintVecAndClose();
    return 0;
}}
"""


@functools.lru_cache(maxsize=1)
def _headers_digest() -> str:
    """A hash of every emulator header (read once per process: every program's cache key includes it)."""
    h = hashlib.sha256()
    for p in sorted(INCLUDE_DIR.rglob("*.h")):
        h.update(str(p.relative_to(INCLUDE_DIR)).encode() + p.read_bytes())
    return h.hexdigest()


#: TCubeTiling's fields (kernel_tiling.h), the keys of a forced tiling and of the run's report.
CUBE_FIELDS = ("usedCoreNum M N Ka Kb singleCoreM singleCoreN singleCoreK baseM baseN baseK depthA1 depthB1 stepM "
               "stepN isBias transLength iterateOrder shareMode shareL1Size shareL0CSize shareUbSize batchM batchN "
               "singleBatchM singleBatchN stepKa stepKb depthAL1CacheUB depthBL1CacheUB dbL0A dbL0B dbL0C").split()

#: Bytes of the system workspace the emulator hands GetSysWorkSpacePtr() (the chip's is 16 MiB on 910B; the
#: emulated Matmul keeps its state on the host, so only the address matters).
EMU_SYS_WORKSPACE = 4096


def matmul_main_source(k: MatmulKernel, struct: str) -> str:
    """The emulator's ``main`` for a matmul kernel: GM buffers and the workspace, the host tiling (or a forced
    TCubeTiling from cube_tiling.txt), vector cores one after another (two per cube core on 910B)."""
    nin = len(k.inputs)
    args = ", ".join(f"bufs[{i}].data()" for i in range(nin + 1))
    w0 = k.gemms[0].weight
    n_dim = 0 if k.trans_b else 1
    parse = " ".join(f'if (key == "{f}") forced.{f} = v;' for f in CUBE_FIELDS)
    show = " << ".join(f'", \\"{f}\\": " << c.{f}' for f in CUBE_FIELDS)
    return f"""// asc-onnx emulator driver for {k.op_type} (matmul+epilogue).
#include <fstream>
#include <iostream>
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "{k.snake}.cpp"
#include "{k.snake}_tiling_calc.h"

{DRIVER_HELPERS}
int main(int argc, char** argv) {{
    if (argc != 5) return Report("usage", "dir coreNum dtypeSize dtypeName");
    const std::string dir = argv[1];
    auto& st = asc_emu::St();
    const uint32_t coreNum = static_cast<uint32_t>(std::stoul(argv[2]));
    const uint32_t dtypeSize = static_cast<uint32_t>(std::stoul(argv[3]));
    const std::string dtypeName = argv[4];
    std::vector<std::vector<uint8_t>> bufs({nin + 1});
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
    const int rc = {k.op_type}ComputeTiling(static_cast<uint32_t>(mm), static_cast<uint32_t>(nn),
        static_cast<uint32_t>(kk), dtypeSize, dtypeName == "float", dtypeName == "bfloat16_t", coreNum, platform,
        coupled, haveForced ? &forced : nullptr, &tiling);
    if (rc != 0) return Report("tiling", "tiling refused the shape, reason " + std::to_string(rc));
    bufs[{nin}].assign(mm * nn * dtypeSize, 0xEE);
    std::vector<uint8_t> workspace({EMU_SYS_WORKSPACE} + static_cast<size_t>(tiling.userWorkspace), 0xFF);
    AscendC::emu_ws::Sys() = workspace.data();
    AscendC::emu_ws::SysBytes() = {EMU_SYS_WORKSPACE};
    st.gm.reserve({nin + 2});
    for (int i = 0; i <= {nin}; ++i) {{
        const bool out = i == {nin};
        st.gm.push_back({{out ? "output 0" : "input " + std::to_string(i), bufs[i].data(), bufs[i].size(), out,
                         std::vector<int32_t>(out ? bufs[i].size() : 0, -1)}});
    }}
    st.gm.push_back({{"workspace", workspace.data(), workspace.size(), true,
                     std::vector<int32_t>(workspace.size(), -1)}});
    st.gm.back().cubeShared = true;
    std::vector<uint8_t> tilingBuf(sizeof(tiling));
    std::memcpy(tilingBuf.data(), &tiling, sizeof(tiling));
    const uint32_t blocks = coupled ? tiling.blockDim : 2 * tiling.blockDim;  // 910B: two vector cores per cube core
    if (const int rc = RunBlocks(blocks, [&] {{ {k.snake}({args}, workspace.data(), tilingBuf.data()); }})) return rc;
    for (size_t i = 0; i < bufs[{nin}].size(); ++i) {{
        if (st.gm[{nin}].writer[i] == -1)
            return Report("fault", "byte " + std::to_string(i) + " of output 0 was never written by any block");
    }}
    {{
        std::ofstream f(dir + "/out0.bin", std::ios::binary);
        f.write(reinterpret_cast<const char*>(bufs[{nin}].data()), bufs[{nin}].size());
    }}
    // The least GM traffic this tiling allows: each core's Matmul objects read its x rows and weight columns once.
    const auto& c = tiling.cubeTiling;
    uint64_t tilingMin = mm * nn * dtypeSize;
    for (uint32_t core = 0; core < tiling.mDim * tiling.nDim; ++core) {{
        const uint64_t m0 = (core % tiling.mDim) * c.singleCoreM, n0 = (core / tiling.mDim) * c.singleCoreN;
        const uint64_t tm = mm - m0 < static_cast<uint64_t>(c.singleCoreM) ? mm - m0 : c.singleCoreM;
        const uint64_t tn = nn - n0 < static_cast<uint64_t>(c.singleCoreN) ? nn - n0 : c.singleCoreN;
        tilingMin += {len(k.gemms)} * (tm * kk + kk * tn + {1 if k.has_bias else 0} * tn) * dtypeSize;  // per gemm
    }}
    std::cout << "{{\\"block_dim\\": " << blocks << ", \\"gm_read\\": " << st.gmReadBytes
              << ", \\"gm_write\\": " << st.gmWriteBytes << ", \\"ub_peak\\": " << st.ubPeak
              << ", \\"scalar\\": " << st.scalarInstr << ", \\"tile_length\\": " << tiling.blockElems
              << ", \\"vec_elems\\": " << VecElems() << ", \\"cube\\": {{\\"macs\\": " << st.cube.macs
              << ", \\"blocks\\": " << st.cube.blocks << ", \\"a_read\\": " << st.cube.aReadBytes
              << ", \\"b_read\\": " << st.cube.bReadBytes << ", \\"c_bytes\\": " << st.cube.cBytes
              << ", \\"l1_peak\\": " << st.cube.l1Peak << ", \\"tiling_min\\": " << tilingMin
              << ", \\"mDim\\": " << tiling.mDim << ", \\"nDim\\": " << tiling.nDim << {show}
              << "}}, \\"vec\\": {{";
    PrintVecAndClose();
    return 0;
}}
"""


#: Names every program is compiled under: kernels that differ only in their op type, comments and source
#: node names share one program (and one compile), whatever model they came from.
CANON_TYPE, CANON_SNAKE = "AscKernel", "asc_kernel"


def _canonical(k: PointwiseKernel | RowKernel | MatmulKernel, text: str) -> str:
    """A source with the op's names replaced by the canonical ones and comments blanked (lines kept, so the
    fault messages' line numbers stay those of the real files)."""
    text = text.replace(k.op_type, CANON_TYPE).replace(k.snake.upper(), CANON_SNAKE.upper())
    text = text.replace(k.snake, CANON_SNAKE)
    lines = []
    for line in text.split("\n"):
        code, sep, _ = line.partition("//")
        lines.append(code.rstrip() if sep and '"' not in code else line)
    return "\n".join(lines)


@dataclass(frozen=True)
class _Program:
    """What one emulator program is compiled from, and where the cache keeps it."""

    main: str
    sources: Mapping[str, str]  # canonical names (CANON_SNAKE) -> canonical text
    defines: tuple[str, ...]  # -DDTYPE_<NAME>=<type>
    flags: tuple[str, ...]  # every flag but the defines
    target: Path

    @property
    def prog(self) -> Path:
        return self.target / "prog"


def _program(k: PointwiseKernel | RowKernel | MatmulKernel, sources: Mapping[str, str], struct: str, dtype: int,
             soc: Soc) -> _Program:
    ctype = IO_TYPES[dtype][0]
    names = list(k.inputs) if of(k).cube else [x.name for x in k.inputs]
    defines = tuple(f"-DDTYPE_{n.upper()}={ctype}" for n in names + list(k.outputs))
    make_main = matmul_main_source if of(k).cube else main_source
    main = make_main(replace(k, op_type=CANON_TYPE, snake=CANON_SNAKE), struct.replace(k.op_type, CANON_TYPE))
    canon = {rel.replace(k.snake, CANON_SNAKE): _canonical(k, text) for rel, text in sources.items()}
    # -O1: a cold test run is dominated by these compiles (-O1 builds a kernel ~30% faster than -O2); the
    # emulated runs stay short either way.
    flags = ("-std=c++17", "-O1", "-w", f"-D__NPU_ARCH__={soc.npu_arch}")
    h = hashlib.sha256()
    for part in [main, _headers_digest(), " ".join(flags + defines)] + [canon[key] for key in sorted(canon)]:
        h.update(part.encode())
    return _Program(main, canon, defines, flags, cache_dir() / h.hexdigest()[:24])


def _compile(main: str, sources: Mapping[str, str], flags: Sequence[str], dest: Path, what: str,
             rename: Mapping[str, str]) -> None:
    """g++ on ``main`` beside ``sources`` (relative paths under op_kernel/ and op_host/) into ``dest``."""
    if shutil.which("g++") is None:
        raise AscOnnxError("the emulator needs g++ (not found on PATH)")
    work = Path(tempfile.mkdtemp(prefix="asc-emu-"))
    try:
        for rel, text in sources.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        (work / "main.cpp").write_text(main)
        cmd = ["g++", *flags, "-I", str(INCLUDE_DIR), "-I", str(work / "op_kernel"), "-I", str(work / "op_host"),
               str(work / "main.cpp"), "-o", str(work / "prog")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            err = proc.stderr[-3000:]
            for a, b in rename.items():
                err = err.replace(a, b)
            raise AscOnnxError(f"g++ failed on the generated kernel {what}:\n{err}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.parent / f"{dest.name}.{os.getpid()}"
        shutil.copy2(work / "prog", tmp)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _usable(prog: Path) -> bool:
    """A cached program, or a batch entry whose batch program is still there (a pruned or moved cache
    leaves entries pointing nowhere: those are rebuilt)."""
    if not prog.is_file():
        return False
    with open(prog, "rb") as f:
        head = f.read(2)
    if head != b"#!":
        return True
    target = prog.read_text().split("exec ", 1)[-1].rsplit(" ", 2)[0]
    return Path(shlex.split(target)[0]).is_file()


def build(k: PointwiseKernel | RowKernel | MatmulKernel, sources: Mapping[str, str], struct: str, dtype: int,
          soc: Soc) -> Path:
    """Compile (or reuse) the emulator program of one kernel, dtype and SoC; returns the binary.

    Programs are cached by a hash of the canonical sources (:func:`_canonical`)."""
    pr = _program(k, sources, struct, dtype, soc)
    if not _usable(pr.prog):
        _compile(pr.main, pr.sources, pr.flags + pr.defines, pr.prog, k.op_type,
                 {CANON_SNAKE: k.snake, CANON_TYPE: k.op_type})
    return pr.prog


#: Kernels per batch program: one g++ run instantiates the emulator's templates once for all of them, so a
#: batch costs little more than one kernel (3.35 s against 3.0 s for four pointwise kernels, measured).
BATCH = 12


def prebuild(items: Sequence[tuple[PointwiseKernel | RowKernel | MatmulKernel, Mapping[str, str], str, int, Soc]]
             ) -> int:
    """Compile the programs of many (kernel, sources, struct, dtype, SoC) items in batches, before their runs.

    Each batch is one translation unit: every item's driver and sources in a namespace of its own, under its
    own canonical names, with its DTYPE macros defined around it; the item's cache entry becomes a two-line
    script that runs the batch program with the item's index. Items already cached, matmul kernels and
    duplicates are skipped; a batch g++ refuses is left to :func:`build`, which then names the kernel.
    Returns how many programs the batches made."""
    todo: dict[Path, tuple[_Program, Soc]] = {}
    for k, sources, struct, dtype, soc in items:
        if of(k).cube:
            continue
        pr = _program(k, sources, struct, dtype, soc)
        if not _usable(pr.prog):
            todo.setdefault(pr.target, (pr, soc))
    made = 0
    by_soc: dict[int, list[_Program]] = {}
    for pr, soc in todo.values():
        by_soc.setdefault(soc.npu_arch, []).append(pr)
    for progs in by_soc.values():
        for i in range(0, len(progs), BATCH):
            group = progs[i:i + BATCH]
            if len(group) == 1:
                continue  # build() compiles a lone program as it is
            try:
                made += _compile_batch(group)
            except AscOnnxError:
                pass
    return made


def _compile_batch(group: Sequence[_Program]) -> int:
    h = hashlib.sha256()
    for pr in group:
        h.update(pr.target.name.encode())
    dest = cache_dir() / f"batch-{h.hexdigest()[:24]}" / "prog"
    sources: dict[str, str] = {}
    hoisted: dict[str, None] = {'#include "kernel_operator.h"': None}
    parts: list[str] = []
    for j, pr in enumerate(group):
        def unique(text: str, j: int = j) -> str:
            return text.replace(CANON_TYPE, f"{CANON_TYPE}{j}").replace(CANON_SNAKE.upper(),
                                                                         f"{CANON_SNAKE.upper()}{j}") \
                .replace(CANON_SNAKE, f"{CANON_SNAKE}{j}")
        for rel, text in pr.sources.items():
            sources[unique(rel)] = unique(text)
        # The driver includes the kernel, its tiling header and the tiling calc, never the host file or plugin.
        compiled = [text for rel, text in pr.sources.items() if rel.startswith("op_kernel/") or rel.endswith(".h")]
        for text in [pr.main, *compiled]:
            for line in text.split("\n"):
                if line.startswith("#include <"):
                    hoisted.setdefault(line)
        macros = [d[2:].split("=", 1) for d in pr.defines]
        parts += [*(f"#define {n} {v}" for n, v in macros), f"namespace emu_k{j} {{",
                  unique(pr.main).replace("int main(int argc, char** argv) {", "int Drive(int argc, char** argv) {"),
                  f"}}  // namespace emu_k{j}", *(f"#undef {n}" for n, _ in macros)]
    calls = "\n".join(f'    if (which == "{j}") return emu_k{j}::Drive(argc - 1, argv + 1);' for j in range(len(group)))
    main = "\n".join(["// asc-onnx emulator batch: one program for several kernels, chosen by argv[1].",
                      *hoisted, "#include <string>", *parts, "int main(int argc, char** argv) {",
                      "    if (argc < 2) return 2;", "    const std::string which = argv[1];", calls,
                      "    return 2;", "}", ""])
    if not dest.exists():
        _compile(main, sources, group[0].flags, dest, "batch", {})
    for j, pr in enumerate(group):
        pr.target.mkdir(parents=True, exist_ok=True)
        tmp = pr.target / f"prog.{os.getpid()}"
        tmp.write_text(f'#!/bin/sh\nexec {shlex.quote(str(dest))} {j} "$@"\n')
        tmp.chmod(0o755)
        os.replace(tmp, pr.prog)
    return len(group)


def run(k: PointwiseKernel | RowKernel | MatmulKernel, sources: Mapping[str, str], struct: str,
        inputs: Sequence[np.ndarray], soc: Soc, core_num: int | None = None,
        cube_tiling: Mapping[str, int] | None = None, params: Sequence[float] | None = None) -> EmuResult:
    """Run one kernel on ``inputs`` (all of the kernel's I/O dtype) and return outputs and counters.

    ``cube_tiling`` (matmul kernels): a TCubeTiling to run under instead of the host tiling's choice.
    ``params``: the op's parameters at the node being run (the tiling data's ``param``, as the host copies
    them from the node's attributes; by default the values the kernel was lowered with); they are data, not
    code, so every value runs the same program."""
    params = tuple(getattr(k, "params", ()) if params is None else params)
    n_params = getattr(k, "num_params", 0)
    if len(params) != n_params:
        raise AscOnnxError(f"{k.op_type} takes {n_params} parameters, {len(params)} given")
    dtypes = {onnx_type(a) for a in inputs}
    if len(dtypes) != 1:
        raise AscOnnxError(f"{k.op_type}: emulator inputs must share one dtype, got {dtypes}")
    dtype = dtypes.pop()
    prog = build(k, sources, struct, dtype, soc)
    size = IO_TYPES[dtype][1]
    with tempfile.TemporaryDirectory(prefix="asc-emu-run-") as d:
        for i, a in enumerate(inputs):
            Path(d, f"in{i}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
        Path(d, "params.txt").write_text(" ".join(str(int(np.array(v, np.float32).view(np.uint32)))
                                                  for v in params))
        out_shapes = _output_shapes(k, inputs)
        if of(k).cube:
            Path(d, "shapes.txt").write_text("\n".join(" ".join(str(v) for v in (len(a.shape), *a.shape))
                                                       for a in inputs))
            if cube_tiling:
                Path(d, "cube_tiling.txt").write_text("".join(f"{key} {int(v)}\n" for key, v in cube_tiling.items()))
            cmd = [str(prog), d, str(core_num or soc.vector_cores), str(size), IO_TYPES[dtype][0]]
        else:
            shapes = [a.shape for a in inputs] + [out_shapes[0]]
            Path(d, "shapes.txt").write_text(f"{getattr(k, 'row_dims', 0)}\n" + "\n".join(
                " ".join(str(v) for v in (len(sh), *sh)) for sh in shapes))
            tiling_ub = soc.ub_bytes - (8192 if k.uses_select else 0)  # the host reserves 8 KB for Select
            cmd = [str(prog), d, str(core_num or soc.vector_cores), str(size), str(tiling_ub)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        try:
            info = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            raise AscOnnxError(f"emulator run of {k.op_type} crashed (exit {proc.returncode}): "
                               f"{proc.stderr[-500:]}") from None
        if "error" in info:
            message = info["message"].replace(CANON_SNAKE, k.snake).replace(CANON_TYPE, k.op_type)
            refused = re.fullmatch(r"tiling refused the shape, reason (\d+)", message)
            if info["error"] == "tiling" and refused:
                raise TilingRefusedError(f"{k.op_type} on {soc.name}: {refusal_text(k, int(refused[1]))}")
            raise EmulatorFaultError(f"{k.op_type} on {soc.name}: {info['error']}: {message}")
        outs = tuple(_read(Path(d, f"out{o}.bin"), dtype, out_shapes[o]) for o in range(len(k.outputs)))
    return EmuResult(outs, info["block_dim"], info["gm_read"], info["gm_write"], info["vec"], info["ub_peak"],
                     info["scalar"], info["tile_length"], info["vec_elems"], info.get("cube"))


def _output_shapes(k: PointwiseKernel | RowKernel | MatmulKernel,
                   inputs: Sequence[np.ndarray]) -> list[tuple[int, ...]]:
    """Output shapes: the data's shape, or for a per-row statistic the data's with each row dim set to 1
    (matmul: x's leading dims and N)."""
    if of(k).cube:
        w = inputs[k.gemms[0].weight].shape
        n = (w[0] if k.trans_b else w[1]) // (2 if k.split else 1)
        return [tuple(inputs[0].shape[:-1]) + (n,)]
    if isinstance(k, RowKernel):
        data = tuple(np.broadcast_shapes(*(inputs[i].shape for i in k.data_inputs)))
        stat = data[:len(data) - k.row_dims] + (1,) * k.row_dims
        return [data if kd == "row" else stat for kd in k.output_kinds]
    full = next(a for a, x in zip(inputs, k.inputs) if x.kind == "full")
    return [full.shape] * len(k.outputs)


def onnx_type(a: np.ndarray) -> int:
    """ONNX element type of a numpy array (bf16 via ml_dtypes' bfloat16)."""
    if a.dtype == np.float32:
        return TensorProto.FLOAT
    if a.dtype == np.float16:
        return TensorProto.FLOAT16
    if a.dtype.name == "bfloat16":
        return TensorProto.BFLOAT16
    raise AscOnnxError(f"emulator inputs must be float32, float16 or bfloat16, not {a.dtype}")


def _read(path: Path, dtype: int, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == TensorProto.BFLOAT16:
        import ml_dtypes

        return np.frombuffer(path.read_bytes(), dtype=ml_dtypes.bfloat16).reshape(shape).copy()
    return np.frombuffer(path.read_bytes(), dtype=NP_TYPES[dtype]).reshape(shape).copy()
