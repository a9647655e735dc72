// A __mix__(1, 2) launch and its cross-core flags: argv[1] names a scenario. On each of two AI Cores the AIC computes
// C = A x B^T (32 x 32 x 32, half in, float out) into GM and sets flag 8 (mode 2) once its Fixpipe is done; each AIV
// waits for it, reads its 16 rows of C, doubles them and writes them to Y. The obeying scenario checks Y; the others
// break one rule (the emulator must print FAULT ...). Built for 2201.
#include <cmath>
#include <iostream>
#include <vector>

#include "acl/acl.h"

using namespace AscendC;

constexpr uint32_t S = 32;  // M = K = N
constexpr uint32_t CORES = 2;

static std::vector<half> gA(CORES * S * S), gB(CORES * S * S);
static std::vector<float> gC(CORES * S * S), gY(CORES * S * S);
static std::string gScenario;

static bool Has(const char* w) { return gScenario.find(w) != std::string::npos; }

__global__ __mix__(1, 2) void mix_kernel(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR y) {
    const int64_t core = ASCEND_IS_AIC ? GetBlockIdx() : GetBlockIdx() / 2;
    GlobalTensor<half> aGm, bGm;
    GlobalTensor<float> cGm, yGm;
    aGm.SetGlobalBuffer(reinterpret_cast<half*>(a) + core * S * S);
    bGm.SetGlobalBuffer(reinterpret_cast<half*>(b) + core * S * S);
    cGm.SetGlobalBuffer(reinterpret_cast<float*>(c) + core * S * S);
    yGm.SetGlobalBuffer(reinterpret_cast<float*>(y) + core * S * S);
    if ASCEND_IS_AIC {
        LocalTensor<half> a1(TPosition::A1, 0, S * S), b1(TPosition::B1, S * S * 2, S * S);
        LocalTensor<half> a2(TPosition::A2, 0, S * S), b2(TPosition::B2, 0, S * S);
        LocalTensor<float> co1(TPosition::CO1, 0, S * S);
        DataCopy(a1, aGm, Nd2NzParams(1, S, S, 0, S, S, 1, 0));
        DataCopy(b1, bGm, Nd2NzParams(1, S, S, 0, S, S, 1, 0));
        SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
        WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
        LoadData3DParamsV2<half> la;
        la.l1H = 1, la.l1W = S, la.channelSize = S, la.kExtension = S, la.mExtension = S;
        LoadData(a2, a1, la);
        LoadData2DParams lb;
        lb.repeatTimes = S / 16, lb.srcStride = 1;
        for (uint32_t i = 0; i < S / 16; ++i) LoadData(b2[i * S * 16], b1[i * S * 16], lb);
        SetFlag<HardEvent::MTE1_M>(EVENT_ID0);
        WaitFlag<HardEvent::MTE1_M>(EVENT_ID0);
        MmadParams mp;
        mp.m = S, mp.n = S, mp.k = S, mp.unitFlag = 3;
        Mmad(co1, a2, b2, mp);
        if (Has("flag_before_write")) CrossCoreSetFlag<2, PIPE_FIX>(8);  // before the Fixpipe: covers nothing
        FixpipeParamsV220 fp;
        fp.nSize = S, fp.mSize = S, fp.srcStride = S, fp.dstStride = S, fp.unitFlag = 3;
        Fixpipe(cGm, co1, fp);
        if (Has("mode0")) CrossCoreSetFlag<0, PIPE_FIX>(8);
        if (Has("pipe_s")) CrossCoreSetFlag<2, PIPE_S>(8);
        if (!Has("no_set") && !Has("flag_before_write")) CrossCoreSetFlag<2, PIPE_FIX>(8);
        if (Has("vector_on_aic")) {
            LocalTensor<float> u(TPosition::VECCALC, 0, 64);
            Muls(u, u, 2.0f, 64);
        }
    }
    if ASCEND_IS_AIV {
        if (!Has("no_wait")) CrossCoreWaitFlag(Has("wrong_id") ? 9 : 8);
        const uint32_t rows = S / 2, first = static_cast<uint32_t>(GetSubBlockIdx()) * rows;
        LocalTensor<float> x(TPosition::VECCALC, 0, rows * S);
        DataCopyExtParams in{static_cast<uint16_t>(rows), S * 4, 0, 0, 0};
        DataCopyPad(x, cGm[first * S], in, DataCopyPadExtParams<float>{false, 0, 0, 0.0f});
        SetFlag<HardEvent::MTE2_V>(EVENT_ID0);
        WaitFlag<HardEvent::MTE2_V>(EVENT_ID0);
        Muls(x, x, 2.0f, rows * S);
        SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
        WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
        DataCopyPad(yGm[first * S], x, DataCopyExtParams{static_cast<uint16_t>(rows), S * 4, 0, 0, 0});
    }
}

__global__ __vector__ void vector_kernel(GM_ADDR) { CrossCoreWaitFlag(8); }

int main(int argc, char** argv) {
    gScenario = argv[1];
    for (size_t i = 0; i < gA.size(); ++i) gA[i] = static_cast<half>(static_cast<float>((i * 7) % 13) / 8.0f - 0.75f);
    for (size_t i = 0; i < gB.size(); ++i) gB[i] = static_cast<half>(static_cast<float>((i * 5) % 11) / 8.0f - 0.6f);
    auto& gm = asc_emu::St().gm;
    gm.push_back({"a", reinterpret_cast<uint8_t*>(gA.data()), gA.size() * 2, false, {}});
    gm.push_back({"b", reinterpret_cast<uint8_t*>(gB.data()), gB.size() * 2, false, {}});
    // C and Y keep a writer per byte: the cross-core rules watch them
    gm.push_back({"c", reinterpret_cast<uint8_t*>(gC.data()), gC.size() * 4, true, std::vector<int32_t>(gC.size() * 4, -1)});
    gm.push_back({"y", reinterpret_cast<uint8_t*>(gY.data()), gY.size() * 4, true, std::vector<int32_t>(gY.size() * 4, -1)});
    auto* a = reinterpret_cast<uint8_t*>(gA.data());
    auto* b = reinterpret_cast<uint8_t*>(gB.data());
    auto* c = reinterpret_cast<uint8_t*>(gC.data());
    auto* y = reinterpret_cast<uint8_t*>(gY.data());
    if (gScenario == "aiv_only")
        asc_emu::Launch(asc_emu::KernelKind::Vector, vector_kernel, 1, 0, nullptr)(y);
    else
        asc_emu::Launch(asc_emu::KernelKind::Mix, mix_kernel, CORES, 0, nullptr)(a, b, c, y);
    if (!asc_emu::Host().fault.empty()) {
        std::cout << "FAULT " << asc_emu::Host().fault << std::endl;
        return 0;
    }
    double worst = 0;
    for (uint32_t k = 0; k < CORES; ++k)
        for (uint32_t m = 0; m < S; ++m)
            for (uint32_t n = 0; n < S; ++n) {
                double ref = 0;
                for (uint32_t i = 0; i < S; ++i)
                    ref += static_cast<double>(static_cast<float>(gA[k * S * S + m * S + i])) *
                           static_cast<float>(gB[k * S * S + n * S + i]);
                worst = std::max(worst, std::fabs(gY[k * S * S + m * S + n] - 2 * ref));
            }
    if (worst > 1e-4) {
        std::cout << "WRONG by " << worst << std::endl;
        return 0;
    }
    std::cout << "OK " << asc_emu::TimingJson() << std::endl;
    return 0;
}
