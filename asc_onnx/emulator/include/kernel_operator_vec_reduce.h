// asc-onnx emulator: reductions (ReduceSum/ReduceMax/ReduceMin, ReduceRepeat, ReduceDataBlock).
// Semantics from the API reference (Memory矢量计算/归约计算/*.md) and impl/basic_api/dav_c220 and
// dav_m200 kernel_operator_vec_reduce_impl.h: a repeat is 256 bytes, summed as a binary tree; the level-2
// (count) forms take a sharedTmpBuffer whose required size depends on the SoC and the API.
#pragma once
#include "kernel_operator_vec.h"

namespace AscendC {

enum class ReduceType { NONE = -1, SUM = 0, MAX, MIN };
enum class ReduceOrder { ORDER_VALUE_INDEX, ORDER_INDEX_VALUE, ORDER_ONLY_VALUE, ORDER_ONLY_INDEX };

namespace emu_red {

template <typename T>
constexpr uint32_t PerRepeat() { return 256 / sizeof(T); }
template <typename T>
constexpr uint32_t PerBlock() { return 32 / sizeof(T); }

// Binary-tree sum of n values, each addition rounded to T (one repeat of vcadd).
template <typename T>
T TreeSum(std::vector<T> v) {
    if (v.empty()) return T(0);
    while (v.size() > 1) {
        std::vector<T> next((v.size() + 1) / 2);
        for (size_t i = 0; i < next.size(); ++i)
            next[i] = 2 * i + 1 < v.size() ? static_cast<T>(v[2 * i] + v[2 * i + 1]) : v[2 * i];
        v.swap(next);
    }
    return v[0];
}

template <typename T>
void Require(const char* api) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, half>, "reductions take half or float");
    (void)api;
}

inline bool Overlap(const void* a, uint64_t an, const void* b, uint64_t bn) {
    auto a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
    return a0 < b0 + bn && b0 < a0 + an;
}

// Checks shared by the level-2 forms: operands in UB, src/tmp 32-byte aligned, dst element aligned
// (ReduceRepeat table 3), no overlap of dst or tmp with src (dst and tmp may share bytes).
template <typename T>
void CheckLevel2(const char* api, const LocalTensor<T>& dst, uint32_t dstElems, const LocalTensor<T>& src,
                 uint32_t count, const LocalTensor<T>& tmp, uint32_t tmpElems, bool tmpMayOverlapSrc = false) {
    emu_vec::Operand(api, src, count);
    if (dst.GetPhyAddr() == nullptr || !emu_ub::IsUb(dst.GetPhyAddr()))
        asc_emu::Fail(std::string(api) + ": destination is not an allocated unified-buffer tensor");
    if (emu_ub::Offset(dst.GetPhyAddr()) % (sizeof(T) * (dstElems > 1 ? 2 : 1)) != 0)
        asc_emu::Fail(std::string(api) + ": destination address is not aligned to its result");
    if (dstElems > dst.GetSize()) asc_emu::Fail(std::string(api) + ": destination smaller than its result");
    if (Overlap(dst.GetPhyAddr(), dstElems * sizeof(T), src.GetPhyAddr(), count * sizeof(T)))
        asc_emu::Fail(std::string(api) + ": destination overlaps the source");
    if (tmpElems > 0) {
        emu_vec::Operand(api, tmp, 0);
        if (tmp.GetSize() < tmpElems)
            asc_emu::Fail(std::string(api) + ": sharedTmpBuffer holds " + std::to_string(tmp.GetSize()) +
                          " elements, " + std::to_string(tmpElems) + " needed for count " + std::to_string(count) +
                          " on " + asc_emu::St().soc.name);
        if (!tmpMayOverlapSrc && Overlap(tmp.GetPhyAddr(), tmpElems * sizeof(T), src.GetPhyAddr(), count * sizeof(T)))
            asc_emu::Fail(std::string(api) + ": sharedTmpBuffer overlaps the source");
    }
}

inline uint32_t RoundUp(uint32_t n, uint32_t to) { return (n + to - 1) / to * to; }

// Repeats of the first round as the scratch formulas count them: whole repeats, at least one (the
// leftover elements are reduced on their own, kernel_operator_vec_reduce_intf_impl.h).
template <typename T>
uint32_t FirstRepeats(uint32_t count) {
    const uint32_t r = count / PerRepeat<T>();
    return r > 0 ? r : 1;
}

