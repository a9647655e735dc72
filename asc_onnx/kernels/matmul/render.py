"""Ascend C for the matmul+epilogue kernel class: kernel, tiling struct, tiling arithmetic and host OpDef.

Schedule (``<op>ComputeTiling``, compiled by both the CANN host file and the emulator):
* ``MultiCoreMatmulTiling`` splits C = x @ W over the vector cores (910B: AIVs, two per cube core; 310P:
  AI Cores) and fills the ``TCubeTiling``; each vector core owns one ``singleCoreM x singleCoreN`` region and
  walks it in baseM x baseN blocks, each one ``IterateAll`` per gemm with ``SetTail(rows, cols)`` into a C slot
  of the user workspace (910B has no L0C -> UB path: the Matmul API itself stages C in GM for a VECIN C). One
  Matmul object, registered in the kernel entry's scope (its KFC client stops the cube's service when that
  scope ends); the cube core ends the object after each ``IterateAll``, so the gate and up blocks of one
  (m, n) take turns and meet in one stage.
* 910B, the pipelined ring (``ring_stages`` > 0): each core's slots form a ring of stages; the vector core keeps
  ``stages - 1`` blocks queued on the cube (``IterateAll<false>``, waited with ``WaitIterateAll`` as it reaches
  them: the KFC server takes messages in order) and runs the epilogue of one block, in row chunks of
  ``chunkRows``, while the cube computes the next. The epilogue's UB does not cap the tiling's L0C: the base
  blocks are those CANN picks for the bare MatMul. A stage is handed back to the cube only after the vector
  core's reads of it are done (``MTE2_S``): the cube's write is invisible to the compiler's auto-sync.
* 310P's blocks are synchronous (its ``MatmulImpl`` runs on the AI Core and returns with C written): one block at
  a time, the epilogue in row chunks as on 910B, so the block is bounded by the Matmul's own UB staging only.
* The synchronous block loop (``ring_stages`` 0, both SoCs): one block at a time, the whole block in UB, so the
  L0C the tiling may use is capped (``SetBufferSpace``) until the block, its epilogue registers and the output
  tile fit the unified buffer.
* 310P: ``SetLocalWorkspace`` scratch for the Matmul; no DataCopyPad, so N must be a multiple of 16 (refused by
  the tiling otherwise).
"""

from __future__ import annotations

from ..ir import IO_TYPES
from ..skeleton import (
    CUBE_PLATFORM_LINES,
    GE_TYPES,
    HELPERS_INCLUDE,
    banner,
    cap,
    cube_host_head,
    cube_host_tail,
    helpers_header,
    infer_dtype_and_opdef,
    kernel_entry,
    role,
    struct_name,
    tiling_struct,
)
from ..text import Lines, f32
from ..vector import step_call
from .lower import MatmulKernel

#: What each non-zero return of ``<op>ComputeTiling`` means (the report's words for a refused shape).
REFUSALS = {
    1: "bad sizes",
    2: "no tiling fits",
    3: "N not a multiple of 16 on 310P (no DataCopyPad: y's rows must be whole 32-byte blocks)",
    4: "float inputs on 310P (its cube takes half)",
}


def _roles(k: MatmulKernel) -> list[str]:
    return [role(n) for n in k.inputs]


def _ub_bytes_per_elem(k: MatmulKernel, dtype_size: str) -> str:
    """UB bytes per element of a C block: double-buffered C blocks and y tiles in the I/O type, the epilogue's
    fp32 registers (the C blocks widened too, unless the I/O type is fp32)."""
    nc = len(k.gemms)
    extra = max(0, k.num_regs - nc)
    bn = k.schedule.epilogue_buffers
    return f"({bn * (nc + 1)}u * {dtype_size} + {extra * 4}u + ({dtype_size} == 4u ? 0u : {nc * 4}u))"


def tiling_header(k: MatmulKernel) -> str:
    """op_kernel/<op>_tiling.h: the Matmul's TCubeTiling and the epilogue's numbers."""
    return tiling_struct(k.op_type, k.snake, struct_name(k), [
        "AscendC::tiling::TCubeTiling cubeTiling;  // the Matmul objects' tiling (one for every gemm)",
        "uint32_t m;              // rows of x (its leading dims flattened)",
        "uint32_t n;              // columns of y",
        "uint32_t k;              // columns of x",
        "uint32_t mDim;           // vector cores along M",
        "uint32_t nDim;           // vector cores along N",
        "uint32_t upOffset;       // gate-up weight: elements from the gate's first column (row) to the up's",
        "uint32_t biasUpOffset;   // gate-up bias: elements from the gate's bias to the up's",
        "uint32_t blockElems;     // baseM * baseN: elements of one C block (a stage of the ring, per gemm)",
        "uint32_t chunkRows;      // rows of a C block the epilogue takes into UB at a time",
        "uint32_t tileElems;      // chunkRows * baseN: elements of one epilogue tile",
        "uint32_t localWorkspace; // 310P: UB bytes each Matmul stages C through (SetLocalWorkspace)",
        "uint32_t ringElems;      // elements of one vector core's C stages (stages x gemms x blockElems)",
        "uint32_t userWorkspace;  // bytes of user workspace: the C stages of every vector core",
        "uint32_t blockDim;       // launch: cube cores (910B, two vector cores each) or AI Cores (310P)",
        *([f"float param[{k.num_params}];        // the epilogue's scalars, from the p0.. attributes (fp32 bits)"]
          if k.num_params else []),
    ], includes=("kernel_tiling/kernel_tiling.h",))


