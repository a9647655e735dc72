"""The part of every generated op that does not depend on its kernel class: fp32 register helpers,
the ONNX parser plugin, and the kernel entry point. Per-class modules (``pointwise``, ``row``) emit
the schedule, the compute body and the tiling; they share these pieces so that every kernel looks
alike to the engineer who reads it."""

from __future__ import annotations

from .text import Lines

GE_TYPES = {"float": "ge::DT_FLOAT", "half": "ge::DT_FLOAT16", "bfloat16_t": "ge::DT_BF16"}


def role(name: str) -> str:
    """Formal input/output names are rule-chosen roles (x, bias, x0, y ...); keep them C-safe."""
    safe = "".join(c if c.isalnum() else "_" for c in name)
    return safe if safe and safe[0].isalpha() else f"v{safe}"


def cap(name: str) -> str:
    r = role(name)
    return r[0].upper() + r[1:]



#: fp32 register helpers every kernel class uses: widen an input tile, narrow a result, copy a register.
HELPERS = r"""// Compare works on whole 256-byte repeats: round the fp32 count up (registers are sized for it).
__aicore__ inline uint32_t CompareCount(uint32_t count) { return (count + 63) / 64 * 64; }

template <typename T>
__aicore__ inline AscendC::LocalTensor<float> ToFloat(const AscendC::LocalTensor<T>& src,
                                                      const AscendC::LocalTensor<float>& work, uint32_t count)
{
    if constexpr (std::is_same_v<T, float>) {
        return src.template ReinterpretCast<float>();
    } else {
        AscendC::Cast(work, src, AscendC::RoundMode::CAST_NONE, count);
        return work;
    }
}

// fp32 kernels compute their outputs straight into the output tile; others into a register, then Cast.
template <typename T>
__aicore__ inline AscendC::LocalTensor<float> OutReg(const AscendC::LocalTensor<T>& out,
                                                     const AscendC::LocalTensor<float>& reg)
{
    if constexpr (std::is_same_v<T, float>) {
        return out.template ReinterpretCast<float>();
    } else {
        return reg;
    }
}

template <typename T>
__aicore__ inline void FromFloat(const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<float>& src,
                                 uint32_t count)
{
    if constexpr (std::is_same_v<T, half>) {
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_NONE, count);
    } else if constexpr (!std::is_same_v<T, float>) {
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_RINT, count);
    }
}

// An output held in a register of its own (an input passed through, or one value as two outputs).
template <typename T>
__aicore__ inline void ToTile(const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<float>& src,
                              uint32_t count)
{
    if constexpr (std::is_same_v<T, float>) {
        AscendC::Muls(dst, src, 1.0f, count);
    } else {
        FromFloat(dst, src, count);
    }
}
"""


def platform_lines(uses_select: bool) -> list[str]:
    """The start of every TilingFunc: UB size (8 KB reserved where Select needs TMP_UB_OFFSET), vector core
    count and whether the SoC has DataCopyPad, all from the platform."""
    return ["auto ascendcPlatform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());",
            "uint64_t ubBytes = 0;",
            *(["// Select writes scratch at TMP_UB_OFFSET: keep 8 KB of UB free for it.",
               "ascendcPlatform.ReserveLocalMemory(platform_ascendc::ReservedSize::RESERVED_SIZE_8K);"]
              if uses_select else []),
            "ascendcPlatform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);",
            "const uint32_t coreNum = ascendcPlatform.GetCoreNumAiv();",
            "const bool hasDataCopyPad = ascendcPlatform.GetSocVersion() != "
            "platform_ascendc::SocVersion::ASCEND310P;"]


#: The end of every TilingFunc: the launch width from the tiling, no workspace.
LAUNCH_LINES = ["context->SetBlockDim(tiling->blockDim);",
                "size_t* workspace = context->GetWorkspaceSizes(1);",
                "workspace[0] = 0;  // no advanced API, no system workspace",
                "return ge::GRAPH_SUCCESS;"]