// ReduceMax/ReduceMin with calIndex keep every round's (value, index) pairs: ReduceMax.md's formula.
template <typename T>
uint32_t IndexScratch(uint32_t count) {
    const uint32_t epb = PerBlock<T>(), epr = PerRepeat<T>();
    const uint32_t out1 = FirstRepeats<T>(count) * 2;
    const uint32_t start2 = RoundUp(out1, epb);
    const uint32_t out2 = RoundUp(out1, epr) / epr * 2;
    uint32_t need = start2 + RoundUp(out2, epb);
    if (out2 > 2) {
        const uint32_t out3 = RoundUp(out2, epr) / epr * 2;
        need += RoundUp(out3, epb);
    }
    return need;
}

template <typename T>
void Access(const char* api, const asc_emu::Loc& loc, const LocalTensor<T>& dst, uint32_t dstElems,
            const LocalTensor<T>& src, uint32_t count, const LocalTensor<T>& tmp, uint32_t tmpElems) {
    const int32_t op = asc_emu::Issue(asc_emu::PV, api, loc);
    asc_emu::UbAccess(op, emu_ub::Offset(src.GetPhyAddr()), count * sizeof(T), false);
    if (tmpElems > 0) asc_emu::UbAccess(op, emu_ub::Offset(tmp.GetPhyAddr()), tmpElems * sizeof(T), true);
    asc_emu::UbAccess(op, emu_ub::Offset(dst.GetPhyAddr()), dstElems * sizeof(T), true);
    asc_emu::CountVec(api, count);
    // The first round reads every element; later rounds are short. The result ends in a scalar register, so the
    // implementation drains the vector pipe into S (ReduceMax/ReduceMin with a partial last repeat: twice).
    asc_emu::VecCost(static_cast<uint64_t>(count) * sizeof(T));
    asc_emu::ReduceDrain();
    if (std::strcmp(api, "ReduceSum") != 0 && count % PerRepeat<T>() != 0) asc_emu::ReduceDrain();
}

// Max or min with its index (first occurrence), NaN propagating as the vector unit's vcmax does.
template <typename T>
std::pair<T, uint32_t> Extreme(const T* p, uint32_t n, bool max) {
    T best = p[0];
    uint32_t at = 0;
    for (uint32_t i = 1; i < n; ++i) {
        const float v = static_cast<float>(p[i]), b = static_cast<float>(best);
        if (std::isnan(b)) break;
        if (std::isnan(v) || (max ? v > b : v < b)) best = p[i], at = i;
    }
    return {best, at};
}

template <typename T>
void ReduceExtreme(const char* api, bool max, const LocalTensor<T>& dst, const LocalTensor<T>& src,
                   const LocalTensor<T>& tmp, int32_t count, bool calIndex, const asc_emu::Loc& loc) {
    Require<T>(api);
    if (count < 0) asc_emu::Fail(std::string(api) + ": negative count");
    if (count == 0) return;  // NOP (A2: count 0 writes nothing)
    const uint32_t n = static_cast<uint32_t>(count);
    if (calIndex && std::is_same_v<T, half> && n > 65536)
        asc_emu::Fail(std::string(api) + ": half indexes stop at 65535 (ReduceMax.md)");
    // The first round writes a (value, index) pair per repeat into sharedTmpBuffer on every SoC; with the
    // index, later rounds keep theirs too. The scratch may reuse the source's space (ReduceMax.md).
    const uint32_t need = calIndex ? IndexScratch<T>(n) : RoundUp(2 * FirstRepeats<T>(n), PerBlock<T>());
    const uint32_t outElems = calIndex ? 2 : 1;
    CheckLevel2(api, dst, outElems, src, n, tmp, need, /*tmpMayOverlapSrc=*/true);
    Access(api, loc, dst, outElems, src, n, tmp, need);
    auto r = Extreme(src.GetPhyAddr(), n, max);
    std::memset(tmp.GetPhyAddr(), 0xA5, need * sizeof(T));  // the scratch holds intermediate pairs afterwards
    dst.GetPhyAddr()[0] = r.first;
    if (calIndex) {
        // The index is stored in the element's bits (ReduceRepeat key features): read it back reinterpreted.
        T idx;
        if constexpr (std::is_same_v<T, float>) {
            const uint32_t bits = r.second;
            std::memcpy(&idx, &bits, sizeof(idx));
        } else {
            const uint16_t bits = static_cast<uint16_t>(r.second);
            std::memcpy(&idx, &bits, sizeof(idx));
        }
        dst.GetPhyAddr()[1] = idx;
    }
}

}  // namespace emu_red

