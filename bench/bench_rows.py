"""Every row kernel (norms, softmax) of the fixtures plus the deployment-sized rows the issue names, per
SoC and dtype, from the emulator's counters, in one run on the same inputs:

* GM bytes: fused kernel vs the compulsory minimum (every input read once, every output written once;
  target at most 1.05x when a row fits the unified buffer) and the measured ratio of split mode (rows that
  do not fit: x is re-read once per pass); and the unfused nodes' bytes over the fused kernel's;
* vector instructions per element (elements processed by all vector instructions / data elements) against
  a hand count: one pass per data-shaped body node (bench_kernels.HAND_COST), one per reduction, none for
  per-row statistics, one Cast per fp16 input and output;
* GetValue reads of per-row statistics per row, the unified buffer used, rows per tile (0 = split mode);
* the timing model's estimates (bench_kernels.timed): fused, unfused, speedup, bound and efficiency.

    python bench/bench_rows.py [--soc Ascend910B|Ascend310P|all] [--smoke] [--targets] [--match TEXT]

``--smoke`` (what the tests run): one fixture's row kernels, none of the deployment-sized rows.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
from bench_kernels import HAND_COST, SMOKE_MODEL, TIMED_HEAD, timed_columns  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import asc_onnx  # noqa: E402
from asc_onnx import FuseOptions  # noqa: E402
from asc_onnx.cli import use_environment  # noqa: E402

use_environment()  # the cache and CANN sources the command line would use
from asc_onnx.emulator.harness import EmulatorFaultError, run  # noqa: E402
from asc_onnx.estimate import estimate_at  # noqa: E402
from asc_onnx.kernels import of  # noqa: E402
from asc_onnx.soc import SOCS  # noqa: E402
from asc_onnx.validate import compare_arrays  # noqa: E402
from asc_onnx.verify_kernels import (  # noqa: E402
    concrete,
    data_movement,
    data_shape,
    random_inputs,
    reference,  # noqa: E402
)

REDUCTIONS = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2"}
ROW_OPS = {"Softmax": 6, "LogSoftmax": 6, "LayerNormalization": 8, "RMSNormalization": 5}


def _models() -> dict[str, object]:
    """The issue's target rows: RMSNorm and LayerNorm where a row fits the unified buffer (1024 x 4096, 512 x 8192,
    256 x 16384), rows that do not (a 32000-wide vocabulary softmax in fp32, 100,003 elements), attention softmaxes
    with masks broadcast over heads (128 wide; short rows of 64 and 16; CLIP's 77, ragged on 310P) and BERT's
    LayerNorm (768)."""
    f32, f16 = TensorProto.FLOAT, TensorProto.FLOAT16
    out = {}

    def rms(rows, d, t):
        nodes = [helper.make_node("Cast", ["x"], ["xf"], to=f32), helper.make_node("Mul", ["xf", "xf"], ["sq"]),
                 helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
                 helper.make_node("Add", ["ms", "eps"], ["e"]), helper.make_node("Sqrt", ["e"], ["r"]),
                 helper.make_node("Div", ["xf", "r"], ["nf"]), helper.make_node("Cast", ["nf"], ["n"], to=t),
                 helper.make_node("Mul", ["w", "n"], ["y"])]
        g = helper.make_graph(nodes, "rms", [helper.make_tensor_value_info("x", t, [rows, d]),
                                             helper.make_tensor_value_info("w", t, [d])],
                              [helper.make_tensor_value_info("y", t, [rows, d])],
                              [helper.make_tensor("axes", TensorProto.INT64, [1], [-1]),
                               helper.make_tensor("eps", f32, [], [1e-6])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])

    def single(op, rows, d, t, **attrs):
        ins = [helper.make_tensor_value_info("x", t, [rows, d])]
        names = ["x"]
        if op == "LayerNormalization":
            ins += [helper.make_tensor_value_info("g", t, [d]), helper.make_tensor_value_info("b", t, [d])]
            names += ["g", "b"]
        g = helper.make_graph([helper.make_node(op, names, ["y"], **attrs)], op, ins,
                              [helper.make_tensor_value_info("y", t, [rows, d])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    def attn(t, shape, mask):
        nodes = [helper.make_node("Mul", ["x", "scale"], ["xs"]), helper.make_node("Add", ["xs", "mask"], ["xm"]),
                 helper.make_node("Softmax", ["xm"], ["y"], axis=-1)]
        g = helper.make_graph(nodes, "attn", [helper.make_tensor_value_info("x", t, shape),
                                              helper.make_tensor_value_info("mask", t, mask)],
                              [helper.make_tensor_value_info("y", t, shape)],
                              [helper.make_tensor("scale", t, [], [0.125])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    for t, name in ((f16, "fp16"), (f32, "fp32")):
        for rows, d in ((1024, 4096), (512, 8192), (256, 16384)):
            out[f"rmsnorm {rows}x{d} {name}"] = rms(rows, d, t)
            out[f"layernorm {rows}x{d} {name}"] = single("LayerNormalization", rows, d, t, axis=-1, epsilon=1e-5)
        out[f"layernorm 2048x768 {name}"] = single("LayerNormalization", 2048, 768, t, axis=-1, epsilon=1e-5)
        out[f"softmax 64x32000 {name}"] = single("Softmax", 64, 32000, t, axis=-1)
        out[f"softmax 16x100003 {name}"] = single("Softmax", 16, 100003, t, axis=-1)
        out[f"layernorm 16x100003 {name}"] = single("LayerNormalization", 16, 100003, t, axis=-1, epsilon=1e-5)
        out[f"rmsnorm 16x100003 {name}"] = rms(16, 100003, t)
        out[f"mask softmax 1x8x128x128 {name}"] = attn(t, [1, 8, 128, 128], [1, 1, 128, 128])
        out[f"mask softmax 8x32x64x64 {name}"] = attn(t, [8, 32, 64, 64], [1, 1, 64, 64])
        out[f"mask softmax 64x8x16x16 {name}"] = attn(t, [64, 8, 16, 16], [64, 1, 16, 16])
        out[f"CLIP mask softmax 8x77x77 {name}"] = attn(t, [1, 8, 77, 77], [1, 1, 77, 77])  # ragged on 310P
    return out


def _hand_count(k) -> int:
    """Vector passes an engineer writes with the basic API: one per data-shaped node, one per reduction."""
    nodes = [n for n in k.op.function.node if n.op_type != "Constant"]
    stats = set()
    total = 0
    for n in nodes:
        if n.op_type in REDUCTIONS:
            stats.add(n.output[0])
            total += 2 if n.op_type in ("ReduceSumSquare", "ReduceL2") else 1
        elif n.op_type in ROW_OPS:
            total += ROW_OPS[n.op_type] - (2 if n.op_type == "LayerNormalization" and len(n.input) < 3 else 0)
        elif n.op_type in ("Cast", "Flatten", "Reshape", "Identity", "Squeeze", "Unsqueeze"):
            if n.input[0] in stats:
                stats.add(n.output[0])
        elif all(i in stats or not i for i in n.input if i) or all(
                i in stats for i in n.input if i and not i.startswith("c")):
            stats.add(n.output[0])  # per-row statistic math: rows values, not elements
        else:
            total += HAND_COST.get(n.op_type, 1)
    casts = 0 if k.ir.dtypes[0] == TensorProto.FLOAT else \
        len([x for x in k.ir.inputs if x.kind in ("full", "bcast")]) + k.ir.output_kinds.count("row")
    return total + casts


#: Per (label, SoC): GM bytes and HBM bytes over the compulsory minimum, the timing model's efficiency (bound /
#: body), outputs right.
RESULTS: dict[tuple[str, str], tuple[float, float, float, bool]] = {}

#: The issue's targets on 910B: label -> the most GM bytes over the compulsory minimum (None: time only). Every
#: one of them is also held to the timing model's 1.15x of its bound.
TARGETS = {
    **{f"{op} {shape} {t}": 1.05 for op in ("rmsnorm", "layernorm") for shape in ("1024x4096", "512x8192")
       for t in ("fp16", "fp32")},
    "rmsnorm 256x16384 fp16": 1.05, "layernorm 256x16384 fp16": 1.05,
    "softmax 64x32000 fp32": 1.55, "softmax 16x100003 fp32": 1.55, "layernorm 16x100003 fp32": 1.55,
    "rmsnorm 16x100003 fp32": 1.55,
    "mask softmax 8x32x64x64 fp32": None, "mask softmax 64x8x16x16 fp32": None,
    "mask softmax 1x8x128x128 fp16": 1.05, "mask softmax 1x8x128x128 fp32": 1.05,
}


def _targets() -> int:
    """The target table (910B); returns how many targets are missed."""
    missed = 0
    print(f"\n{'target (910B)':<32} {'GM/min':>7} {'limit':>6} {'HBM/min':>7} {'time/bound':>10} {'limit':>6}  met")
    for label, limit in TARGETS.items():
        if (label, "Ascend910B") not in RESULTS:
            continue
        gm, hbm, eff, ok = RESULTS[(label, "Ascend910B")]
        over = 1 / eff if eff else math.inf
        met = ok and (limit is None or gm <= limit) and over <= 1.15
        missed += not met
        print(f"{label:<32} {gm:>7.3f} {limit or '-':>6} {hbm:>7.3f} {over:>10.2f} {1.15:>6}  {'yes' if met else 'NO'}")
    return missed


def _row(label, k, inputs, soc_name) -> tuple[float, bool, bool]:
    soc = SOCS[soc_name]
    try:
        r = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, soc)
    except EmulatorFaultError as exc:
        print(f"{label[:32]:<32} {soc_name:<10} refused: {str(exc).split(': ', 2)[-1][:80]}")
        return 0.0, True, False
    refs = reference(k.op, inputs)
    dtype = TensorProto.FLOAT if inputs[0].dtype == np.float32 else TensorProto.FLOAT16
    ok = all(compare_arrays(n, a, b, dtype).ok for n, a, b in zip(k.op.output_names, refs, r.outputs))
    m = data_movement(k, inputs, r.gm_read_bytes + r.gm_write_bytes)
    shape = data_shape(k, inputs)
    n = math.prod(shape)
    rows = n // math.prod(shape[len(shape) - k.ir.row_dims:])
    vec = r.vec_elems / n
    hand = _hand_count(k)
    split = r.tile_length == 0  # rows per tile; 0 in split mode
    # The class's traffic model (its host tiling's plan and the bytes it moves; exact when 1.00).
    model = of(k).schedule.traffic(k.ir, [a.shape for a in inputs], inputs[0].itemsize, soc)
    emu = r.gm_read_bytes + r.gm_write_bytes
    hbm = (r.time or {}).get("hbm_bytes", 0) / m.compulsory
    est = estimate_at(k, [a.shape for a in inputs], soc)
    RESULTS[(label, soc_name)] = (m.fused / m.compulsory, hbm, est.efficiency, ok)
    print(f"{label[:32]:<32} {soc_name:<10} {str(list(shape))[:20]:<20} {r.block_dim:>3} "
          f"{r.tile_length if not split else 0:>5} {k.ir.passes if split else 1:>3} {m.fused / m.compulsory:>9.3f} "
          f"{hbm:>7.3f} "
          f"{m.unfused / m.fused:>9.2f} {vec:>8.2f} {hand:>4} {vec / hand:>8.2f} {r.scalar_instr / rows:>8.1f} "
          f"{r.ub_peak_bytes:>7} {timed_columns(est)} {model / max(1, emu):>9.2f}  "
          f"{'ok' if ok else 'MISMATCH'}")
    return (m.fused / m.compulsory) if not split else 0.0, ok, split


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soc", default="all", choices=["all", *SOCS])
    ap.add_argument("--smoke", action="store_true", help="one fixture's row kernels only (what the tests run)")
    ap.add_argument("--targets", action="store_true", help="the deployment-sized rows only (no fixtures)")
    ap.add_argument("--match", default="", help="only the deployment-sized rows whose label contains this")
    args = ap.parse_args()
    socs = list(SOCS) if args.soc == "all" else [args.soc]
    models = [ROOT / "models" / SMOKE_MODEL] if args.smoke else sorted((ROOT / "models").glob("*.onnx"))
    models = [] if args.targets or args.match else models
    ran = 0
    print(f"{'op':<32} {'soc':<10} {'shape':<20} {'blk':>3} {'rows':>5} {'rd':>3} {'fused/min':>9} {'HBM/min':>7} "
          f"{'unf/fused':>9} "
          f"{'vec/elem':>8} {'hand':>4} {'vec/hand':>8} {'get/row':>8} {'UB B':>7} {TIMED_HEAD} "
          f"{'model/emu':>9}  ok")
    worst, bad = 0.0, 0
    for soc_name in socs:
        seen = set()
        for path in models:
            res = asc_onnx.fuse(path, options=FuseOptions(emulate=False, soc=soc_name, judge=False), validate=False)
            for k in res.kernels:
                if k.op.kernel != "row" or (k.op.signature, k.ir.dtypes) in seen:
                    continue
                seen.add((k.op.signature, k.ir.dtypes))
                shape = concrete(k.op.instances[0].output_shapes[0], 64)
                g, ok, _ = _row(f"{path.stem[:14]} {k.op.op_type}", k, random_inputs(k, k.ir.dtypes[0], shape, dim=64),
                                soc_name)
                worst, bad, ran = max(worst, g), bad + (not ok), ran + 1
        for label, model in ({} if args.smoke else _models()).items():
            if args.match not in label:
                continue
            res = asc_onnx.fuse(model, options=FuseOptions(emulate=False, soc=soc_name, judge=False), validate=False)
            k = res.kernels[0]
            shape = concrete(k.op.instances[0].output_shapes[0], 1)
            g, ok, _ = _row(label, k, random_inputs(k, k.ir.dtypes[0], shape, dim=1), soc_name)
            worst, bad = max(worst, g), bad + (not ok)
    print(f"worst fused/compulsory GM bytes where a row fits the UB: {worst:.3f}; split-mode rows read x once per "
          "pass (rd column); HBM/min counts re-reads the L2 serves as free")
    if not args.smoke:
        print(f"targets missed: {_targets()}")
    if args.smoke:  # the targets are for the deployment-sized rows
        return 0 if ran and not bad else 1
    return 0 if worst <= 1.05 and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
