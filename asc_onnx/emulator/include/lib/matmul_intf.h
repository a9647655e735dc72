// asc-onnx emulator: the Matmul high-level API as a vector core calls it (AscendC::Matmul,
// REGIST_MATMUL_OBJ), or as a cube core runs it itself (ASCENDC_CUBE_ONLY in a __cube__ kernel). Our own code,
// from the API reference (高阶API/矩阵计算) and the open implementation (impl/adv_api/detail/matmul,
// include/adv_api/matmul/matmul_client.h).
//
// What it models:
// * NORM and MDL (CFG_NORM, CFG_MDL, GetMMConfig) and constant tiling (MatmulApiStaticTiling, registered without a
//   TCubeTiling); the copies into L1 timed as the basic API's ND -> NZ DataCopy (copy_cube_in_norm.h: one per base
//   tile; copy_cube_in_mdl.h: one per stepKa/stepKb tiles along K), Huawei's Matmul sample's Cases 1-8 the check;
// * the block order of TCubeTiling: Iterate walks baseM x baseN blocks of the core's
//   singleCoreM x singleCoreN region (SetTail shrinks it) in groups of stepM/stepN, N inner for
//   iterateOrder 0 and M inner for 1 (scheduler_norm_base.h MoveOnIterateOrderM/N);
// * the cube arithmetic: half/bfloat16_t/float inputs, products and sums in fp32 over 16-element K
//   fractals (8 for float), the bias added once in fp32;
// * the capacity of L1, L0A, L0B and L0C (and BT for the bias) each tiling must respect, checked when the
//   object is registered: every object of one REGIST_MATMUL_OBJ starts its buffers at one shared address on the
//   cube core (the scheduler's InitShareBufStart, kernel_tpipe_base.h AuxShareBufStart; shareMode 0, which the
//   host tiling always sets), so each must fit on its own, not their sum;
// * GM traffic: A and B reach L1 one base tile at a time (NORM), kept there for at most depthA1 (depthB1)
//   tiles and dropped where the scheduler resets them; counters for cube work;
// * the 910B hand-over rules of the KFC messages: SetTensorA/B start a round, and SetBias/SetTail count only
//   in a round (every message clears the flags, matmul_client.h); Iterate after the last block stays false
//   until a new round;
// * the AIC/AIV hand-over (910B): a C block exists only after Iterate and is fetched once with GetTensorC;
//   an asynchronous IterateAll leaves its output unreadable until its WaitIterateAll, and a vector-core
//   read of it before then is a fault (the missing cross-core wait), and so is a vector-core write into what
//   it reads (the bounds of its A, B and bias) before then: the cube takes the product when it reaches the
//   message, not when it is posted (the emulator computes it at the post). Several may be outstanding: the cube
//   core serves the messages in order and each WaitIterateAll takes the oldest one's notification (one
//   CrossCoreWaitFlag on the object's flag, a counter of 0-15: a 16th outstanding notification is a fault,
//   CrossCoreSetFlag(ISASI).md); a cube write into bytes a vector-core MTE2 read may still be reading is a
//   fault (the stage was not released: SetFlag/WaitFlag<MTE2_S> before the message); the reverse needs no wait:
//   the client's PostMessage puts PipeBarrier<PIPE_MTE3> before the message's own MTE3 copy
//   (dav_c220/kfc/kfc_comm_client.h), so the cube reads what this core's MTE3 wrote before it (attention's P);
// * the KFC client REGIST_MATMUL_OBJ declares lives until its scope ends (then the cube core stops serving),
//   and two objects' iterations may not interleave without End() (they share L1/L0 addresses, End.md);
// * 310P (coupled): the Matmul runs on the AI Core itself and needs SetLocalWorkspace (UB scratch)
//   before the first Iterate when A/B are ND or C is in GM (SetLocalWorkspace.md).
#pragma once
#include <algorithm>
#include <deque>
#include <list>

#include "kernel_operator.h"
#include "kernel_tiling/kernel_tiling.h"
#include "matmul_rules.h"

enum class CubeFormat { ND = 0, NZ, ZN, ZZ, NN, ND_ALIGN, SCALAR, VECTOR };
enum class LayoutMode { NONE = 0, BSNGD, SBNGD, BNGS1S2, NORMAL };

// The MatmulConfig fields the emulator reads (CANN's names; matmul_config.h has many more). CFG_NORM turns unit
// flags on, CFG_MDL off (tiling.h GetNormalConfig / GetMDLConfig).
struct MatmulConfig {
    bool doNorm;
    bool doMultiDataLoad;
    uint32_t basicM = 0, basicN = 0, basicK = 0;
    uint32_t singleCoreM = 0, singleCoreN = 0, singleCoreK = 0;
    bool enUnitFlag = true;
    bool enableSetBias = true;
};
constexpr MatmulConfig CFG_NORM{true, false};
constexpr MatmulConfig CFG_MDL{false, true, 0, 0, 0, 0, 0, 0, false};

enum class MatmulConfigMode { CONFIG_NORM, CONFIG_MDL, CONFIG_SPECIALMDL, CONFIG_IBSHARE };
struct MatmulShapeParams {
    uint32_t singleCoreM, singleCoreN, singleCoreK, basicM, basicN, basicK;
};

// A configuration of `mode`'s template with the shapes given (GetMMConfig, tiling.h); the other parameter kinds
// (quant, batch, function) are not emulated.
template <MatmulConfigMode mode>
constexpr MatmulConfig GetMMConfig(const MatmulShapeParams& shape) {
    static_assert(mode == MatmulConfigMode::CONFIG_NORM || mode == MatmulConfigMode::CONFIG_MDL,
                  "GetMMConfig: only the NORM and MDL templates are emulated");
    MatmulConfig c = mode == MatmulConfigMode::CONFIG_MDL ? CFG_MDL : CFG_NORM;
    c.singleCoreM = shape.singleCoreM, c.singleCoreN = shape.singleCoreN, c.singleCoreK = shape.singleCoreK;
    c.basicM = shape.basicM, c.basicN = shape.basicN, c.basicK = shape.basicK;
    return c;
}

// A tiling fixed at compile time (constant tiling: Matmul<..., CONSTANT_CFG>, REGIST_MATMUL_OBJ with no tiling).
struct MatmulApiStaticTiling {
    int32_t usedCoreNum = -1, M = -1, N = -1, Ka = -1, Kb = -1, singleCoreM = -1, singleCoreN = -1, singleCoreK = -1;
    int32_t baseM = -1, baseN = -1, baseK = -1, depthA1 = -1, depthB1 = -1, stepM = -1, stepN = -1, isBias = -1;
    int32_t transLength = -1, iterateOrder = -1, shareMode = -1, shareL1Size = -1, shareL0CSize = -1, shareUbSize = -1;
    int32_t stepKa = -1, stepKb = -1, dbL0A = -1, dbL0B = -1, dbL0C = -1;
    MatmulConfig cfg = CFG_NORM;
};

