// asc-onnx emulator: the basic cube API of a cube core (static tensors, 静态Tensor编程): LoadData from L1 into
// L0A/L0B on MTE1, Mmad on M, Fixpipe from L0C to GM on FIX (910B, dav_c220). Layouts follow 关键分形格式详解.md:
// A in L0A is Zz (16 x C0 fractals row by row, each row-major), B in L0B is Zn (C0 x 16 fractals row by row, each
// column-major), C in L0C is Nz (16 x 16 fractals column by column, each row-major); C0 = 32 bytes of elements.
#pragma once
#include <cmath>
#include <type_traits>
#include <vector>

#include "emu_runtime.h"
#include "emu_types.h"
#include "kernel_tensor.h"

// The fixpipe's conversion on the way out (a CCE enumeration, global as there).
enum QuantMode_t { NoQuant, F322F16, F322BF16, DEQF16, VDEQF16, QF322B8_PRE, VQF322B8_PRE, REQ8, VREQ8 };

namespace AscendC {

struct LoadData2DParams {
    LoadData2DParams() {}
    LoadData2DParams(uint16_t start, uint8_t repeat, uint16_t srcStrideIn, uint8_t sidIn, uint16_t gap, bool transpose,
                     uint8_t mode)
        : startIndex(start), dstGap(gap), srcStride(srcStrideIn), ifTranspose(transpose), repeatTimes(repeat),
          sid(sidIn), addrMode(mode) {}
    uint16_t startIndex = 0;  // first source fractal
    uint16_t dstGap = 0;      // fractals skipped between two written
    uint16_t srcStride = 0;   // fractals from one source fractal to the next
    bool ifTranspose = false;
    uint8_t repeatTimes = 0;  // fractals moved
    uint8_t sid = 0;
    uint8_t addrMode = 0;
};

template <typename T>
struct LoadData3DParamsV2 {
    uint8_t padList[4] = {0, 0, 0, 0};
    uint16_t l1H = 0, l1W = 0, channelSize = 0;  // the feature map in L1 (C1 x H x W x C0)
    uint16_t kExtension = 0, mExtension = 0;     // the matrix cut out of it, from (mStartPt, kStartPt)
    uint16_t kStartPt = 0, mStartPt = 0;
    uint8_t strideW = 1, strideH = 1, filterW = 1, filterH = 1, dilationFilterW = 1, dilationFilterH = 1;
    bool enTranspose = false, enSmallK = false;
    T padValue = 0;
    bool filterSizeW = false, filterSizeH = false, fMatrixCtrl = false;
};

struct MmadParams {
    MmadParams() {}
    MmadParams(uint16_t mIn, uint16_t nIn, uint16_t kIn, uint8_t unit, bool source, bool init)
        : m(mIn), n(nIn), k(kIn), unitFlag(unit), cmatrixSource(source), cmatrixInitVal(init) {}
    uint16_t m = 0, n = 0, k = 0;
    bool isBias = false;
    int32_t fmOffset = 0;
    bool enSsparse = false, enWinogradA = false, enWinogradB = false;
    uint8_t unitFlag = 0;           // 2 or 3: L0C's unit flags order this Mmad with the Fixpipes (UnitFlag.md)
    bool kDirectionAlign = false;
    bool cmatrixSource = false;     // 1: C from the bias table (not emulated)
    bool cmatrixInitVal = true;     // 1: C starts at 0, 0: accumulate onto L0C
};

struct FixpipeParamsV220 {
    uint16_t nSize = 0, mSize = 0;
    uint16_t srcStride = 0;   // C0_SIZE rows between two 16-column blocks of the NZ source (mSize aligned to 16)
    uint32_t dstStride = 0;   // NZ2ND: elements per destination row
    QuantMode_t quantPre = QuantMode_t::NoQuant;
    uint64_t deqScalar = 0;
    uint16_t ndNum = 1, srcNdStride = 0, dstNdStride = 0;
    bool reluEn = false;
    uint8_t unitFlag = 0;
    bool isChannelSplit = false;
};

namespace emu_mm {
// Fractal geometry: 16 rows of C0 elements (32 bytes), 512 bytes.
template <typename T>
constexpr uint32_t C0() { return 32 / sizeof(T); }
inline uint32_t Align(uint32_t x, uint32_t a) { return (x + a - 1) / a * a; }

// A local tensor is in the memory an API needs, and its bytes [off, off + bytes) are inside the memory.
template <typename T>
asc_emu::Mem Where(const LocalTensor<T>& t, const char* api, const char* role,
                   std::initializer_list<asc_emu::Mem> allowed) {
    const void* p = t.GetPhyAddr();
    const asc_emu::Mem m = emu_l1::IsL1(p) ? asc_emu::Mem::L1 : emu_l0::IsA(p) ? asc_emu::Mem::L0A
                         : emu_l0::IsB(p) ? asc_emu::Mem::L0B : emu_l0::IsC(p) ? asc_emu::Mem::L0C
                                                                                 : asc_emu::Mem::UB;
    for (asc_emu::Mem a : allowed)
        if (a == m) return m;
    asc_emu::Fail(std::string(api) + ": the " + role + " is in " + asc_emu::MemName(m) + ", which this path cannot " +
                  (std::string(role) == "destination" ? "write" : "read"));
}
inline uint64_t Cap(asc_emu::Mem m) {
    const auto& soc = asc_emu::St().soc;
    return m == asc_emu::Mem::L1 ? soc.l1Physical : m == asc_emu::Mem::L0A ? soc.l0aBytes
         : m == asc_emu::Mem::L0B ? soc.l0bBytes : m == asc_emu::Mem::L0C ? soc.l0cBytes : soc.ubPhysical;
}
inline uint64_t Off(const void* p, asc_emu::Mem m) {
    return m == asc_emu::Mem::L1 ? emu_l1::Offset(p) : m == asc_emu::Mem::UB ? emu_ub::Offset(p) : emu_l0::Offset(p);
}
// Record an access of `elems` elements of `t` (faulting past the tensor or the memory).
template <typename T>
void Touch(int32_t op, const LocalTensor<T>& t, asc_emu::Mem m, uint64_t firstElem, uint64_t elems, bool write,
           const char* api) {
    if (elems == 0) return;
    if (firstElem + elems > t.GetSize())
        asc_emu::Fail(std::string(api) + ": needs " + std::to_string(firstElem + elems) + " elements of a " +
                      asc_emu::MemName(m) + " tensor of " + std::to_string(t.GetSize()));
    const uint64_t off = Off(t.GetPhyAddr(), m) + firstElem * sizeof(T);
    if (off + elems * sizeof(T) > Cap(m))
        asc_emu::Fail(std::string(api) + ": access past the end of " + asc_emu::MemName(m));
    asc_emu::UbAccess(op, off, elems * sizeof(T), write, m);
}
inline void Only910B(const char* api) {
    if (!asc_emu::St().soc.hasDataCopyPad)  // dav_m200
        asc_emu::Fail(std::string(api) + " is not emulated on " + asc_emu::St().soc.name +
                      " (dav_m200 reports the fixpipe path to GM unsupported; its cube results leave through UB)");
}
// The MTE1 time of one load: an issue cost and the bytes at the L1 -> L0 rate.
inline void Mte1Cost(uint64_t bytes) {
    const auto& tm = asc_emu::St().tm;
    asc_emu::Spend(asc_emu::PMTE1, tm.mte1Issue + static_cast<double>(bytes) / tm.mte1Bytes);
}
}  // namespace emu_mm

// L1 -> L0A/L0B, fractal by fractal (dav_c220 load_cbuf_to_ca/cb): fractal i of the source, at fractal
// startIndex + i * srcStride, lands at fractal i * (1 + dstGap) of the destination, transposed (16-bit types) when
// ifTranspose is set.
template <typename T>
__aicore__ inline void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& p,
                                asc_emu::Loc loc = ASC_EMU_HERE) {
    using asc_emu::Mem;
    const char* api = "LoadData (LoadData2DParams)";
    emu_mm::Where(src, api, "source", {Mem::L1});
    const Mem dm = emu_mm::Where(dst, api, "destination", {Mem::L0A, Mem::L0B});
    if (p.ifTranspose && sizeof(T) != 2)
        asc_emu::Fail(std::string(api) + ": ifTranspose takes 16-bit types only (LoadData_2D.md)");
    if (emu_mm::Off(dst.GetPhyAddr(), dm) % 512 != 0)
        asc_emu::Fail(std::string(api) + ": the L0A/L0B destination must be 512-byte aligned (LoadData_2D.md)");
    if (p.repeatTimes == 0) return;
    constexpr uint32_t frac = 512 / sizeof(T);
    const int32_t op = asc_emu::Issue(asc_emu::PMTE1, dm == Mem::L0A ? "LoadData L1->L0A" : "LoadData L1->L0B", loc);
    for (uint32_t i = 0; i < p.repeatTimes; ++i) {
        const uint64_t s = (static_cast<uint64_t>(p.startIndex) + static_cast<uint64_t>(i) * p.srcStride) * frac;
        const uint64_t d = static_cast<uint64_t>(i) * (1u + p.dstGap) * frac;
        emu_mm::Touch(op, src, Mem::L1, s, frac, false, api);
        emu_mm::Touch(op, dst, dm, d, frac, true, api);
        if (!asc_emu::Values()) continue;
        const T* a = src.GetPhyAddr() + s;
        T* b = dst.GetPhyAddr() + d;
        if (!p.ifTranspose) {
            std::memcpy(b, a, 512);
        } else {
            for (uint32_t r = 0; r < 16; ++r)
                for (uint32_t c = 0; c < 16; ++c) b[c * 16 + r] = a[r * 16 + c];
        }
    }
    emu_mm::Mte1Cost(512ull * p.repeatTimes);
}

