// asc-onnx: the row copies every row kernel shares (shipped into op_kernel/ with each row op): rows between GM
// and UB, a weight or mask row into an fp32 register, per-row statistics out. The op's kernel class wraps each
// with its own buffers (edgeBuf, td.tileRows, pipe).
// No include guard: each kernel includes it once, and the emulator's batch programs compile several kernels
// in one unit, each kernel's copy inside a namespace of its own.

namespace asc_onnx {
using EdgeBuf = AscendC::TBuf<AscendC::TPosition::VECCALC>;

// Rows of U between GM and UB, row r at r * pitch in UB (pitch: rowStride, 32 bytes of U).
// 910B: DataCopyPad, each UB row padded to 32 bytes. 310P has no DataCopyPad and DataCopy moves whole 32-byte
// blocks: rows that are whole blocks move as one run; other rows one at a time, rounded up to whole blocks
// (the extra elements land in the row's UB padding) where that stays inside the tensor (`avail` elements from
// src), else as the row's whole blocks plus a 32-byte window ending at the row's end (in edgeBuf after
// tileRows windows), placed by the scalar unit.
template <typename U>
__aicore__ inline void LoadRows(const AscendC::LocalTensor<U>& dst, const AscendC::GlobalTensor<U>& src,
                                uint32_t rows, uint32_t len, uint32_t pitch, uint64_t avail, EdgeBuf& edgeBuf,
                                uint32_t tileRows)
{
#if __NPU_ARCH__ == 2002
    constexpr uint32_t block = 32 / sizeof(U);
    if (len % block == 0) {
        AscendC::DataCopy(dst, src, rows * len);  // pitch == len: one contiguous run
        return;
    }
    const uint32_t up = (len + block - 1) / block * block;
    const uint32_t tail = len % block;
    for (uint32_t r = 0; r < rows; ++r) {
        const uint64_t at = static_cast<uint64_t>(r) * len;
        if (at + up <= avail) {
            AscendC::DataCopy(dst[r * pitch], src[at], up);
            continue;
        }
        const AscendC::LocalTensor<U> window = edgeBuf.Get<U>()[tileRows * block];
        AscendC::DataCopy(dst[r * pitch], src[at], len - tail);  // the whole blocks
        AscendC::DataCopy(window, src[at + len - block], block);
        for (uint32_t i = 0; i < tail; ++i) {
            dst.SetValue(r * pitch + len - tail + i, window.GetValue(block - tail + i));
        }
    }
#else
    (void)pitch;
    (void)avail;
    (void)edgeBuf;
    (void)tileRows;
    AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), static_cast<uint32_t>(len * sizeof(U)), 0, 0, 0};
    AscendC::DataCopyPadExtParams<U> pad{false, 0, 0, static_cast<U>(0)};
    AscendC::DataCopyPad(dst, src, params, pad);
#endif
}

// 310P rows that end inside a 32-byte block: each row's whole blocks, then its last 32 bytes as a window the
// scalar unit gathers into edgeBuf (the windows overlap the blocks' stores: a barrier between).
template <typename U>
__aicore__ inline void StoreRows(const AscendC::GlobalTensor<U>& dst, const AscendC::LocalTensor<U>& src,
                                 uint32_t rows, uint32_t len, uint32_t pitch, EdgeBuf& edgeBuf)
{
#if __NPU_ARCH__ == 2002
    constexpr uint32_t block = 32 / sizeof(U);
    if (len % block == 0) {
        AscendC::DataCopy(dst, src, rows * len);
        return;
    }
    const AscendC::LocalTensor<U> edge = edgeBuf.Get<U>();
    const uint32_t head = len / block * block;
    for (uint32_t r = 0; r < rows; ++r) {
        AscendC::DataCopy(dst[static_cast<uint64_t>(r) * len], src[r * pitch], head);
        for (uint32_t i = 0; i < block; ++i) edge.SetValue(r * block + i, src.GetValue(r * pitch + len - block + i));
    }
    AscendC::PipeBarrier<PIPE_MTE3>();
    for (uint32_t r = 0; r < rows; ++r) {
        AscendC::DataCopy(dst[static_cast<uint64_t>(r) * len + len - block], edge[r * block], block);
    }
#else
    (void)pitch;
    (void)edgeBuf;
    AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), static_cast<uint32_t>(len * sizeof(U)), 0, 0, 0};
    AscendC::DataCopyPad(dst, src, params);
#endif
}

// One resident mask row (or weight chunk) into an fp32 register row.
template <typename U>
__aicore__ inline void RowToFloat(const AscendC::LocalTensor<float>& dst, const AscendC::LocalTensor<U>& src,
                                  uint32_t len)
{
    if constexpr (std::is_same_v<U, float>) {
        AscendC::Adds(dst, src, 0.0f, len);
    } else {
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_NONE, len);
    }
}

// One statistic per row, from the first element of each slot of statSlot elements (910B only: the tiling
// refuses 310P).
template <uint32_t statSlot, typename T>
__aicore__ inline void StoreStats(const AscendC::GlobalTensor<T>& dst, const AscendC::LocalTensor<T>& src,
                                  uint32_t rows)
{
#if __NPU_ARCH__ != 2002
    // A UB row of one element is padded to 32 bytes.
    constexpr uint32_t gap = statSlot * sizeof(T) / 32 - 1;
    AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), static_cast<uint32_t>(sizeof(T)), gap, 0, 0};
    AscendC::DataCopyPad(dst, src, params);
#else
    (void)dst;
    (void)src;
    (void)rows;
#endif
}

// A weight row (or a chunk of it) into an fp32 register, through `stage` where T is not fp32. The vector unit
// may still read the previous chunk, and must not read this one before the copy lands: a flag each way.
template <typename T>
__aicore__ inline void LoadWeight(AscendC::TPipe& pipe, const AscendC::GlobalTensor<T>& src,
                                  const AscendC::LocalTensor<float>& dst, const AscendC::LocalTensor<T>& stage,
                                  uint32_t len, uint64_t avail, EdgeBuf& edgeBuf, uint32_t tileRows)
{
    const auto freeId = pipe.FetchEventID(AscendC::HardEvent::V_MTE2);
    AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(freeId);
    AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(freeId);
    if constexpr (std::is_same_v<T, float>) {
        LoadRows(dst, src, 1, len, len, avail, edgeBuf, tileRows);
    } else {
        LoadRows(stage, src, 1, len, len, avail, edgeBuf, tileRows);
    }
    const auto readyId = pipe.FetchEventID(AscendC::HardEvent::MTE2_V);
    AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(readyId);
    AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(readyId);
    if constexpr (!std::is_same_v<T, float>) {
        AscendC::Cast(dst, stage, AscendC::RoundMode::CAST_NONE, len);
    }
}
}  // namespace asc_onnx
