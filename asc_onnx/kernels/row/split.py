"""The row kernel's compute over a tile: whole rows in one pass, or (split mode) each row walked in column
chunks once per pass, the reductions finished pass by pass."""

from __future__ import annotations

from ..skeleton import (
    cap,
)
from ..text import Lines
from .lower import RowKernel, RowStep
from .schedule import (
    direct_outputs,
    pass_steps,
    row_slots,
    tile_inputs,
)
from .steps import declare, emit_step


def _slot(k: RowKernel, reg: str, split: bool) -> str:
    """Row register ``reg``'s storage: its slot, or, where an fp32 I/O tile may hold it, ``TileOrSlot`` (the
    slot is then not in the buffer, and the fp32 cast helpers ignore the argument)."""
    tile = reg in tile_inputs(k) or (not split and reg in direct_outputs(k))
    slot = row_slots(k)[reg]
    return f"TileOrSlot(regs, {slot})" if tile else f"regs[{slot} * td.tileStride]"


def _compute_head(out: Lines, k: RowKernel, ins, outs, io_in, in_reg, split: bool, final: bool) -> None:
    out("AscendC::LocalTensor<float> regs = regBuf.Get<float>();",
        "AscendC::LocalTensor<float> reduceTmp = tmpBuf.Get<float>();")
    declare(out, k)
    if not split and any(st.form == "reduce" for st in k.steps):  # 910B's short rows: reductions side by side
        out(f"AscendC::LocalTensor<float> dense = stats[{max(1, k.num_regs['stat'])} * td.statStride];",
            "AscendC::LocalTensor<float> fold = foldBuf.Get<float>();", "(void)dense;", "(void)fold;")
    if split:
        out(f"AscendC::LocalTensor<float> partial = stats[{max(1, k.num_regs['stat'])} * td.statStride];")
        if any(st.online == ("max",) for st in k.steps):
            out(f"AscendC::LocalTensor<float> prevMax = stats[{max(1, k.num_regs['stat']) + 1} * td.statStride];")
        if any(st.online[:1] == ("shifted",) for st in k.steps):
            out(f"AscendC::LocalTensor<float> shiftSum = stats[{max(1, k.num_regs['stat']) + 2} * td.statStride];")
    bc = list(k.broadcast_inputs)
    for i in io_in:
        reg, slot = in_reg[i], _slot(k, in_reg[i], split)
        if i in bc and not split:
            j = bc.index(i)
            out(f"AscendC::LocalTensor<T> {ins[i]}Local;", f"AscendC::LocalTensor<float> {reg} = {slot};",
                f"if (td.residentRows[{j}] != 0) {{  // gather this tile's mask rows from the resident copy,",
                "    // one instruction per run of rows that are consecutive there too (both at a pitch of rowStride)",
                f"    const AscendC::LocalTensor<T> resident = residentBuf{j}.Get<T>();",
                "    uint32_t start = 0;",
                f"    uint64_t from = BcastRow(at, {j}) - maskBase;",
                "    for (uint32_t r = 1; r <= rows; ++r) {",
                f"        const uint64_t m = r < rows ? BcastRow(at + r, {j}) - maskBase : 0;",
                "        if (r < rows && m == from + (r - start)) continue;",
                f"        RowToFloat({reg}[start * pitch], resident[from * td.rowStride], "
                "(r - start - 1) * pitch + len);",
                "        start = r;",
                "        from = m;",
                "    }", "} else {",
                f"    {ins[i]}Local = inQueue{cap(ins[i])}.template DeQue<T>();",
                f"    {reg} = ToFloat({ins[i]}Local, {slot}, count);", "}")
        else:
            out(f"AscendC::LocalTensor<T> {ins[i]}Local = inQueue{cap(ins[i])}.template DeQue<T>();",
                f"AscendC::LocalTensor<float> {reg} = ToFloat({ins[i]}Local, {slot}, count);")
    direct = direct_outputs(k) if final else {}
    for o in direct.values():  # fp32 computes into the tile; others take it at their final Cast
        out(f"AscendC::LocalTensor<T> {outs[o]}Local;",
            f"if constexpr (std::is_same_v<T, float>) {outs[o]}Local = "
            f"outQueue{cap(outs[o])}.template AllocTensor<T>();")
    used = {st.dst for st in k.steps + k.hoisted} | {s for st in k.steps for s in st.srcs} | set(k.out_regs)
    fresh = sorted({u for u in used if u[0] == "r" and u not in in_reg.values()}, key=lambda n: int(n[1:]))
    for r in fresh:
        if r in direct:
            out(f"AscendC::LocalTensor<float> {r} = OutReg({outs[direct[r]]}Local, {_slot(k, r, split)});  "
                f"// {outs[direct[r]]}")
        else:
            out(f"AscendC::LocalTensor<float> {r} = {_slot(k, r, split)};")