// L1 -> L0A as img2col (dav_c220 img2colv2_cbuf_to_ca): the feature map in L1 is C1 x l1H x l1W x C0; row m of the
// matrix is output position m (h = m / l1W, w = m % l1W with a 1 x 1 filter, stride 1, no padding), column k is
// channel k. Rows mStartPt.. and columns kStartPt.. land in L0A as Zz; positions or channels past the map are the
// pad value. Other filters, strides, dilations, paddings and the transposed path into L0B are not emulated (a
// fault says so).
template <typename T>
__aicore__ inline void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData3DParamsV2<T>& p,
                                asc_emu::Loc loc = ASC_EMU_HERE) {
    using asc_emu::Mem;
    const char* api = "LoadData (LoadData3DParamsV2)";
    constexpr uint32_t c0 = emu_mm::C0<T>();
    emu_mm::Where(src, api, "source", {Mem::L1});
    const Mem dm = emu_mm::Where(dst, api, "destination", {Mem::L0A, Mem::L0B});
    if (dm != Mem::L0A || p.enTranspose || p.filterW != 1 || p.filterH != 1 || p.strideW != 1 || p.strideH != 1 ||
        p.dilationFilterW != 1 || p.dilationFilterH != 1 || p.padList[0] || p.padList[1] || p.padList[2] ||
        p.padList[3] || p.filterSizeW || p.filterSizeH || p.fMatrixCtrl || p.enSmallK)
        asc_emu::Fail(std::string(api) + ": only the matrix form into L0A (1 x 1 filter, stride 1, no padding, no "
                      "transpose) is emulated");
    // kernel_operator_mm_check.h: K extension and start in whole C0 columns; M extension and start in whole 16-row
    // fractals for 8- and 16-bit types (b32 has no such rule); mStartPt <= 32767
    if (p.kExtension % c0 != 0 || p.kStartPt % c0 != 0)
        asc_emu::Fail(std::string(api) + ": kExtension " + std::to_string(p.kExtension) + " and kStartPt " +
                      std::to_string(p.kStartPt) + " must be multiples of " + std::to_string(c0));
    if (sizeof(T) <= 2 && (p.mExtension % 16 != 0 || p.mStartPt % 16 != 0))
        asc_emu::Fail(std::string(api) + ": mExtension " + std::to_string(p.mExtension) + " and mStartPt " +
                      std::to_string(p.mStartPt) + " must be multiples of 16");
    if (p.mStartPt > 32767) asc_emu::Fail(std::string(api) + ": mStartPt past 32767");
    if (emu_mm::Off(dst.GetPhyAddr(), dm) % 512 != 0)
        asc_emu::Fail(std::string(api) + ": the L0A destination must be 512-byte aligned");
    // a zero feature-map size or extension makes a NOP (LoadData_3D.md)
    if (p.l1H == 0 || p.l1W == 0 || p.channelSize == 0 || p.mExtension == 0 || p.kExtension == 0) return;
    const uint64_t plane = static_cast<uint64_t>(p.l1H) * p.l1W;
    const uint32_t c1 = (p.channelSize + c0 - 1) / c0;
    const int32_t op = asc_emu::Issue(asc_emu::PMTE1, "LoadData L1->L0A (3Dv2)", loc);
    emu_mm::Touch(op, src, Mem::L1, 0, static_cast<uint64_t>(c1) * plane * c0, false, api);
    emu_mm::Touch(op, dst, dm, 0, static_cast<uint64_t>(emu_mm::Align(p.mExtension, 16)) * p.kExtension, true, api);
    if (asc_emu::Values()) {
        const uint32_t k1 = p.kExtension / c0;
        for (uint32_t i = 0; i < p.mExtension; ++i)
            for (uint32_t j = 0; j < p.kExtension; ++j) {
                const uint64_t m = static_cast<uint64_t>(p.mStartPt) + i, c = static_cast<uint64_t>(p.kStartPt) + j;
                const T v = m < plane && c < p.channelSize ? src.GetPhyAddr()[((c / c0) * plane + m) * c0 + c % c0]
                                                           : p.padValue;
                dst.GetPhyAddr()[((i / 16) * k1 + j / c0) * 16 * c0 + (i % 16) * c0 + j % c0] = v;
            }
    }
    emu_mm::Mte1Cost(static_cast<uint64_t>(p.mExtension) * p.kExtension * sizeof(T));
}

