"""Every matmul+epilogue kernel of the fixtures (Linear+SiLU, SwiGLU, Linear+GELU) plus deployment-sized
FFNs, per SoC and dtype, from the emulator's counters, in one run on the same inputs:

* GM bytes of the fused kernel against the compulsory minimum (x, W and the bias read once, y written once),
  against the least its tiling allows (each core reads its rows of x and columns of W once) and against the
  unfused nodes (the MatMul writes C, every epilogue node reads and writes a tensor);
* of the fused bytes, the C staging: 910B has no L0C -> UB path, so each C block crosses a per-core GM slot
  in the I/O type (written by the cube, read back by the vector core; a few KB per core, reused, so it stays
  in L2 in steady state, an assumption);
* cube work (multiply-accumulates in whole 16x16 fractals) and vector passes per output element;
* the timing model's estimates (bench_kernels.timed): the fused kernel timed in the emulator (its cube stages
  per K step, the KFC round trips, its vector epilogue), the unfused nodes (MatMul at the cube peak times the best
  published efficiency, each epilogue node at the bandwidth; a launch each), the bound and the efficiency.

Then the deployment targets (issue 19), by the timing model's timing-only path at full size: BERT-base FFN
512x768x3072 (GELU), LLaMA-7B SwiGLU 2048x4096x11008 and its decode step 16x4096x11008, Qwen2-0.5B SwiGLU
512x896x4864, Linear+SiLU 512x768x768; on 910B in fp16 and bf16, on 310P in fp16. Per shape: the shipped
schedule (910B: the pipelined ring), the synchronous block loop it replaces, and "the bare MatMul" (this class
with an identity epilogue over the same gemms: the cube work alone, under the same tiling); GM bytes of the
fused kernel over the bare one's and the ring's reads by level (the L2 rule), time over the bare one's, the
speedup over the unfused nodes at the assumption table and at its slow corner (what the guard decides on), the
efficiency against the op's bound (``eff``) and against the cube roofline alone (``cube``: its multiply-adds at
the cube's peak over the kernel's time). Bytes and times are those of the blocks the timing-only path runs
(the first two and last two cores), so ratios compare like with like.

    python bench/bench_matmul.py [--soc Ascend910B|Ascend310P|all] [--smoke]
    python bench/bench_matmul.py --gelu-sample [--check]

``--gelu-sample``: one-sided against the best published Matmul+GELU at 8192^3 fp16 on 910B2: the
matmul_gelu_high_performance sample's fused kernel (4236.944 us, Scenario 1, fp32 out) and torch_npu's MatMul
(3599 us, 305.5 TFLOPS) followed by that sample's own GELU kernel (369.827 us), the faster of the two; our
Linear+GELU (bias, fp16 out) estimated more than 15% faster than it is flagged (``--check``: exit 1).

``--smoke`` (what the tests run): one fixture's kernels and the smallest target on 910B.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
import test_matmul_kernels as mk  # noqa: E402  (the test suite's graph builders and targets)
from bench_kernels import SMOKE_MODEL, TIMED_HEAD, timed  # noqa: E402
from onnx import TensorProto  # noqa: E402

import asc_onnx  # noqa: E402
from asc_onnx import FuseOptions  # noqa: E402
from asc_onnx.cli import use_environment  # noqa: E402

use_environment()  # the cache and CANN sources the command line would use
from asc_onnx.estimate import estimate_at  # noqa: E402
from asc_onnx.hardware import corner, value  # noqa: E402
from asc_onnx.kernels import of  # noqa: E402
from asc_onnx.kernels.matmul.schedule import MatmulSchedule  # noqa: E402
from asc_onnx.package import render  # noqa: E402
from asc_onnx.soc import SOCS  # noqa: E402
from asc_onnx.verify_kernels import check, concrete, data_movement, matmul_inputs  # noqa: E402

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16


#: (name, epilogue, M, K, N): the shapes issue 19 sets (the test suite proves each under CANN's tiling).
TARGETS = mk.TARGETS
#: (SoC, dtype) pairs the targets run on.
TARGET_TYPES = [("Ascend910B", TensorProto.FLOAT16), ("Ascend910B", TensorProto.BFLOAT16),
                ("Ascend310P", TensorProto.FLOAT16)]


def _target_kernel(kind: str, soc: str, dtype: int):
    """The fused op of one target, from a small model of its form (the kernel reads its sizes at run time),
    rendered for ``soc`` with every dtype column ``dtype``."""
    k = mk._kernel(mk.BUILDERS[kind](F16, 64, k=32), soc)
    return k if dtype == F16 else render(k.op, dataclasses.replace(k.ir, dtypes=(dtype,) * len(k.ir.dtypes)),
                                         SOCS[soc])


def targets(smoke: bool, socs: list[str]) -> int:
    """The deployment targets table; returns how many shapes failed to estimate."""
    print(f"\n{'target':<24} {'soc':<10} {'dtype':<8} {'M x K x N':<17} {'ring us':>8} {'sync us':>8} {'bare us':>8} "
          f"{'/bare':>5} {'bytes/bare':>10} {'ring L2':>7} {'unf us':>8} {'speedup':>7} {'slow':>5} {'eff':>4} "
          f"{'cube':>4}  ship")
    bad = 0
    for name, kind, m, kk, n in TARGETS[-1:] if smoke else TARGETS:
        for soc_name, dtype in TARGET_TYPES[:1] if smoke else TARGET_TYPES:
            if soc_name not in socs:
                continue
            soc = SOCS[soc_name]
            k = _target_kernel(kind, soc_name, dtype)
            shapes = mk.full_shapes(k, m, kk, n)
            nc = len(k.ir.gemms)
            bare = render(k.op, dataclasses.replace(k.ir, steps=(), const_steps=(), out_reg=0, num_regs=nc), soc)
            sync = render(k.op, dataclasses.replace(k.ir, schedule=MatmulSchedule(ring_stages=0)), soc)
            e, eb = estimate_at(k, shapes, soc), estimate_at(bare, shapes, soc)
            es = estimate_at(sync, shapes, soc) if soc.has_data_copy_pad else e
            slow = estimate_at(k, shapes, soc, corner(soc_name, slow=True))
            dt = {F16: "fp16", TensorProto.BFLOAT16: "bf16"}[dtype]
            if e.error or eb.error:
                bad += 1
                print(f"{name:<24} {soc_name:<10} {dt:<8} {f'{m}x{kk}x{n}':<17} FAILED: {e.error or eb.error}")
                continue
            ring_reads = e.vec_read_hbm + e.vec_read_l2
            # the cube roofline: the op's multiply-adds at the cube's peak (fp32 inputs at half of it)
            peak = value(soc_name, "cube_fp16_flops") * (0.5 if dtype == TensorProto.FLOAT else 1.0)
            cube_us = 2.0 * m * kk * n * len(k.ir.gemms) / peak * 1e6
            ship = slow.fused_us < slow.unfused_us
            print(f"{name:<24} {soc_name:<10} {dt:<8} {f'{m}x{kk}x{n}':<17} {e.fused_us:>8.1f} {es.fused_us:>8.1f} "
                  f"{eb.fused_us:>8.1f} {e.fused_us / eb.fused_us:>5.2f} "
                  f"{(e.hbm_bytes + e.l2_bytes) / max(1, eb.hbm_bytes + eb.l2_bytes):>10.2f} "
                  f"{e.vec_read_l2 / max(1, ring_reads):>7.0%} {e.unfused_us:>8.1f} {e.unfused_us / e.fused_us:>7.2f} "
                  f"{slow.unfused_us / slow.fused_us:>5.2f} {e.efficiency:>4.0%} {cube_us / e.body_us:>4.0%}  "
                  f"{'yes' if ship else 'NO'}")
    return bad


#: Matmul+GELU at 8192^3 fp16 on 910B2, us: the sample's fused kernel, and torch_npu's MatMul plus the sample's GELU.
GELU_SAMPLE_US = 4236.944
GELU_UNFUSED_US = 2 * 8192**3 / 305.5e12 * 1e6 + 369.827


def gelu_sample(check: bool) -> int:
    """Our Linear+GELU at the sample's shape against the best measured Matmul+GELU (one-sided)."""
    from asc_onnx.soc import get_soc

    soc = get_soc("Ascend910B2")
    k = _target_kernel("gelu", "Ascend910B", F16)
    e = estimate_at(k, mk.full_shapes(k, 8192, 8192, 8192), soc)
    best = min(GELU_SAMPLE_US, GELU_UNFUSED_US)
    over = best / e.fused_us
    print(f"Linear+GELU 8192^3 fp16 on Ascend910B2: estimate {e.fused_us:.1f} us; measured: the sample's fused "
          f"{GELU_SAMPLE_US:.1f} us, torch_npu MatMul + the sample's GELU {GELU_UNFUSED_US:.1f} us; best/estimate "
          f"{over:.2f}" + ("  FASTER THAN THE BEST MEASURED BY MORE THAN 15%" if over > 1.15 else ""))
    return 1 if check and (over > 1.15 or e.error) else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gelu-sample", action="store_true", help="one-sided against the measured Matmul+GELU")
    ap.add_argument("--check", action="store_true", help="with --gelu-sample: exit 1 if beaten by more than 15%%")
    ap.add_argument("--soc", default="all", choices=["all", *SOCS])
    ap.add_argument("--smoke", action="store_true", help="one fixture's kernels only (what the tests run)")
    args = ap.parse_args()
    if args.gelu_sample:
        return gelu_sample(args.check)
    socs = list(SOCS) if args.soc == "all" else [args.soc]
    models = [ROOT / "models" / SMOKE_MODEL] if args.smoke else sorted((ROOT / "models").glob("*.onnx"))
    ran = 0
    print(f"{'op':<34} {'soc':<10} {'dtype':<6} {'M x K x N':<16} {'cores':>5} {'fused/min':>9} {'fused/til':>9} "
          f"{'unf/fused':>9} {'staging':>7} {'MACs':>11} {'vec/elem':>8} {TIMED_HEAD} "
          f"{'model/emu':>9}  ok")
    bad = 0
    for soc_name in socs:
        soc = SOCS[soc_name]
        cases = []
        seen = set()
        for path in models:
            res = asc_onnx.fuse(path, options=FuseOptions(emulate=False, soc=soc_name, judge=False), validate=False)
            for k in res.kernels:
                if of(k).budget is not None and (k.op.signature, k.ir.dtypes) not in seen:
                    seen.add((k.op.signature, k.ir.dtypes))
                    lead = concrete(k.op.instances[0].output_shapes[0], 4)[:-1]
                    cases.append((f"{path.stem}:{k.op.op_type}", k, lead, k.ir.dtypes[0]))
        for name, k, lead, dtype in cases:
            inputs = matmul_inputs(k, dtype, lead, np.random.default_rng(0))
            c = check(k, inputs, soc, "bench")
            if not c.ok and "tiling refused" in (c.error or ""):  # e.g. N not a multiple of 16 on 310P
                print(f"{name[:34]:<34} {soc_name:<10} refused by the tiling: {c.error.split(': ')[-1]}")
                continue
            bad += not c.ok
            ran += 1
            if not c.ok:
                print(f"{name[:34]:<34} {soc_name:<10} FAILED: {c.error}")
                continue
            d = data_movement(k, inputs, c.gm_bytes, c.vec_elems, c.cube)
            mm, kk, nn = int(np.prod(lead)), inputs[0].shape[-1], k.ir.out_cols([a.shape for a in inputs])
            staging = 2 * c.cube["c_bytes"]
            cores = c.cube["usedCoreNum"]
            # The class's traffic model of its block loop under the tiling the run used (exact when 1.00).
            model = of(k).schedule.traffic(k.ir, [a.shape for a in inputs], inputs[0].itemsize, soc, c.block_dim,
                                           c.cube)
            print(f"{name[:34]:<34} {soc_name:<10} {c.dtype:<6} {f'{mm}x{kk}x{nn}':<16} {cores:>5} "
                  f"{d.fused / d.compulsory:>9.2f} {d.fused / max(1, d.tiling_min):>9.2f} {d.unfused / d.fused:>9.2f} "
                  f"{staging / d.fused:>7.0%} {c.cube['macs']:>11} {c.vec_elems / (mm * nn):>8.2f} "
                  f"{timed(k, inputs, soc_name)} {model / max(1, c.gm_bytes):>9.2f}  ok")
    bad += targets(args.smoke, socs)
    return 0 if ran and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