namespace asc_emu {
// Cube-side memories per SoC (impl/adv_api/tiling/matmul/matmul_tiling_base.cpp, cann_facts.md §7).
struct CubeCaps {
    uint64_t l1, l0a, l0b, l0c, bt;
};
inline CubeCaps Cube() {
#if __NPU_ARCH__ == 2002
    return {1048576, 65536, 65536, 262144, 0};
#else
    return {524288, 65536, 65536, 131072, 1024};
#endif
}

// The configuration a Matmul's template argument carries: a MatmulConfig, or a constant tiling's.
constexpr MatmulConfig CfgOf(const MatmulConfig& c) { return c; }
constexpr MatmulConfig CfgOf(const MatmulApiStaticTiling& t) { return t.cfg; }
inline AscendC::tiling::TCubeTiling TilingOf(const MatmulApiStaticTiling& s) {
    AscendC::tiling::TCubeTiling t;
    t.usedCoreNum = 1, t.M = s.M, t.N = s.N, t.Ka = s.Ka, t.Kb = s.Kb;
    t.singleCoreM = s.singleCoreM, t.singleCoreN = s.singleCoreN, t.singleCoreK = s.singleCoreK;
    t.baseM = s.baseM, t.baseN = s.baseN, t.baseK = s.baseK, t.depthA1 = s.depthA1, t.depthB1 = s.depthB1;
    t.stepM = s.stepM, t.stepN = s.stepN, t.isBias = s.isBias, t.transLength = s.transLength;
    t.iterateOrder = s.iterateOrder, t.shareMode = s.shareMode, t.shareL1Size = s.shareL1Size;
    t.shareL0CSize = s.shareL0CSize, t.shareUbSize = s.shareUbSize, t.stepKa = s.stepKa, t.stepKb = s.stepKb;
    t.dbL0A = s.dbL0A, t.dbL0B = s.dbL0B, t.dbL0C = s.dbL0C;
    return t;
}

inline float ToF32(float v) { return v; }
inline float ToF32(half v) { return static_cast<float>(v); }
inline float ToF32(bfloat16_t v) { return v.ToFloat(); }

}  // namespace asc_emu

namespace AscendC {

// The constant tiling of a configuration with its single-core and base shapes (constant_tiling.h): the shapes, one
// base tile of each operand per K step in L1 double-buffered (stepKa = stepKb = 1, depths 2; CANN sizes these from L1,
// which callers such as Huawei's matmul sample overwrite), L0A/L0B double-buffered where two tiles fit, one L0C
// buffer, and CANN's iterate order rule (GetIterateOrder: ORDER_M unless one operand's whole K stays in L1).
template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE>
constexpr MatmulApiStaticTiling GetMatmulApiTiling(const MatmulConfig& cfg, int32_t l1Size = 524288) {
    MatmulApiStaticTiling t;
    t.cfg = cfg;
    const int32_t size = static_cast<int32_t>(sizeof(typename A_TYPE::T));
    t.baseM = static_cast<int32_t>(cfg.basicM), t.baseN = static_cast<int32_t>(cfg.basicN);
    t.baseK = static_cast<int32_t>(cfg.basicK);
    t.dbL0A = 2 * t.baseM * t.baseK * size <= 65536 ? 2 : 1;
    t.dbL0B = 2 * t.baseN * t.baseK * size <= 65536 ? 2 : 1;
    if (cfg.singleCoreM == 0 || cfg.singleCoreN == 0 || cfg.singleCoreK == 0) return t;
    t.M = t.singleCoreM = static_cast<int32_t>(cfg.singleCoreM);
    t.N = t.singleCoreN = static_cast<int32_t>(cfg.singleCoreN);
    t.Ka = t.Kb = t.singleCoreK = static_cast<int32_t>(cfg.singleCoreK);
    t.isBias = cfg.enableSetBias ? 1 : 0;
    t.stepM = t.stepN = t.stepKa = t.stepKb = 1;
    t.depthA1 = t.depthB1 = 2;
    const int64_t wholeK = static_cast<int64_t>(t.singleCoreK) * size;
    const bool fullA = wholeK * t.baseM * 2 + 2LL * t.baseN * t.baseK * size <= l1Size;
    const bool fullB = wholeK * t.baseN * 2 + 2LL * t.baseM * t.baseK * size <= l1Size;
    if (fullA != fullB) {
        t.iterateOrder = fullA ? 1 : 0;
    } else if (!fullA) {
        t.iterateOrder = 0;
    } else {
        const int32_t mLoop = (t.singleCoreM + t.baseM - 1) / t.baseM, nLoop = (t.singleCoreN + t.baseN - 1) / t.baseN;
        t.iterateOrder = t.singleCoreM + t.singleCoreN * mLoop < t.singleCoreN + t.singleCoreM * nLoop ? 1 : 0;
    }
    t.dbL0C = 1;
    t.transLength = 0;
    t.shareMode = 0;
    t.shareL0CSize = t.baseM * t.baseN * 4;
    t.shareUbSize = 0;
    return t;
}

template <TPosition POSITION, CubeFormat FORMAT, typename TYPE, bool ISTRANS = false,
          LayoutMode LAYOUT = LayoutMode::NONE, bool IBSHARE = false>
struct MatmulType {
    static constexpr TPosition pos = POSITION;
    static constexpr CubeFormat format = FORMAT;
    static constexpr bool isTrans = ISTRANS;
    using T = TYPE;
};

__aicore__ inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) {
    if (workspace == nullptr) asc_emu::Fail("GetUserWorkspace: workspace can not be nullptr");
    return workspace + emu_ws::SysBytes();
}

template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE = C_TYPE, const auto& MM_CFG = CFG_NORM>
class Matmul {
    using AT = typename A_TYPE::T;
    using BT = typename B_TYPE::T;
    using CT = typename C_TYPE::T;
    using BiasT = typename BIAS_TYPE::T;
    static_assert(std::is_same_v<AT, BT>, "Matmul: A and B must have one data type");
    static_assert(std::is_same_v<CT, float> || std::is_same_v<CT, AT>, "Matmul: C is float or the input type");
#if __NPU_ARCH__ == 2002
    static_assert(std::is_same_v<AT, half>, "Matmul on 310P (Atlas inference AI Core) takes half A/B (int8 not emulated)");
#endif
    static_assert(A_TYPE::pos == TPosition::GM && B_TYPE::pos == TPosition::GM,
                  "the emulator models A and B in GM");
    static_assert(C_TYPE::pos == TPosition::GM || C_TYPE::pos == TPosition::VECIN, "C goes to GM or VECIN");

