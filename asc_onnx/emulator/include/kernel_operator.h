// asc-onnx Ascend C CPU emulator: the subset of the Ascend C API that asc-onnx generates.
// A generated kernel includes this header under its real name and compiles unchanged with g++.
#pragma once
#include <iterator>

#include "emu_runtime.h"
#include "emu_types.h"
#include "kernel_operator_data_copy.h"
#include "kernel_operator_mm.h"
#include "kernel_operator_vec.h"
#include "kernel_operator_vec_reduce.h"
#include "kernel_operator_vec_repeat.h"
#include "kernel_tensor.h"
#include "kernel_tpipe.h"

// Pipe names are global enumerators, as in the CCE headers.
enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_FIX };

// Event IDs of SetFlag/WaitFlag, global as in the CCE headers.
enum : int8_t { EVENT_ID0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };

namespace AscendC {
__aicore__ inline int64_t GetBlockIdx() { return asc_emu::St().blockIdx; }

// A kernel's first call in the static-Tensor samples: resets the core's state (the emulator gives every block a
// fresh one anyway).
__aicore__ inline void InitSocState() {}

template <typename T, typename U>
__aicore__ inline constexpr T DivCeil(T a, U b) { return (a + b - 1) / b; }
__aicore__ inline int64_t GetBlockNum();  // (after the kernel types: emu_blocks.h)

// PipeBarrier<P>: every operation issued on P so far completes before the next one on P starts. V needs
// none (the compiler inserts it); MTE2/MTE3 need one where two copies touch overlapping addresses.
template <pipe_t P>
__aicore__ inline void PipeBarrier(asc_emu::Loc loc = ASC_EMU_HERE) {
    auto& ps = asc_emu::St().pipes;
    if constexpr (P == PIPE_ALL) {
        for (int p = 0; p < asc_emu::NPIPES; ++p)
            for (int q = 0; q < asc_emu::NPIPES; ++q) ps.known[p].c[q] = ps.seq[q];
        for (int q = 0; q < asc_emu::NPIPES; ++q) ps.sExplicit.c[q] = ps.seq[q];
        double all = 0;  // every pipe stalls until everything issued is complete
        for (int q = 0; q < asc_emu::NPIPES; ++q) all = std::max({all, ps.t.lastDone[q], ps.t.free[q]});
        for (int q = 0; q < asc_emu::NPIPES; ++q) ps.t.free[q] = all;
    } else {
        constexpr int p = P == PIPE_S ? asc_emu::PS : P == PIPE_V ? asc_emu::PV : P == PIPE_MTE2 ? asc_emu::PMTE2
                        : P == PIPE_MTE3 ? asc_emu::PMTE3 : P == PIPE_MTE1 ? asc_emu::PMTE1 : P == PIPE_M ? asc_emu::PM
                                                                                                 : asc_emu::PFIX;
        asc_emu::Issue(p, "PipeBarrier", loc);
        ps.known[p].c[p] = ps.seq[p];
        ps.t.free[p] = ps.t.done[p].back() = ps.t.lastDone[p];  // the pipe stalls until its operations complete
    }
}

enum class CacheLine { SINGLE_CACHE_LINE, ENTIRE_DATA_CACHE };
enum class DcciDst { CACHELINE_ALL, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };

namespace emu_dcci {
// Write back (and drop) data-cache lines: the one holding dst (from dst to the line's end when dst is
// not 64-byte aligned), or all of them.
template <typename T>
void Clean(const GlobalTensor<T>& dst, bool single) {
    auto& cache = asc_emu::St().pipes.cache;
    const uintptr_t addr = reinterpret_cast<uintptr_t>(dst.GetPhyAddr());
    for (auto it = cache.begin(); it != cache.end();) {
        if (single && it->first != addr / 64) {
            ++it;
            continue;
        }
        uint8_t* base = reinterpret_cast<uint8_t*>(it->first * 64);
        const int from = single ? static_cast<int>(addr % 64) : 0;
        if (it->second.dirty >> from != 0) {
            // The line goes back whole (SetValue.md): bytes another core wrote into it since the barrier are lost.
            int first = from;
            while (!(it->second.dirty >> first & 1u)) ++first;
            asc_emu::GmBuffer& b = asc_emu::FindGm(base + first, 1, "DataCacheCleanAndInvalid");
            const size_t lo = base >= b.base ? static_cast<size_t>(base - b.base) : 0;
            const size_t hi = std::min(static_cast<size_t>(base + 64 - b.base), b.bytes);
            for (size_t blk = lo / 32; blk < (hi + 31) / 32; ++blk)
                if (asc_emu::OthersWroteNow(b, blk))
                    asc_emu::Fail("DataCacheCleanAndInvalid writes back a whole 64-byte line of '" + b.name +
                                  "' near offset " + std::to_string(blk * 32) + " that another core wrote since the "
                                  "last SyncAll: its bytes are overwritten with this core's stale copy");
        }
        for (int k = from; k < 64; ++k) {
            if (it->second.dirty >> k & 1u) {
                asc_emu::GmWrite(base + k, 1, "DataCacheCleanAndInvalid");
                base[k] = it->second.data[k];
                it->second.dirty &= ~(1ull << k);
            }
        }
        it = it->second.dirty == 0 ? cache.erase(it) : std::next(it);
    }
}
}  // namespace emu_dcci

#if __NPU_ARCH__ == 2002
// 310P has the two-parameter form only (kernel_operator_cache_intf_impl.h).
template <typename T, CacheLine L>
__aicore__ inline void DataCacheCleanAndInvalid(const GlobalTensor<T>& dst) {
    emu_dcci::Clean(dst, L == CacheLine::SINGLE_CACHE_LINE);
}
#else
template <typename T, CacheLine L, DcciDst D>
__aicore__ inline void DataCacheCleanAndInvalid(const GlobalTensor<T>& dst) {
    emu_dcci::Clean(dst, L == CacheLine::SINGLE_CACHE_LINE);
}
#endif
}  // namespace AscendC

