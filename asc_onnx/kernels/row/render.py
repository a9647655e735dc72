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
    LAUNCH_LINES,
    helpers_header,
    infer_dtype_and_opdef,
    param_lines,
    platform_lines,
    struct_name,
    tiling_struct,
)
from ..text import Lines
from .kernel import _COPIES_TEXT, COPIES_HEADER, kernel_source, roles
from .lower import MAX_LEAD, RowKernel
from .schedule import (
    BUFFERINGS,
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


def _shape_lists(data: list[int], full: list[int], storage: bool) -> list[str]:
    """The shapes of the data-carrying and full inputs (TilingContext hands StorageShapes, InferShape Shapes)."""
    def ref(i: int) -> str:
        return f"&context->GetInputShape({i})->GetStorageShape()" if storage else f"context->GetInputShape({i})"
    return [f"const gert::Shape* data[{len(data)}] = {{{', '.join(ref(i) for i in data)}}};",
            f"const gert::Shape* full[{max(1, len(full))}] = {{{', '.join(ref(i) for i in full) or 'nullptr'}}};"]


def host_source(k: RowKernel, compute_units: list[str]) -> str:
    """op_host/<op>.cpp: OpDef, InferShape, InferDataType and TilingFunc."""
    ins, outs = roles(k)
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


__all__ = ["REFUSALS", "TILING_HEADER", "headers", "host_source", "kernel_source", "tiling_call", "tiling_calc",
           "tiling_header"]
