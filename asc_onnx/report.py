"""The report: what fused (op types, counts, rules, source nodes), what nearly fused and why,
node counts, ATC notes and validation. ``report.json`` is deterministic (no timestamps), so
two runs on one model write byte-identical files."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from onnx import TensorProto

from .match import NearMiss
from .rewrite import FusedOp
from .validate import ValidationReport


def dtype_name(t: int) -> str:
    """ONNX element type as a lowercase name (``float16``)."""
    return TensorProto.DataType.Name(t).lower() if t else "unknown"


def build_report(model_name: str, nodes_before: int, nodes_after: int, ops: Sequence[FusedOp],
                 near: Sequence[NearMiss], canon: dict[str, int], atc: dict[str, Any],
                 validation: ValidationReport | None) -> dict[str, Any]:
    """The report as a JSON-ready dict."""
    return {
        "tool": "asc-onnx",
        "model": model_name,
        "nodes_before": nodes_before,
        "nodes_after": nodes_after,
        "canonicalize": canon,
        "fused_by_rule": dict(sorted(Counter(op.rule for op in ops for _ in op.instances).items())),
        "ops": [{
            "op_type": op.op_type, "rule": op.rule, "family": op.family, "kernel": op.kernel,
            "count": len(op.instances), "inputs": list(op.input_names), "outputs": list(op.output_names),
            "dtype_columns": [[dtype_name(t) for t in col] for col in op.dtype_columns],
            "function_nodes": [n.op_type for n in op.function.node],
            "instances": [{"node": i.node, "source_nodes": list(i.source_nodes),
                           "input_shapes": [list(s) if s is not None else None for s in i.input_shapes],
                           "output_shapes": [list(s) if s is not None else None for s in i.output_shapes]}
                          for i in op.instances],
        } for op in ops],
        "near_misses": [asdict(n) for n in near],
        "atc": atc,
        "validation": None if validation is None else {
            "ok": validation.ok, "seed": validation.seed,
            "input_shapes": {k: list(v) for k, v in validation.input_shapes},
            "outputs": [asdict(o) for o in validation.outputs],
            "note": validation.note,
        },
    }


def strict(obj: Any) -> Any:
    """``obj`` with every non-finite float as the string "inf", "-inf" or "nan": strict JSON has no
    NaN or Infinity, and a failed comparison's error is often infinite."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    return obj


def to_json(report: Any) -> str:
    """Stable, strict JSON text."""
    return json.dumps(strict(report), indent=1, sort_keys=False, default=str, allow_nan=False) + "\n"


def summary(report: dict[str, Any], verbose: bool = False) -> str:
    """The terminal summary of a report."""
    lines = [f"{report['model']}: {report['nodes_before']} nodes -> {report['nodes_after']} nodes"]
    ops = report["ops"]
    if ops:
        lines.append(f"{'fused op type':<34} {'count':>5}  {'rule':<18} {'kernel':<9} dtypes")
        for op in ops:
            cols = "; ".join("/".join(sorted(set(c))) for c in op["dtype_columns"])
            lines.append(f"{op['op_type']:<34} {op['count']:>5}  {op['rule']:<18} {op['kernel']:<9} {cols}")
            if verbose:
                for inst in op["instances"]:
                    lines.append(f"    {inst['node']}: {', '.join(inst['source_nodes'])}")
    else:
        lines.append("nothing fused")
    own = report.get("kernels", {}).get("own_tiling")
    if own:
        lines.append(f"proven under asc-onnx's own Matmul tiling, not CANN's, which the device runs (no CANN sources: "
                     f"ASC_ONNX_CANN_SOURCE): {', '.join(own)}")
    near = report["near_misses"]
    if near:
        lines.append(f"near misses ({len(near)}):")
        for n in near if verbose else near[:10]:
            lines.append(f"  {n['rule']} at {n['node']!r}: {n['reason']}")
        if not verbose and len(near) > 10:
            lines.append(f"  ... {len(near) - 10} more (-v or report.json)")
    for sub in report.get("control_flow_bodies", []):
        lines.append(f"{sub['op']} {sub['node']!r} {sub['body']}: {sub['nodes']} nodes searched, "
                     f"{sub['fusions']} fused (the fused nodes stay inside it)")
    for note in report.get("atc", {}).get("notes", []):
        lines.append(f"atc: {note}")
    w = report.get("weights")
    if w:
        lines.append(f"weights: {w['files']} external-data file(s), {w['bytes'] / 2**20:.1f} MiB, by {w['method']}")
    return "\n".join(lines)
