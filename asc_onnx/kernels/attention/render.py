"""The Ascend C of an attention op (910B, mixed AIC/AIV): flash attention, one Q block of one head per work item.

Each vector core takes work items (head, Q block) in turn and walks the keys in KV blocks. For each block the cube
computes the scores ``S = Q_blk @ K_blk^T`` in fp32 into a stage of this core's workspace; the vector core scales
them, adds the mask, keeps each row's running max and sum in fp32 (the online softmax) and writes the unnormalized
probabilities P in the I/O type beside them; the cube computes ``P @ V_blk`` in fp32 into a third stage; the vector
core rescales its fp32 accumulator of the rows' outputs by how far the running max moved and adds the block's; after
the last block it divides by the sums and writes y once. Two stages of each: the cube computes the next block's
scores and the last block's ``P @ V`` while the vector core works on this one. The workspace is a ring of a few
hundred KB per core, whatever the sequence length.
"""

from __future__ import annotations

from ..ir import IO_TYPES
from ..skeleton import (
    CUBE_PLATFORM_LINES,
    GE_TYPES,
    banner,
    cube_host_head,
    cube_host_tail,
    infer_dtype_and_opdef,
    struct_name,
    tiling_struct,
)
from ..text import Lines, f32
from .lower import AttentionKernel

#: What each non-zero return of ``<op>ComputeTiling`` means.
REFUSALS = {
    1: "bad sizes",
    2: "no Matmul tiling fits",
    3: "310P: the coupled attention kernel is not built (the region keeps its smaller fusions)",
    4: "the buffers of one KV block's score rows do not fit in UB",
    5: "the mask's leading dims neither match q's nor broadcast",
    6: "the mask broadcasts along the keys (its last dim is 1)",
    7: "v's head dim is not a multiple of 8 (the fp32 output rows are whole 32-byte blocks)",
    8: "k given transposed has more than 65535 keys (the cube's ND row pitch is 16 bits)",
    9: "the keep mask's shape is not the additive mask's",
}

#: Q rows of a work item at most (the cube's M of both products).
MAX_BLOCK = 128
#: Keys per KV block when the sequence is longer (the scores' N): the block's rows are whole 64-float repeats.
KV_BLOCK = 1024
#: Decode's split of the keys over cores: parts at most, and the costs (in keys) the choice weighs: a unit's own
#: overhead, a split's (SyncAll and the combine's start) and each part's in the combine.
MAX_SPLITS = 32
UNIT_KEYS = 512
SPLIT_KEYS = 1024
PART_KEYS = 64


def tiling_header(k: AttentionKernel) -> str:
    """op_kernel/<op>_tiling.h: two cube tilings and the walk over items and KV blocks."""
    fields = [
        "AscendC::tiling::TCubeTiling qkTiling;  // scores = q @ k^T of one Q block and one KV block",
        "AscendC::tiling::TCubeTiling pvTiling;  // o = P @ v of one Q block and one KV block (fp32)",
        "uint32_t kvHeads;        // heads of k and v (the dim before Sk; grouped-query attention: q's / group)",
        "uint32_t group;          // query heads per KV head",
        "uint32_t foldHeads;      // decode with grouped KV heads: an item is a KV head's group of query heads",
        "uint32_t itemHeads;      // heads an item walks per batch (heads, or kvHeads when folded)",
        "uint32_t headRows;       // query rows per such head (sq, or group when folded)",
        "uint32_t sk;             // key rows per head",
        "uint32_t d;              // head dim of q and k",
        "uint32_t dv;             // head dim of v and y",
        "uint32_t mBlock;         // Q rows per work item",
        "uint32_t qBlocks;        // Q blocks per head",
        "uint32_t items;          // work items: heads of every batch x qBlocks",
        "uint32_t splits;         // parts of the keys per item, on cores of their own (decode), combined after",
        "uint32_t partKeys;       // keys per part (the last part may have fewer)",
        "uint32_t units;          // items x splits: what the vector cores take in turn",
        "uint32_t cores;          // vector cores that take units",
        "uint32_t kvBlock;        // keys per KV block",
        "uint32_t kvBlocks;       // KV blocks per part at most",
        "uint32_t chunkRows;      // score rows the vector core takes into UB at a time",
        "uint32_t rowPitch;       // kvBlock rounded up to 16: 32-byte rows in UB in half and in float",
        "uint32_t partials;       // per row: one max or sum per 64 keys, rounded up to a block of 8",
        "uint32_t outRows;        // output rows the vector core takes into UB at a time",
        "uint32_t scoreStage;     // mBlock x kvBlock: elements of one stage of scores or P",
        "uint32_t outStage;       // mBlock x dv: elements of one stage of P @ v",
        "uint64_t maskBatchStride;  // mask elements from one batch to the next (0: broadcast)",
        "uint64_t maskHeadStride;   // ... from one head to the next",
        "uint64_t maskRowStride;    // ... from one query row to the next",
        "uint64_t wsCoreBytes;    // one vector core's workspace: two stages of scores (fp32), of P and of P @ v",
        "uint64_t partBytes;      // after every core's: each unit's rows of output and their max and sum (fp32)",
        "uint64_t userWorkspace;  // bytes of user workspace: every vector core's",
        "uint32_t blockDim;       // launch: cube cores (two vector cores each)",
    ]
    if k.num_params:
        fields.append(f"float param[{k.num_params}];  // the op's scalars, from the node's p0.. attributes (fp32 bits)")
    return tiling_struct(k.op_type, k.snake, struct_name(k), fields, " (attention)",
                         includes=("kernel_tiling/kernel_tiling.h",))


def tiling_call(k: AttentionKernel, q_dims: str, q_rank: str, sk: str, kv_heads: str, dv: str, mask_dims: str,
                mask_rank: str, dtype_size: str, is_float: str, is_bf16: str, core_num: str, platform: str,
                coupled: str, out: str) -> str:
    """The call of ``<op>ComputeTiling``: its signature in one place, for the host and the emulator's driver."""
    return (f"{k.op_type}ComputeTiling({q_dims}, {q_rank}, {sk}, {kv_heads}, {dv}, {mask_dims}, {mask_rank}, "
            f"{dtype_size}, {is_float}, {is_bf16}, {core_num}, {platform}, {coupled}, {out})")


