"""Stage 8 (deployed rung), verify: ``model.atc.onnx``, the file that is deployed, run end to end on the
CPU with every ``Asc*`` node executed by its emulated kernel, against the original model.

The graph is run node by node in segments: the standard nodes that feed the next fused node (or the
graph outputs) run on onnxruntime as one extracted sub-model, the fused node runs in the emulator on
the values it receives, and its outputs join the known values. Wiring errors (input order, dtype
columns, renamed inputs) and error that builds up over layers show here; the graph rung cannot see
them, because there every fused op runs its own function body.

Fused nodes inside control-flow bodies (If branches, Loop bodies) cannot be taken out of their body: there
they run as their function bodies on onnxruntime, and the report counts them apart. Their kernels are
proven by the kernel rung alone. So are matmul nodes over the emulation budget (``kernels/matmul/budget.py``: the
emulated cube is a scalar loop, and a LLaMA-7B FFN at 512 tokens would take minutes per node): those run
as their function bodies, counted apart too, and their kernels are proven at reduced K and N (under CANN's
tiling of the real size, cut) by the kernel rung.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import ModelProto, helper, numpy_helper

from .dtypes import onnx_type
from .emulator import cann_tiling
from .emulator.harness import EmulatorFaultError, TilingRefusedError, refusal_text, run
from .errors import AscOnnxError
from .graph import all_nodes, body_graphs
from .kernels import of
from .package import Kernel
from .rewrite import DOMAIN, param_attributes, param_bits_to_values
from .soc import Soc
from .validate import TOLERANCES, OutputCheck, compare_arrays, make_inputs
from .validate import run as ort_run
from .verify_kernels import reference


@dataclass(frozen=True)
class DeployedReport:
    """The deployed model against the original: every output, and the fused nodes that ran emulated."""

    outputs: tuple[OutputCheck, ...]
    emulated_nodes: int
    error: str | None = None
    in_bodies: int = 0  # fused nodes inside control-flow bodies, run as their function bodies
    blame: str | None = None  # a failed check: the first fused op whose kernel alone makes an output fail
    over_budget: int = 0  # matmul nodes over the emulation budget, run as their function bodies
    requantized: str | None = None  # outputs behind quantizers: judged from the deployed quantized values
    amplified: str | None = None  # outputs judged with the reference's own spread (see verify_deployed)
    node_error: str | None = None  # a fused node whose kernel missed its body on the values it received

    def why(self) -> str:
        """One line on what failed: a fault, a fused node off its body, or each failing output with its error and
        tolerance, and the op."""
        if self.error:
            return self.error
        bad = "; ".join(f"{o.name}: max abs error {o.max_abs:.3e} beyond the {o.dtype} tolerance (rtol {o.rtol:g}, "
                        f"atol {o.atol:g})" + (" and the reference's spread" if self.amplified else "")
                        for o in self.outputs if not o.ok)
        parts = [t for t in (self.node_error, bad, self.blame) if t]
        return "; ".join(parts)

    @property
    def ok(self) -> bool:
        """Every output within its tolerance, every fused node within its kernel's tolerance of its body on the
        values it received, and no kernel faulted."""
        return self.error is None and self.node_error is None and all(o.ok for o in self.outputs)


def _needed_nodes(graph: onnx.GraphProto, targets: Sequence[str], known: set[str], fused: set[int]) -> list[int]:
    """Indexes of the standard nodes needed to compute ``targets`` from ``known`` values (topological order)."""
    producer = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    want, seen = list(targets), set()
    while want:
        name = want.pop()
        if name in known or name not in producer:
            continue
        i = producer[name]
        if i in seen:
            continue
        if i in fused:
            raise AscOnnxError(f"internal: {name} comes from a fused node that has not run yet")
        seen.add(i)
        want.extend(_reads(graph.node[i]))
    return sorted(seen)


def _reads(node: onnx.NodeProto) -> list[str]:
    """A node's inputs, with the outer-scope names its subgraphs read."""
    names = [i for i in node.input if i]
    for g in body_graphs(node):
        inner = {o for n in g.node for o in n.output} | {i.name for i in g.input} | {t.name for t in g.initializer}
        names += [i for n in g.node for i in _reads(n) if i not in inner]
    return names