def compute_rows(out: Lines, k: RowKernel, ins, outs, io_in, row_out, stat_out, in_reg) -> None:
    out("// Whole rows: every step once, in program order.",
        "__aicore__ inline void ComputeRows(uint64_t at, uint32_t rows)", "{")
    with out.indent():
        out("const uint32_t len = static_cast<uint32_t>(td.rowLength);",
            "const uint32_t pitch = static_cast<uint32_t>(td.rowStride);",
            "const uint32_t count = rows * pitch;",
            "const uint32_t statCount = rows * STAT_SLOT;",
            "const uint32_t vecCount = len;",
            "(void)at;", "(void)statCount;", "(void)vecCount;")
        _compute_head(out, k, ins, outs, io_in, in_reg, split=False, final=True)
        for st in k.steps:
            emit_step(out, st, False)
        _outputs(out, k, outs, row_out + stat_out, direct_outputs(k), "count", "statCount")
        bc = list(k.broadcast_inputs)
        for i in io_in:
            if i in bc:
                out(f"if (td.residentRows[{bc.index(i)}] == 0) inQueue{cap(ins[i])}.FreeTensor({ins[i]}Local);")
            else:
                out(f"inQueue{cap(ins[i])}.FreeTensor({ins[i]}Local);")
    out("}", "")


def _outputs(out: Lines, k: RowKernel, outs, which: list[int], direct: dict[str, int], count: str,
             stat_count: str) -> None:
    """Hand the output tiles to CopyOut: direct ones need only their Cast (none for fp32)."""
    for o in which:
        n, reg = outs[o], k.out_regs[o]
        n_count = count if k.output_kinds[o] == "row" else stat_count
        if direct.get(reg) == o:
            out(f"if constexpr (!std::is_same_v<T, float>) {n}Local = outQueue{cap(n)}.template AllocTensor<T>();",
                f"FromFloat({n}Local, {reg}, {n_count});")
        else:
            out(f"AscendC::LocalTensor<T> {n}Local = outQueue{cap(n)}.template AllocTensor<T>();",
                f"ToTile({n}Local, {reg}, {n_count});")
        out(f"outQueue{cap(n)}.EnQue({n}Local);")


