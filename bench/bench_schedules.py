"""Two schedules of one op, side by side: each kernel class's named schedules (``VARIANTS`` in its schedule
module: double or single buffering for the vector classes, the matmul epilogue's C staging, attention's KV block)
rendered from one IR, emulated on the same inputs, and compared with the class's traffic model and the compulsory
bytes.

    python bench/bench_schedules.py [--soc Ascend910B|Ascend310P|all] [--smoke]

Columns: the schedule; rows per tile (0: split mode, the row walked in chunks; pointwise: elements per tile;
matmul: baseM; attention: keys per KV block); the unified buffer used; GM bytes emulated, the class's model of
them, and both over the compulsory minimum (every input read once, every output written once); the timing model's
estimates (bench_kernels.timed); whether the kernel matched onnxruntime. ``--smoke`` (what the tests run): small
shapes, one SoC.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_kernels import TIMED_HEAD, timed  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import asc_onnx  # noqa: E402
from asc_onnx import FuseOptions  # noqa: E402
from asc_onnx.cli import use_environment  # noqa: E402

use_environment()  # the cache and CANN sources the command line would use
from asc_onnx.kernels import of  # noqa: E402
from asc_onnx.package import render  # noqa: E402
from asc_onnx.soc import SOCS  # noqa: E402
from asc_onnx.verify_kernels import check, data_movement, random_inputs  # noqa: E402

F16, F32 = TensorProto.FLOAT16, TensorProto.FLOAT


def _model(nodes, inputs, output, inits=(), opset: int = 17):
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [vi(n, t, s) for n, t, s in inputs], [vi(*output)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def rmsnorm(rows: int, d: int, dtype: int):
    """LLaMA's RMSNorm as exporters write it, fp16 I/O: at d = 8192 two buffers per queue do not leave room for a
    whole row, one does."""
    node = helper.make_node
    eps = helper.make_tensor("eps", dtype, [], [1e-6])
    w = helper.make_tensor("w", dtype, [d], [1.0] * d)
    nodes = [node("Mul", ["x", "x"], ["sq"]), node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             node("Add", ["ms", "eps"], ["e"]), node("Sqrt", ["e"], ["r"]), node("Div", ["x", "r"], ["n"]),
             node("Mul", ["n", "w"], ["y"])]
    return _model(nodes, [("x", dtype, [rows, d])], ("y", dtype, [rows, d]), [eps, w])


def silu(n: int, dtype: int):
    """x * sigmoid(x) + b: one pointwise chain."""
    node = helper.make_node
    b = helper.make_tensor("b", dtype, [], [0.5])
    return _model([node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["m"]), node("Add", ["m", "b"], ["y"])],
                  [("x", dtype, [n])], ("y", dtype, [n]), [b])


def swiglu(m: int, k: int, n: int):
    """LLaMA's MLP gate: silu(x W1) * (x W3), fp16."""
    node = helper.make_node
    w1 = helper.make_tensor("w1", F16, [k, n], [0.01] * (k * n))
    w3 = helper.make_tensor("w3", F16, [k, n], [0.02] * (k * n))
    nodes = [node("MatMul", ["x", "w1"], ["g"]), node("Sigmoid", ["g"], ["s"]), node("Mul", ["g", "s"], ["a"]),
             node("MatMul", ["x", "w3"], ["u"]), node("Mul", ["a", "u"], ["y"])]
    return _model(nodes, [("x", F16, [m, k])], ("y", F16, [m, n]), [w1, w3])


def attention(b: int, h: int, s: int, d: int):
    """softmax(q @ k^T / sqrt(d) + mask) @ v as exporters write it (k transposed in the graph, a mask per batch),
    fp16."""
    node = helper.make_node
    c = helper.make_tensor("c", F16, [], [d ** -0.5])
    nodes = [node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), node("MatMul", ["q", "kt"], ["sc"]),
             node("Mul", ["sc", "c"], ["ss"]), node("Add", ["ss", "mask"], ["sm"]),
             node("Softmax", ["sm"], ["p"], axis=-1), node("MatMul", ["p", "v"], ["y"])]
    qkv = [(n, F16, [b, h, s, d]) for n in ("q", "k", "v")]
    return _model(nodes, [*qkv, ("mask", F16, [b, 1, s, s])], ("y", F16, [b, h, s, d]), [c])


