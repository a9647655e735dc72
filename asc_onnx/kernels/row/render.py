"""Ascend C for the row kernel class (norms, softmax, anything reducing over trailing axes).

Schedule (decided by ``<op>ComputeTiling``, compiled by the CANN host file and the emulator alike):
* the data is ``[rows, rowLength]``; cores take whole rows (the first ``extraRows`` one more);
* whole-row mode: tiles of ``tileRows`` rows, each row padded to ``rowStride`` elements (32 bytes of T) in
  UB, so every row starts aligned; one read of x, one write of y; gamma/beta loaded once per core;
* split mode (``chunkLength != 0``), when one row does not fit: each row is walked in column chunks once
  per pass; pass p finishes the reductions whose inputs are ready after p passes (a softmax: max, then
  sum, then the output), so x is read ``passes`` times and the weights once per row and pass that needs
  them;
* statistics are fp32 slots of 64 bytes per row: a reduction writes slot r, a per-row scalar op reads it
  back with ``GetValue`` (ordered after the vector write by the compiler's auto-sync).

310P has no ``DataCopyPad``: rows of whole 32-byte blocks move as one contiguous ``DataCopy`` per tile; other
rows move one at a time, loaded rounded up to whole blocks (their last row, where that would read past the
tensor, as whole blocks plus a window) and stored as whole blocks plus a 32-byte window ending at the row's end,
staged by the scalar unit in ``edgeBuf``. Rows shorter than 32 bytes and per-row statistics are refused there.
"""

from __future__ import annotations

from pathlib import Path

from ..ir import IO_TYPES
from ..skeleton import (
    GE_TYPES,
    HELPERS_INCLUDE,
    LAUNCH_LINES,
    banner,
    cap,
    helpers_header,
    infer_dtype_and_opdef,
    kernel_entry,
    param_lines,
    platform_lines,
    role,
    struct_name,
    tiling_struct,
)
from ..text import Lines, f32
from .lower import MAX_LEAD, RowKernel, RowStep
from .schedule import (
    BUFFERINGS,
    FOLD_MAX,
    MAX_TILE_ROWS,
    STAT_SLOT,
    direct_outputs,
    input_regs,
    pass_steps,
    row_slots,
    tile_inputs,
    ub_counts,
)

#: What each non-zero return of ``<op>ComputeTiling`` means (the report's words for a refused shape).
REFUSALS = {
    1: "empty data",
    2: "a chunk of one row does not fit the unified buffer",
    3: "rows shorter than 32 bytes (or a split row whose last chunk is) on a SoC without DataCopyPad",
    4: "per-row statistics as outputs on a SoC without DataCopyPad",
    5: "too many leading axes",
}


def _nb(k: RowKernel) -> int:
    return max(1, len(k.broadcast_inputs))


def tiling_header(k: RowKernel) -> str:
    return tiling_struct(k.op_type, k.snake, struct_name(k), [
        "uint64_t rows;          // rows of the data",
        "uint64_t rowLength;     // elements of one row",
        "uint64_t rowStride;     // whole-row mode: UB elements per row (rowLength rounded up to 32 bytes of T)",
        "uint64_t rowsPerCore;   // rows of a core",
        "uint64_t extraRows;     // cores [0, extraRows) take one row more",
        "uint64_t tileRows;      // whole-row mode: rows per tile",
        "uint64_t foldRows;      // 910B whole rows of 65 to FOLD_MAX elements: rows of the fold scratch (0: none)",
        "uint64_t chunkLength;   // split mode: columns per chunk (0: whole rows fit)",
        "uint64_t tileStride;    // fp32 elements of one row register (multiple of 64)",
        "uint64_t statStride;    // fp32 elements of one stat register (tile rows x 16, multiple of 64)",
        "uint64_t vecStride;     // fp32 elements of one weight register (multiple of 64)",
        "uint64_t reduceTmp;     // fp32 elements of the reductions' sharedTmpBuffer",
        f"uint64_t leadDims[{MAX_LEAD}];     // leading dims of the data, innermost last (mask row mapping)",
        f"uint64_t bcastStride[{_nb(k)}][{MAX_LEAD}];  // per mask input: its row step along each leading axis",
        f"uint64_t residentRows[{_nb(k)}];  // per mask input: rows kept in UB for the whole core (0: streamed)",
        f"uint64_t bcastRows[{_nb(k)}];     // per mask input: its rows (where its reads must stop)",
        "uint64_t groupRows;     // grouped walk: the mask's rows, split over the cores (0: cores split the data's)",
        "uint64_t groupRepeats;  // grouped walk: data rows per mask row (each core walks its slice that often)",
        "uint32_t leadCount;     // leading axes used",
        "uint32_t blockDim;      // cores launched",
        "uint32_t inBuffers;     // buffers per input queue (2: the next tile loads during this one's compute)",
        "uint32_t outBuffers;    // buffers per output queue (2: a tile's store overlaps the next tile's compute)",
        "uint32_t rowRegs;       // row registers in the register buffer (fp32 I/O: not those that are I/O tiles)",
        "uint32_t weightsResident;  // split mode: the weights kept whole in UB in the I/O type (else per chunk)",
        "float invLength;        // 1 / rowLength, for means",
        *([f"float param[{k.num_params}];        // the op's scalars, from the node's p0.. attributes (fp32 bits)"]
          if k.num_params else []),
    ], " (row kernel)")


