// asc-onnx emulator: GlobalTensor (global memory) and LocalTensor (unified buffer) views.
#pragma once
#include "emu_runtime.h"
#include "emu_types.h"

namespace AscendC {

enum class TPosition { GM, VECIN, VECOUT, VECCALC, A1, A2, B1, B2, CO1, CO2 };
using QuePosition = TPosition;

// L2 use of a GlobalTensor's DMA (impl/basic_api/utils/kernel_utils_macros.h values). On 2201 CACHE_MODE_DISABLE
// moves the address into the window that bypasses L2 (L2CacheAlter): reads through it do not allocate lines.
enum class CacheMode { CACHE_MODE_DISABLE = 0, CACHE_MODE_NORMAL = 1, CACHE_MODE_LAST = 2, CACHE_MODE_PERSISTENT = 4 };

namespace emu_ub {
// The unified buffer of the running block: 512 KiB backing store, capacity set by the SoC.
alignas(64) inline uint8_t arena[512 * 1024];
inline bool IsUb(const void* p) {
    auto* a = static_cast<const uint8_t*>(p);
    return a >= arena && a < arena + sizeof(arena);
}
inline uint64_t Offset(const void* p) { return static_cast<const uint8_t*>(p) - arena; }
}  // namespace emu_ub

namespace emu_l1 {
// The L1 Buffer of the running block's cube core: 1 MiB backing store, capacity set by the SoC.
alignas(64) inline uint8_t arena[1024 * 1024];
inline bool IsL1(const void* p) {
    auto* a = static_cast<const uint8_t*>(p);
    return a >= arena && a < arena + sizeof(arena);
}
inline uint64_t Offset(const void* p) { return static_cast<const uint8_t*>(p) - arena; }
}  // namespace emu_l1

namespace emu_l0 {
// The cube core's L0A (A2), L0B (B2) and L0C (CO1) buffers of the running block, capacities set by the SoC.
alignas(64) inline uint8_t a[64 * 1024];
alignas(64) inline uint8_t b[64 * 1024];
alignas(64) inline uint8_t c[256 * 1024];
inline bool In(const void* p, const uint8_t* base, size_t n) {
    auto* x = static_cast<const uint8_t*>(p);
    return x >= base && x < base + n;
}
inline bool IsA(const void* p) { return In(p, a, sizeof(a)); }
inline bool IsB(const void* p) { return In(p, b, sizeof(b)); }
inline bool IsC(const void* p) { return In(p, c, sizeof(c)); }
inline uint64_t Offset(const void* p) {
    auto* x = static_cast<const uint8_t*>(p);
    return IsA(p) ? x - a : IsB(p) ? x - b : x - c;
}
}  // namespace emu_l0

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
        t.cacheMode_ = cacheMode_;
        return t;
    }
    // The DMA of this view meets L2 as `mode` says (SetL2CacheHint.md); the emulator honours DISABLE on reads.
    __aicore__ inline void SetL2CacheHint(CacheMode mode) { cacheMode_ = mode; }
    __aicore__ inline CacheMode GetCacheMode() const { return cacheMode_; }
    bool EmuBypassL2() const { return cacheMode_ == CacheMode::CACHE_MODE_DISABLE && asc_emu::St().soc.name != "Ascend310P"; }
    // Scalar reads and writes of global memory go through the core's data cache (64-byte lines): a
    // SetValue reaches GM only when DataCacheCleanAndInvalid cleans its line (docs: GlobalTensor/SetValue.md).
    __aicore__ inline T GetValue(uint64_t i, asc_emu::Loc loc = ASC_EMU_HERE) const {
        asc_emu::Issue(asc_emu::PS, "GlobalTensor::GetValue", loc);
        asc_emu::CrossCore(asc_emu::FindGm(ptr_ + i, sizeof(T), "GlobalTensor::GetValue"), ptr_ + i, sizeof(T),
                           "GlobalTensor::GetValue", false);
        asc_emu::St().scalarInstr += 1;
        T v;
        std::memcpy(&v, ptr_ + i, sizeof(T));
        auto a = reinterpret_cast<uintptr_t>(ptr_ + i);
        auto it = asc_emu::St().pipes.cache.find(a / 64);
        if (it != asc_emu::St().pipes.cache.end()) {
            for (size_t k = 0; k < sizeof(T); ++k) {
                if (it->second.dirty >> ((a + k) % 64) & 1u) reinterpret_cast<uint8_t*>(&v)[k] = it->second.data[(a + k) % 64];
            }
        } else {
            asc_emu::St().gmReadBytes += sizeof(T);
        }
        return v;
    }
    __aicore__ inline void SetValue(uint64_t i, T v, asc_emu::Loc loc = ASC_EMU_HERE) {  // non-const, as in CANN
        const int32_t op = asc_emu::Issue(asc_emu::PS, "GlobalTensor::SetValue", loc);
        asc_emu::GmBuffer& b = asc_emu::FindGm(ptr_ + i, sizeof(T), "GlobalTensor::SetValue");
        if (!b.output) asc_emu::Fail("GlobalTensor::SetValue: write into input tensor '" + b.name + "'");
        asc_emu::St().scalarInstr += 1;
        auto a = reinterpret_cast<uintptr_t>(ptr_ + i);
        asc_emu::CacheLine& line = asc_emu::St().pipes.cache[a / 64];
        for (size_t k = 0; k < sizeof(T); ++k) {
            line.data[(a + k) % 64] = reinterpret_cast<const uint8_t*>(&v)[k];
            line.dirty |= 1ull << ((a + k) % 64);
        }
        line.op = op;
    }
    __aicore__ inline __gm__ T* GetPhyAddr() const { return ptr_; }
    __aicore__ inline uint64_t GetSize() const { return size_; }