def tiling_calc(k: MatmulKernel) -> str:
    """op_host/<op>_tiling_calc.h: fills the tiling from shapes and platform numbers with
    MultiCoreMatmulTiling; ``forced`` replaces its choice (tests run the kernel under other valid tilings)."""
    fn = f"{k.op_type}ComputeTiling"
    nc = len(k.gemms)
    nb = sum(g.bias is not None for g in k.gemms)
    trans = "true" if k.trans_b else "false"
    out = Lines()
    out(f"// Generated by asc-onnx: tiling arithmetic of {k.op_type}.",
        "// A plain function of shapes and platform numbers: the CANN host tiling and the asc-onnx emulator",
        "// compile this same code (the emulator with its own MultiCoreMatmulTiling).",
        "#pragma once",
        "#include <cstdint>",
        '#include "tiling/tiling_api.h"',
        f'#include "../op_kernel/{k.snake}_tiling.h"',
        "",
        "// UB bytes the kernel needs beside the Matmul's own (310P: shareUbSize, reserved at registration, and the",
        "// SetLocalWorkspace scratch, MatmulGetTmpBufSize's max(shareUbSize, 2 x transLength)).",
        f"inline uint64_t {k.op_type}UbBytes(const AscendC::tiling::TCubeTiling& c, uint32_t rows, uint32_t dtypeSize,",
        "        bool coupled)",
        "{")
    with out.indent():
        out("auto pad = [](uint64_t b) { return (b + 31u) / 32u * 32u; };",
            "const uint64_t elems = static_cast<uint64_t>(rows) * c.baseN;",
            f"uint64_t bytes = elems * {_ub_bytes_per_elem(k, 'dtypeSize')};",
            "if (coupled) {")
        with out.indent():
            if nb:
                out("// bias rows beside the C blocks, and their fp32 copy: the vector unit adds them",
                    f"bytes += {k.schedule.epilogue_buffers * nb}u * static_cast<uint64_t>(c.baseN) * dtypeSize + "
                    "static_cast<uint64_t>(c.baseN) * 4u;")
            out("const uint64_t share = c.shareUbSize > 0 ? static_cast<uint64_t>(c.shareUbSize) : 0u;",
                "const uint64_t trans = c.transLength > 0 ? 2u * static_cast<uint64_t>(c.transLength) : 0u;",
                "bytes += pad(share) + pad(share > trans ? share : trans);")
        out("}", "return bytes;")
    out("}", "",
        "// The next L0C cap to try: 2^k and 1.5 x 2^k bytes (CANN's algorithm finds no L0 factors for some others).",
        "inline uint64_t Narrower(uint64_t l0c)",
        "{",
        "    uint64_t p = 1024u;",
        "    while (p * 2u < l0c) p *= 2u;",
        "    return p * 3u / 2u < l0c ? p * 3u / 2u : p;",
        "}",
        "",
        "// Returns 0, or why the shape is refused:",
        *(f"// {code} {why}," if code < max(REFUSALS) else f"// {code} {why}." for code, why in REFUSALS.items()),
        f"inline int {fn}(uint32_t m, uint32_t n, uint32_t k, uint32_t dtypeSize, bool isFloat, bool isBf16,",
        "        uint32_t coreNum, const matmul_tiling::PlatformInfo& platform, bool coupled,",
        f"        const AscendC::tiling::TCubeTiling* forced, {struct_name(k)}* tiling)",
        "{")
    with out.indent():
        out("if (m == 0 || n == 0 || k == 0 || coreNum == 0) return 1;",
            "if (coupled && n % 16 != 0) return 3;  // no DataCopyPad: 32-byte rows of y",
            "if (coupled && (isFloat || isBf16)) return 4;",
            "// " + (f"910B: the pipelined ring of {k.schedule.ring_stages} stages; 310P: the synchronous loop; both "
                    "with the epilogue in row chunks" if k.schedule.ring else "The synchronous block loop, the "
                    "epilogue on whole blocks") + ".",
            f"const bool chunked = {'true' if k.schedule.ring else 'false'};",
            "const bool ring = chunked && !coupled;",
            f"const uint32_t stages = ring ? {max(1, k.schedule.ring_stages)}u : 1u;",
            "using matmul_tiling::DataType;",
            "const auto dt = isFloat ? DataType::DT_FLOAT : (isBf16 ? DataType::DT_BF16 : DataType::DT_FLOAT16);",
            "// An epilogue on whole blocks holds a C block and its buffers in UB: cap the L0C the tiling may use",
            "// (L0C holds the block in fp32), and narrow the cap until the chosen block fits. In row chunks it needs",
            "// one row of a block in UB: the L0C is the bare MatMul's (on 310P within the Matmul's own UB staging).",
            f"const uint64_t perElem = {_ub_bytes_per_elem(k, 'dtypeSize')};  // kernel UB per C element",
            "// whole 16 x 16 fp32 fractals; 310P: + the Matmul's C staging",
            "uint64_t l0c = chunked ? platform.l0CSize",
            "                    : platform.ubSize / (perElem + (coupled ? 6u : 0u)) * 4u / 1024u * 1024u;",
            "if (l0c > platform.l0CSize) l0c = platform.l0CSize;",
            "int32_t fixN = -1;  // a baseN of our own once CANN's choice does not fit",
            "for (;;) {")
        with out.indent():
            out("if (l0c < 1024u) return 2;",
                "// 310P: UB left beside the kernel's buffers and the Matmul's C staging (shareUbSize) holds two",
                "// transLength buffers: CANN's tiling is asked to keep its ND -> NZ A and B tiles within half of it.",
                "const uint64_t blockMax = l0c / 4u;",
                "// (in row chunks: a quarter of UB for the epilogue's tiles)",
                f"const uint64_t kernelMax = chunked ? platform.ubSize / 4u : blockMax * (perElem + 2u) + "
                f"{(2 * nb + 4) * 512 if nb else 0}u + 1024u;",
                "const int64_t ubForMatmul = coupled ? (static_cast<int64_t>(platform.ubSize) -",
                "                                       static_cast<int64_t>(kernelMax)) / 2 : -1;",
                "if (coupled && ubForMatmul < 4096) {",
                "    l0c = Narrower(l0c);",
                "    continue;",
                "}",
                "matmul_tiling::MultiCoreMatmulTiling mm(platform);",
                "mm.SetDim(static_cast<int32_t>(coreNum));",
                "mm.SetAType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, dt);",
                f"mm.SetBType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, dt, {trans});",
                "mm.SetCType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, dt);  // the kernel's C type",
                "mm.SetBiasType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, dt);",
                f"const uint32_t orgN = {'2u * n' if k.split and not k.trans_b else 'n'};  // B's row length",
                "mm.SetOrgShape(static_cast<int32_t>(m), static_cast<int32_t>(orgN), static_cast<int32_t>(k));",
                "mm.SetShape(static_cast<int32_t>(m), static_cast<int32_t>(n), static_cast<int32_t>(k));",
                "// 310P's cube takes a bias only as float (BroadCastVecToMM): there the vector unit adds it.",
                f"mm.EnableBias({'!coupled' if k.has_bias else 'false'});",
                "mm.SetMatmulConfigParams(coupled ? 0 : 1);  // as the kernel's Matmul: NORM on 310P, MDL on 910B",
                "mm.SetBufferSpace(static_cast<int32_t>(platform.l1Size), static_cast<int32_t>(l0c),",
                "                  static_cast<int32_t>(ubForMatmul));",
                "if (fixN > 0) mm.SetFixSplit(-1, fixN, -1);",
                "bool got = true;",
                "if (forced != nullptr) {",
                "    tiling->cubeTiling = *forced;",
                "} else {",
                "    got = mm.GetTiling(tiling->cubeTiling) != -1;",
                "}",
                "auto& c = tiling->cubeTiling;",
                "got = got && c.singleCoreM > 0 && c.singleCoreN > 0 && c.baseM > 0 && c.baseN > 0;",
                "if (got) {")
            with out.indent():
                out("// Each core's columns in whole 16-column fractals (CANN may split N unevenly, 2000 over 8 cores",
                    "// as 250): y rows then go out in whole 32-byte blocks. baseN is a multiple of 16, so the blocks",
                    "// a core walks are unchanged.",
                    "c.singleCoreN = (c.singleCoreN + 15) / 16 * 16;",
                    f"if ({k.op_type}UbBytes(c, chunked ? 1u : c.baseM, dtypeSize, coupled) <= platform.ubSize) "
                    "break;")
            out("}",
                "if (forced != nullptr) return 2;",
                "// Narrower blocks: baseN in 16s first (on 310P a baseN x stepN that is no multiple of 256 also drops",
                "// the bank-conflict pad of B's UB scratch, 32 x K bytes with all of K resident), then the L0C cap.",
                "const int32_t from = fixN > 0 ? fixN : (got ? c.baseN : 0);",
                "if (from > 16) {",
                "    fixN = from - 16;",
                "    continue;",
                "}",
                "fixN = -1;",
                "l0c = Narrower(l0c);")
        out("}")
        out("const auto& c = tiling->cubeTiling;",
            "tiling->m = m;",
            "tiling->n = n;",
            "tiling->k = k;",
            "tiling->mDim = (m + c.singleCoreM - 1) / c.singleCoreM;",
            "tiling->nDim = (n + c.singleCoreN - 1) / c.singleCoreN;",
            "const uint32_t cores = tiling->mDim * tiling->nDim;",
            "if (cores > coreNum) return 2;",
            f"tiling->upOffset = {'(' + ('n * k' if k.trans_b else 'n') + ')' if k.split else '0'};",
            f"tiling->biasUpOffset = {'n' if k.split else '0'};",
            "tiling->blockElems = static_cast<uint32_t>(c.baseM * c.baseN);",
            "// The epilogue's tile: as many rows of a block as UB holds beside what every tile needs.",
            f"const uint64_t fixed = {k.op_type}UbBytes(c, 0u, dtypeSize, coupled);",
            f"const uint64_t perRow = {k.op_type}UbBytes(c, 1u, dtypeSize, coupled) - fixed;",
            "const uint64_t fit = (platform.ubSize - fixed) / perRow;",
            "tiling->chunkRows = chunked && fit < static_cast<uint64_t>(c.baseM) ? static_cast<uint32_t>(fit)",
            "                                                                      : static_cast<uint32_t>(c.baseM);",
            "tiling->tileElems = tiling->chunkRows * static_cast<uint32_t>(c.baseN);",
            "// 310P: the UB scratch the Matmul stages ND tiles and C through (SetLocalWorkspace).",
            "const uint32_t trans2 = 2u * static_cast<uint32_t>(c.transLength);",
            "const uint32_t share = static_cast<uint32_t>(c.shareUbSize);",
            "tiling->localWorkspace = coupled ? (share > trans2 ? share : trans2) : 0u;",
            f"tiling->ringElems = stages * {nc}u * tiling->blockElems;",
            "tiling->userWorkspace = cores * tiling->ringElems * dtypeSize;",
            "tiling->blockDim = coupled ? cores : (cores + 1u) / 2u;  // 910B: a cube core serves two vector cores",
            "return 0;")
    out("}")
    return out.text()