#: The row tiling every row op shares, shipped into op_host/ beside each op's own calc header.
TILING_HEADER = "asc_onnx_row_tiling.h"
_TILING_TEXT = (Path(__file__).with_name(TILING_HEADER)).read_text()


def headers(k: RowKernel) -> dict[str, str]:
    """The shared headers a row op's files include, by path in the op package."""
    return {**helpers_header(), f"op_kernel/{COPIES_HEADER}": _COPIES_TEXT, f"op_host/{TILING_HEADER}": _TILING_TEXT}


def tiling_calc(k: RowKernel) -> str:
    """op_host/<op>_tiling_calc.h: this op's counts and schedule, and ``<op>ComputeTiling`` as the shared row
    tiling (``asc_onnx_row_tiling.h``) under them."""
    c = ub_counts(k)
    sched = k.schedule
    fn = f"{k.op_type}ComputeTiling"
    shape = f"{k.op_type}RowShape"
    members = [
        ("in", c["in"], "input rows of T per tile row (full and mask inputs)"),
        ("out", c["out"], "output rows of T"),
        ("io", c["io"], "both"),
        ("statOut", c["statout"], "per-row statistic outputs"),
        ("vecIn", c["vec_in"], "weight rows (split mode stages them in T)"),
        ("statSlots", c["stat_slots"], "fp32 stat registers (a partial, a max and a sum among them)"),
        ("vec", c["vec"], "fp32 weight rows"),
        ("rowRegsWhole32", c["whole32"], "fp32 row registers: fp32 I/O, whole rows"),
        ("rowRegsSplit32", c["split32"], "fp32 I/O, split rows"),
        ("rowRegsAll", c["all"], "fp16 and bf16 I/O"),
        ("bcastInputs", len(k.broadcast_inputs), "mask inputs (rows repeated along leading axes)"),
        ("bufferNum", sched.buffer_num, "buffers per queue"),
        ("minCoreBytes", sched.min_core_bytes, "data per core at least"),
        ("residentShare", sched.resident_share, "a resident mask takes at most UB / this"),
        ("firstOption", BUFFERINGS.index((sched.buffer_num, sched.buffer_num)), "the first buffering tried"),
    ]
    out = Lines()
    out(f"// Generated by asc-onnx: tiling arithmetic of {k.op_type} (row kernel): the shared row tiling",
        f"// ({TILING_HEADER}) under this op's counts and schedule. The CANN host tiling and the asc-onnx",
        "// emulator compile this same code.", "#pragma once", "#include <cstdint>", "",
        f'#include "../op_kernel/{k.snake}_tiling.h"', f'#include "{TILING_HEADER}"', "",
        f"// What one tile row of {k.op_type} holds in the unified buffer, by kind, and its schedule.",
        f"struct {shape} {{")
    with out.indent():
        decls = [f"static constexpr uint64_t {name} = {value};" for name, value, _ in members]
        width = max(map(len, decls))
        out(*(f"{d:<{width}}  // {why}" for d, (_, _, why) in zip(decls, members)))
    out("};", "",
        "// Returns 0 and fills t, or a non-zero reason:",
        *(f"// {code} {why}," if code < max(REFUSALS) else f"// {code} {why}." for code, why in REFUSALS.items()),
        "// rowDims: trailing dims of the data that form one row (the op's normalized axes).",
        f"inline int {fn}(const uint64_t* dims, uint32_t rank, uint32_t rowDims, const uint64_t* const* bcastDims,",
        f"{' ' * (len(fn) + 12)}const uint32_t* bcastRanks, uint32_t dtypeSize, uint32_t coreNum, uint64_t ubBytes,",
        f"{' ' * (len(fn) + 12)}bool hasDataCopyPad, {struct_name(k)}* t)", "{")
    with out.indent():
        out(f"return asc_onnx::RowTiling<{shape}>(dims, rank, rowDims, bcastDims, bcastRanks, dtypeSize, coreNum,",
            f"{' ' * (len(shape) + 29)}ubBytes, hasDataCopyPad, t);")
    out("}")
    return out.text()


