"""Every generated kernel (each dtype column, 910B and 310P) and host file type-checks against the open
Ascend C headers (``../shared/ascend/check/check.sh``): the kernels the fixtures produce (pointwise and row:
norms, attention softmaxes and attention), a Where chain (Compare/Select), a chain with five full inputs (queues
merged to fit the event budget), row kernels in split mode and with per-row statistics as outputs, and attention
with a keep mask (Where on the scores) and with a Tile of the KV heads."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import test_matmul_kernels as _mm  # noqa: E402
from conftest import F16, F32, MODELS, ROOT, const, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.kernels.ir import IO_TYPES
from asc_onnx.kernels.skeleton import role

CHECK = ROOT.parent / "shared" / "ascend" / "check" / "check.sh"
pytestmark = pytest.mark.skipif(not CHECK.is_file(), reason="../shared/ascend is not present")
ARCH = {"Ascend910B": "2201", "Ascend310P": "2002"}


def where_chain(dtype: int):
    nodes = [helper.make_node("Less", ["x", "z"], ["c"]), helper.make_node("Mul", ["x", "k"], ["m"]),
             helper.make_node("Where", ["c", "m", "x"], ["y"])]
    np_t = np.float32 if dtype == F32 else np.float16
    return model(nodes, [("x", dtype, [8, 300])], [("y", dtype, [8, 300])],
                 [const("z", 0.0, np_t), const("k", 0.1, np_t)])


def five_inputs():
    names = [f"a{i}" for i in range(5)]
    nodes = [helper.make_node("Add", ["a0", "a1"], ["s1"]), helper.make_node("Mul", ["s1", "a2"], ["s2"]),
             helper.make_node("Sub", ["s2", "a3"], ["s3"]), helper.make_node("Div", ["s3", "a4"], ["y"])]
    return model(nodes, [(n, F32, [4, 100]) for n in names], [("y", F32, [4, 100])])


def layernorm_with_stats():
    """LayerNormalization with its Mean and InvStdDev outputs read, over two trailing axes."""
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y", "mean", "rstd"], axis=-2, epsilon=1e-5)
    return model([node], [("x", F32, [4, 6, 32]), ("g", F32, [6, 32]), ("b", F32, [6, 32])],
                 [("y", F32, [4, 6, 32]), ("mean", F32, [4, 1, 1]), ("rstd", F32, [4, 1, 1])], opset=17)


def floor_ceil(dtype: int):
    """Floor, Ceil, Sin, Cos and Sign: Casts through int32 on a float register's bytes, Compares and Selects."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"]), helper.make_node("Floor", ["m"], ["f"]),
             helper.make_node("Add", ["f", "x"], ["a"]), helper.make_node("Ceil", ["a"], ["c"]),
             helper.make_node("Sin", ["c"], ["s"]), helper.make_node("Cos", ["s"], ["t"]),
             helper.make_node("Sign", ["t"], ["y"])]
    np_t = np.float32 if dtype == F32 else np.float16
    return model(nodes, [("x", dtype, [8, 300])], [("y", dtype, [8, 300])], [const("k", 0.1, np_t)])


