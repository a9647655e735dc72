"""Is each fused op faster than the nodes it replaces, at the shapes a deployment runs? And how long does the
whole model take, fused against unfused, by op type?

Every figure here is an estimate of the timing model (:mod:`asc_onnx.hardware` holds its constants, each with
its source):

* a fused op is its kernel run in the emulator for timing only (its pipes and orderings, no arithmetic; the first
  and last cores' blocks, which hold the longest core), plus one launch (910B mixed cube+vector kernels: plus
  the mixed launch's extra);
* an unfused node is costed at its own roofline: the GM bytes it must move (its inputs read once, its outputs
  written once) over the bandwidth, MatMul, Gemm and Conv also at the cube peak times the best published
  efficiency, whichever is longer, plus one launch; view ops (Reshape, Squeeze, ...) cost nothing. A matmul
  op's MatMul nodes are also no faster than its class's bare MatMul (:func:`cube_nodes`) timed under the same
  assumptions: what the cube costs at a corner it costs fused or not.

GM traffic of an unfused node is counted at HBM bandwidth: the L2 rule of the emulator (a re-read within an L2's
worth of a kernel's traffic is an L2 hit) credits neither side for the first read of a tensor, so the two sides
are costed alike.

Dynamic dims are judged at the shapes the user gave (``--input-shape``); otherwise at two corners of a
deployment sweep by each dim's role (:mod:`asc_onnx.dims`): batch at 1 and 8, sequence and KV-cache lengths at 128 and
2048, image sides at 224 and 640, all small together and all large together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper

from .dims import DimRole, evaluate, sweep
from .emulator.harness import prebuild, run
from .errors import AscOnnxError
from .hardware import FACTS, corner, emulator_table, value
from .kernels import of
from .kernels.ir import IO_TYPES
from .package import Kernel, render
from .soc import Soc
from .verify_kernels import body_shapes, data_shape, dtype_of, np_type, unfused_bytes

#: Ops that move no data on the device (ATC folds them into their neighbours' addressing).
VIEWS = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Shape", "Constant", "Size", "Dropout"}
CUBE_OPS = {"MatMul", "Gemm", "Conv", "ConvTranspose"}


def bindings(model: ModelProto, shape_map: Mapping[str, Sequence[int]],
             roles: Mapping[str, DimRole] | None = None) -> list[dict[str, int]]:
    """The bindings of the model's dynamic dims an op is judged at: the user's, else the sweep's corners by each
    dim's role (:func:`asc_onnx.dims.sweep`; ``roles`` where the caller has them)."""
    return sweep(model, shape_map, roles)


def bind(shape: Sequence[object] | None, binding: Mapping[str, int]) -> tuple[int, ...]:
    """A symbolic shape at a binding: names and expressions of the bound names computed
    (:func:`asc_onnx.dims.evaluate`); a dim that is neither takes the binding's largest value."""
    fallback = max(binding.values(), default=1)
    out = []
    for d in shape or ():
        v = evaluate(d, binding)
        out.append(int(fallback if v is None else v))
    return tuple(out)


def label(binding: Mapping[str, int]) -> str:
    """``batch=8, seq=2048``."""
    return ", ".join(f"{n}={v}" for n, v in sorted(binding.items())) or "static shapes"


@dataclass(frozen=True)
class NodeCost:
    """One unfused node at its roofline."""

    op_type: str
    bytes: int
    flops: float
    us: float  # roofline time plus a launch


@dataclass
class OpEstimate:
    """One fused op at one binding: its kernel against its unfused nodes (microseconds, estimates)."""

    op_type: str
    binding: dict[str, int]
    shapes: list[list[int]]
    fused_us: float          # the kernel's body plus its launch
    body_us: float
    launch_us: float
    unfused_us: float        # every body node at its roofline plus a launch each
    bound_us: float          # compulsory bytes, minimal cube and vector work: the largest over its peak
    efficiency: float        # bound / body
    bottleneck: str
    busy_us: dict[str, float] = field(default_factory=dict)
    hbm_bytes: int = 0
    l2_bytes: int = 0
    vec_read_hbm: int = 0  # the vector cores' reads by level (a matmul kernel's C ring)
    vec_read_l2: int = 0
    compulsory_bytes: int = 0
    work: float = 0.0        # operations the op must do: cube FLOPs plus one per element of each elementwise node
    nodes: list[NodeCost] = field(default_factory=list)
    error: str | None = None

    @property
    def faster(self) -> bool:
        return self.error is None and self.fused_us < self.unfused_us


