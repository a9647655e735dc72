// asc-onnx emulator: the host-side Matmul tiling API (matmul_tiling::MultiCoreMatmulTiling) with our own
// algorithm. It gives valid tilings (the kernel-side emulator checks every rule it relies on), not CANN's
// choices: tests run each kernel under this one, under hand-picked ones and under the tiling CANN's open
// algorithm (asc-devkit/impl/adv_api/tiling/matmul) computes, built at test time.
//
// Our algorithm: split M x N over at most `dim` cores minimising the largest core's output plus what it
// must read; base blocks of up to 128 x 256 (fp32 C in L0C, double-buffered where it fits); baseK the
// largest multiple of 32 bytes that keeps L0A/L0B double-buffered; the iterate order and step (stepN or
// stepM blocks of one operand resident in L1, the other streamed) that read the fewest bytes, or else K in
// steps that fit.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernel_tiling/kernel_tiling.h"
#include "matmul_rules.h"
#include "tiling/emu_tiling_request.h"
#include "tiling/platform/soc_version.h"

// (in an inline namespace: a program linked with CANN's tiling objects, ASC_EMU_CANN_TILING, has CANN's classes of
// the same names, whose out-of-line members would otherwise stand in for ours)
namespace matmul_tiling {
inline namespace emu {
enum class TPosition { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM = VECCALC, TSCM, SPM,
                       SHM = SPM, MAX };
enum class CubeFormat { ND = 0, NZ, ZN, ZZ, NN, ND_ALIGN, SCALAR, VECTOR };
enum class DataType { DT_FLOAT = 0, DT_FLOAT16 = 1, DT_INT8 = 2, DT_INT32 = 3, DT_BF16 = 27 };

struct PlatformInfo {
    platform_ascendc::SocVersion socVersion;
    uint64_t l1Size = 0;
    uint64_t l0CSize = 0;
    uint64_t ubSize = 0;
    uint64_t l0ASize = 0;
    uint64_t l0BSize = 0;
};

// GetTiling calls in this process (the emulator's own count; CANN's tiling has none).
#define ASC_EMU_TILING_CALLS 1
inline uint64_t& GetTilingCalls() {
    static uint64_t calls = 0;
    return calls;
}

class MultiCoreMatmulTiling {
public:
    MultiCoreMatmulTiling() = default;
    explicit MultiCoreMatmulTiling(const PlatformInfo& p) : plat_(p) {}
    // From platform_ascendc::PlatformAscendC (tiling/platform/platform_ascendc.h), without depending on it here.
    template <class Platform, class = decltype(&Platform::GetCoreNumAic)>
    explicit MultiCoreMatmulTiling(const Platform& p) {
        plat_.socVersion = p.GetSocVersion();
        p.GetCoreMemSize(platform_ascendc::CoreMemType::L1, plat_.l1Size);
        p.GetCoreMemSize(platform_ascendc::CoreMemType::L0_C, plat_.l0CSize);
        p.GetCoreMemSize(platform_ascendc::CoreMemType::UB, plat_.ubSize);
        p.GetCoreMemSize(platform_ascendc::CoreMemType::L0_A, plat_.l0ASize);
        p.GetCoreMemSize(platform_ascendc::CoreMemType::L0_B, plat_.l0BSize);
    }
    virtual ~MultiCoreMatmulTiling() = default;
    // Each core's share of M, N and K (-1: the algorithm's).
    int32_t SetSingleShape(int32_t sm = -1, int32_t sn = -1, int32_t sk = -1) {
        singleM_ = sm;
        singleN_ = sn;
        singleK_ = sk;
        return 0;
    }
    int32_t SetDim(int32_t dim) { dim_ = dim; return 0; }
    int32_t SetAType(TPosition, CubeFormat, DataType t, bool isTrans = false) { aType_ = t; transA_ = isTrans; return 0; }
    int32_t SetBType(TPosition, CubeFormat, DataType t, bool isTrans = false) { bType_ = t; transB_ = isTrans; return 0; }
    int32_t SetCType(TPosition, CubeFormat, DataType t) { cType_ = t; return 0; }
    int32_t SetBiasType(TPosition, CubeFormat, DataType t) { biasType_ = t; return 0; }
    int32_t SetShape(int32_t m, int32_t n, int32_t k) { m_ = m; n_ = n; k_ = k; return 0; }
    int32_t SetOrgShape(int32_t m, int32_t n, int32_t k) { orgM_ = m; orgN_ = n; orgK_ = k; return 0; }
    int32_t SetOrgShape(int32_t m, int32_t n, int32_t ka, int32_t kb) { return ka == kb ? SetOrgShape(m, n, ka) : -1; }
    int32_t EnableBias(bool b = false) { bias_ = b; return 0; }
    // 0: NORM, 1: MDL (CANN's default, matmul_tiling_base.h): on 310P an MDL tiling sizes the UB transform scratch
    // (transLength) for stepKa x stepM A tiles, which a NORM Matmul rejects.
    void SetMatmulConfigParams(int32_t mmConfigType = 1, bool = false) { mmConfigType_ = mmConfigType; }
    int32_t SetBias(bool b = false) { return EnableBias(b); }
    int32_t SetFixSplit(int32_t bm = -1, int32_t bn = -1, int32_t bk = -1) { fixM_ = bm; fixN_ = bn; fixK_ = bk; return 0; }
    int32_t SetBufferSpace(int32_t l1 = -1, int32_t l0c = -1, int32_t ub = -1, int32_t bt = -1) {
        l1Limit_ = l1;
        l0cLimit_ = l0c;
        ubLimit_ = ub;
        btLimit_ = bt;
        return 0;
    }
    int32_t GetCoreNum(int32_t& dim, int32_t& mDim, int32_t& nDim) const {
        dim = mDim_ * nDim_;
        mDim = mDim_;
        nDim = nDim_;
        return 0;
    }

    // The tiling: CANN's own algorithm where the program is linked with it (ASC_EMU_CANN_TILING), else ours.
    // Every call is counted (GetTilingCalls): a host tiling that caches its choices shows it makes none again.
    int64_t GetTiling(AscendC::tiling::TCubeTiling& t) {
        ++GetTilingCalls();
#ifdef ASC_EMU_CANN_TILING
        return CannTiling(t);
#else
        return OwnTiling(t);
#endif
    }
    template <class Tiling, class = decltype(&Tiling::set_baseM)>
    int64_t GetTiling(Tiling& t) {
        const int64_t rc = GetTiling(t.Data());
        return rc;
    }

protected:
    bool multiCore_ = true;

private:
    int64_t CannTiling(AscendC::tiling::TCubeTiling& t) const {
        AscEmuTilingRequest r{};
        r.multiCore = multiCore_ ? 1 : 0;
        r.dim = dim_;
        r.aType = static_cast<int32_t>(aType_), r.bType = static_cast<int32_t>(bType_);
        r.cType = static_cast<int32_t>(cType_), r.biasType = static_cast<int32_t>(biasType_);
        r.transA = transA_, r.transB = transB_, r.bias = bias_;
        r.m = m_, r.n = n_, r.k = k_, r.orgM = orgM_, r.orgN = orgN_, r.orgKa = orgK_, r.orgKb = orgK_;
        r.singleM = singleM_, r.singleN = singleN_, r.singleK = singleK_;
        r.fixM = fixM_, r.fixN = fixN_, r.fixK = fixK_;
        r.l1Limit = l1Limit_, r.l0cLimit = l0cLimit_, r.ubLimit = ubLimit_, r.btLimit = btLimit_;
        r.mmConfigType = mmConfigType_;
        r.coupled = plat_.socVersion == platform_ascendc::SocVersion::ASCEND310P;
        r.l1 = static_cast<int64_t>(plat_.l1Size), r.l0c = static_cast<int64_t>(plat_.l0CSize);
        r.ub = static_cast<int64_t>(plat_.ubSize), r.l0a = static_cast<int64_t>(plat_.l0ASize);
        r.l0b = static_cast<int64_t>(plat_.l0BSize);
        constexpr int32_t kWords = sizeof(AscendC::tiling::TCubeTiling) / 4;
        int32_t words[kWords + 64] = {};
        const int32_t n = AscEmuCannTiling(&r, words, kWords + 64);
        if (n < 0) return -1;
        if (n != kWords) {  // the kernel struct is CANN's generated one, field for field
            std::fprintf(stderr, "CANN's TCubeTiling has %d words, the emulator's %d\n", n, kWords);
            std::abort();
        }
        std::memcpy(&t, words, sizeof(t));
        return 0;
    }

    int64_t OwnTiling(AscendC::tiling::TCubeTiling& t) {
        if (m_ <= 0 || n_ <= 0 || k_ <= 0 || dim_ <= 0 || transA_) return -1;
        if (orgM_ <= 0) SetOrgShape(m_, n_, k_);
        const int64_t in = Size(aType_), c0 = 32 / in;
        const uint64_t l1 = l1Limit_ > 0 ? static_cast<uint64_t>(l1Limit_) : plat_.l1Size;
        const uint64_t l0c = l0cLimit_ > 0 ? static_cast<uint64_t>(l0cLimit_) : plat_.l0CSize;
        // Core split: the least of max(cube time of the largest core, its epilogue, time to move what all cores read),
        // with 16x16x16 fp16 fractals per cycle at 1.8 GHz (a quarter for float), x, W and C once at 1.6 TB/s of
        // GM and the further reads of x (one per column split) and W (one per row split) at 7 TB/s of L2 on
        // 910B (they hit the 192 MB L2; 310P has none); more cores only where they pay.
        const bool paired = plat_.socVersion != platform_ascendc::SocVersion::ASCEND310P;  // two vector cores a cube
        const double again = paired ? 7000.0 : 1600.0, pair = paired ? 2.0 : 1.0;
        double best = -1.0;
        for (int32_t md = 1; md <= dim_; ++md) {
            for (int32_t nd = 1; md * nd <= dim_; ++nd) {
                const int64_t sm = Ceil(m_, md), sn = Align(Ceil(n_, nd), 16);
                if (Ceil(m_, sm) != md || Ceil(n_, sn) != nd) continue;  // a core would be idle
                // (910B: two vector cores share a cube core, so its time is two regions')
                const double cube = static_cast<double>(Align(sm, 16)) * sn * Align(k_, c0) / (in == 4 ? 1024.0 : 4096.0) /
                                    1.8 * pair;
                // the vector core's epilogue over its region, at about 8 fp32 instructions of 64 lanes per element
                const double vec = static_cast<double>(sm) * sn * 8.0 / 64.0 / 1.8;
                const double once = (static_cast<double>(m_) * k_ + static_cast<double>(n_) * k_) * in +
                                    static_cast<double>(m_) * n_ * 8.0;
                const double more = (static_cast<double>(nd - 1) * m_ * k_ + static_cast<double>(md - 1) * n_ * k_) * in;
                // what one cube core pulls through its port (about 128 bytes a cycle), for its vector cores' regions
                const double port = static_cast<double>(sm * k_ + k_ * sn) * in * pair / 230.0;
                const double core = std::max({cube, vec, port});
                // ties (GM-bound splits) go to the split with the least per-core work; tiny shapes stay on few cores
                const double cost = std::max(core, once / 1600.0 + more / again) + 0.1 * core + 0.01 * md * nd;
                if (best < 0 || cost < best) {
                    best = cost;
                    mDim_ = md;
                    nDim_ = nd;
                }
            }
        }
        if (singleM_ > 0 && singleN_ > 0) {  // SetSingleShape: the caller's split
            mDim_ = static_cast<int32_t>(Ceil(m_, singleM_));
            nDim_ = static_cast<int32_t>(Ceil(n_, singleN_));
        }
        const int32_t singleM = singleM_ > 0 && singleN_ > 0 ? singleM_ : static_cast<int32_t>(Ceil(m_, mDim_));
        const int32_t singleN = singleM_ > 0 && singleN_ > 0 ? singleN_
                                                             : static_cast<int32_t>(Align(Ceil(n_, nDim_), 16));
        int32_t baseM = fixM_ > 0 ? fixM_ : static_cast<int32_t>(std::min<int64_t>(128, Align(singleM, 16)));
        int32_t baseN = fixN_ > 0 ? fixN_ : static_cast<int32_t>(std::min<int64_t>(256, Align(singleN, 16)));
        // The C block in fp32 must fit the L0C the caller allows: narrow N, then M, in 16s.
        while (fixN_ <= 0 && static_cast<uint64_t>(baseM) * baseN * 4 > l0c && baseN > 16) baseN -= 16;
        while (fixM_ <= 0 && static_cast<uint64_t>(baseM) * baseN * 4 > l0c && baseM > 16) baseM -= 16;
        if (static_cast<uint64_t>(baseM) * baseN * 4 > l0c) return -1;
        // L1 reuse. ORDER_M with groups of stepN column blocks: one core's A tiles of a row block (kIter of them)
        // serve the stepN B blocks, which stay resident (kIter * stepN tiles), so x is read ceil(nIter / stepN)
        // times and W once. ORDER_N the transpose. Take the order and the largest step that fit L1 with the
        // fewest bytes read, narrowing baseM until one does; failing that, K goes in steps, double-buffered.
        const uint64_t aBytes = static_cast<uint64_t>(singleM) * k_ * in, bBytes = static_cast<uint64_t>(singleN) * k_ * in;
        const uint64_t biasBytes = bias_ ? static_cast<uint64_t>(baseN) * 4 : 0;
        // One candidate base block: its baseK (L0A/L0B double-buffered), iteration counts and steps.
        struct Plan {
            int32_t baseM, baseK, kIter, mIter, nIter, sn, sm;
            uint64_t aTile, bTile, reads;
        };
        auto plan = [&](int32_t bm) {
            Plan p{bm, fixK_, 0, 0, 0, 0, 0, 0, 0, 0};
            if (p.baseK <= 0) {
                const int64_t kMax = std::min<int64_t>(Align(k_, c0), 256 / in * 4);
                p.baseK = static_cast<int32_t>(c0);
                for (int64_t bk = c0; bk <= kMax; bk += c0) {
                    if (2 * bm * bk * in <= static_cast<int64_t>(plat_.l0ASize) &&
                        2 * baseN * bk * in <= static_cast<int64_t>(plat_.l0BSize))
                        p.baseK = static_cast<int32_t>(bk);
                }
            }
            p.kIter = static_cast<int32_t>(Ceil(k_, p.baseK));
            p.mIter = static_cast<int32_t>(Ceil(singleM, bm));
            p.nIter = static_cast<int32_t>(Ceil(singleN, baseN));
            p.aTile = static_cast<uint64_t>(bm) * p.baseK * in;
            p.bTile = static_cast<uint64_t>(baseN) * p.baseK * in;
            // s blocks of the resident operand over all of K, and the other's tiles: all of K when the group's
            // blocks reuse them (s > 1), else two in flight.
            auto largest = [&](uint64_t resident, uint64_t streamed, int32_t iters) {
                int32_t st = 0;
                for (int32_t s = 1; s <= iters; ++s)
                    if (static_cast<uint64_t>(p.kIter) * s * resident + Streamed(s, p.kIter) * streamed + biasBytes <= l1)
                        st = s;
                return st;
            };
            p.sn = largest(p.bTile, p.aTile, p.nIter);
            p.sm = largest(p.aTile, p.bTile, p.mIter);
            const uint64_t readsM = p.sn ? aBytes * Ceil(p.nIter, p.sn) + bBytes : ~0ull;
            const uint64_t readsN = p.sm ? bBytes * Ceil(p.mIter, p.sm) + aBytes : ~0ull;
            p.reads = std::min({readsM, readsN, aBytes * p.nIter + bBytes * p.mIter});  // or K in steps
            if (readsM <= readsN && p.sn) p.sm = 0;
            else if (p.sm) p.sn = 0;
            return p;
        };
        Plan chosen = plan(baseM);
        for (int32_t bm = baseM - 16; fixM_ <= 0 && bm >= 16; bm -= 16) {
            const Plan p = plan(bm);
            if (p.reads < chosen.reads) chosen = p;
        }
        baseM = chosen.baseM;
        const int32_t baseK = chosen.baseK, kIter = chosen.kIter, sn = chosen.sn, sm = chosen.sm;
        const uint64_t aTile = chosen.aTile, bTile = chosen.bTile;
        const int32_t dbC = static_cast<uint64_t>(baseM) * baseN * 4 * 2 <= l0c ? 2 : 1;
        int32_t order = 0, stepM = 1, stepN = 1, stepK = kIter, depthA = kIter, depthB = kIter;
        if (sn) {
            stepN = sn;
            depthB = kIter * sn;
            depthA = Streamed(sn, kIter);
        } else if (sm) {
            order = 1;
            stepM = sm;
            depthA = kIter * sm;
            depthB = Streamed(sm, kIter);
        } else {
            auto fits = [&](int32_t s, int32_t d) { return static_cast<uint64_t>(d) * s * (aTile + bTile) + biasBytes <= l1; };
            int32_t db = 2;
            while (stepK > 1 && !fits(stepK, db)) stepK = (stepK + 1) / 2;
            if (!fits(stepK, db)) db = 1;
            if (!fits(stepK, db)) return -1;
            depthA = depthB = db * stepK;
        }
        int32_t stepKa = stepK, stepKb = stepK;
        if (mmConfigType_ == 1 && (sn || sm)) {
            // MDL copies stepKa (stepKb) base tiles along K at once, and L1 holds whole chunks: the resident operand
            // as one chunk of all of K; the streamed one, when one block of it serves the group, in chunks of up to
            // 2 KB rows, two of which fit beside the resident one (the whole K when the group reuses it too).
            const int32_t s = sn ? sn : sm;
            const uint64_t tile = sn ? aTile : bTile, resident = static_cast<uint64_t>(kIter) * s * (sn ? bTile : aTile);
            // (a divisor of kIter: stepKa and stepKb divide one another)
            int32_t chunk = s > 1 ? kIter : 1;
            for (int32_t c = 2; s == 1 && c <= kIter && c * baseK * in <= 2048; ++c)
                if (kIter % c == 0 && 2ull * c * tile + resident + biasBytes <= l1) chunk = c;
            const int32_t streamedDepth = s > 1 ? kIter : 2 * chunk;
            (sn ? stepKa : stepKb) = chunk;
            (sn ? stepKb : stepKa) = kIter;
            (sn ? depthA : depthB) = streamedDepth;
        }
        t = AscendC::tiling::TCubeTiling{};
        t.usedCoreNum = mDim_ * nDim_;
        t.M = orgM_;
        t.N = orgN_;
        t.Ka = orgK_;
        t.Kb = orgK_;
        t.singleCoreM = singleM;
        t.singleCoreN = singleN;
        t.singleCoreK = k_;
        t.baseM = baseM;
        t.baseN = baseN;
        t.baseK = baseK;
        t.stepM = stepM;
        t.stepN = stepN;
        t.stepKa = stepKa;
        t.stepKb = stepKb;
        t.depthA1 = depthA;
        t.depthB1 = depthB;
        t.isBias = bias_ ? 1 : 0;
        t.iterateOrder = order;
        t.dbL0A = 2;
        t.dbL0B = 2;
        t.dbL0C = dbC;
        t.shareL1Size = static_cast<int32_t>(depthA * aTile + depthB * bTile + biasBytes);
        t.shareL0CSize = static_cast<int32_t>(static_cast<uint64_t>(baseM) * baseN * 4 * dbC);
        // 310P: UB the Matmul stages ND tiles through and reserves for itself (GetTransLength, GetUsedSize); none on 910B.
        if (plat_.socVersion == platform_ascendc::SocVersion::ASCEND310P) {
            const asc_emu::MatmulTypes types{static_cast<uint32_t>(in), static_cast<uint32_t>(Size(bType_)),
                                             static_cast<uint32_t>(Size(cType_)), static_cast<uint32_t>(Size(biasType_)),
                                             transB_};
            t.transLength = static_cast<int32_t>(asc_emu::TransLength310P(t, types, mmConfigType_ == 1));
            t.shareUbSize = static_cast<int32_t>(asc_emu::ShareUb310P(t, types));
        }
        return 0;
    }

private:
    static int64_t Ceil(int64_t a, int64_t b) { return (a + b - 1) / b; }
    // Tiles of the streamed operand kept in L1: its whole K when a group of s > 1 blocks reuses it, else two.
    static int32_t Streamed(int32_t s, int32_t kIter) { return s > 1 ? kIter : std::min(2, kIter); }
    static int64_t Align(int64_t a, int64_t b) { return Ceil(a, b) * b; }
    static int64_t Size(DataType t) { return t == DataType::DT_FLOAT ? 4 : t == DataType::DT_INT8 ? 1 : 2; }
    PlatformInfo plat_{platform_ascendc::SocVersion::ASCEND910B, 524288, 131072, 196352, 65536, 65536};
    DataType aType_ = DataType::DT_FLOAT16, bType_ = DataType::DT_FLOAT16, cType_ = DataType::DT_FLOAT;
    DataType biasType_ = DataType::DT_FLOAT;
    bool transA_ = false, transB_ = false, bias_ = false;
    int32_t dim_ = 1, m_ = 0, n_ = 0, k_ = 0, orgM_ = 0, orgN_ = 0, orgK_ = 0;
    int32_t fixM_ = -1, fixN_ = -1, fixK_ = -1, l1Limit_ = -1, l0cLimit_ = -1, ubLimit_ = -1, btLimit_ = -1;
    int32_t singleM_ = -1, singleN_ = -1, singleK_ = -1;
    int32_t mDim_ = 1, nDim_ = 1, mmConfigType_ = 1;
};

// One core's tiling (the whole shape on one core).
class MatmulApiTiling : public MultiCoreMatmulTiling {
public:
    MatmulApiTiling() { multiCore_ = false; }
    template <class Platform, class = decltype(&Platform::GetCoreNumAic)>
    explicit MatmulApiTiling(const Platform& p) : MultiCoreMatmulTiling(p) { multiCore_ = false; }
    explicit MatmulApiTiling(const PlatformInfo& p) : MultiCoreMatmulTiling(p) { multiCore_ = false; }
};
}  // namespace emu
}  // namespace matmul_tiling

