"""Summarise the msprof profiles MindStudio's op performance model ships into the table the judge is fitted to.

The Python package ``msopmodeling`` 1.0.9 (``pip download --no-deps msopmodeling==1.0.9``) carries, under
``tilesim/tests/st/ops_accuracy/eng_ops_classic/<op>/``, CSV files of CANN kernels profiled with msprof on 910B4-1
and 910B1: one row per run with its ``kernel_type``, ``block_dim``, ``inputs_shape``, ``inputs_dtype``,
``outputs_shape``, ``outputs_dtype`` and ``profiling_time`` (us). This script keeps the kernels an exported ONNX
graph's nodes become and writes one row per kernel, chip and shape: the run count and the fastest, median and
slowest run. Its output, ``asc_onnx/data/msopmodeling_profiles.csv``, is committed; run it again only with new
measurements::

    python3 bench/extract_profiles.py msopmodeling-1.0.9-py3-none-any.whl
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import statistics
import zipfile
from collections import defaultdict
from pathlib import Path

#: The CANN kernels kept: those exported ONNX nodes run as (RmsNorm's variants are one kernel).
KEEP = {"Add", "Mul", "RmsNorm", "AddRmsNorm", "LayerNormV3", "SoftmaxV2", "MatMulV2", "MatMulV3", "BatchMatMulV2",
        "ConcatD", "SliceAiCore"}
PREFIX = "tilesim/tests/st/ops_accuracy/eng_ops_classic/"
OUT = Path(__file__).resolve().parent.parent / "asc_onnx" / "data" / "msopmodeling_profiles.csv"
COLUMNS = ["kernel", "chip", "inputs_shape", "inputs_dtype", "outputs_shape", "outputs_dtype", "block_dim", "runs",
           "min_us", "median_us", "max_us", "source"]


def chip_of(path: str) -> str:
    """The chip a profile file names (``..._910B4_1.csv`` and ``..._910B4-1.csv`` are 910B4-1)."""
    name = Path(path).name
    return "910B4-1" if "910B4" in name else "910B1" if "910B1" in name else ""


def dtypes(text: str) -> str:
    """``['torch.bfloat16', ...]`` as ``bf16,...``."""
    short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "int64": "int64", "int32": "int32",
             "int8": "int8", "bool": "bool"}
    return ",".join(short.get(d.removeprefix("torch."), d) for d in ast.literal_eval(text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel", help="the msopmodeling 1.0.9 wheel")
    args = ap.parse_args()
    runs: dict[tuple[str, ...], list[float]] = defaultdict(list)
    with zipfile.ZipFile(args.wheel) as z:
        for name in sorted(n for n in z.namelist() if n.startswith(PREFIX) and n.endswith(".csv")):
            chip = chip_of(name)
            for r in csv.DictReader(io.TextIOWrapper(z.open(name), encoding="utf-8")):
                kernel = "RmsNorm" if r.get("kernel_type", "").startswith("RmsNorm") else r.get("kernel_type", "")
                if kernel not in KEEP or not chip or r.get("inputs_shape") in (None, "", "[]"):
                    continue
                key = (kernel, chip, str(ast.literal_eval(r["inputs_shape"])), dtypes(r["inputs_dtype"]),
                       str(ast.literal_eval(r["outputs_shape"])), dtypes(r["outputs_dtype"]), r["block_dim"],
                       name.removeprefix(PREFIX))
                runs[key].append(float(r["profiling_time"]))
    with OUT.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for key in sorted(runs):
            v = runs[key]
            w.writerow([*key[:7], len(v), f"{min(v):.3f}", f"{statistics.median(v):.3f}", f"{max(v):.3f}", key[7]])
    print(f"{len(runs)} kernel shapes, {sum(map(len, runs.values()))} runs -> {OUT}")


if __name__ == "__main__":
    main()