private:
    T* ptr_ = nullptr;
    uint64_t size_ = 0;
    CacheMode cacheMode_ = CacheMode::CACHE_MODE_NORMAL;
};

struct EmuSlot;  // queue slot bookkeeping (kernel_tpipe.h)

template <typename T>
class LocalTensor {
public:
    LocalTensor() = default;
    LocalTensor(T* p, uint32_t n, EmuSlot* slot) : ptr_(p), size_(n), slot_(slot) {}
    // A tensor at a fixed unified-buffer address, no TPipe (静态Tensor编程): `addr` in bytes, `tileSize` elements.
    // The address must be 32-byte aligned and the tensor inside the SoC's UB.
    // VECIN/VECOUT/VECCALC are the unified buffer, A1/B1 the cube core's L1 Buffer, A2/B2/CO1 its L0A/L0B/L0C.
    LocalTensor(TPosition pos, uint32_t addr, uint32_t tileSize) : size_(tileSize) {
        const auto& soc = asc_emu::St().soc;
        uint8_t* base = nullptr;
        uint64_t cap = 0;
        const char* where = nullptr;
        switch (pos) {
            case TPosition::VECIN: case TPosition::VECOUT: case TPosition::VECCALC:
                base = emu_ub::arena, cap = soc.ubPhysical, where = "unified buffer"; break;
            case TPosition::A1: case TPosition::B1: base = emu_l1::arena, cap = soc.l1Physical, where = "L1 Buffer"; break;
            case TPosition::A2: base = emu_l0::a, cap = soc.l0aBytes, where = "L0A Buffer"; break;
            case TPosition::B2: base = emu_l0::b, cap = soc.l0bBytes, where = "L0B Buffer"; break;
            case TPosition::CO1: base = emu_l0::c, cap = soc.l0cBytes, where = "L0C Buffer"; break;
            default:
                asc_emu::Fail("LocalTensor(TPosition, addr, tileSize): GM and CO2 are no local memory of a static "
                              "tensor");
        }
        if (tileSize == 0 || tileSize * sizeof(T) % 32 != 0)  // (kernel_tensor_impl.h's checks)
            asc_emu::Fail("LocalTensor(TPosition, addr, tileSize): tileSize " + std::to_string(tileSize) +
                          " elements is not a positive multiple of 32 bytes");
        if (addr % 32 != 0)
            asc_emu::Fail(std::string("LocalTensor at ") + where + " address " + std::to_string(addr) +
                          ": not 32-byte aligned");
        if (static_cast<uint64_t>(addr) + static_cast<uint64_t>(tileSize) * sizeof(T) > cap)
            asc_emu::Fail(std::string("LocalTensor at ") + where + " address " + std::to_string(addr) + " of " +
                          std::to_string(tileSize) + " elements ends past the " + std::to_string(cap) + "-byte " +
                          where);
        ptr_ = reinterpret_cast<T*>(base + addr);
    }
    __aicore__ inline LocalTensor operator[](uint32_t offset) const {
        if (offset > size_) asc_emu::Fail("LocalTensor[] offset " + std::to_string(offset) + " past its " +
                                          std::to_string(size_) + " elements");
        return LocalTensor(ptr_ + offset, size_ - offset, slot_);
    }
    // Scalar accesses run on the S pipe, which the compiler's auto-sync orders with every other pipe in
    // both directions (ASC_EMU_AUTO_SYNC=0 models --cce-auto-sync=off, where only flags order them).
    __aicore__ inline T GetValue(uint32_t i, asc_emu::Loc loc = ASC_EMU_HERE) const {
        Check(i);
        asc_emu::SAccess(emu_ub::Offset(ptr_ + i), sizeof(T), false, loc);
        return ptr_[i];
    }
    __aicore__ inline void SetValue(uint32_t i, T v, asc_emu::Loc loc = ASC_EMU_HERE) const {
        Check(i);
        asc_emu::SAccess(emu_ub::Offset(ptr_ + i), sizeof(T), true, loc);
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
        if (!emu_ub::IsUb(ptr_))
            asc_emu::Fail("GetValue/SetValue on an L1 tensor or an L0 tensor: the scalar unit reaches UB and GM only");
        if (i >= size_) asc_emu::Fail("LocalTensor index " + std::to_string(i) + " out of " + std::to_string(size_));
    }
    T* ptr_ = nullptr;
    uint32_t size_ = 0;
    EmuSlot* slot_ = nullptr;
};

}  // namespace AscendC
