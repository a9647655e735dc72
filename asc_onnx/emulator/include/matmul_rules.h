// asc-onnx emulator: what the open Matmul implementation derives from a tiling on 310P, written once for our
// host tiling (tiling/tiling_api.h) and the emulated Matmul (lib/matmul_intf.h), which checks a tiling
// against it. Our code, from impl/adv_api/tiling/matmul/matmul_tiling_algorithm.cpp (GetTransLength,
// GetBankConflictSize, GetUsedSize).
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernel_tiling/kernel_tiling.h"

namespace asc_emu {
// Element sizes and layout facts of one Matmul: A/B/C/bias types and whether B is transposed.
struct MatmulTypes {
    uint32_t a, b, c, bias;
    bool transB;
};

// 310P stages ND tiles through UB (ND -> NZ in software): the largest A, B or C tile, plus a bank-conflict pad
// where the tile's row pitch is a multiple of 512 bytes; under MDL (mmConfigType 1) A and B tiles cover stepKa x
// stepM (stepKb x stepN) base tiles. C is ND in GM, A and B are ND and A is not transposed (what asc-onnx emits).
inline int64_t TransLength310P(const AscendC::tiling::TCubeTiling& t, const MatmulTypes& s, bool mdl) {
    auto ceil16 = [](int64_t v) { return (v + 15) / 16; };
    int64_t a1 = static_cast<int64_t>(t.baseM) * t.baseK * s.a;
    if (mdl) a1 *= static_cast<int64_t>(t.stepKa) * t.stepM;
    if (ceil16(static_cast<int64_t>(t.stepKa) * t.baseK) * 32 % 512 == 0) a1 += static_cast<int64_t>(t.baseM) * 16 * t.stepM * s.a;
    int64_t b1 = static_cast<int64_t>(t.baseN) * t.baseK * s.b;
    if (mdl) b1 *= static_cast<int64_t>(t.stepKb) * t.stepN;
    if (s.transB) {
        if (ceil16(static_cast<int64_t>(t.stepKb) * t.baseK) * 32 % 512 == 0) b1 += static_cast<int64_t>(t.baseN) * 16 * t.stepN * s.b;
    } else if (ceil16(static_cast<int64_t>(t.stepN) * t.baseN) * 32 % 512 == 0) {
        b1 += static_cast<int64_t>(t.baseK) * 16 * t.stepKb * s.b;
    }
    const int64_t c1 = static_cast<int64_t>(t.baseM) * t.baseN * s.c;
    const int64_t bias = t.isBias ? static_cast<int64_t>(t.baseN) * s.bias : 0;
    return std::max({a1, b1, c1, bias});
}

// 310P: UB the Matmul reserves for itself at Init (shareUbSize): the zero-filled tail of a non-32-byte K or N
// of an ND input, and the C tile restored to ND before it goes to GM.
inline int64_t ShareUb310P(const AscendC::tiling::TCubeTiling& t, const MatmulTypes& s) {
    const int64_t aUb = (static_cast<int64_t>(t.singleCoreK) * s.a) % 32 ? static_cast<int64_t>(t.baseM) * 32 : 0;
    const int64_t bUb = s.transB ? ((static_cast<int64_t>(t.singleCoreK) * s.b) % 32 ? static_cast<int64_t>(t.baseN) * 32 : 0)
                                 : ((static_cast<int64_t>(t.singleCoreN) * s.b) % 32 ? static_cast<int64_t>(t.baseK) * 32 : 0);
    int64_t ub = std::max(aUb, bUb) + static_cast<int64_t>(t.baseM) * t.baseN * s.c;
    if ((static_cast<int64_t>(t.singleCoreN) * s.c) % 32) ub += 32;
    return ub;
}

// What SetLocalWorkspace must hand over on 310P (MatmulGetTmpBufSize: V200 ND2NZ needs two transLength buffers).
inline int64_t LocalWorkspace310P(const AscendC::tiling::TCubeTiling& t) {
    return std::max<int64_t>(t.shareUbSize, 2 * static_cast<int64_t>(t.transLength));
}
}  // namespace asc_emu