// The host-side tiling object CANN's BEGIN_TILING_DATA_DEF generates for TCubeTiling: set_/get_ per field, and the
// bytes the kernel's struct is copied from.
namespace optiling {
inline namespace emu {
class TCubeTiling {
public:
    AscendC::tiling::TCubeTiling& Data() { return t_; }
    size_t GetDataSize() const { return sizeof(t_); }
    void SaveToBuffer(void* buf, size_t cap) const {
        if (cap < sizeof(t_)) {
            std::fprintf(stderr, "TCubeTiling::SaveToBuffer: %zu bytes for a %zu-byte tiling\n", cap, sizeof(t_));
            std::abort();
        }
        std::memcpy(buf, &t_, sizeof(t_));
    }
#define ASC_EMU_TILING_FIELD(f) \
    void set_##f(int32_t v) { t_.f = v; } \
    int32_t get_##f() const { return t_.f; }
    ASC_EMU_TILING_FIELD(usedCoreNum) ASC_EMU_TILING_FIELD(M) ASC_EMU_TILING_FIELD(N) ASC_EMU_TILING_FIELD(Ka)
    ASC_EMU_TILING_FIELD(Kb) ASC_EMU_TILING_FIELD(singleCoreM) ASC_EMU_TILING_FIELD(singleCoreN)
    ASC_EMU_TILING_FIELD(singleCoreK) ASC_EMU_TILING_FIELD(baseM) ASC_EMU_TILING_FIELD(baseN) ASC_EMU_TILING_FIELD(baseK)
    ASC_EMU_TILING_FIELD(depthA1) ASC_EMU_TILING_FIELD(depthB1) ASC_EMU_TILING_FIELD(stepM) ASC_EMU_TILING_FIELD(stepN)
    ASC_EMU_TILING_FIELD(isBias) ASC_EMU_TILING_FIELD(transLength) ASC_EMU_TILING_FIELD(iterateOrder)
    ASC_EMU_TILING_FIELD(shareMode) ASC_EMU_TILING_FIELD(shareL1Size) ASC_EMU_TILING_FIELD(shareL0CSize)
    ASC_EMU_TILING_FIELD(shareUbSize) ASC_EMU_TILING_FIELD(stepKa) ASC_EMU_TILING_FIELD(stepKb)
    ASC_EMU_TILING_FIELD(dbL0A) ASC_EMU_TILING_FIELD(dbL0B) ASC_EMU_TILING_FIELD(dbL0C)
#undef ASC_EMU_TILING_FIELD

private:
    AscendC::tiling::TCubeTiling t_{};
};
}  // namespace emu
}  // namespace optiling
