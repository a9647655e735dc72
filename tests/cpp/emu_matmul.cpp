// The emulated Matmul API: argv[1] names a scenario; prints "OK v0 v1 ..." or "FAULT message".
// A is 20x24, B 24x40 (half), bias 0.5 (float), C float; one core.
#include <iostream>
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "lib/matmul_intf.h"  // (built once as the vector core's client, once with ASCENDC_CUBE_ONLY)

using namespace AscendC;
using AT = MatmulType<TPosition::GM, CubeFormat::ND, half>;
using CT = MatmulType<TPosition::GM, CubeFormat::ND, float>;
using BiasT = MatmulType<TPosition::GM, CubeFormat::ND, float>;

static std::vector<half> a(20 * 24), b(24 * 40);
static std::vector<float> bias(40, 0.5f), c(20 * 40, -1.0f), ws(2048, 0.0f);
static std::vector<uint8_t> sys(64);
static std::vector<half> stage(20 * 24);  // an A operand the vector core writes (attention's P)

static tiling::TCubeTiling Tiling() {
    tiling::TCubeTiling t{};
    t.usedCoreNum = 1; t.M = 20; t.N = 40; t.Ka = 24; t.Kb = 24;
    t.singleCoreM = 20; t.singleCoreN = 40; t.singleCoreK = 24;
    t.baseM = 16; t.baseN = 32; t.baseK = 16; t.stepM = 1; t.stepN = 1; t.stepKa = 2; t.stepKb = 2;
    t.depthA1 = 2; t.depthB1 = 2; t.isBias = 1; t.iterateOrder = 0; t.dbL0A = 2; t.dbL0B = 2; t.dbL0C = 1;
    return t;
}

// The vector core copies A into the stage through UB (l, returned), as attention writes P for the cube.
static LocalTensor<half> StageA(TBuf<TPosition::VECCALC>& buf, const GlobalTensor<half>& aGm,
                                GlobalTensor<half>& stageGm) {
    stageGm.SetGlobalBuffer(stage.data(), stage.size());
    LocalTensor<half> l = buf.Get<half>();
    DataCopy(l, aGm, 480);
    SetFlag<HardEvent::MTE2_MTE3>(0);
    WaitFlag<HardEvent::MTE2_MTE3>(0);
    DataCopy(stageGm, l, 480);
    return l;
}

// REGIST_MATMUL_OBJ in a helper: its KFC client dies when the helper returns.
template <class MM>
static void RegisterIn(TPipe& pipe, MM& mm, tiling::TCubeTiling* t) {
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, t);
}

