// One case of a generated attention tiling calc, as the tiling programs read it from a stream, and the call of its
// ASC_COMPUTE_TILING on it. Our code.
// The words: qRank qDims.. sk kvHeads dv maskRank maskDims.. dtypeSize isFloat isBf16 coreNum, then the platform's
// (platform_in.h).
#pragma once
#include <cstdint>
#include <iostream>

#include "platform_in.h"

struct AttentionCase {
    uint32_t qRank = 0, maskRank = 0;
    uint64_t qDims[8] = {}, maskDims[8] = {};
    uint64_t sk = 0, kvHeads = 0, dv = 0, size = 0, isFloat = 0, isBf16 = 0, cores = 0;
    matmul_tiling::PlatformInfo platform;
    bool coupled = false;
};

// Reads one case into `c`; false at the end of the input.
inline bool ReadAttentionCase(std::istream& in, AttentionCase& c) {
    if (!(in >> c.qRank)) return false;
    for (uint32_t i = 0; i < c.qRank && i < 8; ++i) in >> c.qDims[i];
    in >> c.sk >> c.kvHeads >> c.dv >> c.maskRank;
    for (uint32_t i = 0; i < c.maskRank && i < 8; ++i) in >> c.maskDims[i];
    in >> c.size >> c.isFloat >> c.isBf16 >> c.cores;
    return ReadPlatform(in, c.platform, c.coupled);
}

// The calc on `c` at `sk` keys: its return code, the tiling in `t`.
template <typename TilingData>
inline int ComputeAttentionTiling(const AttentionCase& c, uint32_t sk, TilingData* t) {
    return ASC_COMPUTE_TILING(c.qDims, c.qRank, sk, static_cast<uint32_t>(c.kvHeads), static_cast<uint32_t>(c.dv),
                              c.maskDims, c.maskRank, static_cast<uint32_t>(c.size), c.isFloat != 0, c.isBf16 != 0,
                              static_cast<uint32_t>(c.cores), c.platform, c.coupled, t);
}