// dst[0] = sum of src[0, count). A2 (2201): one tree per repeat, repeats added in order, sharedTmpBuffer
// unused. 310P (2002): repeats reduced into sharedTmpBuffer, then trees of those (ReduceSum.md, way 2).
template <typename T, bool isSetMask = true>
__aicore__ inline void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src,
                                 const LocalTensor<T>& sharedTmpBuffer, const int32_t count,
                                 asc_emu::Loc loc = ASC_EMU_HERE) {
    emu_red::Require<T>("ReduceSum");
    if (count < 0) asc_emu::Fail("ReduceSum: negative count");
    if (count == 0) return;
    const uint32_t n = static_cast<uint32_t>(count);
    const uint32_t reps = emu_red::FirstRepeats<T>(n);
#if __NPU_ARCH__ == 2002
    const uint32_t need = emu_red::RoundUp(reps, emu_red::PerBlock<T>());
#else
    const uint32_t need = 0;
#endif
    emu_red::CheckLevel2("ReduceSum", dst, 1, src, n, sharedTmpBuffer, need);
    emu_red::Access("ReduceSum", loc, dst, 1, src, n, sharedTmpBuffer, need);
    // Trees of one repeat each: the whole repeats, and the leftover elements on their own.
    const uint32_t whole = n / emu_red::PerRepeat<T>();
    std::vector<T> partial;
    for (uint32_t r = 0; r < whole; ++r) {
        const T* p = src.GetPhyAddr() + r * emu_red::PerRepeat<T>();
        partial.push_back(emu_red::TreeSum(std::vector<T>(p, p + emu_red::PerRepeat<T>())));
    }
    const uint32_t done = whole * emu_red::PerRepeat<T>();
    const bool tail = done < n;
    const T rest = tail ? emu_red::TreeSum(std::vector<T>(src.GetPhyAddr() + done, src.GetPhyAddr() + n)) : T(0);
    T total;
    if (need == 0) {  // A2: one counter-mode vcadd, repeats accumulated in order
        total = partial.empty() ? rest : partial[0];
        for (size_t r = 1; r < partial.size(); ++r) total = static_cast<T>(total + partial[r]);
        if (tail && !partial.empty()) total = static_cast<T>(total + rest);
    } else if (partial.empty()) {
        total = rest;
    } else {  // 310P: the whole repeats' sums through sharedTmpBuffer as trees of trees, the leftover last
        for (size_t r = 0; r < partial.size(); ++r) sharedTmpBuffer.GetPhyAddr()[r] = partial[r];
        while (partial.size() > 1) {
            std::vector<T> next;
            for (size_t lo = 0; lo < partial.size(); lo += emu_red::PerRepeat<T>()) {
                const size_t hi = std::min(partial.size(), lo + emu_red::PerRepeat<T>());
                next.push_back(emu_red::TreeSum(std::vector<T>(partial.begin() + lo, partial.begin() + hi)));
            }
            partial.swap(next);
        }
        total = tail ? static_cast<T>(partial[0] + rest) : partial[0];
    }
    dst.GetPhyAddr()[0] = emu_vec::Sat(total);
}

// dst[0] = max of src[0, count) (dst[1] = its index, as T's bits, with calIndex).
template <typename T>
__aicore__ inline void ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src,
                                 const LocalTensor<T>& sharedTmpBuffer, const int32_t count, bool calIndex = 0,
                                 asc_emu::Loc loc = ASC_EMU_HERE) {
    emu_red::ReduceExtreme("ReduceMax", true, dst, src, sharedTmpBuffer, count, calIndex, loc);
}

template <typename T>
__aicore__ inline void ReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src,
                                 const LocalTensor<T>& sharedTmpBuffer, const int32_t count, bool calIndex = 0,
                                 asc_emu::Loc loc = ASC_EMU_HERE) {
    emu_red::ReduceExtreme("ReduceMin", false, dst, src, sharedTmpBuffer, count, calIndex, loc);
}

