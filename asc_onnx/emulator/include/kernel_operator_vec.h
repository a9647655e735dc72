// asc-onnx emulator: level-2 vector instructions Op(dst, src..., count) on unified-buffer tensors.
// Operands must be 32-byte aligned; dst may alias a source only completely (same start).
#pragma once
#include <algorithm>
#include <cmath>

#include "kernel_tensor.h"

namespace AscendC {

enum class RoundMode { CAST_NONE, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };

namespace emu_vec {

template <typename T>
void Operand(const char* api, const LocalTensor<T>& t, uint32_t count) {
    if (t.GetPhyAddr() == nullptr) asc_emu::Fail(std::string(api) + ": operand not allocated");
    if (!emu_ub::IsUb(t.GetPhyAddr())) asc_emu::Fail(std::string(api) + ": operand is not in the unified buffer");
    if (emu_ub::Offset(t.GetPhyAddr()) % 32 != 0)
        asc_emu::Fail(std::string(api) + ": operand address " + std::to_string(emu_ub::Offset(t.GetPhyAddr())) +
                      " is not 32-byte aligned");
    if (count > t.GetSize())
        asc_emu::Fail(std::string(api) + ": count " + std::to_string(count) + " exceeds the operand's " +
                      std::to_string(t.GetSize()) + " elements");
}

template <typename D, typename S>
void NoPartialOverlap(const char* api, const LocalTensor<D>& d, const LocalTensor<S>& s, uint32_t count) {
    auto d0 = reinterpret_cast<uintptr_t>(d.GetPhyAddr()), d1 = d0 + count * sizeof(D);
    auto s0 = reinterpret_cast<uintptr_t>(s.GetPhyAddr()), s1 = s0 + count * sizeof(S);
    if (d0 < s1 && s0 < d1 && !(d0 == s0 && sizeof(D) == sizeof(S)))
        asc_emu::Fail(std::string(api) + ": destination partially overlaps a source");
}

// Bytes from an operand's start to the end of the last 32-byte block `repeats` repeats of `blocks` blocks touch
// (blkStride between a repeat's blocks, repStride between repeats, both in blocks: 高维切分.md).
inline uint64_t RepeatSpan(uint32_t repeats, uint32_t blocks, uint32_t blkStride, uint32_t repStride) {
    if (repeats == 0 || blocks == 0) return 0;
    return (static_cast<uint64_t>(repeats - 1) * repStride + static_cast<uint64_t>(blocks - 1) * blkStride) * 32 + 32;
}

// The transcendental and divide APIs take more than one cycle per repeat (the timing model's vecSlowRepeat).
inline bool SlowApi(const char* api) {
    static const char* slow[] = {"Exp", "Ln", "Sqrt", "Rsqrt", "Div", "Reciprocal"};
    for (const char* s : slow)
        if (std::strcmp(api, s) == 0) return true;
    return false;
}

// Issue one vector instruction: reads of every source, then the write of dst, on the V pipe.
template <typename D>
void VecAccess(const char* api, const asc_emu::Loc& loc, const LocalTensor<D>& dst, uint64_t dstBytes,
               std::initializer_list<std::pair<const void*, uint64_t>> srcs) {
    const int32_t op = asc_emu::Issue(asc_emu::PV, api, loc);
    uint64_t widest = dstBytes;
    for (auto& s : srcs) {
        asc_emu::UbAccess(op, emu_ub::Offset(s.first), s.second, false);
        widest = std::max(widest, s.second);
    }
    asc_emu::UbAccess(op, emu_ub::Offset(dst.GetPhyAddr()), dstBytes, true);
    asc_emu::VecCost(widest, SlowApi(api));
}

// 310P's AI Core computes in saturation mode only ("AI Core仅支持饱和模式", docs: 如何在矢量编程时启用
// Vector-Core.md): a result beyond the type's range becomes its largest finite value, not inf.
template <typename T>
T Sat(T v) {
#if __NPU_ARCH__ == 2002
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, half>) {
        const float f = static_cast<float>(v);
        const float top = std::is_same_v<T, half> ? 65504.0f : 3.40282347e38f;
        if (std::isinf(f)) return static_cast<T>(f > 0 ? top : -top);
    }
#endif
    return v;
}

// Per-API element types of dav_c220/dav_m200 (LeakyRelu: half/float; Relu: half/float/int32).
template <typename T>
constexpr int FloatOnly(const char*) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, half>, "this API takes half or float only");
    return 0;
}
template <typename T>
constexpr int NotInt16(const char*) {
    static_assert(!std::is_same_v<T, int16_t>, "this API does not take int16_t");
    return 0;
}

