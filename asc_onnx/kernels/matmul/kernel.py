"""op_kernel/<op>.cpp of a matmul op: the Matmul objects, the block loop over each core's output (the ring of C
blocks on 910B) and the epilogue in row chunks."""

from __future__ import annotations

from ..skeleton import (
    HELPERS_INCLUDE,
    banner,
    cap,
    kernel_entry,
    role,
    struct_name,
)
from ..text import Lines, f32
from ..vector import step_call
from .lower import MatmulKernel


def roles(k: MatmulKernel) -> list[str]:
    """The kernel's input names as roles (``x``, ``w1``, ``bias``)."""
    return [role(n) for n in k.inputs]


def kernel_source(k: MatmulKernel, rule: str, body_ops: list[str], sources: list[str]) -> str:
    """op_kernel/<op>.cpp."""
    ins = roles(k)
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