def tiling_calc(k: AttentionKernel) -> str:
    """op_host/<op>_tiling_calc.h: shapes to the item walk, the KV blocks, the UB chunks and the two cube tilings."""
    s = struct_name(k)
    refusals = "\n".join(f"// {c} {w}," for c, w in REFUSALS.items())
    mask_in = f"{4 if k.has_keep else 2}u * dtypeSize" if k.has_mask else "0u"  # (and the keep mask's)
    mask_row = "pitch * 4u" if k.has_mask else "0u"
    kv_block = f"sk <= {KV_BLOCK}u ? sk : {KV_BLOCK}u"
    return f"""// Generated by asc-onnx: tiling arithmetic of {k.op_type} (attention).
// A plain function of shapes and platform numbers: the CANN host tiling and the asc-onnx emulator
// compile this same code.
#pragma once
#include <cstdint>
#include "tiling/tiling_api.h"
#include "../op_kernel/{k.snake}_tiling.h"

// One product's tiling for a single core: the kernel walks its own items, so the whole product is one core's.
inline bool {k.op_type}CubeTiling(uint32_t m, uint32_t n, uint32_t k, bool transB, matmul_tiling::DataType in,
        matmul_tiling::DataType out, const matmul_tiling::PlatformInfo& platform,
        AscendC::tiling::TCubeTiling& tiling)
{{
    using matmul_tiling::TPosition;
    using matmul_tiling::CubeFormat;
    matmul_tiling::MultiCoreMatmulTiling mm(platform);
    mm.SetDim(1);
    mm.SetAType(TPosition::GM, CubeFormat::ND, in);
    mm.SetBType(TPosition::GM, CubeFormat::ND, in, transB);
    mm.SetCType(TPosition::GM, CubeFormat::ND, out);
    mm.SetBiasType(TPosition::GM, CubeFormat::ND, out);
    mm.SetOrgShape(static_cast<int32_t>(m), static_cast<int32_t>(n), static_cast<int32_t>(k));
    mm.SetShape(static_cast<int32_t>(m), static_cast<int32_t>(n), static_cast<int32_t>(k));
    mm.EnableBias(false);
    mm.SetMatmulConfigParams(0);  // NORM, as the kernel's Matmul objects
    // The two objects start at one shared L1 address (InitShareBufStart): each may use all of L1.
    mm.SetBufferSpace(static_cast<int32_t>(platform.l1Size), static_cast<int32_t>(platform.l0CSize), -1);
    if (mm.GetTiling(tiling) == -1) return false;
    return tiling.baseM > 0 && tiling.baseN > 0 && tiling.baseK > 0;
}}

// UB bytes of a vector core with Q blocks of m rows and chunks of `rows` score rows of `pitch` keys (split: the
// keys in parts, each part's rows of output and statistics leave through a queue of their own).
inline uint64_t {k.op_type}UbBytes(uint64_t m, uint64_t rows, uint64_t pitch, uint64_t partials, uint64_t dv,
        uint64_t outRows, uint32_t dtypeSize, bool split = false)
{{
    const uint64_t rows8 = (rows + 7u) / 8u * 8u;
    const uint64_t spread = rows > outRows ? rows8 : (outRows + 7u) / 8u * 8u;
    const uint64_t tiles = rows * pitch * (2u * 4u + 2u * dtypeSize + {mask_in});  // scores, P, mask: two each
    const uint64_t stats = (rows * partials + rows8 * 10u + spread * 8u) * 4u;  // partials, tails, lines, blocks
    const uint64_t state = (6u * m + 8u) * 4u;  // running max and sum, two lines of rescales and of 1 / sum
    const uint64_t acc = m * dv * 4u;          // the rows' output in fp32
    const uint64_t outs = 2u * outRows * dv * (4u + dtypeSize);  // P @ v in, y out: two each
    const uint64_t part = split ? outRows * dv * 4u : 0u;
    return tiles + stats + state + acc + outs + part + {mask_row};  // and a mask row in fp32
}}

// Returns 0, or why the shape is refused:
{refusals}
inline int {k.op_type}ComputeTiling(const uint64_t* qDims, uint32_t qRank, uint32_t sk, uint32_t kvHeads, uint32_t dv,
        const uint64_t* maskDims, uint32_t maskRank, uint32_t dtypeSize, bool isFloat, bool isBf16, uint32_t coreNum,
        const matmul_tiling::PlatformInfo& platform, bool coupled, {s}* t)
{{
    if (qRank < 3 || coreNum == 0) return 1;
    uint64_t batch = 1;
    for (uint32_t i = 0; i + 3 < qRank; ++i) batch *= qDims[i];
    const uint64_t heads = qDims[qRank - 3], sq = qDims[qRank - 2], d = qDims[qRank - 1];
    if (batch * heads == 0 || sq == 0 || sk == 0 || d == 0 || dv == 0 || kvHeads == 0 || heads % kvHeads != 0) {{
        return 1;
    }}
    if (coupled) return 3;
    if (dv % 8u != 0) return 7;
    if ({'false' if k.trans_k else 'true'} && sk > 65535u) return 8;  // k^T's rows are Sk apart
    // The mask, its dims aligned to the scores' [.., heads, sq, sk]: a dim of 1 broadcasts (stride 0).
    t->maskBatchStride = 0;
    t->maskHeadStride = 0;
    t->maskRowStride = 0;
    if (maskRank > 0) {{
        if (maskRank > qRank) return 5;
        auto dim = [&](uint32_t fromEnd) {{ return fromEnd < maskRank ? maskDims[maskRank - 1 - fromEnd] : 1u; }};
        if (dim(0) != sk) return dim(0) == 1u ? 6 : 5;
        uint64_t lead = 1;
        for (uint32_t i = 3; i < maskRank; ++i) lead *= dim(i);
        if (lead != 1u && lead != batch) return 5;
        for (uint32_t i = 3; i < maskRank; ++i) {{
            if (dim(i) != 1u && dim(i) != qDims[qRank - 1 - i]) return 5;
        }}
        if ((dim(1) != 1u && dim(1) != sq) || (dim(2) != 1u && dim(2) != heads)) return 5;
        t->maskRowStride = dim(1) == 1u ? 0u : sk;
        t->maskHeadStride = dim(2) == 1u ? 0u : dim(1) * sk;
        t->maskBatchStride = lead == 1u ? 0u : dim(2) * dim(1) * sk;
    }}
    t->kvHeads = kvHeads;
    t->group = static_cast<uint32_t>(heads / kvHeads);
    t->sk = sk;
    t->d = static_cast<uint32_t>(d);
    t->dv = dv;
    // Output rows a chunk: 16 (8 past a head dim of 128), a multiple of 8 (the state's lines from 8-row bounds).
    auto outRows = [&](uint32_t m) {{
        const uint32_t rows = dv > 128u ? 8u : 16u;
        return rows < m ? rows : m;
    }};
    uint32_t pitch = 0;
    auto fits = [&](uint32_t m, uint32_t rows, bool split = false) {{
        return {k.op_type}UbBytes(m, rows, pitch, t->partials, dv, outRows(m), dtypeSize, split) <= platform.ubSize;
    }};
    // KV blocks of {KV_BLOCK} keys, or halved until chunks of 8 rows fit UB (fp32 scores of fp32 I/O take more).
    uint32_t kv = {kv_block};
    for (;;) {{
        pitch = (kv + 15u) / 16u * 16u;
        t->partials = ((pitch + 63u) / 64u + 7u) / 8u * 8u;
        if (fits(16u, 8u) || kv <= 64u) break;
        kv = kv / 2u < 64u ? 64u : kv / 2u / 64u * 64u;
    }}
    if (kv > 4096u) return 4;  // a row's partials are one ReduceRepeat of at most 64
    t->kvBlock = kv;
    t->kvBlocks = (sk + kv - 1u) / kv;
    t->rowPitch = pitch;
    // Q blocks of {MAX_BLOCK}, 64, 32 or 16 rows (the cube's M): the fewest rows on the busiest vector core, each
    // item counted 16 rows more for its own overhead (two products a KV block, their messages and waits), among
    // the blocks whose UB takes chunks of 8 score rows.
    // Decode (one query row) with grouped KV heads: a KV head's group of query heads, consecutive rows of q and y,
    // is one item, so the cube reads each KV block once for the group and fewer items wait on cores (not where a
    // Tile repeated the heads: a KV head's query heads lie kvHeads apart).
    t->foldHeads = sq == 1u && t->group > 1u && {'false' if k.kv_tiled else 'true'} ? 1u : 0u;
    t->itemHeads = t->foldHeads ? kvHeads : static_cast<uint32_t>(heads);
    t->headRows = t->foldHeads ? t->group : static_cast<uint32_t>(sq);
    if (t->foldHeads) {{  // an item's rows are heads: the mask steps a head a row
        t->maskRowStride = t->maskHeadStride;
        t->maskHeadStride *= t->group;
    }}
    const uint64_t headRows = t->headRows;
    auto blocks = [&](uint32_t m) {{ return static_cast<uint32_t>((headRows + m - 1u) / m); }};
    uint32_t mBlock = 0;
    uint64_t best = ~0ull;
    for (uint32_t m = {MAX_BLOCK}u; m >= 16u; m /= 2u) {{
        if (m > 16u && m / 2u >= headRows) continue;  // a block no taller than the rows need
        if (!fits(m, 8u)) continue;
        const uint64_t rounds = (batch * t->itemHeads * blocks(m) + coreNum - 1u) / coreNum;
        if (rounds * (m + 16u) < best) {{
            best = rounds * (m + 16u);
            mBlock = m;
        }}
    }}
    if (mBlock == 0) return 4;
    t->mBlock = mBlock;
    t->outRows = outRows(mBlock);
    uint32_t rows = mBlock;  // the whole block, or a multiple of 8 rows (the state's lines at 8-row boundaries)
    if (!fits(mBlock, rows)) {{
        rows = rows / 8u * 8u;
        while (rows > 8u && !fits(mBlock, rows)) rows -= 8u;
    }}
    t->chunkRows = rows;
    t->qBlocks = blocks(mBlock);
    const uint64_t items = batch * t->itemHeads * t->qBlocks;
    if (items > 0xFFFFFFFFu) return 1;
    t->items = static_cast<uint32_t>(items);
    // Decode (an item of at most 16 query rows): the keys in parts on cores of their own when items are too few
    // to fill the cores, combined after a SyncAll. Parts of whole 64-key repeats; the split with the fewest keys on
    // the busiest core, each unit counted {UNIT_KEYS} keys more (its products' messages and waits, the pipeline's
    // fill) and a split {SPLIT_KEYS} more plus {PART_KEYS} a part (the barrier and the combine).
    t->splits = 1u;
    t->partKeys = sk;
    if (t->qBlocks == 1u && headRows <= 16u && fits(mBlock, rows, true)) {{
        uint64_t bestCost = ~0ull;
        for (uint32_t want = 1u; want <= {MAX_SPLITS}u; ++want) {{
            const uint32_t keys = ((sk + want - 1u) / want + 63u) / 64u * 64u;
            const uint32_t parts = (sk + keys - 1u) / keys;
            if (parts != want) continue;  // (no empty part)
            if (2u * parts * 16u > rows * t->rowPitch) break;  // the combine's statistics fit one score tile
            const uint64_t rounds = (items * parts + coreNum - 1u) / coreNum;
            const uint64_t combine = parts > 1u ? {SPLIT_KEYS}u + {PART_KEYS}u * parts : 0u;
            const uint64_t cost = rounds * (keys + {UNIT_KEYS}u) + combine;
            if (cost < bestCost) {{
                bestCost = cost;
                t->splits = parts;
                t->partKeys = keys;
            }}
        }}
    }}
    if (t->splits > 1u) t->kvBlocks = (t->partKeys + kv - 1u) / kv;
    const uint64_t units = items * t->splits;
    if (units > 0xFFFFFFFFu) return 1;
    t->units = static_cast<uint32_t>(units);
    using matmul_tiling::DataType;
    const auto in = isFloat ? DataType::DT_FLOAT : (isBf16 ? DataType::DT_BF16 : DataType::DT_FLOAT16);
    if (!{k.op_type}CubeTiling(mBlock, t->kvBlock, static_cast<uint32_t>(d), {'true' if k.trans_k else 'false'}, in,
            DataType::DT_FLOAT, platform, t->qkTiling)) return 2;
    if (!{k.op_type}CubeTiling(mBlock, dv, t->kvBlock, false, in, DataType::DT_FLOAT, platform, t->pvTiling)) return 2;
    const uint32_t cores = t->units < coreNum ? t->units : coreNum;
    t->blockDim = (cores + 1u) / 2u;  // a cube core serves two vector cores
    t->cores = 2u * t->blockDim;
    t->scoreStage = mBlock * t->kvBlock;
    t->outStage = mBlock * dv;
    t->wsCoreBytes = (2u * static_cast<uint64_t>(t->scoreStage) * (4u + dtypeSize) +
                      2u * static_cast<uint64_t>(t->outStage) * 4u + 31u) / 32u * 32u;
    t->partBytes = t->splits > 1u ? units * mBlock * (dv + 2u) * 4u : 0u;
    t->userWorkspace = t->cores * t->wsCoreBytes + t->partBytes;
    return 0;
}}
"""