def launch_us(soc: Soc, mixed: bool = False, overrides: Mapping[str, float] | None = None) -> float:
    """One kernel launch; a 910B kernel of cube and vector cores (MIX) pays the mixed launch's extra too."""
    t = value(soc.name, "launch_us", dict(overrides or {}))
    if mixed and "mix_launch_us" in FACTS[soc.name]:
        t += value(soc.name, "mix_launch_us", dict(overrides or {}))
    return t


def node_cost(op_type: str, nbytes: int, flops: float, soc: Soc, overrides: Mapping[str, float] | None = None,
              io_dtype: int = TensorProto.FLOAT16) -> NodeCost:
    """An unfused node at its roofline plus one launch (a view op costs nothing)."""
    if op_type in VIEWS:
        return NodeCost(op_type, 0, 0.0, 0.0)
    o = dict(overrides or {})
    t = nbytes / value(soc.name, "gm_bandwidth", o)
    if flops:
        peak = value(soc.name, "cube_fp16_flops", o) * (0.5 if io_dtype == TensorProto.FLOAT else 1.0)
        t = max(t, flops / (peak * value(soc.name, "matmul_efficiency", o)))
    return NodeCost(op_type, nbytes, flops, t * 1e6 + launch_us(soc, overrides=o))


def flops_of(node: onnx.NodeProto, shapes: Mapping[str, tuple[int, ...]]) -> float:
    """Multiply-adds x 2 of a cube node (MatMul, Gemm, Conv), 0 for anything else or an unsized node."""
    if node.op_type not in CUBE_OPS or not node.output or node.output[0] not in shapes:
        return 0.0
    out = shapes[node.output[0]]
    a = shapes.get(node.input[0])
    b = shapes.get(node.input[1]) if len(node.input) > 1 else None
    if a is None or b is None:
        return 0.0
    if node.op_type == "MatMul":
        k = a[-1]
    elif node.op_type == "Gemm":
        trans_a = next((x.i for x in node.attribute if x.name == "transA"), 0)
        k = a[0] if trans_a else a[-1]
    else:  # Conv: each output element sums Cin/group x kernel elements, which is the weight's row
        k = int(np.prod(b[1:]))
    return 2.0 * math.prod(out) * k


def unfused_nodes(k: Kernel, inputs: Sequence[np.ndarray], soc: Soc,
                  overrides: Mapping[str, float] | None = None) -> list[NodeCost]:
    """Every body node of ``k`` as its own kernel on inputs of these shapes (its bytes as
    :func:`asc_onnx.verify_kernels.unfused_bytes` counts them)."""
    sizes = body_shapes(k, inputs)
    dtype = dtype_of(inputs[0])
    return [node_cost(node.op_type, b, flops_of(node, sizes), soc, overrides, dtype)
            for node, b in unfused_bytes(k, inputs)]