def split_rows(out: Lines, k: RowKernel, ins, outs, io_in, vec_in, row_out, stat_out, in_reg) -> None:
    """Split mode: per row, one chunk loop per pass; stats finish between passes."""
    final = k.passes - 1
    out("// Split mode: a row does not fit; walk it in chunks once per pass. Every chunk of every pass of every",
        "// row in one sequence, so the next chunk's load is issued before this chunk's compute.",
        "__aicore__ inline void ProcessSplit()", "{")
    with out.indent():
        out(f"constexpr uint64_t passes = {k.passes};",
            "const uint64_t chunks = (td.rowLength + td.chunkLength - 1) / td.chunkLength;",
            "const uint64_t steps = myRows * passes * chunks;",
            "if (td.inBuffers > 1 && steps != 0) LoadChunk(0, chunks);",
            "for (uint64_t i = 0; i < steps; ++i) {")
        with out.indent():
            out("if (td.inBuffers == 1) {", "    LoadChunk(i, chunks);", "} else if (i + 1 < steps) {",
                "    LoadChunk(i + 1, chunks);", "}",
                "const uint64_t row = i / (passes * chunks);",
                "const uint64_t pass = i / chunks % passes;",
                "const uint64_t col = i % chunks * td.chunkLength;",
                "const uint32_t len = static_cast<uint32_t>(td.rowLength - col < td.chunkLength ? "
                "td.rowLength - col : td.chunkLength);",
                "const bool last = col + len == td.rowLength;  // the pass is done with this chunk",
                "(void)row;", "(void)last;")
            for p in range(k.passes):
                out(f"{'if' if p == 0 else '} else if'} (pass == {p}) {{")
                with out.indent():
                    out(f"ComputePass{p}(col, len, col == 0);")
                    if p == final:
                        out("CopyOut(firstRow + row, 1, col, len);")
                    if any(_after(k, p)):
                        out(f"if (last) StatsAfterPass{p}();")
                    if p == final and stat_out:
                        out("if (last) FinishStats(firstRow + row);")
            out("}")
        out("}")
    out("}", "")
    out("// Chunk i of ProcessSplit's sequence into the input queues.",
        "__aicore__ inline void LoadChunk(uint64_t i, uint64_t chunks)", "{")
    with out.indent():
        out("const uint64_t col = i % chunks * td.chunkLength;",
            "const uint32_t len = static_cast<uint32_t>(td.rowLength - col < td.chunkLength ? td.rowLength - col : "
            "td.chunkLength);",
            f"CopyIn(firstRow + i / ({k.passes} * chunks), 1, col, len);")
        weighted = [p for p in range(k.passes) if any(s[0] == "v" for st in pass_steps(k, p, p == final)
                                                        for s in st.srcs)]
        if vec_in and weighted:
            cond = " || ".join(f"pass == {p}" for p in weighted)
            out(f"const uint64_t pass = i / chunks % {k.passes};",
                f"if (td.weightsResident == 0 && ({cond})) {{  // the weights' chunk for this pass")
            for j, i in enumerate(vec_in):
                out(f"    AscendC::LocalTensor<T> w{j} = inQueueW{j}.template AllocTensor<T>();",
                    f"    LoadRows(w{j}, {ins[i]}Gm[col], 1, len, len, td.rowLength - col);",
                    f"    inQueueW{j}.EnQue(w{j});")
            out("}")
    out("}", "")
    for p in range(k.passes):
        reduces = [st for st in k.steps if st.form == "reduce" and st.avail == p + 1]
        chunk_steps = pass_steps(k, p, p == final)
        vec_steps = [st for st in k.hoisted if st.api != "Duplicate"]
        uses_vec = any(s[0] == "v" for st in chunk_steps for s in st.srcs)
        out(f"__aicore__ inline void ComputePass{p}(uint64_t col, uint32_t len, bool first)", "{")
        with out.indent():
            out("const uint32_t rows = 1;", "const uint32_t pitch = 0;", "const uint32_t count = len;",
                "const uint32_t statCount = STAT_SLOT;", "const uint32_t vecCount = len;",
                "(void)col;", "(void)first;", "(void)rows;", "(void)pitch;", "(void)statCount;", "(void)vecCount;")
            _compute_head(out, k, ins, outs, io_in, in_reg, split=True, final=p == final)
            if uses_vec:
                for j, i in enumerate(vec_in):
                    out("if (td.weightsResident != 0) {",
                        f"    RowToFloat({in_reg[i]}, stageBuf{j}.Get<T>()[col], len);", "} else {",
                        f"    AscendC::LocalTensor<T> w = inQueueW{j}.template DeQue<T>();",
                        f"    RowToFloat({in_reg[i]}, w, len);", f"    inQueueW{j}.FreeTensor(w);", "}")
                for st in vec_steps:
                    emit_step(out, st, True)
            # Program order: a reduction reads its source before a later step may reuse that register. An online
            # sum's max is negated per chunk, as it grows.
            negs = [st for st in k.steps if st.online == ("neg",) and any(
                r.online[:1] == ("sum",) for r in reduces)]
            # A shifted variance reads x right after the sum of x does (a later step may overwrite x in place).
            wanted = {id(st) for st in chunk_steps + reduces + negs if st.online[:1] != ("shifted",)}
            for st in (st for st in k.steps if id(st) in wanted):
                emit_step(out, st, True)
                for v in (v for v in reduces if v.online[:1] == ("shifted",) and v.online[2] == st.dst):
                    emit_step(out, v, True)
            if p == final:
                _outputs(out, k, outs, row_out, direct_outputs(k), "count", "statCount")
            for i in io_in:
                out(f"inQueue{cap(ins[i])}.FreeTensor({ins[i]}Local);")
        out("}", "")
        after, shifted = _after(k, p)
        if after or shifted:
            out(f"__aicore__ inline void StatsAfterPass{p}()", "{")
            with out.indent():
                out("const uint32_t statCount = STAT_SLOT;")
                declare(out, k)
                if shifted:
                    out(f"AscendC::LocalTensor<float> partial = stats[{max(1, k.num_regs['stat'])} * td.statStride];",
                        f"AscendC::LocalTensor<float> shiftSum = stats[{max(1, k.num_regs['stat']) + 2} * "
                        "td.statStride];")
                for st in shifted:  # sum (x - mean)^2 = sum (x - K)^2 - (sum (x - K))^2 / n
                    out("AscendC::Mul(partial, shiftSum, shiftSum, 1);",
                        "AscendC::Muls(partial, partial, td.invLength, 1);",
                        f"AscendC::Sub({st.dst}, {st.dst}, partial, 1);")
                for st in after:
                    emit_step(out, st, True)
            out("}", "")
    if stat_out:
        out("// Split mode: a row's statistics once its last reduction is done.",
            "__aicore__ inline void FinishStats(uint64_t at)", "{")
        with out.indent():
            declare(out, k)
            for o in stat_out:
                n = outs[o]
                out(f"AscendC::LocalTensor<T> {n}Local = outQueue{cap(n)}.template AllocTensor<T>();",
                    f"ToTile({n}Local, {k.out_regs[o]}, STAT_SLOT);", f"outQueue{cap(n)}.EnQue({n}Local);")
            out("CopyOutStats(at, 1);")
        out("}", "")


def _after(k: RowKernel, p: int) -> tuple[list[RowStep], list[RowStep]]:
    """What runs once a row's pass ``p`` is done: the per-row stat steps that become available, and the
    shifted variances finished in it (their correction)."""
    after = [st for st in k.steps if st.dst[0] == "s" and st.form != "reduce" and st.avail == p + 1]
    shifted = [st for st in k.steps if st.online[:1] == ("shifted",) and st.avail == p + 1]
    return after, shifted
