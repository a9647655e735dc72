// asc-onnx emulator: TPipe (UB allocator, event IDs), TQue (queues with the synchronisation their
// EnQue/DeQue and AllocTensor/FreeTensor insert), TBuf (scratch with no synchronisation at all).
#pragma once
#include <deque>

#include "kernel_tensor.h"

namespace AscendC {

enum class EmuSlotState { FREE, ALLOCATED, ENQUEUED, DEQUEUED };

struct EmuSlot {
    uint8_t* ptr = nullptr;
    uint32_t bytes = 0;
    EmuSlotState state = EmuSlotState::FREE;
    asc_emu::Clock enqueued;  // producer pipe's work when it was EnQue'd
    asc_emu::Clock freed;     // consumer pipe's work when it was freed
    int8_t enqId = -1;        // event ID its EnQue's flag holds until DeQue
    int8_t freeId = -1;       // event ID its FreeTensor's flag holds until the next AllocTensor
};

// Buffers of all queues at one position share QUE_MAX_EVENT event IDs (impl/basic_api/kernel_macros.h: 8 on
// A2/A3 and 310P), so at most 8 TQue buffers per position (4 double-buffered queues).
constexpr int32_t QUE_MAX_EVENT = 8;

namespace emu_que {
// Which pipe writes a queue's buffers and which reads them, by position (kernel_tquebind_impl.h: VECIN is
// MTE2 -> V, VECOUT is V -> MTE3, VECCALC is V -> V).
constexpr int Producer(TPosition p) {
    return p == TPosition::VECIN ? asc_emu::PMTE2 : asc_emu::PV;
}
constexpr int Consumer(TPosition p) {
    return p == TPosition::VECOUT ? asc_emu::PMTE3 : asc_emu::PV;
}
}  // namespace emu_que

class TPipe;
namespace emu_evt_pool {
// Event IDs a queue takes from its pipe (defined after TPipe).
int8_t Alloc(int event, const char* what);
void Release(int event, int8_t id);
}  // namespace emu_evt_pool

namespace emu_que {
// The HardEvent of a queue's EnQue (producer -> consumer) and of its FreeTensor (consumer -> producer), as
// indices of HardEvent; -1 where producer and consumer are one pipe (VECCALC) and no flag is set.
constexpr int EnQueEvent(TPosition p) { return p == TPosition::VECIN ? 0 : p == TPosition::VECOUT ? 3 : -1; }
constexpr int FreeEvent(TPosition p) { return p == TPosition::VECIN ? 1 : p == TPosition::VECOUT ? 2 : -1; }
}  // namespace emu_que

template <TPosition POS, int32_t DEPTH>
class TQue {
public:
    // Buffers are handed out round-robin from a cursor (AllocBuffer in kernel_tquebind_impl.h), so
    // double buffering alternates even when the previous buffer is already free again.
    template <typename T>
    __aicore__ inline LocalTensor<T> AllocTensor() {
        for (size_t tried = 0; tried < slots_.size(); ++tried) {
            EmuSlot& s = slots_[cursor_];
            cursor_ = (cursor_ + 1) % slots_.size();
            if (s.state == EmuSlotState::FREE) {
                s.state = EmuSlotState::ALLOCATED;
                asc_emu::Join(emu_que::Producer(POS), s.freed);  // WaitFlag on the free event
                if (s.freeId >= 0) emu_evt_pool::Release(emu_que::FreeEvent(POS), s.freeId);  // ... and its ID back
                s.freeId = -1;
                return LocalTensor<T>(reinterpret_cast<T*>(s.ptr), s.bytes / sizeof(T), &s);
            }
        }
        asc_emu::Fail("TQue::AllocTensor: all " + std::to_string(slots_.size()) +
                      " buffers are in use (missing FreeTensor?)");
    }
    // Re-EnQue of a dequeued tensor is allowed (kernel_tquebind_impl.h).
    template <typename T>
    __aicore__ inline void EnQue(const LocalTensor<T>& t) {
        EmuSlot* s = Own(t.Slot(), "EnQue");
        if (s->state != EmuSlotState::ALLOCATED && s->state != EmuSlotState::DEQUEUED)
            asc_emu::Fail("TQue::EnQue of a tensor that is not allocated (freed or already in the queue)");
        if (static_cast<int32_t>(fifo_.size()) >= DEPTH)
            asc_emu::Fail("TQue::EnQue: queue depth " + std::to_string(DEPTH) + " exceeded");
        s->state = EmuSlotState::ENQUEUED;
        s->enqueued = asc_emu::Snapshot(emu_que::Producer(POS));  // SetFlag producer -> consumer
        if (emu_que::EnQueEvent(POS) >= 0) s->enqId = emu_evt_pool::Alloc(emu_que::EnQueEvent(POS), "TQue::EnQue");
        fifo_.push_back(s);
    }
    template <typename T>
    __aicore__ inline LocalTensor<T> DeQue() {
        if (fifo_.empty()) asc_emu::Fail("TQue::DeQue on an empty queue (DeQue before EnQue)");
        EmuSlot* s = fifo_.front();
        fifo_.pop_front();
        s->state = EmuSlotState::DEQUEUED;
        asc_emu::Join(emu_que::Consumer(POS), s->enqueued);  // WaitFlag producer -> consumer
        if (s->enqId >= 0) emu_evt_pool::Release(emu_que::EnQueEvent(POS), s->enqId);
        s->enqId = -1;
        return LocalTensor<T>(reinterpret_cast<T*>(s->ptr), s->bytes / sizeof(T), s);
    }
    template <typename T>
    __aicore__ inline void FreeTensor(LocalTensor<T>& t) {  // non-const, as CANN declares it
        EmuSlot* s = Own(t.Slot(), "FreeTensor");
        if (s->state == EmuSlotState::FREE) asc_emu::Fail("TQue::FreeTensor: double free");
        if (s->state == EmuSlotState::ENQUEUED) asc_emu::Fail("TQue::FreeTensor of a tensor still in the queue");
        s->state = EmuSlotState::FREE;
        s->freed = asc_emu::Snapshot(emu_que::Consumer(POS));  // SetFlag consumer -> producer
        // The free flag holds an event ID until the buffer is allocated again (kernel_tquebind_impl.h).
        if (emu_que::FreeEvent(POS) >= 0) s->freeId = emu_evt_pool::Alloc(emu_que::FreeEvent(POS), "TQue::FreeTensor");
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
    size_t cursor_ = 0;
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

// Events of SetFlag/WaitFlag (kernel_event.h), named source_destination: the vector core's first, then the cube
// core's (MTE1 L1 -> L0, M the cube, FIX L0C out).
enum class HardEvent : uint8_t { MTE2_V, V_MTE2, MTE3_V, V_MTE3, MTE2_MTE3, MTE3_MTE2, S_V, V_S, MTE2_S, S_MTE2,
                                 MTE3_S, S_MTE3, MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, MTE2_M, M_MTE2, M_FIX, FIX_M,
                                 MTE2_FIX, FIX_MTE2, MTE1_FIX, FIX_MTE1, FIX_S, M_S, FIX_FIX, NUM };
using TEventID = int8_t;
using event_t = int8_t;

namespace emu_evt {
struct Ends {
    int src, dst;
    const char* name;
};
constexpr Ends kEnds[] = {
    {asc_emu::PMTE2, asc_emu::PV, "MTE2_V"},       {asc_emu::PV, asc_emu::PMTE2, "V_MTE2"},
    {asc_emu::PMTE3, asc_emu::PV, "MTE3_V"},       {asc_emu::PV, asc_emu::PMTE3, "V_MTE3"},
    {asc_emu::PMTE2, asc_emu::PMTE3, "MTE2_MTE3"}, {asc_emu::PMTE3, asc_emu::PMTE2, "MTE3_MTE2"},
    {asc_emu::PS, asc_emu::PV, "S_V"},             {asc_emu::PV, asc_emu::PS, "V_S"},
    {asc_emu::PMTE2, asc_emu::PS, "MTE2_S"},       {asc_emu::PS, asc_emu::PMTE2, "S_MTE2"},
    {asc_emu::PMTE3, asc_emu::PS, "MTE3_S"},       {asc_emu::PS, asc_emu::PMTE3, "S_MTE3"},
    {asc_emu::PMTE2, asc_emu::PMTE1, "MTE2_MTE1"}, {asc_emu::PMTE1, asc_emu::PMTE2, "MTE1_MTE2"},
    {asc_emu::PMTE1, asc_emu::PM, "MTE1_M"},       {asc_emu::PM, asc_emu::PMTE1, "M_MTE1"},
    {asc_emu::PMTE2, asc_emu::PM, "MTE2_M"},       {asc_emu::PM, asc_emu::PMTE2, "M_MTE2"},
    {asc_emu::PM, asc_emu::PFIX, "M_FIX"},         {asc_emu::PFIX, asc_emu::PM, "FIX_M"},
    {asc_emu::PMTE2, asc_emu::PFIX, "MTE2_FIX"},   {asc_emu::PFIX, asc_emu::PMTE2, "FIX_MTE2"},
    {asc_emu::PMTE1, asc_emu::PFIX, "MTE1_FIX"},   {asc_emu::PFIX, asc_emu::PMTE1, "FIX_MTE1"},
    {asc_emu::PFIX, asc_emu::PS, "FIX_S"},         {asc_emu::PM, asc_emu::PS, "M_S"},
    {asc_emu::PFIX, asc_emu::PFIX, "FIX_FIX"}};
static_assert(sizeof(kEnds) / sizeof(kEnds[0]) == static_cast<size_t>(HardEvent::NUM), "one row per HardEvent");
constexpr int Src(HardEvent e) { return kEnds[static_cast<int>(e)].src; }
constexpr int Dst(HardEvent e) { return kEnds[static_cast<int>(e)].dst; }
inline const char* Name(HardEvent e) { return kEnds[static_cast<int>(e)].name; }
}  // namespace emu_evt

template <HardEvent E>
__aicore__ inline void SetFlag(int32_t id, asc_emu::Loc loc = ASC_EMU_HERE) {
    asc_emu::SetFlag(emu_evt::Src(E), static_cast<int>(E) * 64 + id, loc);
}

template <HardEvent E>
__aicore__ inline void WaitFlag(int32_t id, asc_emu::Loc loc = ASC_EMU_HERE) {
    asc_emu::WaitFlag(emu_evt::Dst(E), static_cast<int>(E) * 64 + id, emu_evt::Name(E), loc);
}

class TPipe;

namespace emu_ub {
inline TPipe*& CurrentPipe() {
    static TPipe* p = nullptr;
    return p;
}
}  // namespace emu_ub

class TPipe {
public:
    TPipe() {
        // Fresh UB for this block, filled with 0xFF bytes (NaN as float/half) so reads of unwritten UB show.
        std::memset(emu_ub::arena, 0xFF, sizeof(emu_ub::arena));
        emu_ub::CurrentPipe() = this;
        asc_emu::ResetBlock();
        asc_emu::St().ubUsed = 0;
    }
    ~TPipe() {
        if (emu_ub::CurrentPipe() == this) emu_ub::CurrentPipe() = nullptr;
    }
    template <TPosition POS, int32_t DEPTH>
    __aicore__ inline void InitBuffer(TQue<POS, DEPTH>& que, uint32_t num, uint32_t len) {
        if (num == 0 || len == 0) asc_emu::Fail("TPipe::InitBuffer with zero buffers or zero length");
        int32_t& used = queBuffers_[static_cast<int>(POS)];
        if (used + static_cast<int32_t>(num) > QUE_MAX_EVENT)
            asc_emu::Fail("TPipe::InitBuffer: " + std::to_string(used + num) + " queue buffers at one position; " +
                          "the hardware has " + std::to_string(QUE_MAX_EVENT) + " event IDs per position");
        used += static_cast<int32_t>(num);
        que.Slots().assign(num, EmuSlot{});  // (the cursor starts at buffer 0)
        for (auto& s : que.Slots()) Take(s, len);
    }
    template <TPosition POS>
    __aicore__ inline void InitBuffer(TBuf<POS>& buf, uint32_t len) {
        if (len == 0) asc_emu::Fail("TPipe::InitBuffer with zero length");
        Take(buf.Slot(), len);
    }
    static constexpr int QBUF_MAX_LEN = 64;  // buffers one TPipe can hand out (kernel_macros.h)
    // Event IDs: QUE_MAX_EVENT per HardEvent (eventPool_ in kernel_tpipe_impl.h). FetchEventID gives the lowest
    // free ID without taking it (two fetches without an AllocEventID give the same ID); with all taken it gives
    // QUE_MAX_EVENT, an ID the flag hardware does not have: a fault. Queues hold IDs between EnQue and DeQue and
    // between FreeTensor and the next AllocTensor.
    __aicore__ inline TEventID FetchEventID(HardEvent e, asc_emu::Loc loc = ASC_EMU_HERE) {
        const int id = Lowest(static_cast<int>(e));
        if (id >= QUE_MAX_EVENT) Exhausted(static_cast<int>(e), "FetchEventID", loc);
        return static_cast<TEventID>(id);
    }
    template <HardEvent E>
    __aicore__ inline TEventID FetchEventID(asc_emu::Loc loc = ASC_EMU_HERE) {
        return FetchEventID(E, loc);
    }
    template <HardEvent E>
    __aicore__ inline TEventID AllocEventID(asc_emu::Loc loc = ASC_EMU_HERE) {
        return TakeEvent(static_cast<int>(E), "AllocEventID", loc);
    }
    template <HardEvent E>
    __aicore__ inline void ReleaseEventID(TEventID id, asc_emu::Loc loc = ASC_EMU_HERE) {
        if (id < 0 || id >= QUE_MAX_EVENT || !(occupied_[static_cast<int>(E)] & (1u << id)))
            asc_emu::Fail("TPipe::ReleaseEventID<" + std::string(emu_evt::Name(E)) + ">(" + std::to_string(id) +
                          ") at " + loc.Str() + ": that ID is not allocated");
        occupied_[static_cast<int>(E)] &= ~(1u << id);
    }
    TEventID TakeEvent(int e, const char* what, asc_emu::Loc loc) {
        const int id = Lowest(e);
        if (id >= QUE_MAX_EVENT) Exhausted(e, what, loc);
        occupied_[e] |= 1u << id;
        return static_cast<TEventID>(id);
    }
    void GiveEvent(int e, TEventID id) { occupied_[e] &= ~(1u << id); }
    __aicore__ inline void Destroy() {}
    // 310P: UB a Matmul reserves when it is registered (Init -> InitShareBufStart/End, kernel_tpipe_base.h), below
    // every buffer the kernel initialises afterwards; the objects of one REGIST_MATMUL_OBJ share it.
    void EmuReserveShared(uint32_t bytes) {
        const uint32_t padded = (bytes + 31u) / 32u * 32u;
        if (padded <= shared_) return;
        used_ += padded - shared_;
        shared_ = padded;
        if (used_ > asc_emu::St().soc.ubBytes)
            asc_emu::Fail("unified buffer overflow on " + asc_emu::St().soc.name + ": the Matmul reserves " +
                          std::to_string(shared_) + " bytes (the tiling's shareUbSize), " +
                          std::to_string(asc_emu::St().soc.ubBytes) + " available");
        asc_emu::St().ubUsed = used_;
        if (used_ > asc_emu::St().ubPeak) asc_emu::St().ubPeak = used_;
    }
    bool EmuHasBuffers() const { return buffers_ > 0; }

private:
    void Take(EmuSlot& s, uint32_t len) {
        if (++buffers_ > QBUF_MAX_LEN)
            asc_emu::Fail("TPipe::InitBuffer: more than " + std::to_string(QBUF_MAX_LEN) + " buffers in one TPipe");
        uint32_t padded = (len + 31u) / 32u * 32u;  // InitBuffer pads each buffer to 32 bytes
        if (used_ + padded > asc_emu::St().soc.ubBytes) {
            asc_emu::Fail("unified buffer overflow on " + asc_emu::St().soc.name + ": " + std::to_string(used_ + padded) +
                          " bytes requested, " + std::to_string(asc_emu::St().soc.ubBytes) + " available");
        }
        s.ptr = emu_ub::arena + used_;
        s.bytes = padded;
        s.state = EmuSlotState::FREE;
        used_ += padded;
        asc_emu::St().ubUsed = used_;
        if (used_ > asc_emu::St().ubPeak) asc_emu::St().ubPeak = used_;
    }
    int Lowest(int e) const {
        int id = 0;
        while (id < QUE_MAX_EVENT && (occupied_[e] & (1u << id))) ++id;
        return id;
    }
    [[noreturn]] void Exhausted(int e, const char* what, const asc_emu::Loc& loc) const {
        asc_emu::Fail(std::string("TPipe::") + what + "(" + emu_evt::Name(static_cast<HardEvent>(e)) + ") at " +
                      loc.Str() + ": all " + std::to_string(QUE_MAX_EVENT) + " event IDs of " +
                      emu_evt::Name(static_cast<HardEvent>(e)) + " are held (queue buffers keep one from FreeTensor "
                      "to their next AllocTensor, and from EnQue to DeQue), so the ID would be " +
                      std::to_string(QUE_MAX_EVENT) + ", which the flag hardware does not have");
    }
    uint32_t used_ = 0;
    uint32_t shared_ = 0;          // UB the registered Matmul objects reserved (310P)
    uint32_t occupied_[static_cast<int>(HardEvent::NUM)] = {};  // per HardEvent, a bit per taken ID
    int32_t buffers_ = 0;
    int32_t queBuffers_[16] = {0};
};

__aicore__ inline TPipe* GetTPipePtr() { return emu_ub::CurrentPipe(); }

}  // namespace AscendC

// Global as well, as CANN declares it (kernel_tpipe_impl.h).
__aicore__ inline AscendC::TPipe* GetTPipePtr() { return AscendC::emu_ub::CurrentPipe(); }

namespace AscendC {
namespace emu_evt_pool {
inline int8_t Alloc(int event, const char* what) {
    TPipe* p = emu_ub::CurrentPipe();
    if (p == nullptr) asc_emu::Fail(std::string(what) + " without a TPipe");
    return p->TakeEvent(event, what, asc_emu::Loc("(queue)", 0));
}
inline void Release(int event, int8_t id) {
    if (TPipe* p = emu_ub::CurrentPipe()) p->GiveEvent(event, id);
}
}  // namespace emu_evt_pool
// System workspace (Matmul's KFC messages and C staging on 910B) and the user part after it: set by the generated
// drivers, or by a sample's launch from its workspace argument (acl/acl.h).
namespace emu_ws {
inline GM_ADDR& Sys() {
    static GM_ADDR p = nullptr;
    return p;
}
inline uint64_t& SysBytes() {
    static uint64_t b = 0;
    return b;
}
}  // namespace emu_ws
}  // namespace AscendC
