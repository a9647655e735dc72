// asc-onnx: the fp32 register helpers the pointwise, row and matmul kernels share (shipped into op_kernel/
// with each of their ops): widen an input tile, narrow a result, copy a register.
// No include guard: each kernel includes it once, and the emulator's batch programs compile several kernels
// in one unit, each kernel's copy inside a namespace of its own.

// Compare works on whole 256-byte repeats: round the fp32 count up (registers are sized for it).
__aicore__ inline uint32_t CompareCount(uint32_t count) { return (count + 63) / 64 * 64; }

template <typename T>
__aicore__ inline AscendC::LocalTensor<float> ToFloat(const AscendC::LocalTensor<T>& src,
                                                      const AscendC::LocalTensor<float>& work, uint32_t count)
{
    if constexpr (std::is_same_v<T, float>) {
        return src.template ReinterpretCast<float>();
    } else {
        AscendC::Cast(work, src, AscendC::RoundMode::CAST_NONE, count);
        return work;
    }
}

// fp32 kernels compute their outputs straight into the output tile; others into a register, then Cast.
template <typename T>
__aicore__ inline AscendC::LocalTensor<float> OutReg(const AscendC::LocalTensor<T>& out,
                                                     const AscendC::LocalTensor<float>& reg)
{
    if constexpr (std::is_same_v<T, float>) {
        return out.template ReinterpretCast<float>();
    } else {
        return reg;
    }
}

template <typename T>
__aicore__ inline void FromFloat(const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<float>& src,
                                 uint32_t count)
{
    if constexpr (std::is_same_v<T, half>) {
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_NONE, count);
    } else if constexpr (!std::is_same_v<T, float>) {
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_RINT, count);
    }
}

// An output held in a register of its own (an input passed through, or one value as two outputs).
template <typename T>
__aicore__ inline void ToTile(const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<float>& src,
                              uint32_t count)
{
    if constexpr (std::is_same_v<T, float>) {
        AscendC::Muls(dst, src, 1.0f, count);
    } else {
        FromFloat(dst, src, count);
    }
}
