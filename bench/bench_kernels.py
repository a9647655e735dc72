"""Global-memory traffic of every generated pointwise kernel in the fixtures, from the emulator's
counters: fused kernel vs the compulsory minimum (inputs read once, outputs written once; target
at most 1.05x) and vs the unfused chain (each original node reads its inputs and writes its
output). Measured at each op's real fixture shape and at a deployment-sized shape (~4M elements,
many cores), on Ascend910B.

    python bench/bench_kernels.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import asc_onnx  # noqa: E402
from asc_onnx import FuseOptions  # noqa: E402
from asc_onnx.soc import SOCS  # noqa: E402
from asc_onnx.verify_kernels import check, concrete, data_movement, random_inputs  # noqa: E402


def main() -> int:
    kernels = {}
    for path in sorted((ROOT / "models").glob("*.onnx")):
        for k in asc_onnx.fuse(path, options=FuseOptions(emulate=False), validate=False).kernels:
            kernels.setdefault((k.op.signature, k.ir.dtypes), (path.stem, k))
    soc = SOCS["Ascend910B"]
    print(f"{'op':<22} {'first seen in':<24} {'dtype':<7} {'shape':<18} {'blocks':>6} {'fused B':>11} {'min B':>11} "
          f"{'fused/min':>9} {'unfused B':>11} {'unfused/fused':>13}  ok")
    worst = 0.0
    for (_, dtypes), (model, k) in sorted(kernels.items(), key=lambda kv: kv[1][1].op.op_type):
        real = concrete(k.op.instances[0].output_shapes[0], 4)
        per_row = 1
        for d in real[1:]:
            per_row *= d
        big = (max(1, (1 << 22) // per_row),) + tuple(real[1:])
        for shape in (real, big):
            inputs = random_inputs(k, dtypes[0], shape)
            c = check(k, inputs, soc, "bench")
            m = data_movement(k, inputs, c.gm_bytes)
            ratio = m.fused / m.compulsory
            worst = max(worst, ratio)
            print(f"{k.op.op_type[:22]:<22} {model[:24]:<24} {c.dtype:<7} {str(list(shape))[:18]:<18} {c.block_dim:>6} "
                  f"{m.fused:>11} {m.compulsory:>11} {ratio:>9.3f} {m.unfused:>11} {m.unfused / m.fused:>13.2f}  "
                  f"{'ok' if c.ok else 'MISMATCH'}")
    print(f"worst fused/compulsory: {worst:.3f} (target <= 1.05)")
    return 0 if worst <= 1.05 else 1


if __name__ == "__main__":
    sys.exit(main())
