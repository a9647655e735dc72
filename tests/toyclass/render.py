"""The toy class's Ascend C: tiles of one core through one input and one output queue."""

from __future__ import annotations

from asc_onnx.kernels.skeleton import banner, infer_dtype_and_opdef, kernel_entry, tiling_struct
from asc_onnx.kernels.text import Lines

from .lower import AbsKernel

REFUSALS = {1: "empty input", 2: "a SoC without DataCopyPad"}
TILE = 2048


def struct_name(k: AbsKernel) -> str:
    return f"{k.op_type}TilingData"


def tiling_header(k: AbsKernel) -> str:
    return tiling_struct(k.op_type, k.snake, struct_name(k), ["uint64_t totalLength;", "uint32_t blockDim;"])


def tiling_call(k: AbsKernel, total: str, has_pad: str, out: str) -> str:
    return f"{k.op_type}ComputeTiling({total}, {has_pad}, {out})"


def tiling_calc(k: AbsKernel) -> str:
    return Lines()(
        "#pragma once", "#include <cstdint>", f'#include "../op_kernel/{k.snake}_tiling.h"', "",
        f"inline int {k.op_type}ComputeTiling(uint64_t totalLength, bool hasDataCopyPad, {struct_name(k)}* t)", "{",
        "    if (totalLength == 0) return 1;", "    if (!hasDataCopyPad) return 2;",
        "    t->totalLength = totalLength;", "    t->blockDim = 1;", "    return 0;", "}").text()


def kernel_source(k: AbsKernel, rule: str, body_ops: list[str], sources: list[str]) -> str:
    out = Lines()
    out(*banner(k, rule, body_ops, sources, "toy"), "// y = |x|, one tile at a time.",
        '#include "kernel_operator.h"', f'#include "{k.snake}_tiling.h"',
        "", "template <typename T>", "class KernelToyAbs {", "public:",
        f"    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, const {struct_name(k)}& tiling)", "    {",
        "        td = tiling;", "        xGm.SetGlobalBuffer((__gm__ T*)x, td.totalLength);",
        "        yGm.SetGlobalBuffer((__gm__ T*)y, td.totalLength);",
        f"        pipe.InitBuffer(inQueueX, 2, {TILE} * sizeof(T));",
        f"        pipe.InitBuffer(outQueueY, 2, {TILE} * sizeof(T));", "    }",
        "    __aicore__ inline void Process()", "    {",
        f"        for (uint64_t offset = 0; offset < td.totalLength; offset += {TILE}) {{",
        f"            const uint32_t len = static_cast<uint32_t>(td.totalLength - offset < {TILE} ? "
        f"td.totalLength - offset : {TILE});",
        "            AscendC::DataCopyExtParams params{1, static_cast<uint32_t>(len * sizeof(T)), 0, 0, 0};",
        "            AscendC::LocalTensor<T> xLocal = inQueueX.template AllocTensor<T>();",
        "            AscendC::DataCopyPadExtParams<T> pad{false, 0, 0, 0};",
        "            AscendC::DataCopyPad(xLocal, xGm[offset], params, pad);",
        "            inQueueX.EnQue(xLocal);", "            xLocal = inQueueX.template DeQue<T>();",
        "            AscendC::LocalTensor<T> yLocal = outQueueY.template AllocTensor<T>();",
        "            AscendC::Abs(yLocal, xLocal, len);", "            outQueueY.EnQue(yLocal);",
        "            inQueueX.FreeTensor(xLocal);", "            yLocal = outQueueY.template DeQue<T>();",
        "            AscendC::DataCopyPad(yGm[offset], yLocal, params);", "            outQueueY.FreeTensor(yLocal);",
        "        }", "    }", "private:", "    AscendC::TPipe pipe;",
        "    AscendC::TQue<AscendC::QuePosition::VECIN, 1> inQueueX;",
        "    AscendC::TQue<AscendC::QuePosition::VECOUT, 1> outQueueY;",
        "    AscendC::GlobalTensor<T> xGm, yGm;", f"    {struct_name(k)} td;", "};", "")
    kernel_entry(out, k.snake, ["x", "y"], struct_name(k), "KernelToyAbs", k.outputs[0])
    return out.text()


def host_source(k: AbsKernel, compute_units: list[str]) -> str:
    out = Lines()
    out('#include "register/op_def_registry.h"', f'#include "{k.snake}_tiling_calc.h"', "",
        "namespace optiling {", "static ge::graphStatus TilingFunc(gert::TilingContext* context)", "{",
        f"    auto* tiling = context->GetTilingData<{struct_name(k)}>();",
        "    const uint64_t total = context->GetInputShape(0)->GetStorageShape().GetShapeSize();",
        f"    if ({tiling_call(k, 'total', 'true', 'tiling')} != 0) return ge::GRAPH_FAILED;",
        "    context->SetBlockDim(tiling->blockDim);", "    return ge::GRAPH_SUCCESS;", "}",
        "}  // namespace optiling", "",
        "namespace ge {", "static graphStatus InferShape(gert::InferShapeContext* context)", "{",
        "    *context->GetOutputShape(0) = *context->GetInputShape(0);", "    return GRAPH_SUCCESS;", "}", "")
    infer_dtype_and_opdef(out, k.op_type, ["x"], ["y"], ["ge::DT_FLOAT"], compute_units)
    return out.text()


def headers(k) -> dict[str, str]:
    """The shared headers this class's files include (none: its files are whole)."""
    return {}