def _scale_expr(k: AttentionKernel) -> str | None:
    """The C++ float expression of the scores' scale, or None for 1."""
    parts = []
    for t in k.scale:
        v = f"td.param[{t.index}]" if t.index is not None else f32(t.value)
        parts.append(f"(1.0f / {v})" if t.inverse else v)
    return " * ".join(parts) if parts else None


#: The kernel's helper that multiplies or adds a mask in the I/O type into the fp32 score rows.
ROWS_BY_MASK = """// rows x cols of scores (`pitch` floats apart) *= (isMul) or += a mask's rows (one for all where
// broadcast along the queries); `wide` holds a mask row widened to fp32, once where broadcast.
template <bool isMul, typename T>
__aicore__ inline void RowsByMask(const AscendC::LocalTensor<float>& scores, const AscendC::LocalTensor<T>& maskRows,
                                  const AscendC::LocalTensor<float>& wide, uint32_t rows, uint32_t cols, uint32_t pitch,
                                  bool broadcast)
{
    for (uint32_t r = 0; r < rows; ++r) {
        const AscendC::LocalTensor<float>& row = scores[r * pitch];
        if constexpr (std::is_same_v<T, float>) {
            if constexpr (isMul) {
                AscendC::Mul(row, row, maskRows[broadcast ? 0u : r * pitch], cols);
            } else {
                AscendC::Add(row, row, maskRows[broadcast ? 0u : r * pitch], cols);
            }
        } else {
            if (r == 0 || !broadcast) {
                AscendC::Cast(wide, maskRows[broadcast ? 0u : r * pitch], AscendC::RoundMode::CAST_NONE, cols);
            }
            if constexpr (isMul) {
                AscendC::Mul(row, row, wide, cols);
            } else {
                AscendC::Add(row, row, wide, cols);
            }
        }
    }
}

"""