static void Run(const std::string& s) {
    if (s == "aic") asc_emu::St().coreKind = 1;  // the kernel runs on a cube core (AIC): "ok" there
    TPipe pipe;
    GlobalTensor<half> aGm, bGm;
    GlobalTensor<float> biasGm, cGm, wsGm;
    aGm.SetGlobalBuffer(a.data(), a.size());
    bGm.SetGlobalBuffer(b.data(), b.size());
    biasGm.SetGlobalBuffer(bias.data(), bias.size());
    cGm.SetGlobalBuffer(c.data(), c.size());
    wsGm.SetGlobalBuffer(ws.data(), ws.size());
    Matmul<AT, AT, CT, BiasT> mm, mm2;
    tiling::TCubeTiling t = Tiling();
    if (s == "l0_overflow") { t.baseM = 128; t.baseK = 256; t.depthA1 = 2; }
    TBuf<TPosition::VECCALC> buf;
    if (s == "regist_out_of_scope") {
        Matmul<AT, AT, CT, BiasT> lone;
        RegisterIn(pipe, lone, &t);
        lone.SetTensorA(aGm);
        return;
    }
    if (s == "regist_after_initbuffer") pipe.InitBuffer(buf, 1024);
    tiling::TCubeTiling big = t;
    big.baseM = 128; big.baseN = 128; big.baseK = 64; big.depthA1 = 16; big.depthB1 = 16; big.stepKa = 8; big.stepKb = 8;
    // half of L1 each (A and B 128 KiB, the bias 512 B): two fit, as every object starts at one shared address
    tiling::TCubeTiling mid = big;
    mid.depthA1 = 8; mid.depthB1 = 8;
    // (REGIST_MATMUL_OBJ declares the KFC client: it must stay in this scope)
    const bool two = s == "l1_two_objects" || s == "l1_shared" || s == "interleave" || s == "interleave_ended";
    tiling::TCubeTiling& t2 = s == "l1_two_objects" ? big : s == "l1_shared" ? mid : t;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, two ? &t2 : &t, mm2, &t2);
    if (s != "regist_after_initbuffer") pipe.InitBuffer(buf, 4096);
    if (s.rfind("org_", 0) != 0) {  // (the SetOrgShape scenarios open their own rounds)
        mm.SetTensorA(aGm);
        mm.SetTensorB(bGm);
        mm.SetBias(biasGm);
    }
    if (s == "ok" || s == "aic") {
        mm.IterateAll(cGm);
        mm.End();
    } else if (s == "wait_without_signal") {
        mm.IterateAll<false>(cGm);  // waitIterateAll = false: the cube core never signals
        mm.WaitIterateAll();
    } else if (s == "bias_not_resent") {
        while (mm.Iterate()) mm.GetTensorC(wsGm, 0, true);
        mm.SetTensorA(aGm);  // a second round without SetBias: 910B drops the bias
        mm.Iterate();
    } else if (s == "interleave" || s == "interleave_ended") {
        mm2.SetTensorA(aGm);
        mm2.SetTensorB(bGm);
        mm2.SetBias(biasGm);
        mm.Iterate();
        mm.GetTensorC(wsGm, 0, true);
        if (s == "interleave_ended") mm.End();
        mm2.Iterate();  // the other object's iteration, sharing L1/L0 addresses
        mm2.GetTensorC(wsGm, 0, true);
    } else if (s == "getc_before_iterate") {
        mm.GetTensorC(cGm, 0, true);
    } else if (s == "iterate_twice") {
        mm.Iterate();
        mm.Iterate();
    } else if (s == "missing_wait" || s == "waited") {
        mm.IterateAll<false>(cGm, 0, false, true);  // the cube signals the end (WaitIterateAll.md)
        if (s == "waited") mm.WaitIterateAll();
        LocalTensor<float> l = buf.Get<float>();
        DataCopy(l, cGm, 64);  // the vector core reads C
        if (s == "waited") mm.End();
    } else if (s == "ring" || s == "ring_unreleased" || s == "ring_read_early") {
        // A two-stage ring of one-block rounds: the next block is issued before the current one is waited for
        // and read; a stage is reused only once the vector core's reads of it are done (MTE2 -> S).
        LocalTensor<float> l = buf.Get<float>();
        auto issue = [&](int blk) {
            mm.SetTensorA(aGm[(blk % 2) * 16 * 24]);
            mm.SetTensorB(bGm);
            mm.SetBias(biasGm);
            mm.SetTail(blk % 2 ? 4 : 16, 32);
            mm.IterateAll<false>(wsGm[(blk % 2) * 512], 0, true, true);
        };
        issue(0);
        for (int blk = 0; blk < 4; ++blk) {
            if (blk + 1 < 4) {
                if (s != "ring_unreleased") {
                    SetFlag<HardEvent::MTE2_S>(0);
                    WaitFlag<HardEvent::MTE2_S>(0);
                }
                issue(blk + 1);
            }
            if (s != "ring_read_early") mm.WaitIterateAll();
            DataCopy(l[blk * 256], wsGm[(blk % 2) * 512], 256);  // (the first half of the stage)
        }
        mm.End();
    } else if (s == "stage") {
        // The vector core writes A into a stage of global memory, then has the cube read it: the client's
        // message waits for the MTE3 write itself (PostMessage: PipeBarrier<PIPE_MTE3>), no flag needed.
        GlobalTensor<half> stageGm;
        StageA(buf, aGm, stageGm);
        mm.SetTensorA(stageGm);
        mm.SetTensorB(bGm);
        mm.SetBias(biasGm);
        mm.IterateAll(cGm);
        mm.End();
    } else if (s == "org_short" || s == "org_wide") {
        // C's rows orgKc apart (SetOrgShape): 32 < the region's 40 columns would overlap rows; 48 leaves gaps
        mm.SetOrgShape(20, 40, 24, 24, s == "org_short" ? 32 : 48);
        mm.SetTensorA(aGm);
        mm.SetTensorB(bGm);
        mm.SetBias(biasGm);
        mm.IterateAll(wsGm);
        mm.End();
    } else if (s == "org_mid_round") {
        // 910B: SetOrgShape's own message clears the round's SetTensorA/B and SetBias
        mm.SetTensorA(aGm);
        mm.SetTensorB(bGm);
        mm.SetBias(biasGm);
        mm.SetOrgShape(20, 40, 24, 24, 48);
        mm.IterateAll(wsGm);
    } else if (s == "org_pitch_16bit") {
        // B's rows 70000 elements apart: the ND -> NZ copy's 16-bit srcDValue would wrap
        mm.SetOrgShape(20, 70000, 24, 24, 48);
        mm.SetTensorA(aGm);
        mm.SetTensorB(bGm);
        mm.SetBias(biasGm);
        mm.IterateAll(wsGm);
    } else if (s == "trans_b_undeclared") {
        // B handed over as transposed to an object whose B MatmulType does not declare ISTRANS (attention's K)
        mm.SetTensorA(aGm);
        mm.SetTensorB(bGm, true);
    } else if (s == "notify_overflow") {
        for (int i = 0; i < 16; ++i) {
            mm.SetTensorA(aGm);
            mm.SetTensorB(bGm);
            mm.SetBias(biasGm);
            mm.SetTail(16, 32);
            mm.IterateAll<false>(wsGm[(i % 2) * 512], 0, true, true);
        }
    } else if (s == "async_input_written" || s == "async_input_after_wait") {
        // The vector core writes A into a stage, has the cube read it asynchronously, then writes the stage again:
        // before WaitIterateAll the cube may not have taken the product yet.
        GlobalTensor<half> stageGm;
        LocalTensor<half> l = StageA(buf, aGm, stageGm);
        mm.SetTensorA(stageGm);
        mm.SetTensorB(bGm);
        mm.SetBias(biasGm);
        mm.IterateAll<false>(cGm, 0, false, true);
        if (s == "async_input_after_wait") mm.WaitIterateAll();
        PipeBarrier<PIPE_MTE3>();
        DataCopy(stageGm[240], l, 240);  // the next stage's operand, over the second half of this one
        if (s == "async_input_written") mm.WaitIterateAll();
        mm.End();
    } else if (s == "launch_syncall_outstanding" || s == "launch_syncall_waited") {
        // (run as a launch of one block) SyncAll<true> orders the vector cores, not the cube core's product
        mm.IterateAll<false>(cGm, 0, false, true);
        if (s == "launch_syncall_waited") mm.WaitIterateAll();
        SyncAll();
        if (s == "launch_syncall_outstanding") mm.WaitIterateAll();
        mm.End();
    } else if (s == "slot_race" || s == "slot_flagged") {
        LocalTensor<float> l = buf.Get<float>();
        for (uint32_t i = 0; mm.Iterate(); ++i) {
            mm.GetTensorC(wsGm, 0, true);
            DataCopy(l[i * 64], wsGm, 64);
            if (s == "slot_flagged") {
                SetFlag<HardEvent::MTE2_S>(0);
                WaitFlag<HardEvent::MTE2_S>(0);
            }
        }
        mm.End();
    }
}