def kernel_source(k: MatmulKernel, rule: str, body_ops: list[str], sources: list[str]) -> str:
    """op_kernel/<op>.cpp."""
    ins = _roles(k)
    x = ins[0]
    y = role(k.outputs[0])
    nc = len(k.gemms)
    nb = sum(g.bias is not None for g in k.gemms)
    cls = f"Kernel{k.op_type}"
    trans = "true" if k.trans_b else "false"
    out = Lines()
    out(*banner(k, rule, body_ops, sources, "matmul+epilogue"),
        "// The cube computes each C block in fp32 (bias included, but on 310P, whose cube takes only a float",
        "// bias); the vector core applies the epilogue to the block in UB and writes y once.",
        '#include "kernel_operator.h"',
        '#include "lib/matmul_intf.h"',
        HELPERS_INCLUDE,
        f'#include "{k.snake}_tiling.h"',
        "",
        "namespace {",
        f"constexpr int32_t BUFFER_NUM = {k.schedule.epilogue_buffers};",
        f"constexpr uint32_t STAGES = {max(1, k.schedule.ring_stages)};  // C stages per core (910B ring)",
        f"constexpr uint32_t NUM_C = {nc};  // C blocks per round: one per gemm",
        f"constexpr uint32_t NUM_REGS = {max(0, k.num_regs - nc)};  // epilogue registers beside the C blocks",
        "#if __NPU_ARCH__ == 2002",
        f"constexpr uint32_t NUM_BIAS = {nb};  // bias rows the vector unit adds (310P)",
        "#else",
        "constexpr uint32_t NUM_BIAS = 0;",
        "#endif",
        "// The C blocks arrive in the I/O type (the cube's fixpipe rounds the fp32 sums once): widened into",
        "// registers of their own unless that type is fp32.",
        "template <typename T>",
        "constexpr uint32_t C_REGS = std::is_same_v<T, float> ? 0 : NUM_C;")
    out("",
        "__aicore__ inline uint32_t CeilDiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }",
        "", "template <typename T>", f"class {cls} {{")
    with out.indent():
        out("using AType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;",
            f"using BType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T, {trans}>;",
            "using CType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;",
            "using BiasType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;")
    out("", "public:")
    with out.indent():
        out(f"__aicore__ inline {cls}() {{}}")
        args = ", ".join(f"GM_ADDR {n}" for n in ins + [y])
        out(f"__aicore__ inline void Init({args}, GM_ADDR workspace, const {struct_name(k)}& tiling)", "{")
        with out.indent():
            out("td = tiling;", f"{x}Gm.SetGlobalBuffer((__gm__ T*){x}, static_cast<uint64_t>(td.m) * td.k);")
            for name in ins[1:]:
                out(f"{name}Gm.SetGlobalBuffer((__gm__ T*){name});")
            out(f"{y}Gm.SetGlobalBuffer((__gm__ T*){y}, static_cast<uint64_t>(td.m) * td.n);",
                "// This core's C stages in the user workspace: per stage, one block per gemm.",
                "__gm__ T* slots = reinterpret_cast<__gm__ T*>(AscendC::GetUserWorkspace(workspace));",
                "ringGm.SetGlobalBuffer(slots + static_cast<uint64_t>(AscendC::GetBlockIdx()) * td.ringElems,",
                "                       td.ringElems);")
        out("}", "")
        out("// After REGIST_MATMUL_OBJ (the kernel entry): the pipe's buffers.",
            "__aicore__ inline void InitBuffers()", "{")
        with out.indent():
            out("const uint32_t baseN = static_cast<uint32_t>(td.cubeTiling.baseN);",
                "pipe.InitBuffer(inQueueC, BUFFER_NUM, (NUM_C * td.tileElems + NUM_BIAS * baseN) * sizeof(T));",
                f"pipe.InitBuffer(outQueue{cap(y)}, BUFFER_NUM, td.tileElems * sizeof(T));",
                "if constexpr (NUM_REGS + C_REGS<T> + NUM_BIAS > 0) {",
                "    pipe.InitBuffer(regBuf, ((NUM_REGS + C_REGS<T>) * td.tileElems + (NUM_BIAS > 0 ? baseN : 0u)) *",
                "                                sizeof(float));",
                "}",
                "#if __NPU_ARCH__ == 2002",
                "// 310P: the Matmul stages ND inputs and the C block through UB scratch the kernel hands over.",
                "pipe.InitBuffer(localWs, td.localWorkspace);",
                "mm.SetLocalWorkspace(localWs.Get<uint8_t>());",
                "#endif")
        out("}", "")
        ring = k.schedule.ring
        out("__aicore__ inline void Process()", "{")
        with out.indent():
            out("const uint32_t core = static_cast<uint32_t>(AscendC::GetBlockIdx());",
                "if (core < td.mDim * td.nDim) {")
            with out.indent():
                out("const auto& c = td.cubeTiling;",
                    "mOffset = (core % td.mDim) * static_cast<uint32_t>(c.singleCoreM);",
                    "nOffset = (core / td.mDim) * static_cast<uint32_t>(c.singleCoreN);",
                    "regionM = td.m - mOffset < static_cast<uint32_t>(c.singleCoreM) ? td.m - mOffset : c.singleCoreM;",
                    "regionN = td.n - nOffset < static_cast<uint32_t>(c.singleCoreN) ? td.n - nOffset : c.singleCoreN;",
                    "nBlocks = CeilDiv(regionN, c.baseN);",
                    "const uint32_t blocks = CeilDiv(regionM, c.baseM) * nBlocks;")
                if ring:
                    out("#if __NPU_ARCH__ == 2002")
                out("for (uint32_t i = 0; i < blocks; ++i) {")
                with out.indent():
                    out("if (i > 0) Release();", "Queue(i, 0);", "Epilogue(i, 0);")
                out("}")
                if ring:
                    out("#else",
                        "// The cube runs STAGES - 1 blocks ahead: it computes them while the vector core finishes",
                        "// the oldest, so the epilogue hides behind the cube.",
                        "for (uint32_t i = 0; i + 1 < STAGES && i < blocks; ++i) {",
                        "    Queue(i, i);",
                        "}",
                        "for (uint32_t i = 0; i < blocks; ++i) {")
                    with out.indent():
                        out("if (i + STAGES - 1 < blocks) {",
                            "    // Its stage held block i - 1: the cube may overwrite it once those reads are done.",
                            "    Release();",
                            "    Queue(i + STAGES - 1, (i + STAGES - 1) % STAGES);",
                            "}",
                            "for (uint32_t g = 0; g < NUM_C; ++g) {",
                            "    mm.WaitIterateAll();  // block i of each gemm, in the order they were queued",
                            "}",
                            "Epilogue(i, i % STAGES);")
                    out("}", "#endif")
            out("}", "mm.End();")
        out("}", "")
        out("// Public for the kernel entry, which registers the Matmul in its own scope: the KFC client",
            "// REGIST_MATMUL_OBJ declares lives until that scope ends.",
            "AscendC::TPipe pipe;",
            "#if __NPU_ARCH__ == 2002",
            "AscendC::Matmul<AType, BType, CType, BiasType> mm;",
            "#else",
            "// MDL: A and B reach L1 stepKa (stepKb) base tiles at a copy, in rows long enough for the ND -> NZ DMA",
            "AscendC::Matmul<AType, BType, CType, BiasType, CFG_MDL> mm;",
            "#endif",
            f"{struct_name(k)} td;", "")
    out("private:")
    with out.indent():
        out("struct Block {",
            "    uint64_t row;",
            "    uint64_t col;",
            "    uint32_t rows;",
            "    uint32_t cols;",
            "};", "",
            "// Block i of this core's region, N inner.",
            "__aicore__ inline Block BlockAt(uint32_t i) const", "{")
        with out.indent():
            out("const auto& c = td.cubeTiling;",
                "const uint32_t m0 = i / nBlocks * static_cast<uint32_t>(c.baseM);",
                "const uint32_t n0 = i % nBlocks * static_cast<uint32_t>(c.baseN);",
                "return {mOffset + m0, nOffset + n0, regionM - m0 < static_cast<uint32_t>(c.baseM) ? regionM - m0 : "
                "c.baseM,",
                "        regionN - n0 < static_cast<uint32_t>(c.baseN) ? regionN - n0 : c.baseN};")
        out("}", "")
        out("// Block i of every gemm onto the cube, into a stage: one IterateAll each (the cube core ends the",
            "// Matmul after each, End.md: two gemms may not interleave their iterations), so gate and up take turns.",
            "__aicore__ inline void Queue(uint32_t i, uint32_t stage)", "{")
        with out.indent():
            out("const Block b = BlockAt(i);")
            for gi, g in enumerate(k.gemms):
                w = ins[g.weight]
                up = " + td.upOffset" if g.col_offset_halves else ""
                woff = "b.col * td.k" if k.trans_b else "b.col"
                out(f"mm.SetTensorA({x}Gm[b.row * td.k]);", f"mm.SetTensorB({w}Gm[{woff}{up}], {trans});")
                if g.bias is not None:
                    bup = " + td.biasUpOffset" if g.col_offset_halves else ""
                    out("#if __NPU_ARCH__ != 2002", f"mm.SetBias({ins[g.bias]}Gm[b.col{bup}]);", "#endif")
                out("mm.SetTail(static_cast<int>(b.rows), static_cast<int>(b.cols));")
                slot = f"ringGm[(stage * NUM_C + {gi}u) * td.blockElems]"
                if ring:
                    out("#if __NPU_ARCH__ == 2002", f"CubeBlock({slot});", "#else",
                        f"mm.template IterateAll<false>({slot}, 0, true, true);  // the cube signals when done",
                        "#endif")
                else:
                    out(f"CubeBlock({slot});")
        out("}", "")
        out("// The stages' reads by this core's MTE2 are done: the cube's next write to them is invisible to the",
            "// compiler's auto-sync.",
            "__aicore__ inline void Release()", "{")
        with out.indent():
            out("AscendC::TEventID readDone = GetTPipePtr()->FetchEventID(AscendC::HardEvent::MTE2_S);",
                "AscendC::SetFlag<AscendC::HardEvent::MTE2_S>(readDone);",
                "AscendC::WaitFlag<AscendC::HardEvent::MTE2_S>(readDone);")
        out("}", "")
        out("// The epilogue of block i from its stage, chunkRows rows at a time; y written once.",
            "__aicore__ inline void Epilogue(uint32_t i, uint32_t stage)", "{")
        with out.indent():
            out("const Block b = BlockAt(i);",
                "for (uint32_t r0 = 0; r0 < b.rows; r0 += td.chunkRows) {")
            with out.indent():
                out("const uint32_t rows = b.rows - r0 < td.chunkRows ? b.rows - r0 : td.chunkRows;",
                    "CopyIn(stage, r0 * b.cols, rows, b.cols, b.col);",
                    "Compute(rows, b.cols);",
                    "CopyOut((b.row + r0) * td.n + b.col, rows, b.cols);")
            out("}")
        out("}", "")
        _cube_block(out, ring)
        _copy_in(out, k, ins)
        _compute(out, k, y)
        _copy_out(out, y)
        out("AscendC::TQue<AscendC::QuePosition::VECIN, 1> inQueueC;",
            f"AscendC::TQue<AscendC::QuePosition::VECOUT, 1> outQueue{cap(y)};")
        out("AscendC::TBuf<AscendC::TPosition::VECCALC> regBuf;  // fp32 epilogue registers, one block each")
        out("#if __NPU_ARCH__ == 2002", "AscendC::TBuf<AscendC::TPosition::VECCALC> localWs;", "#endif")
        for n in ins + [y]:
            out(f"AscendC::GlobalTensor<T> {n}Gm;")
        out("AscendC::GlobalTensor<T> ringGm;  // this core's C stages",
            "uint32_t mOffset = 0;  // this core's region of y: first row and column, size, blocks along N",
            "uint32_t nOffset = 0;",
            "uint32_t regionM = 0;",
            "uint32_t regionN = 0;",
            "uint32_t nBlocks = 1;")

    out("};", "}  // namespace", "")
    kernel_entry(out, k.snake, ins + [y], struct_name(k), cls, y, matmul=True)
    return out.text()


