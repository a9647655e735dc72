"""Soak: 1,000 random elementwise DAGs (tests/dags.py), each fused, validated on onnxruntime and emulated.

The property test runs 150 draws per CI run; this runs the long tail. It prints one line per failure with
the command that reproduces it, then the counts and where the time went (batch compiles, then the fuse,
validate and emulate runs), and exits 1 if any draw failed.

    python3 bench/soak_dags.py                 # seeds 0..999
    python3 bench/soak_dags.py --seed 123 --count 1
    python3 bench/soak_dags.py --smoke         # three draws: what the tests run
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from dags import draw  # noqa: E402
from test_property_dags import check_draw  # noqa: E402

import asc_onnx  # noqa: E402
from asc_onnx import FuseOptions  # noqa: E402
from asc_onnx.emulator.harness import prebuild  # noqa: E402
from asc_onnx.soc import SOCS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--count", type=int, default=1000, help="draws")
    ap.add_argument("--smoke", action="store_true", help="three draws (what the tests run)")
    args = ap.parse_args()
    if args.smoke:
        args.count = 3
    seeds = range(args.seed, args.seed + args.count)
    t0 = time.monotonic()
    items, fused = [], 0
    for seed in seeds:
        d = draw(seed)
        try:
            res = asc_onnx.fuse(d.model, options=FuseOptions(soc=d.soc, emulate=False, judge=False), validate=False)
        except asc_onnx.AscOnnxError:
            continue  # check_draw reports it below
        fused += bool(res.kernels)
        items += [(k.ir, k.files, f"{k.op.op_type}TilingData", dt, SOCS[d.soc]) for k in res.kernels
                  for dt in k.ir.dtypes]
    t1 = time.monotonic()
    made = prebuild(items)
    t2 = time.monotonic()
    failures = 0
    for seed in seeds:
        failure = check_draw(seed)
        if failure is not None:
            failures += 1
            print(f"FAIL {failure}")
    t3 = time.monotonic()
    print(f"{len(seeds)} draws, {fused} with kernels ({len(items)} kernel programs, {made} compiled in batches "
          f"of up to 12); {failures} failures")
    print(f"time: plan {t1 - t0:.1f} s, batch compiles {t2 - t1:.1f} s, fuse+validate+emulate {t3 - t2:.1f} s "
          f"({(t3 - t2) / len(seeds):.2f} s per draw)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