def infer_dtype_and_opdef(out: Lines, op_type: str, ins: list[str], outs: list[str], ge_types: list[str],
                          compute_units: list[str]) -> None:
    """The end of every host file: InferDataType (outputs take the I/O type), the OpDef and its registration."""
    dt, fmt = ", ".join(ge_types), ", ".join(["ge::FORMAT_ND"] * len(ge_types))
    out("static graphStatus InferDataType(gert::InferDataTypeContext* context)", "{")
    with out.indent():
        for o in range(len(outs)):
            out(f"context->SetOutputDataType({o}, context->GetInputDataType(0));")
        out("return GRAPH_SUCCESS;")
    out("}", "}  // namespace ge", "", "namespace ops {", f"class {op_type} : public OpDef {{", "public:")
    with out.indent():
        out(f"explicit {op_type}(const char* name) : OpDef(name)", "{")
        with out.indent():
            for n in ins:
                out(f'this->Input("{n}").ParamType(REQUIRED).DataType({{{dt}}}).Format({{{fmt}}});')
            for n in outs:
                out(f'this->Output("{n}").ParamType(REQUIRED).DataType({{{dt}}}).Format({{{fmt}}});')
            out("this->SetInferShape(ge::InferShape);", "this->SetInferDataType(ge::InferDataType);",
                "this->AICore().SetTiling(optiling::TilingFunc);")
            for cu in compute_units:
                out(f'this->AICore().AddConfig("{cu}");')
        out("}")
    out("};", f"OP_ADD({op_type});", "}  // namespace ops")


def render(emitters, k, rule: str, body_ops: list[str], sources: list[str], compute_units: list[str],
           origin_keys: list[str]) -> dict[str, str]:
    """Every file of one op, by path relative to the op package root: the same layout for every kernel
    class, the per-class parts from ``emitters`` (the class's codegen module)."""
    return {
        f"op_kernel/{k.snake}.cpp": emitters.kernel_source(k, rule, body_ops, sources),
        f"op_kernel/{k.snake}_tiling.h": emitters.tiling_header(k),
        f"op_host/{k.snake}_tiling_calc.h": emitters.tiling_calc(k),
        f"op_host/{k.snake}.cpp": emitters.host_source(k, compute_units),
        f"framework/onnx_plugin/{k.snake}_plugin.cc": plugin_source(k.op_type, origin_keys),
    }


def kernel_entry(out: Lines, snake: str, args: list[str], struct: str, cls: str, dtype_of: str,
                 matmul: bool = False) -> None:
    """The ``extern "C"`` entry: kernel type per SoC, the tiling struct, one kernel object. A ``matmul``
    kernel is a mixed AIC/AIV kernel on 910B (one cube core to two vector cores) and takes the workspace."""
    params = ", ".join(f"GM_ADDR {n}" for n in args)
    out(f'extern "C" __global__ __aicore__ void {snake}({params}, GM_ADDR workspace, GM_ADDR tiling)', "{")
    with out.indent():
        out("#if __NPU_ARCH__ == 2002",
            "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AICORE);  // 310P: AI Core kernels (no AIV-only type there)",
            "#else",
            "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);  // the cube computes C, two vector cores the rest"
            if matmul else "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);",
            "#endif",
            f"REGISTER_TILING_DEFAULT({struct});",
            "GET_TILING_DATA(tilingData, tiling);",
            f"{cls}<DTYPE_{dtype_of.upper()}> op;",
            f"op.Init({', '.join(args + (['workspace'] if matmul else []))}, tilingData);",
            "op.Process();")
    out("}")


def plugin_source(op_type: str, origin_keys: list[str]) -> str:
    """framework/onnx_plugin/<op>_plugin.cc: maps the ATC model's node to the OpDef."""
    keys = ",\n                   ".join(f'ge::AscendString("{k}")' for k in origin_keys)
    fn = f"Parse{op_type}"
    return Lines()(
        f"// Generated by asc-onnx: ONNX parser plugin of {op_type}.",
        "// Fused ops carry no ONNX attributes: their scalar constants are baked into the kernel, so nothing",
        "// float-valued passes through ATC's 6-significant-digit attribute JSON.",
        '#include "register/register.h"',
        "",
        "namespace domi {",
        f"static Status {fn}(const ge::Operator& opSrc, ge::Operator& opDest)",
        "{",
        "    (void)opSrc;",
        "    (void)opDest;",
        "    return SUCCESS;",
        "}",
        "",
        "// ATC looks a node up as <domain>::<opset version>::<op type> (ge::AscendString keys; the",
        "// initializer_list<std::string> overload is deprecated in metadef's register.h).",
        f'REGISTER_CUSTOM_OP("{op_type}")',
        "    .FrameworkType(ONNX)",
        f"    .OriginOpType(std::vector<ge::AscendString>{{{keys}}})",
        f"    .ParseParamsByOperatorFn({fn})",
        "    .ImplyType(ImplyType::TVM);",
        "}  // namespace domi",
    ).text()