def cube_nodes(k: Kernel, inputs: Sequence[np.ndarray], soc: Soc, nodes: list[NodeCost], table: Mapping[str, float],
               overrides: Mapping[str, float] | None = None) -> list[NodeCost]:
    """The op's MatMul nodes no faster than its class's bare MatMul (the same gemms and tiling, an identity epilogue)
    timed under the same assumptions, their share by FLOPs each, plus a launch: a cube-side assumption at a corner
    (a narrower L1 port, a longer DMA latency) slows the MatMul whether or not its epilogue is fused, so the fused
    op is judged on what fusing changes. The published-efficiency roofline stays the floor."""
    bare = getattr(of(k).schedule, "bare", None)
    flops = sum(n.flops for n in nodes)
    if bare is None or not flops:
        return nodes
    b = render(k.op, bare(k.ir), soc)
    try:
        r = run(b.ir, b.files, f"{k.op.op_type}TilingData", inputs, soc, values=False, timing=table)
    except AscOnnxError:  # the op's own run says why, if it fails too
        return nodes
    t = r.time or {}
    body = float(t.get("cycles", 0.0)) / float(t.get("clock_hz", table["clock_hz"])) * 1e6
    launch = launch_us(soc, overrides=overrides)
    return [NodeCost(n.op_type, n.bytes, n.flops, max(n.us, launch + body * n.flops / flops)) if n.flops else n
            for n in nodes]


def bound_us(k: Kernel, inputs: Sequence[np.ndarray], soc: Soc,
             overrides: Mapping[str, float] | None = None) -> tuple[float, int, float]:
    """The op's bound: the largest of its compulsory GM bytes (as :func:`asc_onnx.verify_kernels.data_movement`
    counts them) over the bandwidth, its cube work over the cube peak and its vector work (one pass per elementwise
    body node over its output) over the vector peak; with the compulsory bytes and the work (cube FLOPs plus vector
    element passes). The kernel's own traffic does not enter it, so a kernel that moves more bytes than it must
    cannot read as efficient."""
    o = dict(overrides or {})
    sizes = body_shapes(k, inputs)
    shape = data_shape(k, inputs)
    compulsory = sum(a.nbytes for a in inputs) + of(k).driver.output_bytes(k.ir, shape, inputs[0].itemsize)
    flops = sum(flops_of(n, sizes) for n in k.op.function.node)
    vec = sum(math.prod(sizes.get(n.output[0], shape)) for n in k.op.function.node
              if n.op_type not in CUBE_OPS | VIEWS and n.output)
    fp32 = dtype_of(inputs[0]) == TensorProto.FLOAT
    elems = value(soc.name, "vector_fp16_elems", o) * (0.5 if fp32 else 1.0)
    cube = value(soc.name, "cube_fp16_flops", o) * (0.5 if fp32 else 1.0)
    t = max(compulsory / value(soc.name, "gm_bandwidth", o), flops / cube, vec / elems)
    return t * 1e6, int(compulsory), flops + vec


def estimate_at(k: Kernel, shapes: Sequence[Sequence[int]], soc: Soc, overrides: Mapping[str, float] | None = None,
                binding: Mapping[str, int] | None = None) -> OpEstimate:
    """One fused op on inputs of these shapes: its kernel timed in the emulator (timing only) against its nodes."""
    shapes = [list(map(int, s)) for s in shapes]
    zero = np.zeros((), dtype=np_type(k.ir.dtypes[0]))
    inputs = [np.broadcast_to(zero, tuple(s)) for s in shapes]  # shapes only: nothing is allocated
    table = emulator_table(soc.name, dict(overrides or {}))
    unfused = cube_nodes(k, inputs, soc, unfused_nodes(k, inputs, soc, overrides), table, overrides)
    bound, compulsory, work = bound_us(k, inputs, soc, overrides)
    launch = launch_us(soc, mixed=of(k).cube and soc.has_data_copy_pad, overrides=overrides)
    base = dict(op_type=k.op.op_type, binding=dict(binding or {}), shapes=shapes, launch_us=launch,
                unfused_us=sum(n.us for n in unfused), bound_us=bound, compulsory_bytes=compulsory, work=work,
                nodes=unfused)
    try:
        r = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, soc, values=False, timing=table)
    except AscOnnxError as exc:  # a fault, a refused tiling or a crashed run: this shape is not judged
        return OpEstimate(fused_us=math.inf, body_us=math.inf, efficiency=0.0, bottleneck="", error=str(exc), **base)
    t = r.time or {}
    clock = float(t.get("clock_hz", table["clock_hz"]))
    body = float(t.get("cycles", 0.0)) / clock * 1e6
    busy = {p: c / clock * 1e6 for p, c in dict(t.get("busy", {})).items() if c}
    return OpEstimate(fused_us=body + launch, body_us=body, efficiency=bound / body if body else 0.0,
                      bottleneck=max(busy, key=busy.get) if busy else "", busy_us=busy,
                      hbm_bytes=int(t.get("hbm_bytes", 0)), l2_bytes=int(t.get("l2_bytes", 0)),
                      vec_read_hbm=int(t.get("vec_read_hbm", 0)), vec_read_l2=int(t.get("vec_read_l2", 0)), **base)