def cases(smoke: bool) -> list[tuple[str, object, tuple[int, ...]]]:
    if smoke:
        return [("RMSNorm fp16 4x8192", rmsnorm(4, 8192, F16), (4, 8192)),
                ("SiLU+b fp32 5000", silu(5000, F32), (5000,)),
                ("SwiGLU fp16 16x64x128", swiglu(16, 64, 128), (16, 128)),
                ("Attention fp16 1x2x128x32", attention(1, 2, 128, 32), (1, 2, 128, 32))]
    return [("RMSNorm fp16 512x8192", rmsnorm(512, 8192, F16), (512, 8192)),
            ("RMSNorm fp16 1024x4096", rmsnorm(1024, 4096, F16), (1024, 4096)),
            ("RMSNorm fp32 256x4096", rmsnorm(256, 4096, F32), (256, 4096)),
            ("SiLU+b fp16 4M", silu(1 << 22, F16), (1 << 22,)),
            ("SwiGLU fp16 64x256x512", swiglu(64, 256, 512), (64, 512)),
            ("Attention fp16 1x8x1024x64", attention(1, 8, 1024, 64), (1, 8, 1024, 64)),
            ("Attention fp16 2x4x2048x128", attention(2, 4, 2048, 128), (2, 4, 2048, 128))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soc", default="all", choices=["all", *SOCS])
    ap.add_argument("--smoke", action="store_true", help="small shapes on 910B (what the tests run)")
    args = ap.parse_args()
    socs = ["Ascend910B"] if args.smoke else list(SOCS) if args.soc == "all" else [args.soc]
    print(f"{'op':<24} {'soc':<10} {'schedule':<26} {'tile':>6} {'UB B':>7} {'GM B':>11} {'model B':>11} "
          f"{'emu/min':>7} {'model/min':>9} {TIMED_HEAD}  ok")
    bad = 0
    for soc_name in socs:
        soc = SOCS[soc_name]
        for label, model, shape in cases(args.smoke):
            res = asc_onnx.fuse(model, options=FuseOptions(emulate=False, soc=soc_name, judge=False), validate=False)
            if not res.kernels:
                print(f"{label:<24} {soc_name:<10} no kernel: {res.report['kernels']['not_generated']}")
                continue
            shipped = res.kernels[0]
            cls = of(shipped)
            inputs = random_inputs(shipped, shipped.ir.dtypes[0], shape)
            for name, sched in cls.schedule.VARIANTS.items():
                k = render(shipped.op, dataclasses.replace(shipped.ir, schedule=sched), soc)
                c = check(k, inputs, soc, name)
                if c.error:
                    print(f"{label:<24} {soc_name:<10} {name:<26} {c.error[:90]}")
                    bad += 0 if c.refused else 1
                    continue
                m = data_movement(k, inputs, c.gm_bytes, c.vec_elems, c.cube)
                model_b = cls.schedule.traffic(k.ir, [a.shape for a in inputs], inputs[0].itemsize, soc, c.block_dim,
                                               c.cube)
                tile = (c.cube.get("baseM") or c.cube.get("kv_block", 0)) if c.cube else c.tile_length
                print(f"{label:<24} {soc_name:<10} {name:<26} {tile:>6} {c.ub_peak:>7} {c.gm_bytes:>11} "
                      f"{model_b:>11} {c.gm_bytes / m.compulsory:>7.2f} {model_b / m.compulsory:>9.2f} "
                      f"{timed(k, inputs, soc_name)}  "
                      f"{'yes' if c.ok else 'NO'}")
                bad += 0 if c.ok else 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
