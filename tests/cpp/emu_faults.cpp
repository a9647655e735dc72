// Emulator checks that must fire: argv[1] names the scenario; the program prints the fault message.
#include <iostream>
#include <vector>

#include "kernel_operator.h"
#include "scenario_main.h"  // main: argv[1] names the scenario

using namespace AscendC;

static std::vector<float> gIn(64), gOut(64);

static void SetupGm() {
    asc_emu::St().gm.push_back({"in", reinterpret_cast<uint8_t*>(gIn.data()), 256, false, {}});
    asc_emu::St().gm.push_back({"out", reinterpret_cast<uint8_t*>(gOut.data()), 256, true,
                                std::vector<int32_t>(256, -1)});
}

static void Run(const std::string& s) {
    SetupGm();
    TPipe pipe;
    GlobalTensor<float> gi, go;
    gi.SetGlobalBuffer(gIn.data(), 64);
    go.SetGlobalBuffer(gOut.data(), 64);
    if (s == "ub_overflow") {
        TBuf<TPosition::VECCALC> a, b;
        pipe.InitBuffer(a, 150000);
        pipe.InitBuffer(b, 50000);
    } else if (s == "ub_fits") {
        TBuf<TPosition::VECCALC> a;
        pipe.InitBuffer(a, asc_emu::St().soc.ubBytes);
    } else if (s == "unaligned") {
        TBuf<TPosition::VECCALC> a;
        pipe.InitBuffer(a, 1024);
        LocalTensor<float> t = a.Get<float>();
        Add(t[3], t[64], t[128], 8);
    } else if (s == "gm_read_oob") {
        TBuf<TPosition::VECCALC> a;
        pipe.InitBuffer(a, 1024);
        DataCopy(a.Get<float>(), gi[56], 16);
    } else if (s == "gm_write_oob") {
        TBuf<TPosition::VECCALC> a;
        pipe.InitBuffer(a, 1024);
        DataCopy(go[60], a.Get<float>(), 8);
    } else if (s == "write_input") {
        TBuf<TPosition::VECCALC> a;
        pipe.InitBuffer(a, 1024);
        DataCopy(gi, a.Get<float>(), 8);
    } else if (s == "two_blocks") {
        TBuf<TPosition::VECCALC> a;
        pipe.InitBuffer(a, 1024);
        asc_emu::St().blockIdx = 0;
        DataCopy(go, a.Get<float>(), 16);
        asc_emu::St().blockIdx = 1;
        DataCopy(go[8], a.Get<float>(), 16);
    } else if (s == "deque_empty") {
        TQue<QuePosition::VECIN, 2> q;
        pipe.InitBuffer(q, 2, 256);
        q.DeQue<float>();
    } else if (s == "double_free") {
        TQue<QuePosition::VECIN, 2> q;
        pipe.InitBuffer(q, 2, 256);
        LocalTensor<float> t = q.AllocTensor<float>();
        q.EnQue(t);
        t = q.DeQue<float>();
        q.FreeTensor(t);
        q.FreeTensor(t);
    } else if (s == "depth") {
        TQue<QuePosition::VECIN, 1> q;
        pipe.InitBuffer(q, 2, 256);
        q.EnQue(q.AllocTensor<float>());
        q.EnQue(q.AllocTensor<float>());
    } else if (s == "alloc_exhausted") {
        TQue<QuePosition::VECIN, 2> q;
        pipe.InitBuffer(q, 2, 256);
        q.AllocTensor<float>();
        q.AllocTensor<float>();
        q.AllocTensor<float>();
    } else if (s == "partial_overlap") {
        TBuf<TPosition::VECCALC> a;
        pipe.InitBuffer(a, 1024);
        LocalTensor<float> t = a.Get<float>();
        Exp(t[8], t, 64);
    } else if (s == "pad_on_310p") {
        asc_emu::St().soc.hasDataCopyPad = false;
        asc_emu::St().soc.name = "Ascend310P";
        TBuf<TPosition::VECCALC> a;
        pipe.InitBuffer(a, 1024);
        DataCopyPad(a.Get<float>(), gi, DataCopyExtParams{1, 12, 0, 0, 0}, DataCopyPadExtParams<float>{});
    } else if (s == "bf16_cast_none") {
        TBuf<TPosition::VECCALC> a, b;
        pipe.InitBuffer(a, 1024);
        pipe.InitBuffer(b, 1024);
        Cast(b.Get<bfloat16_t>(), a.Get<float>(), RoundMode::CAST_NONE, 8);
    } else if (s == "int_cast_none") {  // dav_c220 and dav_m200 refuse CAST_NONE for float -> int32
        TBuf<TPosition::VECCALC> a;
        pipe.InitBuffer(a, 1024);
        LocalTensor<float> f = a.Get<float>();
        Cast(f[64].ReinterpretCast<int32_t>(), f, RoundMode::CAST_NONE, 8);
    } else if (s == "int_to_float_rounding_on_310p") {  // dav_m200's vconv_s322f32 takes CAST_NONE only
        asc_emu::St().soc.hasBf16 = false;
        TBuf<TPosition::VECCALC> a;
        pipe.InitBuffer(a, 1024);
        LocalTensor<float> f = a.Get<float>();
        Cast(f, f[64].ReinterpretCast<int32_t>(), RoundMode::CAST_FLOOR, 8);
    } else if (s == "count_too_big") {
        TBuf<TPosition::VECCALC> a;
        pipe.InitBuffer(a, 64);
        LocalTensor<float> t = a.Get<float>();
        Relu(t, t, 32);
    }
}