int main(int argc, char** argv) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<half>(static_cast<float>(static_cast<int>(i % 7) - 3));
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<half>(static_cast<float>(static_cast<int>(i % 5) - 2));
    auto& st = asc_emu::St();
    emu_ws::Sys() = sys.data();
    st.gm.push_back({"a", reinterpret_cast<uint8_t*>(a.data()), a.size() * 2, false, {}});
    st.gm.push_back({"b", reinterpret_cast<uint8_t*>(b.data()), b.size() * 2, false, {}});
    st.gm.push_back({"bias", reinterpret_cast<uint8_t*>(bias.data()), bias.size() * 4, false, {}});
    st.gm.push_back({"c", reinterpret_cast<uint8_t*>(c.data()), c.size() * 4, true, std::vector<int32_t>(c.size() * 4, -1)});
    st.gm.push_back({"workspace", reinterpret_cast<uint8_t*>(ws.data()), ws.size() * 4, true,
                     std::vector<int32_t>(ws.size() * 4, -1)});
    st.gm.back().cubeShared = true;
    st.gm.push_back({"stage", reinterpret_cast<uint8_t*>(stage.data()), stage.size() * 2, true,
                     std::vector<int32_t>(stage.size() * 2, -1)});
    const std::string scenario = argc > 1 ? argv[1] : "ok";
    if (scenario.rfind("launch_", 0) == 0) {  // inside a launch of one block (SyncAll needs one)
        st.blockNum = 1;
        std::string fault;
        if (asc_emu::RunFibers({0}, [&] { Run(scenario); }, fault) >= 0) {
            std::cout << "FAULT " << fault << std::endl;
            return 0;
        }
    } else {
        try {
            Run(scenario);
        } catch (const asc_emu::Fault& e) {
            std::cout << "FAULT " << e.what() << std::endl;
            return 0;
        }
    }
    std::cout << "OK";
    if (scenario == "ok" || scenario == "aic")
        for (float v : c) std::cout << " " << v;
    std::cout << std::endl;
    return 0;
}
