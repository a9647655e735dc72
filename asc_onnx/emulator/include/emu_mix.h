// asc-onnx Ascend C CPU emulator: a __mix__(1, 2) launch and the cross-core flags between its cores (910B).
//
// Each block of a __mix__(1, 2) launch is an AI Core: its AIC (GetBlockIdx() = block) and its two AIVs
// (GetBlockIdx() = 2 * block + GetSubBlockIdx()) run the kernel at once, each with its own pipes, and meet only at
// CrossCoreSetFlag / CrossCoreWaitFlag (核间同步/关键特性说明.md). The emulator runs the three as fibers in turn: a
// core runs until it waits on a flag whose counter is 0, then the next; all three waiting is a fault (the chip
// hangs). Time: a flag reaches its counter when the work issued before it on its pipe is done, and a wait blocks
// the waiting core's dispatch until then. A core's GM reads of bytes another core of the launch wrote are ordered
// only by a flag that core set after the write (CrossCore in emu_runtime.h).
// Modes (CrossCoreSetFlag(ISASI).md): 1, the two AIVs of an AI Core; 2, its AIC and both AIVs (the AIC's set
// counts for each AIV, the AIVs' sets count for the AIC once both have set). Mode 0 (every AIC or every AIV of the
// launch) is not emulated. Not modelled: a counter past 15 (the cores run in turn here, not at once).
#pragma once
#include <ucontext.h>

#include <array>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "emu_blocks.h"

namespace asc_emu {

// One notification in a core's counter for a flag ID: when it arrives, and whose sets it carries (core bit, the
// setter's count of CrossCoreSetFlags with it).
struct CrossFlag {
    double at = 0;
    std::vector<std::pair<uint64_t, uint32_t>> from;
};

// One core of an AI Core: 0 the AIC, 1 and 2 its AIVs.
struct MixCore {
    int kind = 0;
    int64_t blockIdx = 0, sub = 0;
    ucontext_t ctx{};
    void* stack = nullptr;
    bool started = false, done = false;
    int waitId = -1;  // the flag it waits on, -1 if it runs
    std::string fault;
    std::array<std::deque<CrossFlag>, 16> counter;  // arrived, not yet waited for
    std::array<std::deque<CrossFlag>, 16> pending[2];  // an AIV's sets that wait for the other AIV's (modes 1, 2)
    // what it had while another core ran
    CoreSave saved;
    std::map<uint64_t, uint32_t> acquired;
    uint32_t sets = 0;
};

struct MixGroup {
    std::array<MixCore, 3> core;
    int running = -1;
    ucontext_t main{};
    std::function<void()> launch;

