"""Stage 3, judge: which fused ops ship, as one frozen :class:`Decision`.

An op ships when it has a kernel, the emulator accepted it (the kernel rung) and the timing model estimates it
faster than the nodes it replaces with every assumption at its slow end (:func:`asc_onnx.estimate.judge`); an op of
a class with smaller fallbacks (attention) must also beat the smaller fusions its region keeps without it. Where
such an op does not ship, its regions are *declined*: the pipeline matches the model again once, without them, and
the smaller fusions inside take their place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx.inliner

from .errors import AscOnnxError
from .estimate import Judgement, bindings, estimate_at, judge, label, model_times, record, static_shapes
from .graph import graph_work
from .hardware import corner
from .kernels import of
from .options import FuseOptions
from .overlap import Forked
from .package import Generated, Kernel, generate
from .plan import Planned, plan
from .rewrite import FusedOp, RewriteResult, rewrite
from .soc import Soc
from .verify_kernels import body_model

#: A verdict's status: the first three ship.
SHIPPED, UNJUDGED, KEPT = "shipped", "shipped, not judged", "shipped, judged slower"
NO_KERNEL, REJECTED, SLOWER = "no kernel", "rejected", "slower"


@dataclass(frozen=True)
class Verdict:
    """One fused op type's fate and why."""

    op_type: str
    status: str
    reason: str = ""

    @property
    def ships(self) -> bool:
        return self.status in (SHIPPED, UNJUDGED, KEPT)


@dataclass(frozen=True)
class Decision:
    """The ship decision of a run: a verdict per fused op type of the final rewrite, the regions declined to
    their smaller fusions (by the one re-match), and the judgements the timing model made."""

    verdicts: tuple[Verdict, ...]
    declined: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (rule, region output) -> why
    judgements: tuple[Judgement, ...] = field(default=(), compare=False, repr=False)

    def shipped(self) -> set[str]:
        return {v.op_type for v in self.verdicts if v.ships}

    def not_shipped(self) -> dict[str, str]:
        """Op type -> why, for every op with a kernel that does not ship (what the package leaves out)."""
        return {v.op_type: v.reason for v in self.verdicts if not v.ships and v.status != NO_KERNEL}

    def of_status(self, *status: str) -> dict[str, str]:
        return {v.op_type: v.reason for v in self.verdicts if v.status in status}

    def record(self) -> list[dict[str, str]]:
        """The report's ``decision``: every op type's status and reason, then every declined region."""
        return ([{"op_type": v.op_type, "status": v.status, "reason": v.reason} for v in self.verdicts]
                + [{"rule": rule, "region": out, "status": "declined", "reason": why}
                   for (rule, out), why in self.declined.items()])


def decide(ops: Sequence[FusedOp], generated: Generated, rejected: Mapping[str, str], p: Planned, soc: Soc,
           options: FuseOptions, may_decline: bool) -> Decision:
    """Every op's verdict: no kernel, rejected by the kernel rung (``rejected``: op type -> why), else judged (under
    ``options.judge``). With ``may_decline``, the regions of every op of a class with fallbacks that does not ship
    are declined (the caller matches again once); without it such ops just go back to their nodes."""
    no_kernel = dict(generated.skipped)
    accepted = [k for k in generated.kernels if k.op.op_type not in rejected]
    judgements: list[Judgement] = []
    slower: dict[str, str] = {}
    if accepted and options.judge:
        # Every op the emulator accepted is judged (for timing only, so under --no-emulate too).
        options.report("estimating")
        judgements = judge(accepted, p.loaded.model, options.shape_map, soc, report=options.report,
                           binds=bindings(p.loaded.model, options.shape_map, p.dims))
        slower = {j.op_type: j.reason() for j in judgements if not j.ship}
        slower.update(_no_faster_than_smaller(judgements, accepted, soc))
    verdicts = []
    for op in ops:
        t = op.op_type
        if t in no_kernel:
            verdicts.append(Verdict(t, NO_KERNEL, no_kernel[t]))
        elif t in rejected:
            verdicts.append(Verdict(t, REJECTED, rejected[t]))
        elif t in slower:
            verdicts.append(Verdict(t, KEPT if options.keep_slower else SLOWER, slower[t]))
        else:
            verdicts.append(Verdict(t, SHIPPED if options.judge else UNJUDGED))
    declined: dict[tuple[str, str], str] = {}
    if may_decline:
        gone = {v.op_type: v.reason for v in verdicts if not v.ships}
        declined = {(op.rule, inst.outputs[0]): f"the fused op {op.op_type} is not shipped ({gone[op.op_type]})"
                    "; the region keeps its smaller fusions"
                    for op in ops if op.op_type in gone and of(op.kernel).fallback for inst in op.instances}
    return Decision(tuple(verdicts), declined, tuple(judgements))


