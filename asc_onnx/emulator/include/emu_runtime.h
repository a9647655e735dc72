// asc-onnx Ascend C CPU emulator: runtime state shared by every header.
// Our own code, written from the public Ascend C documentation and the open implementation in
// shared/ascend/asc-devkit (see shared/reference/cann_facts.md). It runs a kernel one block after
// another and fails loudly where the hardware would misbehave.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <deque>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <sys/mman.h>

#define __aicore__
#define __global__
#define __gm__
// Where a kernel runs (bisheng's function qualifiers): the sample runner reads them from the source, the launch
// takes them from it (acl/acl.h); in C++ they qualify nothing.
#define __vector__
#define __cube__
#define __mix__(cube, vec)
#define GM_ADDR uint8_t*

// The architecture the kernel is compiled for, as bisheng defines it: 2201 Atlas A2/A3 (910B), 2002 310P.
#ifndef __NPU_ARCH__
#define __NPU_ARCH__ 2201
#endif

// bisheng's --cce-auto-sync, on by default in custom-op projects: the compiler orders the S pipe with every
// other pipe (a GetValue after a vector write waits for it). Built with 0, the emulator models
// --cce-auto-sync=off, where a scalar read of vector results needs SetFlag/WaitFlag<HardEvent::V_S>.
#ifndef ASC_EMU_AUTO_SYNC
#define ASC_EMU_AUTO_SYNC 1
#endif