template <typename T>
constexpr bool IsFloat() {
    return std::is_same_v<T, float> || std::is_same_v<T, half>;
}

template <typename T>
void RequireDtype(const char* api, bool floatOnly) {
    constexpr bool ok = std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, int32_t> ||
                        std::is_same_v<T, int16_t>;
    if (!ok || (floatOnly && !IsFloat<T>()))
        asc_emu::Fail(std::string(api) + " does not take " + asc_emu::TypeName<T>() + " operands");
}

template <typename T, typename F>
void Binary(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b,
            uint32_t count, bool floatOnly, F f, const asc_emu::Loc& loc) {
    RequireDtype<T>(api, floatOnly);
    Operand(api, dst, count), Operand(api, a, count), Operand(api, b, count);
    NoPartialOverlap(api, dst, a, count), NoPartialOverlap(api, dst, b, count);
    VecAccess(api, loc, dst, count * sizeof(T), {{a.GetPhyAddr(), count * sizeof(T)}, {b.GetPhyAddr(), count * sizeof(T)}});
    const uint64_t bytes = static_cast<uint64_t>(count) * sizeof(T);
    asc_emu::Spend(asc_emu::PV, asc_emu::BankConflictBeats({emu_ub::Offset(dst.GetPhyAddr())},
                                                           {emu_ub::Offset(a.GetPhyAddr())},
                                                           {emu_ub::Offset(b.GetPhyAddr())},
                                                           static_cast<uint32_t>((bytes + 255) / 256),
                                                           static_cast<uint32_t>(std::min<uint64_t>(8, (bytes + 31) / 32))));
    T* d = dst.GetPhyAddr();
    const T *x = a.GetPhyAddr(), *y = b.GetPhyAddr();
    if (asc_emu::Values())
        for (uint32_t i = 0; i < count; ++i) d[i] = Sat(f(x[i], y[i]));
    asc_emu::CountVec(api, count);
}

template <typename T, typename F>
void Unary(const char* api, const LocalTensor<T>& dst, const LocalTensor<T>& a, uint32_t count, bool floatOnly, F f,
           const asc_emu::Loc& loc) {
    RequireDtype<T>(api, floatOnly);
    Operand(api, dst, count), Operand(api, a, count);
    NoPartialOverlap(api, dst, a, count);
    VecAccess(api, loc, dst, count * sizeof(T), {{a.GetPhyAddr(), count * sizeof(T)}});
    T* d = dst.GetPhyAddr();
    const T* x = a.GetPhyAddr();
    if (asc_emu::Values())
        for (uint32_t i = 0; i < count; ++i) d[i] = Sat(f(x[i]));
    asc_emu::CountVec(api, count);
}

// Transcendentals evaluate in float and round once to T (fp16 results as the vector unit rounds them).
template <typename T>
T Via(float v) {
    return static_cast<T>(v);
}

}  // namespace emu_vec

#define ASC_EMU_BINARY(NAME, FLOAT_ONLY, EXPR)                                                              \
    template <typename T>                                                                                   \
    __aicore__ inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, \
                                const int32_t& count, asc_emu::Loc loc = ASC_EMU_HERE) {                   \
        emu_vec::Binary(#NAME, dst, src0, src1, static_cast<uint32_t>(count), FLOAT_ONLY,                    \
                        [](T a, T b) -> T { return EXPR; }, loc);                                            \
    }
ASC_EMU_BINARY(Add, false, static_cast<T>(a + b))
ASC_EMU_BINARY(Sub, false, static_cast<T>(a - b))
ASC_EMU_BINARY(Mul, false, static_cast<T>(a * b))
ASC_EMU_BINARY(Div, true, static_cast<T>(a / b))
ASC_EMU_BINARY(Max, false, (a > b || std::isnan(static_cast<float>(a))) ? a : b)
ASC_EMU_BINARY(Min, false, (a < b || std::isnan(static_cast<float>(a))) ? a : b)
#undef ASC_EMU_BINARY

