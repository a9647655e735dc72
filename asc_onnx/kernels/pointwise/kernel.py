"""op_kernel/<op>.cpp of a pointwise op: the kernel class (queues, the tile loop over the flat data, broadcast inputs
by period or in chunks) around the op's elementwise body in fp32 registers."""

from __future__ import annotations

from dataclasses import dataclass

from ..skeleton import (
    HELPERS_INCLUDE,
    banner,
    cap,
    kernel_entry,
    role,
    struct_name,
)
from ..text import Lines, f32
from ..vector import step_call
from .lower import PointwiseKernel

MAX_QUEUES = 4  # QUE_MAX_EVENT = 8 buffers per position: four double-buffered queues


@dataclass(frozen=True)
class _Queue:
    """One TQue and the kernel tensors it carries, each at ``slot * tileStride`` in its buffer."""

    name: str
    local: str
    members: tuple[int, ...]


def _queues(names: list[str], members: list[int], kind: str) -> list[_Queue]:
    """A queue per tensor while they fit the event budget, else one queue whose buffer holds them all."""
    if len(members) <= MAX_QUEUES:
        return [_Queue(f"{kind}Queue{cap(names[i])}", f"{names[i]}Local", (i,)) for i in members]
    role = "X" if kind == "in" else "Y"
    return [_Queue(f"{kind}Queue{role}", f"{role.lower()}sLocal", tuple(members))]


def _tensor(q: _Queue, i: int) -> str:
    """The kernel tensor ``i`` inside its queue's buffer."""
    return q.local if len(q.members) == 1 else f"{q.local}[{q.members.index(i)} * td.tileStride]"



_COPIES = r"""// 310P has no DataCopyPad (it compiles there and does nothing): each SoC gets its own copy path.
template <typename U>
__aicore__ inline void Load(const AscendC::LocalTensor<U>& dst, const AscendC::GlobalTensor<U>& src, uint32_t count)
{
#if __NPU_ARCH__ == 2002
    if (td.copyMode == 1) {
        AscendC::DataCopy(dst, src, count);
    } else {
        for (uint32_t i = 0; i < count; ++i) dst.SetValue(i, src.GetValue(i));
    }
#else
    AscendC::DataCopyExtParams params{1, static_cast<uint32_t>(count * sizeof(U)), 0, 0, 0};
    AscendC::DataCopyPadExtParams<U> pad{false, 0, 0, static_cast<U>(0)};
    AscendC::DataCopyPad(dst, src, params, pad);
#endif
}

template <typename U>
__aicore__ inline void Store(const AscendC::GlobalTensor<U>& dst, const AscendC::LocalTensor<U>& src, uint32_t count)
{
#if __NPU_ARCH__ == 2002
    if (td.copyMode == 1) {
        AscendC::DataCopy(dst, src, count);
    } else {
        AscendC::GlobalTensor<U> out = dst;
        for (uint32_t i = 0; i < count; ++i) out.SetValue(i, src.GetValue(i));
        // Scalar stores sit in the data cache until cleaned (310P has the two-parameter form only).
        AscendC::DataCacheCleanAndInvalid<U, AscendC::CacheLine::ENTIRE_DATA_CACHE>(out);
    }
#else
    AscendC::DataCopyExtParams params{1, static_cast<uint32_t>(count * sizeof(U)), 0, 0, 0};
    AscendC::DataCopyPad(dst, src, params);
#endif
}
"""

_PHASE = r"""// The window tile starts inside a period: rotate the broadcast's first 32 bytes to its phase there (the
// window is this core's last tile: the rest of the buffer is not read again).
__aicore__ inline void PhaseBroadcast(const AscendC::LocalTensor<float>& dst, uint64_t period, uint64_t at)
{
    constexpr uint32_t window = 32 / sizeof(T);
    const uint64_t phase = at % period;
    if (phase == 0) return;
    float values[window];
    for (uint32_t i = 0; i < window; ++i) values[i] = dst.GetValue(static_cast<uint32_t>((phase + i) % period));
    for (uint32_t i = 0; i < window; ++i) dst.SetValue(i, values[i]);
}
"""