    static constexpr MatmulConfig kCfg = asc_emu::CfgOf(MM_CFG);
    // A constant tiling (MatmulApiStaticTiling as the configuration): registered without a TCubeTiling.
    static constexpr bool kStatic = std::is_same_v<std::decay_t<decltype(MM_CFG)>, MatmulApiStaticTiling>;

public:
    // REGIST_MATMUL_OBJ: check the tiling against the cube's memories and reserve its L1.
    void EmuInit(const tiling::TCubeTiling* t, asc_emu::Loc loc) {
        CheckCore(loc);
        if (t == nullptr && !kStatic)
            asc_emu::Fail("REGIST_MATMUL_OBJ at " + loc.Str() + " without a tiling (only a Matmul with a constant "
                          "tiling, MatmulApiStaticTiling, takes none)");
        if constexpr (kStatic) {
            tiling_ = t != nullptr ? *t : asc_emu::TilingOf(MM_CFG);
            biasOptional_ = t == nullptr;  // enableSetBias: SetBias may be called, need not be
        } else {
            tiling_ = *t;
        }
        loc_ = loc;
        const auto& c = tiling_;
        const auto caps = asc_emu::Cube();
        const uint32_t c0 = 32 / sizeof(AT);  // K fractal of the input type
        auto bad = [&](const std::string& why) {
            asc_emu::Fail("Matmul tiling registered at " + loc.Str() + " is not valid: " + why);
        };
        if (c.M <= 0 || c.N <= 0 || c.Ka <= 0 || c.Kb <= 0 || c.Ka != c.Kb) bad("M/N/Ka/Kb must be positive, Ka == Kb");
        if (c.singleCoreM <= 0 || c.singleCoreN <= 0 || c.singleCoreK <= 0) bad("singleCore sizes must be positive");
        if (c.baseM <= 0 || c.baseN <= 0 || c.baseK <= 0) bad("base sizes must be positive");
        if (c.baseM % 16 || c.baseN % 16) bad("baseM and baseN must be multiples of 16 (the cube fractal)");
        if (c.baseK % c0) bad("baseK must be a multiple of " + std::to_string(c0) + " (32 bytes of the input type)");
        if (c.stepM <= 0 || c.stepN <= 0 || c.stepKa <= 0 || c.stepKb <= 0) bad("steps must be positive");
        if (c.stepKa % c.stepKb != 0 && c.stepKb % c.stepKa != 0) bad("stepKa and stepKb must divide one another");
        // NORM (CFG_NORM, what asc-onnx emits): stepM <= depthA1, stepN <= depthB1 (matmul_tiling_algorithm.cpp);
        // MDL additionally needs depth a multiple of step*stepK (matmul_shape_tiling.h).
        if (c.depthA1 < c.stepM || c.depthB1 < c.stepN) bad("depthA1/depthB1 must hold stepM/stepN base tiles");
        if (!kCfg.doNorm && (c.depthA1 % (c.stepM * c.stepKa) || c.depthB1 % (c.stepN * c.stepKb)))
            bad("MDL: depthA1 (depthB1) must be a multiple of stepM*stepKa (stepN*stepKb)");
        if (c.iterateOrder != 0 && c.iterateOrder != 1) bad("iterateOrder must be 0 (ORDER_M) or 1 (ORDER_N)");
#if __NPU_ARCH__ == 2002
        // 310P transforms ND tiles in UB scratch of transLength bytes (matmul_shape_tiling.h), sized by the host
        // tiling for one configuration and set of types: a tiling made for MDL (CANN's default mmConfigType 1,
        // A and B tiles of stepKa x stepM base tiles) or for another C type does not fit a NORM Matmul of these types.
        if (c.transLength <= 0) bad("transLength must be positive on 310P (the ND -> NZ scratch in UB)");
        const int64_t norm = asc_emu::TransLength310P(c, Types(), false);
        if (c.transLength != norm)
            bad("transLength is " + std::to_string(c.transLength) + " bytes where this NORM Matmul of its types needs " +
                std::to_string(norm) + (c.transLength == asc_emu::TransLength310P(c, Types(), true)
                                            ? ": the tiling was computed for MDL (CANN's default mmConfigType 1); the "
                                              "host must call SetMatmulConfigParams(0) for a CFG_NORM Matmul"
                                            : ": the host tiling was computed for other types (SetA/B/C/BiasType)"));
#endif
        // L0A/L0B are double-buffered only when both are (tbuf_pool_l0_base.h).
        const uint64_t dbAB = c.dbL0A == 2 && c.dbL0B == 2 ? 2 : 1, dbC = c.dbL0C == 2 ? 2 : 1;
        const uint64_t dbA = dbAB, dbB = dbAB;
        const uint64_t l0a = dbA * c.baseM * c.baseK * sizeof(AT), l0b = dbB * c.baseN * c.baseK * sizeof(BT);
        const uint64_t l0c = dbC * c.baseM * c.baseN * sizeof(float);
        if (l0a > caps.l0a) bad("L0A overflow: " + std::to_string(l0a) + " bytes > " + std::to_string(caps.l0a));
        if (l0b > caps.l0b) bad("L0B overflow: " + std::to_string(l0b) + " bytes > " + std::to_string(caps.l0b));
        if (l0c > caps.l0c) bad("L0C overflow: " + std::to_string(l0c) + " bytes > " + std::to_string(caps.l0c));
        // (a constant tiling's isBias says SetBias may come; its L1 is taken when it does: Huawei's matmul sample
        // fills all 512 KB of L1 with A and B under CFG_MDL's enableSetBias and runs)
        const uint64_t bias = c.isBias && !biasOptional_ ? static_cast<uint64_t>(c.baseN) * sizeof(BiasT) : 0;
        // The bias table holds the fp32 accumulator type whatever the bias type (c2_buffer.h).
        const uint64_t bt = c.isBias ? static_cast<uint64_t>(c.baseN) * sizeof(float) : 0;
        if (caps.bt && bt > caps.bt) bad("bias table overflow: " + std::to_string(bt) + " bytes > " + std::to_string(caps.bt));
        const uint64_t l1 = static_cast<uint64_t>(c.depthA1) * c.baseM * c.baseK * sizeof(AT) +
                            static_cast<uint64_t>(c.depthB1) * c.baseN * c.baseK * sizeof(BT) + bias;
        asc_emu::St().pipes.l1Reserved = std::max(asc_emu::St().pipes.l1Reserved, l1);  // one shared region
        if (asc_emu::St().pipes.l1Reserved > caps.l1)
            bad("L1 overflow: a registered Matmul object reserves " + std::to_string(asc_emu::St().pipes.l1Reserved) +
                " bytes > " + std::to_string(caps.l1));
        asc_emu::St().cube.l1Peak = std::max(asc_emu::St().cube.l1Peak, asc_emu::St().pipes.l1Reserved);
        registered_ = true;
        tailM_ = c.singleCoreM;
        tailN_ = c.singleCoreN;
        tailK_ = c.singleCoreK;
    }

    __aicore__ inline void SetTensorA(const GlobalTensor<AT>& gm, bool isTransposeA = false) {
        Need("SetTensorA");
        if (isTransposeA) asc_emu::Fail("Matmul::SetTensorA: transposed A is not emulated");
        a_ = gm;
        hasA_ = true;
        NewRound();
    }
    __aicore__ inline void SetTensorB(const GlobalTensor<BT>& gm, bool isTransposeB = false) {
        Need("SetTensorB");
        if (isTransposeB && !B_TYPE::isTrans)
            asc_emu::Fail("Matmul::SetTensorB(gm, true) with a B MatmulType whose ISTRANS is false");
        b_ = gm;
        transB_ = isTransposeB;
        hasB_ = true;
        NewRound();
    }
    __aicore__ inline void SetBias(const GlobalTensor<BiasT>& gm, asc_emu::Loc loc = ASC_EMU_HERE) {
        Need("SetBias");
#if __NPU_ARCH__ == 2002
        // 310P broadcasts the bias from UB into the fp32 L0C with BroadCastVecToMM, whose source and destination
        // types must match (dav_m200/kernel_operator_mm_impl.h): the bias must be float (API table: 310P bias
        // float/int32_t).
        if (!std::is_same_v<BiasT, float>)
            asc_emu::Fail("Matmul::SetBias at " + loc.Str() + " on 310P with a " + asc_emu::TypeName<BiasT>() +
                          " bias: the 310P cube takes the bias into its fp32 L0C only as float (BroadCastVecToMM)");
#endif
        if (!tiling_.isBias) asc_emu::Fail("Matmul::SetBias with a tiling made without EnableBias(true)");
        bias_ = gm;
        hasBias_ = true;
        roundBias_ = true;
    }
    __aicore__ inline void DisableBias() {
        hasBias_ = false;
        biasDisabled_ = true;
        roundBias_ = true;
    }
    // The full shapes the operands are laid out in (matmul_shape_info.h): A's rows orgKa apart, B's orgKb (a
    // transposed B) or orgN apart, C's orgKc apart (0: orgN; 910B copy_cube_out_fixpipe.h, 310P
    // copy_cube_out_datacopy.h). 910B: a message of its own (MMFUN_SET_ORG_SHAPE, the vector core does not wait); it
    // stays until the next SetOrgShape (CFG_NORM's enableInit: the server applies it at once).
    __aicore__ inline void SetOrgShape(int orgM, int orgN, int orgKa, int orgKb, int orgKc = 0,
                                       asc_emu::Loc loc = ASC_EMU_HERE) {
        Need("SetOrgShape");
#if __NPU_ARCH__ == 2201
        // Posting it clears the client's flags: the round's SetTensorA/B, SetBias or SetTail would not reach the cube
        // (matmul_client.h; SetOrgShape.md: before SetTensorA/B, SetBias, SetSingleShape).
        if (roundOpen_ || roundBias_ || roundTail_)
            asc_emu::Fail("Matmul::SetOrgShape at " + loc.Str() + " after SetTensorA/B, SetBias or SetTail of the same "
                          "round: its message clears them, the cube would compute on the last round's operands");
#endif
        if (orgM <= 0 || orgN <= 0 || orgKa <= 0 || orgKb <= 0 || orgKc < 0)
            asc_emu::Fail("Matmul::SetOrgShape at " + loc.Str() + ": orgM/orgN/orgKa/orgKb must be positive "
                          "(CheckOrgShape), orgKc not negative");
        tiling_.M = orgM;
        tiling_.N = orgN;
        tiling_.Ka = orgKa;
        tiling_.Kb = orgKb;
        cPitch_ = orgKc;
    }
    __aicore__ inline void SetOrgShape(int orgM, int orgN, int orgK, asc_emu::Loc loc = ASC_EMU_HERE) {
        SetOrgShape(orgM, orgN, orgK, orgK, orgN, loc);
    }
    // Shrink this core's region (edge cores); -1 keeps a size.
    __aicore__ inline void SetTail(int tailM = -1, int tailN = -1, int tailK = -1) {
        Need("SetTail");
        if (tailM > tiling_.singleCoreM || tailN > tiling_.singleCoreN || tailK > tiling_.singleCoreK)
            asc_emu::Fail("Matmul::SetTail larger than the tiling's singleCore shape");
        if (tailM == 0 || tailN == 0 || tailK == 0) asc_emu::Fail("Matmul::SetTail with a zero size");
        if (tailM > 0) tailM_ = tailM;
        if (tailN > 0) tailN_ = tailN;
        if (tailK > 0) tailK_ = tailK;
        roundTail_ = true;
    }
#if __NPU_ARCH__ == 2002
    __aicore__ inline void SetLocalWorkspace(const LocalTensor<uint8_t>& tmp) {
        Need("SetLocalWorkspace");
        const int64_t need = asc_emu::LocalWorkspace310P(tiling_);
        if (static_cast<int64_t>(tmp.GetSize()) < need)
            asc_emu::Fail("Matmul::SetLocalWorkspace: " + std::to_string(tmp.GetSize()) + " bytes, the tiling's UB "
                          "scratch needs " + std::to_string(need) + " (MatmulGetTmpBufSize: max(shareUbSize, 2 x "
                          "transLength))");
        localWs_ = true;
    }
#endif

