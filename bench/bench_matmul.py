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

    python bench/bench_matmul.py [--soc Ascend910B|Ascend310P|all] [--smoke]

``--smoke`` (what the tests run): one fixture's kernels, none of the deployment-width FFNs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
from bench_kernels import SMOKE_MODEL, TIMED_HEAD, timed  # noqa: E402
from onnx import TensorProto  # noqa: E402

import asc_onnx  # noqa: E402
from asc_onnx import FuseOptions  # noqa: E402
from asc_onnx.kernels import of  # noqa: E402
from asc_onnx.soc import SOCS  # noqa: E402
from asc_onnx.verify_kernels import check, concrete, data_movement, matmul_inputs  # noqa: E402

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16


def _deployment() -> dict[str, tuple[object, tuple[int, ...]]]:
    """FFNs at deployment widths (rows kept small enough to emulate): BERT-base's GELU FFN, a LLaMA-style
    SwiGLU, a Linear+SiLU."""
    import test_matmul_kernels as mk  # the test suite's graph builders

    return {"bert-base FFN GELU 256x768x3072": (mk.linear_gelu(F16, 3072, k=768), (1, 256)),
            "swiglu 128x768x2048": (mk.swiglu(F16, 2048, k=768), (1, 128)),
            "linear+silu 512x768x768": (mk.linear_silu(F16, 768, k=768), (1, 512))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soc", default="all", choices=["all", *SOCS])
    ap.add_argument("--smoke", action="store_true", help="one fixture's kernels only (what the tests run)")
    args = ap.parse_args()
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
                if of(k).cube and (k.op.signature, k.ir.dtypes) not in seen:
                    seen.add((k.op.signature, k.ir.dtypes))
                    lead = concrete(k.op.instances[0].output_shapes[0], 4)[:-1]
                    cases.append((f"{path.stem}:{k.op.op_type}", k, lead, k.ir.dtypes[0]))
        for name, (m, lead) in ({} if args.smoke else _deployment()).items():
            res = asc_onnx.fuse(m, options=FuseOptions(emulate=False, soc=soc_name, judge=False), validate=False)
            ks = [k for k in res.kernels if of(k).cube]
            if ks:
                cases.append((name, ks[0], lead, ks[0].ir.dtypes[0]))
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
    return 0 if ran and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