    ~MixGroup() {
        for (MixCore& c : core)
            if (c.stack != nullptr) munmap(c.stack, Scheduler::kStack);
    }
};

inline MixGroup*& Group() {
    static MixGroup* g = nullptr;
    return g;
}

inline void MixEntry() {
    MixGroup& g = *Group();
    MixCore& c = g.core[g.running];
    RunBlock(g.launch, c.fault);
    c.done = true;
    swapcontext(&c.ctx, &g.main);
}

// Bring a core's state in / put it aside (its pipes, operations, UB, what it learnt through flags).
inline void MixIn(MixCore& c) {
    auto& st = St();
    RestoreCore(c.saved);
    Acquired() = std::move(c.acquired);
    SetsIssued() = c.sets;
    st.blockIdx = c.blockIdx;
    st.coreKind = c.kind;
    st.subBlockIdx = c.sub;
}
inline void MixOut(MixCore& c) {
    SaveCore(c.saved);
    c.acquired = std::move(Acquired());
    Acquired().clear();
    c.sets = SetsIssued();
}

// Runs the AI Cores `blocks` of a __mix__(1, 2) launch, one after another; returns the failing core's block and its
// fault, or -1.
inline int64_t RunMix(const std::vector<uint32_t>& blocks, const std::function<void()>& launch, std::string& fault) {
    for (uint32_t b : blocks) {
        MixGroup g;
        g.launch = launch;
        for (int i = 0; i < 3; ++i) {
            MixCore& c = g.core[i];
            c.kind = i == 0 ? 1 : 0;
            c.blockIdx = i == 0 ? b : 2 * static_cast<int64_t>(b) + (i - 1);
            c.sub = i == 0 ? 0 : i - 1;
        }
        Group() = &g;
        struct Reset {
            ~Reset() {
                Group() = nullptr;
                St().coreKind = 0, St().subBlockIdx = 0;
                Acquired().clear(), SetsIssued() = 0;
            }
        } reset;
        for (;;) {
            bool ran = false;
            for (int i = 0; i < 3; ++i) {
                MixCore& c = g.core[i];
                if (c.done || (c.waitId >= 0 && c.counter[c.waitId].empty())) continue;
                ran = true;
                MixIn(c);
                g.running = i;
                if (!c.started) {
                    c.stack = StartFiber(c.ctx, MixEntry);
                    c.started = true;
                }
                c.waitId = -1;
                swapcontext(&g.main, &c.ctx);
                g.running = -1;
                if (c.done) {
                    munmap(c.stack, Scheduler::kStack);
                    c.stack = nullptr;
                }
                MixOut(c);
                if (!c.fault.empty()) {
                    fault = (c.kind == 1 ? "the AIC" : "AIV " + std::to_string(c.sub)) + " of AI Core " +
                            std::to_string(b) + ": " + c.fault;
                    return c.blockIdx;
                }
            }
            bool all = true;
            for (const MixCore& c : g.core) all = all && c.done;
            if (all) break;
            if (!ran) {
                const MixCore* w = nullptr;
                for (const MixCore& c : g.core)
                    if (!c.done) w = &c;
                fault = std::string(w->kind == 1 ? "the AIC" : "an AIV") + " of AI Core " + std::to_string(b) +
                        " waits at CrossCoreWaitFlag(" + std::to_string(w->waitId) + ") for a CrossCoreSetFlag no "
                        "core of it issues: it waits forever";
                return w->blockIdx;
            }
        }
    }
    return -1;
}

inline MixGroup& InGroup(const char* api, const Loc& loc) {
    if (Group() == nullptr || Group()->running < 0)
        Fail(std::string(api) + " at " + loc.Str() + " outside a __mix__(1, 2) launch: a kernel of "
             "KERNEL_TYPE_AIV_ONLY or AIC_ONLY does not start the scheduler the cross-core flags go through "
             "(CrossCoreSetFlag(ISASI).md)");
    return *Group();
}

}  // namespace asc_emu