_CHUNK = r"""// Chunk mode: columns [col, col + len) of a long broadcast input. The vector unit may still be reading
// the previous chunk, and must not read this one before the copy lands: a flag each way.
__aicore__ inline void LoadChunk(const AscendC::GlobalTensor<T>& src, const AscendC::LocalTensor<float>& dst,
                                 const AscendC::LocalTensor<T>& stage, uint64_t len)
{
    const uint32_t n = static_cast<uint32_t>(len);
    const auto freeId = pipe.FetchEventID(AscendC::HardEvent::V_MTE2);
    AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(freeId);
    AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(freeId);
    if constexpr (std::is_same_v<T, float>) {
        Load(dst, src, n);
    } else {
        Load(stage, src, n);
    }
    const auto readyId = pipe.FetchEventID(AscendC::HardEvent::MTE2_V);
    AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(readyId);
    AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(readyId);
    if constexpr (!std::is_same_v<T, float>) {
        AscendC::Cast(dst, stage, AscendC::RoundMode::CAST_NONE, n);
    }
}
"""

_BROADCAST = r"""// Read one period of a broadcast input, widen it to fp32 and repeat it over a whole tile.
__aicore__ inline void LoadBroadcast(const AscendC::GlobalTensor<T>& src, const AscendC::LocalTensor<float>& dst,
                                     const AscendC::LocalTensor<T>& stage, uint64_t period)
{
    const uint32_t n = static_cast<uint32_t>(period);
#if __NPU_ARCH__ == 2002
    (void)stage;
    for (uint32_t i = 0; i < n; ++i) dst.SetValue(i, static_cast<float>(src.GetValue(i)));
#else
    if constexpr (std::is_same_v<T, float>) {
        Load(dst, src, n);
    } else {
        Load(stage, src, n);
    }
    // The copy runs on MTE2: the vector unit may read it only after this flag.
    const auto eventId = pipe.FetchEventID(AscendC::HardEvent::MTE2_V);
    AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(eventId);
    AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(eventId);
    if constexpr (!std::is_same_v<T, float>) {
        AscendC::Cast(dst, stage, AscendC::RoundMode::CAST_NONE, n);
    }
#endif
    if (period * sizeof(float) % 32 == 0) {
        // Double the filled prefix with vector copies (aligned because the period is).
        for (uint64_t filled = period; filled < td.tileLength; filled *= 2) {
            const uint64_t len = td.tileLength - filled < filled ? td.tileLength - filled : filled;
            AscendC::Muls(dst[filled], dst, 1.0f, static_cast<int32_t>(len));
        }
    } else {
        for (uint64_t i = period; i < td.tileLength; ++i) dst.SetValue(i, dst.GetValue(i - period));
    }
}
"""


def kernel_source(k: PointwiseKernel, rule: str, body_ops: list[str], sources: list[str]) -> str:
    """op_kernel/<op>.cpp."""
    ins = [role(x.name) for x in k.inputs]
    outs = [role(o) for o in k.outputs]
    bc = sorted(k.broadcast_inputs)
    full = [i for i in range(len(ins)) if i not in bc]
    inq = _queues(ins, full, "in")
    outq = _queues(outs, list(range(len(outs))), "out")
    cls = f"Kernel{k.op_type}"
    out = Lines()
    out(*banner(k, rule, body_ops, sources, "pointwise"),
        "// Every tile is computed in fp32 registers and cast back to the I/O type.",
        '#include "kernel_operator.h"',
        HELPERS_INCLUDE,
        f'#include "{k.snake}_tiling.h"',
        "")
    out("namespace {",
        f"constexpr int32_t BUFFER_NUM = {k.schedule.buffer_num};  // {k.schedule.buffering}",
        f"constexpr uint32_t NUM_REGS = {k.num_regs};")
    out("", "template <typename T>", f"class {cls} {{", "public:")
    with out.indent():
        _init(out, k, cls, ins, outs, bc, inq, outq)
        _process(out, ins, bc)
    out("", "private:")
    with out.indent():
        out("__aicore__ inline void Tile(uint64_t offset, uint64_t len)",
            "{",
            "    CopyIn(offset, static_cast<uint32_t>(len));",
            "    Compute(static_cast<uint32_t>(len));",
            "    CopyOut(offset, static_cast<uint32_t>(len));",
            "}",
            "")
        out(*_COPIES.splitlines())
        out("")
        if bc:
            out(*_BROADCAST.splitlines())
            out("")
            out(*_PHASE.splitlines())
            out("")
            out(*_CHUNK.splitlines())
            out("")
        _copy_in(out, ins, inq)
        _compute(out, k, ins, outs, bc, inq, outq)
        _copy_out(out, outs, outq)
        _members(out, k, ins, outs, bc, inq, outq)
    out("};", "}  // namespace", "")
    kernel_entry(out, k.snake, ins + outs, struct_name(k), cls, outs[0])
    return out.text()