def estimate(k: Kernel, binding: Mapping[str, int], soc: Soc, overrides: Mapping[str, float] | None = None,
             instance: int = 0) -> OpEstimate:
    """One fused op at one binding of the dynamic dims (its instance's shapes there)."""
    shapes = [bind(s, binding) for s in k.op.instances[instance].input_shapes]
    return estimate_at(k, shapes, soc, overrides, binding)


@dataclass
class Judgement:
    """One fused op judged at every binding and distinct instance shape. ``estimates`` are at the table's values
    (what the report shows); ``slow`` at the slow corner of every assumed range (:func:`asc_onnx.hardware.corner`):
    the op ships only if it is faster there at every shape, so no value of an assumption within its range makes
    a shipped op slower than its nodes."""

    op_type: str
    estimates: list[OpEstimate]
    slow: list[OpEstimate]

    @property
    def judged(self) -> bool:
        """Every estimate ran: a timing run that faulted or crashed, or a tiling that refused a judged shape, leaves
        the op not judged, and an op not judged does not ship (its speed at that shape is unknown)."""
        return bool(self.slow) and all(e.error is None for e in (*self.estimates, *self.slow))

    @property
    def ship(self) -> bool:
        return self.judged and all(e.faster for e in self.slow)

    @property
    def status(self) -> str:
        """The timing model's verdict: ``faster`` (ships if the emulator accepted it), ``slower`` or ``not judged``."""
        return "not judged" if not self.judged else "faster" if self.ship else "slower"

    def reason(self) -> str:
        """Why the op does not ship: the judged shape whose estimate failed, with its error whole, or its estimates
        at the shape where it loses most."""
        failed = next((e for e in (*self.estimates, *self.slow) if e.error is not None), None)
        if failed is not None or not self.slow:
            where = f" at {label(failed.binding)} {failed.shapes}" if failed is not None else ""
            return (f"not judged: the timing model could not estimate it{where}"
                    + (f" ({failed.error})" if failed is not None else " (no judged shape)")
                    + "; an op whose speed is unknown at a judged shape is not shipped")
        lost = [(e, n) for e, n in zip(self.slow, self.estimates) if not e.faster]
        if not lost:
            return ""
        e, n = max(lost, key=lambda x: x[0].fused_us / max(x[0].unfused_us, 1e-9))
        return (f"the timing model estimates it slower than its {len(e.nodes)} unfused nodes at {label(e.binding)}: "
                f"{e.fused_us:.1f} us fused against {e.unfused_us:.1f} us unfused with every assumption at its slow "
                f"end ({n.fused_us:.1f} against {n.unfused_us:.1f} us at the table's values; estimates)")


