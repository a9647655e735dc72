"""The row kernel's compute steps as Ascend C: each step of the op's program (an elementwise op, a row
reduction, a per-row scalar op) over a tile's rows, and the register views they use."""

from __future__ import annotations

from ..text import Lines, f32
from .lower import RowKernel, RowStep
from .schedule import (
    FOLD_MAX,
    row_slots,
)


def row_at(name: str) -> str:
    """A row register at row r of the tile (vec registers are the same for every row)."""
    return name if name[0] == "v" else f"{name}[r * pitch]"


#: Rows per repeat-strided call: at most 255 repeats, and a multiple of 8 so each call's Brcb fills whole groups
#: of 8 slots of its own.
ROWS_PER_CALL = 248


def row_calls(ctype: str) -> list[str]:
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
             *row_calls("int32_t")]
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


def emit_step(out: Lines, st: RowStep, split: bool) -> None:
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
            *row_calls("uint8_t"),
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
        args = ", ".join(row_at(s) for s in st.srcs)
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
            *row_calls("uint8_t"),
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


def declare(out: Lines, k: RowKernel, hoisted_only: bool = False) -> None:
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
