// asc-onnx: CANN's Matmul tilings asked once per process (shipped into op_host/ with each attention op).
// TilingFunc runs at every launch, with a dynamic key count at every layer of every decode step, and CANN's
// tiling takes tens of microseconds a call; the products are a Q block by a KV block by a head dim, so a few
// shapes serve every launch. Only tilings CANN gave are kept: a refusal is asked again.
// No include guard: each op's <op>_tiling_calc.h (itself guarded) includes it once, and the emulator's batch
// programs compile several ops in one unit, each op's copy inside a namespace of its own.

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace asc_onnx {

// A product's shape and the platform numbers its tiling reads: what one tiling answers.
struct CubeKey {
    uint32_t m, n, k, l1, l0a, l0b, l0c;
    bool transB;
    int32_t in, out;  // matmul_tiling::DataType
    bool operator==(const CubeKey& o) const
    {
        return m == o.m && n == o.n && k == o.k && l1 == o.l1 && l0a == o.l0a && l0b == o.l0b && l0c == o.l0c &&
               transB == o.transB && in == o.in && out == o.out;
    }
};

constexpr size_t kCubeTilings = 64;  // kept at most

// The tiling `ask` fills for `key` (true if CANN gave one), from the process's cache once it has.
template <typename Tiling, typename Ask>
inline bool CachedCubeTiling(const CubeKey& key, Tiling& tiling, Ask ask)
{
    static std::mutex lock;
    static std::vector<std::pair<CubeKey, Tiling>> seen;
    static size_t oldest = 0;
    {
        std::lock_guard<std::mutex> guard(lock);
        for (const auto& entry : seen) {
            if (entry.first == key) {
                tiling = entry.second;
                return true;
            }
        }
    }
    if (!ask(tiling)) return false;
    std::lock_guard<std::mutex> guard(lock);
    if (seen.size() < kCubeTilings) {
        seen.emplace_back(key, tiling);
    } else {  // (the shapes are few: a bound all the same, the oldest giving way)
        seen[oldest] = {key, tiling};
        oldest = (oldest + 1u) % kCubeTilings;
    }
    return true;
}

}  // namespace asc_onnx
