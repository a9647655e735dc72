// A bare fp16 GEMM through the Matmul API (MDL) on 910B, one IterateAll per cube core over its region, for the timing
// model's estimate against a published measurement (bench/bench_chip.py). argv: M N K mDim nDim baseM baseN baseK.
// The emulator runs it for timing only (ASC_EMU_VALUES=0, zeros in), so 4096^3 takes seconds.
#include <iostream>
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

using namespace AscendC;
using AT = MatmulType<TPosition::GM, CubeFormat::ND, half>;
using CT = MatmulType<TPosition::GM, CubeFormat::ND, half>;

int main(int argc, char** argv) {
    if (argc != 9) return 2;
    const int32_t m = std::stoi(argv[1]), n = std::stoi(argv[2]), k = std::stoi(argv[3]);
    const int32_t mDim = std::stoi(argv[4]), nDim = std::stoi(argv[5]);
    tiling::TCubeTiling t{};
    t.usedCoreNum = mDim * nDim; t.M = m; t.N = n; t.Ka = k; t.Kb = k;
    t.singleCoreM = (m / mDim + 15) / 16 * 16; t.singleCoreN = (n / nDim + 15) / 16 * 16; t.singleCoreK = k;
    t.baseM = std::stoi(argv[6]); t.baseN = std::stoi(argv[7]); t.baseK = std::stoi(argv[8]);
    t.stepM = 1; t.stepN = 1; t.stepKa = 4; t.stepKb = 4; t.depthA1 = 8; t.depthB1 = 8;
    t.iterateOrder = 0; t.dbL0A = 2; t.dbL0B = 2; t.dbL0C = 1;
    std::vector<half> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * n), c(static_cast<size_t>(m) * n);
    std::vector<uint8_t> sys(64);
    emu_ws::Sys() = sys.data();
    auto& st = asc_emu::St();
    st.gm.push_back({"a", reinterpret_cast<uint8_t*>(a.data()), a.size() * 2, false, {}});
    st.gm.push_back({"b", reinterpret_cast<uint8_t*>(b.data()), b.size() * 2, false, {}});
    st.gm.push_back({"c", reinterpret_cast<uint8_t*>(c.data()), c.size() * 2, true, {}});
    const int32_t blocks = 2 * mDim * nDim;  // two vector cores per cube core; the even one drives the Matmul
    st.blockNum = blocks;
    try {
        for (int32_t blk = 0; blk < blocks; ++blk) {
            st.blockIdx = blk;
            TPipe pipe;
            Matmul<AT, AT, CT, CT, CFG_MDL> mm;  // K in stepKa tiles a copy, as CANN's MatMul loads
            REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t);
            if (blk % 2 == 0) {
                const int32_t core = blk / 2, mi = core / nDim, ni = core % nDim;
                const int32_t m0 = mi * t.singleCoreM, n0 = ni * t.singleCoreN;
                GlobalTensor<half> aGm, bGm, cGm;
                aGm.SetGlobalBuffer(a.data() + static_cast<size_t>(m0) * k, static_cast<size_t>(m - m0) * k);
                bGm.SetGlobalBuffer(b.data() + n0, b.size() - n0);
                const size_t c0 = static_cast<size_t>(m0) * n + n0;
                cGm.SetGlobalBuffer(c.data() + c0, c.size() - c0);
                mm.SetTensorA(aGm);
                mm.SetTensorB(bGm);
                mm.SetTail(std::min(t.singleCoreM, m - m0), std::min(t.singleCoreN, n - n0));
                mm.IterateAll(cGm);
                mm.End();
            }
            asc_emu::EndBlock();
        }
    } catch (const asc_emu::Fault& e) {
        std::cout << "FAULT " << e.what() << std::endl;
        return 1;
    }
    std::cout << asc_emu::TimingJson() << std::endl;
    return 0;
}