def _roles(k: RowKernel) -> tuple[list[str], list[str]]:
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


def _row_at(name: str) -> str:
    """A row register at row r of the tile (vec registers are the same for every row)."""
    return name if name[0] == "v" else f"{name}[r * pitch]"


#: Rows per repeat-strided call: at most 255 repeats, and a multiple of 8 so each call's Brcb fills whole groups
#: of 8 slots of its own.
ROWS_PER_CALL = 248


def _row_calls(ctype: str) -> list[str]:
    """The loop over a tile's rows in calls of ROWS_PER_CALL repeats, ``n`` (of ``ctype``) rows each."""
    return [f"    for (uint32_t r = 0; r < rows; r += {ROWS_PER_CALL}) {{",
            f"        const {ctype} n = static_cast<{ctype}>(rows - r < {ROWS_PER_CALL} ? rows - r : {ROWS_PER_CALL});"]


def _tile_reduce(out: Lines, st: RowStep) -> None:
    """A whole-row reduction over the tile into its stat register: rows of at most 64 floats one repeat each; on
    910B rows up to FOLD_MAX folded lane by lane first, each result then filling its slot's first block (Brcb);
    longer rows (and 310P's folds) the per-row count form, which ends in a scalar wait."""
    src = st.srcs[0]
    kind = {"ReduceSum": "SUM", "ReduceMax": "MAX", "ReduceMin": "MIN"}[st.api]
    # A pair (value, index) per MAX/MIN result, in units of two floats: the value lands at r * STAT_SLOT.
    stride, order = ("STAT_SLOT", "") if kind == "SUM" else \
        ("STAT_SLOT / 2", ", AscendC::ReduceOrder::ORDER_VALUE_INDEX")
    pairs = kind != "SUM"  # MAX/MIN results are (value, index): Brcb's element 2r lands in block 2r
    combine = {"SUM": "Add", "MAX": "Max", "MIN": "Min"}[kind]
    brcb = (f"        AscendC::Brcb({st.dst}[r * STAT_SLOT], dense, static_cast<uint8_t>(({'2 * ' if pairs else ''}n "
            f"+ 7) / 8), {{{'1, 8' if pairs else '2, 16'}}});")
    calls = ["    // 248 rows a call (at most 255 repeats): each call's Brcb starts at a group of 8 slots",
             *_row_calls("int32_t")]
    out("if (len <= 64) {  // a row is one repeat: the whole tile in one instruction, no scalar wait", *calls,
        "#if __NPU_ARCH__ == 2002",
        f"        AscendC::ReduceRepeat<AscendC::ReduceType::{kind}>({st.dst}[r * STAT_SLOT], "
        f"{src}[r * pitch], static_cast<int32_t>(len),",
        f"                                                  n, {stride}, 1, static_cast<int32_t>(pitch / 8)"
        f"{order});",
        "#else",
        "        // the results side by side, then each one filling the first block of its row's slot",
        f"        AscendC::ReduceRepeat<AscendC::ReduceType::{kind}>(dense, {src}[r * pitch], "
        f"static_cast<int32_t>(len), n, 1, 1,",
        f"                                                  static_cast<int32_t>(pitch / 8){order});",
        brcb,
        "#endif",
        "    }",
        "}",
        "#if __NPU_ARCH__ != 2002",
        f"else if (len <= {FOLD_MAX}) {{  // each row's 64-column chunks combined into fold, then as above",
        "    const uint8_t rowBlocks = static_cast<uint8_t>(pitch / 8);", *calls[1:],
        "        // chunk 0 copied (max(x, x) = x); a short last chunk leaves the lanes past it as they are",
        f"        AscendC::Max(fold, {src}[r * pitch], {src}[r * pitch], 64, static_cast<uint8_t>(n),",
        "                     {1, 1, 1, 8, rowBlocks, rowBlocks});",
        "        for (uint32_t c = 64; c < len; c += 64) {",
        f"            AscendC::{combine}(fold, fold, {src}[r * pitch + c], len - c < 64 ? len - c : 64, "
        "static_cast<uint8_t>(n),",
        "                         {1, 1, 1, 8, 8, rowBlocks});",
        "        }",
        f"        AscendC::ReduceRepeat<AscendC::ReduceType::{kind}>(dense, fold, 64, n, 1, 1, 8{order});",
        brcb,
        "    }",
        "}",
        "#endif",
        "else {  // the count form per row (it ends in a scalar wait)",
        "    for (uint32_t r = 0; r < rows; ++r) {",
        f"        AscendC::{st.api}({st.dst}[r * STAT_SLOT], {src}[r * pitch], reduceTmp, len);", "    }", "}")


