// asc-onnx emulator: what a host program asked of the Matmul tiling API, as plain numbers, so that the emulator's
// tiling classes can hand it to CANN's own algorithm (cann/matmul_tiling_bridge.cpp, built against the open CANN
// sources) when a program is linked with it (ASC_EMU_CANN_TILING). Shared by both sides; our code.
#pragma once
#include <cstdint>

struct AscEmuTilingRequest {
    int32_t multiCore;  // MultiCoreMatmulTiling (1) or MatmulApiTiling (0)
    int32_t dim;        // SetDim
    int32_t aType, bType, cType, biasType;  // matmul_tiling::DataType values (CANN's numbering)
    int32_t transA, transB, bias;
    int32_t m, n, k, orgM, orgN, orgKa, orgKb;
    int32_t singleM, singleN, singleK;  // SetSingleShape (-1: the algorithm's)
    int32_t fixM, fixN, fixK;           // SetFixSplit
    int32_t l1Limit, l0cLimit, ubLimit, btLimit;  // SetBufferSpace
    int32_t mmConfigType;               // SetMatmulConfigParams: 0 NORM, 1 MDL
    int32_t coupled;                    // 310P
    int64_t l1, l0c, ub, l0a, l0b;      // the platform
};

// CANN's TCubeTiling for `req`, its fields as int32 words in kernel order into `out` (at most `words`); returns the
// number of words, or -1 where CANN's GetTiling failed.
extern "C" int32_t AscEmuCannTiling(const AscEmuTilingRequest* req, int32_t* out, int32_t words);
