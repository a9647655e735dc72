"""The Ascend C of an attention op (910B, mixed AIC/AIV): flash attention, one Q block of one head per work item.

Each vector core takes work items (head, Q block) in turn and walks the keys in KV blocks. For each block the cube
computes the scores ``S = Q_blk @ K_blk^T`` in fp32 into a stage of this core's workspace; the vector core scales
them, adds the mask, keeps each row's running max and sum in fp32 (the online softmax) and writes the unnormalized
probabilities P in the I/O type beside them; the cube computes ``P @ V_blk`` in fp32 into a third stage; the vector
core rescales its fp32 accumulator of the rows' outputs by how far the running max moved and adds the block's; after
the last block it divides by the sums and writes y once. Two stages of each: the cube computes the next block's
scores and the last block's ``P @ V`` while the vector core works on this one. The workspace is a ring per vector
core of ``2 x mBlock x (kvBlock x (4 + the I/O size) + dv x 4)`` bytes, every stage and core 512-byte aligned:
0.85 MB at fp16, head dim 128, 64-row Q blocks of 1024 keys (41 MB over 48 vector cores), whatever the sequence
length.
"""

from __future__ import annotations

from pathlib import Path

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
    8: "k given transposed has more than 65535 keys (the cube's ND row pitch is 16 bits)",
    9: "the keep mask's shape is not the additive mask's",
    10: "a causal mask with fewer keys than queries (a query would see no key)",
}

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
        "uint32_t dv;             // width of the rows of P @ v in the workspace and UB: v's head dim, to 16 if",
        "                         // that is no multiple of 8 (fp32 rows of whole 32-byte blocks)",
        "uint32_t dvOut;          // head dim of v and y",
        "uint32_t mBlock;         // Q rows per work item",
        "uint32_t qBlocks;        // Q blocks per head",
        "uint32_t items;          // work items: heads of every batch x qBlocks",
        "uint32_t splits;         // parts of the keys per item, on cores of their own (decode), combined after",
        "uint32_t partKeys;       // keys per part (the last part may have fewer)",
        "uint32_t units;          // items x splits: what the vector cores take in turn",
        "uint32_t cores;          // vector cores that take units",
        "uint32_t kvBlock;        // keys per KV block",
        "uint32_t kvBlocks;       // KV blocks per part at most",
        "uint32_t causal;         // the causal mask, generated: a query at row p of sq sees keys up to p + sk - sq",
        "uint32_t chunkRows;      // score rows the vector core takes into UB at a time",
        "uint32_t rowPitch;       // kvBlock rounded up to 16: 32-byte rows in UB in half and in float",
        "uint32_t partials;       // per row: one max or sum per 64 keys, rounded up to a block of 8",
        "uint32_t outRows;        // output rows the vector core takes into UB at a time",
        "uint32_t scoreStage;     // mBlock x kvBlock, to 256: elements of one stage of scores or P",
        "uint32_t outStage;       // mBlock x dv, to 128: elements of one stage of P @ v",
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
    sched = k.schedule
    kv_block = f"sk <= {sched.kv_block}u ? sk : {sched.kv_block}u"
    return f"""// Generated by asc-onnx: tiling arithmetic of {k.op_type} (attention).
// A plain function of shapes and platform numbers: the CANN host tiling and the asc-onnx emulator
// compile this same code.
#pragma once
#include <cstdint>
#include "tiling/tiling_api.h"
#include "{CUBE_TILING_HEADER}"
#include "../op_kernel/{k.snake}_tiling.h"

// One product's tiling for a single core: the kernel walks its own items, so the whole product is one core's.
// Asked of CANN once per shape and platform in a process ({CUBE_TILING_HEADER}).
inline bool {k.op_type}CubeTiling(uint32_t m, uint32_t n, uint32_t k, bool transB, matmul_tiling::DataType in,
        matmul_tiling::DataType out, const matmul_tiling::PlatformInfo& platform,
        AscendC::tiling::TCubeTiling& tiling)
{{
    const asc_onnx::CubeKey key{{m, n, k, static_cast<uint32_t>(platform.l1Size),
        static_cast<uint32_t>(platform.l0ASize), static_cast<uint32_t>(platform.l0BSize),
        static_cast<uint32_t>(platform.l0CSize), transB, static_cast<int32_t>(in), static_cast<int32_t>(out)}};
    return asc_onnx::CachedCubeTiling(key, tiling, [&](AscendC::tiling::TCubeTiling& t) {{
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
        return mm.GetTiling(t) != -1 && t.baseM > 0 && t.baseN > 0 && t.baseK > 0;
    }});
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
    // running max and sum, two lines of rescales and of 1 / sum (and the causal mask's tiles)
    const uint64_t state = (6u * m + 8u + {520 if k.causal else 0}u) * 4u;
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
    if ({'false' if k.trans_k else 'true'} && sk > 65535u) return 8;  // k^T's rows are Sk apart
    if ({_cpp_bool(k.causal)} && sk < sq) return 10;
    // A causal mask of one query row masks no key.
    t->causal = {_cpp_bool(k.causal)} && sq > 1u ? 1u : 0u;
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
    t->dvOut = dv;
    // P @ v's rows in whole 32-byte blocks of fp32: a head dim of no multiple of 8 (15, 20 ...) is padded to 16 in
    // the workspace and UB; the cube writes dv columns of each, y gets dv.
    const uint32_t dvRows = dv % 8u == 0 ? dv : (dv + 15u) / 16u * 16u;
    t->dv = dvRows;
    // Output rows a chunk: 16 (8 past a head dim of 128), a multiple of 8 (the state's lines from 8-row bounds).
    auto outRows = [&](uint32_t m) {{
        const uint32_t rows = dvRows > 128u ? 8u : 16u;
        return rows < m ? rows : m;
    }};
    uint32_t pitch = 0;
    auto fits = [&](uint32_t m, uint32_t rows, bool split = false) {{
        const uint64_t bytes = {k.op_type}UbBytes(m, rows, pitch, t->partials, dvRows, outRows(m), dtypeSize, split);
        return bytes <= platform.ubSize;
    }};
    // KV blocks of {sched.kv_block} keys, or halved until chunks of 8 rows fit UB (fp32 scores of fp32 I/O take more).
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
    // Q blocks of {sched.max_block}, 64, 32 or 16 rows (the cube's M): the fewest rows on the busiest vector core, each
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
    for (uint32_t m = {sched.max_block}u; m >= 16u; m /= 2u) {{
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
    // the busiest core, each unit counted {sched.unit_keys} keys more (its products' messages and waits, the pipeline's
    // fill) and a split {sched.split_keys} more plus {sched.part_keys} a part (the barrier and the combine).
    t->splits = 1u;
    t->partKeys = sk;
    if (t->qBlocks == 1u && headRows <= 16u && !t->causal && fits(mBlock, rows, true)) {{
        uint64_t bestCost = ~0ull;
        for (uint32_t want = 1u; want <= {sched.max_splits}u; ++want) {{
            const uint32_t keys = ((sk + want - 1u) / want + 63u) / 64u * 64u;
            const uint32_t parts = (sk + keys - 1u) / keys;
            if (parts != want) continue;  // (no empty part)
            if (2u * parts * 16u > rows * t->rowPitch) break;  // the combine's statistics fit one score tile
            const uint64_t rounds = (items * parts + coreNum - 1u) / coreNum;
            const uint64_t combine = parts > 1u ? {sched.split_keys}u + {sched.part_keys}u * parts : 0u;
            const uint64_t cost = rounds * (keys + {sched.unit_keys}u) + combine;
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
    // Every stage and every core's ring starts on a 512-byte boundary (the fixpipe and MTE write whole bursts):
    // a stage of scores or P in whole 256 elements (512 bytes of fp16 P), of P @ v in whole 128 floats.
    t->scoreStage = (mBlock * t->kvBlock + 255u) / 256u * 256u;
    t->outStage = (mBlock * dvRows + 127u) / 128u * 128u;
    t->wsCoreBytes = (2u * static_cast<uint64_t>(t->scoreStage) * (4u + dtypeSize) +
                      2u * static_cast<uint64_t>(t->outStage) * 4u + 511u) / 512u * 512u;
    t->partBytes = t->splits > 1u ? units * mBlock * (dvRows + 2u) * 4u : 0u;
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


#: The flash-attention template every attention op's kernel instantiates (shipped into op_kernel/).
FLASH_HEADER = "asc_onnx_flash_attention.h"
_FLASH_TEXT = Path(__file__).with_name(FLASH_HEADER).read_text()


def _cpp_bool(v: bool) -> str:
    return "true" if v else "false"


def kernel_source(k: AttentionKernel, rule: str, body_ops: list[str], sources: list[str]) -> str:
    """op_kernel/<op>.cpp: the op's traits and its entry, over the shared flash-attention template."""
    s = struct_name(k)
    scale = _scale_expr(k)
    traits = f"{k.op_type}Traits"
    args = ", ".join(f"GM_ADDR {n}" for n in (*k.inputs, *k.outputs))
    keep = "keep" if k.has_keep else "nullptr"
    mask = "mask" if k.has_mask else "nullptr"
    td = "td" if scale is not None and "td." in scale else "/* td */"
    return "\n".join(banner(k, rule, body_ops, sources, "attention")) + f"""
// Flash attention ({FLASH_HEADER}) with this op's tiling and traits.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "{FLASH_HEADER}"
#include "{k.snake}_tiling.h"

namespace {{
struct {traits} {{
    static constexpr bool hasMask = {_cpp_bool(k.has_mask)};
    static constexpr bool hasKeep = {_cpp_bool(k.has_keep)};
    static constexpr bool transK = {_cpp_bool(k.trans_k)};  // true: k is [.., Sk, D]; false: k^T [.., D, Sk]
    static constexpr bool kvTiled = {_cpp_bool(k.kv_tiled)};  // true: head h reads KV head h mod Hkv; false: h / group
    static constexpr bool hasScale = {_cpp_bool(scale is not None)};
    static constexpr bool causal = {_cpp_bool(k.causal)};  // the mask is the causal triangle: generated, not read
    __aicore__ static inline float Scale(const {s}& {td}) {{ return {scale or "1.0f"}; }}
}};
}}  // namespace

extern "C" __global__ __aicore__ void {k.snake}({args}, GM_ADDR workspace, GM_ADDR tiling)
{{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);  // the cube computes both products, two vector cores the softmax
    REGISTER_TILING_DEFAULT({s});
    GET_TILING_DATA(tilingData, tiling);
    asc_onnx::FlashAttention<DTYPE_Y, {s}, {traits}> op;
    op.Init(q, k, v, {keep}, {mask}, y, workspace, tilingData);
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


#: CANN's Matmul tilings asked once per process, shipped into op_host/ beside each op's calc header.
CUBE_TILING_HEADER = "asc_onnx_cube_tiling.h"
_CUBE_TILING_TEXT = Path(__file__).with_name(CUBE_TILING_HEADER).read_text()


def headers(k: AttentionKernel) -> dict[str, str]:
    """The shared headers an attention op's files include, by path in the op package."""
    return {f"op_kernel/{FLASH_HEADER}": _FLASH_TEXT, f"op_host/{CUBE_TILING_HEADER}": _CUBE_TILING_TEXT}
