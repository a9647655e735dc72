"""Every generated pointwise kernel in the fixtures, per SoC and dtype, from the emulator's counters:

* GM bytes: fused kernel vs the compulsory minimum (inputs read once, outputs written once; target
  at most 1.05x) and vs the unfused chain (each original node reads its inputs, writes its output);
* vector instructions per element (elements processed by all vector instructions / output elements)
  against a hand count: what an Ascend C engineer writes for the body with the basic API
  (:data:`HAND_COST` per ONNX op, x*Sigmoid(x) as 4, one Cast per fp16/bf16 input and output;
  target at most 1.1x);
* scalar UB/GM accesses (GetValue/SetValue) per tile, and the unified buffer used;
* the timing model's estimates (:mod:`asc_onnx.estimate`): the fused kernel (a timing-only emulation plus a
  launch), the unfused nodes (each at its own roofline plus a launch), the op's bound (compulsory bytes, minimal
  vector and cube work over their peaks) and the kernel's efficiency (bound / kernel time).

Measured at each op's real fixture shape and at a deployment-sized shape (~4M elements).

    python bench/bench_kernels.py [--soc Ascend910B|Ascend310P|all] [--smoke]

``--smoke`` (what the tests run): one fixture, its real shapes only, no targets enforced.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from onnx import TensorProto  # noqa: E402

import asc_onnx  # noqa: E402
from asc_onnx import FuseOptions  # noqa: E402
from asc_onnx.cli import use_environment  # noqa: E402

use_environment()  # the cache and CANN sources the command line would use
from asc_onnx.emulator.harness import run  # noqa: E402
from asc_onnx.estimate import estimate_at  # noqa: E402
from asc_onnx.kernels import of  # noqa: E402
from asc_onnx.soc import SOCS  # noqa: E402
from asc_onnx.verify_kernels import check, concrete, data_movement, random_inputs  # noqa: E402

#: The fixture the benchmarks' smoke modes run (every kernel class, fp32, small).
SMOKE_MODEL = "llama_tiny_legacy.onnx"

#: Vector instructions per element for each body op, written with the basic API (no advanced APIs).
HAND_COST = {
    "Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Max": 1, "Min": 1, "Relu": 1, "Abs": 1, "Exp": 1, "Log": 1,
    "Sqrt": 1, "Neg": 1, "Reciprocal": 1, "LeakyRelu": 1, "Where": 1, "Less": 1, "Greater": 1, "Equal": 1,
    "LessOrEqual": 1, "GreaterOrEqual": 1, "Clip": 2, "HardSigmoid": 4, "HardSwish": 5,
    "Sigmoid": 4,  # Muls(-1), Exp, Adds(1), Div(1, .)
    "Tanh": 5,  # 2 sigmoid(2x) - 1: Muls, Exp, Adds, Div, Adds
    "Erf": 22,  # Abramowitz-Stegun 7.1.26: |x|, t = 1/(1+p|x|), a 5-term Horner, exp(-x^2), the sign
    "Pow": 1,  # x^2 (x^3 counts 2: see _hand_count)
}


def _hand_count(k) -> int:
    nodes = [n for n in k.op.function.node if n.op_type != "Constant"]
    consts = {n.output[0]: n for n in k.op.function.node if n.op_type == "Constant"}
    sig = {n.output[0]: n.input[0] for n in nodes if n.op_type == "Sigmoid"}
    total = 0
    for n in nodes:
        if n.op_type == "Mul" and any(sig.get(a) == b for a, b in (n.input, n.input[::-1])):
            total += 0  # x * Sigmoid(x) is x / (1 + exp(-x)): the Sigmoid's 4 cover it
        elif n.op_type == "Pow" and n.input[1] in consts:
            from onnx import numpy_helper
            e = float(numpy_helper.to_array(consts[n.input[1]].attribute[0].t))
            total += max(1, math.ceil(math.log2(abs(e))) + bin(int(abs(e))).count("1") - 1) if e.is_integer() else 3
        else:
            total += HAND_COST.get(n.op_type, 1)
    casts = 0 if k.ir.dtypes[0] == TensorProto.FLOAT else len(
        [x for x in k.ir.inputs if x.kind == "full"]) + len(k.ir.outputs)
    return total + casts


def timed(k, inputs, soc: str) -> str:
    """The timing model's columns for ``k`` on inputs of these shapes: est. fused us, est. unfused us, speedup,
    bound us, efficiency (every figure an estimate; asc_onnx.estimate says how each is made)."""
    return timed_columns(estimate_at(k, [a.shape for a in inputs], SOCS[soc]))


def timed_columns(e) -> str:
    """:func:`timed`'s columns for an estimate already made."""
    if e.error:
        return f"{'-':>8} {e.unfused_us:>8.2f} {'-':>7} {e.bound_us:>7.2f} {'-':>5}"
    return (f"{e.fused_us:>8.2f} {e.unfused_us:>8.2f} {e.unfused_us / e.fused_us:>7.2f} {e.bound_us:>7.2f} "
            f"{e.efficiency:>5.0%}")