def kernel_source(k: AttentionKernel, rule: str, body_ops: list[str], sources: list[str]) -> str:
    """op_kernel/<op>.cpp."""
    s = struct_name(k)
    cls = f"Kernel{k.op_type}"
    m = k.has_mask
    scale = _scale_expr(k)
    args = ", ".join(f"GM_ADDR {n}" for n in (*k.inputs, *k.outputs))
    trans = "true" if k.trans_k else "false"
    # k [.., Sk, D]: a KV block is rows c0.. of it; k^T [.., D, Sk]: its columns c0.., rows Sk apart (SetOrgShape).
    k_at = "it.kvHead0 * td.sk * td.d + static_cast<uint64_t>(c0) * td.d" if k.trans_k else \
        "it.kvHead0 * td.sk * td.d + c0"
    org_shape = "" if k.trans_k else (
        "            // k^T's rows are Sk keys apart, the scores' rows kvBlock apart (the cube keeps it)\n"
        "            mmQk.SetOrgShape(static_cast<int>(td.mBlock), static_cast<int>(td.sk), static_cast<int>(td.d),\n"
        "                             static_cast<int>(td.d), static_cast<int>(td.kvBlock));\n")
    keep = k.has_keep
    mask_init = "        maskGm.SetGlobalBuffer((__gm__ T*)mask);\n" if m else ""
    mask_init += "        keepGm.SetGlobalBuffer((__gm__ T*)keep);\n" if keep else ""
    mask_buf = ("        pipe.InitBuffer(inQueueMask, BUFFER_NUM, td.chunkRows * td.rowPitch * sizeof(T));\n"
                "        pipe.InitBuffer(maskBuf, td.rowPitch * sizeof(float));\n" if m else "")
    mask_buf += ("        pipe.InitBuffer(inQueueKeep, BUFFER_NUM, td.chunkRows * td.rowPitch * sizeof(T));\n"
                 if keep else "")
    mask_copy = """        // The rows' mask over this block's keys (broadcast along the queries: one row for all).
        const uint64_t maskBase = static_cast<uint64_t>(it.batch) * td.maskBatchStride +
                                  static_cast<uint64_t>(it.head) * td.maskHeadStride;
        AscendC::LocalTensor<T> maskLocal = inQueueMask.AllocTensor<T>();
        AscendC::DataCopyPadExtParams<T> maskPad{false, 0, 0, static_cast<T>(0)};
        const uint32_t maskRows = td.maskRowStride == 0 ? 1u : rows;
        const uint32_t maskBytes = cols * static_cast<uint32_t>(sizeof(T));
        const uint32_t maskGap = static_cast<uint32_t>((td.maskRowStride == 0 ? cols : td.maskRowStride) - cols) *
                                 static_cast<uint32_t>(sizeof(T));
        AscendC::DataCopyExtParams maskParams{static_cast<uint16_t>(maskRows), maskBytes, maskGap,
            (pitch * static_cast<uint32_t>(sizeof(T)) - (maskBytes + 31u) / 32u * 32u) / 32u, 0};
        const uint64_t at = maskBase + static_cast<uint64_t>(it.q0 + r0) * td.maskRowStride + c0;
        AscendC::DataCopyPad(maskLocal, maskGm[at], maskParams, maskPad);
        inQueueMask.EnQue(maskLocal);
""" if m else ""
    if keep:  # the keep mask has the additive mask's shape: the same rows
        mask_copy += """        AscendC::LocalTensor<T> keepLocal = inQueueKeep.AllocTensor<T>();
        AscendC::DataCopyPad(keepLocal, keepGm[at], maskParams, maskPad);
        inQueueKeep.EnQue(keepLocal);
"""
    keep_mul = ("        // x keep (1 or 0: Where(mask, scores, fill) is scores x keep + mask)\n"
                "        RowsByMask<true>(scoresLocal, keepLocal, maskF, rows, cols, pitch, td.maskRowStride == 0);\n"
                if keep else "")
    add_mask = (keep_mul + "        // + mask\n"
                "        RowsByMask<false>(scoresLocal, maskLocal, maskF, rows, cols, pitch, td.maskRowStride == 0);\n"
                if m else "")
    if scale:
        scale_lines = f"""        const float scale = {scale};
        if (whole) {{
            AscendC::Muls(scoresLocal, scoresLocal, scale, rows * cols);
        }} else {{
            for (uint32_t r = 0; r < rows; ++r) {{
                AscendC::Muls(scoresLocal[r * pitch], scoresLocal[r * pitch], scale, cols);
            }}
        }}
"""
    else:
        scale_lines = ""
    mask_deq = ("        AscendC::LocalTensor<T> maskLocal = inQueueMask.DeQue<T>();\n"
                "        AscendC::LocalTensor<float> maskF = maskBuf.Get<float>();\n" if m else "")
    mask_deq += "        AscendC::LocalTensor<T> keepLocal = inQueueKeep.DeQue<T>();\n" if keep else ""
    mask_free = "        inQueueMask.FreeTensor(maskLocal);\n" if m else ""
    mask_free += "        inQueueKeep.FreeTensor(keepLocal);\n" if keep else ""
    members_mask = ("    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueueMask;\n"
                    "    AscendC::TBuf<AscendC::TPosition::VECCALC> maskBuf;  // one mask row widened to fp32\n"
                    "    AscendC::GlobalTensor<T> maskGm;\n" if m else "")
    members_mask += ("    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueueKeep;\n"
                     "    AscendC::GlobalTensor<T> keepGm;\n" if keep else "")
    lowest = f32(-3.4028234663852886e38)
    # query head -> KV head: a Tile of the heads repeats them in turn, repeat_kv each one g times
    kv_of_head = "head % td.kvHeads" if k.kv_tiled else "head / td.group"
    return "\n".join(banner(k, rule, body_ops, sources, "attention")) + f"""
// Flash attention: per work item (one Q block of one head) and KV block the cube computes the scores into this
// core's workspace, the vector core keeps each row's running max and sum (online softmax, fp32) and writes P, the
// cube computes P @ v, and the vector core rescales and accumulates the rows' output in fp32, writing y once.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "{k.snake}_tiling.h"

namespace {{
constexpr int32_t BUFFER_NUM = 2;
constexpr float LOWEST = {lowest};  // a running max starts here: a row masked to -inf so far keeps exp() at 0

// fp32 values into the I/O type.
template <typename T>
__aicore__ inline void ToOutput(const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<float>& src,
                                uint32_t count)
{{
    if constexpr (std::is_same_v<T, float>) {{
        AscendC::Adds(dst, src, 0.0f, count);
    }} else if constexpr (std::is_same_v<T, half>) {{
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_NONE, count);
    }} else {{
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_RINT, count);
    }}
}}

// row[0, cols) -= (or *=) the value filling the 32-byte block `stat` (a row's statistic, by Brcb): repeats of 64
// reading the block at stride 0, then the tail.
template <bool isMul>
__aicore__ inline void RowByStat(const AscendC::LocalTensor<float>& row, const AscendC::LocalTensor<float>& stat,
                                 uint32_t cols)
{{
    const uint32_t full = cols / 64u;
    const uint32_t tail = cols % 64u;
    if (full > 0) {{
        if constexpr (isMul) {{
            AscendC::Mul(row, row, stat, 64, static_cast<uint8_t>(full), {{1, 1, 0, 8, 8, 0}});
        }} else {{
            AscendC::Sub(row, row, stat, 64, static_cast<uint8_t>(full), {{1, 1, 0, 8, 8, 0}});
        }}
    }}
    if (tail > 0) {{
        if constexpr (isMul) {{
            AscendC::Mul(row[full * 64u], row[full * 64u], stat, tail, 1, {{1, 1, 0, 8, 8, 0}});
        }} else {{
            AscendC::Sub(row[full * 64u], row[full * 64u], stat, tail, 1, {{1, 1, 0, 8, 8, 0}});
        }}
    }}
}}

// rows x cols at `pitch` floats (a multiple of 8) op= each row's statistic block (stat[r * 8]): one instruction per
// 64 columns over every row where that is fewer (rows at pitch / 8 blocks apart, stat a block apart), else per row.
template <bool isMul>
__aicore__ inline void RowsByStat(const AscendC::LocalTensor<float>& tile, const AscendC::LocalTensor<float>& stat,
                                  uint32_t rows, uint32_t cols, uint32_t pitch)
{{
    const uint32_t groups = (cols + 63u) / 64u;
    if (groups < rows && pitch / 8u <= 255u) {{
        const uint8_t rowBlocks = static_cast<uint8_t>(pitch / 8u);
        const AscendC::BinaryRepeatParams params{{1, 1, 0, rowBlocks, rowBlocks, 1}};
        for (uint32_t g = 0; g < groups; ++g) {{
            const uint32_t width = cols - g * 64u < 64u ? cols - g * 64u : 64u;
            if constexpr (isMul) {{
                AscendC::Mul(tile[g * 64u], tile[g * 64u], stat, width, static_cast<uint8_t>(rows), params);
            }} else {{
                AscendC::Sub(tile[g * 64u], tile[g * 64u], stat, width, static_cast<uint8_t>(rows), params);
            }}
        }}
    }} else {{
        for (uint32_t r = 0; r < rows; ++r) {{
            RowByStat<isMul>(tile[r * pitch], stat[r * 8u], cols);
        }}
    }}
}}

{ROWS_BY_MASK if m else ""}template <typename T>
class {cls} {{
    using QType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;
    using KType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T, {trans}>;
    using FType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, float>;
    using VType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;

public:
    __aicore__ inline {cls}() {{}}
    __aicore__ inline void Init({args}, GM_ADDR workspace, const {s}& tiling)
    {{
        td = tiling;
        qGm.SetGlobalBuffer((__gm__ T*)q);
        kGm.SetGlobalBuffer((__gm__ T*)k);
        vGm.SetGlobalBuffer((__gm__ T*)v);
{mask_init}        yGm.SetGlobalBuffer((__gm__ T*)y);
        // This vector core's part of the user workspace: two stages of scores (fp32), of P, of P @ v (fp32).
        GM_ADDR mine = AscendC::GetUserWorkspace(workspace) + AscendC::GetBlockIdx() * td.wsCoreBytes;
        scoresGm.SetGlobalBuffer((__gm__ float*)mine, 2u * td.scoreStage);
        probsGm.SetGlobalBuffer((__gm__ T*)(mine + 2u * td.scoreStage * sizeof(float)), 2u * td.scoreStage);
        outGm.SetGlobalBuffer((__gm__ float*)(mine + 2u * td.scoreStage * (sizeof(float) + sizeof(T))),
                              2u * td.outStage);
        if (td.splits > 1) {{
            // After every core's ring: each unit's rows of output (unnormalized), then their max and their sum.
            GM_ADDR parts = AscendC::GetUserWorkspace(workspace) + td.cores * td.wsCoreBytes;
            const uint64_t rows = static_cast<uint64_t>(td.units) * td.mBlock;
            partOutGm.SetGlobalBuffer((__gm__ float*)parts, rows * td.dv);
            partMaxGm.SetGlobalBuffer((__gm__ float*)(parts + rows * td.dv * sizeof(float)), rows);
            partSumGm.SetGlobalBuffer((__gm__ float*)(parts + rows * (td.dv + 1u) * sizeof(float)), rows);
        }}
    }}

    // After REGIST_MATMUL_OBJ (the kernel entry): the pipe's buffers.
    __aicore__ inline void InitBuffers()
    {{
        pipe.InitBuffer(inQueueScores, BUFFER_NUM, td.chunkRows * td.rowPitch * sizeof(float));
        pipe.InitBuffer(outQueueProbs, BUFFER_NUM, td.chunkRows * td.rowPitch * sizeof(T));
{mask_buf}        pipe.InitBuffer(inQueueOut, BUFFER_NUM, td.outRows * td.dv * sizeof(float));
        pipe.InitBuffer(outQueueY, BUFFER_NUM, td.outRows * td.dv * sizeof(T));
        pipe.InitBuffer(accBuf, td.mBlock * td.dv * sizeof(float));
        pipe.InitBuffer(stateBuf, (6u * td.mBlock + 8u) * sizeof(float));  // + Brcb's reach past the last line
        // partials, the tails' blocks, two lines of row statistics, their blocks (score or output rows)
        const uint32_t spread = td.chunkRows > td.outRows ? Rows8() : (td.outRows + 7u) / 8u * 8u;
        pipe.InitBuffer(statBuf, (td.chunkRows * td.partials + Rows8() * 10u + spread * 8u) * sizeof(float));
        if (td.splits > 1) {{
            pipe.InitBuffer(outQueuePart, 1, td.outRows * td.dv * sizeof(float));
        }}
    }}

    // Steps (unit, KV block) in turn, two stages of each buffer: the cube computes step s + 1's scores and step
    // s - 1's P @ v while this core takes the softmax of step s; it then folds step s - 1's P @ v into its rows.
    // Split keys: every core then waits for all (SyncAll) and combines the parts of its items.
    __aicore__ inline void Process()
    {{
        const uint32_t core = static_cast<uint32_t>(AscendC::GetBlockIdx());
        const uint32_t count = core < td.units ? (td.units - core + td.cores - 1) / td.cores : 0;
        Step cur{{0, 0, 0}};
        Step prev{{0, 0, 0}};
        if (count > 0) {{
{org_shape}            QueueScores(cur);
        }}
        while (cur.j < count) {{
            if (cur.s > 0) {{
                Release();  // step s - 1's reads of its scores and step s - 2's of its P @ v are done
            }}
            const Step next = Next(cur);
            if (next.j < count) {{
                QueueScores(next);
            }}
            mmQk.WaitIterateAll();  // the scores of step s
            Softmax(cur);
            // (the message waits for this core's MTE3 writes of P: PostMessage's PipeBarrier<PIPE_MTE3>)
            QueueProduct(cur);
            if (cur.s > 0) {{
                mmPv.WaitIterateAll();  // step s - 1's P @ v (it has read the P stage step s + 1 writes)
                Accumulate(prev);
            }}
            prev = cur;
            cur = next;
        }}
        if (count > 0) {{  // the last step's P @ v; an idle core has nothing to wait for or end
            mmPv.WaitIterateAll();
            Accumulate(prev);
            mmQk.End();
            mmPv.End();
        }}
        if (td.splits > 1) {{
            AscendC::SyncAll();  // every part's rows and statistics are in global memory
            Combine();
        }}
    }}

    // Public for the kernel entry, which registers the Matmul objects in its own scope.
    AscendC::TPipe pipe;
    AscendC::Matmul<QType, KType, FType, FType> mmQk;
    AscendC::Matmul<QType, VType, FType, FType> mmPv;
    {s} td;

private:
    // A unit: one part of the keys of one item (the whole of them unless split).
    struct Item {{
        uint32_t batch;
        uint32_t head;     // within the batch (folded: the KV head whose query heads the item takes)
        uint64_t kvHead0;  // the KV head's index over every batch (group query heads share one)
        uint64_t qOffset;  // the block's first query row over every head
        uint32_t q0;       // ... within its head (folded: within the group)
        uint32_t rows;
        uint32_t unit;     // over every core
        uint32_t c0;       // the part's first key
        uint32_t keys;     // ... and its keys
        uint32_t blocks;   // ... in KV blocks
    }};

    // One step: this core's j-th unit, its b-th KV block, the s-th step of this core (stage s % 2).
    struct Step {{
        uint32_t j;
        uint32_t b;
        uint32_t s;
    }};

    __aicore__ inline Item UnitAt(uint32_t u) const
    {{
        const uint32_t i = u / td.splits;
        const uint32_t part = u % td.splits;
        const uint64_t head0 = i / td.qBlocks;  // a head, or (folded) a KV head's group of query heads
        const uint32_t q0 = i % td.qBlocks * td.mBlock;
        const uint32_t rows = td.headRows - q0 < td.mBlock ? td.headRows - q0 : td.mBlock;
        const uint32_t batch = static_cast<uint32_t>(head0 / td.itemHeads);
        const uint32_t head = static_cast<uint32_t>(head0 % td.itemHeads);
        const uint64_t kvHead0 = td.foldHeads ? head0 : static_cast<uint64_t>(batch) * td.kvHeads + {kv_of_head};
        const uint32_t c0 = part * td.partKeys;
        const uint32_t keys = td.sk - c0 < td.partKeys ? td.sk - c0 : td.partKeys;
        return {{batch, head, kvHead0, head0 * td.headRows + q0, q0, rows, u, c0, keys,
                (keys + td.kvBlock - 1) / td.kvBlock}};
    }}

    // This core's j-th unit.
    __aicore__ inline Item ItemAt(uint32_t j) const
    {{
        return UnitAt(static_cast<uint32_t>(AscendC::GetBlockIdx()) + j * td.cores);
    }}

    __aicore__ inline Step Next(const Step& t) const
    {{
        const bool last = t.b + 1 == ItemAt(t.j).blocks;
        return {{last ? t.j + 1 : t.j, last ? 0u : t.b + 1, t.s + 1}};
    }}

    // Keys of the unit's KV block b: from c0, cols of them.
    __aicore__ inline uint32_t KeysAt(const Item& it, uint32_t b, uint32_t& c0) const
    {{
        c0 = it.c0 + b * td.kvBlock;
        return it.c0 + it.keys - c0 < td.kvBlock ? it.c0 + it.keys - c0 : td.kvBlock;
    }}

    // Step t's scores onto the cube, into stage s % 2 (rows of kvBlock floats).
    __aicore__ inline void QueueScores(const Step& t)
    {{
        const Item it = ItemAt(t.j);
        uint32_t c0 = 0;
        const uint32_t cols = KeysAt(it, t.b, c0);
        mmQk.SetTensorA(qGm[it.qOffset * td.d]);
        mmQk.SetTensorB(kGm[{k_at}], {trans});
        mmQk.SetTail(static_cast<int>(it.rows), static_cast<int>(cols), static_cast<int>(td.d));
        mmQk.template IterateAll<false>(scoresGm[(t.s % 2) * td.scoreStage], 0, false, true);  // signals when done
    }}

    // Step t's P @ v onto the cube, into stage s % 2 of the outputs (fp32 rows of dv).
    __aicore__ inline void QueueProduct(const Step& t)
    {{
        const Item it = ItemAt(t.j);
        uint32_t c0 = 0;
        const uint32_t cols = KeysAt(it, t.b, c0);
        mmPv.SetTensorA(probsGm[(t.s % 2) * td.scoreStage]);
        mmPv.SetTensorB(vGm[(it.kvHead0 * td.sk + c0) * td.dv], false);
        mmPv.SetTail(static_cast<int>(it.rows), static_cast<int>(td.dv), static_cast<int>(cols));
        mmPv.template IterateAll<false>(outGm[(t.s % 2) * td.outStage], 0, false, true);
    }}

    // This core's MTE2 reads of its workspace are done: the cube's next write to them is invisible to the
    // compiler's auto-sync.
    __aicore__ inline void Release()
    {{
        AscendC::TEventID readDone = GetTPipePtr()->FetchEventID(AscendC::HardEvent::MTE2_S);
        AscendC::SetFlag<AscendC::HardEvent::MTE2_S>(readDone);
        AscendC::WaitFlag<AscendC::HardEvent::MTE2_S>(readDone);
    }}

    // Step t: the online softmax of its score rows, chunk by chunk, P into stage s % 2.
    __aicore__ inline void Softmax(const Step& t)
    {{
        const Item it = ItemAt(t.j);
        uint32_t c0 = 0;
        const uint32_t cols = KeysAt(it, t.b, c0);
        uint32_t r0 = 0;
        uint32_t rows = it.rows < td.chunkRows ? it.rows : td.chunkRows;
        CopyIn(t.s, it, c0, cols, r0, rows);
        while (rows > 0) {{
            // The next chunk's loads go out before this one's softmax (the queues hold two).
            const uint32_t next = r0 + rows;
            const uint32_t nextRows = it.rows - next < td.chunkRows ? it.rows - next : td.chunkRows;
            if (nextRows > 0) {{
                CopyIn(t.s, it, c0, cols, next, nextRows);
            }}
            Compute(t, it, cols, r0, rows);
            CopyOut(t.s, cols, r0, rows);
            r0 = next;
            rows = nextRows;
        }}
    }}

    // Rows [r0, r0 + rows) of step s's scores (and their mask) into UB: rows of a 16-multiple pitch.
    __aicore__ inline void CopyIn(uint32_t s, const Item& it, uint32_t c0, uint32_t cols, uint32_t r0, uint32_t rows)
    {{
        const uint32_t pitch = (cols + 15u) / 16u * 16u;
        AscendC::LocalTensor<float> scoresLocal = inQueueScores.AllocTensor<float>();
        const uint32_t rowBytes = cols * static_cast<uint32_t>(sizeof(float));
        const uint32_t gap = (pitch * static_cast<uint32_t>(sizeof(float)) - (rowBytes + 31u) / 32u * 32u) / 32u;
        AscendC::DataCopyExtParams params{{static_cast<uint16_t>(rows), rowBytes,
            (td.kvBlock - cols) * static_cast<uint32_t>(sizeof(float)), gap, 0}};
        AscendC::DataCopyPadExtParams<float> pad{{false, 0, 0, 0.0f}};
        AscendC::DataCopyPad(scoresLocal, scoresGm[(s % 2) * td.scoreStage + static_cast<uint64_t>(r0) * td.kvBlock],
                             params, pad);
        inQueueScores.EnQue(scoresLocal);
{mask_copy}    }}

    // Each row's max (isMax) or sum of its first cols values into Stats() (one float a row, in a line): 64 keys a
    // repeat into partials, the partials of every row by one more ReduceRepeat; a tail under 64 keys by a repeat of
    // its own per row. Nothing waits on the scalar unit.
    template <bool isMax>
    __aicore__ inline void RowStats(const AscendC::LocalTensor<float>& scoresLocal, uint32_t rows, uint32_t cols,
                                    uint32_t pitch)
    {{
        constexpr auto kind = isMax ? AscendC::ReduceType::MAX : AscendC::ReduceType::SUM;
        constexpr auto order = AscendC::ReduceOrder::ORDER_ONLY_VALUE;
        AscendC::LocalTensor<float> partial = statBuf.Get<float>();  // td.partials per row, or full in a line
        AscendC::LocalTensor<float> tails = partial[td.chunkRows * td.partials];  // a row's tail: one block a row
        AscendC::LocalTensor<float> stat = Stats();
        AscendC::LocalTensor<float> tailStat = stat[Rows8()];
        const uint32_t full = cols / 64u;
        const uint32_t tail = cols % 64u;
        if (full > 0) {{
            uint32_t spacing = td.partials;  // partials from one row to the next
            if (tail == 0 && full % 8u == 0 && pitch == cols) {{
                // The rows' partials in a line, in as few instructions as 255 repeats allow.
                spacing = full;
                const uint32_t perCall = 255u / full;
                for (uint32_t r = 0; r < rows; r += perCall) {{
                    const uint32_t n = rows - r < perCall ? rows - r : perCall;
                    AscendC::ReduceRepeat<kind>(partial[r * full], scoresLocal[r * pitch], 64,
                                                static_cast<int32_t>(n * full), 1, 1, 8, order);
                }}
            }} else {{
                for (uint32_t r = 0; r < rows; ++r) {{
                    AscendC::ReduceRepeat<kind>(partial[r * td.partials], scoresLocal[r * pitch], 64,
                                                static_cast<int32_t>(full), 1, 1, 8, order);
                }}
            }}
            AscendC::ReduceRepeat<kind>(stat, partial, static_cast<int32_t>(full), static_cast<int32_t>(rows), 1, 1,
                                        static_cast<int32_t>(spacing / 8u), order);
        }}
        if (tail > 0) {{
            for (uint32_t r = 0; r < rows; ++r) {{
                AscendC::ReduceRepeat<kind>(tails[r * 8u], scoresLocal[r * pitch + full * 64u],
                                            static_cast<int32_t>(tail), 1, 1, 1, 8, order);
            }}
            // one result a block into a line; beside the full repeats' results, combined
            const AscendC::LocalTensor<float>& dst = full > 0 ? tailStat : stat;
            AscendC::ReduceRepeat<kind>(dst, tails, 1, static_cast<int32_t>(rows), 1, 1, 1, order);
            if (full > 0) {{
                if constexpr (isMax) {{
                    AscendC::Max(stat, stat, tailStat, rows);
                }} else {{
                    AscendC::Add(stat, stat, tailStat, rows);
                }}
            }}
        }}
    }}

    __aicore__ inline uint32_t Rows8() const {{ return (td.chunkRows + 7u) / 8u * 8u; }}

    // A chunk's row statistics in a line (after the partials and the tails' blocks).
    __aicore__ inline AscendC::LocalTensor<float> Stats()
    {{
        return statBuf.Get<float>()[td.chunkRows * td.partials + Rows8() * 8u];
    }}

    // Each row's statistic filling a 32-byte block (Brcb), for the per-row forms of Sub and Mul.
    __aicore__ inline AscendC::LocalTensor<float> Spread(const AscendC::LocalTensor<float>& line, uint32_t rows)
    {{
        AscendC::LocalTensor<float> blocks = Stats()[2u * Rows8()];
        AscendC::Brcb(blocks, line, static_cast<uint8_t>((rows + 7u) / 8u), {{1, 8}});
        return blocks;
    }}

    // Scale, mask and the online softmax of rows [r0, r0 + rows) of step t in fp32, in place; P in the I/O type.
    __aicore__ inline void Compute(const Step& t, const Item& it, uint32_t cols, uint32_t r0, uint32_t rows)
    {{
        const uint32_t b = t.b;
        const uint32_t s = t.s;
        const uint32_t j = t.j;
        const uint32_t pitch = (cols + 15u) / 16u * 16u;
        const bool whole = pitch == cols;  // the rows lie end to end: one instruction for the chunk
        AscendC::LocalTensor<float> scoresLocal = inQueueScores.DeQue<float>();
{mask_deq}        AscendC::LocalTensor<T> probsLocal = outQueueProbs.AllocTensor<T>();
        // The rows' running max and sum, the rescale of steps s % 2 and 1 / sum of items j % 2: a float a row.
        AscendC::LocalTensor<float> state = stateBuf.Get<float>();
        AscendC::LocalTensor<float> rowMax = state[r0];
        AscendC::LocalTensor<float> rowSum = state[td.mBlock + r0];
        AscendC::LocalTensor<float> rescale = state[(2u + s % 2u) * td.mBlock + r0];
        AscendC::LocalTensor<float> invSum = state[(4u + j % 2u) * td.mBlock + r0];
        AscendC::LocalTensor<float> stat = Stats();
{scale_lines}{add_mask}        // The new running max; exp(old - new) rescales the sum and output so far.
        RowStats<true>(scoresLocal, rows, cols, pitch);
        if (b == 0) {{
            AscendC::Maxs(stat, stat, LOWEST, rows);
        }} else {{
            AscendC::Max(stat, stat, rowMax, rows);
            AscendC::Sub(rescale, rowMax, stat, rows);
            AscendC::Exp(rescale, rescale, rows);
        }}
        AscendC::Adds(rowMax, stat, 0.0f, rows);
        RowsByStat<false>(scoresLocal, Spread(stat, rows), rows, cols, pitch);
        if (whole) {{
            AscendC::Exp(scoresLocal, scoresLocal, rows * cols);
        }} else {{
            for (uint32_t r = 0; r < rows; ++r) {{
                AscendC::Exp(scoresLocal[r * pitch], scoresLocal[r * pitch], cols);
            }}
        }}
        RowStats<false>(scoresLocal, rows, cols, pitch);
        if (b == 0) {{
            AscendC::Adds(rowSum, stat, 0.0f, rows);
        }} else {{
            AscendC::Mul(rowSum, rowSum, rescale, rows);
            AscendC::Add(rowSum, rowSum, stat, rows);
        }}
        if (b + 1 == it.blocks && td.splits > 1) {{
            StoreStats(it, r0, rows, rowMax, rowSum);  // the part's row max and sum, for the combine
        }} else if (b + 1 == it.blocks) {{
            // 1 / sum by Div (float Reciprocal is documented as short of 1e-4 relative): a row masked to -inf
            // everywhere has a sum of 0, so y = 0 x (1 / 0 = inf) = NaN, as onnxruntime computes it.
            AscendC::LocalTensor<float> ones = stat[Rows8()];
            AscendC::Duplicate(ones, 1.0f, rows);
            AscendC::Div(invSum, ones, rowSum, rows);
        }}
        if (whole) {{
            ToOutput(probsLocal, scoresLocal, rows * cols);
        }} else {{
            for (uint32_t r = 0; r < rows; ++r) {{
                ToOutput(probsLocal[r * pitch], scoresLocal[r * pitch], cols);
            }}
        }}
        outQueueProbs.EnQue(probsLocal);
{mask_free}        inQueueScores.FreeTensor(scoresLocal);
    }}

    // P's rows into stage s % 2 (rows of kvBlock elements: the A operand of P @ v).
    __aicore__ inline void CopyOut(uint32_t s, uint32_t cols, uint32_t r0, uint32_t rows)
    {{
        const uint32_t pitch = (cols + 15u) / 16u * 16u;
        AscendC::LocalTensor<T> probsLocal = outQueueProbs.DeQue<T>();
        const uint32_t rowBytes = cols * static_cast<uint32_t>(sizeof(T));
        const uint32_t gap = (pitch * static_cast<uint32_t>(sizeof(T)) - (rowBytes + 31u) / 32u * 32u) / 32u;
        AscendC::DataCopyExtParams params{{static_cast<uint16_t>(rows), rowBytes, gap,
            (td.kvBlock - cols) * static_cast<uint32_t>(sizeof(T)), 0}};
        AscendC::DataCopyPad(probsGm[(s % 2) * td.scoreStage + static_cast<uint64_t>(r0) * td.kvBlock], probsLocal,
                             params);
        if (rowBytes % 32u != 0) {{
            // The next chunk's first row may share this one's last 32-byte block in global memory.
            AscendC::PipeBarrier<PIPE_MTE3>();
        }}
        outQueueProbs.FreeTensor(probsLocal);
    }}

    // Step t's P @ v into the rows' fp32 output: acc = acc x rescale + o (the first block: acc = o); after the last
    // block, y = acc / sum, written once (split: acc into the part's rows). The next rows' load goes out before this
    // rows' work (the queue holds two).
    __aicore__ inline void Accumulate(const Step& t)
    {{
        const Item it = ItemAt(t.j);
        uint32_t r0 = 0;
        uint32_t rows = it.rows < td.outRows ? it.rows : td.outRows;
        LoadOut(t.s, r0, rows);
        while (rows > 0) {{
            const uint32_t next = r0 + rows;
            const uint32_t nextRows = it.rows - next < td.outRows ? it.rows - next : td.outRows;
            if (nextRows > 0) {{
                LoadOut(t.s, next, nextRows);
            }}
            Fold(t, it, r0, rows);
            r0 = next;
            rows = nextRows;
        }}
    }}

    // Rows [r0, r0 + rows) of step s's P @ v into UB.
    __aicore__ inline void LoadOut(uint32_t s, uint32_t r0, uint32_t rows)
    {{
        LoadRows(outGm[(s % 2) * td.outStage + static_cast<uint64_t>(r0) * td.dv], rows);
    }}

    // `rows` fp32 rows of dv from global memory into UB.
    __aicore__ inline void LoadRows(const AscendC::GlobalTensor<float>& src, uint32_t rows)
    {{
        AscendC::LocalTensor<float> rowsLocal = inQueueOut.AllocTensor<float>();
        AscendC::DataCopy(rowsLocal, src, rows * td.dv);
        inQueueOut.EnQue(rowsLocal);
    }}

    __aicore__ inline void Fold(const Step& t, const Item& it, uint32_t r0, uint32_t rows)
    {{
        const uint32_t b = t.b;
        const uint32_t s = t.s;
        const uint32_t j = t.j;
        const bool last = b + 1 == it.blocks;
        const uint32_t count = rows * td.dv;
        AscendC::LocalTensor<float> state = stateBuf.Get<float>();
        AscendC::LocalTensor<float> rowsAcc = accBuf.Get<float>()[r0 * td.dv];
        AscendC::LocalTensor<float> outLocal = inQueueOut.DeQue<float>();
        if (b > 0) {{
            RowsByStat<true>(rowsAcc, Spread(state[(2u + s % 2u) * td.mBlock + r0], rows), rows, td.dv, td.dv);
            AscendC::Add(rowsAcc, rowsAcc, outLocal, count);
        }} else if (!last) {{
            AscendC::Adds(rowsAcc, outLocal, 0.0f, count);
        }}
        if (last && td.splits > 1) {{
            StorePart(it, r0, rows, b > 0 ? rowsAcc : outLocal);
        }} else if (last) {{
            // (a single block divides its product in place)
            StoreY(it, r0, rows, b > 0 ? rowsAcc : outLocal, state[(4u + j % 2u) * td.mBlock + r0]);
        }}
        inQueueOut.FreeTensor(outLocal);
    }}

    // Rows [r0, r0 + rows) of a part's running max and sum into the workspace (lines of mBlock a unit).
    __aicore__ inline void StoreStats(const Item& it, uint32_t r0, uint32_t rows,
                                      const AscendC::LocalTensor<float>& rowMax,
                                      const AscendC::LocalTensor<float>& rowSum)
    {{
        const uint32_t rows8 = (rows + 7u) / 8u * 8u;
        AscendC::LocalTensor<float> statsLocal = outQueuePart.AllocTensor<float>();
        AscendC::Adds(statsLocal, rowMax, 0.0f, rows);
        AscendC::Adds(statsLocal[rows8], rowSum, 0.0f, rows);
        outQueuePart.EnQue(statsLocal);
        statsLocal = outQueuePart.DeQue<float>();
        const uint64_t at = static_cast<uint64_t>(it.unit) * td.mBlock + r0;
        AscendC::DataCopyExtParams params{{1, rows * static_cast<uint32_t>(sizeof(float)), 0, 0, 0}};
        AscendC::DataCopyPad(partMaxGm[at], statsLocal, params);
        AscendC::DataCopyPad(partSumGm[at], statsLocal[rows8], params);
        outQueuePart.FreeTensor(statsLocal);
    }}

    // Rows [r0, r0 + rows) of a part's output, unnormalized, into the workspace.
    __aicore__ inline void StorePart(const Item& it, uint32_t r0, uint32_t rows,
                                     const AscendC::LocalTensor<float>& acc)
    {{
        const uint32_t count = rows * td.dv;
        AscendC::LocalTensor<float> partLocal = outQueuePart.AllocTensor<float>();
        AscendC::Adds(partLocal, acc, 0.0f, count);
        outQueuePart.EnQue(partLocal);
        partLocal = outQueuePart.DeQue<float>();
        AscendC::DataCopy(partOutGm[(static_cast<uint64_t>(it.unit) * td.mBlock + r0) * td.dv], partLocal, count);
        outQueuePart.FreeTensor(partLocal);
    }}

    // After SyncAll: the items of this core (in turn over the cores), their parts combined by their row maxima,
    // y = sum_p exp(max_p - max) o_p / sum_p exp(max_p - max) sum_p, written once.
    __aicore__ inline void Combine()
    {{
        for (uint32_t i = static_cast<uint32_t>(AscendC::GetBlockIdx()); i < td.items; i += td.cores) {{
            const Item it = UnitAt(i * td.splits);
            for (uint32_t r0 = 0; r0 < it.rows; r0 += td.outRows) {{
                CombineRows(it, r0, it.rows - r0 < td.outRows ? it.rows - r0 : td.outRows);
            }}
        }}
    }}

    // Rows [r0, r0 + rows) of part p's output into UB.
    __aicore__ inline void LoadPart(const Item& it, uint32_t p, uint32_t r0, uint32_t rows)
    {{
        LoadRows(partOutGm[(static_cast<uint64_t>(it.unit + p) * td.mBlock + r0) * td.dv], rows);
    }}

    __aicore__ inline void CombineRows(const Item& it, uint32_t r0, uint32_t rows)
    {{
        const uint32_t parts = td.splits;
        const uint32_t rows8 = (rows + 7u) / 8u * 8u;
        const uint32_t count = rows * td.dv;
        // Every part's max of these rows in a line of rows8, then every part's sum.
        AscendC::LocalTensor<float> lse = inQueueScores.AllocTensor<float>();
        const uint32_t bytes = rows * static_cast<uint32_t>(sizeof(float));
        const uint32_t gap = (td.mBlock - rows) * static_cast<uint32_t>(sizeof(float));  // to the next part's line
        AscendC::DataCopyExtParams params{{static_cast<uint16_t>(parts), bytes, gap,
            (rows8 * 4u - (bytes + 31u) / 32u * 32u) / 32u, 0}};
        AscendC::DataCopyPadExtParams<float> pad{{false, 0, 0, 0.0f}};
        const uint64_t at = static_cast<uint64_t>(it.unit) * td.mBlock + r0;
        AscendC::DataCopyPad(lse, partMaxGm[at], params, pad);
        AscendC::DataCopyPad(lse[parts * rows8], partSumGm[at], params, pad);
        inQueueScores.EnQue(lse);
        lse = inQueueScores.DeQue<float>();
        LoadPart(it, 0, r0, rows);
        AscendC::LocalTensor<float> state = stateBuf.Get<float>();
        AscendC::LocalTensor<float> rowMax = state;
        AscendC::LocalTensor<float> rowSum = state[td.mBlock];
        AscendC::LocalTensor<float> invSum = state[2u * td.mBlock];
        AscendC::Adds(rowMax, lse, 0.0f, rows);
        for (uint32_t p = 1; p < parts; ++p) {{
            AscendC::Max(rowMax, rowMax, lse[p * rows8], rows);
        }}
        // a part's weight exp(max_p - max); the sum of its weighted sums
        for (uint32_t p = 0; p < parts; ++p) {{
            AscendC::Sub(lse[p * rows8], lse[p * rows8], rowMax, rows);
            AscendC::Exp(lse[p * rows8], lse[p * rows8], rows);
            AscendC::Mul(lse[(parts + p) * rows8], lse[(parts + p) * rows8], lse[p * rows8], rows);
        }}
        AscendC::Adds(rowSum, lse[parts * rows8], 0.0f, rows);
        for (uint32_t p = 1; p < parts; ++p) {{
            AscendC::Add(rowSum, rowSum, lse[(parts + p) * rows8], rows);
        }}
        // 1 / sum (Div, as above: a row masked everywhere gives 0 x inf = NaN, as onnxruntime computes it)
        AscendC::LocalTensor<float> ones = invSum[td.mBlock];
        AscendC::Duplicate(ones, 1.0f, rows);
        AscendC::Div(invSum, ones, rowSum, rows);
        AscendC::LocalTensor<float> acc = accBuf.Get<float>();
        for (uint32_t p = 0; p < parts; ++p) {{
            if (p + 1 < parts) {{
                LoadPart(it, p + 1, r0, rows);
            }}
            AscendC::LocalTensor<float> partLocal = inQueueOut.DeQue<float>();
            RowsByStat<true>(partLocal, Spread(lse[p * rows8], rows), rows, td.dv, td.dv);
            if (p == 0) {{
                AscendC::Adds(acc, partLocal, 0.0f, count);
            }} else {{
                AscendC::Add(acc, acc, partLocal, count);
            }}
            inQueueOut.FreeTensor(partLocal);
        }}
        inQueueScores.FreeTensor(lse);
        StoreY(it, r0, rows, acc, invSum);
    }}

    // y rows [r0, r0 + rows) = the rows' fp32 output x 1 / sum (invSum: a float a row), written once.
    __aicore__ inline void StoreY(const Item& it, uint32_t r0, uint32_t rows, const AscendC::LocalTensor<float>& out,
                                  const AscendC::LocalTensor<float>& invSum)
    {{
        const uint32_t count = rows * td.dv;
        RowsByStat<true>(out, Spread(invSum, rows), rows, td.dv, td.dv);
        AscendC::LocalTensor<T> yLocal = outQueueY.AllocTensor<T>();
        ToOutput(yLocal, out, count);
        outQueueY.EnQue(yLocal);
        yLocal = outQueueY.DeQue<T>();
        const uint32_t bytes = count * static_cast<uint32_t>(sizeof(T));
        AscendC::DataCopyExtParams params{{1, bytes, 0, 0, 0}};
        AscendC::DataCopyPad(yGm[(it.qOffset + r0) * td.dv], yLocal, params);
        if (bytes % 32u != 0) {{
            // The next rows' first bytes may share this write's last 32-byte block in global memory.
            AscendC::PipeBarrier<PIPE_MTE3>();
        }}
        outQueueY.FreeTensor(yLocal);
    }}

    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueueScores;
    AscendC::TQue<AscendC::QuePosition::VECOUT, BUFFER_NUM> outQueueProbs;
{members_mask}    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueueOut;
    AscendC::TQue<AscendC::QuePosition::VECOUT, BUFFER_NUM> outQueueY;
    AscendC::TBuf<AscendC::TPosition::VECCALC> accBuf;     // the item's rows of output, fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> stateBuf;   // the rows' running max, sum, rescales and 1 / sum
    AscendC::TBuf<AscendC::TPosition::VECCALC> statBuf;    // a chunk's row statistics
    AscendC::GlobalTensor<T> qGm;
    AscendC::GlobalTensor<T> kGm;
    AscendC::GlobalTensor<T> vGm;
    AscendC::GlobalTensor<T> yGm;
    AscendC::GlobalTensor<float> scoresGm;  // this core's two stages of scores of one Q block and KV block
    AscendC::GlobalTensor<T> probsGm;       // ... of their exponentials (P, unnormalized)
    AscendC::GlobalTensor<float> outGm;     // ... of P @ v
    AscendC::TQue<AscendC::QuePosition::VECOUT, 1> outQueuePart;  // split keys: a part's rows and statistics out
    AscendC::GlobalTensor<float> partOutGm;  // every unit's rows of output (split keys)
    AscendC::GlobalTensor<float> partMaxGm;  // ... their max
    AscendC::GlobalTensor<float> partSumGm;  // ... their sum
}};
}}  // namespace

extern "C" __global__ __aicore__ void {k.snake}({args}, GM_ADDR workspace, GM_ADDR tiling)
{{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);  // the cube computes both products, two vector cores the softmax
    REGISTER_TILING_DEFAULT({s});
    GET_TILING_DATA(tilingData, tiling);
    {cls}<DTYPE_Y> op;
    op.Init({", ".join((*k.inputs, *k.outputs))}, workspace, tilingData);
    // The Matmul objects' KFC client lives in this scope; registered before any other use of the pipe.
    REGIST_MATMUL_OBJ(&op.pipe, GetSysWorkSpacePtr(), op.mmQk, &op.td.qkTiling, op.mmPv, &op.td.pvTiling);
    op.InitBuffers();
    op.Process();
}}
"""


