// Calibration kernels of the timing model: argv[1] names one; each runs on every core of the SoC and prints the
// model's estimate (TimingJson) after a line of what the kernel moved and computed. Built for 2201 and 2002.
#include <iostream>
#include <vector>

#include "kernel_operator.h"

using namespace AscendC;

static uint32_t TILE = 2048;      // fp32 elements per copy tile (argv[2]): 8 KB by default
constexpr uint32_t TILES = 64;    // tiles per core
constexpr uint32_t ROWS = 64;     // rows of the per-row reduction kernels
constexpr uint32_t ROW = 64;      // fp32 elements per row

// A copy through UB: x -> Adds(0) -> y, tile by tile, with `depth` buffers per queue.
static void Copy(GM_ADDR x, GM_ADDR y, int depth) {
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> inQueueX;
    TQue<QuePosition::VECOUT, 1> outQueueY;
    pipe.InitBuffer(inQueueX, depth, TILE * sizeof(float));
    pipe.InitBuffer(outQueueY, depth, TILE * sizeof(float));
    GlobalTensor<float> xGm, yGm;
    const uint64_t base = static_cast<uint64_t>(GetBlockIdx()) * TILE * TILES;
    xGm.SetGlobalBuffer(reinterpret_cast<float*>(x) + base, TILE * TILES);
    yGm.SetGlobalBuffer(reinterpret_cast<float*>(y) + base, TILE * TILES);
    for (uint32_t t = 0; t < TILES; ++t) {
        LocalTensor<float> xLocal = inQueueX.AllocTensor<float>();
        DataCopy(xLocal, xGm[t * TILE], TILE);
        inQueueX.EnQue(xLocal);
        xLocal = inQueueX.DeQue<float>();
        LocalTensor<float> yLocal = outQueueY.AllocTensor<float>();
        Adds(yLocal, xLocal, 0.0f, TILE);
        outQueueY.EnQue(yLocal);
        inQueueX.FreeTensor(xLocal);
        yLocal = outQueueY.DeQue<float>();
        DataCopy(yGm[t * TILE], yLocal, TILE);
        outQueueY.FreeTensor(yLocal);
    }
}

// A long vector chain on one resident tile: 512 Muls of 16384 fp32 elements, one load and one store.
static void Chain(GM_ADDR x, GM_ADDR y) {
    constexpr uint32_t N = 16384;
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, N * sizeof(float));
    LocalTensor<float> a = buf.Get<float>();
    GlobalTensor<float> xGm, yGm;
    const uint64_t base = static_cast<uint64_t>(GetBlockIdx()) * N;
    xGm.SetGlobalBuffer(reinterpret_cast<float*>(x) + base, N);
    yGm.SetGlobalBuffer(reinterpret_cast<float*>(y) + base, N);
    DataCopy(a, xGm, N);
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
    for (int i = 0; i < 512; ++i) Muls(a, a, 1.0f, N);
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(yGm, a, N);
}

// Row sums: per row ReduceSum then GetValue of the sum (a V -> S drain per row, twice), or all rows at once with
// one repeat-strided ReduceRepeat and no scalar read.
static void RowSums(GM_ADDR x, GM_ADDR y, bool perRow) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> xBuf, sBuf, tmpBuf;
    pipe.InitBuffer(xBuf, ROWS * ROW * sizeof(float));
    pipe.InitBuffer(sBuf, ROWS * sizeof(float) < 32 ? 32 : ROWS * sizeof(float));
    pipe.InitBuffer(tmpBuf, 256);
    LocalTensor<float> xLocal = xBuf.Get<float>(), sums = sBuf.Get<float>(), tmp = tmpBuf.Get<float>();
    GlobalTensor<float> xGm, yGm;
    xGm.SetGlobalBuffer(reinterpret_cast<float*>(x) + static_cast<uint64_t>(GetBlockIdx()) * ROWS * ROW, ROWS * ROW);
    yGm.SetGlobalBuffer(reinterpret_cast<float*>(y) + static_cast<uint64_t>(GetBlockIdx()) * ROWS, ROWS);
    DataCopy(xLocal, xGm, ROWS * ROW);
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
    if (perRow) {
        for (uint32_t r = 0; r < ROWS; ++r) {
            ReduceSum(tmp, xLocal[r * ROW], tmp, ROW);
            const float s = tmp.GetValue(0);
            Muls(xLocal[r * ROW], xLocal[r * ROW], s, ROW);
        }
    } else {
        ReduceRepeat<ReduceType::SUM, float, float>(sums, xLocal, ROW, ROWS, 1, 1, ROW / 8);  // 64-wide rows
    }
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(yGm, perRow ? xLocal : sums, ROWS);
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    const std::string s = argv[1];
    if (argc > 2) TILE = static_cast<uint32_t>(std::stoul(argv[2]));
    auto& st = asc_emu::St();
    const uint32_t cores = static_cast<uint32_t>(st.tm.cores);
    size_t n = static_cast<size_t>(cores) * std::max<uint32_t>(TILE * TILES, 16384);
    std::vector<float> x(n, 1.0f), y(n, 0.0f);
    st.gm.push_back({"x", reinterpret_cast<uint8_t*>(x.data()), n * 4, false, {}});
    st.gm.push_back({"y", reinterpret_cast<uint8_t*>(y.data()), n * 4, true, std::vector<int32_t>(n * 4, -1)});
    st.blockNum = cores;
    uint64_t bytes = 0, vecElems = 0;
    for (uint32_t b = 0; b < cores; ++b) {
        st.blockIdx = b;
        try {
            if (s == "copy_double" || s == "copy_single") {
                Copy(x.data() ? reinterpret_cast<GM_ADDR>(x.data()) : nullptr, reinterpret_cast<GM_ADDR>(y.data()),
                     s == "copy_double" ? 2 : 1);
                bytes += 2ull * TILE * TILES * 4, vecElems += TILE * TILES;
            } else if (s == "chain") {
                Chain(reinterpret_cast<GM_ADDR>(x.data()), reinterpret_cast<GM_ADDR>(y.data()));
                bytes += 2ull * 16384 * 4, vecElems += 512ull * 16384;
            } else if (s == "rows_getvalue" || s == "rows_repeat") {
                RowSums(reinterpret_cast<GM_ADDR>(x.data()), reinterpret_cast<GM_ADDR>(y.data()), s == "rows_getvalue");
                bytes += (ROWS * ROW + ROWS) * 4ull, vecElems += ROWS * ROW;
            } else {
                return 2;
            }
            asc_emu::EndBlock();
        } catch (const asc_emu::Fault& e) {
            std::cout << "FAULT " << e.what() << std::endl;
            return 1;
        }
    }
    std::cout << "{\"bytes\": " << bytes << ", \"vec_elems\": " << vecElems << ", \"time\": " << asc_emu::TimingJson()
              << "}" << std::endl;
    return 0;
}