    // One C block per call, in the tiling's order; false when the region is done.
    template <bool sync = true>
    __aicore__ inline bool Iterate(bool enPartialSum = false, asc_emu::Loc loc = ASC_EMU_HERE) {
        if (enPartialSum) asc_emu::Fail("Matmul::Iterate: enPartialSum is not emulated");
        if (!sync) asc_emu::Fail("Matmul::Iterate<false> (asynchronous blocks) is not emulated; use IterateAll<false>");
        if (done_) return false;
        Start(loc);
        if (haveC_) asc_emu::Fail("Matmul::Iterate at " + loc.Str() + ": the previous C block was never fetched "
                                  "with GetTensorC (the cube would overwrite it)");
        if (next_ >= order_.size()) {
            done_ = true;  // false again until SetTensorA/B starts a new round (matmul_client.h)
            return false;
        }
        AwaitCube(Compute(order_[next_++], Request()));
        haveC_ = true;
        return true;
    }

    // The block of the last Iterate, [h, w] row-major (enSequentialWrite) or at its place in the
    // [singleCoreM, singleCoreN] region of a C with N columns.
    template <bool sync = true>
    __aicore__ inline void GetTensorC(const GlobalTensor<CT>& gm, uint8_t enAtomic = 0, bool enSequentialWrite = false,
                                      asc_emu::Loc loc = ASC_EMU_HERE) {
        static_assert(sync, "GetTensorC<false> is not emulated");
        TakeC("GetTensorC", enAtomic, loc);
        WriteBlockGm(gm, enSequentialWrite, loc);
#if __NPU_ARCH__ == 2002
        // 310P: the AI Core's own MTE3 writes the block (CopyLocal2GMNZ2NDOnTheFly, ending with an MTE3 -> V wait);
        // an MTE2 read of it needs MTE3 -> MTE2 ordering, which only IterateAll inserts by itself.
        auto& ps = asc_emu::St().pipes;
        asc_emu::Issue(asc_emu::PMTE3, "Matmul::GetTensorC", loc);
        ps.known[asc_emu::PMTE3].c[asc_emu::PMTE3] = ps.seq[asc_emu::PMTE3];
        asc_emu::Join(asc_emu::PV, asc_emu::Snapshot(asc_emu::PMTE3));
        const uint64_t stride = RowStride(enSequentialWrite);
        const CT* p = gm.GetPhyAddr() + (enSequentialWrite ? 0 : BlockOffset());
        ps.pending.push_back({reinterpret_cast<const uint8_t*>(p), ((blockH_ - 1) * stride + blockW_) * sizeof(CT),
                              "Matmul::GetTensorC at " + loc.Str(), ps.seq[asc_emu::PMTE3]});
#endif
    }
    template <bool sync = true>
    __aicore__ inline void GetTensorC(const LocalTensor<CT>& ub, uint8_t enAtomic = 0, bool enSequentialWrite = false,
                                      asc_emu::Loc loc = ASC_EMU_HERE) {
        static_assert(C_TYPE::pos == TPosition::VECIN, "GetTensorC into UB needs C at TPosition::VECIN");
        static_assert(sync, "GetTensorC<false> is not emulated");
        TakeC("GetTensorC", enAtomic, loc);
        if (!enSequentialWrite) asc_emu::Fail("GetTensorC into UB: only the sequential (block) layout is emulated");
#if __NPU_ARCH__ == 2002
        // 310P: rows at the tiling's baseN, each padded to 16 columns (copy_cube_out_datacopy.h).
        const uint32_t stride = static_cast<uint32_t>(tiling_.baseN), width = (blockW_ + 15) / 16 * 16;
#else
        const uint32_t stride = static_cast<uint32_t>(blockW_), width = stride;  // 910B: dense [h, w]
#endif
        const uint32_t n = static_cast<uint32_t>((blockH_ - 1) * stride + width);
        if (ub.GetSize() < n) asc_emu::Fail("GetTensorC: the UB tensor holds " + std::to_string(ub.GetSize()) +
                                            " elements, the block " + std::to_string(n));
        // 910B: fixpipe to the workspace, then the client's MTE2 copy into UB, waited before return.
        const int32_t op = asc_emu::Issue(asc_emu::PMTE2, "Matmul::GetTensorC", loc);
        asc_emu::UbAccess(op, emu_ub::Offset(ub.GetPhyAddr()), n * sizeof(CT), true);
        {  // from the workspace the fixpipe just wrote: L2 hits at the core's L2 share (310P: its own UB path)
            const auto& tm = asc_emu::St().tm;
            asc_emu::Spend(asc_emu::PMTE2, n * sizeof(CT) / asc_emu::GmShare(tm.coupled ? tm.gmBytesPerS : tm.l2BytesPerS),
                           tm.dmaLatency);
            asc_emu::St().pipes.t.free[asc_emu::PS] = std::max(asc_emu::St().pipes.t.free[asc_emu::PS],
                                                               asc_emu::St().pipes.t.lastDone[asc_emu::PMTE2]);
        }
        asc_emu::Join(asc_emu::PV, asc_emu::Snapshot(asc_emu::PMTE2));
        for (int32_t i = 0; i < blockH_; ++i)
            for (uint32_t j = 0; j < width; ++j)
                ub.GetPhyAddr()[i * stride + j] = Out(j < static_cast<uint32_t>(blockW_) ? c_[i * blockW_ + j] : 0.0f);
        asc_emu::St().cube.cBytes += n * sizeof(CT);
    }

