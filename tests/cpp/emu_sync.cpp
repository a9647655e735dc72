// SyncAll between the blocks of a launch: argv[1] names the scenario, argv[2] the block count. Each block doubles
// its 8 floats into a workspace; after the barrier it adds its right neighbour's. Prints the fault, or OK with
// the output and the timing, one line.
#include <iostream>
#include <string>
#include <vector>

#include "kernel_operator.h"

using namespace AscendC;

static std::vector<float> gIn(8 * 64), gWork(8 * 64), gOut(8 * 64);

static void Kernel(const std::string& s) {
    const uint32_t me = static_cast<uint32_t>(GetBlockIdx());
    const uint32_t n = static_cast<uint32_t>(GetBlockNum());
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> inQueue;
    TQue<QuePosition::VECOUT, 1> outQueue;
    pipe.InitBuffer(inQueue, 1, 64);
    pipe.InitBuffer(outQueue, 1, 64);
    GlobalTensor<float> xGm, workGm, yGm;
    xGm.SetGlobalBuffer(gIn.data(), 8 * n);
    workGm.SetGlobalBuffer(gWork.data(), 8 * n);
    yGm.SetGlobalBuffer(gOut.data(), 8 * n);
#if __NPU_ARCH__ != 2002
    if (s == "aiv_only") {
        KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);  // hard sync needs a MIX type
    }
    if (s == "blocknum") {  // a mixed kernel's GetBlockNum counts AI Cores, two vector blocks each
        KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
        if (me == 0) std::cout << "GetBlockNum=" << GetBlockNum() << " ";
        return;
    }
#endif
    if (s == "own_read") {  // read the neighbour's part and this block's own before writing it
        for (uint32_t part : {(me + 1) % n, me}) {  // block 1 reads its own part after block 0 read it
            LocalTensor<float> t = inQueue.AllocTensor<float>();
            DataCopy(t, workGm[part * 8], 8);
            inQueue.EnQue(t);
            t = inQueue.DeQue<float>();
            inQueue.FreeTensor(t);
        }
    }
    if (s == "getvalue" && me > 0) (void)workGm.GetValue((me - 1) * 8);  // block me - 1 wrote it, no barrier
    LocalTensor<float> x = inQueue.AllocTensor<float>();
    DataCopy(x, xGm[me * 8], 8);
    inQueue.EnQue(x);
    x = inQueue.DeQue<float>();
    LocalTensor<float> twice = outQueue.AllocTensor<float>();
    Muls(twice, x, 2.0f, 8);
    // a block of more work, so the blocks reach the barrier at different times
    for (uint32_t i = 0; i < me * 4; ++i) Muls(twice, twice, 1.0f, 8);
    outQueue.EnQue(twice);
    twice = outQueue.DeQue<float>();
    DataCopy(workGm[me * 8], twice, 8);
    if (s == "missing" && me == 1) {  // block 1 leaves before the barrier
        inQueue.FreeTensor(x);
        outQueue.FreeTensor(twice);
        return;
    }
    if (s == "dirty") workGm.SetValue(me * 8, 1.0f);  // a scalar write left in the data cache
    if (s == "aiv_false") {
        SyncAll<false>();
    } else if (s != "no_sync" && s != "getvalue") {
        SyncAll();
    }
    inQueue.FreeTensor(x);
    LocalTensor<float> other = inQueue.AllocTensor<float>();
    DataCopy(other, workGm[(me + 1) % n * 8], 8);
    inQueue.EnQue(other);
    other = inQueue.DeQue<float>();
    outQueue.FreeTensor(twice);
    LocalTensor<float> y = outQueue.AllocTensor<float>();
    Add(y, other, other, 8);
    outQueue.EnQue(y);
    y = outQueue.DeQue<float>();
    DataCopy(yGm[me * 8], y, 8);
    if (s == "rewrite") DataCopy(workGm[(me + 1) % n * 8], y, 8);  // over the neighbour's part, after the barrier
    outQueue.FreeTensor(y);
    inQueue.FreeTensor(other);
}

int main(int argc, char** argv) {
    const std::string s = argv[1];
    const uint32_t n = static_cast<uint32_t>(std::stoul(argv[2]));
    auto& st = asc_emu::St();
    for (size_t i = 0; i < gIn.size(); ++i) gIn[i] = static_cast<float>(i);
    st.gm.push_back({"x", reinterpret_cast<uint8_t*>(gIn.data()), gIn.size() * 4, false, {}});
    st.gm.push_back({"workspace", reinterpret_cast<uint8_t*>(gWork.data()), gWork.size() * 4, true,
                     std::vector<int32_t>(gWork.size() * 4, -1)});
    st.gm.push_back({"y", reinterpret_cast<uint8_t*>(gOut.data()), gOut.size() * 4, true,
                     std::vector<int32_t>(gOut.size() * 4, -1)});
    st.blockNum = n;
    std::vector<uint32_t> blocks;
    for (uint32_t b = 0; b < n; ++b) blocks.push_back(b);
    std::string fault;
    const int64_t bad = asc_emu::RunFibers(blocks, [&] { Kernel(s); }, fault);
    if (bad >= 0) {
        std::cout << "FAULT block " << bad << ": " << fault << std::endl;
        return 0;
    }
    std::cout << "OK";
    for (uint32_t i = 0; i < 8 * n; ++i) std::cout << " " << gOut[i];
    // every block's end: none leaves before the last arrival
    for (const auto& bt : st.blockTimes) std::cout << " t" << bt.block << "=" << bt.cycles;
    std::cout << " phases=" << st.syncPhase << std::endl;
    return 0;
}