#: a rewritten model of at least this many nodes has half its whole-model estimates computed in a forked child
FORK_NODES = 2000


class Estimates:
    """The report's ``estimates`` (:meth:`result`: each judged op, and the whole model at every judged binding with
    the shipped ops fused; None when nothing was judged), started early: on a large model the first half of the
    bindings is costed on the other core (:class:`asc_onnx.overlap.Forked`) while the caller assembles and writes
    the package, and :meth:`result` costs the second half here. The report alone reads them."""

    def __init__(self, decision: Decision, rewritten: RewriteResult, generated: Generated, p: Planned, soc: Soc,
                 options: FuseOptions) -> None:
        self.judgements = decision.judgements
        self.keep_slower = options.keep_slower
        self.pending: Forked[list[dict[str, Any]]] | None = None
        if not self.judgements:
            return
        judged_types = {j.op_type for j in self.judgements}
        judged = [k for k in generated.kernels if k.op.op_type in judged_types]
        self.shipped = decision.shipped() & judged_types
        static = static_shapes(p.loaded.model, options.shape_map)
        binds = bindings(p.loaded.model, options.shape_map, p.dims)
        half = len(binds) // 2
        small = len(rewritten.asc_model.graph.node) < FORK_NODES
        args = (rewritten.asc_model, self.judgements, judged, self.shipped)
        rest = (options.shape_map, soc, static)
        self.pending = Forked(model_times, *args, binds[:half], *rest, inline=small or not half)
        self.here = (*args, binds[half:], *rest)

    def result(self) -> dict[str, Any] | None:
        if self.pending is None:
            return None
        with self.pending:
            mine = model_times(*self.here)
            models = self.pending.result() + mine
        return record(self.judgements, self.shipped, self.keep_slower, models)

    def cancel(self) -> None:
        """Stop the child, if any (the caller is unwinding)."""
        if self.pending is not None:
            self.pending.cancel()

    def __enter__(self) -> Estimates:
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        if kind is not None:
            self.cancel()


def _no_faster_than_smaller(judgements: Sequence[Judgement], kernels: Sequence[Kernel], soc: Soc) -> dict[str, str]:
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
            smaller = smaller_kernels(k, e.shapes, soc)
            if smaller is None:
                continue
            slow_us = smaller_us(smaller, w, slow, soc)
            if w.fused_us >= slow_us:
                out[j.op_type] = (f"the timing model estimates it no faster than the smaller fusions of its region at "
                                  f"{label(e.binding)}: {w.fused_us:.1f} us fused against {slow_us:.1f} us with every "
                                  f"assumption at its slow end ({e.fused_us:.1f} against "
                                  f"{smaller_us(smaller, e, None, soc):.1f} us at the table's values; estimates)")
                break
    return out


def smaller_kernels(k: Kernel, shapes: Any, soc: Soc) -> list[tuple[Kernel, list[list[int]]]] | None:
    """The smaller fusions ``k``'s region keeps without ``k``, each instance with its input shapes, for inputs of
    ``shapes``: the op's body fused with ``k``'s rule skipped (no emulation, no estimates); None if it cannot be."""
    body = onnx.inliner.inline_local_functions(body_model(k.op, [k.ir.dtypes[0]]))
    for vi, shape in zip(body.graph.input, shapes):
        vi.type.tensor_type.shape.CopyFrom(onnx.helper.make_tensor_type_proto(k.ir.dtypes[0], shape).tensor_type.shape)
    options = FuseOptions(soc=soc.name, emulate=False, judge=False, skip=frozenset({k.op.rule}))
    try:  # matched and packaged, not a whole fuse: nothing of the body is proven, judged or written
        p = plan(body, options)
        with graph_work():
            rewritten = rewrite(p.graph, p.loaded.model, p.matched.fusions, p.scopes)
            kernels = generate(rewritten, soc, options.atc_domain_mode, options.shape_map, p.loaded.symbolic).kernels
    except AscOnnxError:
        return None
    return [(s, [list(map(int, x or ())) for x in inst.input_shapes]) for s in kernels for inst in s.op.instances]


def smaller_us(smaller: list[tuple[Kernel, list[list[int]]]], e: Any, overrides: dict[str, float] | None,
                soc: Soc) -> float:
    """The estimate of a region as the model runs it with its ``smaller`` fusions (each at the better of its fused
    and unfused estimates) and the rest of its nodes unfused, from estimate ``e`` of the whole op at the same
    shapes and assumptions (whose unfused nodes are costed alike)."""
    total = e.unfused_us
    for s, shapes in smaller:
        est = estimate_at(s, shapes, soc, overrides)
        if est.error is None:
            total -= est.unfused_us - min(est.fused_us, est.unfused_us)
    return total
