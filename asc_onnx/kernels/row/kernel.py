"""op_kernel/<op>.cpp of a row op: the kernel class (queues, registers, the tile loop, the copies bound to its
buffers) around the compute of :mod:`.split` and :mod:`.steps`."""

from __future__ import annotations

from pathlib import Path

from ..skeleton import (
    HELPERS_INCLUDE,
    banner,
    cap,
    kernel_entry,
    role,
    struct_name,
)
from ..text import Lines
from .lower import RowKernel
from .schedule import (
    MAX_TILE_ROWS,
    STAT_SLOT,
    input_regs,
    ub_counts,
)
from .split import compute_rows, split_rows
from .steps import declare, emit_step


def roles(k: RowKernel) -> tuple[list[str], list[str]]:
    return [role(x.name) for x in k.inputs], [role(o) for o in k.outputs]


#: The row copies every row kernel shares (shipped into op_kernel/); the kernel class binds them to its buffers.
COPIES_HEADER = "asc_onnx_row_copies.h"
_COPIES_TEXT = (Path(__file__).with_name(COPIES_HEADER)).read_text()

_COPIES = r"""// Rows between GM and UB, row r at r * pitch in UB (asc_onnx_row_copies.h); 310P ragged ends in edgeBuf.
template <typename U>
__aicore__ inline void LoadRows(const AscendC::LocalTensor<U>& dst, const AscendC::GlobalTensor<U>& src,
                                uint32_t rows, uint32_t len, uint32_t pitch, uint64_t avail)
{
    asc_onnx::LoadRows(dst, src, rows, len, pitch, avail, edgeBuf, static_cast<uint32_t>(td.tileRows));
}

template <typename U>
__aicore__ inline void StoreRows(const AscendC::GlobalTensor<U>& dst, const AscendC::LocalTensor<U>& src,
                                 uint32_t rows, uint32_t len, uint32_t pitch)
{
    asc_onnx::StoreRows(dst, src, rows, len, pitch, edgeBuf);
}
"""

_STATS = r"""// One statistic per row, from the first element of each STAT_SLOT slot.
__aicore__ inline void StoreStats(const AscendC::GlobalTensor<T>& dst, const AscendC::LocalTensor<T>& src,
                                  uint32_t rows)
{
    asc_onnx::StoreStats<STAT_SLOT>(dst, src, rows);
}
"""

_WEIGHTS = r"""// A weight row (or a chunk of it) into an fp32 register, with a flag each way around the copy.
__aicore__ inline void LoadWeight(const AscendC::GlobalTensor<T>& src, const AscendC::LocalTensor<float>& dst,
                                  const AscendC::LocalTensor<T>& stage, uint32_t len, uint64_t avail)
{
    asc_onnx::LoadWeight(pipe, src, dst, stage, len, avail, edgeBuf, static_cast<uint32_t>(td.tileRows));
}
"""


