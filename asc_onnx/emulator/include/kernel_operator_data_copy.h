// asc-onnx emulator: DataCopy (32-byte granular, rounds down like the hardware) and DataCopyPad.
#pragma once
#include "kernel_tensor.h"

namespace AscendC {

struct DataCopyExtParams {
    uint16_t blockCount = 1;
    uint32_t blockLen = 0;   // bytes
    uint32_t srcStride = 0;  // GM->UB: bytes of GM gap; UB->GM: 32-byte blocks of UB gap
    uint32_t dstStride = 0;  // GM->UB: 32-byte blocks of UB gap; UB->GM: bytes of GM gap
    uint32_t rsv = 0;
    DataCopyExtParams() = default;
    DataCopyExtParams(uint16_t count, uint32_t len, uint32_t src, uint32_t dst, uint32_t r)
        : blockCount(count), blockLen(len), srcStride(src), dstStride(dst), rsv(r) {}
};

template <typename T>
struct DataCopyPadExtParams {
    bool isPad = false;
    uint8_t leftPadding = 0;   // elements
    uint8_t rightPadding = 0;  // elements
    T paddingValue = T(0);
    DataCopyPadExtParams() = default;
    DataCopyPadExtParams(bool pad, uint8_t left, uint8_t right, T value)
        : isPad(pad), leftPadding(left), rightPadding(right), paddingValue(value) {}
};

// The older parameter forms of DataCopyPad (kernel_struct_data_copy.h): blockLen in bytes, srcStride the GM gap in
// bytes and dstStride the UB gap in 32-byte blocks (GM -> UB); paddingValue the pad element's bits.
struct DataCopyParams {
    uint16_t blockCount = 1;
    uint16_t blockLen = 0;
    union {
        uint16_t srcGap = 0;
        uint16_t srcStride;
    };
    union {
        uint16_t dstGap = 0;
        uint16_t dstStride;
    };
    DataCopyParams() {}
    DataCopyParams(uint16_t count, uint16_t len, uint16_t src, uint16_t dst)
        : blockCount(count), blockLen(len), srcGap(src), dstGap(dst) {}
};

struct DataCopyPadParams {
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    uint64_t paddingValue = 0;
    DataCopyPadParams() {}
    DataCopyPadParams(bool pad, uint8_t left, uint8_t right, uint64_t value)
        : isPad(pad), leftPadding(left), rightPadding(right), paddingValue(value) {}
};

// ND -> NZ copy parameters of a GM -> L1 DataCopy (the cube side; declared for the samples that name them).
struct Nd2NzParams {
    uint16_t ndNum = 0, nValue = 0, dValue = 0, srcNdMatrixStride = 0, srcDValue = 0, dstNzC0Stride = 0,
             dstNzNStride = 0, dstNzMatrixStride = 0;
    Nd2NzParams() {}
    Nd2NzParams(uint16_t nd, uint16_t n, uint16_t d, uint16_t srcNd, uint16_t srcD, uint16_t c0, uint16_t nz,
                uint16_t nzMatrix)
        : ndNum(nd), nValue(n), dValue(d), srcNdMatrixStride(srcNd), srcDValue(srcD), dstNzC0Stride(c0),
          dstNzNStride(nz), dstNzMatrixStride(nzMatrix) {}
};

namespace emu_copy {
inline void CheckUb(const void* p, uint64_t bytes, const char* what) {
    if (!emu_ub::IsUb(p)) asc_emu::Fail(std::string(what) + ": local tensor is not in the unified buffer");
    if (emu_ub::Offset(p) % 32 != 0)
        asc_emu::Fail(std::string(what) + ": unified-buffer address " + std::to_string(emu_ub::Offset(p)) +
                      " is not 32-byte aligned");
    if (emu_ub::Offset(p) + bytes > asc_emu::St().soc.ubPhysical)
        asc_emu::Fail(std::string(what) + ": access past the end of the unified buffer");
}
template <typename T>
void CheckFits(const LocalTensor<T>& t, uint64_t bytes, const char* what) {
    if (bytes > static_cast<uint64_t>(t.GetSize()) * sizeof(T))
        asc_emu::Fail(std::string(what) + ": " + std::to_string(bytes) + " bytes do not fit the local tensor of " +
                      std::to_string(t.GetSize() * sizeof(T)) + " bytes");
}
}  // namespace emu_copy

// GM -> UB. count*sizeof(T) that is not a multiple of 32 is rounded DOWN: the tail is silently not copied.
// Runs on MTE2: the UB bytes are pending until a queue, flag or barrier orders them for another pipe.
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count,
                                asc_emu::Loc loc = ASC_EMU_HERE) {
    uint64_t bytes = static_cast<uint64_t>(count) * sizeof(T) / 32 * 32;
    emu_copy::CheckUb(dst.GetPhyAddr(), bytes, "DataCopy GM->UB");
    emu_copy::CheckFits(dst, bytes, "DataCopy GM->UB");
    asc_emu::GmRead(src.GetPhyAddr(), bytes, "DataCopy GM->UB");
    const int32_t op = asc_emu::Issue(asc_emu::PMTE2, "DataCopy GM->UB", loc);
    asc_emu::DmaIssue(asc_emu::PMTE2);
    asc_emu::Mte2Read(op, src.GetPhyAddr(), bytes);
    asc_emu::UbAccess(op, emu_ub::Offset(dst.GetPhyAddr()), bytes, true);
    asc_emu::Dma(asc_emu::PMTE2, src.GetPhyAddr(), bytes, false, src.EmuBypassL2());
    if (asc_emu::Values()) std::memcpy(dst.GetPhyAddr(), src.GetPhyAddr(), bytes);
}

