// asc-onnx emulator: half and bfloat16_t as the kernels see them.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

using half = _Float16;  // IEEE binary16; arithmetic rounds to half like the vector unit's fp16 path

// bfloat16 storage type: conversions only (A2/A3 vector units have no bf16 arithmetic).
struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    explicit bfloat16_t(float f) : bits(FromFloatRint(f).bits) {}
    explicit operator float() const { return ToFloat(); }
    // Round to nearest even, NaN kept quiet (what Cast with CAST_RINT does).
    static bfloat16_t FromFloatRint(float f) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        bfloat16_t b;
        if (std::isnan(f)) {
            b.bits = static_cast<uint16_t>((u >> 16) | 0x40);
            return b;
        }
        uint32_t lsb = (u >> 16) & 1u;
        u += 0x7FFFu + lsb;
        b.bits = static_cast<uint16_t>(u >> 16);
        return b;
    }
    float ToFloat() const {
        uint32_t u = static_cast<uint32_t>(bits) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
};

namespace asc_emu {
template <typename T>
constexpr const char* TypeName() {
    if constexpr (std::is_same_v<T, float>) return "float";
    else if constexpr (std::is_same_v<T, half>) return "half";
    else if constexpr (std::is_same_v<T, bfloat16_t>) return "bfloat16_t";
    else if constexpr (std::is_same_v<T, int32_t>) return "int32_t";
    else if constexpr (std::is_same_v<T, int16_t>) return "int16_t";
    else if constexpr (std::is_same_v<T, uint8_t>) return "uint8_t";
    else return "unknown";
}
}  // namespace asc_emu
