// asc-onnx emulator: the SoC families the host tiling APIs tell apart (platform_ascendc::SocVersion). Our code.
#pragma once

namespace platform_ascendc {
enum class SocVersion { ASCEND910B, ASCEND310P, RESERVED_VERSION };
enum class CoreMemType { L0_A, L0_B, L0_C, L1, L2, UB, HBM, RESERVED };
}  // namespace platform_ascendc