namespace emu_red {
// Source elements of repeat r selected by a continuous mask: the first `mask` of its 8 blocks.
template <typename T>
std::vector<const T*> RepeatElems(const LocalTensor<T>& src, int32_t mask, int32_t r, int32_t srcBlkStride,
                                  int32_t srcRepStride) {
    std::vector<const T*> out;
    const uint8_t* base = reinterpret_cast<const uint8_t*>(src.GetPhyAddr()) + static_cast<uint64_t>(r) * srcRepStride * 32;
    for (int32_t i = 0; i < mask; ++i) {
        const uint32_t blk = i / PerBlock<T>(), j = i % PerBlock<T>();
        out.push_back(reinterpret_cast<const T*>(base + static_cast<uint64_t>(blk) * srcBlkStride * 32) + j);
    }
    return out;
}

template <typename T>
void CheckRepeatForm(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& src, int32_t mask,
                     int32_t repeatTime, int32_t srcBlkStride, int32_t srcRepStride, uint64_t& srcBytes) {
    Require<T>(api);
    if (mask < 0 || mask > static_cast<int32_t>(PerRepeat<T>()) || (mask == 0 && __NPU_ARCH__ == 2002))
        asc_emu::Fail(std::string(api) + ": continuous mask " + std::to_string(mask) + " outside [" +
                      (__NPU_ARCH__ == 2002 ? "1" : "0") + ", " + std::to_string(PerRepeat<T>()) + "]");
    if (repeatTime < 0 || repeatTime > 255) asc_emu::Fail(std::string(api) + ": repeatTime outside [0, 255]");
    emu_vec::Operand(api, src, 0);
    if (dst.GetPhyAddr() == nullptr || !emu_ub::IsUb(dst.GetPhyAddr()))
        asc_emu::Fail(std::string(api) + ": destination is not an allocated unified-buffer tensor");
    const uint32_t lastBlk = mask > 0 ? (mask - 1) / PerBlock<T>() : 0;
    srcBytes = repeatTime == 0 || mask == 0 ? 0 : emu_vec::RepeatSpan(repeatTime, lastBlk + 1, srcBlkStride, srcRepStride);
    if (srcBytes > static_cast<uint64_t>(src.GetSize()) * sizeof(T))
        asc_emu::Fail(std::string(api) + ": the repeats read past the source tensor");
}
}  // namespace emu_red

// One result per repeat: the sum (or max/min) of the repeat's masked elements; dst steps by dstRepStride
// results (SUM: one element; MAX/MIN: a value-index pair, or one value with ORDER_ONLY_VALUE).
template <ReduceType reduceType, typename T, typename U, bool isSetMask = true>
__aicore__ inline void ReduceRepeat(const LocalTensor<T>& dst, const LocalTensor<U>& src, const int32_t mask,
                                    const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
                                    const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX,
                                    asc_emu::Loc loc = ASC_EMU_HERE) {
    static_assert(std::is_same_v<T, U>, "ReduceRepeat: the emulator takes dst and src of one type");
    static_assert(isSetMask, "ReduceRepeat: isSetMask = false (the mask register as set before) is not emulated");
    uint64_t srcBytes = 0;
    emu_red::CheckRepeatForm("ReduceRepeat", dst, src, mask, repeatTime, srcBlkStride, srcRepStride, srcBytes);
    if (mask == 0 || repeatTime == 0) return;  // A2: a no-op, nothing written (ReduceRepeat.md)
    const bool pair = reduceType != ReduceType::SUM && order != ReduceOrder::ORDER_ONLY_VALUE &&
                      order != ReduceOrder::ORDER_ONLY_INDEX;
    if (reduceType != ReduceType::SUM && order != ReduceOrder::ORDER_VALUE_INDEX && order != ReduceOrder::ORDER_ONLY_VALUE)
        asc_emu::Fail("ReduceRepeat: only ORDER_VALUE_INDEX and ORDER_ONLY_VALUE are emulated");
#if __NPU_ARCH__ == 2002
    if (reduceType != ReduceType::SUM && order == ReduceOrder::ORDER_ONLY_VALUE)
        asc_emu::Fail("ReduceRepeat: 310P takes ORDER_VALUE_INDEX or ORDER_INDEX_VALUE only (ReduceRepeat.md)");
#endif
    // Destination alignment (ReduceRepeat.md table 3): one element for SUM, a pair for MAX/MIN.
    if (emu_ub::Offset(dst.GetPhyAddr()) % (sizeof(T) * (reduceType == ReduceType::SUM ? 1 : 2)) != 0)
        asc_emu::Fail("ReduceRepeat: destination address is not aligned to its results");
    const uint32_t unit = pair ? 2 : 1;
    const uint64_t dstElems = repeatTime == 0 ? 0 : static_cast<uint64_t>(repeatTime - 1) * dstRepStride * unit + unit;
    if (dstElems > dst.GetSize()) asc_emu::Fail("ReduceRepeat: the results run past the destination tensor");
    if (emu_red::Overlap(dst.GetPhyAddr(), dstElems * sizeof(T), src.GetPhyAddr(), srcBytes))
        asc_emu::Fail("ReduceRepeat: destination overlaps the source");
    const int32_t op = asc_emu::Issue(asc_emu::PV, "ReduceRepeat", loc);
    asc_emu::UbAccess(op, emu_ub::Offset(src.GetPhyAddr()), srcBytes, false);
    asc_emu::UbAccess(op, emu_ub::Offset(dst.GetPhyAddr()), dstElems * sizeof(T), true);
    asc_emu::Spend(asc_emu::PV, asc_emu::St().tm.vecIssue + repeatTime * asc_emu::St().tm.vecRepeat);
    for (int32_t r = 0; r < repeatTime; ++r) {
        auto elems = emu_red::RepeatElems(src, mask, r, srcBlkStride, srcRepStride);
        T* d = dst.GetPhyAddr() + static_cast<uint64_t>(r) * dstRepStride * unit;
        if constexpr (reduceType == ReduceType::SUM) {
            std::vector<T> v;
            for (auto* p : elems) v.push_back(*p);
            d[0] = emu_vec::Sat(emu_red::TreeSum(v));
        } else {
            std::vector<T> v;
            for (auto* p : elems) v.push_back(*p);
            auto e = emu_red::Extreme(v.data(), static_cast<uint32_t>(v.size()), reduceType == ReduceType::MAX);
            d[0] = e.first;
            if (pair) {
                T idx;
                if constexpr (std::is_same_v<T, float>) {
                    const uint32_t bits = e.second;
                    std::memcpy(&idx, &bits, sizeof(idx));
                } else {
                    const uint16_t bits = static_cast<uint16_t>(e.second);
                    std::memcpy(&idx, &bits, sizeof(idx));
                }
                d[1] = idx;
            }
        }
    }
    asc_emu::CountVec("ReduceRepeat", static_cast<uint64_t>(repeatTime) * mask);
}