namespace emu_mm {
// L0C's unit flags (UnitFlag.md): one bit per 512-byte unit, set by an Mmad with unitFlag 3, cleared by a Fixpipe
// with unitFlag 3. A unit-flagged Mmad writes a unit only once its bit is 0 and a unit-flagged Fixpipe reads it only
// once it is 1, so the two order each other without SetFlag/WaitFlag, unit by unit: the later one starts with the
// earlier (one unit behind) and ends no sooner than it. In the emulator's program order, a Fixpipe that finds a bit 0
// would wait for an Mmad issued after it, and an Mmad that finds a bit 1 for a Fixpipe after it: both are refused
// (legal on the chip, where each pipe's queue runs ahead; not modelled). Returns the units' last setter (op -1: none).
struct Setter {
    int32_t op = -1;
    uint64_t seq = 0;  // its sequence number on its pipe
};
inline Setter UnitFlags(bool mmad, uint8_t flag, uint64_t off, uint64_t bytes, const asc_emu::Loc& loc) {
    auto& ps = asc_emu::St().pipes;
    if (ps.unitFlag.empty()) ps.unitFlag.assign(512, 0), ps.unitOp.assign(512, -1), ps.unitSeq.assign(512, 0);
    if (flag != 2 && flag != 3) return {};
    Setter after;
    for (uint64_t u = off / 512; u < (off + bytes + 511) / 512; ++u) {
        const bool set = ps.unitFlag[u] != 0;
        if (mmad && set)
            asc_emu::Fail("Mmad with unitFlag " + std::to_string(flag) + " at " + loc.Str() + " writes L0C unit " +
                          std::to_string(u) + " whose result " + asc_emu::Describe(ps.unitOp[u]) +
                          " completed and no unit-flagged Fixpipe has read yet: it waits for a Fixpipe issued after "
                          "it, which the emulator, running each pipe in program order, does not model");
        if (!mmad && !set)
            asc_emu::Fail("Fixpipe with unitFlag " + std::to_string(flag) + " at " + loc.Str() + " reads L0C unit " +
                          std::to_string(u) + " that no Mmad with unitFlag 3 issued before it completes: it waits for "
                          "an Mmad issued after it, which the emulator, running each pipe in program order, does not "
                          "model");
        if (ps.unitOp[u] > after.op) after = {ps.unitOp[u], ps.unitSeq[u]};
    }
    return after;
}
// The operation just issued on `me` is ordered after `setter` unit by unit: it may start one unit (16 cycles) after
// the setter started, and the caller ends it no sooner than the setter (UnitEnd).
inline void UnitStart(int me, const Setter& s) {
    if (s.op < 0) return;
    auto& st = asc_emu::St();
    auto& ps = st.pipes;
    const int q = st.ops[s.op].pipe;
    ps.known[me].c[q] = std::max(ps.known[me].c[q], s.seq);
    auto& t = ps.t;
    const double at = st.ops[s.op].start + 16;
    if (at > t.free[me]) t.free[me] = t.done[me].back() = t.start = st.ops.back().start = at;
}
// (the wait is not busy time: msprof's pipe times are the units' own work)
inline void UnitEnd(int me, const Setter& s) {
    if (s.op < 0) return;
    auto& t = asc_emu::St().pipes.t;
    const double end = t.done[asc_emu::St().ops[s.op].pipe][s.seq - 1] + 16;
    if (end > t.free[me]) t.free[me] = end;
    asc_emu::CompleteAt(me, t.free[me]);
}
inline void UnitMark(bool mmad, uint8_t flag, int32_t op, uint64_t off, uint64_t bytes) {
    auto& ps = asc_emu::St().pipes;
    if (flag != 2 && flag != 3) return;
    const int me = mmad ? asc_emu::PM : asc_emu::PFIX;
    for (uint64_t u = off / 512; u < (off + bytes + 511) / 512; ++u) {
        if (flag == 3) ps.unitFlag[u] = mmad ? 1 : 0;
        ps.unitOp[u] = op;
        ps.unitSeq[u] = ps.seq[me];
    }
}
}  // namespace emu_mm