def _emit_step(out: Lines, st: RowStep, split: bool) -> None:
    """One IR step as Ascend C; ``split`` chunks accumulate reductions across calls (``first``)."""
    cls = st.dst[0]
    count = {"r": "count", "s": "statCount", "v": "vecCount"}[cls]
    if st.api == "Duplicate":
        out(f"AscendC::Duplicate({st.dst}, {f32(st.scalar)}, {count});")
        return
    if st.form == "reduce":
        src = st.srcs[0]
        if not split:
            _tile_reduce(out, st)
            return
        combine = {"ReduceSum": "Add", "ReduceMax": "Max", "ReduceMin": "Min"}[st.api]
        kind = st.online[:1]
        if kind == ("shifted",):  # sum of (x - K)^2, K the row's first element; corrected after the pass
            x, scratch = st.online[1], st.online[3]
            out(f"if (first) shift = {x}.GetValue(0);",
                f"AscendC::Adds({scratch}, {x}, -shift, len);",
                "if (first) {", f"    AscendC::ReduceSum(shiftSum, {scratch}, reduceTmp, len);", "} else {",
                f"    AscendC::ReduceSum(partial, {scratch}, reduceTmp, len);",
                "    AscendC::Add(shiftSum, shiftSum, partial, 1);", "}",
                f"AscendC::Mul({scratch}, {scratch}, {scratch}, len);")
            src = scratch
        out("if (first) {", f"    AscendC::{st.api}({st.dst}, {src}, reduceTmp, len);", "} else {",
            f"    AscendC::{st.api}(partial, {src}, reduceTmp, len);")
        if kind == ("max",):  # the max so far, for the online sum's rescale
            out(f"    AscendC::Adds(prevMax, {st.dst}, 0.0f, 1);")
        if kind == ("sum",):  # the sum so far was of exp(x - previous max): rescale it to the new max
            out(f"    AscendC::Sub(prevMax, prevMax, {st.online[1]}, 1);", "    AscendC::Exp(prevMax, prevMax, 1);",
                f"    AscendC::Mul({st.dst}, {st.dst}, prevMax, 1);")
        out(f"    AscendC::{combine}({st.dst}, {st.dst}, partial, 1);  // the chunks so far", "}")
        if kind == ("max",):  # a row of -inf so far sums to 0 about the lowest finite max, not to NaN
            out(f"AscendC::Maxs({st.dst}, {st.dst}, -3.40282347e+38f, 1);")
        return
    if st.form == "scalar":
        per_row = ["for (uint32_t r = 0; r < rows; ++r) {",
                   f"    const float s = {st.stat}.GetValue(r * STAT_SLOT);",
                   f"    AscendC::{st.api}({st.dst}[r * pitch], {st.srcs[0]}[r * pitch], s, len);", "}"]
        if split:
            out(*per_row)
            return
        binary = {"Adds": "Add", "Muls": "Mul", "Maxs": "Max", "Mins": "Min"}[st.api]
        out("#if __NPU_ARCH__ != 2002",
            f"if (len <= {FOLD_MAX}) {{  // each row's statistic fills a block of its slot: one instruction per tile "
            "and 64 columns",
            "    const uint8_t rowBlocks = static_cast<uint8_t>(pitch / 8);",
            *_row_calls("uint8_t"),
            "        for (uint32_t c = 0; c < len; c += 64) {",
            f"            AscendC::{binary}({st.dst}[r * pitch + c], {st.srcs[0]}[r * pitch + c], "
            f"{st.stat}[r * STAT_SLOT],",
            "                         len - c < 64 ? len - c : 64, n, {1, 1, 0, rowBlocks, rowBlocks, 2});",
            "        }",
            "    }",
            "} else {")
        with out.indent():
            out(*per_row)
        out("}", "#else")
        out(*per_row)
        out("#endif")
        return
    if st.form == "vec":
        args = ", ".join(_row_at(s) for s in st.srcs)
        per_row = ["for (uint32_t r = 0; r < rows; ++r) {", f"    AscendC::{st.api}({st.dst}[r * pitch], {args}, len);",
                   "}"]
        if split:
            out(*per_row)
            return
        # The weight row at repeat stride 0 against every row of the tile: one instruction per 64 columns.
        chunk = ", ".join(f"{s}[c]" if s[0] == "v" else f"{s}[r * pitch + c]" for s in st.srcs)
        strides = ", ".join("0" if s[0] == "v" else "rowBlocks" for s in st.srcs)
        out(f"if (len <= {FOLD_MAX}) {{",
            "    const uint8_t rowBlocks = static_cast<uint8_t>(pitch / 8);",
            *_row_calls("uint8_t"),
            "        for (uint32_t c = 0; c < len; c += 64) {",
            f"            AscendC::{st.api}({st.dst}[r * pitch + c], {chunk}, len - c < 64 ? len - c : 64, n,",
            f"                         {{1, 1, 1, rowBlocks, {strides}}});",
            "        }", "    }", "} else {")
        with out.indent():
            out(*per_row)
        out("}")
        return
    srcs = ", ".join(st.srcs)
    mask = "template ReinterpretCast<uint8_t>()"
    if st.api == "Compare":
        out(f"AscendC::Compare({st.dst}.{mask}, {srcs}, AscendC::CMPMODE::{st.mode}, CompareCount({count}));")
    elif st.api == "Compares":
        out(f"AscendC::Compares({st.dst}.{mask}, {srcs}, {f32(st.scalar)}, AscendC::CMPMODE::{st.mode}, "
            f"CompareCount({count}));")
    elif st.api == "Select":
        m, a, b = st.srcs
        out(f"AscendC::Select({st.dst}, {m}.{mask}, {a}, {b}, AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, {count});")
    elif st.api == "CastToInt":  # the register's bytes as int32
        out(f"AscendC::Cast({st.dst}.template ReinterpretCast<int32_t>(), {srcs}, AscendC::RoundMode::CAST_{st.mode}, "
            f"{count});")
    elif st.api == "CastFromInt":
        out(f"AscendC::Cast({st.dst}, {srcs}.template ReinterpretCast<int32_t>(), AscendC::RoundMode::CAST_NONE, "
            f"{count});")
    elif st.scalar_expr is not None:
        out(f"AscendC::{st.api}({st.dst}, {srcs}, td.{st.scalar_expr}, {count});")
    elif st.scalar is not None:
        out(f"AscendC::{st.api}({st.dst}, {srcs}, {f32(st.scalar)}, {count});")
    else:
        out(f"AscendC::{st.api}({st.dst}, {srcs}, {count});")


