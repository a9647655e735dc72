// asc-onnx emulator: TPipe (UB allocator), TQue (VECIN/VECOUT queues with depth), TBuf (scratch).
#pragma once
#include <deque>

#include "kernel_tensor.h"

namespace AscendC {

enum class EmuSlotState { FREE, ALLOCATED, ENQUEUED, DEQUEUED };

struct EmuSlot {
    uint8_t* ptr = nullptr;
    uint32_t bytes = 0;
    EmuSlotState state = EmuSlotState::FREE;
};

class TPipe;

namespace emu_ub {
inline TPipe*& CurrentPipe() {
    static TPipe* p = nullptr;
    return p;
}
}  // namespace emu_ub

template <TPosition POS, int32_t DEPTH>
class TQue {
public:
    template <typename T>
    __aicore__ inline LocalTensor<T> AllocTensor() {
        for (auto& s : slots_) {
            if (s.state == EmuSlotState::FREE) {
                s.state = EmuSlotState::ALLOCATED;
                return LocalTensor<T>(reinterpret_cast<T*>(s.ptr), s.bytes / sizeof(T), &s);
            }
        }
        asc_emu::Fail("TQue::AllocTensor: all " + std::to_string(slots_.size()) +
                      " buffers are in use (missing FreeTensor?)");
    }
    template <typename T>
    __aicore__ inline void EnQue(const LocalTensor<T>& t) {
        EmuSlot* s = Own(t.Slot(), "EnQue");
        if (s->state != EmuSlotState::ALLOCATED) asc_emu::Fail("TQue::EnQue of a tensor that is not freshly allocated");
        if (static_cast<int32_t>(fifo_.size()) >= DEPTH)
            asc_emu::Fail("TQue::EnQue: queue depth " + std::to_string(DEPTH) + " exceeded");
        s->state = EmuSlotState::ENQUEUED;
        fifo_.push_back(s);
    }
    template <typename T>
    __aicore__ inline LocalTensor<T> DeQue() {
        if (fifo_.empty()) asc_emu::Fail("TQue::DeQue on an empty queue (DeQue before EnQue)");
        EmuSlot* s = fifo_.front();
        fifo_.pop_front();
        s->state = EmuSlotState::DEQUEUED;
        return LocalTensor<T>(reinterpret_cast<T*>(s->ptr), s->bytes / sizeof(T), s);
    }
    template <typename T>
    __aicore__ inline void FreeTensor(const LocalTensor<T>& t) {
        EmuSlot* s = Own(t.Slot(), "FreeTensor");
        if (s->state == EmuSlotState::FREE) asc_emu::Fail("TQue::FreeTensor: double free");
        if (s->state == EmuSlotState::ENQUEUED) asc_emu::Fail("TQue::FreeTensor of a tensor still in the queue");
        s->state = EmuSlotState::FREE;
    }
    std::vector<EmuSlot>& Slots() { return slots_; }

private:
    EmuSlot* Own(EmuSlot* s, const char* what) {
        for (auto& mine : slots_)
            if (&mine == s) return s;
        asc_emu::Fail(std::string("TQue::") + what + ": tensor does not belong to this queue");
    }
    std::vector<EmuSlot> slots_;
    std::deque<EmuSlot*> fifo_;
};

template <TPosition POS>
class TBuf {
public:
    template <typename T>
    __aicore__ inline LocalTensor<T> Get() {
        if (slot_.ptr == nullptr) asc_emu::Fail("TBuf::Get before InitBuffer");
        return LocalTensor<T>(reinterpret_cast<T*>(slot_.ptr), slot_.bytes / sizeof(T), &slot_);
    }
    template <typename T>
    __aicore__ inline LocalTensor<T> Get(uint32_t len) {
        if (len * sizeof(T) > slot_.bytes) asc_emu::Fail("TBuf::Get(len) larger than the buffer");
        return LocalTensor<T>(reinterpret_cast<T*>(slot_.ptr), len, &slot_);
    }
    EmuSlot& Slot() { return slot_; }

private:
    EmuSlot slot_;
};

class TPipe {
public:
    TPipe() {
        // Fresh UB for this block, filled with 0xFF bytes (NaN as float/half) so reads of unwritten UB show.
        std::memset(emu_ub::arena, 0xFF, sizeof(emu_ub::arena));
        emu_ub::CurrentPipe() = this;
    }
    ~TPipe() {
        if (emu_ub::CurrentPipe() == this) emu_ub::CurrentPipe() = nullptr;
    }
    template <TPosition POS, int32_t DEPTH>
    __aicore__ inline void InitBuffer(TQue<POS, DEPTH>& que, uint32_t num, uint32_t len) {
        if (num == 0 || len == 0) asc_emu::Fail("TPipe::InitBuffer with zero buffers or zero length");
        que.Slots().assign(num, EmuSlot{});
        for (auto& s : que.Slots()) Take(s, len);
    }
    template <TPosition POS>
    __aicore__ inline void InitBuffer(TBuf<POS>& buf, uint32_t len) {
        if (len == 0) asc_emu::Fail("TPipe::InitBuffer with zero length");
        Take(buf.Slot(), len);
    }
    __aicore__ inline void Destroy() {}

private:
    void Take(EmuSlot& s, uint32_t len) {
        uint32_t padded = (len + 31u) / 32u * 32u;  // InitBuffer pads each buffer to 32 bytes
        if (used_ + padded > asc_emu::St().soc.ubBytes) {
            asc_emu::Fail("unified buffer overflow on " + asc_emu::St().soc.name + ": " + std::to_string(used_ + padded) +
                          " bytes requested, " + std::to_string(asc_emu::St().soc.ubBytes) + " available");
        }
        s.ptr = emu_ub::arena + used_;
        s.bytes = padded;
        s.state = EmuSlotState::FREE;
        used_ += padded;
        if (used_ > asc_emu::St().ubPeak) asc_emu::St().ubPeak = used_;
    }
    uint32_t used_ = 0;
};

}  // namespace AscendC