def _cube_block(out: Lines, ring: bool) -> None:
    """The synchronous block: 310P always, 910B without the ring (whose blocks are queued in ``Queue``)."""
    if ring:
        out("#if __NPU_ARCH__ == 2002")
    out("// One C block (the region SetTail left) into a slot, [rows, cols] row-major.",
        "__aicore__ inline void CubeBlock(const AscendC::GlobalTensor<T>& slot)", "{")
    with out.indent():
        if not ring:
            out("#if __NPU_ARCH__ == 2002")
        out("// 310P's IterateAll writes each block at its place in a C of N columns whatever enSequentialWrite",
            "// says (matmul_impl.h v200): take the block with Iterate and write it densely.",
            "while (mm.Iterate()) {",
            "    mm.GetTensorC(slot, 0, true);",
            "}")
        if not ring:
            out("#else", "mm.IterateAll(slot, 0, true);", "#endif")
    out("}", *(["#endif"] if ring else []), "")


def _copy_in(out: Lines, k: MatmulKernel, ins: list[str]) -> None:
    nc = len(k.gemms)
    out("// rows of the C blocks in a stage, from element `offset` of each, into UB with rows of",
        "// CeilDiv(cols, 16) * 16 elements: 32-byte rows in the I/O type and in fp32.",
        "__aicore__ inline void CopyIn(uint32_t stage, uint32_t offset, uint32_t rows, uint32_t cols, uint64_t col)",
        "{")
    with out.indent():
        out("AscendC::LocalTensor<T> cLocal = inQueueC.AllocTensor<T>();",
            "#if __NPU_ARCH__ == 2002",
            "// 310P: this core's MTE3 wrote the blocks (GetTensorC): MTE2 reads them after it. cols is a multiple",
            "// of 16 (the tiling refuses other N and rounds each core's N to 16), so the rows are 32-byte aligned.",
            "AscendC::TEventID written = GetTPipePtr()->FetchEventID(AscendC::HardEvent::MTE3_MTE2);",
            "AscendC::SetFlag<AscendC::HardEvent::MTE3_MTE2>(written);",
            "AscendC::WaitFlag<AscendC::HardEvent::MTE3_MTE2>(written);")
        for g in range(nc):
            out(f"AscendC::DataCopy(cLocal[{g}u * td.tileElems],",
                f"                  ringGm[(stage * NUM_C + {g}u) * td.blockElems + offset], rows * cols);")
        j = 0
        for g in k.gemms:
            if g.bias is not None:
                bup = " + td.biasUpOffset" if g.col_offset_halves else ""
                out(f"AscendC::DataCopy(cLocal[NUM_C * td.tileElems + {j}u * td.cubeTiling.baseN], "
                    f"{ins[g.bias]}Gm[col{bup}], cols);")
                j += 1
        if not j:
            out("(void)col;")
        out("#else",
            "(void)col;",
            "const uint32_t rowBytes = cols * static_cast<uint32_t>(sizeof(T));",
            "// 32-byte blocks after each padded row",
            "const uint32_t strideBytes = CeilDiv(cols, 16) * 16 * static_cast<uint32_t>(sizeof(T));",
            "const uint32_t gap = (strideBytes - CeilDiv(rowBytes, 32) * 32) / 32;",
            "AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), rowBytes, 0, gap, 0};",
            "AscendC::DataCopyPadExtParams<T> pad{false, 0, 0, static_cast<T>(0)};")
        for g in range(nc):
            out(f"AscendC::DataCopyPad(cLocal[{g}u * td.tileElems], ringGm[(stage * NUM_C + {g}u) * td.blockElems + "
                "offset], params, pad);")
        out("#endif", "inQueueC.EnQue(cLocal);")
    out("}", "")
    if any(g.bias is not None for g in k.gemms):
        out("#if __NPU_ARCH__ == 2002",
            "// 310P: c += bias on every row of the block (its cube takes no half bias).",
            "__aicore__ inline void AddBias(const AscendC::LocalTensor<float>& c, const AscendC::LocalTensor<T>& bias,",
            "                               const AscendC::LocalTensor<float>& biasF, uint32_t rows, uint32_t cols)",
            "{")
        with out.indent():
            out("AscendC::Cast(biasF, bias, AscendC::RoundMode::CAST_NONE, cols);",
                "const uint32_t stride = CeilDiv(cols, 16) * 16;",
                "for (uint32_t r = 0; r < rows; ++r) {",
                "    AscendC::Add(c[r * stride], c[r * stride], biasF, cols);",
                "}")
        out("}", "#endif", "")


