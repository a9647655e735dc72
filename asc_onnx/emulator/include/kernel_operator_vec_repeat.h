// asc-onnx emulator: level-0 vector instructions with repeat parameters. Binary ops with a continuous mask
// (basic_api/kernel_operator_vec_binary_intf.h: Op(dst, src0, src1, uint64_t mask, repeatTime, BinaryRepeatParams))
// and Brcb (kernel_operator_vec_brcb_intf.h). A repeat covers 8 blocks of 32 bytes; blkStride steps between the
// blocks of a repeat and repStride between repeats, both in blocks (高维切分.md); the mask is how many elements of
// a repeat take part, the rest of dst keeping its bytes.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "kernel_operator_vec.h"
#include "kernel_operator_vec_reduce.h"
#include "kernel_tensor.h"

namespace AscendC {

struct BinaryRepeatParams {
    __aicore__ BinaryRepeatParams() {}
    __aicore__ BinaryRepeatParams(const uint8_t dstBlkStrideIn, const uint8_t src0BlkStrideIn,
                                  const uint8_t src1BlkStrideIn, const uint8_t dstRepStrideIn,
                                  const uint8_t src0RepStrideIn, const uint8_t src1RepStrideIn)
        : dstBlkStride(dstBlkStrideIn), src0BlkStride(src0BlkStrideIn), src1BlkStride(src1BlkStrideIn),
          dstRepStride(dstRepStrideIn), src0RepStride(src0RepStrideIn), src1RepStride(src1RepStrideIn) {}
    uint8_t dstBlkStride = 1;
    uint8_t src0BlkStride = 1;
    uint8_t src1BlkStride = 1;
    uint8_t dstRepStride = 8;
    uint8_t src0RepStride = 8;
    uint8_t src1RepStride = 8;
};

struct BrcbRepeatParams {
    __aicore__ BrcbRepeatParams() {}
    __aicore__ BrcbRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t dstRepStrideIn)
        : dstRepStride(dstRepStrideIn), dstBlkStride(dstBlkStrideIn) {}
    uint16_t dstRepStride = 8;
    uint16_t dstBlkStride = 1;
};

