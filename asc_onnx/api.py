"""The pipeline: load -> canonicalize -> match -> rewrite -> (package) -> verify.

:func:`inspect` runs the first three stages and writes nothing; :func:`fuse` runs all of
them and writes the output folder atomically; :func:`validate` compares a model with an
output folder's ``model.asc.onnx``.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import onnx
from onnx import ModelProto

from .canonicalize import CanonStats, canonicalize
from .errors import AscOnnxError, ValidationError
from .graph import main_opset, to_gs
from .load import LoadedModel, load
from .match import MatchResult, NearMiss, match
from .options import FuseOptions
from .output import check_target, copy_external, save_model, write_atomic
from .registry import load_rules, split_generic
from .report import build_report, to_json
from .rewrite import DOMAIN, FusedOp, RewriteResult, rewrite
from .validate import ValidationReport, validate_models

ASC_MODEL = "model.asc.onnx"
ATC_MODEL = "model.atc.onnx"
REPORT = "report.json"


@dataclass(frozen=True)
class Planned:
    """The model after load, canonicalize and match."""

    loaded: LoadedModel
    graph: Any
    canon: CanonStats
    matched: MatchResult
    nodes_before: int


@dataclass(frozen=True)
class InspectResult:
    """What would fuse, and the near misses; nothing written."""

    fusions: tuple[dict[str, Any], ...]
    near_misses: tuple[NearMiss, ...]
    nodes_before: int


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


def plan(model: str | os.PathLike | ModelProto, options: FuseOptions = FuseOptions()) -> Planned:
    """Load, canonicalize and match."""
    rules = load_rules(options.pattern_files, options.only, options.skip)
    loaded = load(model, options.shape_map)
    proto = loaded.model
    foreign = [(f.domain, f.name) for f in proto.functions if f.domain != DOMAIN]
    if foreign:  # exporter functions are inlined; our own fused ops stay opaque (re-fusing is a no-op)
        proto = onnx.inliner.inline_selected_functions(proto, foreign, exclude=False)
    graph = to_gs(proto)
    before = len(graph.nodes)
    canon = canonicalize(graph, main_opset(proto))
    named, generic = split_generic(rules)
    matched = match(graph, named, generic if options.generic else None)
    return Planned(loaded, graph, canon, matched, before)


def inspect(model: str | os.PathLike | ModelProto, options: FuseOptions = FuseOptions()) -> InspectResult:
    """What :func:`fuse` would fuse, with near misses; writes nothing."""
    p = plan(model, options)
    rows = tuple({"rule": f.rule, "op_name": f.op_name, "kernel": f.kernel,
                  "nodes": [n.name for n in f.nodes], "ops": [n.op for n in f.nodes]}
                 for f in p.matched.fusions)
    return InspectResult(rows, p.matched.near_misses, p.nodes_before)


def fuse(model: str | os.PathLike | ModelProto, out_dir: str | os.PathLike | None = None,
         options: FuseOptions = FuseOptions(), validate: bool = True, force: bool = False) -> FuseResult:
    """Fuse a model; with ``out_dir``, write the output folder (atomically).

    Raises:
        AscOnnxError: bad input (one clear message).
        ValidationError: the rewritten model does not match the original (the folder is
            still written, with the failed comparison in its report).
    """
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        check_target(out, force)
    p = plan(model, options)
    rewritten = rewrite(p.graph, p.loaded.model, p.matched.fusions, options.atc_domain_mode)
    name = p.loaded.source.name if p.loaded.source else (model.graph.name if isinstance(model, ModelProto) else "")
    state: dict[str, Any] = {"validation": None}

    def finish(folder: Path | None) -> dict[str, Any]:
        if validate:
            original = p.loaded.source if p.loaded.source is not None else p.loaded.model
            fused = folder / ASC_MODEL if folder is not None else rewritten.asc_model
            state["validation"] = validate_models(original, fused, options.shape_map, options.seed,
                                                  options.default_dim)
        return _report(name, p, rewritten, options, state["validation"])

    if out is None:
        report = finish(None)
    else:
        def fill(tmp: Path) -> None:
            if p.loaded.external_files:
                copy_external(p.loaded.external_files, p.loaded.base_dir, tmp)
            save_model(rewritten.asc_model, tmp / ASC_MODEL)
            if rewritten.atc_model is not None:
                save_model(rewritten.atc_model, tmp / ATC_MODEL)
            state["report"] = finish(tmp)
            (tmp / REPORT).write_text(to_json(state["report"]))

        write_atomic(out, force, fill)
        report = state["report"]
    result = FuseResult(out, rewritten.asc_model, rewritten.atc_model, rewritten.ops,
                        p.matched.near_misses, state["validation"], report)
    if result.validation is not None and not result.validation.ok:
        bad = [o.name for o in result.validation.outputs if not o.ok]
        raise ValidationError(f"validation failed: outputs {', '.join(bad)} differ beyond tolerance "
                              f"(see {out / REPORT if out else 'the report'})")
    return result


def _report(name: str, p: Planned, r: RewriteResult, options: FuseOptions,
            validation: ValidationReport | None) -> dict[str, Any]:
    atc = {"mode": options.atc_domain_mode, "written": r.atc_model is not None, "notes": list(r.atc_notes)}
    return build_report(name, p.nodes_before, len(r.asc_model.graph.node), r.ops, p.matched.near_misses,
                        asdict(p.canon), atc, validation)


def validate(model: str | os.PathLike, out_dir: str | os.PathLike,
             options: FuseOptions = FuseOptions()) -> ValidationReport:
    """Compare ``model`` with ``out_dir/model.asc.onnx`` on onnxruntime."""
    fused = Path(out_dir) / ASC_MODEL
    if not fused.is_file():
        raise AscOnnxError(f"{fused} does not exist; run `asc-onnx fuse` first")
    load(model)  # the same input checks as fuse
    return validate_models(model, fused, options.shape_map, options.seed, options.default_dim)