def _segment(model: ModelProto, nodes: list[int], targets: Sequence[str], values: Mapping[str, np.ndarray],
             inits: Mapping[str, onnx.TensorProto]) -> dict[str, np.ndarray]:
    """Run the standard nodes ``nodes`` on onnxruntime with ``values`` as inputs; return ``targets``."""
    graph = model.graph
    if not nodes:
        return {t: values[t] for t in targets}
    produced = {o for i in nodes for o in graph.node[i].output}
    reads = dict.fromkeys(r for i in nodes for r in _reads(graph.node[i]) if r not in produced)
    feeds = {r: values[r] for r in reads if r in values}
    init = [inits[r] for r in reads if r not in values and r in inits]
    g = helper.make_graph(
        [graph.node[i] for i in nodes], "segment",
        [helper.make_tensor_value_info(r, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for r, a in feeds.items()],
        [onnx.ValueInfoProto(name=t) for t in targets if t not in values], init)
    seg = helper.make_model(g, opset_imports=model.opset_import, ir_version=model.ir_version,
                            functions=model.functions)  # (fused nodes inside control-flow bodies call them)
    inferred = onnx.shape_inference.infer_shapes(seg)
    types = {v.name: v.type for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for o in seg.graph.output:
        if o.name in types and types[o.name].HasField("tensor_type"):
            o.type.CopyFrom(types[o.name])
    out = ort_run(seg, feeds) if seg.graph.output else {}
    return {t: values[t] if t in values else out[t] for t in targets}


def _bodies_as_functions(atc: ModelProto, kernels: Sequence[Kernel],
                         top: Sequence[str] = ()) -> tuple[ModelProto, int]:
    """The ATC model with its fused nodes inside control-flow bodies, and those of the op types ``top`` in the
    main graph, calling their ONNX functions (domain, parameters as tensors, the functions attached), so that
    onnxruntime runs them as their bodies; and how many inside bodies."""
    ops = {k.op.op_type: k.op for k in kernels}
    work = ModelProto()
    work.CopyFrom(atc)
    count, used = 0, set()
    inside = [inner for node in work.graph.node for sub in body_graphs(node) for inner in all_nodes(sub)]
    outside = [node for node in work.graph.node if node.op_type in top]
    for inner in inside + outside:
        op = ops.get(inner.op_type)
        if op is None:
            continue
        values = param_bits_to_values(inner, op.params)
        keep = [x for x in inner.attribute if x.name not in op.params]
        del inner.attribute[:]
        inner.attribute.extend(keep)
        inner.attribute.extend(param_attributes(op, values))
        inner.domain = DOMAIN
        count += inner not in outside
        used.add(op.op_type)
    if used:
        work.functions.extend(ops[t].function for t in sorted(used))
        if all(o.domain != DOMAIN for o in work.opset_import):
            work.opset_import.append(helper.make_opsetid(DOMAIN, 1))
        work.ir_version = max(work.ir_version, 10)
    return work, count


#: Float types from the widest to the narrowest (the tolerance of the narrowest applies).
_PRECISION = (onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)


def _narrowest_after_kernels(atc: ModelProto, kernels: Sequence[Kernel], types: Mapping[str, int],
                             original_types: Mapping[str, int] | None = None) -> dict[str, int]:
    """Per graph output, the narrowest float type a value passes through on its way from an emulated kernel.

    A kernel's fp32 result that is cast to fp16 and back (mixed precision) may land one fp16 step away from
    onnxruntime's: a last-bit difference in fp32 becomes a whole fp16 ulp. That output is compared with the
    fp16 tolerance, not its own type's; outputs no kernel reaches keep their own."""
    inferred = onnx.shape_inference.infer_shapes(atc)
    elem = {vi.name: vi.type.tensor_type.elem_type for vi in list(inferred.graph.value_info)
            + list(inferred.graph.output) + list(inferred.graph.input)}
    # onnx cannot type a fused node's outputs (an Asc* op it does not know); its tensors keep their original
    # names, so the original model's types are theirs: an fp16 kernel that feeds fp32 ops counts as fp16.
    for name, t in (original_types or {}).items():
        if not elem.get(name):
            elem[name] = t
    fused = {k.op.op_type for k in kernels}
    reach: dict[str, int] = {}  # tensor -> narrowest type since a kernel
    for node in atc.graph.node:  # topological order
        seen = [reach[i] for i in node.input if i in reach]  # paths from earlier kernels run on through this node
        if node.op_type not in fused and not seen:
            continue
        seen += [elem.get(o, 0) for o in node.output]
        narrow = max((t for t in seen if t in _PRECISION), key=_PRECISION.index, default=0)
        for o in node.output:
            reach[o] = narrow
    out = {}
    for name, t in types.items():
        r = reach.get(name)
        out[name] = r if r in _PRECISION and t in _PRECISION and _PRECISION.index(r) > _PRECISION.index(t) else t
    return out


def run_deployed(atc: ModelProto, kernels: Sequence[Kernel], feeds: Mapping[str, np.ndarray],
                 soc: Soc) -> tuple[dict[str, np.ndarray], int, int]:
    """Outputs of the ATC model with every fused node run by its emulated kernel (matmul nodes over the
    emulation budget by their function bodies); how many ran emulated, and how many over the budget."""
    return _run_prepared(_bodies_as_functions(atc, kernels)[0], kernels, feeds, soc)


def _over_budget(k: Kernel, args: Sequence[np.ndarray]) -> bool:
    """A matmul node whose multiply-accumulates exceed what the kernel rung emulates at full size."""
    b = of(k).budget
    return b is not None and b.over_at(k.ir, args)


#: What a fused node computes in a run of the deployed model other than its kernel's: ``(kernel, inputs, params)``
#: to its outputs (its function body, moved within its tolerance, for the reference's spread).
Compute = Callable[[Kernel, Sequence[np.ndarray], Sequence[float]], list[np.ndarray]]


def _run_prepared(atc: ModelProto, kernels: Sequence[Kernel], feeds: Mapping[str, np.ndarray],
                  soc: Soc, extra: Sequence[str] = (), compute: Compute | None = None,
                  local: list[str] | None = None) -> tuple[dict[str, np.ndarray], int, int]:
    """:func:`run_deployed` on a model whose fused nodes inside bodies already call their functions; the
    tensors ``extra`` come back too. With ``compute``, fused nodes run that instead of their kernels; with
    ``local``, each emulated node is also compared with its function body on the values it received, and a miss
    beyond its kernel's tolerance is appended there."""
    by_type = {k.op.op_type: k for k in kernels}
    graph = atc.graph
    inits = {t.name: t for t in graph.initializer}
    fused = {i for i, n in enumerate(graph.node) if n.op_type in by_type}
    values: dict[str, np.ndarray] = dict(feeds)
    over = 0
    for i in sorted(fused):
        node = graph.node[i]
        k = by_type[node.op_type]
        ins = list(node.input)
        need = [n for n in ins if n not in values and n not in inits]
        values.update(_segment(atc, _needed_nodes(graph, need, set(values), fused), need, values, inits))
        args = [values[n] if n in values else numpy_helper.to_array(inits[n]) for n in ins]
        params = param_bits_to_values(node, k.op.params)
        if compute is not None:
            values.update(dict(zip(node.output, compute(k, args, params))))
            continue
        if _over_budget(k, args):
            values.update(dict(zip(node.output, reference(k.op, args, params))))
            over += 1
            continue
        try:
            # A matmul kernel runs under CANN's own tiling where its open sources are at hand.
            tiling = cann_tiling.for_inputs(k.ir, k.files, soc, args)
            if isinstance(tiling, int):
                raise TilingRefusedError(f"{refusal_text(k.ir, tiling)} (under CANN's Matmul tiling)")
            # Each node's own parameters, from its INT attributes: what the host tiling hands its kernel.
            res = run(k.ir, k.files, f"{k.op.op_type}TilingData", args, soc, cube_tiling=tiling, params=params)
        except EmulatorFaultError as exc:
            raise EmulatorFaultError(f"node {node.name!r} ({node.op_type}): {exc}") from None
        values.update(dict(zip(node.output, res.outputs)))
        if local is not None:
            for name, want, got in zip(node.output, reference(k.op, args, params), res.outputs):
                c = compare_arrays(name, want, got, onnx_type(want))
                if not c.ok:
                    local.append(f"fused node {node.name!r} ({node.op_type}) is off its function body on the values "
                                 f"it received: {name} max abs error {c.max_abs:.3e} beyond the {c.dtype} tolerance "
                                 f"(rtol {c.rtol:g}, atol {c.atol:g})")
    targets = list(dict.fromkeys([*(o.name for o in graph.output), *extra]))
    need = [t for t in targets if t not in values]
    values.update(_segment(atc, _needed_nodes(graph, need, set(values), fused), need, values, inits))
    return {t: values[t] for t in targets}, len(fused) - over, over


def verify_deployed(original: str | os.PathLike | ModelProto, atc: str | os.PathLike | ModelProto,
                    kernels: Sequence[Kernel], soc: Soc, atc_inputs: Mapping[str, str] | None = None,
                    input_shapes: Mapping[str, tuple[int, ...]] | None = None, seed: int = 0,
                    default_dim: int = 4, ref: Mapping[str, np.ndarray] | None = None,
                    feeds: Mapping[str, np.ndarray] | None = None, proto: ModelProto | None = None
                    ) -> DeployedReport:
    """The deployed model against the original on the same seeded inputs (``feeds`` when given), every
    output compared with its dtype's tolerance. ``atc_inputs`` maps inputs renamed in the ATC model to their
    original names; ``ref`` is the original's outputs on those inputs, when the caller already has them."""
    if proto is None:  # (the original's graph, external data unread, unless the caller has it)
        proto = original if isinstance(original, ModelProto) else onnx.load(str(original), load_external_data=False)
    deployed = atc if isinstance(atc, ModelProto) else onnx.load(str(atc))
    feeds = make_inputs(proto, input_shapes, seed, default_dim) if feeds is None else feeds
    ref = ort_run(original, feeds) if ref is None else ref
    original_name = dict(atc_inputs or {})  # ATC name -> original (an input that is also an output too)
    atc_name = {old: new for new, old in original_name.items()}
    types = {o.name: o.type.tensor_type.elem_type for o in proto.graph.output}
    loosest = _narrowest_after_kernels(deployed, kernels, types, _value_types(proto))
    runnable, in_bodies = _bodies_as_functions(deployed, kernels)
    atc_feeds = {atc_name.get(k, k): a for k, a in feeds.items()}
    quantizers = _quantizers_after_kernels(deployed, kernels)
    at_quantizers = _quantizer_tensors(quantizers)
    local: list[str] = []
    try:
        got, n, over = _run_prepared(runnable, kernels, atc_feeds, soc, at_quantizers, local=local)
    except EmulatorFaultError as exc:
        return DeployedReport((), 0, str(exc), in_bodies)
    node_error = local[0] if local else None
    requantized = None
    if quantizers:
        requantized, ref = _requantized(original, quantizers, feeds, got, ref, _value_types(proto))
        outputs = {o.name for o in deployed.graph.output}
        got = {k: v for k, v in got.items() if k not in at_quantizers or k in outputs}

    spread: dict[str, np.ndarray] = {}

    def compare(got: Mapping[str, np.ndarray]) -> list[OutputCheck]:
        got = {original_name.get(k, k): v for k, v in got.items()}
        checks = []
        for name, r in ref.items():
            if name not in got:
                checks.append(OutputCheck(name, "?", tuple(r.shape), float("inf"), float("inf"), 0, 0, False))
            else:
                checks.append(compare_arrays(name, r, got[name], loosest.get(name, types.get(name, 0)),
                                             SPREAD_FACTOR * spread[name].max(initial=0) if name in spread else None))
        return checks

    checks = compare(got)
    amplified = None
    if not all(c.ok for c in checks):
        # The reference's own spread: the outputs of the original model as computed when every fused op's output
        # moves within its kernel's tolerance. A quantized model amplifies a last-bit difference into a step.
        failed = [c.name for c in checks if not c.ok]
        spread.update(_spread(runnable, kernels, atc_feeds, soc, [atc_name.get(f, f) for f in failed],
                              original_name))
        checks = compare(got)
        amplified = ("outputs " + ", ".join(failed) + f" judged within their tolerance plus {SPREAD_FACTOR:g}x the "
                     "reference's spread (each fused op's output moved within its kernel's tolerance moves them by up "
                     "to " + ", ".join(f"{float(spread[f].max(initial=0)):.3e}" for f in failed if f in spread)
                     + "; the model amplifies its kernels' rounding)")
    blame = None
    if not all(c.ok for c in checks):
        blame = _blame(deployed, kernels, atc_feeds, soc, compare, {c.name for c in checks if not c.ok})
    return DeployedReport(tuple(checks), n, None, in_bodies, blame, over, requantized, amplified, node_error)


#: How many times the reference's spread an output may be off beyond its tolerance (see :func:`_spread`), at any
#: element: the spread's largest move over the output's elements. Its draws move every fused op's output to the
#: edge of its tolerance, as far as a kernel within tolerance can; where a draw's signs cancel at one element a
#: kernel's need not, so the bound is the output's largest, not each element's own. A kernel that is really wrong
#: fails the node check before this, and a wiring error moves an output far beyond it.
SPREAD_FACTOR = 2.0
#: Seeds of the spread's draws: fixed, so the verdict does not depend on the validation seed.
SPREAD_SEEDS = (1, 2)


def _spread(runnable: ModelProto, kernels: Sequence[Kernel], feeds: Mapping[str, np.ndarray], soc: Soc,
            targets: Sequence[str], original_name: Mapping[str, str]) -> dict[str, np.ndarray]:
    """How far the outputs ``targets`` move, element by element, when every fused node computes its function body
    and then moves each output element to the edge of its kernel's tolerance (``atol + rtol |y|``, a random sign
    per element, in two draws of fixed seeds): the most, over the draws, by which the reference itself spreads when
    its fused ops are computed within tolerance. No kernel runs here."""
    def body(k: Kernel, args: Sequence[np.ndarray], params: Sequence[float]) -> list[np.ndarray]:
        return reference(k.op, args, params)

    def moved(rng: np.random.Generator) -> Compute:
        def run_moved(k: Kernel, args: Sequence[np.ndarray], params: Sequence[float]) -> list[np.ndarray]:
            outs = []
            for y in reference(k.op, args, params):
                rtol, atol = TOLERANCES.get(onnx_type(y), (0.0, 0.0))
                y64 = y.astype(np.float64)
                outs.append((y64 + rng.choice((-1.0, 1.0), size=y.shape) * (atol + rtol * np.abs(y64))).astype(y.dtype))
            return outs
        return run_moved

    base, _, _ = _run_prepared(runnable, kernels, feeds, soc, targets, compute=body)
    out = {t: np.zeros(base[t].shape) for t in targets}
    for seed in SPREAD_SEEDS:
        got, _, _ = _run_prepared(runnable, kernels, feeds, soc, targets, compute=moved(np.random.default_rng(seed)))
        for t in targets:
            with np.errstate(invalid="ignore"):
                d = np.abs(got[t].astype(np.float64) - base[t].astype(np.float64))
            out[t] = np.maximum(out[t], np.nan_to_num(d, nan=0.0, posinf=0.0))
    return {original_name.get(t, t): v for t, v in out.items()}


QUANTIZERS = ("QuantizeLinear", "DynamicQuantizeLinear")


def _quantizers_after_kernels(atc: ModelProto, kernels: Sequence[Kernel]) -> list[onnx.NodeProto]:
    """Main-graph quantizers whose float input a fused node's output reaches: where a kernel's last-bit
    difference puts a value on the other side of a rounding boundary, their output moves by a whole step."""
    fused = {k.op.op_type for k in kernels}
    reached: set[str] = set()
    found = []
    for node in atc.graph.node:  # graph order is topological
        if node.op_type in fused or any(i in reached for i in node.input):
            if node.op_type in QUANTIZERS and node.input[0] in reached:
                found.append(node)
            reached.update(o for o in node.output if o)
    return found


def _quantizer_tensors(quantizers: Sequence[onnx.NodeProto]) -> list[str]:
    """The float input and every output of each quantizer, once each."""
    return list(dict.fromkeys(t for q in quantizers for t in [q.input[0], *q.output] if t))


def _requantized(original: str | os.PathLike | ModelProto, quantizers: Sequence[onnx.NodeProto],
                 feeds: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray],
                 types: Mapping[str, int]) -> tuple[str | None, Mapping[str, np.ndarray]]:
    """The rule for outputs behind quantizers, and the reference to compare the deployed outputs with.

    Each quantizer's output in the deployed run may differ from the original's by one step, and only at elements
    whose float input agrees within its type's tolerance (a kernel's last bit put it across a rounding
    boundary); its scale and zero point (DynamicQuantizeLinear) within theirs. When every quantizer holds to
    that, the reference becomes the original model run from the deployed quantized values (those nodes fed, not
    computed): an output is then judged on what the kernels changed after the quantizers, at its own tolerance.
    When one does not, the reference stays the original's outputs and the check fails where they differ."""
    from .verify_kernels import capture

    base = capture(original, _quantizer_tensors(quantizers), feeds)
    moved, total = 0, 0
    for q in quantizers:
        x_ref, x_got = base[q.input[0]], got[q.input[0]]
        y_ref, y_got = base[q.output[0]].astype(np.int64), got[q.output[0]].astype(np.int64)
        step = np.abs(y_ref - y_got)
        tol = TOLERANCES.get(types.get(q.input[0], onnx.TensorProto.FLOAT), TOLERANCES[onnx.TensorProto.FLOAT])
        near = np.abs(x_ref.astype(np.float64) - x_got) <= tol[1] + tol[0] * np.abs(x_ref.astype(np.float64))
        if step.max(initial=0) > 1 or not near[step > 0].all():
            return None, ref
        for extra in (t for t in q.output[1:] if t):  # a run-time scale (within tolerance) and zero point (a step)
            b, g = base[extra], got[extra]
            if not (np.abs(b.astype(np.int64) - g.astype(np.int64)).max(initial=0) <= 1 if b.dtype.kind in "iu"
                    else compare_arrays(extra, b, g, types.get(extra, onnx.TensorProto.FLOAT)).ok):
                return None, ref
        moved, total = moved + int((step > 0).sum()), total + step.size
    outs = [t for t in ref]
    given = [t for q in quantizers for t in q.output if t]
    rerun = capture(original, outs, {**feeds, **{t: got[t] for t in given}}, given)
    return (f"{len(quantizers)} quantizer(s) after fused ops: {moved} of {total} quantized values one step from the "
            "original's, each where its float input agrees within tolerance; outputs compared with the original "
            "run from the deployed quantized values"), rerun


def _value_types(model: ModelProto) -> dict[str, int]:
    """Element types of the main graph's tensors, by onnx's shape inference (weights are not needed)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - a model onnx cannot infer: no types beyond what it declares
        inferred = model
    return {vi.name: vi.type.tensor_type.elem_type for vi in list(inferred.graph.value_info)
            + list(inferred.graph.output) + list(inferred.graph.input) if vi.type.tensor_type.elem_type}


def _blame(atc: ModelProto, kernels: Sequence[Kernel], feeds: Mapping[str, np.ndarray], soc: Soc,
           compare: Callable[[Mapping[str, np.ndarray]], list[OutputCheck]], failed: set[str]) -> str:
    """The deployed model again with one op type's kernel at a time (every other fused node as its function
    body on onnxruntime): the first op, in graph order, whose kernel alone makes a failed output fail."""
    order = list(dict.fromkeys(n.op_type for n in all_nodes(atc.graph)))
    by_type = {k.op.op_type: k for k in kernels}
    for op_type in (t for t in order if t in by_type):
        others = [t for t in by_type if t != op_type]
        runnable, _ = _bodies_as_functions(atc, kernels, others)
        try:
            got, _, _ = _run_prepared(runnable, [by_type[op_type]], feeds, soc)
        except EmulatorFaultError as exc:
            return f"{op_type}'s kernel alone faults: {exc}"
        if any(not c.ok for c in compare(got) if c.name in failed):
            return f"{op_type}'s kernel alone makes it fail (the other fused ops run as their bodies)"
    return "no fused op's kernel alone makes it fail: their errors add up"


__all__ = ["verify_deployed", "run_deployed", "DeployedReport"]
