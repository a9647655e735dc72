// asc-onnx Ascend C CPU emulator: runtime state shared by every header.
// Our own code, written from the public Ascend C documentation (see shared/reference/cann_facts.md).
// It runs a kernel one block after another and fails loudly where the hardware would misbehave.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#define __aicore__
#define __global__
#define __gm__
#define GM_ADDR uint8_t*

namespace asc_emu {

// A hardware rule the kernel broke; the harness reports it and exits non-zero.
struct Fault : std::runtime_error {
    explicit Fault(const std::string& m) : std::runtime_error(m) {}
};

[[noreturn]] inline void Fail(const std::string& what) { throw Fault(what); }

// What differs between SoCs for the code the generator emits.
struct Soc {
    std::string name = "Ascend910B";
    uint32_t ubBytes = 196352;  // host-reported UB (196608 - 256 reserved), cann_facts §3.4
    bool hasDataCopyPad = true;  // not on 310P / 910A (cann_facts §4.3)
    bool hasBf16 = true;         // no bf16 at all on 310P (cann_facts §5.2)
};

// One global-memory allocation the harness registered.
struct GmBuffer {
    std::string name;
    uint8_t* base;
    size_t bytes;
    bool output;
    std::vector<int32_t> writer;  // block that wrote each byte, -1 = never written
};

struct State {
    Soc soc;
    int64_t blockIdx = 0;
    int64_t blockNum = 1;
    uint64_t gmReadBytes = 0;
    uint64_t gmWriteBytes = 0;
    std::map<std::string, uint64_t> vecInstr;  // vector instructions by API name
    std::map<std::string, uint64_t> vecElems;  // elements processed by API name
    std::vector<GmBuffer> gm;
    uint64_t ubPeak = 0;
};

inline State& St() {
    static State s;
    return s;
}

inline GmBuffer& FindGm(const void* p, size_t bytes, const char* what) {
    auto* a = static_cast<const uint8_t*>(p);
    for (auto& b : St().gm) {
        if (a >= b.base && a < b.base + b.bytes + (bytes == 0 ? 1 : 0)) {
            if (a + bytes > b.base + b.bytes) {
                Fail(std::string(what) + ": global memory access past the end of '" + b.name + "' (offset " +
                     std::to_string(a - b.base) + " + " + std::to_string(bytes) + " bytes > " +
                     std::to_string(b.bytes) + ")");
            }
            return b;
        }
    }
    Fail(std::string(what) + ": address outside every global-memory tensor");
}

inline void GmRead(const void* p, size_t bytes, const char* what) {
    if (bytes == 0) return;
    FindGm(p, bytes, what);
    St().gmReadBytes += bytes;
}

inline void GmWrite(const void* p, size_t bytes, const char* what) {
    if (bytes == 0) return;
    GmBuffer& b = FindGm(p, bytes, what);
    if (!b.output) Fail(std::string(what) + ": write into input tensor '" + b.name + "'");
    size_t off = static_cast<const uint8_t*>(p) - b.base;
    int32_t me = static_cast<int32_t>(St().blockIdx);
    for (size_t i = off; i < off + bytes; ++i) {
        if (b.writer[i] != -1 && b.writer[i] != me) {
            Fail(std::string(what) + ": blocks " + std::to_string(b.writer[i]) + " and " + std::to_string(me) +
                 " both write byte " + std::to_string(i) + " of output '" + b.name + "'");
        }
        b.writer[i] = me;
    }
    St().gmWriteBytes += bytes;
}

inline void CountVec(const char* api, uint64_t elems) {
    St().vecInstr[api] += 1;
    St().vecElems[api] += elems;
}

}  // namespace asc_emu
