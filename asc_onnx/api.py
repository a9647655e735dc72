"""The pipeline: load -> canonicalize -> match -> rewrite -> (package) -> verify.

:func:`inspect` runs the first three stages and writes nothing; :func:`fuse` runs all of
them and writes the output folder atomically; :func:`validate` compares a model with an
output folder's ``model.asc.onnx``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.inliner
from onnx import ModelProto

from . import config
from .atc_passes import NOT_APPLIED
from .canonicalize import CanonStats, canonicalize
from .dims import DimRole, roles
from .errors import AscOnnxError, ValidationError
from .estimate import bindings, estimate_at, judge, label, model_nodes, model_time, record, static_shapes
from .graph import graph_work, kept_alive, main_opset, refine_shapes, to_gs
from .hardware import corner
from .kernels import of
from .load import LoadedModel, apply_value_info, load
from .match import MatchResult, NearMiss, match
from .options import FuseOptions
from .output import check_target, place_external, save_model, staged, write_files
from .package import Kernel, PackageResult, lower, package
from .registry import load_rules, split_generic
from .report import build_report, to_json
from .report_html import render as render_html
from .rewrite import DOMAIN, FusedOp, RewriteResult, ops_from_model, rewrite
from .soc import get_soc
from .validate import ValidationReport, input_value_hint, make_inputs, validate_models
from .validate import run as run_model
from .verify_deployed import DeployedReport, verify_deployed
from .verify_kernels import KernelCheck, body_model, verify_kernels, verify_regions

ASC_MODEL = "model.asc.onnx"
ATC_MODEL = "model.atc.onnx"
REPORT = "report.json"
REPORT_HTML = "report.html"


@dataclass(frozen=True)
class Planned:
    """The model after load, canonicalize and match."""

    loaded: LoadedModel
    graph: Any
    canon: CanonStats
    matched: MatchResult
    nodes_before: int
    subgraphs: tuple[dict[str, Any], ...] = ()
    scopes: tuple[tuple[Any, MatchResult], ...] = ()  # (control-flow body graph, its matches)
    dims: Mapping[str, DimRole] = field(default_factory=dict)  # the dynamic input dims' roles (asc_onnx.dims)

    @property
    def fusions(self) -> tuple[Any, ...]:
        """Every fusion: the main graph's, then each control-flow body's."""
        return self.matched.fusions + tuple(f for _, m in self.scopes for f in m.fusions)

    @property
    def near_misses(self) -> tuple[NearMiss, ...]:
        return self.matched.near_misses + tuple(n for _, m in self.scopes for n in m.near_misses)


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


def plan(model: str | os.PathLike | ModelProto, options: FuseOptions = FuseOptions(),
         declined: dict[tuple[str, str], str] | None = None) -> Planned:
    """Load, canonicalize and match; ``declined`` (see :func:`asc_onnx.match.match`) keeps the regions of ops
    that were not shipped for the smaller fusions inside them (:func:`rematch` does that on a plan)."""
    with _configured(options), graph_work():
        return _plan(model, options, declined)


def _plan(model: str | os.PathLike | ModelProto, options: FuseOptions,
          declined: dict[tuple[str, str], str] | None = None) -> Planned:
    rules = load_rules(options.pattern_files, options.only, options.skip)
    options.report("loading and inferring shapes")
    loaded = load(model, options.shape_map, defer=True)
    proto = loaded.model
    foreign = [(f.domain, f.name) for f in proto.functions if f.domain != DOMAIN]
    if foreign:  # exporter functions are inlined; our own fused ops stay opaque (re-fusing is a no-op)
        proto = onnx.inliner.inline_selected_functions(proto, foreign, exclude=False)
    try:  # the import overlaps symbolic shape inference, which runs in a child process
        graph = to_gs(proto)
    except BaseException:  # an error or a signal: stop the child at once
        if loaded.pending is not None:
            loaded.pending.cancel()
        raise
    richer = loaded.pending.result() if loaded.pending is not None else None
    if richer is not None:
        apply_value_info(loaded.model, list(richer.graph.value_info))
        refine_shapes(graph, richer.graph.value_info)
    before = len(graph.nodes)
    opset = main_opset(proto)
    canon = canonicalize(graph, opset)
    named, generic = split_generic(rules)
    passes = generic if options.generic else ()
    options.report("matching", 0, 0, f"{before} nodes, {len(rules)} rules")
    matched = match(graph, named, passes, declined)
    # Control-flow bodies (If branches, Loop and Scan bodies, nested ones too) are fused like graphs: their
    # fused nodes stay inside them, so both output models keep the control flow.
    scopes, bodies = [], []
    for owner, attr, body in control_flow_bodies(graph):
        canonicalize(body, opset)
        found = match(body, named, passes, declined)
        scopes.append((body, found))
        bodies.append({"node": owner.name, "op": owner.op, "body": attr, "nodes": len(body.nodes),
                       "fusions": len(found.fusions)})
    return Planned(loaded, graph, canon, matched, before, tuple(bodies), tuple(scopes), roles(loaded.model))


def rematch(p: Planned, options: FuseOptions, declined: dict[tuple[str, str], str]) -> Planned:
    """``p`` matched again, with ``declined``: the same canonical graph and control-flow bodies (the rewrite that
    declined ops put them back), nothing loaded, inferred or canonicalized again."""
    rules = load_rules(options.pattern_files, options.only, options.skip)
    named, generic = split_generic(rules)
    passes = generic if options.generic else ()
    with graph_work():
        matched = match(p.graph, named, passes, declined)
        scopes = tuple((body, match(body, named, passes, declined)) for body, _ in p.scopes)
    bodies = tuple({**info, "fusions": len(found.fusions)} for info, (_, found) in zip(p.subgraphs, scopes))
    return dataclasses.replace(p, matched=matched, scopes=scopes, subgraphs=bodies)


def control_flow_bodies(graph: Any):
    """``(owner node, attribute, body graph)`` of every If/Loop/Scan body under ``graph``, outer ones first."""
    import onnx_graphsurgeon as gs

    for node in graph.nodes:
        for attr, value in node.attrs.items():
            for body in value if isinstance(value, list) else [value]:
                if isinstance(body, gs.Graph):
                    yield node, attr, body
                    yield from control_flow_bodies(body)


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
        p = plan(model, options)
        with kept_alive():
            return _fuse_staged(p, model, out, soc, options, validate, force)


def _configured(options: FuseOptions):
    """The run's config (:mod:`asc_onnx.config`) held while it works: its options', else the process default."""
    return config.using(options.config or config.current())


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


class _DeclinedError(Exception):
    """Ops of a class with smaller fallbacks (attention) will not ship: the model is matched again without
    their regions, which keep the smaller fusions inside them (``declined`` as :func:`plan` takes it)."""

    def __init__(self, declined: dict[tuple[str, str], str]) -> None:
        super().__init__(f"{len(declined)} regions declined")
        self.declined = declined


def _decline(ops: Any, not_shipped: dict[str, str]) -> None:
    """Raise :class:`_DeclinedError` when an op of a class with fallbacks is in ``not_shipped`` (op type -> why)."""
    declined = {(op.rule, inst.outputs[0]): f"the fused op {op.op_type} is not shipped ({not_shipped[op.op_type]})"
                f"; the region keeps its smaller fusions"
                for op in ops if op.op_type in not_shipped and of(op.kernel).fallback for inst in op.instances}
    if declined:
        raise _DeclinedError(declined)


def _fuse_staged(p: Planned, model: str | os.PathLike | ModelProto, out: Path | None, soc: Any,
                 options: FuseOptions, validate: bool, force: bool) -> FuseResult:
    with contextlib.ExitStack() as stack:
        # The staging folder is taken before the long stages: it is the lock against a second run.
        tmp = None if out is None else stack.enter_context(staged(out, force, _protected(p.loaded)))
        declined: dict[tuple[str, str], str] = {}
        while True:
            try:
                result, rejected = _fuse_planned(p, model, out, tmp, soc, options, validate)
                break
            except _DeclinedError as d:  # nothing was written yet: match again without those regions
                declined.update(d.declined)
                p = rematch(p, options, declined)
    _raise_failures(result, rejected, out, options)
    return result


def _protected(loaded: LoadedModel) -> list[Path]:
    """The files a run reads, which its output folder may not hold."""
    if loaded.source is None:
        return []
    return [loaded.source] + [loaded.base_dir / rel for rel in loaded.external_files]


def _fuse_planned(p: Planned, model: str | os.PathLike | ModelProto, out: Path | None, tmp: Path | None, soc: Any,
                  options: FuseOptions, validate: bool) -> tuple[FuseResult, dict[str, str]]:
    """Rewrite, package and verify a planned model; write into ``tmp`` when given. Where ops are declined, the
    graphs are put back as the plan left them before the error goes up, for the re-match."""
    with graph_work():
        rewritten = rewrite(p.graph, p.loaded.model, p.matched.fusions, options.atc_domain_mode, p.scopes)
    try:
        return _fuse_rewritten(p, rewritten, model, out, tmp, soc, options, validate)
    except _DeclinedError:
        if rewritten.undo is not None:
            rewritten.undo()
        raise


def _fuse_rewritten(p: Planned, rewritten: RewriteResult, model: str | os.PathLike | ModelProto, out: Path | None,
                    tmp: Path | None, soc: Any, options: FuseOptions,
                    validate: bool) -> tuple[FuseResult, dict[str, str]]:
    with graph_work():
        pkg = package(rewritten, soc, options.atc_domain_mode, options.shape_map, None, p.loaded.symbolic)
    _decline(rewritten.ops, dict(pkg.skipped))
    name = p.loaded.source.name if p.loaded.source else (model.graph.name if isinstance(model, ModelProto) else "")
    original = p.loaded.source if p.loaded.source is not None else p.loaded.model
    state: dict[str, Any] = {"validation": None, "checks": (), "moves": (), "rejected": {}, "deployed": None}
    weights = _weight_bytes(p.loaded)
    whole = weights <= options.memory_budget or not (validate or options.emulate)
    if not whole:
        # Every whole-model run loads every weight into one onnxruntime session: over the budget, the ops are
        # proven one by one (the kernel rung, on random inputs) and the report says which rungs did not run.
        state["whole_model"] = (f"not run: {weights / 2**30:.1f} GiB of weights exceed the "
                                f"{options.memory_budget / 2**30:.1f} GiB memory budget (--memory-budget); the graph "
                                "and deployed rungs and the captured activations were skipped; each fused op is "
                                "proven on random inputs by the kernel rung, and each fused node with weights on its "
                                "own weights against the same region of the original")
        validate = False
    # One set of seeded inputs for the kernel, graph and deployed rungs (none when nothing runs).
    feeds: dict[str, Any] = {}
    ref = None
    if validate:
        options, feeds, ref = choose_inputs(p.loaded.model, original, options, name)
    elif options.emulate and pkg.kernels:  # no run of the original here: its weights may be big
        feeds = make_inputs(p.loaded.model, options.shape_map, options.seed, options.default_dim, options.value_map)
    if options.emulate and pkg.kernels:
        # The kernel rung runs before anything is written: a kernel the emulator rejects never ships.
        state["checks"], state["moves"] = verify_kernels(pkg.kernels, original if whole else None, feeds, soc,
                                                         options.default_dim, options.report)
        if not whole:  # each fused region with its own weights, one region in memory at a time
            state["checks"] += verify_regions(pkg.kernels, p.loaded.model, p.loaded.base_dir, soc,
                                              options.default_dim, options.report)
        rejected = {c.op_type: _not_shipped(c) for c in state["checks"] if not c.ok}
        _decline(rewritten.ops, rejected)
        if rejected:
            state["rejected"] = rejected
            pkg = package(rewritten, soc, options.atc_domain_mode, options.shape_map, rejected, p.loaded.symbolic)
    if pkg.kernels and options.judge:
        # The timing model judges every op the emulator accepted (for timing only, so under --no-emulate too):
        # one it estimates slower than its unfused nodes goes back to them, unless --keep-slower.
        options.report("estimating")
        judged = list(pkg.kernels)
        binds = bindings(p.loaded.model, options.shape_map, p.dims)
        judgements = judge(judged, p.loaded.model, options.shape_map, soc, report=options.report, binds=binds)
        slower = {j.op_type: j.reason() for j in judgements if not j.ship}
        slower.update(_no_faster_than_smaller(judgements, judged, soc))
        if not options.keep_slower:
            _decline(rewritten.ops, slower)
        if slower and not options.keep_slower:
            state["slower"] = slower
            pkg = package(rewritten, soc, options.atc_domain_mode, options.shape_map,
                          {**state["rejected"], **slower}, p.loaded.symbolic)
        shipped = {k.op.op_type for k in pkg.kernels}
        static = static_shapes(p.loaded.model, options.shape_map)
        models = [model_time(rewritten.asc_model, judgements, judged, shipped, b, options.shape_map, soc, static)
                  for b in binds]
        state["estimates"] = record(judgements, shipped, options.keep_slower, models)

    def finish(folder: Path | None) -> dict[str, Any]:
        if validate:
            # One run of the original on the seeded inputs serves the graph and the deployed rungs.
            fused = folder / ASC_MODEL if folder is not None else rewritten.asc_model
            options.report("validating the rewritten model on onnxruntime")
            state["validation"] = validate_models(original, fused, options.shape_map, options.seed,
                                                  options.default_dim, ref, feeds)
            if options.emulate and pkg.kernels and pkg.atc_model is not None:
                deployed = folder / ATC_MODEL if folder is not None else pkg.atc_model
                options.report("running the ATC model with the emulated kernels")
                state["deployed"] = verify_deployed(original, deployed, pkg.kernels, soc, pkg.atc_inputs,
                                                    options.shape_map, options.seed, options.default_dim, ref,
                                                    feeds)
        return _report(name, p, rewritten, pkg, options, state)

    if tmp is None:
        report = finish(None)
    else:
        options.report("writing", 0, 0, str(out))
        if p.loaded.external_files:
            state["weights"] = place_external(p.loaded.external_files, p.loaded.base_dir, tmp, options.link_weights)
        save_model(rewritten.asc_model, tmp / ASC_MODEL)
        if pkg.atc_model is not None:
            save_model(pkg.atc_model, tmp / ATC_MODEL)
        write_files(tmp, pkg.files)
        report = finish(tmp)
        (tmp / REPORT).write_text(to_json(report))
        (tmp / REPORT_HTML).write_text(render_html(report, {op.op_type: op.function for op in rewritten.ops},
                                                   out.name if out is not None else "OUT"))
    result = FuseResult(out, rewritten.asc_model, pkg.atc_model, rewritten.ops, p.near_misses,
                        state["validation"], report, pkg.kernels, state["checks"], state["deployed"])
    return result, {**state["rejected"], **state.get("slower", {})}


def _no_faster_than_smaller(judgements: Any, kernels: Any, soc: Any) -> dict[str, str]:
    """Ops of a class with fallbacks (attention) that the timing model finds no faster than the smaller fusions
    their region keeps without them (what the model would run instead), at some judged shape with every assumption
    at its slow end: op type -> why. Beating the unfused nodes is not enough for such an op."""
    by_type = {k.op.op_type: k for k in kernels}
    slow = corner(soc.chip, slow=True)
    out: dict[str, str] = {}
    for j in judgements:
        k = by_type.get(j.op_type)
        if k is None or not of(k).fallback or not j.ship:
            continue
        for e, w in zip(j.estimates, j.slow):
            smaller = _smaller_kernels(k, e.shapes, soc)
            if smaller is None:
                continue
            slow_us = _smaller_us(smaller, w, slow, soc)
            if w.fused_us >= slow_us:
                out[j.op_type] = (f"the timing model estimates it no faster than the smaller fusions of its region at "
                                  f"{label(e.binding)}: {w.fused_us:.1f} us fused against {slow_us:.1f} us with every "
                                  f"assumption at its slow end ({e.fused_us:.1f} against "
                                  f"{_smaller_us(smaller, e, None, soc):.1f} us at the table's values; estimates)")
                break
    return out


def _smaller_kernels(k: Kernel, shapes: Any, soc: Any) -> list[tuple[Kernel, list[list[int]]]] | None:
    """The smaller fusions ``k``'s region keeps without ``k``, each instance with its input shapes, for inputs of
    ``shapes``: the op's body fused with ``k``'s rule skipped (no emulation, no estimates); None if it cannot be."""
    body = onnx.inliner.inline_local_functions(body_model(k.op, [k.ir.dtypes[0]]))
    for vi, shape in zip(body.graph.input, shapes):
        vi.type.tensor_type.shape.CopyFrom(onnx.helper.make_tensor_type_proto(k.ir.dtypes[0], shape).tensor_type.shape)
    options = FuseOptions(soc=soc.name, emulate=False, judge=False, skip=frozenset({k.op.rule}))
    try:  # matched and packaged, not a whole fuse: nothing of the body is proven, judged or written
        p = plan(body, options)
        with graph_work():
            rewritten = rewrite(p.graph, p.loaded.model, p.matched.fusions, options.atc_domain_mode, p.scopes)
            kernels = package(rewritten, soc, options.atc_domain_mode, options.shape_map, None,
                              p.loaded.symbolic).kernels
    except AscOnnxError:
        return None
    return [(s, [list(map(int, x or ())) for x in inst.input_shapes]) for s in kernels for inst in s.op.instances]


def _smaller_us(smaller: list[tuple[Kernel, list[list[int]]]], e: Any, overrides: dict[str, float] | None,
                soc: Any) -> float:
    """The estimate of a region as the model runs it with its ``smaller`` fusions (each at the better of its fused
    and unfused estimates) and the rest of its nodes unfused, from estimate ``e`` of the whole op at the same
    shapes and assumptions (whose unfused nodes are costed alike)."""
    total = e.unfused_us
    for s, shapes in smaller:
        est = estimate_at(s, shapes, soc, overrides)
        if est.error is None:
            total -= est.unfused_us - min(est.fused_us, est.unfused_us)
    return total


def _weight_bytes(loaded: LoadedModel) -> int:
    """Bytes of the model's weights: initializers held in the file, and its external-data files."""
    inline = sum(len(t.raw_data) or onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize * int(
        np.prod(t.dims, dtype=np.int64)) for t in loaded.model.graph.initializer if not t.external_data)
    files = sum((loaded.base_dir / f).stat().st_size for f in loaded.external_files) if loaded.base_dir else 0
    return int(inline) + files