// C = A x B (+ C) on the cube (dav_c220 mad): A m x k in L0A (Zz), B k x n in L0B (Zn), C m x n float in L0C (Nz,
// m rounded up to 16: the cube computes whole 16 x 16 fractals of C, over the k columns given).
template <typename U, typename T>
__aicore__ inline void Mmad(const LocalTensor<U>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b,
                            const MmadParams& p, asc_emu::Loc loc = ASC_EMU_HERE) {
    using asc_emu::Mem;
    const char* api = "Mmad";
    constexpr uint32_t c0 = emu_mm::C0<T>();
    emu_mm::Where(dst, api, "destination", {Mem::L0C});
    emu_mm::Where(a, api, "left matrix", {Mem::L0A});
    emu_mm::Where(b, api, "right matrix", {Mem::L0B});
    static_assert(sizeof(U) == 4, "Mmad accumulates into a 32-bit L0C tensor");
    if (p.cmatrixSource || p.isBias) asc_emu::Fail("Mmad: C from the bias table is not emulated");
    if (p.kDirectionAlign) asc_emu::Fail("Mmad: kDirectionAlign (K aligned to 16 for float) is not emulated");
    if (p.m > 4095 || p.n > 4095 || p.k > 4095) asc_emu::Fail("Mmad: m, n and k are at most 4095 (mm_check.h)");
    if (emu_mm::Off(dst.GetPhyAddr(), Mem::L0C) % 1024 != 0 || emu_mm::Off(a.GetPhyAddr(), Mem::L0A) % 512 != 0 ||
        emu_mm::Off(b.GetPhyAddr(), Mem::L0B) % 512 != 0)
        asc_emu::Fail("Mmad: C must start 1024-byte aligned in L0C, A and B 512-byte aligned (mm_check.h)");
    if (p.unitFlag == 1) asc_emu::Fail("Mmad: unitFlag 1 is reserved (0, 2 or 3)");
    if (p.m == 0 || p.n == 0 || p.k == 0) return;
    const uint32_t mA = emu_mm::Align(p.m, 16), nA = emu_mm::Align(p.n, 16), kA = emu_mm::Align(p.k, c0);
    const uint64_t cOff = emu_mm::Off(dst.GetPhyAddr(), Mem::L0C), cBytes = static_cast<uint64_t>(mA) * nA * 4;
    const emu_mm::Setter setter = emu_mm::UnitFlags(true, p.unitFlag, cOff, cBytes, loc);
    const int32_t op = asc_emu::Issue(asc_emu::PM, "Mmad", loc);
    emu_mm::UnitStart(asc_emu::PM, setter);
    emu_mm::Touch(op, a, Mem::L0A, 0, static_cast<uint64_t>(mA) * kA, false, api);
    emu_mm::Touch(op, b, Mem::L0B, 0, static_cast<uint64_t>(kA) * nA, false, api);
    emu_mm::Touch(op, dst, Mem::L0C, 0, static_cast<uint64_t>(mA) * nA, true, api);
    emu_mm::UnitMark(true, p.unitFlag, op, cOff, cBytes);
    if (asc_emu::Values()) {
        const uint32_t k1 = kA / c0, n1 = nA / 16;
        const T* av = a.GetPhyAddr();
        const T* bv = b.GetPhyAddr();
        U* cv = dst.GetPhyAddr();
        for (uint32_t m = 0; m < mA; ++m)
            for (uint32_t n = 0; n < nA; ++n) {
                double acc = 0;
                for (uint32_t k = 0; k < p.k; ++k)
                    acc += static_cast<double>(static_cast<float>(av[((m / 16) * k1 + k / c0) * 16 * c0 + (m % 16) * c0 + k % c0])) *
                           static_cast<double>(static_cast<float>(bv[((k / c0) * n1 + n / 16) * 16 * c0 + (n % 16) * c0 + k % c0]));
                U& c = cv[(n / 16) * mA * 16 + m * 16 + n % 16];
                c = static_cast<U>(p.cmatrixInitVal ? acc : static_cast<double>(c) + acc);
            }
    }
    // whole fractals at the cube's rate: 16 x 16 x 16 half MACs a cycle, a quarter of that for float, twice for
    // 8-bit types; an issue cost per instruction
    const auto& tm = asc_emu::St().tm;
    const double rate = tm.cubeMacs * (sizeof(T) == 4 ? tm.cubeFp32 : sizeof(T) == 1 ? 2.0 : 1.0);
    asc_emu::Spend(asc_emu::PM, tm.mmadIssue + static_cast<double>(mA) * nA * kA / rate);
    emu_mm::UnitEnd(asc_emu::PM, setter);
}

