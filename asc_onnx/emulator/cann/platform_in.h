// The platform numbers the tiling programs read after each case: coupled l1 l0a l0b l0c ub. Our code.
#pragma once
#include <cstdint>
#include <iostream>

#include "tiling/tiling_api.h"

// Reads them into `p`; false at the end of the input.
inline bool ReadPlatform(std::istream& in, matmul_tiling::PlatformInfo& p, bool& coupled) {
    uint64_t isCoupled, l1, l0a, l0b, l0c, ub;
    if (!(in >> isCoupled >> l1 >> l0a >> l0b >> l0c >> ub)) return false;
    coupled = isCoupled != 0;
    p.socVersion = coupled ? platform_ascendc::SocVersion::ASCEND310P : platform_ascendc::SocVersion::ASCEND910B;
    p.l1Size = l1;
    p.l0ASize = l0a;
    p.l0BSize = l0b;
    p.l0CSize = l0c;
    p.ubSize = ub;
    return true;
}
