"""What the slower-op guard ships, per kernel class and SoC, over every fixture in ``models/``: each fixture fused
with the guard on (the default), its op types counted as judged and as shipped (faster than their unfused nodes
at every judged shape, at the slow corner of every assumed range). An attention op that does not ship leaves the
model (its regions are matched again and keep their smaller fusions); it is counted as judged from the near miss
that says so.

    python bench/bench_ship.py [--soc Ascend910B|Ascend310P|all] [--smoke]

``--smoke`` (what the tests run): one fixture on 910B.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import asc_onnx  # noqa: E402
from asc_onnx import FuseOptions  # noqa: E402
from asc_onnx.cli import use_environment  # noqa: E402

use_environment()  # the cache and CANN sources the command line would use
from asc_onnx.soc import SOCS  # noqa: E402

#: Fixtures the legacy exporter traced at one sequence length (they run at it only).
SHAPES = {"phi3_tiny_legacy": (("input_ids", (1, 8)),),
          "llama_causal_fp16_mask_legacy": (("input_ids", (2, 8)), ("attention_mask", (2, 8)))}
SMOKE_MODEL = "gpt2_tiny_dynamo"


def counts(soc: str, models: list[Path]) -> tuple[collections.Counter, collections.Counter]:
    """Op types judged and shipped per kernel class on ``soc``."""
    judged: collections.Counter = collections.Counter()
    shipped: collections.Counter = collections.Counter()
    for path in models:
        res = asc_onnx.fuse(path, options=FuseOptions(soc=soc, emulate=False, input_shapes=SHAPES.get(path.stem, ())),
                            validate=False)
        kind = {op.op_type: op.kernel for op in res.ops}
        for e in (res.report.get("estimates") or {}).get("ops", []):
            judged[kind[e["op_type"]]] += 1
            shipped[kind[e["op_type"]]] += bool(e["shipped"])
        # An attention op that did not ship left the model (its regions keep their smaller fusions): counted from
        # its near misses, one per op type as the rest.
        declined = {m.reason.split(" ", 4)[3] for m in res.near_misses
                    if m.rule == "Attention" and m.reason.startswith("the fused op ")}
        judged["attention"] += len(declined)
    return judged, shipped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soc", default="all", choices=["all", *SOCS])
    ap.add_argument("--smoke", action="store_true", help="one fixture on 910B (what the tests run)")
    args = ap.parse_args()
    socs = ["Ascend910B"] if args.smoke else list(SOCS) if args.soc == "all" else [args.soc]
    models = [ROOT / "models" / f"{SMOKE_MODEL}.onnx"] if args.smoke else sorted((ROOT / "models").glob("*.onnx"))
    print(f"{'soc':<11} {'class':<10} {'shipped':>7} {'judged':>6}  ({len(models)} fixtures)")
    for soc in socs:
        judged, shipped = counts(soc, models)
        for kind in sorted(judged):
            print(f"{soc:<11} {kind:<10} {shipped[kind]:>7} {judged[kind]:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
