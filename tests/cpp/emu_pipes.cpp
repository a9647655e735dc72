// Pipe, reserved-memory, queue-budget and data-cache rules: argv[1] names a scenario; each rule has one
// that breaks it (the emulator must print FAULT ...) and one that obeys it (OK). Built for 2201 and 2002.
#include <iostream>
#include <vector>

#include "kernel_operator.h"

using namespace AscendC;

static std::vector<float> gIn(4096, 1.0f), gOut(4096, 0.0f);

static void Run(const std::string& s) {
    asc_emu::St().gm.push_back({"in", reinterpret_cast<uint8_t*>(gIn.data()), gIn.size() * 4, false, {}});
    asc_emu::St().gm.push_back({"out", reinterpret_cast<uint8_t*>(gOut.data()), gOut.size() * 4, true,
                                std::vector<int32_t>(gOut.size() * 4, -1)});
    TPipe pipe;
    GlobalTensor<float> xGm, yGm;
    xGm.SetGlobalBuffer(gIn.data(), gIn.size());
    yGm.SetGlobalBuffer(gOut.data(), gOut.size());
    TBuf<TPosition::VECCALC> aBuf, bBuf;
    pipe.InitBuffer(aBuf, 1024);
    pipe.InitBuffer(bBuf, 1024);
    LocalTensor<float> a = aBuf.Get<float>(), b = bBuf.Get<float>();
    if (s == "mte2_v_race" || s == "mte2_v_flag") {
        // GM -> TBuf, then a vector op on it: only a flag orders MTE2 before V.
        DataCopy(a, xGm, 64);
        if (s == "mte2_v_flag") {
            SetFlag<HardEvent::MTE2_V>(0);
            WaitFlag<HardEvent::MTE2_V>(0);
        }
        Muls(b, a, 2.0f, 64);
    } else if (s == "v_mte3_race" || s == "v_mte3_flag") {
        Duplicate(a, 3.0f, 64);
        if (s == "v_mte3_flag") {
            SetFlag<HardEvent::V_MTE3>(0);
            WaitFlag<HardEvent::V_MTE3>(0);
        }
        DataCopy(yGm, a, 64);
    } else if (s == "v_mte2_war" || s == "v_mte2_flag") {
        // The vector unit reads a buffer the next copy-in overwrites.
        Duplicate(b, 0.0f, 64);
        Add(b, a, b, 64);
        if (s == "v_mte2_flag") {
            SetFlag<HardEvent::V_MTE2>(0);
            WaitFlag<HardEvent::V_MTE2>(0);
        }
        DataCopy(a, xGm, 64);
    } else if (s == "mte2_waw_read" || s == "mte2_waw_barrier" || s == "mte2_waw_unread") {
        // Two copies into one buffer with nothing ordering them: the bytes are either copy's. Harmless until read
        // (the data_copy sample copies tile after tile into one buffer it never reads).
        DataCopy(a, xGm, 64);
        if (s == "mte2_waw_barrier") PipeBarrier<PIPE_MTE2>();
        DataCopy(a, xGm[64], 64);
        if (s != "mte2_waw_unread") {
            SetFlag<HardEvent::MTE2_V>(0);
            WaitFlag<HardEvent::MTE2_V>(0);
            Muls(b, a, 2.0f, 64);
        }
    } else if (s == "static_tensor_past_ub" || s == "static_tensor_fits") {
        // A LocalTensor at a fixed UB address (静态Tensor编程) must lie inside the physical UB.
        const uint32_t end = asc_emu::St().soc.ubPhysical;
        LocalTensor<float> t(TPosition::VECCALC, end - 1024, s == "static_tensor_fits" ? 256 : 512);
        Duplicate(t, 1.0f, 64);
    } else if (s == "l1_tensor_past_l1" || s == "l1_tensor_fits") {
        // An A1 tensor lives in the cube core's L1 Buffer: 512 KB on 910B, 1 MB on 310P.
        const uint32_t end = asc_emu::St().soc.l1Physical;
        LocalTensor<half> t(TPosition::A1, end - 4096, s == "l1_tensor_fits" ? 2048 : 4096);
        GlobalTensor<half> hGm;
        hGm.SetGlobalBuffer(reinterpret_cast<half*>(gIn.data()), gIn.size() * 2);
        Nd2NzParams nd(1, 16, 64, 0, 64, 16, 1, 0);  // 16 rows of 64: four 16-wide column blocks
        DataCopy(t, hGm, nd);
    } else if (s == "nd2nz_layout") {
        // Two 8 x 23 matrices (rows 40 apart, matrices 320 apart) into NZ: 16-wide column blocks 9 rows apart,
        // matrices 288 elements apart, the 9 columns past 23 zeros (GMToL1随路转换-ND2NZ搬运 figure 2's layout).
        static std::vector<half> src(640);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<half>(static_cast<float>(i % 1000) + 1.0f);
        asc_emu::St().gm.push_back({"src", reinterpret_cast<uint8_t*>(src.data()), src.size() * 2, false, {}});
        GlobalTensor<half> sGm;
        sGm.SetGlobalBuffer(src.data(), src.size());
        LocalTensor<half> l1(TPosition::A1, 0, 2 * 288);
        std::memset(AscendC::emu_l1::arena, 0x7F, 2 * 288 * 2);
        DataCopy(l1, sGm, Nd2NzParams(2, 8, 23, 320, 40, 9, 1, 288));
        const half* nz = reinterpret_cast<const half*>(AscendC::emu_l1::arena);
        for (int k = 0; k < 2; ++k)
            for (int x = 0; x < 8; ++x)
                for (int c = 0; c < 32; ++c) {
                    const float want = c < 23 ? static_cast<float>(src[k * 320 + x * 40 + c]) : 0.0f;
                    const float got = static_cast<float>(nz[k * 288 + (c / 16) * 9 * 16 + x * 16 + c % 16]);
                    if (got != want)
                        asc_emu::Fail("ND2NZ layout: matrix " + std::to_string(k) + " row " + std::to_string(x) +
                                      " column " + std::to_string(c) + " holds " + std::to_string(got));
                }
    } else if (s == "nd2nz_row_stride_on_310p") {
        // dav_m200's software ND2NZ lays rows one block apart: a wider dstNzNStride would be silently ignored.
        GlobalTensor<half> hGm;
        hGm.SetGlobalBuffer(reinterpret_cast<half*>(gIn.data()), gIn.size() * 2);
        LocalTensor<half> t(TPosition::A1, 0, 1024);
        DataCopy(t, hGm, Nd2NzParams(1, 16, 16, 0, 16, 32, 2, 0));
    } else if (s == "scalar_reads_l1") {
        LocalTensor<half> t(TPosition::A1, 0, 256);
        (void)t.GetValue(0);
    } else if (s == "queue_skips_deque" || s == "queue_ordered") {
        TQue<QuePosition::VECIN, 1> inQueueX;
        TQue<QuePosition::VECOUT, 1> outQueueY;
        pipe.InitBuffer(inQueueX, 2, 256);
        pipe.InitBuffer(outQueueY, 2, 256);
        for (int tile = 0; tile < 3; ++tile) {
            LocalTensor<float> xLocal = inQueueX.AllocTensor<float>();
            DataCopy(xLocal, xGm[tile * 64], 64);
            inQueueX.EnQue(xLocal);
            LocalTensor<float> yLocal = outQueueY.AllocTensor<float>();
            if (s == "queue_ordered") xLocal = inQueueX.DeQue<float>();
            Muls(yLocal, xLocal, 2.0f, 64);
            outQueueY.EnQue(yLocal);
            if (s == "queue_skips_deque") xLocal = inQueueX.DeQue<float>();
            inQueueX.FreeTensor(xLocal);
            yLocal = outQueueY.DeQue<float>();
            DataCopy(yGm[tile * 64], yLocal, 64);
            outQueueY.FreeTensor(yLocal);
        }
    } else if (s == "reenque") {
        TQue<QuePosition::VECIN, 1> inQueueX;
        pipe.InitBuffer(inQueueX, 1, 256);
        LocalTensor<float> xLocal = inQueueX.AllocTensor<float>();
        inQueueX.EnQue(xLocal);
        xLocal = inQueueX.DeQue<float>();
        inQueueX.EnQue(xLocal);
        xLocal = inQueueX.DeQue<float>();
        inQueueX.FreeTensor(xLocal);
    } else if (s == "mte3_overlap" || s == "mte3_barrier") {
        // 310P's ragged tail: an aligned head, then a 32-byte window that overlaps its end.
        Duplicate(a, 5.0f, 64);
        SetFlag<HardEvent::V_MTE3>(0);
        WaitFlag<HardEvent::V_MTE3>(0);
        DataCopy(yGm, a, 32);
        if (s == "mte3_barrier") PipeBarrier<PIPE_MTE3>();
        DataCopy(yGm[28], a, 8);
    } else if (s == "wait_without_set") {
        WaitFlag<HardEvent::MTE2_V>(1);
    } else if (s == "select_tmp_ub" || s == "select_reserved") {
        // Fill the UB up to the host-reported size (or 8 KB short of it), then Select.
        const uint32_t rest = asc_emu::St().soc.ubBytes - 2048 - (s == "select_reserved" ? 8192 : 0);
        TBuf<TPosition::VECCALC> big;
        pipe.InitBuffer(big, rest);
        Duplicate(a, 1.0f, 64);
        Duplicate(b, 2.0f, 64);
        LocalTensor<float> m = big.Get<float>();
        Compares(m.ReinterpretCast<uint8_t>(), a, 0.0f, CMPMODE::GT, 64);
        Select(a, m.ReinterpretCast<uint8_t>(), a, b, SELMODE::VSEL_TENSOR_TENSOR_MODE, 64);
    } else if (s == "queue_budget" || s == "queue_budget_ok") {
        TQue<QuePosition::VECIN, 1> q0, q1, q2, q3, q4;
        pipe.InitBuffer(q0, 2, 64);
        pipe.InitBuffer(q1, 2, 64);
        pipe.InitBuffer(q2, 2, 64);
        pipe.InitBuffer(q3, 2, 64);
        if (s == "queue_budget") pipe.InitBuffer(q4, 2, 64);
    } else if (s == "setvalue_no_flush" || s == "setvalue_flushed") {
        yGm.SetValue(3, 7.5f);
        if (s == "setvalue_flushed") {
#if __NPU_ARCH__ == 2002
            DataCacheCleanAndInvalid<float, CacheLine::SINGLE_CACHE_LINE>(yGm);
#else
            DataCacheCleanAndInvalid<float, CacheLine::SINGLE_CACHE_LINE, DcciDst::CACHELINE_OUT>(yGm);
#endif
            std::cout << "GM " << gOut[3] << " ";
        }
    } else if (s == "setvalue_then_dma") {
        yGm.SetValue(3, 7.5f);
        Duplicate(a, 1.0f, 64);
        SetFlag<HardEvent::V_MTE3>(0);
        WaitFlag<HardEvent::V_MTE3>(0);
        DataCopy(yGm, a, 8);
    } else if (s == "ub_full") {
        TBuf<TPosition::VECCALC> big;
        pipe.InitBuffer(big, asc_emu::St().soc.ubBytes - 2048);
    } else if (s == "ub_over") {
        TBuf<TPosition::VECCALC> big;
        pipe.InitBuffer(big, asc_emu::St().soc.ubBytes - 2048 + 32);
    } else if (s == "select_over_mask" || s == "select_own_dst") {
        // Select writing its result over the bit mask it is reading (a register reused too early).
        Duplicate(a, 1.0f, 64);
        Duplicate(b, 2.0f, 64);
        TBuf<TPosition::VECCALC> mBuf;
        pipe.InitBuffer(mBuf, 256);
        LocalTensor<float> m = mBuf.Get<float>();
        Compares(m.ReinterpretCast<uint8_t>(), a, 0.0f, CMPMODE::GT, 64);
        Select(s == "select_over_mask" ? m : a, m.ReinterpretCast<uint8_t>(), a, b,
               SELMODE::VSEL_TENSOR_TENSOR_MODE, 64);
    } else if (s == "compare_over_source") {
        Duplicate(a, 1.0f, 64);
        Compares(a.ReinterpretCast<uint8_t>(), a, 0.0f, CMPMODE::GT, 64);
    } else if (s == "overflow") {
        // Out-of-range results: inf on 910B, the largest finite value on 310P (saturation mode).
        TBuf<TPosition::VECCALC> hBuf;
        pipe.InitBuffer(hBuf, 64);
        LocalTensor<half> h = hBuf.Get<half>();
        Duplicate(a, 70000.0f, 16);
        Cast(h, a, RoundMode::CAST_NONE, 16);
        Duplicate(b, 100.0f, 64);
        Exp(b, b, 64);
        std::cout << "CAST " << static_cast<float>(h.GetValue(0)) << " EXP " << b.GetValue(0) << " ";
    } else if (s == "scalar_orders") {
        // A scalar read of the copied data makes S wait for MTE2; the vector op dispatched after it is ordered.
        DataCopy(a, xGm, 64);
        float v = a.GetValue(0);
        Muls(b, a, v, 64);
    } else {
        asc_emu::Fail("unknown scenario " + s);
    }
}

#include "scenario_main.h"
