// asc-onnx emulator: the host runtime (ACL) an Ascend C program's main() calls, so a whole published program (the
// best-practice samples under asc-devkit/examples) runs in the emulator unchanged but for its kernel launches, which
// the sample runner (bench/samples.py) rewrites from `kernel<<<blocks, 0, stream>>>(args)` to
// `asc_emu::Launch(kind, kernel, blocks, 0, stream)(args)`.
//
// Device memory is host memory registered as a GM buffer; a copy is a memcpy (a timing-only run skips bulk copies of
// 1 MiB or more: their bytes do not change the estimate). The launch runs its blocks at once; the stream's
// synchronisation prints the run's one JSON line (the timing model's estimate and the traffic counters).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <tuple>
#include <type_traits>

#include "kernel_operator.h"

using aclError = int;
using aclrtStream = void*;
using aclrtContext = void*;
enum aclrtMemMallocPolicy { ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_HUGE_ONLY, ACL_MEM_MALLOC_NORMAL_ONLY };
enum aclrtMemcpyKind { ACL_MEMCPY_HOST_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST,
                       ACL_MEMCPY_DEVICE_TO_DEVICE };
constexpr aclError ACL_SUCCESS = 0;

namespace asc_emu {

// Where a launch's kernel runs: the vector cores, the cube cores, or both (__mix__(1, 2)).
enum class KernelKind { Vector, Cube, Mix };

struct HostRun {
    int launches = 0;
    std::string fault;
};

inline HostRun& Host() {
    static HostRun h;
    return h;
}

// Pages mapped on first touch: a sample's 128 MiB tensors cost nothing a timing-only run does not read.
inline void* DeviceAlloc(size_t bytes) {
    void* p = mmap(nullptr, bytes + 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

// The launch of `kernel` on `blocks` blocks: the returned callable takes the kernel's arguments and runs every
// block (fibers, for SyncAll). A __cube__ kernel's blocks are AI Cube cores; the timing model then counts the
// cube cores as the kernel's cores.
template <typename F>
auto Launch(KernelKind kind, F kernel, uint32_t blocks, uint32_t /*dynamicUb*/, aclrtStream /*stream*/) {
    return [=](auto... args) {
        auto& st = St();
        // 910B's system workspace (GetSysWorkSpacePtr) is the launch's workspace argument: the one before the tiling,
        // by the kernels' (..., workspace, tiling) convention
        if constexpr (sizeof...(args) >= 2) {
            const auto ws = std::get<sizeof...(args) - 2>(std::make_tuple(args...));
            if constexpr (std::is_pointer_v<std::decay_t<decltype(ws)>>)
                AscendC::emu_ws::Sys() = reinterpret_cast<GM_ADDR>(ws);
        }
        const bool mix = kind == KernelKind::Mix;
        st.blockNum = mix ? 2 * blocks : blocks;  // (a __mix__(1, 2) block is an AI Core: two vector blocks)
        st.mixGroups = mix;
        st.coreKind = kind == KernelKind::Cube ? 1 : 0;
        st.kernelType = kind == KernelKind::Cube ? KERNEL_TYPE_AIC_ONLY : mix ? KERNEL_TYPE_MIX_AIC_1_2
                                                                             : KERNEL_TYPE_AIV_ONLY;
        // ASC_EMU_CORES=ends: only the blocks of the first two and last two cores, which hold the longest core
        // when every core does the same work (the timing-only path of the generated kernels does the same)
        const char* only = std::getenv("ASC_EMU_CORES");
        const double coreCount = (kind == KernelKind::Cube || mix) && !st.tm.coupled ? st.tm.cubeCores : st.tm.cores;
        const uint32_t cores = static_cast<uint32_t>(std::max(1.0, coreCount)), used = std::min(blocks, cores);
        std::vector<uint32_t> order;
        // (a cube or mixed launch: its first and last AI Core, where the first loads the panels it shares)
        const uint32_t ends = kind == KernelKind::Vector || st.tm.coupled ? 2 : 1;
        for (uint32_t b = 0; b < blocks; ++b)
            if (only == nullptr || b % cores < ends || b % cores + ends >= used) order.push_back(b);
        std::string fault;
        const int64_t bad = mix ? RunMix(order, [&] { kernel(args...); }, fault)
                                : RunFibers(order, [&] { kernel(args...); }, fault);
        if (bad >= 0 && Host().fault.empty()) Host().fault = "block " + std::to_string(bad) + ": " + fault;
        Host().launches += 1;
    };
}

}  // namespace asc_emu

inline aclError aclInit(const char*) { return ACL_SUCCESS; }
inline aclError aclFinalize() { return ACL_SUCCESS; }
inline aclError aclrtSetDevice(int32_t) { return ACL_SUCCESS; }
inline aclError aclrtResetDevice(int32_t) { return ACL_SUCCESS; }
inline aclError aclrtCreateContext(aclrtContext* c, int32_t) { return *c = nullptr, ACL_SUCCESS; }
inline aclError aclrtDestroyContext(aclrtContext) { return ACL_SUCCESS; }
inline aclError aclrtCreateStream(aclrtStream* s) { return *s = nullptr, ACL_SUCCESS; }
inline aclError aclrtDestroyStream(aclrtStream) { return ACL_SUCCESS; }

inline aclError aclrtMallocHost(void** p, size_t bytes) {
    *p = asc_emu::DeviceAlloc(bytes);
    return *p == nullptr ? 1 : ACL_SUCCESS;
}
inline aclError aclrtFreeHost(void*) { return ACL_SUCCESS; }  // (kept mapped: the process ends soon)

// Device memory: a GM buffer of the emulator, every one writable (a sample's kernel may write any of them).
inline aclError aclrtMalloc(void** p, size_t bytes, aclrtMemMallocPolicy) {
    *p = asc_emu::DeviceAlloc(bytes);
    if (*p == nullptr) return 1;
    auto& gm = asc_emu::St().gm;
    gm.push_back({"device buffer " + std::to_string(gm.size()), static_cast<uint8_t*>(*p), bytes, true, {}});
    return ACL_SUCCESS;
}
inline aclError aclrtFree(void*) { return ACL_SUCCESS; }

inline aclError aclrtMemcpy(void* dst, size_t dstMax, const void* src, size_t count, aclrtMemcpyKind) {
    if (count > dstMax) return 1;
    if (asc_emu::Values() || count < (1u << 20)) std::memcpy(dst, src, count);
    return ACL_SUCCESS;
}

// The launches so far are complete: print the run's JSON line (or its fault).
inline aclError aclrtSynchronizeStream(aclrtStream) {
    auto& st = asc_emu::St();
    if (!asc_emu::Host().fault.empty()) {
        std::string m;
        for (char c : asc_emu::Host().fault) m += (c == '"' || c == '\\' || c == '\n') ? '?' : c;
        std::cout << "{\"error\": \"fault\", \"message\": \"" << m << "\"}" << std::endl;
        std::exit(1);
    }
    std::cout << "{\"block_dim\": " << st.blockNum << ", \"gm_read\": " << st.gmReadBytes
              << ", \"gm_write\": " << st.gmWriteBytes << ", \"time\": " << asc_emu::TimingJson() << "}" << std::endl;
    return ACL_SUCCESS;
}
