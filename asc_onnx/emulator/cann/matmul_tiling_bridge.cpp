// CANN's own Matmul tiling behind the emulator's host tiling API: a program compiled against the emulator's
// tiling/tiling_api.h with ASC_EMU_CANN_TILING and linked with this file and CANN's tiling objects gets the
// TCubeTiling the open MultiCoreMatmulTiling / MatmulApiTiling compute (asc-devkit/impl/adv_api/tiling/matmul).
// Built against CANN's headers with tiling/emu_tiling_request.h forced in (-include). Our code.
#include <cstring>
#include "kernel_tiling/kernel_tiling.h"
#include "tiling/tiling_api.h"

namespace {
matmul_tiling::DataType Type(int32_t t) { return static_cast<matmul_tiling::DataType>(t); }

template <class Api>
int32_t Fill(Api& api, const AscEmuTilingRequest& r, int32_t* out, int32_t words) {
    using matmul_tiling::CubeFormat;
    using matmul_tiling::TPosition;
    api.SetAType(TPosition::GM, CubeFormat::ND, Type(r.aType), r.transA != 0);
    api.SetBType(TPosition::GM, CubeFormat::ND, Type(r.bType), r.transB != 0);
    api.SetCType(TPosition::GM, CubeFormat::ND, Type(r.cType));
    api.SetBiasType(TPosition::GM, CubeFormat::ND, Type(r.biasType));
    if (r.orgM > 0) api.SetOrgShape(r.orgM, r.orgN, r.orgKa, r.orgKb);
    api.SetShape(r.m, r.n, r.k);
    api.EnableBias(r.bias != 0);
    api.SetBufferSpace(r.l1Limit, r.l0cLimit, r.ubLimit, r.btLimit);
    if (r.fixM > 0 || r.fixN > 0 || r.fixK > 0) api.SetFixSplit(r.fixM, r.fixN, r.fixK);
    api.SetMatmulConfigParams(r.mmConfigType);
    AscendC::tiling::TCubeTiling t;  // the kernel's struct, as CANN's kernel_tiling.h generates it
    if (api.GetTiling(t) == -1) return -1;
    constexpr size_t bytes = sizeof(t);
    static_assert(bytes % 4 == 0, "TCubeTiling is int32 fields");
    if (bytes / 4 > static_cast<size_t>(words)) return -1;
    std::memcpy(out, &t, bytes);
    return static_cast<int32_t>(bytes / 4);
}
}  // namespace

extern "C" int32_t AscEmuCannTiling(const AscEmuTilingRequest* req, int32_t* out, int32_t words) {
    const AscEmuTilingRequest& r = *req;
    matmul_tiling::PlatformInfo p;
    p.socVersion = r.coupled ? platform_ascendc::SocVersion::ASCEND310P : platform_ascendc::SocVersion::ASCEND910B;
    p.l1Size = static_cast<uint64_t>(r.l1);
    p.l0CSize = static_cast<uint64_t>(r.l0c);
    p.ubSize = static_cast<uint64_t>(r.ub);
    p.l0ASize = static_cast<uint64_t>(r.l0a);
    p.l0BSize = static_cast<uint64_t>(r.l0b);
    if (r.multiCore == 0) {
        matmul_tiling::MatmulApiTiling api(p);
        return Fill(api, r, out, words);
    }
    matmul_tiling::MultiCoreMatmulTiling api(p);
    api.SetDim(r.dim);
    if (r.singleM > 0 || r.singleN > 0 || r.singleK > 0) api.SetSingleShape(r.singleM, r.singleN, r.singleK);
    return Fill(api, r, out, words);
}