    // All of the region into gm (N columns); asynchronous: unreadable until WaitIterateAll.
    // waitIterateAll: the cube core notifies the vector core when done (needed for a later WaitIterateAll).
    // 310P (MatmulImpl, matmul_impl.h v200): a synchronous loop of Iterate + GetTensorC(gm, enAtomic), so every
    // block lands at its place in C with row pitch N; enSequentialWrite and the async form are accepted and ignored.
    template <bool sync = true>
    __aicore__ inline void IterateAll(const GlobalTensor<CT>& gm, uint8_t enAtomic = 0, bool enSequentialWrite = false,
                                      bool waitIterateAll = false, bool fakeMsg = false, asc_emu::Loc loc = ASC_EMU_HERE) {
        if (fakeMsg) asc_emu::Fail("Matmul::IterateAll: fakeMsg is not emulated");
        static_assert(C_TYPE::pos == TPosition::GM, "IterateAll writes C to GM");
        if (enAtomic) asc_emu::Fail("Matmul::IterateAll: atomic accumulation is not emulated");
        Start(loc);
        if (next_ != 0 || haveC_) asc_emu::Fail("Matmul::IterateAll at " + loc.Str() + " in the middle of an Iterate loop");
#if __NPU_ARCH__ == 2002
        enSequentialWrite = false;  // ignored: every block at its place, row pitch N (GetTensorC(gm, enAtomic))
        constexpr bool async = false;
        (void)waitIterateAll;
        {  // the MTE3 writes, and the MTE3 -> MTE2 and MTE3 -> V waits IterateAll inserts after each block
            auto& ps = asc_emu::St().pipes;
            asc_emu::Issue(asc_emu::PMTE3, "Matmul::IterateAll", loc);
            ps.known[asc_emu::PMTE3].c[asc_emu::PMTE3] = ps.seq[asc_emu::PMTE3];
            asc_emu::Join(asc_emu::PV, asc_emu::Snapshot(asc_emu::PMTE3));
            asc_emu::Join(asc_emu::PMTE2, asc_emu::Snapshot(asc_emu::PMTE3));
        }
#else
        constexpr bool async = !sync;
        if (enSequentialWrite && order_.size() != 1)
            asc_emu::Fail("Matmul::IterateAll at " + loc.Str() + ": enSequentialWrite is emulated for a one-block region "
                          "only (SetTail within baseM x baseN)");
#endif
        const uint8_t* lo = nullptr;
        const uint8_t* hi = nullptr;
        for (int r = 0; r < 3; ++r) readLo_[r] = readHi_[r] = nullptr;
        const double at = Request();
        double cubeDone = at;
        for (const auto& blk : order_) {
            cubeDone = Compute(blk, at, &gm, enSequentialWrite);
            haveC_ = false;
            auto* p = reinterpret_cast<const uint8_t*>(gm.GetPhyAddr() + (enSequentialWrite ? 0 : BlockOffset()));
            const uint64_t stride = RowStride(enSequentialWrite);
            auto* e = p + ((blockH_ - 1) * stride + blockW_) * sizeof(CT);
            lo = lo == nullptr || p < lo ? p : lo;
            hi = hi == nullptr || e > hi ? e : hi;
            WriteBlockGm(gm, enSequentialWrite, loc, true);
        }
        next_ = order_.size();
        done_ = true;
        // The cube core ends the object after an IterateAll (matmul_server_impl_c220.h): another may follow.
        started_ = false;
        if (asc_emu::St().pipes.activeMatmul == this) asc_emu::St().pipes.activeMatmul = nullptr;
        if (async) {
            const size_t bytes = static_cast<size_t>(hi - lo);
            asc_emu::St().pipes.pending.push_back({lo, bytes, "Matmul::IterateAll<false> at " + loc.Str()});
            if (waitIterateAll && Notifying() >= kMaxNotify)
                asc_emu::Fail("Matmul::IterateAll<false> at " + loc.Str() + ": " + std::to_string(kMaxNotify) +
                              " notifications are already outstanding; the cube's flag counter holds 0-15 and would "
                              "overflow (CrossCoreSetFlag(ISASI).md): WaitIterateAll before issuing more");
            const uint64_t id = ++asc_emu::St().pipes.asyncIds;
            static const char* const kOperand[3] = {"A", "B", "bias"};
            for (int r = 0; r < 3; ++r)
                if (readLo_[r] != nullptr)
                    asc_emu::St().pipes.cubeReads.push_back(
                        {readLo_[r], static_cast<size_t>(readHi_[r] - readLo_[r]),
                         std::string(kOperand[r]) + " of Matmul::IterateAll<false> at " + loc.Str(), id});
            async_.push_back({cubeDone, waitIterateAll, lo, bytes, id});
        } else {
            AwaitCube(cubeDone);
        }
    }
    __aicore__ inline void WaitIterateAll(asc_emu::Loc loc = ASC_EMU_HERE) {
#if __NPU_ARCH__ == 2002
        // 310P's Matmul is MatmulImpl, whose WaitIterateAll exists for __NPU_ARCH__ 5102 only (matmul_impl.h):
        // the device build fails, so the emulator's does too (only where it is called: the member is a template's)
        static_assert(sizeof(A_TYPE) == 0, "Matmul::WaitIterateAll: 310P's Matmul (MatmulImpl) has no such member; "
                                           "its IterateAll returns with C written");
        (void)loc;
        return;
#endif
        if (async_.empty()) asc_emu::Fail("Matmul::WaitIterateAll at " + loc.Str() + " without an IterateAll<false>");
        const Async a = async_.front();
        if (!a.notify)
            asc_emu::Fail("Matmul::WaitIterateAll at " + loc.Str() + " after an IterateAll<false> without waitIterateAll "
                          "= true: the cube core never signals, the vector core would wait forever");
        async_.pop_front();
        auto& reads = asc_emu::St().pipes.cubeReads;  // its inputs may be written again
        reads.erase(std::remove_if(reads.begin(), reads.end(), [&](const asc_emu::CubeRead& r) { return r.id == a.id; }),
                    reads.end());
        auto& pending = asc_emu::St().pipes.pending;  // the oldest one's output is readable now
        for (auto it = pending.begin(); it != pending.end(); ++it) {
            if (it->base == a.base && it->bytes == a.bytes && it->mte3Seq == 0) {
                pending.erase(it);
                break;
            }
        }
        AwaitCube(a.done);
    }
    __aicore__ inline void End(asc_emu::Loc loc = ASC_EMU_HERE) {
        Need("End");
        if (haveC_) asc_emu::Fail("Matmul::End at " + loc.Str() + " with a C block never fetched by GetTensorC");
        if (Notifying() > 0)
            asc_emu::Fail("Matmul::End at " + loc.Str() + " before WaitIterateAll of an IterateAll<false>");
        started_ = false;
        next_ = 0;
        order_.clear();
        ended_ = true;
        if (asc_emu::St().pipes.activeMatmul == this) asc_emu::St().pipes.activeMatmul = nullptr;
    }
    bool EmuEnded() const { return ended_ || !registered_; }