namespace emu_rep {

template <typename T>
void Check(const char* api, const LocalTensor<T>& t, uint64_t span, const char* what) {
    emu_vec::Operand(api, t, 0);
    if (span > static_cast<uint64_t>(t.GetSize()) * sizeof(T))
        asc_emu::Fail(std::string(api) + ": the repeats of " + what + " run past its tensor (" + std::to_string(span) +
                      " bytes of " + std::to_string(t.GetSize() * sizeof(T)) + ")");
}

// The blocks (32-byte addresses) repeat r of an operand touches, in lane order.
inline void Blocks(std::vector<uintptr_t>& out, const void* base, uint32_t r, uint32_t blocks, uint32_t blk,
                   uint32_t rep) {
    out.clear();
    for (uint32_t b = 0; b < blocks; ++b)
        out.push_back(reinterpret_cast<uintptr_t>(base) + (static_cast<uint64_t>(r) * rep + b * blk) * 32);
}

// 通用说明和约束.md (通用地址重叠约束): within a repeat, dst and a source overlap completely (the same blocks in the
// same order) or not at all; no repeat reads a block an earlier repeat wrote, except src1 of Add/Sub/Mul/Max/Min
// (half, float, int32) with src1RepStride or dstRepStride 0 (an accumulation).
template <typename T>
void CheckOverlap(const char* api, const void* dst, const void* src, uint32_t repeats, uint32_t blocks, uint32_t dBlk,
                  uint32_t dRep, uint32_t sBlk, uint32_t sRep, bool exempt) {
    std::unordered_map<uintptr_t, uint32_t> written;  // block -> first repeat writing it
    std::vector<uintptr_t> d, s;
    for (uint32_t r = 0; r < repeats; ++r) {
        Blocks(d, dst, r, blocks, dBlk, dRep);
        for (uintptr_t b : d) written.emplace(b, r);
    }
    for (uint32_t r = 0; r < repeats; ++r) {
        Blocks(d, dst, r, blocks, dBlk, dRep);
        Blocks(s, src, r, blocks, sBlk, sRep);
        bool shared = false;
        for (uintptr_t b : s) {
            for (uintptr_t x : d) shared = shared || b == x;
            auto it = written.find(b);
            if (!exempt && it != written.end() && it->second < r)
                asc_emu::Fail(std::string(api) + ": repeat " + std::to_string(r) + " reads a block repeat " +
                              std::to_string(it->second) + " wrote (通用地址重叠约束)");
        }
        if (shared && s != d)
            asc_emu::Fail(std::string(api) + ": within repeat " + std::to_string(r) +
                          ", the destination partly overlaps a source (通用地址重叠约束)");
    }
}

template <typename T, typename F>
void Binary(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,
            uint64_t mask, uint8_t repeatTime, const BinaryRepeatParams& p, bool floatOnly, bool accumulates, F f,
            const asc_emu::Loc& loc) {
    emu_vec::RequireDtype<T>(api, floatOnly);
    constexpr uint32_t perBlock = 32 / sizeof(T), perRepeat = 256 / sizeof(T);
    if (mask > perRepeat || (mask == 0 && __NPU_ARCH__ == 2002))
        asc_emu::Fail(std::string(api) + ": continuous mask " + std::to_string(mask) + " outside [" +
                      (__NPU_ARCH__ == 2002 ? "1" : "0") + ", " + std::to_string(perRepeat) + "]");
    if (p.dstBlkStride == 0)
        asc_emu::Fail(std::string(api) + ": dstBlkStride 0 is undefined behaviour (高维切分.md)");
    if (mask == 0) return;  // A2: a no-op (掩码/通用说明.md)
    const uint32_t blocks = static_cast<uint32_t>((mask + perBlock - 1) / perBlock);
    const uint64_t dSpan = emu_vec::RepeatSpan(repeatTime, blocks, p.dstBlkStride, p.dstRepStride);
    const uint64_t aSpan = emu_vec::RepeatSpan(repeatTime, blocks, p.src0BlkStride, p.src0RepStride);
    const uint64_t bSpan = emu_vec::RepeatSpan(repeatTime, blocks, p.src1BlkStride, p.src1RepStride);
    Check(api, dst, dSpan, "dst"), Check(api, src0, aSpan, "src0"), Check(api, src1, bSpan, "src1");
    CheckOverlap<T>(api, dst.GetPhyAddr(), src0.GetPhyAddr(), repeatTime, blocks, p.dstBlkStride, p.dstRepStride,
                    p.src0BlkStride, p.src0RepStride, false);
    const bool exempt = accumulates && (p.src1RepStride == 0 || p.dstRepStride == 0) &&
                        (std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, int32_t>);
    CheckOverlap<T>(api, dst.GetPhyAddr(), src1.GetPhyAddr(), repeatTime, blocks, p.dstBlkStride, p.dstRepStride,
                    p.src1BlkStride, p.src1RepStride, exempt);
    const int32_t op = asc_emu::Issue(asc_emu::PV, api, loc);
    asc_emu::UbAccess(op, emu_ub::Offset(src0.GetPhyAddr()), aSpan, false);
    asc_emu::UbAccess(op, emu_ub::Offset(src1.GetPhyAddr()), bSpan, false);
    asc_emu::UbAccess(op, emu_ub::Offset(dst.GetPhyAddr()), dSpan, true);
    asc_emu::Spend(asc_emu::PV, asc_emu::St().tm.vecIssue +
                                    repeatTime * (emu_vec::SlowApi(api) ? asc_emu::St().tm.vecSlowRepeat
                                                                        : asc_emu::St().tm.vecRepeat) +
                                    asc_emu::BankConflictBeats(
                                        {emu_ub::Offset(dst.GetPhyAddr()), p.dstBlkStride, p.dstRepStride},
                                        {emu_ub::Offset(src0.GetPhyAddr()), p.src0BlkStride, p.src0RepStride},
                                        {emu_ub::Offset(src1.GetPhyAddr()), p.src1BlkStride, p.src1RepStride},
                                        repeatTime, blocks));
    if (asc_emu::Values()) {
        const auto at = [](T* base, uint32_t r, uint32_t i, uint32_t blk, uint32_t rep) {
            return base + (static_cast<uint64_t>(r) * rep + static_cast<uint64_t>(i / perBlock) * blk) * perBlock +
                   i % perBlock;
        };
        for (uint32_t r = 0; r < repeatTime; ++r) {
            for (uint32_t i = 0; i < mask; ++i) {
                const T a = *at(src0.GetPhyAddr(), r, i, p.src0BlkStride, p.src0RepStride);
                const T b = *at(src1.GetPhyAddr(), r, i, p.src1BlkStride, p.src1RepStride);
                *at(dst.GetPhyAddr(), r, i, p.dstBlkStride, p.dstRepStride) = emu_vec::Sat(f(a, b));
            }
        }
    }
    asc_emu::CountVec(api, static_cast<uint64_t>(repeatTime) * mask);
}

}  // namespace emu_rep

