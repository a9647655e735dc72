"""Is each fused op faster than the nodes it replaces, at the shapes a deployment runs? And how long does the
whole model take, fused against unfused, by op type?

Every figure here is an estimate of the timing model (:mod:`asc_onnx.hardware` holds its constants, each with
its source):

* a fused op is its kernel run in the emulator for timing only (its pipes and orderings, no arithmetic; the first
  and last cores' blocks, which hold the longest core), plus one launch (910B mixed cube+vector kernels: plus
  the mixed launch's extra);
* the unfused side is what ATC would run (:mod:`asc_onnx.atc_passes`: the op's nodes as CANN kernels after ATC's
  fusion passes for the chip and shape mode), each kernel costed from kernels measured on chips
  (:mod:`asc_onnx.atc_cost`): its median runs at the table values, its fastest at the slow corner, its slowest at
  the fast one. View ops (Reshape, Squeeze, ...) cost nothing.

One L2 rule for both sides: a tensor written and read again while it fits (the traffic since its write within the
L2's size) is an L2 hit at the L2 read bandwidth, in the emulator for a fused kernel's re-reads and here for an
unfused chain's intermediates.

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

from . import atc_passes
from .atc_cost import kernel_cost
from .atc_cost import launch_us as launch_cost
from .atc_passes import CUBE as CUBE_OPS
from .atc_passes import VIEWS, AtcKernel
from .atc_passes import flops as flops_of
from .dims import DimRole, evaluate, sweep
from .dtypes import np_type, onnx_type
from .emulator.harness import prebuild, run
from .errors import AscOnnxError
from .hardware import CHIPS, FACTS, UNFUSED_END, chip_of, corner, emulator_table, value
from .kernels import of
from .package import Kernel
from .soc import Soc
from .verify_kernels import body_shapes, data_shape


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
    """One CANN kernel of the unfused side at one end of its measured spread."""

    op_type: str             # the CANN kernel (``MatMulV2``, ``Add``, ``LayerNormV3``)
    bytes: int
    flops: float
    us: float
    op_types: tuple[str, ...] = ()  # the ONNX nodes it runs
    measured: bool = False
    passes: tuple[str, ...] = ()
    rule: str = ""
    l2_bytes: int = 0        # of what it reads, L2 hits


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


#: The least a launch costs (us), however the line and the round trips fall.
LAUNCH_FLOOR_US = 0.2


def launch_us(soc: Soc, mixed: bool = False, overrides: Mapping[str, float] | None = None,
              block_dim: int = 0) -> float:
    """A fused kernel's launch on ``block_dim`` cores (all of them if 0), from the launch line the measured kernels
    give (:func:`asc_onnx.atc_cost.launch_us`, at the end opposite to the unfused side's) less the two DMA round
    trips its body already counts; a 910B kernel of cube and vector cores (MIX) pays the mixed launch's extra
    too."""
    o = dict(overrides or {})
    end = -int(o.get(UNFUSED_END, 0))
    # The measured kernels the line is fitted to finish tiny data in that time whole, a load and a store round trip
    # included; the emulator counts those round trips in the fused kernel's body, so they leave its launch.
    trips = 2 * value(soc.chip, "dma_latency_cycles", o) / value(soc.chip, "clock", o) * 1e6
    t = max(LAUNCH_FLOOR_US, launch_cost(block_dim or soc.vector_cores, end) - trips)
    if mixed and "mix_launch_us" in FACTS[soc.name]:  # (a 910B family constant)
        t += value(soc.chip, "mix_launch_us", o)
    return t


def l2_hits(chain: Sequence[AtcKernel], chip: str) -> list[int]:
    """Per kernel of a chain in run order, the bytes it reads that an earlier kernel wrote while they fit in L2:
    the tensor and everything moved since its write within the L2's size (none on 310P, which has no L2 the
    emulator models)."""
    if CHIPS[chip_of(chip)].family == "Ascend310P":
        return [0] * len(chain)
    size = value(chip, "l2_bytes")
    written: dict[str, tuple[int, float]] = {}  # tensor -> (bytes, traffic when written)
    traffic = 0.0
    out = []
    for k in chain:
        out.append(sum(b for name, b in k.reads if name in written and traffic - written[name][1] + b <= size))
        traffic += k.bytes
        written.update({name: (b, traffic) for name, b in k.writes})
    return out


def atc_costs(chain: Sequence[AtcKernel], soc: Soc, overrides: Mapping[str, float] | None = None) -> list[NodeCost]:
    """Each CANN kernel of a chain costed from measurements, at the end of its spread ``overrides`` names
    (``UNFUSED_END``: -1 its fastest runs, 0 its medians, +1 its slowest)."""
    return atc_costs_at(chain, soc, (int((overrides or {}).get(UNFUSED_END, 0)),))[0]


def atc_costs_at(chain: Sequence[AtcKernel], soc: Soc, ends: Sequence[int]) -> list[list[NodeCost]]:
    """:func:`atc_costs` at each of ``ends`` (-1, 0, +1), from one pass over the chain."""
    out: list[list[NodeCost]] = [[] for _ in ends]
    for k, hit in zip(chain, l2_hits(chain, soc.chip)):
        c = kernel_cost(k, soc.chip, hit)
        spread = (c.lo, c.us, c.hi)
        for costs, end in zip(out, ends):
            costs.append(NodeCost(k.kernel, k.bytes, k.flops, spread[end + 1], tuple(k.op_types), c.measured,
                                  tuple(k.passes), c.rule, hit))
    return out


def unfused_nodes(k: Kernel, inputs: Sequence[np.ndarray], soc: Soc, overrides: Mapping[str, float] | None = None,
                  static: bool = False) -> list[NodeCost]:
    """The op's body as ATC would run it on inputs of these shapes: its CANN kernels after the passes for the chip
    and shape mode, each costed from measurements."""
    sizes = body_shapes(k, inputs)
    if not sizes:  # onnx cannot size the body: every value at the data's shape
        shape = data_shape(k, inputs)
        sizes = {v: shape for n in k.op.function.node for v in [*n.input, *n.output] if v}
        sizes.update({n: a.shape for n, a in zip(k.op.input_names, inputs)})
    dtype = onnx_type(inputs[0])
    types = {v: dtype for v in sizes}
    types.update({n: onnx_type(a) for n, a in zip(k.op.input_names, inputs)})
    chain = atc_passes.kernels(list(k.op.function.node), sizes, types, soc.name, static)
    return atc_costs(chain, soc, overrides)


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
    fp32 = onnx_type(inputs[0]) == TensorProto.FLOAT
    elems = value(soc.chip, "vector_fp16_elems", o) * (0.5 if fp32 else 1.0)  # 64 float lanes a repeat
    cube = value(soc.chip, "cube_fp16_flops", o) * (value(soc.chip, "cube_fp32_share", o) if fp32 else 1.0)
    t = max(compulsory / value(soc.chip, "gm_bandwidth", o), flops / cube, vec / elems)
    return t * 1e6, int(compulsory), flops + vec


def estimate_at(k: Kernel, shapes: Sequence[Sequence[int]], soc: Soc, overrides: Mapping[str, float] | None = None,
                binding: Mapping[str, int] | None = None, static: bool = False) -> OpEstimate:
    """One fused op on inputs of these shapes: its kernel timed in the emulator (timing only) against what ATC
    would run for its nodes (``static``: ATC compiles the model at fixed shapes)."""
    shapes = [list(map(int, s)) for s in shapes]
    zero = np.zeros((), dtype=np_type(k.ir.dtypes[0]))
    inputs = [np.broadcast_to(zero, tuple(s)) for s in shapes]  # shapes only: nothing is allocated
    table = emulator_table(soc.chip, dict(overrides or {}))
    unfused = unfused_nodes(k, inputs, soc, overrides, static)
    bound, compulsory, work = bound_us(k, inputs, soc, overrides)
    mixed = of(k).cube and soc.has_data_copy_pad
    base = dict(op_type=k.op.op_type, binding=dict(binding or {}), shapes=shapes,
                unfused_us=sum(n.us for n in unfused), bound_us=bound, compulsory_bytes=compulsory, work=work,
                nodes=unfused)
    try:
        r = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, soc, values=False, timing=table)
    except AscOnnxError as exc:  # a fault, a refused tiling or a crashed run: this shape is not judged
        return OpEstimate(fused_us=math.inf, body_us=math.inf, efficiency=0.0, bottleneck="", error=str(exc),
                          launch_us=launch_us(soc, mixed, overrides), **base)
    launch = launch_us(soc, mixed, overrides, r.block_dim)
    t = r.time or {}
    clock = float(t.get("clock_hz", table["clock_hz"]))
    body = float(t.get("cycles", 0.0)) / clock * 1e6
    busy = {p: c / clock * 1e6 for p, c in dict(t.get("busy", {})).items() if c}
    return OpEstimate(fused_us=body + launch, body_us=body, launch_us=launch, efficiency=bound / body if body else 0.0,
                      bottleneck=max(busy, key=busy.get) if busy else "", busy_us=busy,
                      hbm_bytes=int(t.get("hbm_bytes", 0)), l2_bytes=int(t.get("l2_bytes", 0)),
                      vec_read_hbm=int(t.get("vec_read_hbm", 0)), vec_read_l2=int(t.get("vec_read_l2", 0)), **base)


def estimate(k: Kernel, binding: Mapping[str, int], soc: Soc, overrides: Mapping[str, float] | None = None,
             instance: int = 0, static: bool = False) -> OpEstimate:
    """One fused op at one binding of the dynamic dims (its instance's shapes there)."""
    shapes = [bind(s, binding) for s in k.op.instances[instance].input_shapes]
    return estimate_at(k, shapes, soc, overrides, binding, static)


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
        nodes = sum(len(c.op_types) or 1 for c in e.nodes)
        passes = sorted({p for c in e.nodes for p in c.passes})
        how = (f"; ATC runs them as {len(e.nodes)} kernels after its {', '.join(passes)} (its own fusion is what the "
               f"op loses to)" if passes else f"; ATC runs them as {len(e.nodes)} kernels, none fused by its passes")
        return (f"the timing model estimates it slower than its {nodes} unfused nodes at {label(e.binding)}: "
                f"{e.fused_us:.1f} us fused against {e.unfused_us:.1f} us unfused with every assumption at its slow "
                f"end ({n.fused_us:.1f} against {n.unfused_us:.1f} us at the table's values; estimates){how}")


def static_shapes(model: ModelProto, shape_map: Mapping[str, Sequence[int]]) -> bool:
    """ATC compiles the model at fixed shapes: every input dim is a number, or the user gave the input's shape
    (atc.sh passes it as ``--input_shape``)."""
    weights = {t.name for t in model.graph.initializer}
    return all(vi.name in shape_map or all(d.HasField("dim_value") and d.dim_value > 0
                                            for d in vi.type.tensor_type.shape.dim)
               for vi in model.graph.input if vi.name not in weights)


def judge(kernels: Sequence[Kernel], model: ModelProto, shape_map: Mapping[str, Sequence[int]], soc: Soc,
          overrides: Mapping[str, float] | None = None, report: Any = None,
          binds: Sequence[Mapping[str, int]] | None = None) -> list[Judgement]:
    """Every kernel at every binding (:func:`bindings`, or ``binds`` where the caller has them) and every distinct
    shape its instances have there, at the table's values and at the slow corner; with ``overrides``, at those
    values alone, where the decision is then taken (to see a decision at one point of the ranges)."""
    prebuild([(k.ir, k.files, f"{k.op.op_type}TilingData", d, soc) for k in kernels for d in k.ir.dtypes[:1]])
    slow = corner(soc.chip, slow=True)
    out = []
    binds = bindings(model, shape_map) if binds is None else binds
    static = static_shapes(model, shape_map)
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
                ests.append(estimate(k, b, soc, overrides, instance=j, static=static))
                # with ``overrides`` the decision is taken at them: one estimate serves both lists
                worst.append(ests[-1] if overrides is not None else estimate(k, b, soc, slow, j, static))
        out.append(Judgement(k.op.op_type, ests, worst))
    return out


class _Sizer:
    """A model made ready for onnx's shape inference at any binding: its large weights as inputs (inference needs
    their shapes, not their bytes) and its value_info cleared; copied once, then inferred once per binding."""

    def __init__(self, model: ModelProto, shape_map: Mapping[str, Sequence[int]]) -> None:
        m = ModelProto()
        m.CopyFrom(model)
        g = m.graph
        big = [t for t in g.initializer if math.prod(t.dims) > 4096 or t.external_data]
        for t in big:
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        self.keep = [t for t in g.initializer if not (math.prod(t.dims) > 4096 or t.external_data)]
        del g.initializer[:]
        g.initializer.extend(self.keep)
        del g.value_info[:]
        self.model = m
        # each dim an input's binding sets: (dim, the number --input-shape gives or None, else its name)
        self.dims = []
        for vi in g.input:
            given = shape_map.get(vi.name)
            for j, d in enumerate(vi.type.tensor_type.shape.dim):
                if given is not None and j < len(given):
                    self.dims.append((d, int(given[j]), ""))
                elif d.dim_param:
                    self.dims.append((d, None, d.dim_param))

    def at(self, binding: Mapping[str, int]) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
        """Every value's inferred shape and element type with the inputs at ``binding`` (empty where onnx cannot
        size the model)."""
        top = max(binding.values(), default=1)
        for d, given, param in self.dims:
            d.dim_value = given if given is not None else int(binding.get(param, top))
        try:
            m = onnx.shape_inference.infer_shapes(self.model, data_prop=True)
        except Exception:  # noqa: BLE001 - a model onnx cannot size: every node unsized
            return {}, {}
        shapes, types = {}, {}
        for v in [*m.graph.input, *m.graph.value_info, *m.graph.output]:
            tt = v.type.tensor_type
            if not tt.HasField("shape"):
                continue
            dims = tuple(d.dim_value for d in tt.shape.dim if d.WhichOneof("value") == "dim_value")
            if len(dims) == len(tt.shape.dim):
                shapes[v.name] = dims
                types[v.name] = tt.elem_type
        for t in self.keep:
            shapes[t.name] = tuple(t.dims)
            types[t.name] = t.data_type
        return shapes, types


def model_times(asc_model: ModelProto, judgements: Sequence[Judgement], kernels: Sequence[Kernel],
                shipped: set[str], binds: Sequence[Mapping[str, int]], shape_map: Mapping[str, Sequence[int]],
                soc: Soc, static: bool = False) -> list[dict[str, Any]]:
    """The whole model at each binding, by CANN kernel and fused op: unfused (what ATC would run for every original
    node) and fused (each shipped fused node at its kernel's estimate, the rest as ATC would run them), at the
    table values and, under ``slow_corner``, with every assumption at its slow end (the judge's slow estimates of
    the fused nodes against the fastest measured runs of the kernels they replace; the kernels both sides run at
    their slowest runs, which makes the ratio least). Nodes onnx cannot size are counted, not costed. The model is
    read once for every binding."""
    sizer = _Sizer(asc_model, shape_map)
    by_node = {inst.node: inst for k in kernels for inst in k.op.instances}
    judged = {j.op_type: j for j in judgements}
    fused_nodes, others = [], []
    for node in atc_passes.views(asc_model.graph.node):
        if node.name in by_node and node.op_type in judged:
            fused_nodes.append((node.op_type, by_node[node.name]))
        else:
            others.append((node, [v for v in (*node.input, *node.output) if v]))
    out = []
    for binding in binds:
        shapes, types = sizer.at(binding)
        mine = [(op_type, [list(bind(s, binding)) for s in inst.input_shapes]) for op_type, inst in fused_nodes]
        rest = [node for node, names in others
                if node.op_type in VIEWS or (node.output and all(v in shapes for v in names))]
        unsized = len(others) - len(rest)
        out.append(_model_time(mine, rest, unsized, judged, shipped, binding, shapes, types, soc, static))
    return out


def _model_time(mine: Sequence[tuple[str, list[list[int]]]], rest: Sequence[atc_passes.NodeView], unsized: int,
                judged: Mapping[str, Judgement], shipped: set[str], binding: Mapping[str, int],
                shapes: Mapping[str, tuple[int, ...]], types: Mapping[str, int], soc: Soc, static: bool
                ) -> dict[str, Any]:
    """:func:`model_times` at one binding: ``mine`` the judged fused nodes (op type, input shapes there), ``rest``
    the sized nodes ATC runs as they are."""
    chain = atc_passes.kernels(rest, shapes, types, soc.name, static)
    # The nodes both sides run alike are at their slowest runs in the slow corner: the larger the common
    # part, the smaller the ratio of the two sides.
    common = atc_costs_at(chain, soc, (0, 1))
    out: dict[str, Any] = {}
    for slow in (False, True):
        unfused: dict[str, float] = {}
        fused: dict[str, float] = {}
        missing = 0
        for op_type, key in mine:
            ests = judged[op_type].slow if slow else judged[op_type].estimates
            est = next((e for e in ests if e.shapes == key and e.binding == dict(binding)), None)
            if est is None:
                missing += 1
                continue
            for n in est.nodes:
                unfused[n.op_type] = unfused.get(n.op_type, 0.0) + n.us
            if op_type in shipped and est.error is None:
                fused[op_type] = fused.get(op_type, 0.0) + est.fused_us
            else:
                for n in est.nodes:
                    fused[n.op_type] = fused.get(n.op_type, 0.0) + n.us
        for c in common[slow]:
            unfused[c.op_type] = unfused.get(c.op_type, 0.0) + c.us
            fused[c.op_type] = fused.get(c.op_type, 0.0) + c.us
        side = {"unfused_us": sum(unfused.values()), "fused_us": sum(fused.values()),
                "unfused_by_op_type": dict(sorted(unfused.items(), key=lambda x: -x[1])),
                "fused_by_op_type": dict(sorted(fused.items(), key=lambda x: -x[1]))}
        if slow:
            out["slow_corner"] = side
        else:
            out.update({"binding": dict(binding), **side, "unsized_nodes": unsized + missing})
    return out


def model_nodes(model: ModelProto, binding: Mapping[str, int], shape_map: Mapping[str, Sequence[int]], soc: Soc,
                static: bool) -> list[dict[str, Any]]:
    """Every node of the original model at one binding as ATC would run it: its name, op type, the CANN kernel it
    is costed as (after ATC's passes; the nodes a pass puts into one kernel name its first node), its input
    shapes, ``measured`` or not, and the kernel's estimate at the table values and both corners (us)."""
    shapes, types = _Sizer(model, shape_map).at(binding)
    nodes = list(model.graph.node)
    chain = atc_passes.kernels(nodes, shapes, types, soc.name, static)
    ends = [atc_costs(chain, soc, o) for o in (None, corner(soc.chip, slow=True), corner(soc.chip, slow=False))]
    where = {name: i for i, k in enumerate(chain) for name in k.nodes}
    out = []
    for n in nodes:
        i = where.get(n.name)
        row: dict[str, Any] = {"name": n.name, "op_type": n.op_type,
                               "input_shapes": [list(shapes[x]) if x in shapes else None for x in n.input]}
        if i is None:
            row.update(kernel=None, why="a view (no data moves)" if n.op_type in VIEWS else "unsized")
        elif chain[i].nodes[0] != n.name:
            row.update(kernel=chain[i].kernel, in_kernel_of=chain[i].nodes[0])
        else:
            t, w, f = (e[i] for e in ends)
            row.update(kernel=t.op_type, passes=list(t.passes), measured=t.measured, rule=t.rule,
                       us=round(t.us, 3), slow_corner_us=round(w.us, 3), fast_corner_us=round(f.us, 3))
        out.append(row)
    return out


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


__all__ = ["Judgement", "NodeCost", "OpEstimate", "bind", "bindings", "bound_us", "estimate",
           "estimate_at", "judge", "label", "launch_us", "model_nodes", "model_times", "record",
           "static_shapes", "unfused_nodes"]
