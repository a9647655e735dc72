// asc-onnx Ascend C CPU emulator: the blocks of a launch, and SyncAll between them.
//
// Blocks run one after another, each on a stack of its own (a ucontext fiber), so a block can stop at SyncAll: the
// scheduler then runs the next block up to the same barrier, and resumes every block in turn once all have reached
// it. A block's unified buffer and pipe state are put aside while it waits. Time: every block leaves the barrier
// when the last one arrives, plus the barrier's own cost. What the chip would do wrong is a fault: SyncAll with more
// blocks than cores (the extra blocks never start, the rest wait forever), a block that ends while others wait, a
// hard SyncAll on 310P (soft sync only) or in a kernel not of a MIX type, SyncAll<false> (the cube cores of the
// kernels asc-onnx emulates serve Matmul messages and never reach it), SetValue bytes still in the data cache at the
// barrier, and global memory one core reads or writes over that another wrote or read since the last barrier
// (CrossCore, per 32-byte block; a data-cache line cleaned over another core's bytes).
#pragma once
#include <sys/mman.h>
#include <ucontext.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "emu_runtime.h"
#include "kernel_tpipe.h"

namespace asc_emu {

// What belongs to the running core while another runs: its pipes, operations, UB and TPipe.
struct CoreSave {
    PipeState pipes;
    std::vector<OpRec> ops;
    uint64_t ubUsed = 0;
    std::vector<uint8_t> ub;
    AscendC::TPipe* pipe = nullptr;
};

// Put the running core's state aside / bring a core's back.
inline void SaveCore(CoreSave& c) {
    c.pipes = std::move(St().pipes);
    St().pipes = PipeState{};
    c.ops = std::move(St().ops);
    St().ops.clear();
    c.ubUsed = St().ubUsed;
    c.ub.assign(AscendC::emu_ub::arena, AscendC::emu_ub::arena + sizeof(AscendC::emu_ub::arena));
    c.pipe = AscendC::emu_ub::CurrentPipe();
}
inline void RestoreCore(CoreSave& c) {
    St().pipes = std::move(c.pipes);
    St().ops = std::move(c.ops);
    St().ubUsed = c.ubUsed;
    if (!c.ub.empty()) std::memcpy(AscendC::emu_ub::arena, c.ub.data(), c.ub.size());
    c.ub.clear();
    c.ub.shrink_to_fit();
    AscendC::emu_ub::CurrentPipe() = c.pipe;
}

// One block of the launch.
struct Fiber {
    uint32_t block = 0;
    ucontext_t ctx{};
    void* stack = nullptr;
    bool started = false, done = false, waiting = false;
    std::string fault;
    double arrival = 0;  // when it reached the barrier it waits at
    CoreSave saved;      // what the block had while it waited
};

struct Scheduler {
    static constexpr size_t kStack = 16u << 20;  // virtual; pages are mapped as a block touches them
    static constexpr size_t kGuard = 64u << 10;  // unmapped below it: an overflow faults instead of corrupting
    ucontext_t main{};
    std::vector<Fiber> fibers;
    Fiber* running = nullptr;
    std::function<void()> launch;
    double release = 0;  // when the last barrier let every block go