// isSetMask = false would take the mask register as it stands: the emulator has none, so it refuses the form.
#define ASC_EMU_BINARY_REPEAT(NAME, FLOAT_ONLY, ACCUMULATES, EXPR)                                           \
    template <typename T, bool isSetMask = true>                                                             \
    __aicore__ inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, \
                                uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams& repeatParams,   \
                                asc_emu::Loc loc = ASC_EMU_HERE) {                                            \
        static_assert(isSetMask, #NAME ": isSetMask = false (the mask register as set before) is not emulated"); \
        emu_rep::Binary(#NAME, dst, src0, src1, mask, repeatTime, repeatParams, FLOAT_ONLY, ACCUMULATES,      \
                        [](T a, T b) -> T { return EXPR; }, loc);                                             \
    }
ASC_EMU_BINARY_REPEAT(Add, false, true, static_cast<T>(a + b))
ASC_EMU_BINARY_REPEAT(Sub, false, true, static_cast<T>(a - b))
ASC_EMU_BINARY_REPEAT(Mul, false, true, static_cast<T>(a * b))
ASC_EMU_BINARY_REPEAT(Div, true, false, static_cast<T>(a / b))
ASC_EMU_BINARY_REPEAT(Max, false, true, (a > b || std::isnan(static_cast<float>(a))) ? a : b)
ASC_EMU_BINARY_REPEAT(Min, false, true, (a < b || std::isnan(static_cast<float>(a))) ? a : b)
#undef ASC_EMU_BINARY_REPEAT

// Brcb: each repeat takes 8 consecutive elements of src and fills one 32-byte block of dst with each (block j of
// repeat i at (i * dstRepStride + j * dstBlkStride) blocks). dav_c220: one vbrcb. dav_m200: an 8 x 8 transpose
// through 256 bytes at TMP_UB_OFFSET, for dstBlkStride 1 only (BrcbImplB32Impl/B16Impl).
template <typename T>
__aicore__ inline void Brcb(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint8_t repeatTime,
                            const BrcbRepeatParams& p, asc_emu::Loc loc = ASC_EMU_HERE) {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Brcb takes 16- or 32-bit elements");
    constexpr uint32_t perBlock = 32 / sizeof(T);
    if (p.dstBlkStride == 0)
        asc_emu::Fail("Brcb: dstBlkStride 0 is undefined behaviour (Brcb.md constraints)");
#if __NPU_ARCH__ == 2002
    if constexpr (std::is_same_v<T, bfloat16_t>) asc_emu::Fail("Brcb: 310P takes no bfloat16_t (Brcb.md)");
    // dstBlkStride 1 transposes 8 x 8 blocks through scratch at TMP_UB_OFFSET (BrcbImplB32Impl/B16Impl); wider
    // strides read each value back to the scalar unit and Duplicate it (BrcbImplStrideOne's other branch).
    const uint32_t tmp = asc_emu::St().soc.tmpUbOffset;
    if (p.dstBlkStride == 1 && asc_emu::St().ubUsed > tmp)
        asc_emu::Fail("Brcb at " + loc.Str() + " writes scratch at unified-buffer offset " + std::to_string(tmp) +
                      " (TMP_UB_OFFSET), inside the kernel's own buffers: reserve 8 KB on the host (Brcb.md)");
    // The 16-bit path keeps its destination offset in 16 bits (dav_m200 BrcbImplB16Impl): it wraps inside UB.
    if (sizeof(T) == 2 && repeatTime > 0 && static_cast<uint64_t>(repeatTime - 1) * p.dstRepStride * 16 > 65535)
        asc_emu::Fail("Brcb: 310P's 16-bit destination offset (repeatTime - 1) x dstRepStride x 16 passes 65535");
#endif
    const uint64_t srcBytes = static_cast<uint64_t>(repeatTime) * 8 * sizeof(T);
    const uint64_t dSpan = emu_vec::RepeatSpan(repeatTime, 8, p.dstBlkStride, p.dstRepStride);
    emu_rep::Check("Brcb", src, srcBytes, "src"), emu_rep::Check("Brcb", dst, dSpan, "dst");
    if (emu_red::Overlap(dst.GetPhyAddr(), dSpan, src.GetPhyAddr(), srcBytes))
        asc_emu::Fail("Brcb: source and destination share memory (Brcb.md constraints)");
    const int32_t op = asc_emu::Issue(asc_emu::PV, "Brcb", loc);
    asc_emu::UbAccess(op, emu_ub::Offset(src.GetPhyAddr()), srcBytes, false);
    asc_emu::UbAccess(op, emu_ub::Offset(dst.GetPhyAddr()), dSpan, true);
    asc_emu::Spend(asc_emu::PV, asc_emu::St().tm.vecIssue + repeatTime * asc_emu::St().tm.vecRepeat);
    if (asc_emu::Values()) {
        for (uint32_t i = 0; i < repeatTime; ++i) {
            for (uint32_t j = 0; j < 8; ++j) {
                const T v = src.GetPhyAddr()[i * 8 + j];
                T* block = dst.GetPhyAddr() + (static_cast<uint64_t>(i) * p.dstRepStride +
                                               static_cast<uint64_t>(j) * p.dstBlkStride) * perBlock;
                for (uint32_t e = 0; e < perBlock; ++e) block[e] = v;
            }
        }
    }
    asc_emu::CountVec("Brcb", static_cast<uint64_t>(repeatTime) * 8 * perBlock);
}

}  // namespace AscendC
