"""The report: what fused (op types, counts, rules, source nodes), what nearly fused and why,
node counts, ATC notes and validation. ``report.json`` is deterministic (no timestamps), so
two runs on one model write byte-identical files."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from onnx import TensorProto

from .decide import REJECTED, Decision
from .kernels import of
from .match import NearMiss
from .options import FuseOptions
from .package import PackageResult
from .plan import Planned
from .prove import KernelProof
from .rewrite import FusedOp, RewriteResult
from .validate import ValidationReport
from .verify_deployed import DeployedReport


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
            "computed_in_op": list(op.derived),
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


def fuse_report(name: str, p: Planned, r: RewriteResult, pkg: PackageResult, options: FuseOptions,
                decision: Decision, proof: KernelProof, validation: ValidationReport | None,
                deployed: DeployedReport | None, estimates: dict[str, Any] | None,
                written: Mapping[str, Any]) -> dict[str, Any]:
    """A fuse run's report, from its stages' frozen results (``written``: how the weights reached the output, and
    why the whole-model rungs did not run, when they did not)."""
    atc = {"mode": options.atc_domain_mode, "soc": options.soc, "written": pkg.atc_model is not None,
           "notes": list(pkg.atc_notes)}
    report = build_report(name, p.nodes_before, len(r.asc_model.graph.node), r.ops, p.near_misses,
                          asdict(p.canon), atc, validation)
    report["source"] = str(p.loaded.source.resolve()) if p.loaded.source is not None else None
    report["input_shapes"] = {k: list(v) for k, v in options.input_shapes}  # what --input-shape gave
    report["weights"] = written.get("weights")  # how external-data files reached the output (reflink, copy, ...)
    report["whole_model"] = written.get("whole_model")  # why the whole-model rungs did not run, when they did not
    report["control_flow_bodies"] = list(p.subgraphs)
    report["decision"] = decision.record()  # every op type's status and why, and every declined region
    report["kernels"] = {
        "generated": [{"op_type": k.op.op_type, "entry": k.ir.snake, "files": sorted(k.files),
                       "input_kinds": of(k).input_kinds(k.ir), "schedule": of(k).schedule_record(k.ir)}
                      for k in pkg.kernels],
        "not_generated": [{"op_type": t, "reason": why} for t, why in pkg.skipped],  # not in the package, and why
        "emulated": [asdict(c) for c in proof.checks],
        # cube kernels proven under asc-onnx's own Matmul tiling, which the device never runs (no CANN sources)
        "own_tiling": sorted({c.op_type for c in proof.checks if c.tiling == "asc-onnx"}),
        "data_movement": [asdict(m) for m in proof.moves],
        "rejected": [{"op_type": t, "reason": why} for t, why in sorted(decision.of_status(REJECTED).items())],
    }
    report["deployed"] = None if deployed is None else {
        "ok": deployed.ok, "emulated_nodes": deployed.emulated_nodes, "error": deployed.error,
        "in_bodies": deployed.in_bodies, "blame": deployed.blame, "over_budget": deployed.over_budget,
        "requantized": deployed.requantized, "amplified": deployed.amplified, "node_error": deployed.node_error,
        "outputs": [asdict(o) for o in deployed.outputs]}
    report["estimates"] = estimates  # the timing model's figures (asc_onnx.estimate.record)
    report["atc"]["renamed_inputs"] = dict(pkg.atc_inputs)
    return report


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