def kernel_source(k: RowKernel, rule: str, body_ops: list[str], sources: list[str]) -> str:
    ins, outs = _roles(k)
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
            _declare(out, k, hoisted_only=True)
            if vec_in:
                out("if (td.chunkLength == 0) {  // staged through the register buffer, free until the first tile")
                for i in vec_in:
                    out(f"    LoadWeight({ins[i]}Gm, {in_reg[i]}, regBuf.Get<T>(), vecCount, td.rowLength);")
                out("}")
            for st in k.hoisted:
                if st.api == "Duplicate":
                    _emit_step(out, st, False)
            if any(st.api != "Duplicate" for st in k.hoisted):
                out("if (td.chunkLength == 0) {")
                with out.indent():
                    for st in k.hoisted:
                        if st.api != "Duplicate":
                            _emit_step(out, st, False)
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
        _compute_rows(out, k, ins, outs, io_in, row_out, stat_out, in_reg)
        _split(out, k, ins, outs, io_in, vec_in, row_out, stat_out, in_reg)
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


def _declare(out: Lines, k: RowKernel, hoisted_only: bool = False) -> None:
    """Register views: sK in statBuf, vK in vecBuf, and (for Init) the row registers the hoisted steps write."""
    if k.num_regs["stat"]:
        out("AscendC::LocalTensor<float> stats = statBuf.Get<float>();")
    for j in range(k.num_regs["stat"]):
        out(f"AscendC::LocalTensor<float> s{j} = stats[{j} * td.statStride];")
    if k.num_regs["vec"]:
        out("AscendC::LocalTensor<float> vecs = vecBuf.Get<float>();")
    for j in range(k.num_regs["vec"]):
        out(f"AscendC::LocalTensor<float> v{j} = vecs[{j} * td.vecStride];")
    if hoisted_only:
        rows = sorted({st.dst for st in k.hoisted if st.dst[0] == "r"}, key=lambda n: int(n[1:]))
        if rows:
            out("AscendC::LocalTensor<float> regs = regBuf.Get<float>();")
        for r in rows:
            out(f"AscendC::LocalTensor<float> {r} = regs[{row_slots(k)[r]} * td.tileStride];")


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