// UB -> GM, same 32-byte rounding down.
// Runs on MTE3.
template <typename T>
__aicore__ inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count,
                                asc_emu::Loc loc = ASC_EMU_HERE) {
    uint64_t bytes = static_cast<uint64_t>(count) * sizeof(T) / 32 * 32;
    emu_copy::CheckUb(src.GetPhyAddr(), bytes, "DataCopy UB->GM");
    emu_copy::CheckFits(src, bytes, "DataCopy UB->GM");
    const int32_t op = asc_emu::Issue(asc_emu::PMTE3, "DataCopy UB->GM", loc);
    asc_emu::DmaIssue(asc_emu::PMTE3);
    asc_emu::UbAccess(op, emu_ub::Offset(src.GetPhyAddr()), bytes, false);
    asc_emu::GmWrite(dst.GetPhyAddr(), bytes, "DataCopy UB->GM", op);
    asc_emu::Dma(asc_emu::PMTE3, dst.GetPhyAddr(), bytes, true, dst.EmuBypassL2());
    if (asc_emu::Values()) std::memcpy(dst.GetPhyAddr(), src.GetPhyAddr(), bytes);
}


// GM -> UB with byte-exact rows; each UB row is padded out to 32 bytes.
template <typename T>
__aicore__ inline void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src,
                                   const DataCopyExtParams& p, const DataCopyPadExtParams<T>& pad,
                                   asc_emu::Loc loc = ASC_EMU_HERE) {
    if (!asc_emu::St().soc.hasDataCopyPad) asc_emu::Fail("DataCopyPad is not available on " + asc_emu::St().soc.name);
    if (p.blockLen % sizeof(T) != 0) asc_emu::Fail("DataCopyPad: blockLen is not a multiple of the element size");
    if (p.blockCount > 4095 || p.blockLen > 2097151) asc_emu::Fail("DataCopyPad: blockCount/blockLen out of range");
    if (pad.leftPadding * sizeof(T) > 32 || pad.rightPadding * sizeof(T) > 32)
        asc_emu::Fail("DataCopyPad: padding wider than 32 bytes");
    uint64_t rowUb = (pad.leftPadding * sizeof(T) + p.blockLen + pad.rightPadding * sizeof(T) + 31) / 32 * 32;
    uint64_t total = p.blockCount == 0 ? 0 : (p.blockCount - 1) * (rowUb + p.dstStride * 32ull) + rowUb;
    emu_copy::CheckUb(dst.GetPhyAddr(), total, "DataCopyPad GM->UB");
    emu_copy::CheckFits(dst, total, "DataCopyPad GM->UB");
    const int32_t op = asc_emu::Issue(asc_emu::PMTE2, "DataCopyPad GM->UB", loc);
    asc_emu::DmaIssue(asc_emu::PMTE2);
    asc_emu::UbAccess(op, emu_ub::Offset(dst.GetPhyAddr()), total, true);
    const uint8_t* g = reinterpret_cast<const uint8_t*>(src.GetPhyAddr());
    uint8_t* u = reinterpret_cast<uint8_t*>(dst.GetPhyAddr());
    for (uint32_t r = 0; r < p.blockCount; ++r) {
        const uint8_t* gr = g + r * (static_cast<uint64_t>(p.blockLen) + p.srcStride);
        uint8_t* ur = u + r * (rowUb + p.dstStride * 32ull);
        asc_emu::GmRead(gr, p.blockLen, "DataCopyPad GM->UB");
        asc_emu::Mte2Read(op, gr, p.blockLen);
        asc_emu::Dma(asc_emu::PMTE2, gr, p.blockLen, false, src.EmuBypassL2());
        T* row = reinterpret_cast<T*>(ur);
        uint32_t n = p.blockLen / sizeof(T);
        uint32_t rowElems = static_cast<uint32_t>(rowUb / sizeof(T));
        std::memcpy(row + pad.leftPadding, gr, p.blockLen);
        // The rest of the row's 32 bytes (GMToUB非对齐数据搬运(DataCopyPad).md, dummy fill): with no padding, the
        // block's first element, isPad or not; with padding, paddingValue (isPad) or undefined (garbage here).
        if (pad.leftPadding == 0 && pad.rightPadding == 0) {
            for (uint32_t i = n; i < rowElems && n > 0; ++i) row[i] = row[0];
        } else if (pad.isPad) {
            for (uint32_t i = 0; i < pad.leftPadding; ++i) row[i] = pad.paddingValue;
            for (uint32_t i = pad.leftPadding + n; i < rowElems; ++i) row[i] = pad.paddingValue;
        } else {
            std::memset(row, 0xA5, pad.leftPadding * sizeof(T));
            std::memset(row + pad.leftPadding + n, 0xA5, (rowElems - pad.leftPadding - n) * sizeof(T));
        }
    }
}