def host_source(k: AttentionKernel, compute_units: list[str]) -> str:
    """op_host/<op>.cpp: OpDef, InferShape, InferDataType and TilingFunc."""
    types = [GE_TYPES[IO_TYPES[d][0]] for d in k.dtypes]
    sk_dim = "k.GetDimNum() - 2" if k.trans_k else "k.GetDimNum() - 1"
    call = tiling_call(k, "qDims", "static_cast<uint32_t>(q.GetDimNum())", "sk", "kvHeads", "dv", "maskDims",
                       "maskRank", "dtypeSize", "dt == ge::DT_FLOAT", "dt == ge::DT_BF16", "coreNum", "platform",
                       "coupled", "tiling")
    out = Lines()
    out(*cube_host_head(k, "tiling"))
    with out.indent():
        out(*(line for line in (*CUBE_PLATFORM_LINES,
            "const uint32_t coreNum = ascendcPlatform.GetCoreNumAiv();",
            "const gert::Shape& q = context->GetInputShape(0)->GetStorageShape();",
            "const gert::Shape& k = context->GetInputShape(1)->GetStorageShape();",
            "const gert::Shape& v = context->GetInputShape(2)->GetStorageShape();",
            "if (q.GetDimNum() < 3 || q.GetDimNum() > 8 || k.GetDimNum() != q.GetDimNum() || "
            "v.GetDimNum() != q.GetDimNum()) return ge::GRAPH_FAILED;",
            ("// k and v share q's leading dims but their heads (q's heads / group: grouped-query attention), and "
             "chain as q @ k^T @ v." if k.kv_repeat else
             "// k and v share q's heads (a KV head per query head) and chain as q @ k^T @ v."),
            "const size_t rank = q.GetDimNum();",
            "for (size_t i = 0; i + 2 < rank; ++i) {",
            ("    if (i + 3 == rank) continue;" if k.kv_repeat else None),
            "    if (k.GetDim(i) != q.GetDim(i) || v.GetDim(i) != q.GetDim(i)) return ge::GRAPH_FAILED;",
            "}",
            ("if (v.GetDim(rank - 3) != k.GetDim(rank - 3) || k.GetDim(rank - 3) <= 0 || "
             "q.GetDim(rank - 3) % k.GetDim(rank - 3) != 0) return ge::GRAPH_FAILED;" if k.kv_repeat else None),
            "const uint32_t kvHeads = static_cast<uint32_t>(k.GetDim(rank - 3));",
            f"if (k.GetDim({'rank - 1' if k.trans_k else 'rank - 2'}) != q.GetDim(rank - 1) || "
            f"v.GetDim(rank - 2) != k.GetDim({'rank - 2' if k.trans_k else 'rank - 1'})) return ge::GRAPH_FAILED;",
            "uint64_t qDims[8] = {};",
            "for (size_t i = 0; i < rank; ++i) qDims[i] = static_cast<uint64_t>(q.GetDim(i));",
            "uint64_t maskDims[8] = {};",
            "uint32_t maskRank = 0;") if line is not None))
        if k.has_mask:
            if k.has_keep:  # the keep mask (input 3) has the additive mask's shape
                out("const gert::Shape& keep = context->GetInputShape(3)->GetStorageShape();",
                    "if (!(keep == context->GetInputShape(4)->GetStorageShape())) return ge::GRAPH_FAILED;")
            out(f"const gert::Shape& mask = context->GetInputShape({4 if k.has_keep else 3})->GetStorageShape();",
                "if (mask.GetDimNum() > 8) return ge::GRAPH_FAILED;",
                "maskRank = static_cast<uint32_t>(mask.GetDimNum());",
                "for (size_t i = 0; i < mask.GetDimNum(); ++i) maskDims[i] = static_cast<uint64_t>(mask.GetDim(i));")
        out(f"const uint32_t sk = static_cast<uint32_t>(k.GetDim({sk_dim}));",
            "const uint32_t dv = static_cast<uint32_t>(v.GetDim(v.GetDimNum() - 1));",
            "const ge::DataType dt = context->GetInputDesc(0)->GetDataType();",
            "const uint32_t dtypeSize = dt == ge::DT_FLOAT ? 4 : 2;",
            f"auto* tiling = context->GetTilingData<{struct_name(k)}>();",
            f"if ({call} != 0) {{",
            "    return ge::GRAPH_FAILED;",
            "}",
            "if (tiling->splits > 1) {",
            "    // SyncAll: the op takes all its cores at once (batch mode), else concurrent streams can deadlock",
            "    context->SetScheduleMode(1);",
            "}",
            *cube_host_tail(k, "each vector core's stages of scores, P and P @ v, and a split decode's parts"))
    out("}", "}  // namespace optiling", "", "namespace ge {",
        "static graphStatus InferShape(gert::InferShapeContext* context)", "{")
    with out.indent():
        out("const gert::Shape* q = context->GetInputShape(0);",
            "const gert::Shape* v = context->GetInputShape(2);",
            "gert::Shape* y = context->GetOutputShape(0);",
            "*y = *q;  // [.., heads, Sq, Dv]",
            "y->SetDim(q->GetDimNum() - 1, v->GetDim(v->GetDimNum() - 1));",
            "return GRAPH_SUCCESS;")
    out("}", "")
    infer_dtype_and_opdef(out, k.op_type, list(k.inputs), list(k.outputs), types, compute_units, k.num_params)
    return out.text()


__all__ = ["REFUSALS", "tiling_header", "tiling_calc", "kernel_source", "host_source", "tiling_call"]


def headers(k) -> dict[str, str]:
    """The shared headers this class's files include (none: its files are whole)."""
    return {}