def _init(out: Lines, k: PointwiseKernel, cls: str, ins, outs, bc, inq, outq) -> None:
    out(f"__aicore__ inline {cls}() {{}}")
    args = ", ".join(f"GM_ADDR {n}" for n in ins + outs)
    out(f"__aicore__ inline void Init({args}, const {struct_name(k)}& tiling)", "{")
    with out.indent():
        out("td = tiling;",
            "const uint64_t block = AscendC::GetBlockIdx();",
            "const uint64_t firstUnit = block * td.unitsPerCore + (block < td.extraUnits ? block : td.extraUnits);",
            "const uint64_t myUnits = td.unitsPerCore + (block < td.extraUnits ? 1 : 0);",
            "start = firstUnit * td.unitLength;",
            "end = (block + 1 == AscendC::GetBlockNum()) ? td.totalLength : start + myUnits * td.unitLength;",
            "if (end > td.totalLength) end = td.totalLength;")
        for n in ins:
            out(f"{n}Gm.SetGlobalBuffer((__gm__ T*){n});")
        for n in outs:
            out(f"{n}Gm.SetGlobalBuffer((__gm__ T*){n}, td.totalLength);")
        for q in inq + outq:
            out(f"pipe.InitBuffer({q.name}, BUFFER_NUM, {len(q.members)} * td.tileStride * sizeof(T));")
        out("pipe.InitBuffer(regBuf, NUM_REGS * td.tileStride * sizeof(float));")
        if k.const_steps:
            out("// Constants are the same for every tile: set them once.",
                "AscendC::LocalTensor<float> regs = regBuf.Get<float>();",
                "const uint32_t count = static_cast<uint32_t>(td.tileStride);")
            for st in k.const_steps:
                out(f"AscendC::Duplicate(regs[{st.dst} * td.tileStride], {f32(st.scalar)}, count);")
        for j, i in enumerate(bc):
            out(f"pipe.InitBuffer(bcastBuf{j}, td.tileStride * sizeof(float));",
                f"pipe.InitBuffer(stageBuf{j}, ((td.period[{j}] < td.tileLength ? td.period[{j}] : td.tileLength)"
                " * sizeof(T) + 31) / 32 * 32);",
                f"if (td.chunkLength == 0 || td.period[{j}] < td.rowLength) {{",
                f"    LoadBroadcast({ins[i]}Gm, bcastBuf{j}.Get<float>(), stageBuf{j}.Get<T>(), td.period[{j}]);",
                "}")
    out("}", "")


def _process(out: Lines, ins, bc) -> None:
    out("__aicore__ inline void Process()", "{")
    with out.indent():
        out("if (td.chunkLength != 0) {", "    ProcessChunks();", "    return;", "}",
            "const uint64_t alignElems = 32 / sizeof(T);",
            "for (uint64_t offset = start; offset < end; offset += td.tileLength) {")
        with out.indent():
            out("const uint64_t len = end - offset < td.tileLength ? end - offset : td.tileLength;",
                "if (td.copyMode == 1 && len % alignElems != 0) {",
                "    // 310P: the 32-byte aligned head as usual, then one 32-byte window that ends exactly at",
                "    // the tensor's end (it recomputes a few of this core's own elements).",
                "    const uint64_t head = len / alignElems * alignElems;",
                "    if (head > 0) Tile(offset, head);",
                "    AscendC::PipeBarrier<PIPE_MTE3>();  // the window's store overlaps the head's",
                *[f"    PhaseBroadcast(bcastBuf{j}.Get<float>(), td.period[{j}], end - alignElems);"
                  for j in range(len(bc))],
                "    Tile(end - alignElems, alignElems);",
                "    break;",
                "}",
                "Tile(offset, len);")
        out("}")
    out("}", "")
    out("// Chunk mode: this core's row chunks in chunk-major order; the long broadcast inputs are loaded",
        "// once per chunk and serve every row of it.",
        "__aicore__ inline void ProcessChunks()", "{")
    with out.indent():
        out("const uint64_t block = AscendC::GetBlockIdx();",
            "const uint64_t first = block * td.unitsPerCore + (block < td.extraUnits ? block : td.extraUnits);",
            "const uint64_t last = first + td.unitsPerCore + (block < td.extraUnits ? 1 : 0);",
            "uint64_t loaded = ~0ull;",
            "for (uint64_t item = first; item < last; ++item) {")
        with out.indent():
            out("const uint64_t chunk = item / td.rows;",
                "const uint64_t row = item % td.rows;",
                "const uint64_t col = chunk * td.chunkLength;",
                "const uint64_t len = td.rowLength - col < td.chunkLength ? td.rowLength - col : td.chunkLength;",
                "if (chunk != loaded) {")
            with out.indent():
                for j, i in enumerate(bc):
                    out(f"if (td.period[{j}] == td.rowLength) {{",
                        f"    LoadChunk({ins[i]}Gm[col], bcastBuf{j}.Get<float>(), stageBuf{j}.Get<T>(), len);",
                        "}")
                out("loaded = chunk;")
            out("}", "Tile(row * td.rowLength + col, len);")
        out("}")
    out("}", "")