def _slot(k: RowKernel, reg: str, split: bool) -> str:
    """Row register ``reg``'s storage: its slot, or, where an fp32 I/O tile may hold it, ``TileOrSlot`` (the
    slot is then not in the buffer, and the fp32 cast helpers ignore the argument)."""
    tile = reg in tile_inputs(k) or (not split and reg in direct_outputs(k))
    slot = row_slots(k)[reg]
    return f"TileOrSlot(regs, {slot})" if tile else f"regs[{slot} * td.tileStride]"


def _compute_head(out: Lines, k: RowKernel, ins, outs, io_in, in_reg, split: bool, final: bool) -> None:
    out("AscendC::LocalTensor<float> regs = regBuf.Get<float>();",
        "AscendC::LocalTensor<float> reduceTmp = tmpBuf.Get<float>();")
    _declare(out, k)
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


def _compute_rows(out: Lines, k: RowKernel, ins, outs, io_in, row_out, stat_out, in_reg) -> None:
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
            _emit_step(out, st, False)
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


def _split(out: Lines, k: RowKernel, ins, outs, io_in, vec_in, row_out, stat_out, in_reg) -> None:
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
                    _emit_step(out, st, True)
            # Program order: a reduction reads its source before a later step may reuse that register. An online
            # sum's max is negated per chunk, as it grows.
            negs = [st for st in k.steps if st.online == ("neg",) and any(
                r.online[:1] == ("sum",) for r in reduces)]
            # A shifted variance reads x right after the sum of x does (a later step may overwrite x in place).
            wanted = {id(st) for st in chunk_steps + reduces + negs if st.online[:1] != ("shifted",)}
            for st in (st for st in k.steps if id(st) in wanted):
                _emit_step(out, st, True)
                for v in (v for v in reduces if v.online[:1] == ("shifted",) and v.online[2] == st.dst):
                    _emit_step(out, v, True)
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
                _declare(out, k)
                if shifted:
                    out(f"AscendC::LocalTensor<float> partial = stats[{max(1, k.num_regs['stat'])} * td.statStride];",
                        f"AscendC::LocalTensor<float> shiftSum = stats[{max(1, k.num_regs['stat']) + 2} * "
                        "td.statStride];")
                for st in shifted:  # sum (x - mean)^2 = sum (x - K)^2 - (sum (x - K))^2 / n
                    out("AscendC::Mul(partial, shiftSum, shiftSum, 1);",
                        "AscendC::Muls(partial, partial, td.invLength, 1);",
                        f"AscendC::Sub({st.dst}, {st.dst}, partial, 1);")
                for st in after:
                    _emit_step(out, st, True)
            out("}", "")
    if stat_out:
        out("// Split mode: a row's statistics once its last reduction is done.",
            "__aicore__ inline void FinishStats(uint64_t at)", "{")
        with out.indent():
            _declare(out, k)
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


