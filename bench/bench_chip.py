"""The timing model held against a chip: a bare fp16 GEMM of 4096 x 4096 x 4096 through the Matmul API on 910B,
timed by the emulator (``bench/gemm_chip.cpp``, timing only), against the best published measurement: torch_npu's
MatMul at 314.5 of 353.9 TFLOPS (89%) on 910B2 (``zzc0721/torch-performance-test-data`` issue 109 on GitHub).

The tiling is the shape CANN's MultiCoreMatmulTiling picks for a large unconstrained fp16 GEMM (128 x 256 base
blocks, baseK 64, depth 8 per input, double-buffered L0), with the 24 cube cores split 6 x 4 over M x N. The
estimate is printed at the table's values and at both corners of the assumed ranges.

    python bench/bench_chip.py [--smoke]

``--smoke`` (what the tests run): a 512 x 512 x 512 GEMM, the table's values only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asc_onnx.emulator import INCLUDE_DIR  # noqa: E402
from asc_onnx.hardware import corner, emulator_table, fact  # noqa: E402

PUBLISHED_TFLOPS = 314.5  # torch_npu MatMul fp16 4096^3 on 910B2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="a 512^3 GEMM at the table's values (what the tests run)")
    args = ap.parse_args()
    size = 512 if args.smoke else 4096
    corners = {"table": None} if args.smoke else {"table": None, "fast corner": corner("Ascend910B", slow=False),
                                                   "slow corner": corner("Ascend910B", slow=True)}
    peak = fact("Ascend910B", "cube_fp16_flops") / 1e12
    with tempfile.TemporaryDirectory(prefix="asc-chip-") as d:
        exe = Path(d) / "gemm"
        subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-D__NPU_ARCH__=2201", "-I", str(INCLUDE_DIR),
                        str(ROOT / "bench" / "gemm_chip.cpp"), "-o", str(exe)], check=True)
        print(f"fp16 GEMM {size}^3 on 910B, Matmul API, 128x256x64 base blocks, 6x4 cores (estimates)")
        print(f"{'constants':<12} {'est us':>9} {'TFLOPS':>7} {'of peak':>7} {'bottleneck':>10}  busy share per pipe")
        for name, overrides in corners.items():
            table = Path(d) / "timing.txt"
            table.write_text("".join(f"{k} {v!r}\n" for k, v in emulator_table("Ascend910B", overrides).items()))
            env = {**os.environ, "ASC_EMU_TIMING": str(table), "ASC_EMU_VALUES": "0"}
            out = subprocess.run([str(exe), str(size), str(size), str(size), "6", "4", "128", "256", "64"], env=env,
                                 capture_output=True, text=True, check=True).stdout
            t = json.loads(out.strip().splitlines()[-1])
            us = t["cycles"] / t["clock_hz"] * 1e6
            tflops = 2 * size**3 / (us * 1e-6) / 1e12
            busy = {p: c / t["cycles"] for p, c in t["busy"].items() if c}
            print(f"{name:<12} {us:>9.1f} {tflops:>7.1f} {tflops / peak:>7.0%} {max(busy, key=busy.get):>10}  "
                  + " ".join(f"{p} {v:.0%}" for p, v in busy.items()))
    if not args.smoke:
        print(f"published: {PUBLISHED_TFLOPS} TFLOPS ({PUBLISHED_TFLOPS / peak:.0%} of peak), torch_npu MatMul")
    return 0


if __name__ == "__main__":
    sys.exit(main())