    asc_emu::MatmulTypes Types() const {
        return {sizeof(AT), sizeof(BT), sizeof(CT), sizeof(BiasT), B_TYPE::isTrans};
    }

private:
    struct Blk {
        int32_t m, n;
    };
    void Need(const char* what) const {
        if (!registered_) asc_emu::Fail(std::string("Matmul::") + what + " before REGIST_MATMUL_OBJ");
        if (quit_)
            asc_emu::Fail(std::string("Matmul::") + what + " after the scope of its REGIST_MATMUL_OBJ (" + loc_.Str() +
                          ") ended: the macro's KFC client sent SERVICE_QUIT there, so the cube core has stopped "
                          "serving (kfc_comm_client.h); register in the scope that iterates");
    }
    CT Out(float v) const {
        if constexpr (std::is_same_v<CT, float>) return v;
        else if constexpr (std::is_same_v<CT, half>) return static_cast<half>(v);
        else return bfloat16_t(v);
    }
    // SetTensorA/B: a new round (the client sends them with isFirstIter; the scheduler restarts).
    void NewRound() {
        started_ = false;
        done_ = false;
        roundOpen_ = true;
        haveC_ = false;
    }
    // First Iterate/IterateAll of a region: the block order of the tiling.
    void Start(const asc_emu::Loc& loc) {
        Need("Iterate");
        if (started_) return;
        if (!roundOpen_ && (roundBias_ || roundTail_))
            asc_emu::Fail("Matmul::SetBias/SetTail before the Iterate at " + loc.Str() + " without SetTensorA/SetTensorB "
                          "in the same round: the cube core applies them only with a new A or B (matmul_server.h)");
#if __NPU_ARCH__ == 2201
        // 910B: every message clears the flags, so a bias set in an earlier round is gone.
        if (hasBias_ && !roundBias_)
            asc_emu::Fail("Matmul::Iterate at " + loc.Str() + ": SetBias was not repeated after SetTensorA/B; on 910B "
                          "the cube core drops the bias of an earlier round");
#endif
        roundOpen_ = roundBias_ = roundTail_ = false;
        // ND -> NZ copies into L1 take the row pitch in 16 bits (Nd2NzParams.srcDValue, kernel_struct_data_copy.h).
        if (tiling_.Ka > 65535 || (transB_ ? tiling_.Kb : tiling_.N) > 65535)
            asc_emu::Fail("Matmul::Iterate at " + loc.Str() + ": a row pitch of A (Ka " + std::to_string(tiling_.Ka) +
                          ") or B (" + std::to_string(transB_ ? tiling_.Kb : tiling_.N) + ") over 65535 elements: the "
                          "ND -> NZ copy's srcDValue is 16 bits and would wrap");
        // Rows laid out closer than the region is wide overlap: the cube would read or write other rows' elements.
        if (static_cast<int64_t>(CPitch()) < tailN_ || tiling_.Ka < tailK_ ||
            (transB_ ? tiling_.Kb < tailK_ : tiling_.N < tailN_))
            asc_emu::Fail("Matmul::Iterate at " + loc.Str() + ": a row pitch (Ka " + std::to_string(tiling_.Ka) +
                          ", Kb or N " + std::to_string(transB_ ? tiling_.Kb : tiling_.N) + ", C " +
                          std::to_string(CPitch()) + ") is shorter than the region's rows (K " +
                          std::to_string(tailK_) + ", N " + std::to_string(tailN_) + "): SetOrgShape");
        if (!hasA_ || !hasB_) asc_emu::Fail("Matmul::Iterate at " + loc.Str() + " before SetTensorA/SetTensorB");
#if __NPU_ARCH__ == 2002
        if (!localWs_) asc_emu::Fail("Matmul::Iterate at " + loc.Str() + " on 310P without SetLocalWorkspace: "
                                     "ND inputs and C stage through UB scratch the kernel must hand over");
#endif
        if (tiling_.isBias && !hasBias_ && !biasDisabled_ && !biasOptional_)
            asc_emu::Fail("Matmul::Iterate at " + loc.Str() + ": the tiling has a bias (EnableBias) and neither SetBias "
                          "nor DisableBias was called");
        void*& active = asc_emu::St().pipes.activeMatmul;
        if (active != nullptr && active != this)
            asc_emu::Fail("Matmul::Iterate at " + loc.Str() + " while another Matmul object's iteration is open: the "
                          "objects share L1/L0 addresses, call End() on one before switching to the other (End.md)");
        active = this;
        started_ = true;
        ended_ = false;
        const auto& c = tiling_;
        const int32_t mIter = (tailM_ + c.baseM - 1) / c.baseM, nIter = (tailN_ + c.baseN - 1) / c.baseN;
        order_.clear();
        next_ = 0;
        if (c.iterateOrder == 0) {  // ORDER_M: N step groups outermost, then M, then N within the group
            for (int32_t n0 = 0; n0 < nIter; n0 += c.stepN)
                for (int32_t m = 0; m < mIter; ++m)
                    for (int32_t n = n0; n < std::min(nIter, n0 + c.stepN); ++n) order_.push_back({m, n});
        } else {  // ORDER_N: M step groups outermost, then N, then M within the group
            for (int32_t m0 = 0; m0 < mIter; m0 += c.stepM)
                for (int32_t n = 0; n < nIter; ++n)
                    for (int32_t m = m0; m < std::min(mIter, m0 + c.stepM); ++m) order_.push_back({m, n});
        }
        aCache_.clear();
        bCache_.clear();
        lastGroup_ = -1;
    }
    // L1 model: base tiles kept while they fit depthA1 (depthB1); the scheduler drops A when its N inner loop
    // restarts (ORDER_M) and B likewise (ORDER_N).
    bool Load(std::list<std::pair<int64_t, int64_t>>& cache, int32_t capacity, std::pair<int64_t, int64_t> key,
              uint64_t bytes, uint64_t& counter) {
        for (auto it = cache.begin(); it != cache.end(); ++it) {
            if (*it == key) {
                cache.splice(cache.begin(), cache, it);
                return false;
            }
        }
        cache.push_front(key);
        while (static_cast<int32_t>(cache.size()) > capacity) cache.pop_back();
        counter += bytes;
        asc_emu::St().gmReadBytes += bytes;
        return true;
    }
    // The HBM bytes of `rows` rows of `rowBytes` at `pitch` bytes apart (the rest are L2 hits, see Classify).
    static double Rows(const void* p, int64_t rows, uint64_t rowBytes, uint64_t pitch) {
        double hbm = 0;
        for (int64_t r = 0; r < rows; ++r)
            hbm += static_cast<double>(asc_emu::Classify(static_cast<const uint8_t*>(p) + r * pitch, rowBytes));
        return hbm;
    }
    // Where the Matmul runs: on the AIC of a cube-only kernel (ASCENDC_CUBE_ONLY) it is the core's own work; a
    // vector core's request reaches the cube core half a KFC round trip after its scalar unit sends it.
    static bool OnCube() { return asc_emu::St().coreKind == 1 && !asc_emu::St().tm.coupled; }
    static double Request() {
        return asc_emu::St().pipes.t.free[asc_emu::PS] + (OnCube() ? 0.0 : asc_emu::St().tm.kfc / 2);
    }
    static void AwaitCube(double done) { asc_emu::SWait(done + (OnCube() ? 0.0 : asc_emu::St().tm.kfc / 2)); }
    // The cube-only form runs where the kernel does: a __cube__ kernel (or an AIC) with ASCENDC_CUBE_ONLY defined
    // before lib/matmul_intf.h, the client form on a vector core without it (matmul_intf.h picks one at compile time).
    static void CheckCore(const asc_emu::Loc& loc) {
        if (asc_emu::St().tm.coupled) return;
#ifdef ASCENDC_CUBE_ONLY
        if (!OnCube())
            asc_emu::Fail("REGIST_MATMUL_OBJ at " + loc.Str() + " on a vector core with ASCENDC_CUBE_ONLY defined: the "
                          "cube-only Matmul drives the cube unit itself, which an AIV does not have");
#else
        if (OnCube())
            asc_emu::Fail("REGIST_MATMUL_OBJ at " + loc.Str() + " on a cube core without ASCENDC_CUBE_ONLY: this is the "
                          "vector core's KFC client, with no server to answer it; define ASCENDC_CUBE_ONLY before "
                          "lib/matmul_intf.h in a __cube__ kernel");
#endif
    }
    // One C block: its arithmetic and its time on the cube core. With `dst` (IterateAll), the fixpipe's write is
    // classified by the L2 rule here; otherwise (Iterate, then GetTensorC) it is costed as HBM traffic.
    double Compute(const Blk& blk, double at, const GlobalTensor<CT>* dst = nullptr, bool sequential = false) {
        const auto& c = tiling_;
        blockM_ = blk.m;
        blockN_ = blk.n;
        blockH_ = std::min(c.baseM, tailM_ - blk.m * c.baseM);
        blockW_ = std::min(c.baseN, tailN_ - blk.n * c.baseN);
        const int32_t K = tailK_;
        const int32_t kIter = (K + c.baseK - 1) / c.baseK;
        // Group boundaries where the scheduler resets its L1 copies.
        const int32_t group = c.iterateOrder == 0 ? blk.m * 1000003 + blk.n / c.stepN : blk.n * 1000003 + blk.m / c.stepM;
        if (group != lastGroup_) {
            if (c.iterateOrder == 0) aCache_.clear(); else bCache_.clear();
            lastGroup_ = group;
        }
        // NORM loads single base tiles (copy_cube_in_norm.h) and keeps up to depthA1 (depthB1) of them.
        // A[h, K] row-major with Ka columns; B[K, w] with N columns, or B^T[w, K] with Kb columns.
        const AT* a = a_.GetPhyAddr() + static_cast<uint64_t>(blk.m) * c.baseM * c.Ka;
        const BT* b = b_.GetPhyAddr() + (transB_ ? static_cast<uint64_t>(blk.n) * c.baseN * c.Kb
                                                 : static_cast<uint64_t>(blk.n) * c.baseN);
        const int32_t frac = 32 / sizeof(AT);
        auto up = [](int64_t v, int64_t a) { return (v + a - 1) / a * a; };
        std::vector<asc_emu::CubeStep> steps(static_cast<size_t>(kIter));
        for (int32_t kc = 0; kc < kIter; ++kc) {
            const int64_t rows = blockH_, k0 = static_cast<int64_t>(kc) * c.baseK;
            const int64_t cols = std::min<int64_t>(c.baseK, K - k0);
            asc_emu::CubeStep& step = steps[static_cast<size_t>(kc)];
            // The copies into L1: NORM one ND -> NZ copy per base tile; MDL one per stepKa (stepKb) base tiles along K,
            // made at the first of them (copy_cube_in_mdl.h). L1 holds depthA1 (depthB1) base tiles.
            const int32_t sKa = kCfg.doMultiDataLoad ? c.stepKa : 1, sKb = kCfg.doMultiDataLoad ? c.stepKb : 1;
            if (kc % sKa == 0) {
                const int64_t kw = std::min<int64_t>(static_cast<int64_t>(sKa) * c.baseK, K - k0);
                if (Load(aCache_, std::max(1, c.depthA1 / sKa), {blk.m, kc / sKa}, rows * kw * sizeof(AT),
                         asc_emu::St().cube.aReadBytes)) {
                    const double hbm = Rows(a + k0, rows, kw * sizeof(AT), static_cast<uint64_t>(c.Ka) * sizeof(AT));
                    step.Add(static_cast<double>(rows), hbm, rows * kw * sizeof(AT) - hbm);
                }
            }
            if (kc % sKb == 0) {
                const int64_t kw = std::min<int64_t>(static_cast<int64_t>(sKb) * c.baseK, K - k0);
                if (Load(bCache_, std::max(1, c.depthB1 / sKb), {kc / sKb, blk.n}, kw * blockW_ * sizeof(BT),
                         asc_emu::St().cube.bReadBytes)) {
                    const double hbm = transB_ ? Rows(b + k0, blockW_, kw * sizeof(BT), static_cast<uint64_t>(c.Kb) * sizeof(BT))
                                               : Rows(b + k0 * c.N, kw, blockW_ * sizeof(BT), static_cast<uint64_t>(c.N) * sizeof(BT));
                    step.Add(static_cast<double>(transB_ ? blockW_ : kw), hbm, kw * blockW_ * sizeof(BT) - hbm);
                }
            }
            step.l0 = static_cast<double>(rows * cols * sizeof(AT) + cols * blockW_ * sizeof(BT));
            step.macs = static_cast<double>(up(blockH_, 16) * up(blockW_, 16) * up(cols, frac));
        }
        const uint64_t bSpan = transB_ ? ((blockW_ - 1) * static_cast<uint64_t>(c.Kb) + K)
                                       : ((K - 1) * static_cast<uint64_t>(c.N) + blockW_);
        const uint64_t aSpan = (blockH_ - 1) * static_cast<uint64_t>(c.Ka) + K;
        asc_emu::FindGm(a, aSpan * sizeof(AT), "Matmul A");
        asc_emu::FindGm(b, bSpan * sizeof(BT), "Matmul B");
        Reads(0, a, aSpan * sizeof(AT));
        Reads(1, b, bSpan * sizeof(BT));
        c_.assign(static_cast<size_t>(blockH_) * blockW_, 0.0f);
        for (int32_t i = 0; i < (asc_emu::Values() ? blockH_ : 0); ++i) {
            for (int32_t j = 0; j < blockW_; ++j) {
                // The bias is L0C's initial value at the first K step (scheduler_norm_base.h, v220 bias path).
                float acc = hasBias_ ? asc_emu::ToF32(bias_.GetPhyAddr()[blk.n * c.baseN + j]) : 0.0f;
                for (int32_t k0 = 0; k0 < K; k0 += frac) {
                    float part = 0.0f;  // one K fractal, summed in fp32
                    for (int32_t k = k0; k < std::min(K, k0 + frac); ++k) {
                        const float av = asc_emu::ToF32(a[static_cast<uint64_t>(i) * c.Ka + k]);
                        const float bv = asc_emu::ToF32(transB_ ? b[static_cast<uint64_t>(j) * c.Kb + k]
                                                                : b[static_cast<uint64_t>(k) * c.N + j]);
                        part += av * bv;
                    }
                    acc += part;
                }
                c_[static_cast<size_t>(i) * blockW_ + j] = acc;
            }
        }
        if (hasBias_) {  // the bias row of the block, into the bias table
            asc_emu::GmRead(bias_.GetPhyAddr() + blk.n * c.baseN, blockW_ * sizeof(BiasT), "Matmul bias");
            Reads(2, bias_.GetPhyAddr() + blk.n * c.baseN, blockW_ * sizeof(BiasT));
            asc_emu::St().cube.bReadBytes += blockW_ * sizeof(BiasT);
        }
        asc_emu::St().cube.macs += static_cast<uint64_t>(up(blockH_, 16) * up(blockW_, 16) * up(K, frac));
        asc_emu::St().cube.blocks += 1;
        // fp16/bf16: 16 x 16 x 16 MACs per cycle; float: a quarter of that (NPU架构版本2201.md: "Cube计算场景float
        // 算力为half算力的1/4"), not the half its 16 x 16 x 8 fractal suggests
        const double rate = asc_emu::St().tm.cubeMacs * (sizeof(AT) == 4 ? asc_emu::St().tm.cubeFp32 : frac / 16.0);
        // L1 holds depthA1 A and depthB1 B tiles: loads run that many steps ahead of the L0 loads.
        double cHbm = -1;
        if (dst != nullptr) {
            cHbm = 0;
            CT* out = dst->GetPhyAddr() + (sequential ? 0 : BlockOffset());
            const uint64_t stride = RowStride(sequential);
            for (int32_t i = 0; i < blockH_; ++i)
                cHbm += static_cast<double>(asc_emu::Classify(out + i * stride, blockW_ * sizeof(CT)));
        }
        // One L0C buffer and no unit flags: the first Mmad waits for the last block's fixpipe (MDL's default).
        const bool l0cWait = c.dbL0C != 2 && !kCfg.enUnitFlag;
        auto& cube = asc_emu::St().cubeCores[asc_emu::CubeCore()];
        const asc_emu::CubeTimes before = cube;
        const double done = asc_emu::CubeBlock(at, steps, rate, static_cast<double>(blockH_) * blockW_ * sizeof(CT),
                                               std::min(c.depthA1, c.depthB1), cHbm, l0cWait);
        // The report adds the cube core's MTE1, M and FIX time to the core's; its MTE2 is the AIC's own here.
        if (OnCube()) asc_emu::St().pipes.t.busy[asc_emu::PMTE2] += cube.busyMte2 - before.busyMte2;
        return done;
    }
    void TakeC(const char* what, uint8_t enAtomic, const asc_emu::Loc& loc) {
        if (enAtomic) asc_emu::Fail(std::string("Matmul::") + what + ": atomic accumulation is not emulated");
        if (!haveC_)
            asc_emu::Fail(std::string("Matmul::") + what + " at " + loc.Str() +
                          " with no C block: call Iterate first (each Iterate yields one block, fetched once)");
        haveC_ = false;
    }
    uint64_t BlockOffset() const {
        return static_cast<uint64_t>(blockM_) * tiling_.baseM * CPitch() + static_cast<uint64_t>(blockN_) * tiling_.baseN;
    }
    // `classified`: Compute has put the write through the L2 rule (IterateAll).
    void WriteBlockGm(const GlobalTensor<CT>& gm, bool sequential, const asc_emu::Loc& loc, bool classified = false) {
        CT* dst = gm.GetPhyAddr() + (sequential ? 0 : BlockOffset());
        const uint64_t stride = RowStride(sequential);
        for (int32_t i = 0; i < blockH_; ++i) {
            asc_emu::CubeOverwrite(dst + i * stride, blockW_ * sizeof(CT), "Matmul::GetTensorC", loc);
            asc_emu::GmWrite(dst + i * stride, blockW_ * sizeof(CT), "Matmul::GetTensorC");
            if (!classified) asc_emu::Classify(dst + i * stride, blockW_ * sizeof(CT));  // the fixpipe writes through L2
            for (int32_t j = 0; j < blockW_; ++j) dst[i * stride + j] = Out(c_[static_cast<size_t>(i) * blockW_ + j]);
        }
        asc_emu::St().cube.cBytes += static_cast<uint64_t>(blockH_) * blockW_ * sizeof(CT);
    }

