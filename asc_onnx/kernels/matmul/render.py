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
    cube_host_head,
    cube_host_tail,
    helpers_header,
    infer_dtype_and_opdef,
    role,
    struct_name,
    tiling_struct,
)
from ..text import Lines
from .kernel import kernel_source, roles
from .lower import MatmulKernel

#: What each non-zero return of ``<op>ComputeTiling`` means (the report's words for a refused shape).
REFUSALS = {
    1: "bad sizes",
    2: "no tiling fits",
    3: "N not a multiple of 16 on 310P (no DataCopyPad: y's rows must be whole 32-byte blocks)",
    4: "float inputs on 310P (its cube takes half)",
}


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


def host_source(k: MatmulKernel, compute_units: list[str]) -> str:
    """op_host/<op>.cpp: OpDef, InferShape, InferDataType and TilingFunc."""
    ins = roles(k)
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

__all__ = ["REFUSALS", "headers", "host_source", "kernel_source", "tiling_call", "tiling_calc", "tiling_header"]
