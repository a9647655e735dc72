// Host time of a generated attention tiling calc (ASC_CALC_HEADER's ASC_COMPUTE_TILING), linked with CANN's own
// Matmul tiling: what TilingFunc costs a launch at a product shape it has not seen (a new KV block: keys below
// one block) against one it has (keys past one block, the products cached). Our code; bench/bench_attention.py
// --tiling builds and runs it.
// stdin: N, then one case as cann/attention_tiling_main.cpp reads it (its Sk is replaced).
// stdout: "uncached_us <mean> cached_us <mean> refused <count>"
#include <chrono>
#include <iostream>

#include "tiling/tiling_api.h"
#include ASC_CALC_HEADER
#include "attention_case_in.h"

int main() {
    uint32_t n = 0;
    AttentionCase c;
    if (!(std::cin >> n) || n == 0 || !ReadAttentionCase(std::cin, c)) return 2;
    int refused = 0;
    auto mean = [&](uint64_t first, uint64_t step) {
        double total = 0;
        for (uint32_t i = 0; i < n; ++i) {
            ASC_TILING_DATA t{};
            const uint32_t keys = static_cast<uint32_t>(first + i * step);
            if (c.maskRank > 0) c.maskDims[c.maskRank - 1] = keys;
            const auto t0 = std::chrono::steady_clock::now();
            refused += ComputeAttentionTiling(c, keys, &t) != 0;
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
