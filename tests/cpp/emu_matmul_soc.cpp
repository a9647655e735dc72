// Rules of the Matmul API and the pipe that differ per SoC: argv[1] names a scenario; prints "OK" or
// "FAULT message". Compiled for 910B (-D__NPU_ARCH__=2201) and 310P (2002); each pair breaks a rule and obeys it.
// A is 32x32, B 32x64 (half), one core, base blocks 16x32x32.
#include <iostream>
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

using namespace AscendC;
using AT = MatmulType<TPosition::GM, CubeFormat::ND, half>;
using CT = MatmulType<TPosition::GM, CubeFormat::ND, half>;
using HalfBias = MatmulType<TPosition::GM, CubeFormat::ND, half>;
using FloatBias = MatmulType<TPosition::GM, CubeFormat::ND, float>;

static std::vector<half> a(32 * 32, half(0.5f)), b(32 * 64, half(0.25f)), hb(64, half(1.0f)), c(32 * 64);
static std::vector<float> fb(64, 1.0f);
static std::vector<half> slot(16 * 32);  // one C block, [16, 32]
static std::vector<uint8_t> sys(64);

static tiling::TCubeTiling Tiling(bool bias) {
    tiling::TCubeTiling t{};
    t.usedCoreNum = 1; t.M = 32; t.N = 64; t.Ka = 32; t.Kb = 32;
    t.singleCoreM = 32; t.singleCoreN = 64; t.singleCoreK = 32;
    t.baseM = 16; t.baseN = 32; t.baseK = 32; t.stepM = 1; t.stepN = 1; t.stepKa = 1; t.stepKb = 1;
    t.depthA1 = 1; t.depthB1 = 1; t.isBias = bias; t.iterateOrder = 0; t.dbL0A = 1; t.dbL0B = 1; t.dbL0C = 1;
    const asc_emu::MatmulTypes types{2, 2, 2, 4, false};
    t.transLength = static_cast<int32_t>(asc_emu::TransLength310P(t, types, false));
    t.shareUbSize = static_cast<int32_t>(asc_emu::ShareUb310P(t, types));
    return t;
}

template <class BiasType>
static void RunMatmul(const std::string& s) {
    TPipe pipe;
    GlobalTensor<half> aGm, bGm, cGm, slotGm, hbGm;
    GlobalTensor<float> fbGm;
    aGm.SetGlobalBuffer(a.data(), a.size());
    bGm.SetGlobalBuffer(b.data(), b.size());
    cGm.SetGlobalBuffer(c.data(), c.size());
    slotGm.SetGlobalBuffer(slot.data(), slot.size());
    hbGm.SetGlobalBuffer(hb.data(), hb.size());
    fbGm.SetGlobalBuffer(fb.data(), fb.size());
    Matmul<AT, AT, CT, BiasType> mm;
    const bool bias = s == "bias_half" || s == "bias_float";
    tiling::TCubeTiling t = Tiling(bias);
    if (s == "mdl_tiling_steps" || s == "norm_tiling_steps") {  // K in two steps, two row blocks per step
        t.baseK = 16; t.stepKa = 2; t.stepKb = 2; t.stepM = 2; t.depthA1 = 4; t.depthB1 = 2;
        // CANN's default (mmConfigType 1, MDL) sizes A's scratch for stepKa x stepM tiles; NORM for one.
        t.transLength = static_cast<int32_t>(asc_emu::TransLength310P(t, {2, 2, 2, 4, false}, s == "mdl_tiling_steps"));
    }
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t);
    uint32_t budget = asc_emu::St().soc.ubBytes;  // what GetCoreMemSize(UB) reports
#if __NPU_ARCH__ == 2002
    TBuf<TPosition::VECCALC> ws;
    pipe.InitBuffer(ws, static_cast<uint32_t>(asc_emu::LocalWorkspace310P(t)));
    mm.SetLocalWorkspace(ws.Get<uint8_t>());
    budget -= static_cast<uint32_t>(asc_emu::LocalWorkspace310P(t));
    if (s == "share_ub_counted") budget -= (static_cast<uint32_t>(t.shareUbSize) + 31u) / 32u * 32u;