// Kernel types (impl/basic_api/utils/kernel_utils_macros.h); 310P runs AICORE or MIX_VECTOR_CORE kernels only.
enum KernelMetaType { KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIV_1_0, KERNEL_TYPE_MIX_AIC_1_0,
                      KERNEL_TYPE_MIX_AIC_1_1, KERNEL_TYPE_MIX_AIC_1_2, KERNEL_TYPE_AICORE, KERNEL_TYPE_VECTORCORE,
                      KERNEL_TYPE_MIX_AICORE, KERNEL_TYPE_MIX_VECTOR_CORE, KERNEL_TYPE_MAX };
static_assert(KERNEL_TYPE_AIC_ONLY == asc_emu::kAicOnly, "emu_runtime.h names AIC_ONLY by its value");
#if __NPU_ARCH__ == 2002
#define KERNEL_TASK_TYPE_DEFAULT(type)                                                                \
    static_assert((type) == KERNEL_TYPE_AICORE || (type) == KERNEL_TYPE_MIX_VECTOR_CORE,              \
                  "310P kernels are KERNEL_TYPE_AICORE or KERNEL_TYPE_MIX_VECTOR_CORE (设置Kernel类型.md)"); \
    asc_emu::St().kernelType = (type)
#else
#define KERNEL_TASK_TYPE_DEFAULT(type)                                                                     \
    static_assert((type) == KERNEL_TYPE_AIV_ONLY || (type) == KERNEL_TYPE_AIC_ONLY ||                      \
                      (type) == KERNEL_TYPE_MIX_AIV_1_0 || (type) == KERNEL_TYPE_MIX_AIC_1_0 ||            \
                      (type) == KERNEL_TYPE_MIX_AIC_1_1 || (type) == KERNEL_TYPE_MIX_AIC_1_2,              \
                  "A2/A3 kernels are AIV_ONLY, AIC_ONLY or a MIX type (设置Kernel类型.md)");                \
    asc_emu::St().kernelType = (type)
#endif
#define REGISTER_TILING_DEFAULT(Struct) using AscEmuTilingStruct = Struct
#define GET_TILING_DATA(var, tiling) \
    AscEmuTilingStruct var;          \
    std::memcpy(&var, (tiling), sizeof(AscEmuTilingStruct))

#include "emu_blocks.h"  // the launch's blocks and SyncAll (needs PipeBarrier)
#include "emu_mix.h"     // a __mix__(1, 2) launch's AI Cores and their cross-core flags

// Which kind of core runs this code (impl/utils/sys_macros.h: g_coreType), written `if ASCEND_IS_AIC { ... }`.
#define ASCEND_IS_AIC (asc_emu::St().coreKind == 1)
#define ASCEND_IS_AIV (asc_emu::St().coreKind == 0)