namespace asc_emu {

// A hardware rule the kernel broke; the harness reports it and exits non-zero.
struct Fault : std::runtime_error {
    explicit Fault(const std::string& m) : std::runtime_error(m) {}
};

[[noreturn]] inline void Fail(const std::string& what) { throw Fault(what); }

// Where in the kernel an API was called: the default argument of every emulated API, so the
// constructor's own defaults take the caller's file and line.
struct Loc {
    const char* file;
    int line;
    Loc(const char* f = __builtin_FILE(), int l = __builtin_LINE()) : file(f), line(l) {}
    std::string Str() const {
        const char* base = std::strrchr(file, '/');
        return std::string(base ? base + 1 : file) + ":" + std::to_string(line);
    }
};
#define ASC_EMU_HERE (asc_emu::Loc())

// What differs between SoCs for the code the generator emits (defaults follow __NPU_ARCH__).
struct Soc {
#if __NPU_ARCH__ == 2002
    std::string name = "Ascend310P";
    uint32_t ubBytes = 262144;       // GetCoreMemSize(UB): 256 KiB, nothing subtracted on 310P
    uint32_t ubPhysical = 262144;    // the unified buffer itself (a static LocalTensor may use all of it)
    uint32_t l1Bytes = 1048576;      // L1 Buffer, 1 MB (cann_facts.md section 15)
    uint32_t l1Physical = 1048576;   // what a static LocalTensor may use
    uint32_t l0cBytes = 262144;      // L0C: TOTAL_L0C_SIZE, 256 KB
    uint32_t tmpUbOffset = 253952;   // TMP_UB_OFFSET, 248 KiB (impl/basic_api/utils/kernel_utils_constants.h)
    bool hasDataCopyPad = false;     // compiles, does nothing at run time (dav_m200 data copy impl)
    bool hasBf16 = false;
#else
    std::string name = "Ascend910B";
    uint32_t ubBytes = 196352;       // GetCoreMemSize(UB): 196608 - 256 reserved for KFC
    uint32_t ubPhysical = 196608;    // the unified buffer itself, 192 KiB (a static LocalTensor may use all of it)
    uint32_t l1Bytes = 524160;       // L1 Buffer: TOTAL_L1_SIZE, 512 KB - 128 (kernel_utils_constants.h)
    // A static LocalTensor may use all 512 KB: the 128 bytes are KFC's (the basic-API matmul sample, measured on
    // the chip, puts its B1 pong buffer at [384 KB, 512 KB)).
    uint32_t l1Physical = 524288;
    uint32_t l0cBytes = 131072;      // L0C: TOTAL_L0C_SIZE, 128 KB
    uint32_t tmpUbOffset = 188416;   // TMP_UB_OFFSET, 184 KiB
    bool hasDataCopyPad = true;
    bool hasBf16 = true;
#endif
    uint32_t l0aBytes = 65536;       // L0A and L0B: TOTAL_L0A_SIZE, TOTAL_L0B_SIZE, 64 KB each
    uint32_t l0bBytes = 65536;
};

// The local memories the emulator tracks accesses of, per 32-byte block.
enum class Mem { UB, L1, L0A, L0B, L0C };
inline const char* MemName(Mem m) {
    static const char* n[] = {"unified-buffer", "L1", "L0A", "L0B", "L0C"};
    return n[static_cast<int>(m)];
}

// The in-order pipes of a core: a vector core's S, V, MTE2 and MTE3, and a cube core's MTE1 (L1 -> L0A/L0B), M
// (Mmad) and FIX (L0C -> GM) beside its S and MTE2. S is ordered with every other pipe by the compiler's auto-sync;
// V with V by auto-inserted barriers; everything else only by queues, flags, unit flags and barriers
// (docs: 同步控制/核内同步/关键特性说明.md, table 1).
enum PipeId { PS = 0, PV = 1, PMTE2 = 2, PMTE3 = 3, PMTE1 = 4, PM = 5, PFIX = 6, NPIPES = 7 };
inline const char* PipeName(int p) {
    static const char* n[] = {"S", "V", "MTE2", "MTE3", "MTE1", "M", "FIX"};
    return n[p];
}

// The timing model's constants: cycles of the core clock unless named otherwise. The harness writes them from
// asc_onnx/hardware.py (one table per SoC, every figure with its source) into the file ASC_EMU_TIMING names; the
// defaults below are that table's 910B values, so hand-written test kernels time without a file.
struct TimingConsts {
    double clockHz = 1.8e9;
    double gmBytesPerS = 1.48e12;    // HBM sustained, shared by every core the kernel runs on
    double l2BytesPerS = 7e12;       // L2 hits (a re-read within an L2's worth of traffic: Classify)
    double l2Bytes = 192.0 * 1048576;
    double coreDmaBytes = 64;        // per cycle, one vector core's DMA engines at most (assumed)
    double cubeDmaBytes = 128;       // per cycle, one cube core's MTE2 into L1 at most (assumed)
    double dmaLatency = 200;         // a copy's completion after its last byte left (Add sample Case 2)
    double dmaIssue = 13;            // a vector core's copy instruction holds its MTE before its bytes (data_copy)
    double dmaRow = 0.43;            // each row (burst) of a copy holds its MTE this much more (data_copy)
    double vecIssue = 22;            // a vector instruction's fixed cost before its first repeat (Add sample)
    double vecRepeat = 1;            // one 256-byte repeat
    double vecSlowRepeat = 2;        // Exp, Ln, Sqrt, Div, Reciprocal, Rsqrt per repeat (assumed)
    double nd2nzRow = 5.1;           // the cube's MTE2 turns at most one ND row into NZ per this many (data_copy)
    double hbmWriteBack = 1.5;       // an evicted dirty byte's HBM time in read bytes' (Add sample Case 4)
    double ubReadConflict = 1;       // a repeat whose sources share a UB bank group: one beat more (bank_conflict_ub)
    double ubWriteConflict = 0.75;    // a repeat whose destination meets a source's bank elsewhere (bank_conflict_ub)
    double scalarOp = 2;             // a scalar access (assumed)
    double dispatch = 1;             // the scalar unit hands one instruction to a pipe
    double vToS = 30;                // a scalar wait on the vector pipe drains it (assumed)
    double flag = 20;                // a cross-pipe flag from set to wait (assumed)
    double kfc = 1800;               // a vector core's Matmul message to the cube core and back (assumed)
    double cubeMacs = 4096;          // fp16 multiply-accumulates per cycle (16 x 16 x 16)
    double cubeFp32 = 0.25;          // float's share of that rate (2201: a quarter)
    double mte1Bytes = 256;          // L1 -> L0A/L0B per cycle (assumed)
    double mte1Issue = 0;            // a LoadData instruction's fixed MTE1 time (basic-API matmul sample)
    double mmadIssue = 0;            // an Mmad instruction's fixed M time (basic-API matmul sample)
    double fixIssue = 0;             // a Fixpipe instruction's fixed FIX time (assumed)
    double fixBytes = 128;           // L0C -> GM per cycle through the fixpipe, before the GM share (assumed)
    double cores = 48;               // cores sharing GM: vector cores (910B) or AI Cores (310P)
    double cubeCores = 24;
    double syncAll = 1800;           // SyncAll: the last block's arrival to every block's release (assumed)
    bool coupled = false;            // 310P: cube and vector in one core, no KFC
    bool values = true;              // ASC_EMU_VALUES=0: timing only, no arithmetic
};

// One issued operation, for fault messages.
struct OpRec {
    int pipe;
    std::string what;
    Loc loc;
    double start = 0;  // when it started (the timing model's cycles)
};

// A vector clock: c[q] = how many of pipe q's operations are known complete.
struct Clock {
    uint64_t c[NPIPES] = {};
    void Join(const Clock& o) {
        for (int i = 0; i < NPIPES; ++i) c[i] = c[i] > o.c[i] ? c[i] : o.c[i];
    }
};

// Last access of one 32-byte unified-buffer block.
struct UbBlock {
    int32_t writeOp = -1;           // op that wrote it last
    uint64_t writeSeq = 0;          // that op's sequence number on its pipe
    int32_t readOp[NPIPES] = {-1, -1, -1, -1, -1, -1, -1};  // latest reader per pipe since the write
    uint64_t readSeq[NPIPES] = {};
    int32_t tornOp = -1;            // an earlier write nothing orders with the last: the bytes are either's
    uint64_t tornSeq = 0;
};

// Last MTE3 write of one 32-byte global-memory block of an output (byte mask).
struct GmBlock {
    int32_t op = -1;
    uint64_t seq = 0;
    uint32_t mask = 0;
    int64_t block = -1;  // whose op (op ids and sequence numbers are a block's own)
};

// A per-32-byte-block map of a GM buffer that holds only the chunks a run touched: a timing run of a tensor of
// tens of GB, whose first and last cores touch a few MB of it, pays for those few MB (a full vector of entries per
// block cost 0.75x the tensor: 22 GB for a SiLU timed at [8, 64, 2048, 2048]). Entries never written read as the
// value `assign` set.
template <typename T>
class Sparse {
public:
    Sparse() = default;
    Sparse(Sparse&&) = default;
    Sparse& operator=(Sparse&&) = default;
    Sparse(const Sparse& o) : n_(o.n_), fill_(o.fill_), chunks_(o.chunks_.size()) {
        for (size_t i = 0; i < chunks_.size(); ++i)
            if (o.chunks_[i]) chunks_[i].reset(new Chunk(*o.chunks_[i]));
    }
    Sparse& operator=(const Sparse& o) {
        if (this != &o) *this = Sparse(o);
        return *this;
    }
    size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    void assign(size_t n, const T& fill) {
        n_ = n, fill_ = fill;
        chunks_.clear();
        chunks_.resize((n + kChunk - 1) / kChunk);
    }
    T& operator[](size_t i) {
        auto& c = chunks_[i / kChunk];
        if (!c) c.reset(new Chunk(fill_));
        return (*c)[i % kChunk];
    }
    const T& operator[](size_t i) const {
        const auto& c = chunks_[i / kChunk];
        return c ? (*c)[i % kChunk] : fill_;
    }

private:
    static constexpr size_t kChunk = 1024;
    struct Chunk {
        explicit Chunk(const T& v) { std::fill(e, e + kChunk, v); }
        T& operator[](size_t i) { return e[i]; }
        const T& operator[](size_t i) const { return e[i]; }
        T e[kChunk];
    };
    size_t n_ = 0;
    T fill_{};
    std::vector<std::unique_ptr<Chunk>> chunks_;
};

// One global-memory allocation the harness registered.
struct GmBuffer {
    std::string name;
    uint8_t* base;
    size_t bytes;
    bool output;
    std::vector<int32_t> writer;  // block that wrote each byte, -1 = never written
    Sparse<GmBlock> mte3 = {};  // in-flight MTE3 writes, per 32-byte block
    bool cubeShared = false;    // a workspace the cube core writes and the vector core reads
    Sparse<GmBlock> mte2 = {};  // last MTE2 read per 32-byte block (cube-shared buffers only)
    Sparse<uint32_t> seen = {};  // per 32-byte block: the L2 clock (KiB, + 1) when last touched, 0: never
    Sparse<uint32_t> seenCube = {};  // the same for the Matmul API's transfers, in emulation order
    // per 32-byte block, where `writer` is kept: the cores (block mod 64) that read and wrote it in its phase, the
    // SyncAll phase it was last touched in
    Sparse<uint64_t> readers = {}, writers = {};
    Sparse<uint32_t> phase = {};
    Sparse<uint32_t> epoch = {};  // the writer's CrossCoreSetFlags issued before its write (a __mix__ launch)
    uint64_t hbm = 0;                 // bytes of it the L2 rule has costed as HBM traffic
};

// One 64-byte line of the scalar data cache (GlobalTensor::GetValue/SetValue).
struct CacheLine {
    uint8_t data[64];
    uint64_t dirty = 0;  // byte mask of SetValue writes not yet cleaned to GM
    int32_t op = -1;     // last SetValue
};

// Output of an asynchronous Matmul::IterateAll the cube core may still be writing.
struct PendingC {
    const uint8_t* base;
    size_t bytes;
    std::string what;
    uint64_t mte3Seq = 0;  // > 0: written by this core's MTE3 (310P Matmul C), ordered once MTE2 knows MTE3 this far
};

// What an asynchronous Matmul::IterateAll reads (A, B, the bias: the bounds of each) until its WaitIterateAll: the
// cube core takes the product when it gets to the message, not when the vector core posts it, so a write there
// before the wait may or may not reach the product.
struct CubeRead {
    const uint8_t* base;
    size_t bytes;
    std::string what;
    uint64_t id;  // the IterateAll's
};

// Cube-side counters of Matmul objects (lib/matmul_intf.h), summed over blocks.
struct CubeCounters {
    uint64_t macs = 0;        // multiply-accumulates, whole 16x16 fractals (8-wide K for float)
    uint64_t blocks = 0;      // C blocks computed
    uint64_t aReadBytes = 0;  // GM -> L1 bytes of A
    uint64_t bReadBytes = 0;  // GM -> L1 bytes of B and the bias
    uint64_t cBytes = 0;      // C bytes the cube handed to the vector side (workspace or UB)
    uint64_t l1Peak = 0;      // most L1 the registered objects of one block reserve
};

// Per-block timing: every operation starts when its pipe is free, the scalar unit has dispatched it and what it is
// ordered after (the vector clocks below) is complete; `done` is each operation's completion by sequence number.
struct PipeTimes {
    std::vector<double> done[NPIPES];
    double free[NPIPES] = {};  // free[PS] is the scalar unit's own time, the dispatch point
    double lastDone[NPIPES] = {};
    double busy[NPIPES] = {};
    std::map<double, double> port;        // the core's GM port, busy intervals (start -> end): MTE2 and MTE3 share it
    double start = 0;                     // start of the operation issued last
};

// One cube core's stages (910B: shared by its two vector cores; 310P: inside the AI Core).
struct CubeTimes {
    double mte2 = 0, mte1 = 0, m = 0, fix = 0;             // when each stage is free
    double busyMte2 = 0, busyMte1 = 0, busyM = 0, busyFix = 0;
};

struct PipeState {
    PipeTimes t;
    uint64_t seq[NPIPES] = {};            // operations issued per pipe
    Clock known[NPIPES];                   // known[p]: what pipe p's next operation is ordered after
    std::vector<UbBlock> ub = std::vector<UbBlock>(512 * 1024 / 32);
    std::vector<UbBlock> l1;               // the cube core's L1, per 32-byte block, once a kernel touches it
    std::vector<UbBlock> l0a, l0b, l0c;    // its L0 buffers, likewise
    std::vector<uint8_t> unitFlag;         // L0C's unit flags, one per 512-byte unit (Mmad/Fixpipe unitFlag)
    std::vector<int32_t> unitOp;           // the Mmad or Fixpipe that set each unit's flag last
    std::vector<uint64_t> unitSeq;         // its sequence number on its pipe
    std::map<int, Clock> flags;            // pending SetFlag per (event, id)
    std::map<uintptr_t, CacheLine> cache;  // data-cache lines by GM address / 64
    Clock sExplicit;                       // what S knows complete through WaitFlag/PipeBarrier<PIPE_ALL> only
    uint64_t l1Reserved = 0;               // L1 the block's Matmul objects reserve
    void* activeMatmul = nullptr;          // the Matmul object whose iteration is open (End() closes it)
    std::vector<PendingC> pending;         // cube output not yet waited for
    std::vector<CubeRead> cubeReads;       // cube inputs not yet waited for
    uint64_t asyncIds = 0;                 // IterateAll<false> calls so far
    std::deque<std::pair<uint64_t, bool>> l2Lines;  // this core's share of L2 in allocation order: (bytes, dirty)
    uint64_t l2Resident = 0;                        // bytes of those lines
    uint64_t l2Alloc = 0;                           // bytes this block has brought into L2
};

// Timing of one finished block.
struct BlockTime {
    int64_t block = 0;
    int kind = 0;  // St().coreKind of the core that ran it
    double cycles = 0;
    double busy[NPIPES] = {};
};

struct State {
    Soc soc;
    TimingConsts tm;
    std::vector<BlockTime> blockTimes;
    std::map<int64_t, CubeTimes> cubeCores;  // by cube core
    uint64_t hbmBytes = 0;                     // GM bytes costed at HBM bandwidth
    uint64_t l2Bytes = 0;                      // GM bytes costed as L2 hits
    std::map<int64_t, uint64_t> coreL2;        // L2 allocations of the blocks each core has finished (the L2 rule)
    uint64_t l2Clock = 0;                      // GM bytes brought into L2 so far, in emulation order (the cube's rule)
    uint64_t l2WriteBacks = 0;                 // dirty bytes evicted to HBM during the kernel
    double vecMoved = 0, cubeMoved = 0;        // GM bytes the vector cores and the cube cores have moved (GmShare)
    uint64_t vecReadHbm = 0, vecReadL2 = 0;    // the vector cores' GM reads by level (a matmul's C ring, say)
    int64_t blockIdx = 0;
    int64_t blockNum = 1;
    uint32_t syncPhase = 0;  // SyncAll barriers every block has passed
    int kernelType = -1;     // KERNEL_TASK_TYPE_DEFAULT's, where the kernel states it
    int coreKind = 0;        // what runs the block: 0 a vector core (or 310P's AI Core), 1 a cube core (AIC)
    int64_t subBlockIdx = 0; // GetSubBlockIdx: which of its AI Core's two vector cores (a __mix__(1, 2) launch)
    bool mixGroups = false;  // a __mix__(1, 2) launch: each block is an AIC and its two AIVs (emu_blocks.h)
    uint64_t gmReadBytes = 0;
    uint64_t gmWriteBytes = 0;
    std::map<std::string, uint64_t> vecInstr;  // vector instructions by API name
    std::map<std::string, uint64_t> vecElems;  // elements processed by API name
    uint64_t scalarInstr = 0;                  // scalar UB/GM accesses (GetValue/SetValue)
    std::vector<GmBuffer> gm;
    uint64_t ubPeak = 0;
    uint64_t ubUsed = 0;  // bytes the running block's TPipe has handed out (from offset 0)
    std::vector<OpRec> ops;  // operations of the running block
    PipeState pipes;
    CubeCounters cube;
};

inline TimingConsts LoadTiming();

inline State& St() {
    static State s = [] {
        State x;
        x.tm = LoadTiming();
        return x;
    }();
    return s;
}

// The constants from the file ASC_EMU_TIMING names ("name value" lines), and ASC_EMU_VALUES=0 for timing only.
inline TimingConsts LoadTiming() {
    TimingConsts t;
#if __NPU_ARCH__ == 2002
    t.clockHz = 1.08e9, t.gmBytesPerS = 204.8e9, t.l2Bytes = 0, t.cores = 8, t.cubeCores = 8, t.coupled = true;
    t.kfc = 0;
#endif
    if (const char* v = std::getenv("ASC_EMU_VALUES")) t.values = std::string(v) != "0";
    const char* path = std::getenv("ASC_EMU_TIMING");
    if (path == nullptr) return t;
    std::map<std::string, double*> slot = {
        {"clock_hz", &t.clockHz}, {"gm_bytes_per_s", &t.gmBytesPerS}, {"l2_bytes_per_s", &t.l2BytesPerS},
        {"l2_bytes", &t.l2Bytes}, {"core_dma_bytes", &t.coreDmaBytes}, {"cube_dma_bytes", &t.cubeDmaBytes}, {"dma_latency", &t.dmaLatency},
        {"dma_issue", &t.dmaIssue}, {"dma_row", &t.dmaRow},
        {"vec_issue", &t.vecIssue}, {"vec_repeat", &t.vecRepeat}, {"vec_slow_repeat", &t.vecSlowRepeat},
        {"hbm_write_back", &t.hbmWriteBack}, {"nd2nz_row", &t.nd2nzRow}, {"ub_read_conflict", &t.ubReadConflict}, {"ub_write_conflict", &t.ubWriteConflict},
        {"scalar_op", &t.scalarOp}, {"dispatch", &t.dispatch}, {"v_to_s", &t.vToS}, {"flag", &t.flag},
        {"kfc", &t.kfc}, {"cube_macs", &t.cubeMacs}, {"cube_fp32", &t.cubeFp32}, {"mte1_bytes", &t.mte1Bytes},
        {"fix_bytes", &t.fixBytes}, {"mte1_issue", &t.mte1Issue}, {"mmad_issue", &t.mmadIssue},
        {"fix_issue", &t.fixIssue},
        {"cores", &t.cores}, {"cube_cores", &t.cubeCores}, {"sync_all", &t.syncAll}};
    FILE* f = std::fopen(path, "r");
    if (f == nullptr) throw std::runtime_error(std::string("ASC_EMU_TIMING: cannot read ") + path);
    char name[64];
    double value = 0;
    while (std::fscanf(f, "%63s %lf", name, &value) == 2) {
        auto it = slot.find(name);
        if (it != slot.end()) *it->second = value;
        else if (std::string(name) == "coupled") t.coupled = value != 0;
    }
    std::fclose(f);
    return t;
}

inline bool Values() { return St().tm.values; }

// The allocator of a driver's GM buffers: zero pages mapped on first touch, and a no-op default construction, so
// resize() touches nothing. A timing-only run allocates every tensor at full size but pays only for the pages its
// blocks use. Large buffers are mapped MAP_NORESERVE: the kernel's overcommit heuristic refuses a calloc larger than
// the machine, though a timing run reads only zero pages of it and writes none.
template <typename T>
struct LazyZero {
    using value_type = T;
    static constexpr size_t kMapped = size_t{1} << 24;  // bytes from which a buffer is mapped rather than calloc'd
    LazyZero() = default;
    template <class U>
    LazyZero(const LazyZero<U>&) {}
    T* allocate(size_t n) {
        if (n * sizeof(T) >= kMapped) {
            void* p = mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
            if (p == MAP_FAILED) throw std::bad_alloc();
            return static_cast<T*>(p);
        }
        void* p = std::calloc(n ? n : 1, sizeof(T));
        if (p == nullptr) throw std::bad_alloc();
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t n) {
        if (n * sizeof(T) >= kMapped) munmap(p, n * sizeof(T));
        else std::free(p);
    }
    template <class U, class... A>
    void construct(U* p, A&&... a) {
        if constexpr (sizeof...(A) > 0) ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
    template <class U>
    bool operator==(const LazyZero<U>&) const { return true; }
    template <class U>
    bool operator!=(const LazyZero<U>&) const { return false; }
};
using Bytes = std::vector<uint8_t, LazyZero<uint8_t>>;

// Start a block: fresh pipes, no pending flags, an empty data cache.
inline void ResetBlock() {
    St().ops.clear();
    St().pipes = PipeState{};
}

inline std::string Describe(int32_t op) {
    const OpRec& r = St().ops[op];
    return r.what + " (" + PipeName(r.pipe) + ", " + r.loc.Str() + ")";
}

// Issue one operation on a pipe; returns its id. Its sequence number is St().pipes.seq[pipe].
inline int32_t Issue(int pipe, const std::string& what, const Loc& loc) {
    // 910B's cores are of two kinds: a vector core has no cube pipes, a cube core (AIC) no vector unit
    if (!St().tm.coupled && St().coreKind == 1 && pipe == PV)
        Fail(what + " at " + loc.Str() + " on a cube core (AIC): it has no vector unit");
    if (!St().tm.coupled && St().coreKind == 0 && (pipe == PMTE1 || pipe == PM || pipe == PFIX))
        Fail(what + " at " + loc.Str() + " on a vector core (AIV): it has no cube unit");
    auto& ps = St().pipes;
    ps.seq[pipe] += 1;
    // S and V are ordered with their own earlier operations (S trivially, V by auto-inserted barriers).
    if (pipe == PS || pipe == PV) ps.known[pipe].c[pipe] = ps.seq[pipe] - 1;
    // The compiler orders S with every pipe in both directions.
    if (pipe == PS && ASC_EMU_AUTO_SYNC) {
        for (int q = 0; q < NPIPES; ++q) ps.known[PS].c[q] = ps.seq[q] - (q == PS ? 1 : 0);
    }
    St().ops.push_back(OpRec{pipe, what, loc});
    // Timing: the operation starts once its pipe is free, the scalar unit has dispatched it (in program order) and
    // what it is ordered after is complete (a cross-pipe ordering costs a flag's latency).
    auto& t = ps.t;
    const auto& tm = St().tm;
    double start = t.free[pipe];
    for (int q = 0; q < NPIPES; ++q) {
        const uint64_t c = ps.known[pipe].c[q];
        if (c > 0 && c <= t.done[q].size()) start = std::max(start, t.done[q][c - 1] + (q == pipe ? 0.0 : tm.flag));
    }
    if (pipe != PS) {
        start = std::max(start, t.free[PS]);
        t.free[PS] += tm.dispatch;
        t.busy[PS] += tm.dispatch;
    }
    t.start = start;
    St().ops.back().start = start;
    t.free[pipe] = start;
    t.done[pipe].push_back(start);
    t.lastDone[pipe] = std::max(t.lastDone[pipe], start);
    return static_cast<int32_t>(St().ops.size() - 1);
}

// The operation issued last on `pipe` completes no earlier than `at`.
inline void CompleteAt(int pipe, double at) {
    auto& t = St().pipes.t;
    t.done[pipe].back() = std::max(t.done[pipe].back(), at);
    t.lastDone[pipe] = std::max(t.lastDone[pipe], t.done[pipe].back());
}

// The operation issued last on `pipe` keeps the pipe busy `cycles` more and completes `latency` after that.
inline void Spend(int pipe, double cycles, double latency = 0) {
    auto& t = St().pipes.t;
    t.free[pipe] += cycles;
    t.busy[pipe] += cycles;
    CompleteAt(pipe, t.free[pipe] + latency);
}

// The scalar unit waits until `at` (a drain, a flag), then spends `cycles`.
inline void SWait(double at, double cycles = 0) {
    auto& t = St().pipes.t;
    t.free[PS] = std::max(t.free[PS], at) + cycles;
    t.busy[PS] += cycles;
}

// Bytes per cycle one core's DMA moves: its share of GM bandwidth among the engines the kernel runs (the vector
// cores; the cube cores too once a Matmul is registered, and for the cube the vector cores once one of them moved
// data), at most what one core's engines move.
constexpr int kAicOnly = 1;  // KERNEL_TYPE_AIC_ONLY (kernel_operator.h checks it)

inline double GmShare(double bytesPerS, bool cube = false) {
    const auto& tm = St().tm;
    if (St().kernelType == kAicOnly && !tm.coupled)  // a __cube__ kernel: its blocks are the cube cores
        return std::min(tm.cubeDmaBytes, bytesPerS / tm.clockHz /
                                             std::max(1.0, std::min<double>(St().blockNum, tm.cubeCores)));
    const double vec = std::min<double>(static_cast<double>(St().blockNum), tm.cores);
    const double cubes = tm.coupled ? 0.0 : std::min<double>(std::ceil(vec / 2), tm.cubeCores);
    // A mixed kernel's engines share GM in proportion to what they move (the bytes each side has moved so far):
    // a vector core that reads a ring stage and writes y takes little from the cube cores streaming x and W, and
    // a side that has moved nothing takes nothing.
    const double moved = St().vecMoved + St().cubeMoved;
    const double vecPart = moved > 0 ? St().vecMoved / moved : 0.0, cubePart = moved > 0 ? St().cubeMoved / moved : 0.0;
    const double active = cube ? (tm.coupled ? vec : cubes + vec * vecPart) : vec + cubes * cubePart;
    // HBM and L2 each serve every engine: a port's HBM bytes take its share of HBM and its L2 bytes its share of
    // L2, one after the other (the Add sample's Case 5, reads from HBM and writes into L2 on 48 cores, is their sum:
    // 256 MB at 1.6 TB/s plus 128 MB at 5 TB/s, 186 us, measured 187.68 us).
    return std::min(cube ? tm.cubeDmaBytes : tm.coreDmaBytes, bytesPerS / tm.clockHz / std::max(1.0, active));
}

inline GmBuffer& FindGm(const void* p, size_t bytes, const char* what);

// How a DMA meets L2 (910B): a read allocates the lines it misses, a write allocates without fetching
// (write-back); under CACHE_MODE_DISABLE (GlobalTensor::SetL2CacheHint) neither allocates, and a write goes to HBM.
enum class L2Use { Read, ReadBypass, Write, WriteBypass };

// The L2 rule: a 32-byte block touched again is an L2 hit when fewer bytes than the L2 holds were brought into it
// (lines allocated, read or written, by any core) between the two touches: an LRU cache evicts a line once a
// cache's worth of distinct other lines came after it, and while the working set fits, the lines that come are the
// misses (a resident ring rewritten a thousand times takes its footprint once, not its traffic). Time is the cores'
// own: they run at once, in step, so when a block has allocated a bytes, the chip has allocated about a times the
// cores sharing L2 (blocks emulated one after another would otherwise find their own re-reads resident: the
// data_copy sample's Case 5 rereads its 302 MB four times with no hit, Case 6 a quarter of it with 75%).
// The Matmul API's loads and fixpipe writes (Classify) are timed in emulation order instead: a core's A and B panels
// are shared by the cores of its row and column of the core grid, so a panel one core re-reads has mostly been
// brought in by its neighbours, not by cache-sized streams of their own (own allocations times the cores would
// count every shared panel once per core; the order blocks are emulated in shares them as the chip does). A line
// such a transfer touched is a hit for anyone within an L2's worth of misses in emulation order.
// A read miss costs HBM. A write goes to L2 (write-back, the data_copy and Add samples' "z writes hit the
// L2 Cache"): it costs HBM only when its line is evicted dirty, which is charged to the transfer whose allocation
// evicts it (lines leave in allocation order, each core's from its share of L2); what is still dirty when the
// kernel ends is written back after it.
// A bypassing read neither allocates nor evicts (the Add sample's Case 5: 28.9% faster once x and y stop evicting
// z). 310P: no L2 credit, every byte is HBM traffic.
struct L2Cost {
    uint64_t hbm = 0;  // bytes at HBM bandwidth: read misses and the dirty lines evicted
    uint64_t l2 = 0;   // bytes at L2 bandwidth: hits and written lines
};
inline L2Cost L2Classify(const void* p, size_t bytes, L2Use use = L2Use::Read, bool cube = false) {
    auto& st = St();
    GmBuffer& buf = FindGm(p, bytes, "DMA");
    if (buf.seen.size() != (buf.bytes + 31) / 32) buf.seen.assign((buf.bytes + 31) / 32, 0);
    if (cube && buf.seenCube.size() != (buf.bytes + 31) / 32) buf.seenCube.assign((buf.bytes + 31) / 32, 0);
    const uint64_t nowCube = st.l2Clock / 1024 + 1;
    const size_t off = static_cast<size_t>(static_cast<const uint8_t*>(p) - buf.base);
    const uint64_t window = static_cast<uint64_t>(st.tm.l2Bytes) / 1024;  // in KiB, as the stamps
    const double sharers = std::max(1.0, std::min<double>(static_cast<double>(st.blockNum), st.tm.cores));
    const int64_t core = st.blockIdx % static_cast<int64_t>(std::max(1.0, st.tm.cores));
    const uint64_t ownAlloc = st.pipes.l2Alloc + (st.coreL2.count(core) ? st.coreL2.at(core) : 0);
    const uint64_t now = static_cast<uint64_t>(static_cast<double>(ownAlloc) * sharers) / 1024 + 1;
    const bool writeBack = st.tm.l2Bytes > 0 && !st.tm.coupled;
    if (use == L2Use::WriteBypass) {  // straight to HBM: nothing allocated, nothing stamped
        buf.hbm += bytes;
        return {bytes, 0};
    }
    uint64_t miss = 0;
    for (size_t blk = off / 32; blk <= (off + bytes - 1) / 32 && blk < buf.seen.size(); ++blk) {
        const size_t lo = std::max(off, blk * 32), hi = std::min(off + bytes, blk * 32 + 32);
        const uint32_t last = buf.seen[blk];
        const uint32_t lastCube = buf.seenCube.size() ? buf.seenCube[blk] : 0;
        const bool hit = (last != 0 && (now > last ? now - last : last - now) < window) ||
                         (lastCube != 0 && nowCube - lastCube < window);
        if (!hit) miss += hi - lo;
        if (use != L2Use::ReadBypass || hit) {
            buf.seen[blk] = static_cast<uint32_t>(now);
            if (cube) buf.seenCube[blk] = static_cast<uint32_t>(nowCube);
        }
    }
    if (use != L2Use::ReadBypass) st.pipes.l2Alloc += miss, st.l2Clock += miss;
    if (!writeBack) {  // every miss is HBM traffic
        buf.hbm += miss;
        return {miss, bytes - miss};
    }
    uint64_t hbm = use == L2Use::Write ? 0 : miss, wb = 0;
    if (use != L2Use::ReadBypass && miss > 0) {
        // Evictions: the cores run at once, so each fills L2 at its pace; a core's share of the cache holds its own
        // last allocations (blocks emulated one after another would otherwise see the cache full only from the
        // middle block on, and charge every write-back to the second half).
        const uint64_t share = static_cast<uint64_t>(st.tm.l2Bytes / sharers);
        auto& ps = st.pipes;
        auto& fifo = ps.l2Lines;
        if (!fifo.empty() && fifo.back().second == (use == L2Use::Write)) fifo.back().first += miss;
        else fifo.emplace_back(miss, use == L2Use::Write);
        ps.l2Resident += miss;
        while (ps.l2Resident > share && !fifo.empty()) {  // evict the oldest lines
            const uint64_t out = std::min(fifo.front().first, ps.l2Resident - share);
            if (fifo.front().second) wb += out, st.l2WriteBacks += out;
            fifo.front().first -= out;
            ps.l2Resident -= out;
            if (fifo.front().first == 0) fifo.pop_front();
        }
    }
    // a write-back turns the HBM bus from reads to writes: it costs hbmWriteBack read bytes' time
    hbm += static_cast<uint64_t>(static_cast<double>(wb) * st.tm.hbmWriteBack);
    buf.hbm += hbm;
    return {hbm, use == L2Use::Write ? bytes : bytes - miss};
}

// The HBM bytes of a transfer (the cube's loads and fixpipe writes: the rest of its bytes are L2's).
inline uint64_t Classify(const void* p, size_t bytes, L2Use use = L2Use::Read) {
    return std::min<uint64_t>(L2Classify(p, bytes, use, true).hbm, bytes);
}

// A transfer of `need` cycles of the core's GM port from `at`: it takes the port's free time from `at` on, in bursts
// between the transfers already placed (MTE2 and MTE3 interleave on the port, their sum bounded by its share).
// Returns when its last burst ends.
inline double PortTransfer(double at, double need) {
    auto& t = St().pipes.t;
    auto& port = t.port;
    // intervals that end before either DMA pipe is free can never be used again (a pipe that has issued nothing
    // yet starts no earlier than the scalar unit's dispatch: a read-only kernel would otherwise keep every
    // interval, and merge them all each time)
    const auto& seq = St().pipes.seq;
    const double floor = std::min({seq[PMTE2] == 0 ? t.free[PS] : t.free[PMTE2],
                                   seq[PMTE3] == 0 ? t.free[PS] : t.free[PMTE3],
                                   seq[PFIX] == 0 ? t.free[PS] : t.free[PFIX]});
    while (!port.empty() && port.begin()->second < floor) port.erase(port.begin());
    double cur = at;
    auto it = port.upper_bound(cur);
    if (it != port.begin() && std::prev(it)->second > cur) cur = std::prev(it)->second;
    while (need > 1e-9) {
        const double gapEnd = it == port.end() ? 1e300 : it->first;
        const double take = std::min(need, gapEnd - cur);
        if (take > 0) {
            port[cur] = cur + take;
            need -= take;
            cur += take;
        }
        if (need > 1e-9) {
            cur = it->second;
            ++it;
        }
    }
    // merge the touching intervals around what was placed, so the map stays as small as the port's idle gaps
    auto a = port.lower_bound(at);
    if (a != port.begin()) --a;
    while (a != port.end() && a->first <= cur + 1e-9) {
        auto b = std::next(a);
        if (b != port.end() && b->first <= a->second + 1e-9) {
            a->second = std::max(a->second, b->second);
            port.erase(b);
        } else {
            a = b;
        }
    }
    return cur;
}

// A vector core's copy instruction holds its MTE pipe for a fixed time before its bytes move: the data_copy
// best-practice sample measures 128-byte copies at 0.55 TB/s on 48 cores (about 20 cycles an instruction) where
// 128 KB ones reach 1.49 TB/s.
inline void DmaIssue(int pipe) { Spend(pipe, St().tm.dmaIssue); }

// A DMA of `bytes` at `p` by the operation issued last on `pipe` (MTE2 reads, MTE3 writes), costed by L2Classify.
// A read holds the core's GM port for its transfer: HBM bytes at the core's share of HBM, L2 hits at its share of
// L2. A write streams into L2 at its share of L2 beside the port (the Add sample's Case 5 reads 256 MB from HBM
// and writes 128 MB into L2 in about the time of the reads alone); the dirty lines its allocation evicts take the
// port's HBM time, as they take HBM bandwidth from every core's reads. Each call is one burst (a row of a strided
// copy) and holds the pipe dmaRow cycles first. Completes a DMA latency after.
inline void Dma(int pipe, const void* p, size_t bytes, bool write, bool bypassL2 = false) {
    if (bytes == 0) return;
    auto& st = St();
    // (an AIC of a mixed launch moves bytes for the cube side: GmShare weighs the sides by them)
    (st.coreKind == 1 && st.kernelType != kAicOnly ? st.cubeMoved : st.vecMoved) += static_cast<double>(bytes);
    // a cube core's loads share panels across the core grid as the Matmul API's do: emulation order (L2Classify)
    const bool panels = (st.kernelType == kAicOnly || st.coreKind == 1) && !st.tm.coupled;
    const L2Cost c = L2Classify(p, bytes, write ? (bypassL2 ? L2Use::WriteBypass : L2Use::Write)
                                                : (bypassL2 ? L2Use::ReadBypass : L2Use::Read), panels);
    const uint64_t hbm = c.hbm, l2 = c.l2;
    st.hbmBytes += hbm;
    st.l2Bytes += l2;
    if (!write) st.vecReadHbm += hbm, st.vecReadL2 += l2;
    auto& t = st.pipes.t;
    t.free[pipe] += st.tm.dmaRow, t.busy[pipe] += st.tm.dmaRow;  // each burst (row) of a copy
    const double s = t.free[pipe];
    const bool cube = st.coreKind == 1;
    const double hbmNeed = static_cast<double>(hbm) / GmShare(st.tm.gmBytesPerS, cube);
    const double l2Need = l2 > 0 ? static_cast<double>(l2) / GmShare(st.tm.l2BytesPerS, cube) : 0.0;
    const bool beside = write && !bypassL2 && !st.tm.coupled && st.tm.l2Bytes > 0;  // (310P: no L2)
    const double e = beside ? std::max(PortTransfer(s, hbmNeed), s + l2Need) : PortTransfer(s, hbmNeed + l2Need);
    t.busy[pipe] += beside ? std::max(hbmNeed, l2Need) : hbmNeed + l2Need;
    t.free[pipe] = e;
    CompleteAt(pipe, e + st.tm.dmaLatency);
}

// The operation issued last on `pipe` holds it at least `cycles` from `since` (a per-row or per-instruction floor).
inline void AtLeast(int pipe, double since, double cycles) {
    const double held = St().pipes.t.free[pipe] - since;
    if (held < cycles) Spend(pipe, cycles - held);
}

// The vector instruction issued last moves `bytes` through the vector unit (256 bytes per repeat).
inline void VecCost(uint64_t bytes, bool slow = false) {
    const auto& tm = St().tm;
    const double repeats = std::ceil(static_cast<double>(bytes) / 256.0);
    Spend(PV, tm.vecIssue + repeats * (slow ? tm.vecSlowRepeat : tm.vecRepeat));
}

// One operand of a vector instruction as its repeats walk the unified buffer: its UB offset and strides in 32-byte
// blocks (a contiguous operand: block stride 1, repeat stride 8).
struct VecOperand {
    uint64_t offset = 0;
    uint32_t blkStride = 1, repStride = 8;
};

// UB bank conflicts of a binary vector instruction (910B; the bank_conflict_ub sample's README): the UB is 48
// banks of 32-byte rows in 16 bank groups; an address's bank group is bits 8:5, its bank bits 17:16 with the group.
// In one repeat, two sources reading the same bank group conflict (read-read), and the destination writing a bank a
// source reads at another place in the repeat conflicts (read-write; the same place is served, "hardware
// optimization"). Returns the extra beats: each conflicting repeat costs the timing model's ubReadConflict or
// ubWriteConflict more. 310P's UB is not described there: no conflicts are charged.
inline double BankConflictBeats(const VecOperand& dst, const VecOperand& a, const VecOperand& b, uint32_t repeats,
                                uint32_t blocks) {
    const auto& tm = St().tm;
    if (tm.coupled || (tm.ubReadConflict <= 0 && tm.ubWriteConflict <= 0) || blocks == 0) return 0;
    const auto at = [](const VecOperand& o, uint32_t r, uint32_t k) {
        return o.offset + (static_cast<uint64_t>(r) * o.repStride + static_cast<uint64_t>(k) * o.blkStride) * 32;
    };
    const auto group = [](uint64_t addr) { return static_cast<uint32_t>((addr >> 5) & 15); };
    const auto bank = [](uint64_t addr) { return static_cast<uint32_t>((addr >> 16) & 3) * 16 + ((addr >> 5) & 15); };
    double beats = 0;
    for (uint32_t r = 0; r < repeats; ++r) {
        uint32_t groupsA = 0, groupsB = 0;
        for (uint32_t k = 0; k < blocks; ++k) {
            groupsA |= 1u << group(at(a, r, k));
            groupsB |= 1u << group(at(b, r, k));
        }
        const bool rr = (groupsA & groupsB) != 0;  // (two reads of one block too: the README is silent on it)
        bool rw = false;
        for (uint32_t kd = 0; kd < blocks && !rw; ++kd) {
            const uint64_t d = at(dst, r, kd);
            for (uint32_t ks = 0; ks < blocks && !rw; ++ks)
                for (const VecOperand* o : {&a, &b})
                    if (ks != kd && bank(at(*o, r, ks)) == bank(d) && at(*o, r, ks) != d) rw = true;
        }
        beats += (rr ? tm.ubReadConflict : 0.0) + (rw ? tm.ubWriteConflict : 0.0);
    }
    return beats;
}

// A reduction that ends in a scalar register (dav_c220/dav_m200 ReduceSum, ReduceMax, ReduceMin count forms): the
// implementation waits V -> S (a drain of the vector pipe), stores the scalar, then waits S -> V and S -> MTE3.
inline void ReduceDrain() {
    const auto& tm = St().tm;
    SWait(St().pipes.t.lastDone[PV] + tm.vToS, tm.scalarOp + 2 * tm.flag);
}

inline bool Ordered(int pipe, int otherPipe, uint64_t otherSeq) {
    if (ASC_EMU_AUTO_SYNC && (pipe == PS || otherPipe == PS)) return true;  // compiler auto-sync
    if (pipe == otherPipe && (pipe == PS || pipe == PV)) return true;
    return St().pipes.known[pipe].c[otherPipe] >= otherSeq;
}

[[noreturn]] inline void Race(const char* kind, int32_t op, int32_t other, uint64_t ubOffset,
                              const char* where = "unified-buffer") {
    Fail(std::string("pipe race (") + kind + ") on " + where + " offset " + std::to_string(ubOffset) + ": " +
         Describe(op) + " touches bytes that " + Describe(other) +
         " may still be using; nothing orders the two (EnQue/DeQue, SetFlag/WaitFlag or PipeBarrier)");
}

// Record an access of `op` over [offset, offset + bytes) of a local memory (the unified buffer unless `m` says
// otherwise: the cube core's L1, L0A, L0B and L0C are under the same rules) and fault on an unordered conflict.
// The unit is a 32-byte block, in L0A/L0B/L0C a 512-byte fractal (what every access of theirs moves whole).
inline void UbAccess(int32_t op, uint64_t offset, uint64_t bytes, bool write, Mem m = Mem::UB) {
    if (bytes == 0) return;
    auto& ps = St().pipes;
    std::vector<UbBlock>& mem = m == Mem::UB ? ps.ub : m == Mem::L1 ? ps.l1 : m == Mem::L0A ? ps.l0a
                              : m == Mem::L0B ? ps.l0b : ps.l0c;
    const uint64_t unit = m == Mem::UB || m == Mem::L1 ? 32 : 512;
    if (mem.empty()) mem.resize(1048576 / unit);
    const char* where = MemName(m);
    const int p = St().ops[op].pipe;
    const uint64_t seq = ps.seq[p];
    for (uint64_t b = offset / unit; b < (offset + bytes + unit - 1) / unit && b < mem.size(); ++b) {
        UbBlock& u = mem[b];
        const bool unordered = u.writeOp >= 0 && u.writeOp != op && !Ordered(p, St().ops[u.writeOp].pipe, u.writeSeq);
        if (!write && unordered) Race("read after write", op, u.writeOp, b * unit, where);
        if (!write && u.tornOp >= 0)
            Fail(std::string("pipe race (write after write) on ") + where + " offset " + std::to_string(b * unit) + ": " +
                 Describe(op) + " reads bytes that " + Describe(u.tornOp) + " and " + Describe(u.writeOp) +
                 " both wrote with nothing ordering the two writes (a PipeBarrier, flag or queue): which of them "
                 "the bytes hold is undefined");
        if (write) {
            for (int q = 0; q < NPIPES; ++q) {
                if (u.readOp[q] >= 0 && u.readOp[q] != op && !Ordered(p, q, u.readSeq[q]))
                    Race("write after read", op, u.readOp[q], b * unit, where);
            }
            // Two unordered writes leave the bytes undefined, a wrong answer only once something reads them (the
            // data_copy sample copies tile after tile into one buffer it never reads): the fault waits for a read.
            int32_t torn = unordered ? u.writeOp : -1;
            uint64_t tornSeq = unordered ? u.writeSeq : 0;
            if (!unordered && u.tornOp >= 0 && !Ordered(p, St().ops[u.tornOp].pipe, u.tornSeq))
                torn = u.tornOp, tornSeq = u.tornSeq;
            u = UbBlock{};
            u.writeOp = op;
            u.writeSeq = seq;
            u.tornOp = torn;
            u.tornSeq = tornSeq;
        } else {
            u.readOp[p] = op;
            u.readSeq[p] = seq;
        }
    }
}

// A scalar access of the unified buffer: the compiler makes S wait for the pipes that last wrote (and, for a
// write, read) those bytes, and since S dispatches every later instruction, all pipes are then ordered after them.
inline void SAccess(uint64_t offset, uint64_t bytes, bool write, const Loc& loc = Loc()) {
    auto& ps = St().pipes;
    St().scalarInstr += 1;
    if (!ASC_EMU_AUTO_SYNC) {  // ordered only by flags: an unordered access is a race like any other pipe's
        UbAccess(Issue(PS, write ? "LocalTensor::SetValue" : "LocalTensor::GetValue", loc), offset, bytes, write);
        Spend(PS, St().tm.scalarOp);
        return;
    }
    for (uint64_t b = offset / 32; b < (offset + bytes + 31) / 32 && b < ps.ub.size(); ++b) {
        const UbBlock& u = ps.ub[b];
        for (int q = 0; q < NPIPES; ++q) {
            const bool dep = (u.writeOp >= 0 && St().ops[u.writeOp].pipe == q) || (write && u.readOp[q] >= 0);
            if (!dep) continue;
            Clock c = ps.known[q];
            c.c[q] = ps.seq[q];
            for (int p = 0; p < NPIPES; ++p) ps.known[p].Join(c);
            // the scalar unit waits for pipe q to drain (the vector pipe costs a drain, others a flag)
            SWait(ps.t.lastDone[q] + (q == PV ? St().tm.vToS : St().tm.flag));
        }
    }
    SWait(0, St().tm.scalarOp);
}

// SetFlag on the source pipe: the flag fires once every operation issued there so far is done.
inline void SetFlag(int src, int key, const Loc& loc) {
    auto& ps = St().pipes;
    Issue(src, "SetFlag", loc);
    ps.t.done[src].back() = ps.t.lastDone[src];
    Clock c = ps.known[src];
    c.c[src] = ps.seq[src];
    ps.flags[key] = c;
}

// WaitFlag on the destination pipe: later operations there are ordered after what the flag covers.
inline void WaitFlag(int dst, int key, const char* event, const Loc& loc) {
    auto& ps = St().pipes;
    auto it = ps.flags.find(key);
    if (it == ps.flags.end())
        Fail(std::string("WaitFlag<") + event + "> at " + loc.Str() +
             " without a SetFlag before it: the pipe would wait forever");
    Issue(dst, "WaitFlag", loc);
    ps.known[dst].Join(it->second);
    if (dst == PS) ps.sExplicit.Join(it->second);
    for (int q = 0; q < NPIPES; ++q) {  // the pipe stalls until the flag's operations are complete
        const uint64_t c = it->second.c[q];
        if (c > 0 && c <= ps.t.done[q].size())
            ps.t.free[dst] = std::max(ps.t.free[dst], ps.t.done[q][c - 1] + (q == dst ? 0.0 : St().tm.flag));
    }
    CompleteAt(dst, ps.t.free[dst]);
    ps.flags.erase(it);
}

// Snapshot of a pipe's completed work (what an EnQue/FreeTensor hands to the other side).
inline Clock Snapshot(int src) {
    Clock c = St().pipes.known[src];
    c.c[src] = St().pipes.seq[src];
    return c;
}

inline void Join(int dst, const Clock& c) { St().pipes.known[dst].Join(c); }

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

// Data-cache lines holding SetValue bytes not yet cleaned overlap [p, p + bytes): a DMA would miss them.
inline void NoDirtyLines(const void* p, size_t bytes, const char* what) {
    auto& cache = St().pipes.cache;
    if (cache.empty()) return;
    auto a = reinterpret_cast<uintptr_t>(p);
    for (uintptr_t line = a / 64; line <= (a + bytes - 1) / 64; ++line) {
        auto it = cache.find(line);
        if (it != cache.end() && it->second.dirty != 0)
            Fail(std::string(what) + " touches global memory that " + Describe(it->second.op) +
                 " left in the data cache: call DataCacheCleanAndInvalid first");
    }
}

// A read of global memory the cube core may still be writing (an IterateAll<false> not waited for).
// A read of bytes this core's MTE3 wrote for a 310P Matmul, with no MTE3 -> MTE2 ordering since.
inline void NotPending(const void* p, size_t bytes, const char* what) {
    auto* a = static_cast<const uint8_t*>(p);
    auto& pending = St().pipes.pending;
    for (size_t i = 0; i < pending.size();) {
        const PendingC& pc = pending[i];
        if (pc.mte3Seq > 0 && St().pipes.known[PMTE2].c[PMTE3] >= pc.mte3Seq) {  // ordered since: forget it
            pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
            continue;
        }
        if (a < pc.base + pc.bytes && pc.base < a + bytes) {
            if (pc.mte3Seq > 0)
                Fail(std::string("pipe race (read after write) on global memory: ") + what + " reads bytes that " +
                     pc.what + " wrote through MTE3, with nothing ordering MTE2 after it (SetFlag/WaitFlag<HardEvent::"
                     "MTE3_MTE2>, which the 310P IterateAll inserts itself after every block)");
            Fail(std::string(what) + " reads global memory that " + pc.what +
                 " may still be writing on the cube core: wait for it first (WaitIterateAll, or "
                 "CrossCoreWaitFlag on the cube's flag)");
        }
        ++i;
    }
}

// A write into what an IterateAll<false> of this core reads, before its WaitIterateAll.
inline void NotCubeRead(const void* p, size_t bytes, const char* what) {
    auto* a = static_cast<const uint8_t*>(p);
    for (const CubeRead& r : St().pipes.cubeReads)
        if (a < r.base + r.bytes && r.base < a + bytes)
            Fail(std::string(what) + " writes global memory that " + r.what + " reads: the cube core takes the "
                 "product when it reaches the message, so it may read the old bytes or the new; write only after "
                 "WaitIterateAll");
}

// Global memory one block writes and another reads or writes over (either first in emulation order) with no
// SyncAll between: on the chip nothing orders the two cores, so the reader may see the bytes before or after the
// write. Kept per 32-byte block of the buffers whose writes are tracked (outputs and the workspace), as the sets
// of cores (block mod 64) that read and wrote it since the last barrier. Two cores writing bytes of one block is
// no race for DMA (the per-byte check of GmWrite catches the same byte).
inline void TrackBlocks(GmBuffer& b) {
    if (!b.phase.empty()) return;
    const size_t n = (b.bytes + 31) / 32;
    b.readers.assign(n, 0), b.writers.assign(n, 0), b.phase.assign(n, 0), b.epoch.assign(n, 0);
}

// The core's bit in the per-block reader/writer sets: a vector core's block mod 48, or in a __mix__ launch an AIC's
// AI Core mod 16 above them (an AIC and the AIV of the same block index are two cores).
inline uint64_t CoreBit() {
    const auto& st = St();
    if (st.mixGroups && st.coreKind == 1) return 1ull << (48 + static_cast<uint64_t>(st.blockIdx) % 16);
    return 1ull << (static_cast<uint64_t>(st.blockIdx) % (st.mixGroups ? 48 : 64));
}

// What the running core has learnt of other cores' work through CrossCoreWaitFlag: per core bit, the most
// CrossCoreSetFlags of that core it has waited past (emu_blocks.h keeps it per core of a __mix__ group).
inline std::map<uint64_t, uint32_t>& Acquired() {
    static std::map<uint64_t, uint32_t> a;
    return a;
}
// CrossCoreSetFlags the running core has issued (a GM write is covered by the next one).
inline uint32_t& SetsIssued() {
    static uint32_t n = 0;
    return n;
}

inline int64_t AnyCore(uint64_t set) {
    for (int64_t i = 0; i < 64; ++i)
        if (set >> i & 1u) return i;
    return -1;
}

// Who a core bit of a reader/writer set is, for fault messages.
inline std::string CoreName(uint64_t set) {
    const int64_t bit = AnyCore(set);
    if (St().mixGroups && bit >= 48) return "the AIC of AI Core " + std::to_string(bit - 48) + " (mod 16)";
    return "block " + std::to_string(bit) + (St().mixGroups ? " (mod 48)" : " (mod 64)");
}

// The 32-byte block `blk` was written this phase by another core.
inline bool OthersWroteNow(const GmBuffer& b, size_t blk) {
    return !b.phase.empty() && b.phase[blk] == St().syncPhase && (b.writers[blk] & ~CoreBit()) != 0;
}

inline void CrossCore(GmBuffer& b, const void* p, size_t bytes, const char* what, bool write) {
    if (b.writer.empty()) return;
    TrackBlocks(b);
    const size_t off = static_cast<const uint8_t*>(p) - b.base;
    const uint64_t me = CoreBit();
    const uint32_t now = St().syncPhase;
    for (size_t blk = off / 32; blk <= (off + bytes - 1) / 32; ++blk) {
        if (b.phase[blk] != now) b.readers[blk] = b.writers[blk] = 0, b.phase[blk] = now;
        uint64_t wrote = b.writers[blk] & ~me;
        const uint64_t read = b.readers[blk] & ~me;
        if (!write && wrote != 0 && St().mixGroups) {  // ordered by a CrossCoreSetFlag issued after the write
            const auto it = Acquired().find(wrote);
            if (it != Acquired().end() && b.epoch[blk] < it->second) wrote = 0;
        }
        if (!write && wrote != 0)
            Fail(std::string(what) + " of block " + std::to_string(St().blockIdx) + " reads bytes of '" + b.name +
                 "' near offset " + std::to_string(blk * 32) + " that " + CoreName(wrote) +
                 " wrote with no SyncAll between (nor a CrossCoreSetFlag it issued after the write and this core waited "
                 "for): nothing orders the two cores");
        if (write && read != 0)
            Fail(std::string(what) + " of block " + std::to_string(St().blockIdx) + " writes bytes of '" + b.name +
                 "' near offset " + std::to_string(blk * 32) + " that " + CoreName(read) +
                 " read with no SyncAll between: nothing orders the two cores, the read may see either");
        (write ? b.writers : b.readers)[blk] |= me;
        if (write) b.epoch[blk] = SetsIssued();
    }
}

inline void GmRead(const void* p, size_t bytes, const char* what) {
    if (bytes == 0) return;
    CrossCore(FindGm(p, bytes, what), p, bytes, what, false);
    NoDirtyLines(p, bytes, what);
    NotPending(p, bytes, what);
    St().gmReadBytes += bytes;
}

// A write that reaches global memory; `op` >= 0 is an MTE3 copy whose overlap with an earlier in-flight
// MTE3 copy needs PipeBarrier<PIPE_MTE3> (docs: PipeBarrier(ISASI).md).
inline void GmWrite(const void* p, size_t bytes, const char* what, int32_t op = -1) {
    if (bytes == 0) return;
    GmBuffer& b = FindGm(p, bytes, what);
    if (!b.output) Fail(std::string(what) + ": write into input tensor '" + b.name + "'");
    if (!St().pipes.cubeReads.empty()) NotCubeRead(p, bytes, what);
    size_t off = static_cast<const uint8_t*>(p) - b.base;
    int32_t me = static_cast<int32_t>(St().blockIdx);
    for (size_t i = off; i < (b.writer.empty() ? off : off + bytes); ++i) {  // (timing only: no byte map)
        // (after a SyncAll another block may write it again)
        if (b.writer[i] != -1 && b.writer[i] != me && (St().syncPhase == 0 || OthersWroteNow(b, i / 32))) {
            Fail(std::string(what) + ": blocks " + std::to_string(b.writer[i]) + " and " + std::to_string(me) +
                 " both write byte " + std::to_string(i) + " of output '" + b.name + "'");
        }
        b.writer[i] = me;
    }
    CrossCore(b, p, bytes, what, true);
    if (op >= 0) {
        NoDirtyLines(p, bytes, what);
        auto& ps = St().pipes;
        if (b.mte3.size() != (b.bytes + 31) / 32) b.mte3.assign((b.bytes + 31) / 32, GmBlock{});
        for (size_t blk = off / 32; blk <= (off + bytes - 1) / 32; ++blk) {
            const size_t lo = blk * 32 > off ? blk * 32 : off;
            const size_t hi = (blk + 1) * 32 < off + bytes ? (blk + 1) * 32 : off + bytes;
            uint32_t mask = 0;
            for (size_t i = lo; i < hi; ++i) mask |= 1u << (i - blk * 32);
            GmBlock& g = b.mte3[blk];
            if (g.block != St().blockIdx) g = GmBlock{};  // another block's write: its own pipes ordered it
            if (g.op >= 0 && (g.mask & mask) != 0 && ps.known[PMTE3].c[PMTE3] < g.seq)
                Fail(std::string("overlapping global-memory writes: ") + Describe(op) + " and " + Describe(g.op) +
                     " both write bytes of '" + b.name + "' near offset " + std::to_string(lo) +
                     " with no PipeBarrier<PIPE_MTE3> between them");
            g = GmBlock{op, ps.seq[PMTE3], (g.op >= 0 && ps.known[PMTE3].c[PMTE3] < g.seq ? g.mask : 0) | mask,
                        St().blockIdx};
        }
    }
    St().gmWriteBytes += bytes;
}

// An MTE2 copy `op` read [p, p + bytes): remembered where the cube core will later overwrite the bytes.
inline void Mte2Read(int32_t op, const void* p, size_t bytes) {
    if (bytes == 0) return;
    GmBuffer& b = FindGm(p, bytes, "read");
    if (!b.cubeShared) return;
    if (b.mte2.size() != (b.bytes + 31) / 32) b.mte2.assign((b.bytes + 31) / 32, GmBlock{});
    const size_t off = static_cast<const uint8_t*>(p) - b.base;
    for (size_t blk = off / 32; blk <= (off + bytes - 1) / 32; ++blk)
        b.mte2[blk] = GmBlock{op, St().pipes.seq[PMTE2], 0, St().blockIdx};
}

// The cube core is told (by a message the scalar unit sends) to overwrite [p, p + bytes) of a workspace the
// vector core reads. The compiler cannot see that write, so every MTE2 read of those bytes must be known
// complete to S through an explicit WaitFlag<HardEvent::MTE2_S> (or PipeBarrier<PIPE_ALL>).
inline void CubeOverwrite(const void* p, size_t bytes, const char* what, const Loc& loc) {
    if (bytes == 0) return;
    GmBuffer& b = FindGm(p, bytes, what);
    if (!b.cubeShared || b.mte2.empty()) return;
    const size_t off = static_cast<const uint8_t*>(p) - b.base;
    for (size_t blk = off / 32; blk <= (off + bytes - 1) / 32; ++blk) {
        const GmBlock& r = b.mte2[blk];
        if (r.op >= 0 && r.block == St().blockIdx && St().pipes.sExplicit.c[PMTE2] < r.seq)
            Fail(std::string("pipe race (cube write after MTE2 read) on '") + b.name + "' offset " +
                 std::to_string(blk * 32) + ": " + what + " at " + loc.Str() + " lets the cube overwrite bytes " +
                 Describe(r.op) + " may still be reading; wait for MTE2 first (SetFlag/WaitFlag<HardEvent::MTE2_S>)");
    }
}

inline void CountVec(const char* api, uint64_t elems) {
    St().vecInstr[api] += 1;
    St().vecElems[api] += elems;
}

// End of a block: SetValue bytes still in the data cache never reach global memory.
// When everything the running block has issued is complete.
inline double BlockClock() {
    const auto& t = St().pipes.t;
    double at = 0;
    for (int p = 0; p < NPIPES; ++p) at = std::max({at, t.free[p], t.lastDone[p]});
    return at;
}

// A SetValue byte still in the running block's data cache is a fault; `tail` says what happens to it then.
inline void NoDirtyCache(const std::string& tail) {
    for (auto& kv : St().pipes.cache) {
        if (kv.second.dirty != 0)
            Fail(Describe(kv.second.op) + " wrote global memory through the data cache and nothing cleaned it "
                 "(DataCacheCleanAndInvalid)" + tail);
    }
}

inline void EndBlock() {
    const auto& t = St().pipes.t;
    St().coreL2[St().blockIdx % static_cast<int64_t>(std::max(1.0, St().tm.cores))] += St().pipes.l2Alloc;
    BlockTime bt;
    bt.block = St().blockIdx;
    bt.kind = St().coreKind;
    bt.cycles = BlockClock();
    for (int p = 0; p < NPIPES; ++p) bt.busy[p] = t.busy[p];
    St().blockTimes.push_back(bt);
    NoDirtyCache(": the bytes are lost when the kernel ends");
}

// The cube core serving the running block: 910B pairs vector cores 2c and 2c+1 with cube core c; 310P's AI Core
// has its own.
// A cube kernel's (or an AIC's) block is the cube core itself.
inline int64_t CubeCore() {
    return St().tm.coupled || St().coreKind == 1 ? St().blockIdx : St().blockIdx / 2;
}

// One K step of a C block on the cube core: the GM bytes its L1 misses load (HBM and L2) and the ND -> NZ copies
// that load them (each its rows and bytes), the L1 -> L0 bytes, MACs.
struct CubeCopy {
    double rows = 0, hbm = 0, l2 = 0;
};
struct CubeStep {
    double hbm = 0, l2 = 0, l0 = 0, macs = 0;
    CubeCopy copy[2];
    int copies = 0;
    void Add(double rows, double hbmBytes, double l2Bytes) {
        hbm += hbmBytes, l2 += l2Bytes;
        copy[copies++] = {rows, hbmBytes, l2Bytes};
    }
};

// The cube core computes one C block requested at `at`: per K step its L1 loads, L0 loads and MACs. A load
// starts once the L1 slot it refills is free (the tile `depth` steps back has gone to L0: depthA1/depthB1 tiles
// stay in L1), an L0 load once the L0 buffer it refills is free (double-buffered: the MACs two steps back are
// done); then the fixpipe writes `cBytes`, `cHbm` of them to HBM (the rest rewrite blocks resident in L2; a
// negative `cHbm`: all of them). A load costs what the basic API's ND -> NZ DataCopy of its rows does (each row
// at least nd2nzRow, each instruction dmaIssue more). `l0cWait`: one L0C buffer without unit flags, so the first
// Mmad waits for the last block's fixpipe to drain it. Stages are shared by every block the core serves. Returns
// when C is written.
inline double CubeBlock(double at, const std::vector<CubeStep>& steps, double macsPerCycle, double cBytes,
                        int32_t depth = 2, double cHbm = -1, bool l0cWait = false) {
    auto& st = St();
    const auto& tm = st.tm;
    CubeTimes& c = st.cubeCores[CubeCore()];
    const double hbmRate = GmShare(tm.gmBytesPerS, true), l2Rate = GmShare(std::max(tm.l2BytesPerS, 1.0), true);
    const size_t d = static_cast<size_t>(std::max(2, depth));
    std::vector<double> l0End(d, c.mte1);  // when the tiles of the last `d` steps left L1
    double mEnd[2] = {c.m, c.m};  // MAC ends of the two steps before
    for (size_t i = 0; i < steps.size(); ++i) {
        const CubeStep& k = steps[i];
        st.hbmBytes += static_cast<uint64_t>(k.hbm);
        st.l2Bytes += static_cast<uint64_t>(k.l2);
        st.cubeMoved += k.hbm + k.l2;
        const double s2 = std::max({at, c.mte2, l0End[i % d]});
        double load = 0;
        for (int j = 0; j < k.copies; ++j) {
            const CubeCopy& cp = k.copy[j];
            const double moved = cp.hbm / hbmRate + (cp.l2 > 0 ? cp.l2 / l2Rate : 0.0);
            // (310P's ND tiles go through UB and the vector unit instead: costed by their bytes only)
            load += tm.coupled ? moved : std::max(cp.rows * tm.nd2nzRow, cp.rows * tm.dmaRow + moved) + tm.dmaIssue;
        }
        c.mte2 = s2 + load;
        c.busyMte2 += load;
        const double ready = load > 0 ? c.mte2 + tm.dmaLatency : s2;
        const double s1 = std::max({ready, c.mte1, mEnd[i % 2]});
        c.mte1 = s1 + k.l0 / tm.mte1Bytes;
        c.busyMte1 += k.l0 / tm.mte1Bytes;
        l0End[i % d] = c.mte1;
        const double sm = std::max({c.mte1, c.m, i == 0 && l0cWait ? c.fix : 0.0});
        c.m = sm + k.macs / macsPerCycle;
        c.busyM += k.macs / macsPerCycle;
        mEnd[i % 2] = c.m;
    }
    const double sf = std::max(c.m, c.fix);
    const double toHbm = cHbm < 0 ? cBytes : std::min(cHbm, cBytes), toL2 = cBytes - toHbm;
    const double out = toHbm / std::min(tm.fixBytes, hbmRate) + (toL2 > 0 ? toL2 / std::min(tm.fixBytes, l2Rate) : 0.0);
    c.fix = sf + out;
    c.busyFix += out;
    st.hbmBytes += static_cast<uint64_t>(toHbm);
    st.l2Bytes += static_cast<uint64_t>(toL2);
    st.cubeMoved += cBytes;
    return c.fix + tm.dmaLatency;
}

// The kernel's estimate as one JSON object: blocks run on cores in turn (block b on core b mod cores), a core's
// time is the sum of its blocks', the kernel's the longest core's; busy cycles per pipe of that core (and of
// its cube core).
inline std::string TimingJson() {
    const auto& st = St();
    const auto& tm = st.tm;
    const size_t cores = static_cast<size_t>(std::max(1.0, st.kernelType == kAicOnly && !tm.coupled ? tm.cubeCores
                                                                                                  : tm.cores));
    std::vector<double> coreCycles(std::min<size_t>(cores, static_cast<size_t>(std::max<int64_t>(1, st.blockNum))), 0.0);
    for (const auto& bt : st.blockTimes) coreCycles[static_cast<size_t>(bt.block) % coreCycles.size()] += bt.cycles;
    size_t crit = 0;
    for (size_t i = 1; i < coreCycles.size(); ++i)
        if (coreCycles[i] > coreCycles[crit]) crit = i;
    double kernel = coreCycles[crit];
    double busy[NPIPES] = {};
    for (const auto& bt : st.blockTimes)
        if (static_cast<size_t>(bt.block) % coreCycles.size() == crit)
            for (int p = 0; p < NPIPES; ++p) busy[p] += bt.busy[p];
    double aicMte2 = 0;
    if (st.mixGroups) {  // a __mix__(1, 2) launch: each AIC and AIV is a core with one block; the longest decides
        const BlockTime* aiv = nullptr;
        const BlockTime* aic = nullptr;
        for (const auto& bt : st.blockTimes) {
            const BlockTime*& best = bt.kind == 1 ? aic : aiv;
            if (best == nullptr || bt.cycles > best->cycles) best = &bt;
        }
        const BlockTime* worst = aic != nullptr && (aiv == nullptr || aic->cycles >= aiv->cycles) ? aic : aiv;
        kernel = worst != nullptr ? worst->cycles : 0.0;
        crit = worst != nullptr ? static_cast<size_t>(worst->block) : 0;
        for (int p = 0; p < NPIPES; ++p) busy[p] = 0;
        if (aiv != nullptr)
            for (int p : {PS, PV, PMTE2, PMTE3}) busy[p] = aiv->busy[p];
        if (aic != nullptr) {
            for (int p : {PMTE1, PM, PFIX}) busy[p] = aic->busy[p];
            aicMte2 = aic->busy[PMTE2];
        }
    }
    CubeTimes cube;
    const int64_t cubeCore = tm.coupled ? static_cast<int64_t>(crit) : static_cast<int64_t>(crit) / 2;
    if (st.cubeCores.count(cubeCore)) cube = st.cubeCores.at(cubeCore);
    char buf[1024];
    std::snprintf(buf, sizeof(buf),
                  "{\"cycles\": %.1f, \"clock_hz\": %.6g, \"critical_core\": %zu, \"blocks\": %zu, \"values\": %s, "
                  "\"hbm_bytes\": %llu, \"l2_bytes\": %llu, \"cube_bytes\": %.0f, \"vec_read_hbm\": %llu, "
                  "\"vec_read_l2\": %llu, \"busy\": {\"S\": %.1f, \"V\": %.1f, \"MTE2\": %.1f, "
                  "\"MTE3\": %.1f, \"CUBE_MTE2\": %.1f, \"MTE1\": %.1f, \"M\": %.1f, \"FIX\": %.1f}}",
                  kernel, tm.clockHz, crit, st.blockTimes.size(), tm.values ? "true" : "false",
                  static_cast<unsigned long long>(st.hbmBytes), static_cast<unsigned long long>(st.l2Bytes),
                  st.cubeMoved, static_cast<unsigned long long>(st.vecReadHbm),
                  static_cast<unsigned long long>(st.vecReadL2), busy[PS],
                  busy[PV], busy[PMTE2], busy[PMTE3], cube.busyMte2 + aicMte2, cube.busyMte1 + busy[PMTE1],
                  cube.busyM + busy[PM], cube.busyFix + busy[PFIX]);
    return buf;
}

}  // namespace asc_emu