def _shape_lists(data: list[int], full: list[int], storage: bool) -> list[str]:
    """The shapes of the data-carrying and full inputs (TilingContext hands StorageShapes, InferShape Shapes)."""
    def ref(i: int) -> str:
        return f"&context->GetInputShape({i})->GetStorageShape()" if storage else f"context->GetInputShape({i})"
    return [f"const gert::Shape* data[{len(data)}] = {{{', '.join(ref(i) for i in data)}}};",
            f"const gert::Shape* full[{max(1, len(full))}] = {{{', '.join(ref(i) for i in full) or 'nullptr'}}};"]


def host_source(k: RowKernel, compute_units: list[str]) -> str:
    """op_host/<op>.cpp: OpDef, InferShape, InferDataType and TilingFunc."""
    ins, outs = _roles(k)
    types = [GE_TYPES[IO_TYPES[d][0]] for d in k.dtypes]
    bc = list(k.broadcast_inputs)
    full = [i for i, x in enumerate(k.inputs) if x.kind == "full"]
    data = list(k.data_inputs)
    out = Lines()
    out(f"// Generated by asc-onnx: host side of {k.op_type} (OpDef, shape and dtype inference, tiling).",
        *(["#include <cstring>"] if k.num_params else []),
        '#include "register/op_def_registry.h"', '#include "tiling/platform/platform_ascendc.h"',
        f'#include "{k.snake}_tiling_calc.h"', "", "namespace {",
        "// The data's shape: the broadcast of the inputs that carry rows. Inputs read as full tensors must have",
        "// it exactly, mask inputs may repeat along leading axes; any other shape is refused.",
        "bool DataDims(const gert::Shape* const* data, size_t nData, const gert::Shape* const* full, size_t nFull,",
        "              uint64_t* dims, uint32_t& rank)", "{")
    with out.indent():
        out("rank = 0;",
            "for (size_t i = 0; i < nData; ++i) {",
            "    const uint32_t r = static_cast<uint32_t>(data[i]->GetDimNum());",
            "    if (r > 8) return false;",
            "    if (r > rank) rank = r;",
            "}",
            "for (uint32_t d = 0; d < rank; ++d) dims[d] = 1;",
            "for (size_t i = 0; i < nData; ++i) {",
            "    const uint32_t r = static_cast<uint32_t>(data[i]->GetDimNum());",
            "    for (uint32_t d = 0; d < r; ++d) {",
            "        const uint64_t v = static_cast<uint64_t>(data[i]->GetDim(d));",
            "        uint64_t& o = dims[rank - r + d];",
            "        if (o == 1) o = v;",
            "        else if (v != 1 && v != o) return false;",
            "    }",
            "}",
            "for (size_t i = 0; i < nFull; ++i) {",
            "    if (full[i]->GetDimNum() != rank) return false;",
            "    for (uint32_t d = 0; d < rank; ++d) {",
            "        if (static_cast<uint64_t>(full[i]->GetDim(d)) != dims[d]) return false;",
            "    }",
            "}",
            "return true;")
    out("}", "}  // namespace", "", "namespace optiling {",
        "static ge::graphStatus TilingFunc(gert::TilingContext* context)", "{")
    with out.indent():
        out(*platform_lines(k.uses_select),
            *_shape_lists(data, full, storage=True),
            "uint64_t dims[8] = {0};",
            "uint32_t rank = 0;",
            f"if (!DataDims(data, {len(data)}, full, {len(full)}, dims, rank)) return ge::GRAPH_FAILED;",
            f"uint64_t bcastDimsStore[{max(1, len(bc))}][8] = {{{{0}}}};",
            f"const uint64_t* bcastDims[{max(1, len(bc))}] = {{nullptr}};",
            f"uint32_t bcastRanks[{max(1, len(bc))}] = {{0}};")
        for j, i in enumerate(bc):
            out(f"const gert::Shape& bcastShape{j} = context->GetInputShape({i})->GetStorageShape();",
                f"bcastRanks[{j}] = static_cast<uint32_t>(bcastShape{j}.GetDimNum());",
                f"if (bcastRanks[{j}] > 8) return ge::GRAPH_FAILED;",
                f"for (uint32_t i = 0; i < bcastRanks[{j}]; ++i) bcastDimsStore[{j}][i] = "
                f"static_cast<uint64_t>(bcastShape{j}.GetDim(i));",
                f"bcastDims[{j}] = bcastDimsStore[{j}];")
        vec_checks = [i for i, x in enumerate(k.inputs) if x.kind == "vec"]
        call = tiling_call(k, "dims", "rank", str(k.row_dims), "bcastDims", "bcastRanks", "dtypeSize", "coreNum",
                           "ubBytes", "hasDataCopyPad", "tiling")
        out("const uint32_t dtypeSize = context->GetInputDesc(0)->GetDataType() == ge::DT_FLOAT ? 4 : 2;",
            f"auto* tiling = context->GetTilingData<{struct_name(k)}>();",
            f"if ({call} != 0) {{", "    return ge::GRAPH_FAILED;", "}",
            *[f"if (static_cast<uint64_t>(context->GetInputShape({i})->GetStorageShape().GetShapeSize()) != "
              "tiling->rowLength) return ge::GRAPH_FAILED;  // a weight row" for i in vec_checks],
            *param_lines(k.num_params),
            *LAUNCH_LINES)
    out("}", "}  // namespace optiling", "", "namespace ge {",
        "static graphStatus InferShape(gert::InferShapeContext* context)", "{")
    with out.indent():
        out(*_shape_lists(data, full, storage=False), "uint64_t dims[8] = {0};", "uint32_t rank = 0;",
            f"if (!DataDims(data, {len(data)}, full, {len(full)}, dims, rank)) return GRAPH_FAILED;")
        for o, kd in enumerate(k.output_kinds):
            out(f"gert::Shape* out{o} = context->GetOutputShape({o});", f"out{o}->SetDimNum(rank);",
                "for (uint32_t d = 0; d < rank; ++d) "
                + (f"out{o}->SetDim(d, static_cast<int64_t>(dims[d]));" if kd == "row" else
                   f"out{o}->SetDim(d, d + {k.row_dims} >= rank ? 1 : static_cast<int64_t>(dims[d]));  // per row"))
        out("return GRAPH_SUCCESS;")
    out("}", "")
    infer_dtype_and_opdef(out, k.op_type, ins, outs, types, compute_units, k.num_params)
    return out.text()


def tiling_call(k: RowKernel, dims: str, rank: str, row_dims: str, bcast_dims: str, bcast_ranks: str,
                dtype_size: str, core_num: str, ub: str, has_pad: str, out: str) -> str:
    """The call of ``<op>ComputeTiling`` with these argument expressions: its signature in one place, for the
    host's TilingFunc and the emulator's driver."""
    return (f"{k.op_type}ComputeTiling({dims}, {rank}, {row_dims}, {bcast_dims}, {bcast_ranks}, {dtype_size}, "
            f"{core_num}, {ub}, {has_pad}, {out})")
