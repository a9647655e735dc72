// asc-onnx Ascend C CPU emulator: the subset of the Ascend C API that asc-onnx generates.
// A generated kernel includes this header under its real name and compiles unchanged with g++.
#pragma once
#include "emu_runtime.h"
#include "emu_types.h"
#include "kernel_operator_data_copy.h"
#include "kernel_operator_vec.h"
#include "kernel_tensor.h"
#include "kernel_tpipe.h"

namespace AscendC {
__aicore__ inline int64_t GetBlockIdx() { return asc_emu::St().blockIdx; }
__aicore__ inline int64_t GetBlockNum() { return asc_emu::St().blockNum; }
enum PipeType { PIPE_V, PIPE_MTE2, PIPE_MTE3, PIPE_S, PIPE_ALL };
template <PipeType P>
__aicore__ inline void PipeBarrier() {}
}  // namespace AscendC

// Kernel type and tiling registration (CANN's standard C++ tiling struct mode).
#define KERNEL_TASK_TYPE_DEFAULT(type)
#define REGISTER_TILING_DEFAULT(Struct) using AscEmuTilingStruct = Struct
#define GET_TILING_DATA(var, tiling) \
    AscEmuTilingStruct var;          \
    std::memcpy(&var, (tiling), sizeof(AscEmuTilingStruct))
