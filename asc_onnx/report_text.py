"""Everything a fuse run prints, from its report alone (``report.json`` holds the same): the summary, the kernel
rung's table, the data movement, the timing model's lines and the rungs' verdicts; warnings apart, for stderr."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from .estimate import label
from .verify_kernels import KernelCheck


def fuse_text(report: Mapping[str, Any], verbose: bool, out: str) -> tuple[list[str], list[str]]:
    """A fuse run's terminal output: (lines for stdout, warnings for stderr)."""
    lines, warnings = [summary(report, verbose)], []
    kern = report.get("kernels", {})
    if kern.get("emulated"):
        lines.append(table([KernelCheck(**{**c, "max_abs": float(c["max_abs"]), "max_rel": float(c["max_rel"])})
                            for c in kern["emulated"]]))
    for m in kern.get("data_movement", []):
        if m["fused"] and m["compulsory"]:
            lines.append(
                f"  {m['op_type']}: GM bytes fused {m['fused']}, unfused {m['unfused']}, "
                f"compulsory {m['compulsory']} ({m['fused'] / m['compulsory']:.2f}x minimum, "
                f"{m['unfused'] / m['fused']:.1f}x less than unfused), "
                f"{m.get('vec_per_elem', 0):.2f} vector passes per element"
                + (f"; tiling minimum {m['tiling_min']} ({m['fused'] / m['tiling_min']:.2f}x), C staging "
                   f"{m['staging']}, {m['cube_macs']} cube MACs" if m.get("tiling_min") else ""))
    for miss in kern.get("not_generated", []):
        lines.append(f"  no kernel for {miss['op_type']}: {miss['reason']} (kept as original nodes in model.atc.onnx)")
    if "hard link" in (report.get("weights") or {}).get("method", ""):
        warnings.append("warning: the output's weight files are hard links of the input's (--link-weights): "
                        "onnx.load and onnx.checker refuse external data with more than one link ('potential "
                        "hardlink attack') until one side is deleted; onnxruntime reads them")
    for rej in kern.get("rejected", []):
        warnings.append(f"warning: {rej['op_type']} not shipped: {rej['reason']}")
    est = report.get("estimates") or {}
    for op in est.get("ops", []):
        if op["judged_slower"] or op.get("not_judged"):
            warnings.append(f"warning: {op['op_type']} "
                            + ("shipped anyway (--keep-slower): " if op["shipped"] else "not shipped: ")
                            + op["reason"])
    if est.get("model"):
        lines.append(estimate_lines(est))
    if report.get("whole_model"):
        lines.append(f"whole-model checks {report['whole_model']}")
    dep = report.get("deployed")
    if dep:
        dep_err = max((float(o["max_abs"]) for o in dep["outputs"]), default=0.0)
        lines.append(
            f"deployed model ({'ok' if dep['ok'] else 'FAILED'}): model.atc.onnx with {dep['emulated_nodes']} "
            f"fused nodes run by their emulated kernels"
            + (f" ({dep['in_bodies']} inside control-flow bodies ran as their function bodies)"
               if dep.get("in_bodies") else "")
            + (f" ({dep['over_budget']} matmul nodes over the emulation budget ran as their function bodies; "
               "their kernels were emulated at reduced K and N)" if dep.get("over_budget") else "")
            + f", {len(dep['outputs'])} outputs compared, "
            f"max abs error {dep_err:.3e}" + (f": {dep['error']}" if dep["error"] else "")
            + (f"; {dep['requantized']}" if dep.get("requantized") else "")
            + (f"; {dep['amplified']}" if dep.get("amplified") else "")
            + (f"; {dep['node_error']}" if dep.get("node_error") else ""))
    val = report.get("validation")
    if val:
        lines.append(f"validation ({'ok' if val['ok'] else 'FAILED'}): {len(val['outputs'])} outputs compared, "
                     f"max abs error {max((float(o['max_abs']) for o in val['outputs']), default=0.0):.3e}"
                     + (f" ({val['note']})" if val.get("note") else ""))
    lines.append(f"wrote {out}/ (report.html shows what fused)")
    if kern.get("generated"):
        lines.append(f"next, on a machine with CANN: asc-onnx build {shlex.quote(out)} && "
                     f"asc-onnx convert {shlex.quote(out)}")
    return lines, warnings