// GM -> UB in the older parameter form.
template <typename T>
__aicore__ inline void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p,
                                   const DataCopyPadParams& pad, asc_emu::Loc loc = ASC_EMU_HERE) {
    T value;
    std::memcpy(&value, &pad.paddingValue, sizeof(T));
    DataCopyPad(dst, src, DataCopyExtParams(p.blockCount, p.blockLen, p.srcGap, p.dstGap, 0),
                DataCopyPadExtParams<T>(pad.isPad, pad.leftPadding, pad.rightPadding, value), loc);
}

// GM -> L1 (or UB: DataCopyGM2UBND2NZImpl) with the ND -> NZ conversion on the way (the cube core's MTE2;
// GMToL1随路转换-ND2NZ搬运): ndNum matrices of nValue rows of dValue elements, row x at src + x * srcDValue, become
// 16-element (32-byte) column blocks: element (x, c) of matrix k lands at dst + k * dstNzMatrixStride +
// (c / C0) * dstNzC0Stride * C0 + x * dstNzNStride * C0 + c % C0, C0 = 32 / sizeof(T). A block of a partial column
// group is padded with zeros. 310P (dav_m200) has no such instruction: its implementation stages each tile through
// the 8 KB at TMP_UB_OFFSET (MTE2, V, MTE3) and lays rows one block apart whatever dstNzNStride says, for 16- and
// 32-bit types only; the emulator takes the 8 KB as written and refuses another dstNzNStride.
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& p,
                                asc_emu::Loc loc = ASC_EMU_HERE) {
    constexpr uint32_t c0 = 32 / sizeof(T);
    const bool l1 = emu_l1::IsL1(dst.GetPhyAddr());
    if (!l1 && !emu_ub::IsUb(dst.GetPhyAddr()))
        asc_emu::Fail("DataCopy GM->L1 (Nd2NzParams): the destination is neither in L1 nor in the unified buffer");
    const uint64_t dstOff = l1 ? emu_l1::Offset(dst.GetPhyAddr()) : emu_ub::Offset(dst.GetPhyAddr());
    if (dstOff % 32 != 0) asc_emu::Fail("DataCopy (Nd2NzParams): destination address not 32-byte aligned");
    // the ranges are checked first, as kernel_operator_data_copy_check.h does; zero sizes then make a NOP
    if (p.ndNum > 4095 || p.nValue > 16384 || p.srcDValue == 0 || p.dstNzC0Stride == 0 ||
        p.dstNzC0Stride > 16384 || p.dstNzNStride == 0 || p.dstNzNStride > 16384)
        asc_emu::Fail("DataCopy (Nd2NzParams): a parameter outside its range (ndNum <= 4095, nValue <= 16384, "
                      "srcDValue >= 1, dstNzC0Stride and dstNzNStride in [1, 16384])");
    if (p.ndNum == 0 || p.nValue == 0 || p.dValue == 0) return;  // a NOP (约束说明)
    const bool m200 = !asc_emu::St().soc.hasDataCopyPad;  // 310P
    if (m200 && l1) {
        if (sizeof(T) != 2 && sizeof(T) != 4)
            asc_emu::Fail("DataCopy GM->L1 (Nd2NzParams) on Ascend310P takes 16- and 32-bit types only");
        if (p.dstNzNStride != 1)
            asc_emu::Fail("DataCopy GM->L1 (Nd2NzParams) on Ascend310P: dav_m200 lays rows one 32-byte block apart "
                          "whatever dstNzNStride says (" + std::to_string(p.dstNzNStride) + " here): set it to 1");
    }
    const uint32_t groups = (p.dValue + c0 - 1) / c0;
    uint64_t span = 0;  // elements from dst to the end of the last 32-byte block written
    for (uint32_t k = 0; k < p.ndNum; ++k)
        if (p.nValue > 0 && groups > 0)
            span = std::max<uint64_t>(span, static_cast<uint64_t>(k) * p.dstNzMatrixStride +
                                                (static_cast<uint64_t>(groups - 1) * p.dstNzC0Stride +
                                                 static_cast<uint64_t>(p.nValue - 1) * p.dstNzNStride + 1) * c0);
    if (span > dst.GetSize())
        asc_emu::Fail("DataCopy (Nd2NzParams): the NZ layout needs " + std::to_string(span) +
                      " elements, the local tensor has " + std::to_string(dst.GetSize()));
    if (dstOff + span * sizeof(T) > (l1 ? asc_emu::St().soc.l1Physical : asc_emu::St().soc.ubPhysical))
        asc_emu::Fail(std::string("DataCopy (Nd2NzParams): access past the end of the ") +
                      (l1 ? "L1 Buffer" : "unified buffer"));
    const int32_t op = asc_emu::Issue(asc_emu::PMTE2, l1 ? "DataCopy GM->L1 (ND2NZ)" : "DataCopy GM->UB (ND2NZ)", loc);
    asc_emu::DmaIssue(asc_emu::PMTE2);
    asc_emu::UbAccess(op, dstOff, span * sizeof(T), true, l1 ? asc_emu::Mem::L1 : asc_emu::Mem::UB);
    if (m200 && l1) {  // the staging tile at TMP_UB_OFFSET
        const uint32_t tmp = asc_emu::St().soc.tmpUbOffset;
        asc_emu::UbAccess(op, tmp, 8192, true);
        std::memset(emu_ub::arena + tmp, 0xA5, 8192);
    }
    for (uint32_t k = 0; k < p.ndNum; ++k) {
        for (uint32_t x = 0; x < p.nValue; ++x) {
            const T* row = src.GetPhyAddr() + static_cast<uint64_t>(k) * p.srcNdMatrixStride +
                           static_cast<uint64_t>(x) * p.srcDValue;
            asc_emu::GmRead(row, p.dValue * sizeof(T), "DataCopy GM->L1");
            asc_emu::Mte2Read(op, row, p.dValue * sizeof(T));
            const double since = asc_emu::St().pipes.t.free[asc_emu::PMTE2];
            asc_emu::Dma(asc_emu::PMTE2, row, p.dValue * sizeof(T), false, src.EmuBypassL2());
            asc_emu::AtLeast(asc_emu::PMTE2, since, asc_emu::St().tm.nd2nzRow);
            if (!asc_emu::Values()) continue;
            T* base = dst.GetPhyAddr() + static_cast<uint64_t>(k) * p.dstNzMatrixStride +
                      static_cast<uint64_t>(x) * p.dstNzNStride * c0;
            for (uint32_t g = 0; g < groups; ++g)
                for (uint32_t c = 0; c < c0; ++c) {
                    const uint32_t col = g * c0 + c;
                    base[static_cast<uint64_t>(g) * p.dstNzC0Stride * c0 + c] = col < p.dValue ? row[col] : T(0);
                }
        }
    }
}

