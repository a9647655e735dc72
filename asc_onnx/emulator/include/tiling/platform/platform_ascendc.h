// asc-onnx emulator: the host's platform queries (platform_ascendc::PlatformAscendC) for the SoCs we emulate, from
// the chip's name as CANN's PlatformAscendCManager takes it, or the one the program is built for. The counts
// follow the timing table a run is given (cores, cube_cores), so a host program sizes its launch for the chip the
// emulator times. Our code, after CANN's tiling/platform/platform_ascendc.h interface.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "emu_runtime.h"
#include "tiling/platform/soc_version.h"

namespace platform_ascendc {
inline namespace emu {  // (beside CANN's own, see tiling/tiling_api.h)
class PlatformAscendC {
public:
    explicit PlatformAscendC(std::string name) : name_(std::move(name)) {}
    SocVersion GetSocVersion() const { return Coupled() ? SocVersion::ASCEND310P : SocVersion::ASCEND910B; }
    // AI Cores (310P) or vector cores (910B), as the chip's table says.
    uint32_t GetCoreNum() const { return static_cast<uint32_t>(asc_emu::St().tm.cores); }
    uint32_t GetCoreNumAic() const {
        return static_cast<uint32_t>(Coupled() ? asc_emu::St().tm.cores : asc_emu::St().tm.cubeCores);
    }
    uint32_t GetCoreNumAiv() const { return static_cast<uint32_t>(asc_emu::St().tm.cores); }
    // The system workspace the high-level APIs take (16 MB on 910B, none on 310P; GetLibApiWorkSpaceSize.md).
    uint32_t GetLibApiWorkSpaceSize() const { return Coupled() ? 0u : 16u * 1024 * 1024; }
    void GetCoreMemSize(CoreMemType type, uint64_t& size) const {
        const bool c = Coupled();
        switch (type) {
            case CoreMemType::L0_A: case CoreMemType::L0_B: size = 65536; break;
            case CoreMemType::L0_C: size = c ? 262144 : 131072; break;
            case CoreMemType::L1: size = c ? 1048576 : 524288; break;
            case CoreMemType::UB: size = c ? 262144 : 196352; break;  // 910B: less the KFC's 256 B
            default: size = 0;
        }
    }
    const std::string& Name() const { return name_; }

private:
    bool Coupled() const { return asc_emu::St().tm.coupled; }
    std::string name_;
};

class PlatformAscendCManager {
public:
    // The platform of `name` ("Ascend910B1", "Ascend310P3" ...); one object per name for the program's life. A name
    // of a SoC the program is not built for is refused: its kernels are compiled for one architecture.
    static PlatformAscendC* GetInstance(const char* name = nullptr) {
        static std::map<std::string, std::unique_ptr<PlatformAscendC>> all;
        const std::string n = name != nullptr ? name : "";
#if __NPU_ARCH__ == 2002
        const bool ok = n.empty() || n.rfind("Ascend310P", 0) == 0;
#else
        const bool ok = n.empty() || n.rfind("Ascend910B", 0) == 0 || n.rfind("Ascend910_93", 0) == 0;
#endif
        if (!ok) {
            std::fprintf(stderr, "PlatformAscendCManager::GetInstance(\"%s\"): not the SoC this program is built for "
                                 "(__NPU_ARCH__ %d)\n", n.c_str(), __NPU_ARCH__);
            std::abort();
        }
        auto& p = all[n];
        if (!p) p = std::make_unique<PlatformAscendC>(n);
        return p.get();
    }
};
}  // namespace emu
}  // namespace platform_ascendc