def _not_shipped(c: KernelCheck) -> str:
    """Why a kernel does not ship, from its first failed check: its host tiling refused a shape the model
    has (a stated limit), or the kernel failed in the emulator (a fault, or an error beyond tolerance)."""
    if c.refused:
        return f"its host tiling refuses {list(c.shape)} {c.dtype} ({c.error})"
    return "its kernel failed in the emulator (" + (
        c.error or f"max abs error {c.max_abs:.3e} beyond the {c.dtype} tolerance") + ")"


#: Dynamic dims tried, in order, after ``FuseOptions.default_dim``: small dims keep the checks fast, but a
#: detector's Resize or a stride-32 backbone needs larger ones.
RETRY_DIMS = (32, 64)


def choose_inputs(model: ModelProto, original: str | os.PathLike | ModelProto, options: FuseOptions,
                  name: str) -> tuple[FuseOptions, dict[str, Any], dict[str, Any]]:
    """The seeded inputs every rung shares and the original's outputs on them.

    Dynamic dims the user did not give start at ``options.default_dim``; when onnxruntime cannot run the
    model on those, larger ones are tried before asking for ``--input-shape`` with the dims that failed.
    The options come back with the dim that worked."""
    given = options.shape_map
    dynamic = {vi.name: vi.type.tensor_type.shape for vi in model.graph.input
               if vi.name not in given and vi.name not in {i.name for i in model.graph.initializer}
               and any(not d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)}
    tried: list[str] = []
    for dim in (options.default_dim, *(d for d in RETRY_DIMS if d > options.default_dim)):
        feeds = make_inputs(model, given, options.seed, dim, options.value_map)
        try:
            return dataclasses.replace(options, default_dim=dim), feeds, run_model(original, feeds)
        except AscOnnxError as exc:
            shapes = ", ".join(f"{k}: {list(feeds[k].shape)}" for k in dynamic if k in feeds)
            tried.append(f"{shapes}" if shapes else "its static shapes")
            first = str(exc)
            if not dynamic:
                raise AscOnnxError(f"{exc}{input_value_hint(model)}") from None
    hint = " ".join(f"--input-shape {k}:" + ",".join(str(d.dim_value) if d.HasField("dim_value") else
                                                   (d.dim_param or "?") for d in shape.dim)
                    for k, shape in dynamic.items())
    raise AscOnnxError(f"{name or 'the model'} does not run on random inputs with its dynamic dims set to "
                       f"{' or '.join(tried)} ({first}); give the real dims with {hint}{input_value_hint(model)}")