#: The columns ``timed`` prints.
TIMED_HEAD = f"{'est us':>8} {'est unf':>8} {'speedup':>7} {'bound':>7} {'eff':>5}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soc", default="all", choices=["all", *SOCS])
    ap.add_argument("--smoke", action="store_true", help="one fixture at its real shapes (what the tests run)")
    args = ap.parse_args()
    socs = list(SOCS) if args.soc == "all" else [args.soc]
    models = [ROOT / "models" / SMOKE_MODEL] if args.smoke else sorted((ROOT / "models").glob("*.onnx"))
    print(f"{'op':<20} {'soc':<10} {'dtype':<6} {'shape':<18} {'blk':>3} {'fused/min':>9} {'unf/fused':>9} "
          f"{'vec/elem':>8} {'hand':>4} {'vec/hand':>8} {'scal/tile':>9} {'UB B':>7} {TIMED_HEAD}  ok")
    worst_gm, worst_vec, bad = 0.0, 0.0, 0
    for soc_name in socs:
        soc = SOCS[soc_name]
        kernels = {}
        for path in models:
            res = asc_onnx.fuse(path, options=FuseOptions(emulate=False, soc=soc_name, judge=False), validate=False)
            for k in res.kernels:
                if of(k).name == "pointwise":  # rows: bench_rows.py; matmul+epilogue: bench_matmul.py
                    kernels.setdefault((k.op.signature, k.ir.dtypes), k)
        for (_, dtypes), k in sorted(kernels.items(), key=lambda kv: (kv[1].op.op_type, kv[0][1])):
            real = concrete(k.op.instances[0].output_shapes[0], 4)
            per_row = math.prod(real[1:])
            big = (max(1, (1 << 22) // per_row),) + tuple(real[1:])
            hand = _hand_count(k)
            for shape in (real,) if args.smoke else (real, big):
                inputs = random_inputs(k, dtypes[0], shape)
                c = check(k, inputs, soc, "bench")
                r = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, soc)
                m = data_movement(k, inputs, c.gm_bytes)
                n = math.prod(shape)
                gm_ratio = m.fused / m.compulsory
                vec = r.vec_elems / n
                tiles = max(1, math.ceil(n / max(1, r.tile_length)))
                if shape == big:
                    worst_gm, worst_vec = max(worst_gm, gm_ratio), max(worst_vec, vec / hand)
                bad += not c.ok
                print(f"{k.op.op_type[:20]:<20} {soc_name:<10} {c.dtype:<6} {str(list(shape))[:18]:<18} "
                      f"{c.block_dim:>3} {gm_ratio:>9.3f} {m.unfused / m.fused:>9.2f} {vec:>8.2f} {hand:>4} "
                      f"{vec / hand:>8.2f} {r.scalar_instr / tiles:>9.1f} {r.ub_peak_bytes:>7} "
                      f"{timed(k, inputs, soc_name)}  {'ok' if c.ok else 'MISMATCH'}")
    if args.smoke:
        return 0 if kernels and not bad else 1
    print(f"at ~4M elements: worst fused/compulsory GM bytes {worst_gm:.3f} (target <= 1.05), "
          f"worst vector instructions / hand count {worst_vec:.2f} (target <= 1.1)")
    return 0 if worst_gm <= 1.05 and worst_vec <= 1.1 and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