namespace AscendC {

// Which of its AI Core's vector cores runs (0 or 1); 0 on the AIC.
__aicore__ inline int64_t GetSubBlockIdx() { return asc_emu::St().subBlockIdx; }

// Notify the cores `modeId` names once the work issued before on `pipe` is done.
template <uint8_t modeId, pipe_t pipe>
__aicore__ inline void CrossCoreSetFlag(uint16_t flagId, asc_emu::Loc loc = ASC_EMU_HERE) {
#if __NPU_ARCH__ == 2002
    asc_emu::Fail(std::string("CrossCoreSetFlag at ") + loc.Str() + ": not on 310P (CrossCoreSetFlag(ISASI).md)");
#else
    using asc_emu::PipeId;
    if (pipe == PIPE_S || pipe == PIPE_ALL)
        asc_emu::Fail(std::string("CrossCoreSetFlag at ") + loc.Str() + ": PIPE_S and PIPE_ALL are not supported in "
                      "modes 0-2 (CrossCoreSetFlag(ISASI).md)");
    asc_emu::MixGroup& g = asc_emu::InGroup("CrossCoreSetFlag", loc);
    if (modeId == 0)
        asc_emu::Fail(std::string("CrossCoreSetFlag<0> at ") + loc.Str() + ": mode 0 (every AIC or every AIV of the "
                      "launch) is not emulated");
    if (modeId != 1 && modeId != 2)
        asc_emu::Fail(std::string("CrossCoreSetFlag<") + std::to_string(modeId) + "> at " + loc.Str() +
                      ": Atlas A2 has modes 0, 1 and 2 only");
    const int me = g.running;
    if (modeId == 1 && me == 0)
        asc_emu::Fail(std::string("CrossCoreSetFlag<1> at ") + loc.Str() + " on the AIC: mode 1 syncs an AI Core's "
                      "two AIVs");
    constexpr int p = pipe == PIPE_V ? asc_emu::PV : pipe == PIPE_MTE2 ? asc_emu::PMTE2 : pipe == PIPE_MTE3
                    ? asc_emu::PMTE3 : pipe == PIPE_MTE1 ? asc_emu::PMTE1 : pipe == PIPE_M ? asc_emu::PM
                                                                                             : asc_emu::PFIX;
    auto& t = asc_emu::St().pipes.t;
    asc_emu::Issue(p, "CrossCoreSetFlag", loc);
    t.done[p].back() = t.lastDone[p];
    const uint32_t id = flagId & 15;  // (the low 4 bits count)
    asc_emu::SetsIssued() += 1;
    asc_emu::CrossFlag f{t.lastDone[p], {{asc_emu::CoreBit(), asc_emu::SetsIssued()}}};
    if (modeId == 2 && me == 0) {  // the AIC: one for each AIV
        g.core[1].counter[id].push_back(f);
        g.core[2].counter[id].push_back(f);
        return;
    }
    // an AIV: the notification is complete once the other AIV has set too
    g.core[me].pending[modeId - 1][id].push_back(f);  // (each mode its own: a flag ID may change mode)
    auto& a = g.core[1].pending[modeId - 1][id];
    auto& b = g.core[2].pending[modeId - 1][id];
    while (!a.empty() && !b.empty()) {
        asc_emu::CrossFlag both{std::max(a.front().at, b.front().at), a.front().from};
        both.from.push_back(b.front().from.front());
        a.pop_front(), b.pop_front();
        if (modeId == 2) {
            g.core[0].counter[id].push_back(both);
        } else {
            g.core[1].counter[id].push_back(both);
            g.core[2].counter[id].push_back(both);
        }
    }
#endif
}

// Block this core's dispatch until a notification for `flagId` has arrived, then take it.
template <uint8_t modeId = 0, pipe_t pipe = PIPE_S>
__aicore__ inline void CrossCoreWaitFlag(uint16_t flagId, asc_emu::Loc loc = ASC_EMU_HERE) {
#if __NPU_ARCH__ == 2002
    asc_emu::Fail(std::string("CrossCoreWaitFlag at ") + loc.Str() + ": not on 310P (CrossCoreWaitFlag(ISASI).md)");
#else
    asc_emu::MixGroup& g = asc_emu::InGroup("CrossCoreWaitFlag", loc);
    const uint32_t id = flagId & 15;
    asc_emu::MixCore& c = g.core[g.running];
    while (c.counter[id].empty()) {  // give way to the other cores of the AI Core (RunMix puts this one aside)
        c.waitId = static_cast<int>(id);
        swapcontext(&c.ctx, &g.main);
    }
    const asc_emu::CrossFlag f = c.counter[id].front();
    c.counter[id].pop_front();
    for (const auto& [bit, n] : f.from) {
        uint32_t& known = asc_emu::Acquired()[bit];
        known = std::max(known, n);
    }
    asc_emu::Issue(asc_emu::PS, "CrossCoreWaitFlag", loc);
    asc_emu::SWait(f.at + asc_emu::St().tm.flag);  // nothing after it is dispatched before the flag arrives
#endif
}

}  // namespace AscendC