def _compute(out: Lines, k: MatmulKernel, y: str) -> None:
    nc = len(k.gemms)
    nb = sum(g.bias is not None for g in k.gemms)
    out("__aicore__ inline void Compute(uint32_t rows, uint32_t cols)", "{")
    with out.indent():
        out("const uint32_t count = rows * CeilDiv(cols, 16) * 16;",
            "AscendC::LocalTensor<T> cLocal = inQueueC.DeQue<T>();",
            f"AscendC::LocalTensor<T> {y}Local = outQueue{cap(y)}.template AllocTensor<T>();")
        out("AscendC::LocalTensor<float> regs;",
            "if constexpr (NUM_REGS + C_REGS<T> + NUM_BIAS > 0) {",
            "    regs = regBuf.Get<float>();",
            "}")
        direct = k.out_reg >= nc
        for r in range(k.num_regs):
            if r < nc:
                # (its fp32 register past the epilogue's; fp32 blocks are used in place)
                out(f"AscendC::LocalTensor<float> r{r} = ToFloat(cLocal[{r}u * td.tileElems], "
                    f"regs[(NUM_REGS + {r}u * (C_REGS<T> / NUM_C)) * td.tileElems], count);  // C of gemm {r}")
            elif direct and r == k.out_reg:
                out(f"AscendC::LocalTensor<float> r{r} = OutReg({y}Local, regs[{r - nc}u * td.tileElems]);  // {y}")
            else:
                out(f"AscendC::LocalTensor<float> r{r} = regs[{r - nc}u * td.tileElems];")
        if nb:
            out("#if __NPU_ARCH__ == 2002",
                "// 310P: the bias rows, in fp32 after the epilogue's registers.",
                "AscendC::LocalTensor<float> biasF = regs[(NUM_REGS + C_REGS<T>) * td.tileElems];")
            j = 0
            for gi, g in enumerate(k.gemms):
                if g.bias is not None:
                    out(f"AddBias(r{gi}, cLocal[NUM_C * td.tileElems + {j}u * td.cubeTiling.baseN], biasF, rows, "
                        "cols);")
                    j += 1
            out("#endif")
        for st in k.const_steps:
            out(f"AscendC::Duplicate(r{st.dst}, {f32(st.scalar)}, count);")
        for st in k.steps:
            out(step_call(st))
        if direct:
            out(f"FromFloat({y}Local, r{k.out_reg}, count);")
        else:
            out(f"ToTile({y}Local, r{k.out_reg}, count);")
        out(f"outQueue{cap(y)}.EnQue({y}Local);", "inQueueC.FreeTensor(cLocal);")
    out("}", "")