// UB -> GM with byte-exact rows: only blockLen bytes per row reach global memory.
template <typename T>
__aicore__ inline void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p,
                                   asc_emu::Loc loc = ASC_EMU_HERE) {
    if (!asc_emu::St().soc.hasDataCopyPad) asc_emu::Fail("DataCopyPad is not available on " + asc_emu::St().soc.name);
    if (p.blockLen % sizeof(T) != 0) asc_emu::Fail("DataCopyPad: blockLen is not a multiple of the element size");
    if (p.blockCount > 4095 || p.blockLen > 2097151) asc_emu::Fail("DataCopyPad: blockCount/blockLen out of range");
    uint64_t rowUb = (p.blockLen + 31ull) / 32 * 32;
    uint64_t total = p.blockCount == 0 ? 0 : (p.blockCount - 1) * (rowUb + p.srcStride * 32ull) + rowUb;
    emu_copy::CheckUb(src.GetPhyAddr(), total, "DataCopyPad UB->GM");
    emu_copy::CheckFits(src, total, "DataCopyPad UB->GM");
    const int32_t op = asc_emu::Issue(asc_emu::PMTE3, "DataCopyPad UB->GM", loc);
    asc_emu::DmaIssue(asc_emu::PMTE3);
    asc_emu::UbAccess(op, emu_ub::Offset(src.GetPhyAddr()), total, false);
    uint8_t* g = reinterpret_cast<uint8_t*>(dst.GetPhyAddr());
    const uint8_t* u = reinterpret_cast<const uint8_t*>(src.GetPhyAddr());
    for (uint32_t r = 0; r < p.blockCount; ++r) {
        uint8_t* gr = g + r * (static_cast<uint64_t>(p.blockLen) + p.dstStride);
        asc_emu::GmWrite(gr, p.blockLen, "DataCopyPad UB->GM", op);
        asc_emu::Dma(asc_emu::PMTE3, gr, p.blockLen, true, dst.EmuBypassL2());
        std::memcpy(gr, u + r * (rowUb + p.srcStride * 32ull), p.blockLen);
    }
}

}  // namespace AscendC

namespace AscendC {
// UB -> GM in the older parameter form.
template <typename T>
__aicore__ inline void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p,
                                   asc_emu::Loc loc = ASC_EMU_HERE) {
    DataCopyPad(dst, src, DataCopyExtParams(p.blockCount, p.blockLen, p.srcGap, p.dstGap, 0), loc);
}
}  // namespace AscendC
