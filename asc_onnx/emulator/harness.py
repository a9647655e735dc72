"""Compile a generated pointwise kernel with its tiling arithmetic against the emulator headers
(g++, cached by a hash of every source), run blocks 0..blockDim-1 on numpy inputs, and return
the outputs with the emulator's counters (GM bytes, vector instructions by kind, UB peak)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from onnx import TensorProto

from ..errors import AscOnnxError
from ..lower import IO_TYPES, PointwiseKernel, RowKernel
from ..soc import Soc
from . import INCLUDE_DIR

NP_TYPES = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16}


class EmulatorFaultError(AscOnnxError):
    """The kernel broke a hardware rule in the emulator (or its tiling refused the shape)."""


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


def cache_dir() -> Path:
    """Where compiled emulator programs are kept (``ASC_ONNX_CACHE`` or ~/.cache/asc-onnx)."""
    root = os.environ.get("ASC_ONNX_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "asc-onnx")
    return Path(root) / "emu"


def main_source(k: PointwiseKernel | RowKernel, struct: str) -> str:
    """The emulator's ``main``: GM buffers from files, host tiling, blocks one after another."""
    nin, nout = len(k.inputs), len(k.outputs)
    args = ", ".join(f"bufs[{i}].data()" for i in range(nin + nout))
    if isinstance(k, RowKernel):
        bc = list(k.broadcast_inputs)
        stat = [o for o, kd in enumerate(k.output_kinds) if kd == "stat"]
        setup = f"""std::vector<std::vector<uint64_t>> shapes({nin + 1});  // every input's, then the data's
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
    {struct} tiling{{}};
    const int rc = {k.op_type}ComputeTiling(shapes[{nin}].data(), shapes[{nin}].size(), rowDims, bcastDims,
                                             bcastRanks, dtypeSize, coreNum, tilingUb, st.soc.hasDataCopyPad, &tiling);
    if (rc != 0) return Report("tiling", "tiling refused the shape, reason " + std::to_string(rc));
    const uint64_t total = tiling.rows * tiling.rowLength;
    std::vector<uint64_t> outElems({nout}, total);
    {" ".join(f"outElems[{o}] = tiling.rows;" for o in stat)}"""
    else:
        bc = list(k.broadcast_inputs)
        full0 = next(i for i, x in enumerate(k.inputs) if x.kind == "full")
        setup = f"""const uint64_t total = bufs[{full0}].size() / dtypeSize;
    uint64_t periods[{max(1, len(bc))}] = {{0}};
    {" ".join(f"periods[{j}] = bufs[{i}].size() / dtypeSize;" for j, i in enumerate(bc))}
    {struct} tiling{{}};
    const int rc = {k.op_type}ComputeTiling(total, periods, dtypeSize, coreNum, tilingUb,
                                             st.soc.hasDataCopyPad, &tiling);
    if (rc != 0) return Report("tiling", "tiling refused the shape, reason " + std::to_string(rc));
    std::vector<uint64_t> outElems({nout}, total);"""
    # Row kernels: rows per tile, 0 in split mode (a row walked in chunks).
    tile = "(tiling.chunkLength != 0 ? 0 : tiling.tileRows)" if isinstance(k, RowKernel) else "tiling.tileLength"
    return f"""// asc-onnx emulator driver for {k.op_type}.
#include <fstream>
#include <iostream>
#include "kernel_operator.h"
#include "{k.snake}.cpp"
#include "{k.snake}_tiling_calc.h"

static std::vector<uint8_t> ReadFile(const std::string& path) {{
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}}

static uint64_t VecElems() {{
    uint64_t n = 0;
    for (auto& kv : asc_emu::St().vecElems) n += kv.second;
    return n;
}}

static int Report(const std::string& kind, const std::string& msg) {{
    std::string m;
    for (char c : msg) m += (c == '"' || c == '\\\\') ? '?' : c;
    std::cout << "{{\\"error\\": \\"" << kind << "\\", \\"message\\": \\"" << m << "\\"}}" << std::endl;
    return 2;
}}

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
    st.blockNum = tiling.blockDim;
    for (uint32_t b = 0; b < tiling.blockDim; ++b) {{
        st.blockIdx = b;
        try {{
            {k.snake}({args}, workspace.data(), tilingBuf.data());
            asc_emu::EndBlock();
        }} catch (const asc_emu::Fault& e) {{
            return Report("fault", "block " + std::to_string(b) + ": " + e.what());
        }}
    }}
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
    bool first = true;
    for (auto& kv : st.vecInstr) {{
        std::cout << (first ? "" : ", ") << "\\"" << kv.first << "\\": " << kv.second;
        first = false;
    }}
    std::cout << "}}}}" << std::endl;
    return 0;
}}
"""


