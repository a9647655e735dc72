// Runs a generated matmul tiling calc (ASC_CALC_HEADER, with its ASC_COMPUTE_TILING function and
// ASC_TILING_DATA struct) against CANN's own MultiCoreMatmulTiling and prints what it chose. Our code.
// stdin, one shape per line: m n k dtypeSize isFloat isBf16 coreNum coupled l1 l0a l0b l0c ub
// stdout, one line per shape: "rc <code>" then the TCubeTiling's fields as "name value" pairs.
#include <iostream>
#include <string>

#include "platform_in.h"
#include "tiling/tiling_api.h"
#include ASC_CALC_HEADER

#define ASC_FIELD(f) std::cout << " " #f " " << t.cubeTiling.f

int main() {
    uint64_t m, n, k, size, isFloat, isBf16, cores;
    matmul_tiling::PlatformInfo p;
    bool coupled = false;
    while (std::cin >> m >> n >> k >> size >> isFloat >> isBf16 >> cores && ReadPlatform(std::cin, p, coupled)) {
        ASC_TILING_DATA t{};
        const int rc = ASC_COMPUTE_TILING(static_cast<uint32_t>(m), static_cast<uint32_t>(n), static_cast<uint32_t>(k),
                                          static_cast<uint32_t>(size), isFloat != 0, isBf16 != 0,
                                          static_cast<uint32_t>(cores), p, coupled, nullptr, &t);
        std::cout << "rc " << rc;
        if (rc == 0) {
            ASC_FIELD(usedCoreNum); ASC_FIELD(M); ASC_FIELD(N); ASC_FIELD(Ka); ASC_FIELD(Kb);
            ASC_FIELD(singleCoreM); ASC_FIELD(singleCoreN); ASC_FIELD(singleCoreK);
            ASC_FIELD(baseM); ASC_FIELD(baseN); ASC_FIELD(baseK); ASC_FIELD(depthA1); ASC_FIELD(depthB1);
            ASC_FIELD(stepM); ASC_FIELD(stepN); ASC_FIELD(isBias); ASC_FIELD(transLength); ASC_FIELD(iterateOrder);
            ASC_FIELD(shareMode); ASC_FIELD(shareL1Size); ASC_FIELD(shareL0CSize); ASC_FIELD(shareUbSize);
            ASC_FIELD(stepKa); ASC_FIELD(stepKb); ASC_FIELD(dbL0A); ASC_FIELD(dbL0B); ASC_FIELD(dbL0C);
        }
        std::cout << "\n";
    }
    return 0;
}