def judge(kernels: Sequence[Kernel], model: ModelProto, shape_map: Mapping[str, Sequence[int]], soc: Soc,
          overrides: Mapping[str, float] | None = None, report: Any = None,
          binds: Sequence[Mapping[str, int]] | None = None) -> list[Judgement]:
    """Every kernel at every binding (:func:`bindings`, or ``binds`` where the caller has them) and every distinct
    shape its instances have there, at the table's values and at the slow corner; with ``overrides``, at those
    values alone, where the decision is then taken (to see a decision at one point of the ranges)."""
    prebuild([(k.ir, k.files, f"{k.op.op_type}TilingData", d, soc) for k in kernels for d in k.ir.dtypes[:1]])
    slow = corner(soc.name, slow=True)
    out = []
    binds = bindings(model, shape_map) if binds is None else binds
    for i, k in enumerate(kernels):
        if report is not None:
            report("estimating", i, len(kernels), k.op.op_type)
        seen: set[tuple[tuple[int, ...], ...]] = set()
        ests, worst = [], []
        for b in binds:
            for j, inst in enumerate(k.op.instances):
                key = tuple(bind(s, b) for s in inst.input_shapes)
                if key in seen:
                    continue
                seen.add(key)
                ests.append(estimate(k, b, soc, overrides, instance=j))
                # with ``overrides`` the decision is taken at them: one estimate serves both lists
                worst.append(ests[-1] if overrides is not None else estimate(k, b, soc, slow, instance=j))
        out.append(Judgement(k.op.op_type, ests, worst))
    return out


def _sized(model: ModelProto, binding: Mapping[str, int], shape_map: Mapping[str, Sequence[int]]
           ) -> tuple[ModelProto, dict[str, tuple[int, ...]], dict[str, int]]:
    """The model with its inputs at a binding and its large weights as inputs (shape inference needs their
    shapes, not their bytes): every value's inferred shape and element type."""
    m = ModelProto()
    m.CopyFrom(model)
    g = m.graph
    big = [t for t in g.initializer if math.prod(t.dims) > 4096 or t.external_data]
    for t in big:
        g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    keep = [t for t in g.initializer if not (math.prod(t.dims) > 4096 or t.external_data)]
    del g.initializer[:]
    g.initializer.extend(keep)
    for vi in g.input:
        given = shape_map.get(vi.name)
        for j, d in enumerate(vi.type.tensor_type.shape.dim):
            if given is not None and j < len(given):
                d.dim_value = int(given[j])
            elif d.dim_param:
                d.dim_value = int(binding.get(d.dim_param, max(binding.values(), default=1)))
    del g.value_info[:]
    try:
        m = onnx.shape_inference.infer_shapes(m, data_prop=True)
    except Exception:  # noqa: BLE001 - a model onnx cannot size: every node unsized
        return m, {}, {}
    shapes, types = {}, {}
    for v in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        tt = v.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[v.name] = tuple(d.dim_value for d in tt.shape.dim)
            types[v.name] = tt.elem_type
    for t in keep:
        shapes[t.name] = tuple(t.dims)
        types[t.name] = t.data_type
    return m, shapes, types


def model_time(asc_model: ModelProto, judgements: Sequence[Judgement], kernels: Sequence[Kernel],
               shipped: set[str], binding: Mapping[str, int], shape_map: Mapping[str, Sequence[int]],
               soc: Soc) -> dict[str, Any]:
    """The whole model at one binding, by op type: unfused (every original node at its roofline plus a launch) and
    fused (each shipped fused node at its kernel's estimate, the rest as unfused). Nodes onnx cannot size are
    counted, not costed."""
    _, shapes, types = _sized(asc_model, binding, shape_map)
    by_node = {inst.node: (k, inst) for k in kernels for inst in k.op.instances}
    judged = {j.op_type: j for j in judgements}
    unfused: dict[str, float] = {}
    fused: dict[str, float] = {}
    unsized = 0
    for node in asc_model.graph.node:
        if node.name in by_node and node.op_type in judged:
            k, inst = by_node[node.name]
            key = [list(bind(s, binding)) for s in inst.input_shapes]
            est = next((e for e in judged[node.op_type].estimates if e.shapes == key and e.binding == dict(binding)),
                       None)
            if est is None:
                unsized += 1
                continue
            for n in est.nodes:
                unfused[n.op_type] = unfused.get(n.op_type, 0.0) + n.us
            if node.op_type in shipped and est.error is None:
                fused[node.op_type] = fused.get(node.op_type, 0.0) + est.fused_us
            else:
                for n in est.nodes:
                    fused[n.op_type] = fused.get(n.op_type, 0.0) + n.us
            continue
        names = [v for v in list(node.input) + list(node.output) if v]
        if not node.output or any(v not in shapes for v in names):
            if node.op_type not in VIEWS:
                unsized += 1
            continue
        item = {v: IO_TYPES.get(types.get(v, TensorProto.FLOAT), (None, 4))[1] for v in names}
        nbytes = sum(math.prod(shapes[v]) * item[v] for v in names)
        cost = node_cost(node.op_type, nbytes, flops_of(node, shapes), soc, io_dtype=types.get(node.output[0], 1))
        unfused[node.op_type] = unfused.get(node.op_type, 0.0) + cost.us
        fused[node.op_type] = fused.get(node.op_type, 0.0) + cost.us
    return {"binding": dict(binding), "unfused_us": sum(unfused.values()), "fused_us": sum(fused.values()),
            "unfused_by_op_type": dict(sorted(unfused.items(), key=lambda x: -x[1])),
            "fused_by_op_type": dict(sorted(fused.items(), key=lambda x: -x[1])), "unsized_nodes": unsized}