#define ASC_EMU_SCALAR(NAME, EXPR)                                                                              \
    template <typename T, typename U>                                                                           \
    __aicore__ inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const U& scalarValue,       \
                                const int32_t& count, asc_emu::Loc loc = ASC_EMU_HERE) {                       \
        static_assert(std::is_same_v<U, T>, #NAME ": the scalar must have the tensor's element type");          \
        const T s = scalarValue;                                                                                \
        emu_vec::Unary(#NAME, dst, src, static_cast<uint32_t>(count), false, [s](T a) -> T { return EXPR; }, loc); \
    }
ASC_EMU_SCALAR(Adds, static_cast<T>(a + s))
ASC_EMU_SCALAR(Muls, static_cast<T>(a * s))
ASC_EMU_SCALAR(Maxs, (a > s || std::isnan(static_cast<float>(a))) ? a : s)
ASC_EMU_SCALAR(Mins, (a < s || std::isnan(static_cast<float>(a))) ? a : s)
ASC_EMU_SCALAR(LeakyRelu, (emu_vec::FloatOnly<T>("LeakyRelu"), a >= T(0) ? a : static_cast<T>(a * s)))
#undef ASC_EMU_SCALAR

#define ASC_EMU_UNARY(NAME, FLOAT_ONLY, EXPR)                                                                  \
    template <typename T>                                                                                      \
    __aicore__ inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count,     \
                                asc_emu::Loc loc = ASC_EMU_HERE) {                                             \
        emu_vec::Unary(#NAME, dst, src, static_cast<uint32_t>(count), FLOAT_ONLY, [](T a) -> T { return EXPR; }, loc); \
    }
ASC_EMU_UNARY(Exp, true, emu_vec::Via<T>(std::exp(static_cast<float>(a))))
ASC_EMU_UNARY(Ln, true, emu_vec::Via<T>(std::log(static_cast<float>(a))))
ASC_EMU_UNARY(Abs, true, emu_vec::Via<T>(std::fabs(static_cast<float>(a))))
ASC_EMU_UNARY(Sqrt, true, emu_vec::Via<T>(std::sqrt(static_cast<float>(a))))
ASC_EMU_UNARY(Rsqrt, true, emu_vec::Via<T>(1.0f / std::sqrt(static_cast<float>(a))))
ASC_EMU_UNARY(Reciprocal, true, emu_vec::Via<T>(1.0f / static_cast<float>(a)))
ASC_EMU_UNARY(Relu, false, (emu_vec::NotInt16<T>("Relu"), a > T(0) ? a : T(0)))
#undef ASC_EMU_UNARY

// The scalar is `const T&`, as in CANN: a float literal into a half tensor does not compile.
template <typename T>
__aicore__ inline void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, const int32_t& count,
                                 asc_emu::Loc loc = ASC_EMU_HERE) {
    emu_vec::Operand("Duplicate", dst, static_cast<uint32_t>(count));
    emu_vec::VecAccess("Duplicate", loc, dst, count * sizeof(T), {});
    T v;
    if constexpr (std::is_same_v<T, bfloat16_t>) v = bfloat16_t::FromFloatRint(static_cast<float>(scalarValue));
    else v = static_cast<T>(scalarValue);
    for (int32_t i = 0; i < count; ++i) dst.GetPhyAddr()[i] = v;
    asc_emu::CountVec("Duplicate", count);
}

// Cast between the pairs the generator uses; anything else is refused, like a missing hardware path.
template <typename D, typename S>
__aicore__ inline void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, const RoundMode& mode,
                            const uint32_t& count, asc_emu::Loc loc = ASC_EMU_HERE) {
    emu_vec::Operand("Cast", dst, count), emu_vec::Operand("Cast", src, count);
    emu_vec::NoPartialOverlap("Cast", dst, src, count);
    emu_vec::VecAccess("Cast", loc, dst, count * sizeof(D), {{src.GetPhyAddr(), count * sizeof(S)}});
    const bool is310p = !asc_emu::St().soc.hasBf16;
    D* d = dst.GetPhyAddr();
    const S* s = src.GetPhyAddr();
    if constexpr (std::is_same_v<D, float> && std::is_same_v<S, half>) {
        if (mode != RoundMode::CAST_NONE) asc_emu::Fail("Cast half->float takes CAST_NONE only");
        for (uint32_t i = 0; i < count; ++i) d[i] = static_cast<float>(s[i]);
    } else if constexpr (std::is_same_v<D, half> && std::is_same_v<S, float>) {
        if (mode != RoundMode::CAST_NONE && mode != RoundMode::CAST_RINT)
            asc_emu::Fail("Cast float->half: only CAST_NONE and CAST_RINT are emulated");
        if (is310p && mode == RoundMode::CAST_RINT) asc_emu::Fail("Cast float->half on 310P takes CAST_NONE or CAST_ODD");
        for (uint32_t i = 0; i < count; ++i) d[i] = emu_vec::Sat(static_cast<half>(s[i]));  // nearest even
    } else if constexpr (std::is_same_v<D, float> && std::is_same_v<S, bfloat16_t>) {
        if (is310p) asc_emu::Fail("bfloat16 is not supported on " + asc_emu::St().soc.name);
        if (mode != RoundMode::CAST_NONE) asc_emu::Fail("Cast bf16->float takes CAST_NONE only");
        for (uint32_t i = 0; i < count; ++i) d[i] = s[i].ToFloat();
    } else if constexpr (std::is_same_v<D, bfloat16_t> && std::is_same_v<S, float>) {
        if (is310p) asc_emu::Fail("bfloat16 is not supported on " + asc_emu::St().soc.name);
        if (mode == RoundMode::CAST_NONE) asc_emu::Fail("Cast float->bf16 does not allow CAST_NONE");
        if (mode != RoundMode::CAST_RINT) asc_emu::Fail("Cast float->bf16: only CAST_RINT is emulated");
        for (uint32_t i = 0; i < count; ++i) d[i] = bfloat16_t::FromFloatRint(s[i]);
    } else if constexpr (std::is_same_v<D, int32_t> && std::is_same_v<S, float>) {
        // vconv_f322s32{r,f,c,a,z} on both SoCs (dav_c220 and dav_m200 vconv_impl.h; Cast.md's 310P table omits
        // the pair, the dav_m200 source and its Floor implement it); CAST_NONE and CAST_ODD are refused there.
        // Out of range saturates and NaN gives 0 (precision_conversion.md: 溢出默认按照饱和模式处理; the A2/A3
        // boundary-value appendix: +-inf -> INT32_MAX/MIN, nan -> 0). Our kernels discard those lanes anyway.
        for (uint32_t i = 0; i < count; ++i) {
            const float v = s[i];
            float r;
            switch (mode) {
                case RoundMode::CAST_RINT: r = std::nearbyint(v); break;
                case RoundMode::CAST_FLOOR: r = std::floor(v); break;
                case RoundMode::CAST_CEIL: r = std::ceil(v); break;
                case RoundMode::CAST_ROUND: r = std::round(v); break;
                case RoundMode::CAST_TRUNC: r = std::trunc(v); break;
                default: asc_emu::Fail("Cast float->int32_t takes CAST_RINT/FLOOR/CEIL/ROUND/TRUNC"); r = 0;
            }
            d[i] = std::isnan(r) ? 0 : r >= 2147483648.0f ? INT32_MAX : r < -2147483648.0f ? INT32_MIN
                                                                                              : static_cast<int32_t>(r);
        }
    } else if constexpr (std::is_same_v<D, float> && std::is_same_v<S, int32_t>) {
        // dav_m200 takes CAST_NONE only (vconv_s322f32); dav_c220 also the rounding modes (not emulated)
        if (mode != RoundMode::CAST_NONE) asc_emu::Fail("Cast int32_t->float: only CAST_NONE is emulated");
        for (uint32_t i = 0; i < count; ++i) d[i] = static_cast<float>(s[i]);  // nearest even
    } else {
        static_assert(sizeof(D) == 0, "Cast pair not emulated");
    }
    asc_emu::CountVec("Cast", count);
}

