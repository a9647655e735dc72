// asc-onnx emulator: GlobalTensor (global memory) and LocalTensor (unified buffer) views.
#pragma once
#include "emu_runtime.h"
#include "emu_types.h"

namespace AscendC {

enum class TPosition { GM, VECIN, VECOUT, VECCALC, A1, A2, B1, B2, CO1, CO2 };
using QuePosition = TPosition;

namespace emu_ub {
// The unified buffer of the running block: 512 KiB backing store, capacity set by the SoC.
alignas(64) inline uint8_t arena[512 * 1024];
inline bool IsUb(const void* p) {
    auto* a = static_cast<const uint8_t*>(p);
    return a >= arena && a < arena + sizeof(arena);
}
inline uint64_t Offset(const void* p) { return static_cast<const uint8_t*>(p) - arena; }
}  // namespace emu_ub

template <typename T>
class GlobalTensor {
public:
    __aicore__ inline void SetGlobalBuffer(__gm__ T* buffer, uint64_t size) {
        ptr_ = buffer;
        size_ = size;
    }
    __aicore__ inline void SetGlobalBuffer(__gm__ T* buffer) { SetGlobalBuffer(buffer, 0); }
    __aicore__ inline GlobalTensor operator[](uint64_t offset) const {
        GlobalTensor t;
        t.ptr_ = ptr_ + offset;
        t.size_ = size_ > offset ? size_ - offset : 0;
        return t;
    }
    __aicore__ inline T GetValue(uint64_t i) const {
        asc_emu::GmRead(ptr_ + i, sizeof(T), "GlobalTensor::GetValue");
        return ptr_[i];
    }
    __aicore__ inline void SetValue(uint64_t i, T v) const {
        asc_emu::GmWrite(ptr_ + i, sizeof(T), "GlobalTensor::SetValue");
        ptr_[i] = v;
    }
    __aicore__ inline __gm__ T* GetPhyAddr() const { return ptr_; }
    __aicore__ inline uint64_t GetSize() const { return size_; }

private:
    T* ptr_ = nullptr;
    uint64_t size_ = 0;
};

struct EmuSlot;  // queue slot bookkeeping (kernel_tpipe.h)

template <typename T>
class LocalTensor {
public:
    LocalTensor() = default;
    LocalTensor(T* p, uint32_t n, EmuSlot* slot) : ptr_(p), size_(n), slot_(slot) {}
    __aicore__ inline LocalTensor operator[](uint32_t offset) const {
        if (offset > size_) asc_emu::Fail("LocalTensor[] offset " + std::to_string(offset) + " past its " +
                                          std::to_string(size_) + " elements");
        return LocalTensor(ptr_ + offset, size_ - offset, slot_);
    }
    __aicore__ inline T GetValue(uint32_t i) const {
        Check(i);
        return ptr_[i];
    }
    __aicore__ inline void SetValue(uint32_t i, T v) const {
        Check(i);
        ptr_[i] = v;
    }
    template <typename U>
    __aicore__ inline LocalTensor<U> ReinterpretCast() const {
        return LocalTensor<U>(reinterpret_cast<U*>(ptr_), static_cast<uint32_t>(size_ * sizeof(T) / sizeof(U)),
                              slot_);
    }
    __aicore__ inline uint32_t GetSize() const { return size_; }
    __aicore__ inline T* GetPhyAddr() const { return ptr_; }
    EmuSlot* Slot() const { return slot_; }

private:
    void Check(uint32_t i) const {
        if (ptr_ == nullptr) asc_emu::Fail("LocalTensor used before it was allocated");
        if (i >= size_) asc_emu::Fail("LocalTensor index " + std::to_string(i) + " out of " + std::to_string(size_));
    }
    T* ptr_ = nullptr;
    uint32_t size_ = 0;
    EmuSlot* slot_ = nullptr;
};

}  // namespace AscendC