def _raise_failures(result: FuseResult, rejected: dict[str, str], out: Path | None, options: FuseOptions) -> None:
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
    if rejected and options.strict:
        raise ValidationError(f"--strict: kernels failed in the emulator, were refused by their tiling or were "
                              "estimated slower than the nodes they replace, and were not shipped: "
                              f"{', '.join(sorted(rejected))} (see {where})")


def _report(name: str, p: Planned, r: RewriteResult, pkg: PackageResult, options: FuseOptions,
            state: dict[str, Any]) -> dict[str, Any]:
    atc = {"mode": options.atc_domain_mode, "soc": options.soc, "written": pkg.atc_model is not None,
           "notes": list(pkg.atc_notes)}
    report = build_report(name, p.nodes_before, len(r.asc_model.graph.node), r.ops, p.near_misses,
                          asdict(p.canon), atc, state["validation"])
    report["source"] = str(p.loaded.source.resolve()) if p.loaded.source is not None else None
    report["input_shapes"] = {k: list(v) for k, v in options.input_shapes}  # what --input-shape gave
    report["weights"] = state.get("weights")  # how external-data files reached the output (reflink, copy, ...)
    report["whole_model"] = state.get("whole_model")  # why the whole-model rungs did not run, when they did not
    report["control_flow_bodies"] = list(p.subgraphs)
    report["kernels"] = {
        "generated": [{"op_type": k.op.op_type, "entry": k.ir.snake, "files": sorted(k.files),
                       "input_kinds": of(k).input_kinds(k.ir), "schedule": of(k).schedule_record(k.ir)}
                      for k in pkg.kernels],
        "not_generated": [{"op_type": t, "reason": why} for t, why in pkg.skipped],
        "emulated": [asdict(c) for c in state["checks"]],
        # cube kernels proven under asc-onnx's own Matmul tiling, which the device never runs (no CANN sources)
        "own_tiling": sorted({c.op_type for c in state["checks"] if c.tiling == "asc-onnx"}),
        "data_movement": [asdict(m) for m in state["moves"]],
        "rejected": [{"op_type": t, "reason": why} for t, why in sorted(state["rejected"].items())],
    }
    d = state["deployed"]
    report["deployed"] = None if d is None else {
        "ok": d.ok, "emulated_nodes": d.emulated_nodes, "error": d.error, "in_bodies": d.in_bodies, "blame": d.blame,
        "over_budget": d.over_budget, "requantized": d.requantized, "amplified": d.amplified,
        "node_error": d.node_error, "outputs": [asdict(o) for o in d.outputs]}
    report["estimates"] = state.get("estimates")  # the timing model's figures (asc_onnx.estimate.record)
    report["atc"]["renamed_inputs"] = dict(pkg.atc_inputs)
    return report


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
