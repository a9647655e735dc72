// The basic cube API's rules: argv[1] names a scenario. A small C = A x B^T (M 40, K 64, N 32, half in, half out)
// as the basic-API matmul sample writes it: GM -> L1 with ND2NZ on MTE2, L1 -> L0A by img2col and L1 -> L0B fractal
// by fractal on MTE1, Mmad on M in two K steps, Fixpipe L0C -> GM on FIX. Each scenario drops or breaks one
// ordering (the emulator must print FAULT ...) or obeys it (OK, after checking C). Built for 2201 and 2002.
#include <cmath>
#include <iostream>
#include <vector>

#include "kernel_operator.h"

using namespace AscendC;

constexpr uint32_t M = 40, K = 64, N = 32, MA = 48, KS = 32;  // MA: M rounded up to 16; KS: K per step

static std::vector<half> gA(M * K), gB(N * K), gC(2 * M * N);

static bool Has(const std::string& s, const char* w) { return s.find(w) != std::string::npos; }

static void Run(const std::string& s) {
    if (s != "cube_on_aiv") asc_emu::St().coreKind = 1;  // a cube core runs it (on 310P the AI Core has both units)
    for (uint32_t i = 0; i < M * K; ++i) gA[i] = static_cast<half>(static_cast<float>((i * 7) % 13) / 8.0f - 0.75f);
    for (uint32_t i = 0; i < N * K; ++i) gB[i] = static_cast<half>(static_cast<float>((i * 5) % 11) / 8.0f - 0.6f);
    asc_emu::St().gm.push_back({"a", reinterpret_cast<uint8_t*>(gA.data()), gA.size() * 2, false, {}});
    asc_emu::St().gm.push_back({"b", reinterpret_cast<uint8_t*>(gB.data()), gB.size() * 2, false, {}});
    asc_emu::St().gm.push_back({"c", reinterpret_cast<uint8_t*>(gC.data()), gC.size() * 2, true,
                                std::vector<int32_t>(gC.size() * 2, -1)});
    GlobalTensor<half> aGm, bGm, cGm;
    aGm.SetGlobalBuffer(gA.data(), gA.size());
    bGm.SetGlobalBuffer(gB.data(), gB.size());
    cGm.SetGlobalBuffer(gC.data(), gC.size());
    if (s == "l0a_past") {  // an A2 tensor must fit the 64 KB of L0A
        LocalTensor<half> t(TPosition::A2, 65536 - 512, 512);
        return;
    }
    if (s == "l0c_fits") {
        LocalTensor<float> t(TPosition::CO1, asc_emu::St().soc.l0cBytes - 2048, 512);
        return;
    }
    LocalTensor<half> a1(TPosition::A1, 0, MA * K), b1(TPosition::B1, MA * K * 2, N * K);
    LocalTensor<half> a2(TPosition::A2, 0, MA * KS), b2(TPosition::B2, 0, KS * N);
    LocalTensor<float> c(TPosition::CO1, 0, MA * N);
    DataCopy(a1, aGm, Nd2NzParams(1, M, K, 0, K, MA, 1, 0));
    DataCopy(b1, bGm, Nd2NzParams(1, N, K, 0, K, N, 1, 0));
    if (!Has(s, "no_mte2_mte1")) {
        SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
        WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
    }
    const bool unit = !Has(s, "no_unitflag") && !Has(s, "unitflag_fixpipe_only");
    const uint32_t blocks = Has(s, "two_blocks") ? 2 : 1;
    for (uint32_t blk = 0; blk < blocks; ++blk) {
        if (blk > 0 && Has(s, "fix_m_flag")) {  // the next block's Mmads overwrite what the Fixpipe reads
            SetFlag<HardEvent::FIX_M>(EVENT_ID0);
            WaitFlag<HardEvent::FIX_M>(EVENT_ID0);
        }
        for (uint32_t ks = 0; ks < K / KS; ++ks) {
            if ((blk > 0 || ks > 0) && !Has(s, "no_m_mte1")) WaitFlag<HardEvent::M_MTE1>(EVENT_ID0);
            LoadData3DParamsV2<half> la;
            la.l1H = 1, la.l1W = MA, la.channelSize = KS, la.kExtension = KS, la.mExtension = MA;
            LoadData(a2, a1[ks * KS * MA], la);
            LoadData2DParams lb;
            lb.repeatTimes = N / 16, lb.srcStride = 1;
            for (uint32_t i = 0; i < KS / 16; ++i) LoadData(b2[i * N * 16], b1[ks * KS * N + i * N * 16], lb);
            if (!Has(s, "no_mte1_m")) {
                SetFlag<HardEvent::MTE1_M>(EVENT_ID0);
                WaitFlag<HardEvent::MTE1_M>(EVENT_ID0);
            }
            MmadParams mp;
            mp.m = M, mp.n = N, mp.k = KS, mp.cmatrixInitVal = ks == 0;
            mp.unitFlag = unit ? (ks + 1 == K / KS ? 3 : 2) : 0;
            Mmad(Has(s, "mmad_unaligned") ? c[16] : c, a2, b2, mp);
            SetFlag<HardEvent::M_MTE1>(EVENT_ID0);
        }
        if (Has(s, "m_fix_flag")) {
            SetFlag<HardEvent::M_FIX>(EVENT_ID0);
            WaitFlag<HardEvent::M_FIX>(EVENT_ID0);
        }
        if (!asc_emu::St().soc.hasDataCopyPad && !Has(s, "fixpipe")) {  // 310P: no fixpipe to GM; check L0C itself
            const float* cv = c.GetPhyAddr();
            for (uint32_t i = 0; i < M * N; ++i)
                gC[blk * M * N + i] = static_cast<half>(cv[(i % N / 16) * MA * 16 + i / N * 16 + i % 16]);
            continue;
        }
        FixpipeParamsV220 fp;
        fp.nSize = N, fp.mSize = M, fp.srcStride = MA, fp.dstStride = N;
        fp.quantPre = Has(s, "quant_mismatch") ? QuantMode_t::F322BF16 : QuantMode_t::F322F16;
        fp.unitFlag = unit || Has(s, "unitflag_fixpipe_only") ? 3 : 0;
        if (Has(s, "split_m")) {  // two Fixpipes, rows 0-15 and 16-39: each clears the unit flags of its own rows
            fp.mSize = 16;
            Fixpipe(cGm[blk * M * N], c, fp);
            fp.mSize = M - 16;
            Fixpipe(cGm[blk * M * N + 16 * N], c[16 * 16], fp);
        } else {
            Fixpipe(cGm[blk * M * N], c, fp);
        }
    }
    WaitFlag<HardEvent::M_MTE1>(EVENT_ID0);
    PipeBarrier<PIPE_ALL>();
    double worst = 0;  // C against a double reference, relative to |A||B| (fp16 out: 2^-10)
    for (uint32_t blk = 0; blk < blocks; ++blk)
        for (uint32_t m = 0; m < M; ++m)
            for (uint32_t n = 0; n < N; ++n) {
                double ref = 0, mag = 0;
                for (uint32_t k = 0; k < K; ++k) {
                    const double x = static_cast<float>(gA[m * K + k]), y = static_cast<float>(gB[n * K + k]);
                    ref += x * y, mag += std::fabs(x * y);
                }
                worst = std::max(worst, std::fabs(static_cast<float>(gC[blk * M * N + m * N + n]) - ref) / (mag + 1e-3));
            }
    if (worst > 1.0 / 1024) asc_emu::Fail("C differs from the reference by " + std::to_string(worst));
}

#include "scenario_main.h"
