"""Stage 1, plan: load the model, canonicalize it and match the rules, in the main graph and in every
control-flow body. The canonical graph is kept, so a plan can be matched again (:func:`rematch`) without loading,
inferring or canonicalizing anything again."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx.inliner
from onnx import ModelProto

from . import config
from .canonicalize import CanonStats, canonicalize
from .dims import DimRole, roles
from .graph import graph_work, main_opset, refine_shapes, to_gs
from .load import LoadedModel, apply_value_info, load
from .match import MatchResult, NearMiss, match
from .options import FuseOptions
from .registry import load_rules, split_generic
from .rewrite import DOMAIN


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



def plan(model: str | os.PathLike | ModelProto, options: FuseOptions = FuseOptions(),
         declined: dict[tuple[str, str], str] | None = None) -> Planned:
    """Load, canonicalize and match; ``declined`` (see :func:`asc_onnx.match.match`) keeps the regions of ops
    that were not shipped for the smaller fusions inside them (:func:`rematch` does that on a plan)."""
    with config.using(options.config or config.current()), graph_work():
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