def _copy_out(out: Lines, y: str) -> None:
    out("__aicore__ inline void CopyOut(uint64_t offset, uint32_t rows, uint32_t cols)", "{")
    with out.indent():
        out(f"AscendC::LocalTensor<T> {y}Local = outQueue{cap(y)}.template DeQue<T>();",
            "const uint32_t stride = CeilDiv(cols, 16) * 16;",
            "#if __NPU_ARCH__ == 2002",
            "for (uint32_t r = 0; r < rows; ++r) {",
            f"    AscendC::DataCopy({y}Gm[offset + static_cast<uint64_t>(r) * td.n], {y}Local[r * stride], cols);",
            "}",
            "#else",
            "const uint32_t rowBytes = cols * static_cast<uint32_t>(sizeof(T));",
            "const uint32_t srcGap = (stride * static_cast<uint32_t>(sizeof(T)) - CeilDiv(rowBytes, 32) * 32) / 32;",
            "AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), rowBytes, srcGap,",
            "                                  (td.n - cols) * static_cast<uint32_t>(sizeof(T)), 0};",
            f"AscendC::DataCopyPad({y}Gm[offset], {y}Local, params);",
            "#endif",
            f"outQueue{cap(y)}.FreeTensor({y}Local);")
    out("}", "")


def host_source(k: MatmulKernel, compute_units: list[str]) -> str:
    """op_host/<op>.cpp: OpDef, InferShape, InferDataType and TilingFunc."""
    ins = _roles(k)
    y = role(k.outputs[0])
    types = [GE_TYPES[IO_TYPES[d][0]] for d in k.dtypes]
    w0 = k.gemms[0].weight
    # Weight dims: [K, N] (or [N, K] transposed); a gate-up weight has 2N in place of N.
    n_dim, k_dim = (0, 1) if k.trans_b else (1, 0)
    n_expr = f"w.GetDim({n_dim}){' / 2' if k.split else ''}"
    out = Lines()
    out(*cube_host_head(k, "Matmul tiling"))
    with out.indent():
        out(*CUBE_PLATFORM_LINES,
            "const uint32_t coreNum = ascendcPlatform.GetCoreNumAiv();  // AI Cores on 310P",
            "const gert::Shape& x = context->GetInputShape(0)->GetStorageShape();",
            f"const gert::Shape& w = context->GetInputShape({w0})->GetStorageShape();",
            "if (x.GetDimNum() < 2 || w.GetDimNum() != 2) return ge::GRAPH_FAILED;",
            "const uint64_t k = static_cast<uint64_t>(x.GetDim(x.GetDimNum() - 1));",
            "const uint64_t m = static_cast<uint64_t>(x.GetShapeSize()) / (k == 0 ? 1 : k);",
            f"const uint64_t n = static_cast<uint64_t>({n_expr});",
            f"if (static_cast<uint64_t>(w.GetDim({k_dim})) != k) return ge::GRAPH_FAILED;")
        for g in {g.weight for g in k.gemms} - {w0}:
            out(f"if (!(context->GetInputShape({g})->GetStorageShape() == w)) return ge::GRAPH_FAILED;")
        for b in sorted({g.bias for g in k.gemms if g.bias is not None}):
            out(f"if (static_cast<uint64_t>(context->GetInputShape({b})->GetStorageShape().GetShapeSize()) != "
                f"{'2 * ' if k.split else ''}n) return ge::GRAPH_FAILED;")
        out("const ge::DataType dt = context->GetInputDesc(0)->GetDataType();",
            "const uint32_t dtypeSize = dt == ge::DT_FLOAT ? 4 : 2;",
            f"auto* tiling = context->GetTilingData<{struct_name(k)}>();",
            *_if_nonzero(tiling_call(k, "static_cast<uint32_t>(m)", "static_cast<uint32_t>(n)",
                                     "static_cast<uint32_t>(k)", "dtypeSize", "dt == ge::DT_FLOAT", "dt == ge::DT_BF16",
                                     "coreNum", "platform", "coupled", "nullptr", "tiling")),
            "    return ge::GRAPH_FAILED;",
            "}",
            *cube_host_tail(k, "each vector core's C stages (per stage, one block per gemm)"))
    out("}", "}  // namespace optiling", "", "namespace ge {",
        "static graphStatus InferShape(gert::InferShapeContext* context)", "{")
    with out.indent():
        out("const gert::Shape* x = context->GetInputShape(0);",
            f"const gert::Shape* w = context->GetInputShape({w0});",
            "gert::Shape* y = context->GetOutputShape(0);",
            "*y = *x;",
            f"y->SetDim(x->GetDimNum() - 1, w->GetDim({n_dim}){' / 2' if k.split else ''});",
            "return GRAPH_SUCCESS;")
    out("}", "")
    infer_dtype_and_opdef(out, k.op_type, ins, [y], types, compute_units, k.num_params)
    return out.text()


def tiling_call(k: MatmulKernel, m: str, n: str, kk: str, dtype_size: str, is_float: str, is_bf16: str, core_num: str,
                platform: str, coupled: str, forced: str, out: str) -> tuple[str, str]:
    """The call of ``<op>ComputeTiling`` with these argument expressions, as two lines (shapes, then the rest): its
    signature in one place, for the host's TilingFunc and the emulator's driver."""
    return (f"{k.op_type}ComputeTiling({m}, {n}, {kk}, {dtype_size},",
            f"        {is_float}, {is_bf16}, {core_num}, {platform}, {coupled}, {forced}, {out})")


def _if_nonzero(call: tuple[str, str]) -> tuple[str, str]:
    return f"if ({call[0]}", f"{call[1]} != 0) {{"


headers = helpers_header  # the shared headers its files include, by path in the op package
