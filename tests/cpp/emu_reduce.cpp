// Reductions and scalar read-back: argv[1] names a scenario, argv[2] a count (or mask), argv[3] a repeat
// count. Input is read from stdin as whitespace-separated floats; the result is printed as
// "OK v0 v1 ..." or "FAULT message". Built for 2201 and 2002, and with ASC_EMU_AUTO_SYNC=0.
#include <iostream>
#include <string>
#include <vector>

#include "kernel_operator.h"

using namespace AscendC;

static void Print(const LocalTensor<float>& t, uint32_t n) {
    std::cout << "OK";
    for (uint32_t i = 0; i < n; ++i) std::cout << " " << t.GetValue(i);
    std::cout << std::endl;
}

static void Run(const std::string& s, int32_t count, int32_t repeat, const std::vector<float>& in) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> srcBuf, dstBuf, tmpBuf;
    pipe.InitBuffer(srcBuf, 64 * 1024);
    pipe.InitBuffer(dstBuf, 4096);
    const uint32_t tmpBytes = s.find("small_tmp") != std::string::npos ? 32
                              : s == "max_index_sized" ? static_cast<uint32_t>(repeat) * 4 : 8192;
    pipe.InitBuffer(tmpBuf, tmpBytes);
    LocalTensor<float> src = srcBuf.Get<float>(), dst = dstBuf.Get<float>(), tmp = tmpBuf.Get<float>();
    for (size_t i = 0; i < in.size(); ++i) src.SetValue(static_cast<uint32_t>(i), in[i]);
    SetFlag<HardEvent::S_V>(1);  // the fill is scalar; ordered by hand for the auto-sync-off build
    WaitFlag<HardEvent::S_V>(1);
    if (s == "sum" || s == "sum_small_tmp") {
        ReduceSum(dst, src, tmp, count);
        Print(dst, 1);
    } else if (s == "max" || s == "max_small_tmp") {
        ReduceMax(dst, src, tmp, count, true);
        const float v = dst.GetValue(0);
        const float idxBits = dst.GetValue(1);
        uint32_t idx;
        std::memcpy(&idx, &idxBits, 4);
        std::cout << "OK " << v << " " << idx << std::endl;
    } else if (s == "min") {
        ReduceMin(dst, src, tmp, count);
        Print(dst, 1);
    } else if (s == "sum_over_src") {
        ReduceSum(src[8], src, tmp, count);  // the result lands inside the data it reduces
        Print(dst, 1);
    } else if (s == "max_tmp_over_src") {
        ReduceMax(dst, src, src[64], count);  // scratch reusing the source's space: allowed (ReduceMax.md)
        Print(dst, 1);
    } else if (s == "sum_tmp_over_src") {
        ReduceSum(dst, src, src[64], count);  // 310P's ReduceSum scratch inside the data it reduces
        Print(dst, 1);
    } else if (s == "max_index_sized") {
        ReduceMax(dst, src, tmp, count, true);  // scratch of argv[3] floats, with the index
        Print(dst, 1);
    } else if (s == "repeat_sum") {
        // count = mask, repeat rows of 64 floats (8 blocks), one sum per row
        ReduceRepeat<ReduceType::SUM>(dst, src, count, repeat, 1, 1, 8);
        Print(dst, repeat);
    } else if (s == "repeat_max") {
        ReduceRepeat<ReduceType::MAX>(dst, src, count, repeat, 1, 1, 8, ReduceOrder::ORDER_ONLY_VALUE);
        Print(dst, repeat);
    } else if (s == "repeat_bad_mask") {
        ReduceRepeat<ReduceType::SUM>(dst, src, count, repeat, 1, 1, 8);  // mask beyond 64 floats
        Print(dst, 1);
    } else if (s == "block_sum") {
        ReduceDataBlock<ReduceType::SUM>(dst, src, count, repeat, 1, 1, 8);
        Print(dst, 8 * repeat);
    } else if (s == "brcb_slots") {
        // count values (a multiple of 8) into the first block of 64-byte slots: block 2j of the destination
        Brcb(dst, src, static_cast<uint8_t>(count / 8), {2, 16});
        Print(dst, count * 16);
    } else if (s == "brcb_zero_stride") {
        Brcb(dst, src, 1, {0, 8});
        Print(dst, 8);
    } else if (s == "brcb_in_place") {
        Brcb(src, src, 1, {1, 8});  // in place
        Print(dst, 8);
    } else if (s == "rows_times_slot") {
        // repeat rows of `count` floats at a pitch of 64, each times the value filling its row's slot (the first
        // block of 16 floats at dst + 16 r): src1 block stride 0, repeat stride 2
        for (int32_t r = 0; r < repeat; ++r)
            for (int32_t e = 0; e < 8; ++e) dst.SetValue(r * 16 + e, static_cast<float>(r + 2));
        SetFlag<HardEvent::S_V>(2);
        WaitFlag<HardEvent::S_V>(2);
        Mul(src, src, dst, static_cast<uint64_t>(count), static_cast<uint8_t>(repeat), {1, 1, 0, 8, 8, 2});
        Print(src, 64 * repeat);
    } else if (s == "rows_overlapping_repeats") {
        // in place, but repeats 4 blocks apart over 8-block rows: repeat 1 reads what repeat 0 wrote
        Mul(src, src, dst, static_cast<uint64_t>(count), static_cast<uint8_t>(repeat), {1, 1, 0, 4, 4, 2});
        Print(src, 8);
    } else if (s == "rows_dst_blk0") {
        Mul(dst, src, src, static_cast<uint64_t>(count), static_cast<uint8_t>(repeat), {0, 1, 1, 8, 8, 8});
        Print(dst, 8);
    } else if (s == "accumulate_rows") {
        // dst += each of `repeat` rows of 64 floats: src1 is dst at repeat stride 0 (the documented exception)
        Duplicate(dst, 0.0f, 64);
        Add(dst, src, dst, static_cast<uint64_t>(count), static_cast<uint8_t>(repeat), {1, 1, 1, 0, 8, 0});
        Print(dst, 64);
    } else if (s == "rows_past_end") {
        Mul(dst, dst, tmp, static_cast<uint64_t>(count), static_cast<uint8_t>(repeat), {1, 1, 1, 8, 8, 8});
        Print(dst, 8);
    } else if (s == "getvalue_after_vec" || s == "getvalue_flagged") {
        // A vector result read back by the scalar unit: ordered by the compiler's auto-sync, or by hand.
        Muls(dst, src, 2.0f, 64);
        if (s == "getvalue_flagged") {
            SetFlag<HardEvent::V_S>(0);
            WaitFlag<HardEvent::V_S>(0);
        }
        const float v = dst.GetValue(3);
        std::cout << "OK " << v << std::endl;
    } else if (s == "setvalue_then_vec" || s == "setvalue_flagged") {
        dst.SetValue(0, 5.0f);
        if (s == "setvalue_flagged") {
            SetFlag<HardEvent::S_V>(0);
            WaitFlag<HardEvent::S_V>(0);
        }
        Muls(tmp, dst, 2.0f, 8);
        SetFlag<HardEvent::V_S>(0);
        WaitFlag<HardEvent::V_S>(0);
        std::cout << "OK " << tmp.GetValue(0) << std::endl;
    } else {
        asc_emu::Fail("unknown scenario " + s);
    }
}

int main(int argc, char** argv) {
    if (argc < 4) return 2;
    std::vector<float> in;
    float v;
    while (std::cin >> v) in.push_back(v);
    std::cout.precision(9);
    try {
        Run(argv[1], std::stoi(argv[2]), std::stoi(argv[3]), in);
    } catch (const asc_emu::Fault& e) {
        std::cout << "FAULT " << e.what() << std::endl;
    }
    return 0;
}