enum class CO2Layout : uint8_t { NZ = 0, ROW_MAJOR, COLUMN_MAJOR };
// How the fixpipe lays C out (kernel_struct_fixpipe.h). dav_c220's has no isToUB (2201 cannot fixpipe into UB);
// the emulator takes it so that the matmul_gelu sample's {ROW_MAJOR, false} compiles as it did for its A2 run.
struct FixpipeConfig {
    CO2Layout format;
    bool isToUB = false;
};
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};
constexpr FixpipeConfig CFG_COLUMN_MAJOR = {CO2Layout::COLUMN_MAJOR};

// L0C -> GM with NZ2ND and the fixpipe's conversion (dav_c220 fixpipe, CFG_ROW_MAJOR): ndNum matrices of mSize rows
// of nSize columns; column block j of the source starts srcStride 16-element rows after block j - 1; row r of
// matrix i lands at dst + i * dstNdStride + r * dstStride. Only the row-major layout to GM is emulated.
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
__aicore__ inline void Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& p,
                               asc_emu::Loc loc = ASC_EMU_HERE) {
    if (config.format != CO2Layout::ROW_MAJOR || config.isToUB)
        asc_emu::Fail("Fixpipe: only CFG_ROW_MAJOR to GM is emulated (NZ2ND)");
    using asc_emu::Mem;
    const char* api = "Fixpipe L0C->GM";
    emu_mm::Only910B(api);
    emu_mm::Where(src, api, "source", {Mem::L0C});
    static_assert(sizeof(U) == 4, "Fixpipe reads a 32-bit L0C tensor");
    // the pairs kernel_operator_mm_check.h allows that the emulator converts: float -> float (NoQuant), half
    // (F322F16), bfloat16 (F322BF16); int32 -> int32 (NoQuant). The quantising modes are not emulated.
    constexpr bool fromFloat = std::is_same<U, float>::value;
    const bool ok = fromFloat ? (std::is_same<T, float>::value && p.quantPre == QuantMode_t::NoQuant) ||
                                    (std::is_same<T, half>::value && p.quantPre == QuantMode_t::F322F16) ||
                                    (std::is_same<T, bfloat16_t>::value && p.quantPre == QuantMode_t::F322BF16)
                              : std::is_same<T, int32_t>::value && p.quantPre == QuantMode_t::NoQuant;
    if (!ok)
        asc_emu::Fail(std::string(api) + ": this source/destination type pair and quantPre are not emulated (float "
                      "to float NoQuant, half F322F16, bfloat16 F322BF16; int32 to int32 NoQuant)");
    if (p.isChannelSplit) asc_emu::Fail(std::string(api) + ": channel split with NZ2ND is an error (mm_check.h)");
    if (p.ndNum > 1 && (p.srcNdStride == 0 || p.dstNdStride == 0))
        asc_emu::Fail(std::string(api) + ": srcNdStride and dstNdStride must be at least 1 when ndNum > 1");
    if (p.unitFlag == 1) asc_emu::Fail(std::string(api) + ": unitFlag 1 is reserved (0, 2 or 3)");
    if (p.nSize > 4095 || p.mSize > 8192 || (p.ndNum > 1 && p.srcNdStride > 512))
        asc_emu::Fail(std::string(api) + ": nSize <= 4095, mSize <= 8192 with NZ2ND, srcNdStride <= 512");
    if (p.nSize == 0 || p.mSize == 0 || p.ndNum == 0) return;  // a NOP
    if (p.srcStride < emu_mm::Align(p.mSize, 16))
        asc_emu::Fail(std::string(api) + ": srcStride " + std::to_string(p.srcStride) + " is less than mSize " +
                      std::to_string(p.mSize) + " rounded up to 16: the column blocks would overlap");
    if (p.dstStride == 0 || (p.mSize > 1 && p.dstStride < p.nSize))
        asc_emu::Fail(std::string(api) + ": dstStride " + std::to_string(p.dstStride) + " elements is less than a row "
                      "of nSize " + std::to_string(p.nSize));
    const uint32_t n1 = (p.nSize + 15) / 16;
    const uint64_t matrix = static_cast<uint64_t>(p.srcNdStride) * 16 * 16;  // elements (units of 16 C0 rows)
    const uint64_t block = static_cast<uint64_t>(emu_mm::Align(p.mSize, 16)) * 16;  // one column block's elements
    const uint64_t cOff = emu_mm::Off(src.GetPhyAddr(), Mem::L0C);
    if (cOff % 64 != 0) asc_emu::Fail(std::string(api) + ": the L0C source must be 64-byte aligned");
    // what it reads: per matrix, per 16-column block, the mSize rows (not the gap srcStride leaves after them)
    std::vector<uint64_t> starts;
    for (uint32_t i = 0; i < p.ndNum; ++i)
        for (uint32_t j = 0; j < n1; ++j) starts.push_back(i * matrix + static_cast<uint64_t>(j) * p.srcStride * 16);
    emu_mm::Setter setter;
    for (uint64_t e : starts) {
        const emu_mm::Setter s = emu_mm::UnitFlags(false, p.unitFlag, cOff + e * 4, block * 4, loc);
        if (s.op > setter.op) setter = s;
    }
    const int32_t op = asc_emu::Issue(asc_emu::PFIX, api, loc);
    emu_mm::UnitStart(asc_emu::PFIX, setter);
    for (uint64_t e : starts) {
        emu_mm::Touch(op, src, Mem::L0C, e, block, false, api);
        emu_mm::UnitMark(false, p.unitFlag, op, cOff + e * 4, block * 4);
    }
    const uint64_t span = static_cast<uint64_t>(starts.size()) * block;  // elements read
    // the fixpipe reads L0C at its rate while it writes rows to GM: the longer of the two holds it
    const auto& tm = asc_emu::St().tm;
    asc_emu::Spend(asc_emu::PFIX, tm.fixIssue);
    const double since = asc_emu::St().pipes.t.free[asc_emu::PFIX];
    for (uint32_t i = 0; i < p.ndNum; ++i)
        for (uint32_t r = 0; r < p.mSize; ++r) {
            T* row = dst.GetPhyAddr() + static_cast<uint64_t>(i) * p.dstNdStride + static_cast<uint64_t>(r) * p.dstStride;
            asc_emu::GmWrite(row, p.nSize * sizeof(T), api);
            asc_emu::NoDirtyLines(row, p.nSize * sizeof(T), api);
            asc_emu::Dma(asc_emu::PFIX, row, p.nSize * sizeof(T), true, dst.EmuBypassL2());
            if (!asc_emu::Values()) continue;
            const U* c = src.GetPhyAddr() + static_cast<uint64_t>(i) * matrix;
            for (uint32_t n = 0; n < p.nSize; ++n) {
                const U v = c[static_cast<uint64_t>(n / 16) * p.srcStride * 16 + r * 16 + n % 16];
                row[n] = p.reluEn && v < U(0) ? T(0) : static_cast<T>(v);  // (int32 copied exactly)
            }
        }
    asc_emu::AtLeast(asc_emu::PFIX, since, static_cast<double>(span) * 4 / tm.fixBytes);
    emu_mm::UnitEnd(asc_emu::PFIX, setter);
}

}  // namespace AscendC
