// Host time of a generated attention tiling calc (ASC_CALC_HEADER's ASC_COMPUTE_TILING), linked with CANN's own
// Matmul tiling: what TilingFunc costs a launch at a product shape it has not seen (a new KV block: keys below
// one block) against one it has (keys past one block, the products cached). Our code; bench/bench_attention.py
// --tiling builds and runs it.
// stdin: N, then one case as cann/attention_tiling_main.cpp reads it (its Sk is replaced).
// stdout: "uncached_us <mean> cached_us <mean> refused <count>"
#include <chrono>
#include <iostream>

#include "platform_in.h"
#include "tiling/tiling_api.h"
#include ASC_CALC_HEADER

int main() {
    uint32_t n = 0, qRank = 0;
    std::cin >> n >> qRank;
    uint64_t qDims[8] = {}, maskDims[8] = {};
    for (uint32_t i = 0; i < qRank && i < 8; ++i) std::cin >> qDims[i];
    uint64_t sk, kvHeads, dv, size, isFloat, isBf16, cores;
    uint32_t maskRank = 0;
    std::cin >> sk >> kvHeads >> dv >> maskRank;
    for (uint32_t i = 0; i < maskRank && i < 8; ++i) std::cin >> maskDims[i];
    std::cin >> size >> isFloat >> isBf16 >> cores;
    matmul_tiling::PlatformInfo p;
    bool coupled = false;
    if (!ReadPlatform(std::cin, p, coupled)) return 2;
    int refused = 0;
    auto mean = [&](uint64_t first, uint64_t step) {
        double total = 0;
        for (uint32_t i = 0; i < n; ++i) {
            ASC_TILING_DATA t{};
            const uint32_t keys = static_cast<uint32_t>(first + i * step);
            if (maskRank > 0) maskDims[maskRank - 1] = keys;
            const auto t0 = std::chrono::steady_clock::now();
            refused += ASC_COMPUTE_TILING(qDims, qRank, keys, static_cast<uint32_t>(kvHeads), static_cast<uint32_t>(dv),
                                          maskDims, maskRank, static_cast<uint32_t>(size), isFloat != 0, isBf16 != 0,
                                          static_cast<uint32_t>(cores), p, coupled, &t) != 0;
            total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        }
        return total / n;
    };
    const double uncached = mean(64, 1);    // KV blocks of 64, 65, ... keys: new products every call
    (void)mean(4096, 0);                    // past one KV block: the products' tilings asked once
    const double cached = mean(4096, 64);   // ... and found at every other key count
    std::cout << "uncached_us " << uncached << " cached_us " << cached << " refused " << refused << std::endl;
    return 0;
}
