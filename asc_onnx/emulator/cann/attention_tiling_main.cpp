// Runs a generated attention tiling calc (ASC_CALC_HEADER, with its ASC_COMPUTE_TILING function and
// ASC_TILING_DATA struct) against CANN's own MultiCoreMatmulTiling and prints the two TCubeTilings it chose
// (q @ k^T, then P @ v). Our code.
// stdin, one case per line: qRank qDims.. sk kvHeads dv maskRank maskDims.. dtypeSize isFloat isBf16 coreNum coupled
//   l1 l0a l0b l0c ub
// stdout, one line per case: "rc <code>" then each tiling's fields as "qk.name value" / "pv.name value" pairs
// (against the emulator's own tiling, then the GetTiling calls so far: "getTilingCalls n").
#include <iostream>
#include <string>

#include "tiling/tiling_api.h"
#include ASC_CALC_HEADER
#include "attention_case_in.h"

static void Print(const char* p, const AscendC::tiling::TCubeTiling& c) {
    const std::string s(p);
#define F(f) std::cout << " " << s << "." #f " " << c.f
    F(usedCoreNum); F(M); F(N); F(Ka); F(Kb); F(singleCoreM); F(singleCoreN); F(singleCoreK); F(baseM); F(baseN);
    F(baseK); F(depthA1); F(depthB1); F(stepM); F(stepN); F(isBias); F(transLength); F(iterateOrder); F(shareMode);
    F(shareL1Size); F(shareL0CSize); F(shareUbSize); F(stepKa); F(stepKb); F(dbL0A); F(dbL0B); F(dbL0C);
#undef F
}

int main() {
    AttentionCase c;
    while (ReadAttentionCase(std::cin, c)) {
        ASC_TILING_DATA t{};
        const int rc = ComputeAttentionTiling(c, static_cast<uint32_t>(c.sk), &t);
        std::cout << "rc " << rc;
        if (rc == 0) {
            Print("qk", t.qkTiling);
            Print("pv", t.pvTiling);
#ifdef ASC_EMU_TILING_CALLS
            std::cout << " getTilingCalls " << matmul_tiling::GetTilingCalls();  // so far (the emulator's tiling)
#endif
        }
        std::cout << "\n";
    }
    return 0;
}