    tiling::TCubeTiling tiling_{};
    asc_emu::Loc loc_;
    GlobalTensor<AT> a_;
    GlobalTensor<BT> b_;
    GlobalTensor<BiasT> bias_;
    bool registered_ = false, hasA_ = false, hasB_ = false, hasBias_ = false, transB_ = false;
    bool started_ = false, haveC_ = false, ended_ = false, localWs_ = false, done_ = false;
    bool roundOpen_ = false, roundBias_ = false, roundTail_ = false, biasDisabled_ = false, biasOptional_ = false;
    int32_t tailM_ = 0, tailN_ = 0, tailK_ = 0;
    int32_t cPitch_ = 0;  // SetOrgShape's orgKc: C's row pitch (0: N)
    uint64_t CPitch() const { return static_cast<uint64_t>(cPitch_ != 0 ? cPitch_ : tiling_.N); }
    // Elements from one row of a C block to the next in global memory: packed, or at C's pitch.
    uint64_t RowStride(bool sequential) const { return sequential ? blockW_ : CPitch(); }
    int32_t blockM_ = 0, blockN_ = 0, blockH_ = 0, blockW_ = 0;
    std::vector<Blk> order_;
    size_t next_ = 0;
    std::vector<float> c_;
    std::list<std::pair<int64_t, int64_t>> aCache_, bCache_;
    int32_t lastGroup_ = -1;
    // IterateAll<false> messages not yet waited for, oldest first: when the cube ends each, whether it notifies.
    struct Async {
        double done;
        bool notify;
        const uint8_t* base;
        size_t bytes;
        uint64_t id;  // its entries in the core's cubeReads
    };
    std::deque<Async> async_;
    // The bounds of what the IterateAll in progress reads of A, B and the bias.
    const uint8_t* readLo_[3] = {};
    const uint8_t* readHi_[3] = {};
    void Reads(int operand, const void* p, size_t bytes) {
        auto* lo = static_cast<const uint8_t*>(p);
        if (readLo_[operand] == nullptr || lo < readLo_[operand]) readLo_[operand] = lo;
        if (readHi_[operand] == nullptr || lo + bytes > readHi_[operand]) readHi_[operand] = lo + bytes;
    }
    static constexpr size_t kMaxNotify = 15;
    size_t Notifying() const {
        return static_cast<size_t>(std::count_if(async_.begin(), async_.end(), [](const Async& a) { return a.notify; }));
    }

public:
    bool quit_ = false;  // the scope of its REGIST_MATMUL_OBJ has ended
};