def _headers_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(INCLUDE_DIR.glob("*.h")):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


#: Names every program is compiled under: kernels that differ only in their op type, comments and source
#: node names share one program (and one compile), whatever model they came from.
CANON_TYPE, CANON_SNAKE = "AscKernel", "asc_kernel"


def _canonical(k: PointwiseKernel | RowKernel, text: str) -> str:
    """A source with the op's names replaced by the canonical ones and comments blanked (lines kept, so the
    fault messages' line numbers stay those of the real files)."""
    text = text.replace(k.op_type, CANON_TYPE).replace(k.snake.upper(), CANON_SNAKE.upper())
    text = text.replace(k.snake, CANON_SNAKE)
    lines = []
    for line in text.split("\n"):
        code, sep, _ = line.partition("//")
        lines.append(code.rstrip() if sep and '"' not in code else line)
    return "\n".join(lines)


def build(k: PointwiseKernel | RowKernel, sources: Mapping[str, str], struct: str, dtype: int, soc: Soc) -> Path:
    """Compile (or reuse) the emulator program of one kernel, dtype and SoC; returns the binary.

    Programs are cached by a hash of the canonical sources (:func:`_canonical`)."""
    ctype = IO_TYPES[dtype][0]
    defines = [f"-DDTYPE_{n.upper()}={ctype}" for n in [x.name for x in k.inputs] + list(k.outputs)]
    main = main_source(replace(k, op_type=CANON_TYPE, snake=CANON_SNAKE), struct.replace(k.op_type, CANON_TYPE))
    canon = {rel.replace(k.snake, CANON_SNAKE): _canonical(k, text) for rel, text in sources.items()}
    flags = ["-std=c++17", "-O2", "-w", f"-D__NPU_ARCH__={soc.npu_arch}"] + defines
    h = hashlib.sha256()
    for part in [main, _headers_digest(), " ".join(flags)] + [canon[key] for key in sorted(canon)]:
        h.update(part.encode())
    target = cache_dir() / h.hexdigest()[:24]
    prog = target / "prog"
    if prog.exists():
        return prog
    if shutil.which("g++") is None:
        raise AscOnnxError("the emulator needs g++ (not found on PATH)")
    work = Path(tempfile.mkdtemp(prefix="asc-emu-"))
    try:
        for rel, text in canon.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        (work / "main.cpp").write_text(main)
        cmd = ["g++", *flags, "-I", str(INCLUDE_DIR), "-I", str(work / "op_kernel"), "-I", str(work / "op_host"),
               str(work / "main.cpp"), "-o", str(work / "prog")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            err = proc.stderr[-3000:].replace(CANON_SNAKE, k.snake).replace(CANON_TYPE, k.op_type)
            raise AscOnnxError(f"g++ failed on the generated kernel {k.op_type}:\n{err}")
        target.mkdir(parents=True, exist_ok=True)
        tmp = target / f"prog.{os.getpid()}"
        shutil.copy2(work / "prog", tmp)
        os.replace(tmp, prog)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return prog


def run(k: PointwiseKernel | RowKernel, sources: Mapping[str, str], struct: str, inputs: Sequence[np.ndarray], soc: Soc,
        core_num: int | None = None) -> EmuResult:
    """Run one kernel on ``inputs`` (all of the kernel's I/O dtype) and return outputs and counters."""
    dtypes = {onnx_type(a) for a in inputs}
    if len(dtypes) != 1:
        raise AscOnnxError(f"{k.op_type}: emulator inputs must share one dtype, got {dtypes}")
    dtype = dtypes.pop()
    prog = build(k, sources, struct, dtype, soc)
    size = IO_TYPES[dtype][1]
    with tempfile.TemporaryDirectory(prefix="asc-emu-run-") as d:
        for i, a in enumerate(inputs):
            Path(d, f"in{i}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
        out_shapes = _output_shapes(k, inputs)
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
            raise EmulatorFaultError(f"{k.op_type} on {soc.name}: {info['error']}: {message}")
        outs = tuple(_read(Path(d, f"out{o}.bin"), dtype, out_shapes[o]) for o in range(len(k.outputs)))
    return EmuResult(outs, info["block_dim"], info["gm_read"], info["gm_write"], info["vec"], info["ub_peak"],
                     info["scalar"], info["tile_length"], info["vec_elems"])


def _output_shapes(k: PointwiseKernel | RowKernel, inputs: Sequence[np.ndarray]) -> list[tuple[int, ...]]:
    """Output shapes: the data's shape, or for a per-row statistic the data's with each row dim set to 1."""
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