def kernel_source(k: RowKernel, rule: str, body_ops: list[str], sources: list[str]) -> str:
    ins, outs = roles(k)
    io_in = [i for i, x in enumerate(k.inputs) if x.kind in ("full", "bcast")]
    vec_in = [i for i, x in enumerate(k.inputs) if x.kind == "vec"]
    row_out = [o for o, kd in enumerate(k.output_kinds) if kd == "row"]
    stat_out = [o for o, kd in enumerate(k.output_kinds) if kd == "stat"]
    bc = list(k.broadcast_inputs)
    in_reg = input_regs(k)
    cls = f"Kernel{k.op_type}"
    out = Lines()
    out(*banner(k, rule, body_ops, sources, "row"),
        "// Rows are reduced and normalized in fp32 registers; statistics are fp32 whatever the I/O type.",
        '#include "kernel_operator.h"', HELPERS_INCLUDE, f'#include "{COPIES_HEADER}"',
        f'#include "{k.snake}_tiling.h"', "", "namespace {",
        f"constexpr int32_t BUFFER_NUM = {k.schedule.buffer_num};  // {k.schedule.buffering}",
        f"constexpr uint32_t STAT_SLOT = {STAT_SLOT};  // fp32 elements per row statistic (64 bytes)",
        "using asc_onnx::RowToFloat;")
    out("", "template <typename T>", f"class {cls} {{", "public:")
    with out.indent():
        out(f"__aicore__ inline {cls}() {{}}")
        args = ", ".join(f"GM_ADDR {n}" for n in ins + outs)
        out(f"__aicore__ inline void Init({args}, const {struct_name(k)}& tiling)", "{")
        with out.indent():
            out("td = tiling;",
                "const uint64_t block = AscendC::GetBlockIdx();",
                "firstRow = block * td.rowsPerCore + (block < td.extraRows ? block : td.extraRows);",
                "myRows = td.rowsPerCore + (block < td.extraRows ? 1 : 0);")
            for n in ins + outs:
                out(f"{n}Gm.SetGlobalBuffer((__gm__ T*){n});")
            out("const uint64_t ioStride = td.chunkLength != 0 ? td.chunkLength : td.tileRows * td.rowStride;")
            for i in io_in:
                out(f"pipe.InitBuffer(inQueue{cap(ins[i])}, td.inBuffers, ioStride * sizeof(T));")
            for o in row_out:
                out(f"pipe.InitBuffer(outQueue{cap(outs[o])}, td.outBuffers, ioStride * sizeof(T));")
            for o in stat_out:
                out(f"pipe.InitBuffer(outQueue{cap(outs[o])}, td.outBuffers, td.tileRows * STAT_SLOT * sizeof(T));")
            out("// Row registers: the fp32 values that are not an I/O tile (whole rows stage the weights here too).",
                "pipe.InitBuffer(regBuf, td.rowRegs != 0 ? td.rowRegs * td.tileStride * sizeof(float) : 32);",
                f"pipe.InitBuffer(statBuf, {ub_counts(k)['stat_slots']} * td.statStride * sizeof(float));  "
                "// + a partial, a max, a shifted sum",
                "pipe.InitBuffer(tmpBuf, td.reduceTmp * sizeof(float));",
                "pipe.InitBuffer(foldBuf, td.foldRows != 0 ? td.foldRows * 64 * sizeof(float) : 32);",
                "#if __NPU_ARCH__ == 2002",
                "if (td.rowLength % (32 / sizeof(T)) != 0) {  // rows ending inside a block: their 32-byte windows",
                "    pipe.InitBuffer(edgeBuf, (td.tileRows + 1) * 32);",
                "}",
                "#endif")
            if k.num_regs["vec"]:
                out(f"pipe.InitBuffer(vecBuf, {k.num_regs['vec']} * td.vecStride * sizeof(float));")
            if vec_in:
                out("// Split mode: the weights whole in UB in the I/O type, or a chunk's at a time through a queue",
                    "// (loaded with the chunk of x that needs them).",
                    "if (td.chunkLength != 0 && td.weightsResident != 0) {")
                for j, i in enumerate(vec_in):
                    out(f"    pipe.InitBuffer(stageBuf{j}, td.rowStride * sizeof(T));",
                        f"    LoadRows(stageBuf{j}.Get<T>(), {ins[i]}Gm, 1, static_cast<uint32_t>(td.rowLength), "
                        "static_cast<uint32_t>(td.rowLength), td.rowLength);")
                out("    const auto readyId = pipe.FetchEventID(AscendC::HardEvent::MTE2_V);",
                    "    AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(readyId);",
                    "    AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(readyId);",
                    "} else if (td.chunkLength != 0) {")
                for j in range(len(vec_in)):
                    out(f"    pipe.InitBuffer(inQueueW{j}, td.inBuffers, td.vecStride * sizeof(T));")
                out("}")
            if bc:
                out("// Grouped walk: this core's rows are mask rows [firstRow, firstRow + myRows), its slice.",
                    "maskBase = td.groupRows != 0 ? firstRow : 0;")
            for j, i in enumerate(bc):
                out(f"if (td.residentRows[{j}] != 0) {{  // the mask {ins[i]} (or this core's slice), once per core",
                    f"    pipe.InitBuffer(residentBuf{j}, td.residentRows[{j}] * td.rowStride * sizeof(T));",
                    f"    const AscendC::LocalTensor<T> resident = residentBuf{j}.Get<T>();",
                    f"    const uint64_t held = td.groupRows != 0 ? myRows : td.residentRows[{j}];",
                    f"    for (uint64_t row = 0; row < held; row += {MAX_TILE_ROWS}) {{",
                    f"        const uint64_t n = held - row < {MAX_TILE_ROWS} ? held - row : {MAX_TILE_ROWS};",
                    f"        LoadRows(resident[row * td.rowStride], {ins[i]}Gm[(maskBase + row) * td.rowLength], "
                    "static_cast<uint32_t>(n),",
                    "                 static_cast<uint32_t>(td.rowLength), static_cast<uint32_t>(td.rowStride),",
                    f"                 (td.bcastRows[{j}] - maskBase - row) * td.rowLength);",
                    "    }",
                    "    const auto readyId = pipe.FetchEventID(AscendC::HardEvent::MTE2_V);",
                    "    AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(readyId);",
                    "    AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(readyId);",
                    "}")
            out("// Constants, and the weights of whole-row mode (split mode loads them per chunk): once per core.",
                "const uint32_t count = static_cast<uint32_t>(td.tileStride);",
                "const uint32_t statCount = static_cast<uint32_t>(td.statStride);",
                "const uint32_t vecCount = static_cast<uint32_t>(td.chunkLength != 0 ? td.chunkLength : td.rowLength);")
            declare(out, k, hoisted_only=True)
            if vec_in:
                out("if (td.chunkLength == 0) {  // staged through the register buffer, free until the first tile")
                for i in vec_in:
                    out(f"    LoadWeight({ins[i]}Gm, {in_reg[i]}, regBuf.Get<T>(), vecCount, td.rowLength);")
                out("}")
            for st in k.hoisted:
                if st.api == "Duplicate":
                    emit_step(out, st, False)
            if any(st.api != "Duplicate" for st in k.hoisted):
                out("if (td.chunkLength == 0) {")
                with out.indent():
                    for st in k.hoisted:
                        if st.api != "Duplicate":
                            emit_step(out, st, False)
                out("}")
            out("(void)count;", "(void)statCount;")
        out("}", "")
        out("__aicore__ inline void Process()", "{")
        with out.indent():
            out("if (td.chunkLength != 0) {", "    ProcessSplit();", "    return;", "}",
                "const uint32_t len = static_cast<uint32_t>(td.rowLength);",
                "// Double-buffered, the next tile's load is issued before this tile's compute: it overlaps the",
                "// compute and its scalar waits instead of following them.",
                "// Tiles of the core's rows, once per group repeat (once, unless the walk is grouped).",
                "const uint64_t perGroup = (myRows + td.tileRows - 1) / td.tileRows;",
                "const uint64_t tiles = perGroup * td.groupRepeats;",
                "if (td.inBuffers > 1 && tiles != 0) CopyIn(TileAt(0, perGroup), TileRows(0), 0, len);",
                "for (uint64_t i = 0; i < tiles; ++i) {")
            with out.indent():
                out("const uint32_t rows = TileRows(i % perGroup * td.tileRows);",
                    "const uint64_t at = TileAt(i, perGroup);",
                    "if (td.inBuffers == 1) {",
                    "    CopyIn(at, rows, 0, len);",
                    "} else if (i + 1 < tiles) {",
                    "    CopyIn(TileAt(i + 1, perGroup), TileRows((i + 1) % perGroup * td.tileRows), 0, len);",
                    "}",
                    "ComputeRows(at, rows);",
                    "CopyOut(at, rows, 0, len);",
                    *(["CopyOutStats(at, rows);"] if stat_out else []))
            out("}")
        out("}")
    out("", "private:")
    with out.indent():
        out("// A row register an I/O tile holds when T is fp32 (it has no slot then): its slot otherwise.",
            "__aicore__ inline AscendC::LocalTensor<float> TileOrSlot(const AscendC::LocalTensor<float>& regs,",
            "                                                        uint32_t slot) const", "{")
        with out.indent():
            out("if constexpr (std::is_same_v<T, float>) {", "    (void)slot;", "    return regs;", "} else {",
                "    return regs[slot * td.tileStride];", "}")
        out("}", "")
        out("// The first data row of tile i: the core's rows in tiles, under each group repeat in turn.",
            "__aicore__ inline uint64_t TileAt(uint64_t i, uint64_t perGroup) const", "{")
        with out.indent():
            out("return i / perGroup * td.groupRows + firstRow + i % perGroup * td.tileRows;")
        out("}", "")
        out("// Rows of the tile starting at a core's row `row`.",
            "__aicore__ inline uint32_t TileRows(uint64_t row) const", "{")
        with out.indent():
            out("const uint64_t left = myRows - row;",
                "return static_cast<uint32_t>(left < td.tileRows ? left : td.tileRows);")
        out("}", "")
        out(*_COPIES.splitlines())
        out("")
        if stat_out:
            out(*_STATS.splitlines())
            out("")
        if vec_in:
            out(*_WEIGHTS.splitlines())
            out("")
        if bc:
            out("// Row of a mask input that serves data row q: the N-d index of q's leading axes, with the mask's",
                "// own strides (0 along the axes it repeats over).",
                "__aicore__ inline uint64_t BcastRow(uint64_t q, int j) const", "{")
            with out.indent():
                out("uint64_t idx = 0;",
                    "for (int i = static_cast<int>(td.leadCount) - 1; i >= 0; --i) {",
                    "    idx += (q % td.leadDims[i]) * td.bcastStride[j][i];",
                    "    q /= td.leadDims[i];", "}", "return idx;")
            out("}", "")
        _copy_in(out, k, ins, io_in, bc)
        compute_rows(out, k, ins, outs, io_in, row_out, stat_out, in_reg)
        split_rows(out, k, ins, outs, io_in, vec_in, row_out, stat_out, in_reg)
        _copy_out(out, k, outs, row_out, stat_out)
        out("AscendC::TPipe pipe;")
        for i in io_in:
            out(f"AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueue{cap(ins[i])};  // preloads")
        for o in row_out + stat_out:
            out(f"AscendC::TQue<AscendC::QuePosition::VECOUT, 1> outQueue{cap(outs[o])};")
        out("AscendC::TBuf<AscendC::TPosition::VECCALC> regBuf;  // fp32 row registers, one tile each",
            "AscendC::TBuf<AscendC::TPosition::VECCALC> statBuf;  // fp32 per-row statistics (and a chunk partial)",
            "AscendC::TBuf<AscendC::TPosition::VECCALC> tmpBuf;  // sharedTmpBuffer of the reductions",
            "AscendC::TBuf<AscendC::TPosition::VECCALC> foldBuf;  // 910B: 64 lanes per row, a row's chunks combined",
            "AscendC::TBuf<AscendC::TPosition::VECCALC> edgeBuf;  // 310P: 32-byte windows of ragged row ends")
        if k.num_regs["vec"]:
            out("AscendC::TBuf<AscendC::TPosition::VECCALC> vecBuf;  // fp32 weight rows")
        for j in range(len(bc)):
            out(f"AscendC::TBuf<AscendC::TPosition::VECCALC> residentBuf{j};  // a mask kept for the whole core")
        for j in range(len(vec_in)):
            out(f"AscendC::TBuf<AscendC::TPosition::VECCALC> stageBuf{j};  // split mode: a weight row, I/O type",
                f"AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueueW{j};  // split mode: its chunks")
        for n in ins + outs:
            out(f"AscendC::GlobalTensor<T> {n}Gm;")
        out(f"{struct_name(k)} td;", "uint64_t firstRow = 0;", "uint64_t myRows = 0;")
        if bc:
            out("uint64_t maskBase = 0;  // the first mask row held in UB")
        if any(st.online[:1] == ("shifted",) for st in k.steps):
            out("float shift = 0.0f;  // split mode: the row's first element, the origin of its sum of squares")
    out("};", "}  // namespace", "")
    kernel_entry(out, k.snake, ins + outs, struct_name(k), cls, outs[0])
    return out.text()