enum class CMPMODE { LT, GT, EQ, LE, GE, NE };
enum class SELMODE { VSEL_CMPMASK_SPR, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };

namespace emu_vec {
inline bool Cmp(float a, float b, CMPMODE m) {
    switch (m) {
        case CMPMODE::LT: return a < b;
        case CMPMODE::GT: return a > b;
        case CMPMODE::EQ: return a == b;
        case CMPMODE::LE: return a <= b;
        case CMPMODE::GE: return a >= b;
        default: return a != b;
    }
}
// Compare/Compares write one mask bit per element and compute whole 256-byte repeats only:
// the part of count that does not fill a repeat is silently not computed (cann_facts §5.1).
template <typename T, typename F>
void CompareImpl(const char* api, const LocalTensor<uint8_t>& dst, const LocalTensor<T>& a, uint32_t count, F rhs,
                 CMPMODE mode, const void* b, const asc_emu::Loc& loc) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, half>, "Compare takes half or float");
    Operand(api, a, count);
    Operand(api, dst, (count + 7) / 8);
    if (reinterpret_cast<const uint8_t*>(dst.GetPhyAddr()) < reinterpret_cast<const uint8_t*>(a.GetPhyAddr()) + count * sizeof(T) &&
        reinterpret_cast<const uint8_t*>(a.GetPhyAddr()) < dst.GetPhyAddr() + (count + 7) / 8)
        asc_emu::Fail(std::string(api) + ": the mask it writes overlaps its source");
    if (b != nullptr && reinterpret_cast<const uint8_t*>(dst.GetPhyAddr()) < static_cast<const uint8_t*>(b) + count * sizeof(T) &&
        static_cast<const uint8_t*>(b) < dst.GetPhyAddr() + (count + 7) / 8)
        asc_emu::Fail(std::string(api) + ": the mask it writes overlaps its source");
    if (b != nullptr) VecAccess(api, loc, dst, (count + 7) / 8, {{a.GetPhyAddr(), count * sizeof(T)}, {b, count * sizeof(T)}});
    else VecAccess(api, loc, dst, (count + 7) / 8, {{a.GetPhyAddr(), count * sizeof(T)}});
    const uint32_t done = static_cast<uint32_t>(count * sizeof(T) / 256 * 256 / sizeof(T));
    uint8_t* bits = dst.GetPhyAddr();
    for (uint32_t i = 0; i < done; ++i) {
        const bool v = Cmp(static_cast<float>(a.GetPhyAddr()[i]), static_cast<float>(rhs(i)), mode);
        bits[i / 8] = static_cast<uint8_t>(v ? (bits[i / 8] | (1u << (i % 8))) : (bits[i / 8] & ~(1u << (i % 8))));
    }
    asc_emu::CountVec(api, count);
}
}  // namespace emu_vec