def record(judgements: Sequence[Judgement], shipped: set[str], keep_slower: bool,
           models: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The report's ``estimates``: the rule, each op's estimates, and the whole model's."""
    def row(e: OpEstimate) -> dict[str, Any]:
        return {"binding": e.binding, "shapes": e.shapes, "fused_us": round(e.fused_us, 3),
                "body_us": round(e.body_us, 3), "launch_us": e.launch_us, "unfused_us": round(e.unfused_us, 3),
                "bound_us": round(e.bound_us, 3), "efficiency": round(e.efficiency, 4), "bottleneck": e.bottleneck,
                "busy_us": {p: round(v, 3) for p, v in e.busy_us.items()}, "hbm_bytes": e.hbm_bytes,
                "l2_bytes": e.l2_bytes, "compulsory_bytes": e.compulsory_bytes, "work": e.work, "error": e.error,
                "unfused_nodes": [{"op_type": n.op_type, "bytes": n.bytes, "flops": n.flops, "us": round(n.us, 3)}
                                  for n in e.nodes]}
    return {
        "rule": ("every time here is an estimate of the timing model (asc_onnx/hardware.py holds its constants with "
                 "their sources); an op ships only if its kernel is estimated faster than its unfused nodes at "
                 "every judged shape with every assumed constant at its slow end"
                 + ("; --keep-slower shipped the others too" if keep_slower else "")),
        "ops": [{"op_type": j.op_type, "shipped": j.op_type in shipped, "judged_slower": j.status == "slower",
                 "not_judged": not j.judged,
                 "reason": j.reason(), "estimates": [row(e) for e in j.estimates],
                 "slow_corner": [row(e) for e in j.slow]} for j in judgements],
        "model": list(models),
    }


def lines(est: Mapping[str, Any]) -> str:
    """The CLI's lines: each op's estimates at the judged shapes, and the whole model's."""
    out = []
    for op in est.get("ops", []):
        for e in op["estimates"]:
            if e["error"]:
                continue
            out.append(f"  {op['op_type']} at {label(e['binding'])}: est. {e['fused_us']:.1f} us fused "
                       f"({e['efficiency']:.0%} of its bound, {e['bottleneck'] or '-'}-bound) against est. "
                       f"{e['unfused_us']:.1f} us unfused" + ("" if op["shipped"] else " (not shipped)"))
    for m in est.get("model", []):
        out.append(f"model at {label(m['binding'])}: est. {m['fused_us']:.1f} us fused against est. "
                   f"{m['unfused_us']:.1f} us unfused ({m['unfused_us'] / max(m['fused_us'], 1e-9):.2f}x)"
                   + (f"; {m['unsized_nodes']} nodes unsized" if m["unsized_nodes"] else ""))
    return "\n".join(out)


__all__ = ["Judgement", "NodeCost", "OpEstimate", "bind", "bindings", "bound_us", "estimate",
           "estimate_at", "judge", "label", "launch_us", "lines", "model_time", "node_cost", "record", "unfused_nodes"]
