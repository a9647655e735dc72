"""The pipeline, one call per stage in the order the data flows: plan (:mod:`asc_onnx.plan`), prove
(:mod:`asc_onnx.prove`), judge (:mod:`asc_onnx.decide`), write (:mod:`asc_onnx.package`, :mod:`asc_onnx.output`,
:mod:`asc_onnx.report`).

:func:`inspect` plans and writes nothing; :func:`fuse` runs every stage and writes the output folder atomically;
:func:`emulate`, :func:`validate` and :func:`validate_kernels` prove an output folder again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
from onnx import ModelProto

from . import config, prove
from .atc_passes import NOT_APPLIED
from .decide import REJECTED, SLOWER, Decision, Estimates, decide
from .dims import DimRole
from .errors import AscOnnxError, ValidationError
from .estimate import bindings, model_nodes, static_shapes
from .graph import graph_work, kept_alive
from .kernels import of
from .load import LoadedModel, load
from .match import NearMiss
from .options import FuseOptions
from .output import check_target, place_external, save_model, staged, write_files
from .package import Generated, Kernel, assemble, generate, lower
from .plan import Planned, plan, rematch
from .prove import Inputs, KernelProof
from .report import fuse_report, to_json
from .report_html import render as render_html
from .rewrite import FusedOp, RewriteResult, ops_from_model, rewrite
from .soc import Soc, get_soc
from .validate import ValidationReport, input_value_hint, make_inputs, validate_models
from .verify_deployed import DeployedReport, verify_deployed
from .verify_kernels import KernelCheck, verify_kernels

ASC_MODEL = "model.asc.onnx"
ATC_MODEL = "model.atc.onnx"
REPORT = "report.json"
REPORT_HTML = "report.html"


@dataclass(frozen=True)
class InspectResult:
    """What would fuse, and the near misses; nothing written."""

    fusions: tuple[dict[str, Any], ...]
    near_misses: tuple[NearMiss, ...]
    nodes_before: int
    subgraphs: tuple[dict[str, Any], ...] = ()
    dims: tuple[DimRole, ...] = ()  # every dynamic input dim with its role and the values the judge sweeps it at


@dataclass(frozen=True)
class FuseResult:
    """Everything a fuse run produced."""

    out_dir: Path | None
    asc_model: ModelProto
    atc_model: ModelProto | None
    ops: tuple[FusedOp, ...]
    near_misses: tuple[NearMiss, ...]
    validation: ValidationReport | None
    report: dict[str, Any]
    kernels: tuple[Kernel, ...] = ()
    kernel_checks: tuple[KernelCheck, ...] = ()
    deployed: DeployedReport | None = None
    decision: Decision | None = None


def inspect(model: str | os.PathLike | ModelProto, options: FuseOptions = FuseOptions()) -> InspectResult:
    """What :func:`fuse` would fuse, with near misses; writes nothing."""
    p = plan(model, options)
    rows = tuple({"rule": f.rule, "op_name": f.op_name, "kernel": f.kernel,
                  "nodes": [n.name for n in f.nodes], "ops": [n.op for n in f.nodes]}
                 for f in p.fusions)
    return InspectResult(rows, p.near_misses, p.nodes_before, p.subgraphs, tuple(p.dims.values()))


def fuse(model: str | os.PathLike | ModelProto, out_dir: str | os.PathLike | None = None,
         options: FuseOptions = FuseOptions(), validate: bool = True, force: bool = False) -> FuseResult:
    """Fuse a model; with ``out_dir``, write the output folder (atomically).

    The stages run once each, in the order the data flows: plan, prove the kernels, judge (a frozen
    :class:`~asc_onnx.decide.Decision`; where it declines regions, one re-match and the new kernels proven and
    judged), then write the package of what ships, with the graph and deployed rungs on the written files.

    Raises:
        AscOnnxError: bad input (one clear message).
        ValidationError: the rewritten model does not match the original, or a kernel does not
            match its subgraph in the emulator (the folder is still written, with the failed
            comparison in its report).
    """
    out = Path(out_dir) if out_dir is not None else None
    source = None if isinstance(model, ModelProto) else Path(model)
    with _configured(options):
        if out is not None:
            check_target(out, force, [source] if source is not None else [])
        soc = get_soc(options.soc)
        with kept_alive(), contextlib.ExitStack() as stack:
            p = plan(model, options)
            # The staging folder is taken before the long stages: it is the lock against a second run.
            tmp = None if out is None else stack.enter_context(staged(out, force, _protected(p.loaded)))
            name = p.loaded.source.name if p.loaded.source else (model.graph.name if isinstance(model, ModelProto)
                                                                 else "")
            shared = prove.inputs(p, options, validate, name)
            p, rewritten, generated, proof, decision = _decided(p, shared, soc)
            result = _write(p, rewritten, generated, proof, decision, shared, soc, out, tmp, name)
    _raise_failures(result, out, options)
    return result


def _configured(options: FuseOptions):
    """The run's config (:mod:`asc_onnx.config`) held while it works: its options', else the process default."""
    return config.using(options.config or config.current())


def _candidates(p: Planned, soc: Soc, options: FuseOptions, earlier: Generated | None = None
                ) -> tuple[RewriteResult, Generated]:
    """The plan's fusions rewritten into the graph and every fused op's kernel rendered (those of ``earlier``
    kept)."""
    with graph_work():
        rewritten = rewrite(p.graph, p.loaded.model, p.matched.fusions, p.scopes)
        return rewritten, generate(rewritten, soc, options.atc_domain_mode, options.shape_map, p.loaded.symbolic,
                                   earlier)


def _decided(p: Planned, shared: Inputs, soc: Soc
             ) -> tuple[Planned, RewriteResult, Generated, KernelProof, Decision]:
    """Rewrite, prove and judge; where regions are declined, match once more without them and prove and judge
    what changed (a kernel identical to one already proven keeps its results)."""
    options = shared.options
    rewritten, generated = _candidates(p, soc, options)
    proof = prove.prove_kernels(generated.kernels, p, shared, soc)
    decision = decide(rewritten.ops, generated, proof.rejected(), p, soc, options, may_decline=True)
    if not decision.declined:
        return p, rewritten, generated, proof, decision
    rewritten.undo()  # the graphs as the plan left them, for the re-match (the first pass is never exported)
    p = rematch(p, options, dict(decision.declined))
    first = generated
    rewritten, generated = _candidates(p, soc, options, first)
    known = {k.op.op_type for k in generated.kernels if k is first.kernel(k.op.op_type)}
    fresh = prove.prove_kernels([k for k in generated.kernels if k.op.op_type not in known], p, shared, soc)
    kept = proof.of(known)
    proof = KernelProof(kept.checks + fresh.checks, kept.moves + fresh.moves)
    again = decide(rewritten.ops, generated, proof.rejected(), p, soc, options, may_decline=False)
    return p, rewritten, generated, proof, dataclasses.replace(again, declined=decision.declined)


def _write(p: Planned, rewritten: RewriteResult, generated: Generated, proof: KernelProof, decision: Decision,
           shared: Inputs, soc: Soc, out: Path | None, tmp: Path | None, name: str) -> FuseResult:
    """Assemble the package of what ships, write it into ``tmp`` (when given), run the graph and deployed rungs
    on what was written, and write the reports."""
    options = shared.options
    # The whole-model estimates (a second on a large model) are read by the report alone: they start here and,
    # on a large model, half of them run on the other core while the package is assembled and written.
    with Estimates(decision, rewritten, generated, p, soc, options) as pending:
        pkg = assemble(rewritten, generated, soc, options.atc_domain_mode, options.shape_map, decision.not_shipped())
        weights = None
        if tmp is not None:
            options.report("writing", 0, 0, str(out))
            if p.loaded.external_files:
                weights = place_external(p.loaded.external_files, p.loaded.base_dir, tmp, options.link_weights)
            save_model(rewritten.asc_model, tmp / ASC_MODEL)
            if pkg.atc_model is not None:
                save_model(pkg.atc_model, tmp / ATC_MODEL)
            write_files(tmp, pkg.files)
        est = pending.result()
    validation, deployed = prove.prove_models(shared, tmp, rewritten.asc_model, pkg, soc)
    report = fuse_report(name, p, rewritten, pkg, options, decision, proof, validation, deployed, est,
                         {"weights": weights, "whole_model": shared.whole_model})
    if tmp is not None:
        (tmp / REPORT).write_text(to_json(report))
        (tmp / REPORT_HTML).write_text(render_html(report, {op.op_type: op.function for op in rewritten.ops},
                                                   out.name if out is not None else "OUT"))
    return FuseResult(out, rewritten.asc_model, pkg.atc_model, rewritten.ops, p.near_misses, validation, report,
                      pkg.kernels, proof.checks, deployed, decision)


def estimate_model(model: str | os.PathLike | ModelProto, options: FuseOptions = FuseOptions()) -> dict[str, Any]:
    """What the model costs on ``options.soc`` (estimates; writes nothing): at each judged binding, every original
    node as ATC would run it (:func:`asc_onnx.estimate.model_nodes`), and the fused ops and the whole model as
    ``fuse`` judges them (its report's ``estimates``: the same figures)."""
    soc = get_soc(options.soc)
    original = load(model, options.shape_map, defer=True).model
    res = fuse(model, None, dataclasses.replace(options, emulate=False, judge=True), validate=False)
    est = res.report.get("estimates") or {}
    binds = [m["binding"] for m in est.get("model", [])] or bindings(original, options.shape_map)
    static = static_shapes(original, options.shape_map)
    return {"soc": soc.chip, "static": static,
            "bindings": [{"binding": b, "nodes": model_nodes(original, b, options.shape_map, soc, static)}
                         for b in binds],
            "estimates": est, "not_applied": dict(NOT_APPLIED)}


def _protected(loaded: LoadedModel) -> list[Path]:
    """The files a run reads, which its output folder may not hold."""
    if loaded.source is None:
        return []
    return [loaded.source] + [loaded.base_dir / rel for rel in loaded.external_files]


def _raise_failures(result: FuseResult, out: Path | None, options: FuseOptions) -> None:
    """Raise ValidationError for a failed rung, after the folder (with the failed comparison) is written."""
    where = out / REPORT if out else "the report"

    def hint() -> str:  # (walks the graph: only for a rung that failed)
        return "" if options.input_values else input_value_hint(result.asc_model)

    if result.validation is not None and not result.validation.ok:
        bad = [o.name for o in result.validation.outputs if not o.ok]
        raise ValidationError(f"validation failed: outputs {', '.join(bad)} differ beyond tolerance (see {where})"
                              f"{hint()}")
    if result.deployed is not None and not result.deployed.ok:
        raise ValidationError(f"the deployed model with its emulated kernels does not match the original: "
                              f"{result.deployed.why()} (see {where}){hint()}")
    failed = result.decision.of_status(REJECTED, SLOWER) if result.decision is not None else {}
    if failed and options.strict:
        raise ValidationError(f"--strict: kernels failed in the emulator, were refused by their tiling or were "
                              "estimated slower than the nodes they replace, and were not shipped: "
                              f"{', '.join(sorted(failed))} (see {where})")


def emulate(out_dir: str | os.PathLike, options: FuseOptions = FuseOptions(),
            model: str | os.PathLike | None = None) -> tuple[KernelCheck, ...]:
    """Run every kernel of ``out_dir/op_package`` in the emulator against onnxruntime on its function
    body: random inputs, and activations captured from the original model (from the report or ``model``)."""
    out = Path(out_dir)
    report, kernels = _load_kernels(out)
    options = _fuse_shapes(report, options)
    soc = get_soc(report.get("atc", {}).get("soc", options.soc))
    source = Path(model) if model is not None else Path(report.get("source") or "")
    feeds = None
    if source.is_file():
        feeds = make_inputs(onnx.load(str(source), load_external_data=False), options.shape_map, options.seed,
                            options.default_dim, options.value_map)
    checks, _ = verify_kernels(kernels, source if feeds is not None else None, feeds, soc, options.default_dim,
                               options.report)
    return checks


def _fuse_shapes(report: dict[str, Any], options: FuseOptions) -> FuseOptions:
    """Without ``--input-shape``, the input shapes the fuse run checked with (a traced export may run at its
    traced sizes only, which that run was told or found)."""
    used = (report.get("validation") or {}).get("input_shapes") or report.get("input_shapes") or {}
    if options.shape_map or not used:
        return options
    return dataclasses.replace(options, input_shapes=tuple((k, tuple(v)) for k, v in used.items()))


def _load_kernels(out: Path) -> tuple[dict[str, Any], list[Kernel]]:
    """The report and every generated kernel of an output folder, from the files on disk."""
    asc_path = out / ASC_MODEL
    if not asc_path.is_file():
        raise AscOnnxError(f"{asc_path} does not exist; run `asc-onnx fuse` first")
    report = json.loads((out / REPORT).read_text()) if (out / REPORT).is_file() else {}
    ops = {op.op_type: op for op in ops_from_model(onnx.load(str(asc_path), load_external_data=False))}
    kernels = []
    for entry in report.get("kernels", {}).get("generated", []):
        op = ops.get(entry["op_type"])
        if op is None:
            raise AscOnnxError(f"{entry['op_type']} is in the report but not in {asc_path}")
        files = {}
        for rel in entry["files"]:
            path = out / "op_package" / rel
            if not path.is_file():
                raise AscOnnxError(f"{path} is missing from the op package")
            files[rel] = path.read_text()
        ir = lower(op, kinds=entry.get("input_kinds"))
        if isinstance(entry.get("schedule"), dict):  # the schedule the files were rendered with
            ir = of(op.kernel).scheduled(ir, None, entry["schedule"])
        kernels.append(Kernel(op, ir, files))
    if not kernels:
        raise AscOnnxError(f"{out} has no generated kernels to emulate")
    return report, kernels


def validate_kernels(model: str | os.PathLike, out_dir: str | os.PathLike,
                     options: FuseOptions = FuseOptions()) -> DeployedReport:
    """Run ``out_dir/model.atc.onnx`` with every fused node executed by its emulated kernel (the files in
    ``out_dir/op_package``) and compare every output with ``model``'s."""
    out = Path(out_dir)
    report, kernels = _load_kernels(out)
    options = _fuse_shapes(report, options)
    atc = out / ATC_MODEL
    if not atc.is_file():
        raise AscOnnxError(f"{atc} does not exist")
    loaded = load(model, shapes=False)  # the same input checks as fuse; only its inputs are fed
    soc = get_soc(report.get("atc", {}).get("soc", options.soc))
    feeds = make_inputs(loaded.model, options.shape_map, options.seed, options.default_dim, options.value_map)
    return verify_deployed(model, atc, kernels, soc, report.get("atc", {}).get("renamed_inputs", {}),
                           options.shape_map, options.seed, options.default_dim, feeds=feeds)


def validate(model: str | os.PathLike, out_dir: str | os.PathLike,
             options: FuseOptions = FuseOptions()) -> ValidationReport:
    """Compare ``model`` with ``out_dir/model.asc.onnx`` on onnxruntime."""
    fused = Path(out_dir) / ASC_MODEL
    if not fused.is_file():
        raise AscOnnxError(f"{fused} does not exist; run `asc-onnx fuse` first")
    loaded = load(model, shapes=False)  # the same input checks as fuse; only its inputs are fed
    feeds = make_inputs(loaded.model, options.shape_map, options.seed, options.default_dim, options.value_map)
    return validate_models(model, fused, options.shape_map, options.seed, options.default_dim, feeds=feeds)
