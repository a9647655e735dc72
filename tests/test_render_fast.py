"""Fast tests of lowering and rendering, per kernel class: no g++, no emulator (seconds for the whole file).

Each asserts the IR a fused op lowers to, and checks the generated text the way LLVM's FileCheck does: the
patterns must appear in the given order (``checks``), or not at all (``check_not``). The emulated tests prove
that such kernels compute the right thing; these pin down how they are written, so a change to a class's
lowering or rendering is developed against second-scale tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import test_matmul_kernels as mk
from conftest import F16, F32, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions

pytestmark = pytest.mark.fast  # (no g++, no emulator run: tests/conftest.py)

NODE = helper.make_node


def checks(text: str, *patterns: str) -> None:
    """Every regex in ``patterns`` matches ``text``, each after the previous match (FileCheck's CHECK)."""
    pos = 0
    for p in patterns:
        m = re.compile(p, re.M).search(text, pos)
        assert m is not None, f"{p!r} not found after offset {pos}:\n{text[pos:pos + 1500]}"
        pos = m.end()


def check_not(text: str, *patterns: str) -> None:
    """None of ``patterns`` matches ``text`` (FileCheck's CHECK-NOT)."""
    for p in patterns:
        m = re.compile(p, re.M).search(text)
        assert m is None, f"{p!r} found: {text[max(0, m.start() - 200):m.end() + 200]}"


def _kernel(m, soc: str = "Ascend910B"):
    res = asc_onnx.fuse(m, options=FuseOptions(judge=False, emulate=False, soc=soc), validate=False)
    assert not res.report["kernels"]["not_generated"], res.report["kernels"]["not_generated"]
    (k,) = res.kernels
    return k, {rel.replace(k.ir.snake, "OP"): text for rel, text in k.files.items()}


def _steps(ir) -> list[tuple]:
    return [(s.api, s.scalar) if s.scalar is not None else (s.api,) for s in ir.steps]


# -- pointwise -----------------------------------------------------------------------------------------------


def _silu(dtype: int = F16):
    return model([NODE("Sigmoid", ["x"], ["s"]), NODE("Mul", ["x", "s"], ["y"])], [("x", dtype, ["n", 64])],
                 [("y", dtype, ["n", 64])])


def test_pointwise_silu_is_four_vector_instructions_in_fp32_registers():
    k, f = _kernel(_silu())
    assert k.ir.op_type == "AscSilu" and k.ir.dtypes == (F16,) and [x.kind for x in k.ir.inputs] == ["full"]
    assert _steps(k.ir) == [("Muls", -1.0), ("Exp",), ("Adds", 1.0), ("Div",)]  # x / (1 + exp(-x))
    assert k.ir.num_regs == 2
    kernel = f["op_kernel/OP.cpp"]
    checks(kernel, r"^template <typename T>\nclass KernelAscSilu \{",
           r"Init\(GM_ADDR x, GM_ADDR y, const AscSiluTilingData& tiling\)",
           r"pipe\.InitBuffer\(inQueueX, BUFFER_NUM", r"pipe\.InitBuffer\(outQueueY, BUFFER_NUM",
           r"void Process\(\)", r"CopyIn\(offset", r"Compute\(", r"CopyOut\(offset",
           # the body in order, on fp32 registers
           r"AscendC::Muls\([^;]*-1\.0f", r"AscendC::Exp\(", r"AscendC::Adds\([^;]*1\.0f", r"AscendC::Div\(")
    # each SoC its own copy path: 310P has no DataCopyPad
    checks(kernel, r"#if __NPU_ARCH__ == 2002", r"AscendC::DataCopy\(dst, src, count\)", r"#else",
           r"AscendC::DataCopyPad\(dst, src, params, pad\)", r"#endif")
    checks(f["op_kernel/OP_tiling.h"], r"struct AscSiluTilingData \{", r"totalLength", r"tileLength")
    # the schedule is one function, defined once and called by the host's TilingFunc
    checks(f["op_host/OP_tiling_calc.h"], r"AscSiluComputeTiling\(")
    checks(f["op_host/OP.cpp"], r"TilingFunc\(gert::TilingContext\* context\)", r"AscSiluComputeTiling\(totalLength")


def test_pointwise_fp32_writes_outputs_in_place_and_fp16_casts_once():
    k32, f32 = _kernel(_silu(F32))
    k16, f16 = _kernel(_silu(F16))
    assert _steps(k32.ir) == _steps(k16.ir)  # one program; the I/O type is the template parameter
    checks(f16["op_kernel/OP.cpp"], r'#include "asc_onnx_helpers.h"', r"FromFloat\(")
    checks(f16["op_kernel/asc_onnx_helpers.h"], r"void FromFloat\(", r"RoundMode::CAST_NONE")  # the shared helpers
    assert f32["op_kernel/OP.cpp"] == f16["op_kernel/OP.cpp"]  # one source per op, instantiated per dtype column


def test_pointwise_broadcast_bias_is_loaded_once_per_core():
    m = model([NODE("Add", ["x", "b"], ["a"]), NODE("Relu", ["a"], ["y"])], [("x", F32, ["n", 48])],
              [("y", F32, ["n", 48])], [helper.make_tensor("b", F32, [48], np.linspace(-1, 1, 48).tolist())])
    k, f = _kernel(m)
    assert [x.kind for x in k.ir.inputs] == ["full", "broadcast"]
    assert _steps(k.ir) == [("Add",), ("Relu",)]
    # the bias is expanded to fp32 once (before the tile loop), then read by every tile
    checks(f["op_kernel/OP.cpp"], r"Init\(GM_ADDR x0, GM_ADDR x1, GM_ADDR y", r"LoadBroadcast\(x1Gm",
           r"void Process\(\)", r"AscendC::Add\(", r"AscendC::Relu\(")


def test_pointwise_comparison_and_where_become_compare_and_select():
    m = model([NODE("Less", ["x", "zero"], ["m"]), NODE("Neg", ["x"], ["n"]), NODE("Where", ["m", "n", "x"], ["y"])],
              [("x", F32, [4, 64])], [("y", F32, [4, 64])], [helper.make_tensor("zero", F32, [], [0.0])])
    k, f = _kernel(m)
    assert [s.api for s in k.ir.steps] == ["Compares", "Muls", "Select"]
    assert k.ir.steps[0].mode == "LT"
    checks(f["op_kernel/OP.cpp"], r"AscendC::CompareScalar\(|AscendC::Compares\(", r"AscendC::Select\(")


def test_generated_names_are_roles_not_model_names():
    m = model([NODE("Sigmoid", ["/model/layers.0/mlp/act_fn/x"], ["s"], name="/model/layers.0/mlp/Sigmoid"),
               NODE("Mul", ["/model/layers.0/mlp/act_fn/x", "s"], ["y"], name="/model/layers.0/mlp/Mul")],
              [("/model/layers.0/mlp/act_fn/x", F32, [4, 64])], [("y", F32, [4, 64])])
    _, f = _kernel(m)
    for text in f.values():
        # model node names appear only inside comments
        code = "\n".join(line.split("//")[0] for line in text.split("\n"))
        check_not(code, r"layers\.0", r"mlp")


# -- row -----------------------------------------------------------------------------------------------------


def _rmsnorm(dtype: int = F32, d: int = 64):
    nodes = [NODE("Mul", ["x", "x"], ["sq"]), NODE("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             NODE("Add", ["ms", "eps"], ["e"]), NODE("Sqrt", ["e"], ["r"]), NODE("Div", ["x", "r"], ["n"]),
             NODE("Mul", ["n", "w"], ["y"])]
    return model(nodes, [("x", dtype, ["n", d])], [("y", dtype, ["n", d])],
                 [helper.make_tensor("eps", dtype, [], [1e-6]),
                  helper.make_tensor("w", dtype, [d], np.linspace(0.5, 1.5, d).tolist())])


def test_row_rmsnorm_reduces_once_and_scales_by_a_per_row_statistic():
    k, f = _kernel(_rmsnorm())
    assert k.ir.op_type == "AscRmsNorm" and k.ir.row_dims == 1
    assert [(x.name, x.kind) for x in k.ir.inputs] == [("x", "full"), ("weight", "vec")]
    apis = [(s.api, s.form) for s in k.ir.steps]
    assert apis == [("Mul", "tile"), ("ReduceSum", "reduce"), ("Muls", "tile"), ("Adds", "tile"), ("Sqrt", "tile"),
                    ("Div", "tile"), ("Muls", "scalar"), ("Mul", "vec")]
    assert k.ir.params and abs(k.ir.params[0] - 1e-6) < 1e-12  # eps is a parameter, not baked in
    kernel = f["op_kernel/OP.cpp"]
    checks(kernel, r"class KernelAscRmsNorm \{", r"Init\(GM_ADDR x, GM_ADDR weight, GM_ADDR y",
           r"AscendC::Mul\(r1, r0, r0, count\)", r"AscendC::ReduceSum\(", r"AscendC::Muls\(s2, s1, td\.invLength",
           r"AscendC::Adds\(s3, s2, td\.param\[0\]", r"AscendC::Sqrt\(", r"AscendC::Div\(",
           r"s5\.GetValue\(", r"AscendC::Muls\(r0\[r \* pitch\]",
           r"AscendC::Mul\(r1\[r \* pitch\], v0")  # the output reuses the square's register, dead after its sum
    checks(f["op_kernel/OP_tiling.h"], r"struct AscRmsNormTilingData \{", r"param\[")


def test_row_split_mode_exists_for_rows_longer_than_the_ub():
    k, f = _kernel(_rmsnorm(F32, 100_003))
    assert k.ir.passes == 2  # the statistics pass, then the output pass
    checks(f["op_kernel/OP.cpp"], r"chunkLength", r"AscendC::ReduceSum\(partial")


# -- matmul + epilogue -----------------------------------------------------------------------------------


@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend310P"])
def test_matmul_swiglu_is_two_gemms_and_a_vector_epilogue(soc):
    k, f = _kernel(mk.swiglu(F16, 64, k=32), soc)
    assert k.ir.op_type == "AscSwiGlu" and k.ir.inputs == ("x", "w_gate", "w_up") and len(k.ir.gemms) == 2
    assert [g.weight for g in k.ir.gemms] == [1, 2] and not k.ir.split and not k.ir.trans_b
    assert _steps(k.ir) == [("Muls", -1.0), ("Exp",), ("Adds", 1.0), ("Div",), ("Mul",)]  # silu(g) * u
    kernel = f["op_kernel/OP.cpp"]
    checks(kernel, r"class KernelAscSwiGlu \{", r"AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>",
           r"Init\(GM_ADDR x, GM_ADDR w_gate, GM_ADDR w_up, GM_ADDR y, GM_ADDR workspace",
           r"AscendC::Matmul<AType, BType, CType, BiasType> mm;",
           # 910B: each block's gate and up queued on the cube in turn, into one stage of the ring
           r"mm\.SetTensorA\(xGm", r"mm\.SetTensorB\(w_gateGm", r"mm\.template IterateAll<false>\(ringGm",
           r"mm\.SetTensorA\(xGm", r"mm\.SetTensorB\(w_upGm", r"mm\.template IterateAll<false>\(ringGm",
           r"AscendC::Exp\(", r"AscendC::Div\(", r"AscendC::Mul\(r2, r0, r1")
    check_not(kernel, r"mm\.IterateAll\(")  # 910B's blocks are all queued asynchronously; 310P's taken by Iterate
    # the cube runs a block ahead: the next block is queued (its stage released) before this one is waited for
    checks(kernel, r"for \(uint32_t i = 0; i < blocks; \+\+i\)", r"Release\(\);",
           r"Queue\(i \+ STAGES - 1, \(i \+ STAGES - 1\) % STAGES\);", r"mm\.WaitIterateAll\(\);",
           r"Epilogue\(i, i % STAGES\);")
    # the Matmul's KFC client is registered in the kernel entry, before any other use of the pipe
    checks(kernel, r"op\.Init\(x, w_gate, w_up, y, workspace", r"REGIST_MATMUL_OBJ\(&op\.pipe")
    checks(f["op_kernel/OP_tiling.h"], r"struct AscSwiGluTilingData \{", r"cubeTiling")


def test_pointwise_floor_goes_through_int32_and_keeps_large_values():
    m = model([NODE("Mul", ["x", "h"], ["a"]), NODE("Floor", ["a"], ["y"])], [("x", F32, [4, 64])],
              [("y", F32, [4, 64])], [helper.make_tensor("h", F32, [], [0.5])])
    k, f = _kernel(m)
    assert [s.api for s in k.ir.steps] == ["Muls", "CastToInt", "CastFromInt", "Abs", "Compares", "Select"]
    assert k.ir.steps[1].mode == "FLOOR" and k.ir.steps[4].scalar == 8388608.0 and k.ir.steps[4].mode == "LT"
    checks(f["op_kernel/OP.cpp"], r"ReinterpretCast<int32_t>\(\), r\d+, AscendC::RoundMode::CAST_FLOOR",
           r"ReinterpretCast<int32_t>\(\), AscendC::RoundMode::CAST_NONE", r"AscendC::Abs\(",
           r"AscendC::Compares\([^;]*8388608\.0f, AscendC::CMPMODE::LT", r"AscendC::Select\(")


@pytest.mark.parametrize("op", ["Sin", "Cos"])
def test_pointwise_sin_and_cos_reduce_by_pi_in_three_parts(op):
    m = model([NODE("Mul", ["x", "h"], ["a"]), NODE(op, ["a"], ["y"])], [("x", F32, [4, 64])],
              [("y", F32, [4, 64])], [helper.make_tensor("h", F32, [], [0.5])])
    k, f = _kernel(m)
    apis = [s.api for s in k.ir.steps]
    assert apis[1:4 if op == "Sin" else 5] == (["Muls", "CastToInt", "CastFromInt"] if op == "Sin"
                                                else ["Muls", "Adds", "CastToInt", "CastFromInt"])
    parts = [s.scalar for s in k.ir.steps if s.api == "Muls" and s.scalar in (3.140625, 9.67502593994140625e-4,
                                                                              1.509957990978376432e-7)]
    assert len(parts) == 3  # q * pi in three parts
    assert apis[-3:] == ["Abs", "Compares", "Select"] and k.ir.steps[-2].scalar == 2.0**20
    checks(f["op_kernel/OP.cpp"], r"AscendC::RoundMode::CAST_RINT", r"AscendC::Sub\(", r"AscendC::Sub\(",
           r"AscendC::Sub\(", r"AscendC::RoundMode::CAST_FLOOR", r"AscendC::Select\(")


# -- attention -----------------------------------------------------------------------------------------------


def test_attention_is_two_cube_products_around_an_online_softmax_on_a_mixed_launch():
    """Softmax(q @ k^T * c + mask) @ v: one Matmul object per product, both driven asynchronously from the vector
    side (IterateAll with its signal, waited one step later), the row max and the rescale by Exp of the
    difference (the online softmax), on a 1:2 cube:vector launch."""
    from test_attention import attention_model

    res = asc_onnx.fuse(attention_model(dt=F16), options=FuseOptions(judge=False, emulate=False), validate=False)
    (k,) = [k for k in res.kernels if k.op.kernel == "attention"]
    assert k.ir.trans_k and k.ir.has_mask and not k.ir.kv_repeat and len(k.ir.scale) == 1
    # The op's kernel file: its traits over the shared template, and the entry on a mixed launch.
    src = k.files[f"op_kernel/{k.ir.snake}.cpp"]
    checks(src, r'#include "asc_onnx_flash_attention.h"', r"static constexpr bool hasMask = true;",
           r"static constexpr bool hasKeep = false;", r"static constexpr bool transK = true;",
           r"return td\.param\[0\];",  # the scale, from the node's parameter
           r"KERNEL_TASK_TYPE_DEFAULT\(KERNEL_TYPE_MIX_AIC_1_2\);",
           rf"asc_onnx::FlashAttention<DTYPE_Y, {k.ir.op_type}TilingData, {k.ir.op_type}Traits> op;",
           r"op\.Init\(q, k, v, nullptr, mask, y, workspace, tilingData\);")
    # The template: the step loop, the online softmax, the two Matmul objects.
    tpl = k.files["op_kernel/asc_onnx_flash_attention.h"]
    checks(tpl, r"mmQk\.WaitIterateAll\(\);", r"mmPv\.WaitIterateAll\(\);",
           r"mmQk\.SetTensorA\(qGm", r"mmQk\.SetTensorB\(kGm\[kAt\], Traits::transK\);",
           r"mmQk\.template IterateAll<false>\(scoresGm", r"mmPv\.SetTensorA\(probsGm")
    checks(tpl, r"AscendC::Max\(stat, stat", r"AscendC::Exp\(rescale, rescale, rows\);")
    checks(tpl, r"AscendC::Matmul<QType, KType, FType, FType> mmQk;",
           r"AscendC::Matmul<QType, VType, FType, FType> mmPv;")
    check_not(tpl, r"DataCopy\(\w*, kGm")  # k is read by the cube only, never staged through UB
    check_not(src, r"DataCopy")  # nothing of the schedule is in the op's own file
    host = k.files[f"op_host/{k.ir.snake}.cpp"]
    checks(host, rf"{k.ir.op_type}ComputeTiling\(", r"SetBlockDim")


def test_the_shared_row_tiling_header_holds_the_schedules_constants():
    """asc_onnx_row_tiling.h (the C++ every row op's host tiling runs) and kernels/row/schedule.py (the same
    arithmetic in Python, for the traffic model) hold the same constants."""
    from asc_onnx.kernels.row import render as row_render
    from asc_onnx.kernels.row import schedule
    from asc_onnx.kernels.row.rows import MAX_LEAD

    text = (Path(row_render.__file__).with_name(row_render.TILING_HEADER)).read_text()

    def const(name: str) -> int:
        m = re.search(rf"constexpr uint\d+_t {name} = (\d+);", text)
        assert m, name
        return int(m[1])

    assert const("kMaxLead") == MAX_LEAD and const("kStatSlot") == schedule.STAT_SLOT
    assert const("kFoldMax") == schedule.FOLD_MAX and const("kWeightShare") == schedule.WEIGHT_SHARE
    assert const("kMaxTileRows") == schedule.MAX_TILE_ROWS and const("kBufferings") == len(schedule.BUFFERINGS)
    ins = re.search(r"kInOptions\[kBufferings\] = \{([^}]*)\}", text)[1]
    outs = re.search(r"kOutOptions\[kBufferings\] = \{([^}]*)\}", text)[1]
    assert list(zip(map(int, ins.split(",")), map(int, outs.split(",")))) == list(schedule.BUFFERINGS)
    k, files = _kernel(_rmsnorm())
    assert files["op_host/asc_onnx_row_tiling.h"] == text  # shipped as it is
    checks(files["op_host/OP_tiling_calc.h"], r'#include "asc_onnx_row_tiling.h"', r"struct \w+RowShape \{",
           r"return asc_onnx::RowTiling<\w+RowShape>\(")