def _copy_in(out: Lines, ins, inq) -> None:
    out("__aicore__ inline void CopyIn(uint64_t offset, uint32_t len)", "{")
    with out.indent():
        for q in inq:
            out(f"AscendC::LocalTensor<T> {q.local} = {q.name}.template AllocTensor<T>();")
            for i in q.members:
                out(f"Load({_tensor(q, i)}, {ins[i]}Gm[offset], len);")
            out(f"{q.name}.EnQue({q.local});")
    out("}", "")


def _compute(out: Lines, k: PointwiseKernel, ins, outs, bc, inq, outq) -> None:
    out("__aicore__ inline void Compute(uint32_t count)", "{")
    with out.indent():
        out("AscendC::LocalTensor<float> regs = regBuf.Get<float>();")
        for q in inq:
            out(f"AscendC::LocalTensor<T> {q.local} = {q.name}.template DeQue<T>();")
        for q in outq:
            out(f"AscendC::LocalTensor<T> {q.local} = {q.name}.template AllocTensor<T>();")
        in_tensor = {i: _tensor(q, i) for q in inq for i in q.members}
        out_tensor = {o: _tensor(q, o) for q in outq for o in q.members}
        direct = len(set(k.out_regs)) == len(k.out_regs) and all(r >= len(ins) for r in k.out_regs)
        out_of = {r: o for o, r in enumerate(k.out_regs)} if direct else {}
        bj = {i: j for j, i in enumerate(bc)}
        for r in range(k.num_regs):
            if r < len(ins) and r in bj:
                out(f"AscendC::LocalTensor<float> r{r} = bcastBuf{bj[r]}.Get<float>();  // {ins[r]}, broadcast")
            elif r < len(ins):
                out(f"AscendC::LocalTensor<float> r{r} = ToFloat({in_tensor[r]}, regs[{r} * td.tileStride], count);"
                    f"  // {ins[r]}")
            elif r in out_of:
                out(f"AscendC::LocalTensor<float> r{r} = OutReg({out_tensor[out_of[r]]}, "
                    f"regs[{r} * td.tileStride]);  // {outs[out_of[r]]}")
            else:
                out(f"AscendC::LocalTensor<float> r{r} = regs[{r} * td.tileStride];")
        for step in k.steps:
            out(step_call(step))
        for o, r in enumerate(k.out_regs):
            if r in out_of:
                out(f"FromFloat({out_tensor[o]}, r{r}, count);")
            else:
                out(f"ToTile({out_tensor[o]}, r{r}, count);")
        for q in outq:
            out(f"{q.name}.EnQue({q.local});")
        for q in inq:
            out(f"{q.name}.FreeTensor({q.local});")
    out("}", "")


def _copy_out(out: Lines, outs, outq) -> None:
    out("__aicore__ inline void CopyOut(uint64_t offset, uint32_t len)", "{")
    with out.indent():
        for q in outq:
            out(f"AscendC::LocalTensor<T> {q.local} = {q.name}.template DeQue<T>();")
            for o in q.members:
                out(f"Store({outs[o]}Gm[offset], {_tensor(q, o)}, len);")
            out(f"{q.name}.FreeTensor({q.local});")
    out("}", "")


def _members(out: Lines, k: PointwiseKernel, ins, outs, bc, inq, outq) -> None:
    out("AscendC::TPipe pipe;")
    for q in inq:
        out(f"AscendC::TQue<AscendC::QuePosition::VECIN, 1> {q.name};")
    for q in outq:
        out(f"AscendC::TQue<AscendC::QuePosition::VECOUT, 1> {q.name};")
    out("AscendC::TBuf<AscendC::TPosition::VECCALC> regBuf;  // fp32 work registers, one tile each")
    for j in range(len(bc)):
        out(f"AscendC::TBuf<AscendC::TPosition::VECCALC> bcastBuf{j};  // broadcast input repeated over a tile",
            f"AscendC::TBuf<AscendC::TPosition::VECCALC> stageBuf{j};  // one period in the I/O type")
    for n in ins + outs:
        out(f"AscendC::GlobalTensor<T> {n}Gm;")
    out(f"{struct_name(k)} td;", "uint64_t start = 0;", "uint64_t end = 0;")