    ~Scheduler() {
        for (auto& f : fibers)
            if (f.stack != nullptr) munmap(f.stack, kStack);
    }
};

inline Scheduler*& Sched() {
    static Scheduler* s = nullptr;
    return s;
}

// The kernel's body as one block: idle pipes at the start (a kernel without a TPipe too), its fault kept.
inline void RunBlock(const std::function<void()>& launch, std::string& fault) {
    try {
        ResetBlock();
        launch();
        EndBlock();
    } catch (const Fault& e) {
        fault = e.what();
    } catch (const std::exception& e) {
        fault = std::string("emulator error: ") + e.what();
    }
}

// A fiber's stack (mapped lazily, a guard page below it) and its context entering `entry`; returns the stack.
inline void* StartFiber(ucontext_t& ctx, void (*entry)()) {
    void* stack = mmap(nullptr, Scheduler::kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
    if (stack == MAP_FAILED) throw std::runtime_error("cannot map a block's stack");
    mprotect(stack, Scheduler::kGuard, PROT_NONE);  // the stack grows down onto it
    getcontext(&ctx);
    ctx.uc_stack.ss_sp = static_cast<uint8_t*>(stack) + Scheduler::kGuard;
    ctx.uc_stack.ss_size = Scheduler::kStack - Scheduler::kGuard;
    ctx.uc_link = nullptr;
    makecontext(&ctx, entry, 0);
    return stack;
}

inline void FiberEntry() {
    Scheduler& s = *Sched();
    Fiber& f = *s.running;
    RunBlock(s.launch, f.fault);
    f.done = true;
    swapcontext(&f.ctx, &s.main);
}

inline void Park(Fiber& f) { SaveCore(f.saved); }

inline void Unpark(Fiber& f) {
    RestoreCore(f.saved);
    // Nothing after the barrier starts before every block has arrived and the barrier has passed.
    auto& t = St().pipes.t;
    for (int p = 0; p < NPIPES; ++p) t.free[p] = std::max(t.free[p], Sched()->release);
}

// Runs `blocks` (their indices, in order) of `launch`; returns the failing block and its fault, or -1.
inline int64_t RunFibers(const std::vector<uint32_t>& blocks, std::function<void()> launch, std::string& fault) {
    Scheduler s;
    s.launch = std::move(launch);
    s.fibers.resize(blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) s.fibers[i].block = blocks[i];
    Sched() = &s;
    struct Reset {
        ~Reset() { Sched() = nullptr; }
    } reset;
    for (;;) {
        bool anyWaiting = false;
        for (Fiber& f : s.fibers) {
            if (f.done) continue;
            St().blockIdx = f.block;
            s.running = &f;
            if (!f.started) {
                f.stack = StartFiber(f.ctx, FiberEntry);
                f.started = true;
            } else {
                Unpark(f);
                f.waiting = false;
            }
            swapcontext(&s.main, &f.ctx);
            s.running = nullptr;
            if (!f.fault.empty()) {
                fault = f.fault;
                return f.block;
            }
            if (f.done) {
                munmap(f.stack, Scheduler::kStack);
                f.stack = nullptr;
            } else {
                Park(f);
                anyWaiting = true;
            }
        }
        if (!anyWaiting) return -1;
        double last = 0;
        for (const Fiber& f : s.fibers) {
            if (f.waiting) {
                last = std::max(last, f.arrival);
            } else {
                fault = "SyncAll: block " + std::to_string(f.block) + " ended while other blocks wait at a SyncAll "
                        "it never reached: they wait forever (every block of the launch calls SyncAll as often)";
                return f.block;
            }
        }
        s.release = last + St().tm.syncAll;
        St().syncPhase += 1;
    }
}

// The running block reaches a barrier (after its PIPE_ALL barrier): it waits there until every block has.
inline void Barrier(const char* api) {
    Scheduler* s = Sched();
    if (s == nullptr || s->running == nullptr) Fail(std::string(api) + " outside a launch");
    if (St().blockNum > static_cast<int64_t>(St().tm.cores))
        Fail(std::string(api) + " with " + std::to_string(St().blockNum) + " blocks on " +
             std::to_string(static_cast<int64_t>(St().tm.cores)) + " cores: the blocks past the cores start only "
             "when others end, and the others wait for them forever (launch at most the core count)");
    NoDirtyCache(std::string(" before ") + api + ": the other cores do not see the bytes");
    Fiber& f = *s->running;
    f.arrival = BlockClock();
    f.waiting = true;
    swapcontext(&f.ctx, &s->main);
}

}  // namespace asc_emu

namespace AscendC {

// The logical AI Cores of the launch (GetBlockNum.md): blockDim. A MIX_AIC_1_2 kernel's vector cores are two per
// AI Core, so its vector blocks (GetBlockIdx) number twice as many.
__aicore__ inline int64_t GetBlockNum() {
    const auto& st = asc_emu::St();
    return st.kernelType == KERNEL_TYPE_MIX_AIC_1_2 ? (st.blockNum + 1) / 2 : st.blockNum;
}

// SyncAll (hard sync, basic_api/kernel_operator_block_sync_intf.h): every block of the launch waits until all have
// reached it; global memory written before it is visible to every core after it. isAIVOnly: the vector cores only
// (a mixed kernel's cube cores keep serving their Matmul messages). 310P's AI Core has the soft form only.
template <bool isAIVOnly = true>
__aicore__ inline void SyncAll(asc_emu::Loc loc = ASC_EMU_HERE) {
#if __NPU_ARCH__ == 2002
    asc_emu::Fail(std::string("SyncAll() at ") + loc.Str() + ": 310P's AI Core has no hard SyncAll (SyncAll.md: "
                  "the soft form with a GM and a UB workspace only)");
#else
    const int type = asc_emu::St().kernelType;
    if (type == KERNEL_TYPE_AIV_ONLY || type == KERNEL_TYPE_AIC_ONLY)
        asc_emu::Fail(std::string("SyncAll() at ") + loc.Str() + " in a kernel of KERNEL_TYPE_AIV_ONLY or AIC_ONLY: "
                      "hard sync needs a MIX kernel type (SyncAll.md: __mix__(0, 1) for a pure vector kernel)");
    if constexpr (!isAIVOnly)
        asc_emu::Fail(std::string("SyncAll<false>() at ") + loc.Str() + ": the cube cores take part, but a mixed "
                      "kernel's cube core serves the Matmul messages and returns (REGIST_MATMUL_OBJ), and a pure "
                      "vector kernel has none: the vector cores wait forever (use SyncAll<true>)");
    // The barrier orders the vector cores' own writes. A product an IterateAll<false> of this core left to the
    // cube core is not among them: another core reading it after the barrier may see it half written.
    for (const auto& pc : asc_emu::St().pipes.pending)
        if (pc.mte3Seq == 0)
            asc_emu::Fail(std::string("SyncAll() at ") + loc.Str() + " while " + pc.what + " is outstanding: "
                          "SyncAll<true> orders the vector cores only, the cube core may still be writing its "
                          "product; WaitIterateAll before the barrier");
    PipeBarrier<PIPE_ALL>(loc);
    asc_emu::Barrier("SyncAll");
#endif
}

}  // namespace AscendC