def _copy_in(out: Lines, k: RowKernel, ins, io_in, bc) -> None:
    out("// Rows [at, at + rows), columns [col, col + len): the data, and each mask input's matching rows.",
        "__aicore__ inline void CopyIn(uint64_t at, uint32_t rows, uint64_t col, uint32_t len)", "{")
    with out.indent():
        for i in io_in:
            n = ins[i]
            if i in bc:
                j = bc.index(i)
                out(f"if (td.residentRows[{j}] == 0) {{")
                with out.indent():
                    out(f"AscendC::LocalTensor<T> {n}Local = inQueue{cap(n)}.template AllocTensor<T>();",
                        "for (uint32_t r = 0; r < rows; ++r) {",
                        f"    const uint64_t from = BcastRow(at + r, {j}) * td.rowLength + col;",
                        f"    LoadRows({n}Local[r * (td.chunkLength != 0 ? 0 : td.rowStride)], {n}Gm[from], 1, len, "
                        f"len, td.bcastRows[{j}] * td.rowLength - from);", "}",
                        f"inQueue{cap(n)}.EnQue({n}Local);")
                out("}")
            else:
                out(f"AscendC::LocalTensor<T> {n}Local = inQueue{cap(n)}.template AllocTensor<T>();",
                    f"LoadRows({n}Local, {n}Gm[at * td.rowLength + col], rows, len, "
                    "static_cast<uint32_t>(td.rowStride),",
                    "         (td.rows - at) * td.rowLength - col);",
                    f"inQueue{cap(n)}.EnQue({n}Local);")
    out("}", "")


def _copy_out(out: Lines, k: RowKernel, outs, row_out, stat_out) -> None:
    out("__aicore__ inline void CopyOut(uint64_t at, uint32_t rows, uint64_t col, uint32_t len)", "{")
    with out.indent():
        for o in row_out:
            n = outs[o]
            out(f"AscendC::LocalTensor<T> {n}Local = outQueue{cap(n)}.template DeQue<T>();",
                f"StoreRows({n}Gm[at * td.rowLength + col], {n}Local, rows, len, static_cast<uint32_t>(td.rowStride));",
                f"outQueue{cap(n)}.FreeTensor({n}Local);")
    out("}", "")
    if stat_out:
        out("__aicore__ inline void CopyOutStats(uint64_t at, uint32_t rows)", "{")
        with out.indent():
            for o in stat_out:
                n = outs[o]
                out(f"AscendC::LocalTensor<T> {n}Local = outQueue{cap(n)}.template DeQue<T>();",
                    f"StoreStats({n}Gm[at], {n}Local, rows);", f"outQueue{cap(n)}.FreeTensor({n}Local);")
        out("}", "")