#endif
    TBuf<TPosition::VECCALC> rest;  // the kernel's own buffers take the rest of UB
    if (s == "share_ub_ignored" || s == "share_ub_counted") pipe.InitBuffer(rest, budget);
    mm.SetTensorA(aGm);
    mm.SetTensorB(bGm);
    if constexpr (std::is_same_v<BiasType, FloatBias>) {
        if (s == "bias_float") mm.SetBias(fbGm);
    } else if (s == "bias_half") {
        mm.SetBias(hbGm);
    }
    if (s == "iterateall_seq_slot" || s == "iterate_getc_slot") {
        mm.SetTail(16, 32);  // one block into a [16, 32] slot
        if (s == "iterateall_seq_slot") {
            mm.IterateAll(slotGm, 0, true);  // 310P ignores enSequentialWrite: rows land 64 apart
        } else {
            while (mm.Iterate()) mm.GetTensorC(slotGm, 0, true);
        }
        return;
    }
    if (s == "getc_read_unordered" || s == "getc_read_ordered") {
        mm.SetTail(16, 32);
        while (mm.Iterate()) mm.GetTensorC(slotGm, 0, true);
        TQue<TPosition::VECIN, 1> inQ;
        pipe.InitBuffer(inQ, 1, 16 * 32 * sizeof(half));
        LocalTensor<half> x = inQ.AllocTensor<half>();
        if (s == "getc_read_ordered") {
            TEventID id = pipe.FetchEventID(HardEvent::MTE3_MTE2);
            SetFlag<HardEvent::MTE3_MTE2>(id);
            WaitFlag<HardEvent::MTE3_MTE2>(id);
        }
        DataCopy(x, slotGm, 16 * 32);  // on 310P this core's MTE3 wrote the slot
        inQ.EnQue(x);
        LocalTensor<half> back = inQ.DeQue<half>();
        inQ.FreeTensor(back);
        return;
    }
    mm.IterateAll(cGm);
    mm.End();
}

// Freed queue buffers hold a V_MTE2 event ID each until they are allocated again (kernel_tquebind_impl.h).
static void RunEvents(const std::string& s) {
    TPipe pipe;
    TQue<TPosition::VECIN, 1> q0, q1, q2, q3;
    const uint32_t n = s == "event_ids_exhausted" ? 2 : 1;
    pipe.InitBuffer(q0, 2, 256);
    pipe.InitBuffer(q1, 2, 256);
    pipe.InitBuffer(q2, 2, 256);
    pipe.InitBuffer(q3, n, 256);
    for (auto* q : {&q0, &q1, &q2, &q3}) {
        const uint32_t bufs = q == &q3 ? n : 2;
        std::vector<LocalTensor<half>> held;
        for (uint32_t i = 0; i < bufs; ++i) held.push_back(q->AllocTensor<half>());
        for (auto& t : held) q->FreeTensor(t);
    }
    const TEventID id = pipe.FetchEventID(HardEvent::V_MTE2);  // 8 held: there is no ID left
    SetFlag<HardEvent::V_MTE2>(id);
    WaitFlag<HardEvent::V_MTE2>(id);
}

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    const std::string s = argv[1];
    asc_emu::St().gm = {{"a", reinterpret_cast<uint8_t*>(a.data()), a.size() * 2, false, {}},
                        {"b", reinterpret_cast<uint8_t*>(b.data()), b.size() * 2, false, {}},
                        {"half bias", reinterpret_cast<uint8_t*>(hb.data()), hb.size() * 2, false, {}},
                        {"float bias", reinterpret_cast<uint8_t*>(fb.data()), fb.size() * 4, false, {}},
                        {"c", reinterpret_cast<uint8_t*>(c.data()), c.size() * 2, true, std::vector<int32_t>(c.size() * 2, -1)},
                        {"slot", reinterpret_cast<uint8_t*>(slot.data()), slot.size() * 2, true,
                         std::vector<int32_t>(slot.size() * 2, -1)}};
    AscendC::emu_ws::Sys() = sys.data();
    try {
        if (s.rfind("event_ids", 0) == 0) {
            RunEvents(s);
        } else if (s == "bias_float") {
            RunMatmul<FloatBias>(s);
        } else {
            RunMatmul<HalfBias>(s);
        }
        asc_emu::EndBlock();
        std::cout << "OK\n";
    } catch (const asc_emu::Fault& f) {
        std::cout << "FAULT " << f.what() << "\n";
    }
    return 0;
}