// Eight results per repeat, one per 32-byte block (of the masked elements in it); dst steps by
// dstRepStride x 8 results (ReduceDataBlock.md: 32 bytes for float, 16 for half).
template <ReduceType reduceType, typename T, typename U, bool isSetMask = true>
__aicore__ inline void ReduceDataBlock(const LocalTensor<T>& dst, const LocalTensor<U>& src, const int32_t mask,
                                       const int32_t repeatTime, const int32_t dstRepStride,
                                       const int32_t srcBlkStride, const int32_t srcRepStride,
                                       asc_emu::Loc loc = ASC_EMU_HERE) {
    static_assert(std::is_same_v<T, U>, "ReduceDataBlock: the emulator takes dst and src of one type");
    uint64_t srcBytes = 0;
    emu_red::CheckRepeatForm("ReduceDataBlock", dst, src, mask, repeatTime, srcBlkStride, srcRepStride, srcBytes);
    const uint64_t dstElems = repeatTime == 0 ? 0 : static_cast<uint64_t>(repeatTime - 1) * dstRepStride * 8 + 8;
    if (dstElems > dst.GetSize()) asc_emu::Fail("ReduceDataBlock: the results run past the destination tensor");
    if (emu_ub::Offset(dst.GetPhyAddr()) % (8 * sizeof(T)) != 0)  // 16 bytes for half, 32 for float
        asc_emu::Fail("ReduceDataBlock: destination address is not aligned to 8 results");
    if (emu_red::Overlap(dst.GetPhyAddr(), dstElems * sizeof(T), src.GetPhyAddr(), srcBytes))
        asc_emu::Fail("ReduceDataBlock: destination overlaps the source");
    const int32_t op = asc_emu::Issue(asc_emu::PV, "ReduceDataBlock", loc);
    asc_emu::UbAccess(op, emu_ub::Offset(src.GetPhyAddr()), srcBytes, false);
    asc_emu::UbAccess(op, emu_ub::Offset(dst.GetPhyAddr()), dstElems * sizeof(T), true);
    asc_emu::Spend(asc_emu::PV, asc_emu::St().tm.vecIssue + repeatTime * asc_emu::St().tm.vecRepeat);
    for (int32_t r = 0; r < repeatTime; ++r) {
        auto elems = emu_red::RepeatElems(src, mask, r, srcBlkStride, srcRepStride);
        T* d = dst.GetPhyAddr() + static_cast<uint64_t>(r) * dstRepStride * 8;
        for (uint32_t b = 0; b * emu_red::PerBlock<T>() < elems.size(); ++b) {
            std::vector<T> v;
            for (uint32_t j = b * emu_red::PerBlock<T>(); j < std::min<size_t>(elems.size(), (b + 1) * emu_red::PerBlock<T>()); ++j)
                v.push_back(*elems[j]);
            if constexpr (reduceType == ReduceType::SUM) {
                d[b] = emu_vec::Sat(emu_red::TreeSum(v));
            } else {
                d[b] = emu_red::Extreme(v.data(), static_cast<uint32_t>(v.size()), reduceType == ReduceType::MAX).first;
            }
        }
    }
    asc_emu::CountVec("ReduceDataBlock", static_cast<uint64_t>(repeatTime) * mask);
}

}  // namespace AscendC