def attention_where_keep(dtype: int):
    """GPT-2's eager Where(causal, scores, -65504) on the scores: an attention op with a keep mask and a mask (a
    fill a score would move the sum off, in either type), q and k^T handed over as they are."""
    np_t = np.float32 if dtype == F32 else np.float16
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Div", ["s", "c"], ["ss"]),
             helper.make_node("Where", ["causal", "ss", "fill"], ["sm"]),
             helper.make_node("Softmax", ["sm"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    return model(nodes, [("q", dtype, [1, 4, "s", 32]), ("kt", dtype, [1, 4, 32, "s"]), ("v", dtype, [1, 4, "s", 32]),
                         ("causal", helper.TensorProto.BOOL, [1, 1, "s", "s"])], [("y", dtype, [1, 4, "s", 32])],
                 [const("c", 32 ** 0.5, np_t), const("fill", float(np.finfo(np.float16).min), np_t)])


def attention_tiled_heads():
    """k.repeat(1, 4, 1, 1): a Tile of the KV heads, which the op takes in (head h reads KV head h mod 2)."""
    nodes = [helper.make_node("Tile", [x, "reps"], [f"{x}r"]) for x in ("k", "v")]
    nodes += [helper.make_node("Transpose", ["kr"], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "vr"], ["y"])]
    return model(nodes, [("q", F16, [1, 8, "s", 16]), ("k", F16, [1, 2, "s", 16]), ("v", F16, [1, 2, "s", 16])],
                 [("y", F16, [1, 8, "s", 16])], [const("reps", [1, 4, 1, 1], np.int64)])


SOURCES = {
    "floor_ceil_fp16": floor_ceil(F16), "floor_ceil_fp32": floor_ceil(F32),
    "layernorm_stats": layernorm_with_stats(),
    "llama_fp32": MODELS / "llama_tiny_dynamo.onnx", "llama_fp16": MODELS / "llama_tiny_dynamo_fp16.onnx",
    "bert": MODELS / "bert_tiny_legacy.onnx", "gpt2": MODELS / "gpt2_tiny_dynamo.onnx",
    "cnn_fp16": MODELS / "cnn_silu_dynamo_fp16.onnx", "where_fp32": where_chain(F32), "where_fp16": where_chain(F16),
    "five_inputs": five_inputs(),
    "matmul_swiglu_split_fp16": _mm.swiglu(F16, 80, split=True),
    "matmul_silu_gemm_fp16": _mm.linear_silu(F16, 80, form="gemm"),
    "matmul_gelu_bias_fp16": _mm.linear_gelu(F16, 80, tanh=True),
    "matmul_swiglu_bias_fp16": _mm.swiglu(F16, 80, bias=True),
    "attention_keep_fp16": attention_where_keep(F16), "attention_keep_fp32": attention_where_keep(F32),
    "attention_tiled_heads": attention_tiled_heads(),
}


def _stub_gap(out: str, soc: str) -> bool:
    """310P only: every error is a CCE intrinsic that check.sh's stub_fun.h (derived for 2201) does not declare,
    inside the devkit's own dav_m200 implementation (the Matmul's broadcast_ub_to_cc), none in our files."""
    errors = [ln for ln in out.splitlines() if "error:" in ln]
    return soc == "Ascend310P" and bool(errors) and all(
        "/asc-devkit/impl/basic_api/dav_m200/" in ln and "was not declared in this scope" in ln for ln in errors)


def _check(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(CHECK), "--pch", *args], capture_output=True, text=True)


@pytest.mark.parametrize("soc", sorted(ARCH))
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_generated_files_pass_the_open_header_check(tmp_path, name, soc):
    res = asc_onnx.fuse(SOURCES[name], options=FuseOptions(judge=False, soc=soc, emulate=False), validate=False)
    assert res.kernels
    if name.startswith("attention_") and soc == "Ascend910B":  # (the forms they are here for; 310P falls back)
        ir = next(k.ir for k in res.kernels if k.op.rule == "Attention")
        assert ir.kv_tiled if name == "attention_tiled_heads" else ir.has_keep
    failures = []
    for k in res.kernels:
        for rel, text in k.files.items():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
        kernel = tmp_path / "op_kernel" / f"{k.ir.snake}.cpp"
        for dtype in k.ir.dtypes:
            ctype = IO_TYPES[dtype][0]
            names = [getattr(x, "name", x) for x in k.ir.inputs] + list(k.ir.outputs)
            defs = [f"-DDTYPE_{role(n).upper()}={ctype}" for n in names]
            proc = _check(["--arch", ARCH[soc], f"-I{tmp_path / 'op_kernel'}", *defs, str(kernel)])
            if proc.returncode != 0 and not _stub_gap(proc.stdout, soc):
                failures.append(f"{kernel.name} {ctype} {soc}:\n{proc.stdout[-1500:]}{proc.stderr[-500:]}")
        host = tmp_path / "op_host" / f"{k.ir.snake}.cpp"
        proc = _check(["--host", f"-I{tmp_path / 'op_host'}", str(host)])
        if proc.returncode != 0:
            failures.append(f"{host.name}:\n{proc.stdout[-1500:]}{proc.stderr[-500:]}")
    assert not failures, "\n".join(failures)


def test_check_catches_a_broken_kernel(tmp_path):
    # The check is real: a kernel calling an API with the wrong arguments fails it.
    res = asc_onnx.fuse(SOURCES["cnn_fp16"], options=FuseOptions(judge=False, emulate=False), validate=False)
    k = next(k for k in res.kernels if k.op.kernel == "pointwise")  # SiLU: an Exp
    for rel, text in k.files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text.replace("AscendC::Exp(r", "AscendC::Exp(1.0f, r") if rel.endswith(".cpp")
                                    else text)
    defs = [f"-DDTYPE_{role(n).upper()}=float" for n in [x.name for x in k.ir.inputs] + list(k.ir.outputs)]
    proc = _check([f"-I{tmp_path / 'op_kernel'}", *defs, str(tmp_path / "op_kernel" / f"{k.ir.snake}.cpp")])
    assert proc.returncode == 1 and "FAIL" in proc.stdout