namespace emu_mm {
inline void Register(std::vector<bool*>&, TPipe* pipe, GM_ADDR ws, asc_emu::Loc loc) {
    (void)pipe;
    (void)ws;
    (void)loc;
}
template <class MM, class... Rest>
void Register(std::vector<bool*>& quit, TPipe* pipe, GM_ADDR ws, asc_emu::Loc loc, MM& mm,
              const tiling::TCubeTiling* t, Rest&&... rest) {
    if (pipe == nullptr) asc_emu::Fail("REGIST_MATMUL_OBJ at " + loc.Str() + " without a TPipe");
    if (pipe->EmuHasBuffers())
        asc_emu::Fail("REGIST_MATMUL_OBJ at " + loc.Str() + " after TPipe::InitBuffer: register the Matmul objects "
                      "before any other use of the pipe (REGIST_MATMUL_OBJ.md)");
    if (ws == nullptr) asc_emu::Fail("REGIST_MATMUL_OBJ at " + loc.Str() + " without the system workspace");
    mm.EmuInit(t, loc);
#if __NPU_ARCH__ == 2002
    pipe->EmuReserveShared(static_cast<uint32_t>(std::max(0, t->shareUbSize)));  // Matmul::Init on 310P
#endif
    quit.push_back(&mm.quit_);
    Register(quit, pipe, ws, loc, rest...);
}

// What REGIST_MATMUL_OBJ declares on a vector core: a KFC client that lives until the enclosing scope ends,
// whose destructor tells the cube core to stop serving (kfc_register_obj.h, kfc_comm_client.h).
struct Registration {
    std::vector<bool*> quit;
    template <class... Args>
    Registration(TPipe* pipe, GM_ADDR ws, asc_emu::Loc loc, Args&&... args) {
        Register(quit, pipe, ws, loc, args...);
    }
    ~Registration() {
        for (bool* q : quit) *q = true;
    }
};
}  // namespace emu_mm
}  // namespace AscendC

// Global, as in CANN (kernel_operator_common_impl.h).
__aicore__ inline GM_ADDR GetSysWorkSpacePtr() { return AscendC::emu_ws::Sys(); }

namespace matmul {
using AscendC::Matmul;
using AscendC::MatmulType;
}  // namespace matmul

#define ASC_EMU_CAT2(a, b) a##b
#define ASC_EMU_CAT(a, b) ASC_EMU_CAT2(a, b)
#define REGIST_MATMUL_OBJ(pipe, workspace, ...)                                               \
    AscendC::emu_mm::Registration ASC_EMU_CAT(ascEmuKfcClient, __LINE__)((pipe), (workspace), \
                                                                          asc_emu::Loc(__FILE__, __LINE__), __VA_ARGS__)