template <typename T>
__aicore__ inline void Compare(const LocalTensor<uint8_t>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,
                               CMPMODE mode, uint32_t count, asc_emu::Loc loc = ASC_EMU_HERE) {
    emu_vec::Operand("Compare", src1, count);
    const T* b = src1.GetPhyAddr();
    emu_vec::CompareImpl("Compare", dst, src0, count, [b](uint32_t i) { return b[i]; }, mode, b, loc);
}

template <typename T>
__aicore__ inline void Compares(const LocalTensor<uint8_t>& dst, const LocalTensor<T>& src0, const T scalar,
                                CMPMODE mode, uint32_t count, asc_emu::Loc loc = ASC_EMU_HERE) {
    const T s = scalar;
    emu_vec::CompareImpl("Compares", dst, src0, count, [s](uint32_t) { return s; }, mode, nullptr, loc);
}

// Select: dst[i] = mask bit i ? src0[i] : src1[i].
template <typename T>
__aicore__ inline void Select(const LocalTensor<T>& dst, const LocalTensor<uint8_t>& mask, const LocalTensor<T>& src0,
                              const LocalTensor<T>& src1, SELMODE mode, uint32_t count, asc_emu::Loc loc = ASC_EMU_HERE) {
    if (mode != SELMODE::VSEL_TENSOR_TENSOR_MODE) asc_emu::Fail("Select: only VSEL_TENSOR_TENSOR_MODE is emulated");
    // Tensor-tensor mode first writes the mask's address into 128 bytes at TMP_UB_OFFSET with a Duplicate
    // (impl/basic_api/dav_c220 and dav_m200 kernel_operator_vec_cmpsel_impl.h): UB that must stay free.
    const uint32_t tmp = asc_emu::St().soc.tmpUbOffset;
    if (asc_emu::St().ubUsed > tmp)
        asc_emu::Fail("Select at " + loc.Str() + " writes 128 bytes at unified-buffer offset " + std::to_string(tmp) +
                      " (TMP_UB_OFFSET), inside the kernel's own buffers (" + std::to_string(asc_emu::St().ubUsed) +
                      " bytes allocated): reserve 8 KB (ReserveLocalMemory(RESERVED_SIZE_8K)) on the host");
    emu_vec::VecAccess("Select", loc, dst, count * sizeof(T),
                       {{src0.GetPhyAddr(), count * sizeof(T)}, {src1.GetPhyAddr(), count * sizeof(T)},
                        {mask.GetPhyAddr(), (count + 7) / 8}});
    emu_vec::Operand("Select", dst, count), emu_vec::Operand("Select", src0, count);
    emu_vec::Operand("Select", src1, count), emu_vec::Operand("Select", mask, (count + 7) / 8);
    emu_vec::NoPartialOverlap("Select", dst, src0, count), emu_vec::NoPartialOverlap("Select", dst, src1, count);
    if (reinterpret_cast<const uint8_t*>(dst.GetPhyAddr()) < mask.GetPhyAddr() + (count + 7) / 8 &&
        mask.GetPhyAddr() < reinterpret_cast<const uint8_t*>(dst.GetPhyAddr()) + count * sizeof(T))
        asc_emu::Fail("Select: its destination overlaps the mask it reads");
    const uint8_t* bits = mask.GetPhyAddr();
    for (uint32_t i = 0; i < count; ++i)
        dst.GetPhyAddr()[i] = ((bits[i / 8] >> (i % 8)) & 1u) ? src0.GetPhyAddr()[i] : src1.GetPhyAddr()[i];
    asc_emu::CountVec("Select", count);
}

}  // namespace AscendC