def summary(report: dict[str, Any], verbose: bool = False) -> str:
    """The terminal summary of a report."""
    lines = [f"{report['model']}: {report['nodes_before']} nodes -> {report['nodes_after']} nodes"]
    ops = report["ops"]
    if ops:
        lines.append(f"{'fused op type':<34} {'count':>5}  {'rule':<18} {'kernel':<9} dtypes")
        for op in ops:
            cols = "; ".join("/".join(sorted(set(c))) for c in op["dtype_columns"])
            built = op.get("computed_in_op")
            note = f"  ({', '.join(built)} computed in the op, not read)" if built else ""
            lines.append(f"{op['op_type']:<34} {op['count']:>5}  {op['rule']:<18} {op['kernel']:<9} {cols}{note}")
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


def table(checks: Sequence[KernelCheck]) -> str:
    """The emulate table: op, inputs, shape, dtype, max error, GM bytes, blocks, the timing model's estimate of the
    kernel at that shape (no launch; an estimate), verdict."""
    rows = [f"{'op':<28} {'inputs':<9} {'shape':<20} {'dtype':<6} {'max abs err':>11} {'GM bytes':>10} "
            f"{'blocks':>6} {'est. us':>8}  verdict"]
    for c in checks:
        verdict = "ok" if c.ok else ("FAULT " + (c.error or "")[:120] if c.error else "MISMATCH")
        whose = f"  ({c.tiling} Matmul tiling)" if c.tiling else ""
        rows.append(f"{c.op_type[:28]:<28} {c.inputs:<9} {str(list(c.shape))[:20]:<20} {c.dtype:<6} "
                    f"{c.max_abs:>11.3e} {c.gm_bytes:>10} {c.block_dim:>6} {c.est_us:>8.2f}  {verdict}{whose}")
    return "\n".join(rows)


def estimate_lines(est: Mapping[str, Any]) -> str:
    """The CLI's lines: each op's estimates at the judged shapes, and the whole model's."""
    out = []
    for op in est.get("ops", []):
        for e in op["estimates"]:
            if e["error"]:
                continue
            w = next((x for x in op.get("slow_corner", []) if x["binding"] == e["binding"]
                      and x["shapes"] == e["shapes"]), e)
            ratio = w["unfused_us"] / max(w["fused_us"], 1e-9)
            table = e["unfused_us"] / max(e["fused_us"], 1e-9)
            out.append(f"  {op['op_type']} at {label(e['binding'])}: est. {ratio:.2f}x at the slow corner, "
                       f"{table:.2f}x at the table values "
                       f"({e['fused_us']:.1f} us fused, {e['efficiency']:.0%} of its bound, "
                       f"{e['bottleneck'] or '-'}-bound, against {e['unfused_us']:.1f} us as ATC would run it)"
                       + ("" if op["shipped"] else " (not shipped)"))
    for m in est.get("model", []):
        w = m.get("slow_corner", m)
        out.append(f"model at {label(m['binding'])}: est. {w['unfused_us'] / max(w['fused_us'], 1e-9):.2f}x at the "
                   f"slow corner ({w['fused_us']:.1f} us fused against {w['unfused_us']:.1f} us unfused as ATC would "
                   f"run it), {m['unfused_us'] / max(m['fused_us'], 1e-9):.2f}x at the table values "
                   f"({m['fused_us']:.1f} against {m['unfused_us']:.1f} us)"
                   + (f"; {m['unsized_nodes']} nodes unsized" if m["unsized_nodes"] else ""))
    return "\n".join(out)
