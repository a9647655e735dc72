"""What ATC would run: a list of ONNX nodes as the CANN kernels ATC makes of them, after the fusion passes it applies.

The unfused side of every comparison is costed as these kernels (:mod:`asc_onnx.atc_cost`), never as our own
designs. The passes are a closed list, each with the page of CANN's "graph fusion and UB fusion rules"
(图融合和UB融合规则参考, ``graphubfusionref``) that states it; a pass applies only on the chips and shape modes
its page names. Applied (:data:`PASSES`):

* ``BatchMatMulFusionPass`` (every chip, static and dynamic): a Transpose that swaps only the last two dims and
  feeds a MatMul is taken into the MatMul (its transpose flag); a head transpose ([0, 2, 1, 3]) is not.
* ``MatMulBiasAddFusionPass`` (every chip): a MatMul whose only consumer adds a bias vector of its last dim is one
  kernel with the bias.
* ``LayerNormFusionPass`` and ``GeluFusionPass`` (Atlas A2, static shapes): a decomposed LayerNorm or GELU (erf or
  tanh) is one LayerNorm or Gelu kernel.
* ``TbeEltwiseFusionPass`` (310P, static shapes): up to 6 connected elementwise nodes are one kernel.
* ``TbeBatchMatmulElementWiseFusionPass`` (310P, static shapes): a MatMul and the one elementwise node after it
  (not Mul or AddN) are one kernel.

Not applied, and said so in the report (:data:`NOT_APPLIED`): ``FlashAttentionFusionPass`` (named only in an
msprof-analyze advisor list, not in the reference), ``SoftmaxSmallOpFusionPass`` (no page states when it applies
to an exported softmax) and AutoFuse (off by default).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import onnx

from .graph import attr
from .kernels.ir import IO_TYPES

REF = "https://www.hiascend.com/document/detail/en/canncommercial/800/graph/graphubfusionref/"
REF_ZH = "https://www.hiascend.com/doc_center/source/zh/CANNCommunityEdition/82RC1alpha001/maintenref/graphubfusionref/"

#: Each pass: (chips it runs on, "static"/"any" shapes, its page).
PASSES: dict[str, tuple[str, str, str]] = {
    "BatchMatMulFusionPass": ("any", "any", REF + "atlasrr_30_0029.html"),
    "MatMulBiasAddFusionPass": ("any", "any", REF + "atlasrr_30_0001.html (graph fusion patterns index)"),
    "LayerNormFusionPass": ("Ascend910B", "static", REF + "atlasrr_30_0001.html (graph fusion patterns index)"),
    "GeluFusionPass": ("Ascend910B", "static", REF + "atlasrr_30_0001.html (graph fusion patterns index)"),
    "TbeEltwiseFusionPass": ("Ascend310P", "static", REF + "atlasrr_30_0120.html (UB fusion patterns index)"),
    "TbeBatchMatmulElementWiseFusionPass": ("Ascend310P", "static", REF_ZH + "atlasrr_30_0165.html"),
}
NOT_APPLIED = {
    "FlashAttentionFusionPass": "named only in an msprof-analyze advisor list, not in the fusion rules reference",
    "SoftmaxSmallOpFusionPass": "no page of the reference states when it applies to an exported softmax",
    "AutoFuse": "off by default (cann_facts.md); not on 310P",
}

VIEWS = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Shape", "Constant", "Size", "Dropout"}
CUBE = {"MatMul", "Gemm", "Conv", "ConvTranspose", "MatMulInteger", "ConvInteger"}
ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Neg", "Exp", "Log", "Abs", "Relu", "Sigmoid",
               "Tanh", "Erf", "Cast", "Where", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Max",
               "Min", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "Softplus", "Not", "And", "Or", "IsNaN", "IsInf",
               "Sin", "Cos", "Floor", "Ceil", "Round", "Sign", "Mod", "PRelu", "Elu", "Selu", "Gelu", "Mish",
               "BitShift", "Xor", "Softsign", "ThresholdedRelu", "Celu", "Atan", "Tan", "Asin", "Acos"}
REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare",
          "ReduceLogSumExp", "ArgMax", "ArgMin"}
#: The CANN kernel an ONNX op runs as, where its name differs (the rest keep their ONNX name).
KERNEL_OF = {"Softmax": "SoftmaxV2", "LayerNormalization": "LayerNormV3", "SimplifiedLayerNormalization": "RmsNorm",
             "RMSNormalization": "RmsNorm", "Slice": "SliceAiCore", "Concat": "ConcatD", "Gemm": "MatMulV2",
             "Transpose": "Transpose", "Gather": "GatherV2"}
#: The elementwise node a 310P MatMul takes into its kernel (the page's ElemWise1; not Mul or AddN).
MATMUL_EPILOGUES = {"Relu", "LeakyRelu", "Gelu", "Sigmoid", "Tanh", "Add", "Elu", "Softplus", "Selu", "PRelu"}


@dataclass
class AtcKernel:
    """One CANN kernel of the unfused side.

    Attributes:
        kernel: its CANN name (``MatMulV2``, ``Add``, ``LayerNormV3``).
        nodes: the ONNX nodes it runs (names), and ``op_types`` theirs.
        reads / writes: the GM tensors it reads and writes: (name, bytes).
        flops: cube FLOPs (2 x multiply-adds), 0 for a vector kernel.
        passes: the ATC passes that made it.
        dtype: its data's ONNX element type (the first output's).
        broadcast: an input of more than one element is smaller than the output (CANN's broadcast path, which
            its profiles show slower per byte).
        rows: a cube kernel's M (its output's second-last dim), 0 otherwise.
    """

    kernel: str
    nodes: list[str]
    op_types: list[str]
    reads: list[tuple[str, int]]
    writes: list[tuple[str, int]]
    flops: float = 0.0
    passes: list[str] = field(default_factory=list)
    dtype: int = onnx.TensorProto.FLOAT16
    broadcast: bool = False
    rows: int = 0

    @functools.cached_property
    def bytes(self) -> int:  # (read per kernel by every cost pass: the lists are not changed once made)
        return sum(b for _, b in self.reads) + sum(b for _, b in self.writes)


def applies(name: str, family: str, static: bool) -> bool:
    """Whether ATC applies pass ``name`` on a chip of ``family`` in this shape mode."""
    chips, mode, _ = PASSES[name]
    return chips in ("any", family) and (mode == "any" or static)


def swaps_last_two(node: onnx.NodeProto, rank: int) -> bool:
    """A Transpose whose perm swaps only the last two dims (what BatchMatMulFusionPass takes into a MatMul)."""
    perm = list(attr(node, "perm", []) or reversed(range(rank)))
    n = len(perm)
    return n >= 2 and perm == [*range(n - 2), n - 1, n - 2]


def flops(node: onnx.NodeProto, shapes: Mapping[str, Sequence[int]]) -> float:
    """2 x multiply-adds of a cube node; 0 where it is not one or is unsized."""
    if node.op_type not in CUBE or not node.output or node.output[0] not in shapes or len(node.input) < 2:
        return 0.0
    out, a, b = shapes[node.output[0]], shapes.get(node.input[0]), shapes.get(node.input[1])
    if a is None or b is None or not a:
        return 0.0
    if node.op_type in ("MatMul", "MatMulInteger"):
        k = a[-1]
    elif node.op_type == "Gemm":
        k = a[0] if attr(node, "transA", 0) else a[-1]
    else:  # Conv: each output element sums the weight's row
        k = math.prod(b[1:])
    return 2.0 * math.prod(out) * k


def _gelu_or_norm(start: str, nodes: Sequence[onnx.NodeProto], consumers: Mapping[str, list[int]],
                  small: set[str], taken: set[int]) -> list[int]:
    """The elementwise and reduce nodes that grow from ``start``: every input of each is ``start``, a node already
    in the set, or a small tensor (a weight, a constant); the nodes are in graph order."""
    inside: set[str] = {start}
    members: list[int] = []
    grew = True
    while grew:
        grew = False
        for tensor in list(inside):
            for i in consumers.get(tensor, []):
                n = nodes[i]
                if i in taken or i in members or n.op_type not in ELEMENTWISE | REDUCE | VIEWS:
                    continue
                if all(not x or x in inside or x in small for x in n.input):
                    members.append(i)
                    inside.update(o for o in n.output if o)
                    grew = True
    return sorted(members)


def _classify(start: str, members: Sequence[int], nodes: Sequence[onnx.NodeProto]) -> str:
    """``LayerNorm``, ``Gelu`` or ``""`` for a set grown from ``start``: a LayerNorm takes two means and a root; a
    GELU multiplies erf's or tanh's result by its input again (``start`` read twice or more; tanh's also cubes
    it: a Pow, or a third read)."""
    ops = [nodes[i].op_type for i in members]
    reads = sum(x == start for i in members for x in nodes[i].input)
    means = ops.count("ReduceMean")
    if means == 2 and "Sub" in ops and ("Sqrt" in ops or "Reciprocal" in ops):
        return "LayerNorm"
    if not means and "Mul" in ops and (("Erf" in ops and reads >= 2)
                                       or ("Tanh" in ops and ("Pow" in ops or reads >= 3) and reads >= 2)):
        return "Gelu"
    return ""


class NodeView:
    """A node's fields as plain Python values: the passes read each several times a node, and a protobuf field
    read costs several times a slot's (the whole-model estimate runs them on every node at every binding)."""

    __slots__ = ("name", "op_type", "input", "output", "attribute")

    def __init__(self, node: onnx.NodeProto) -> None:
        self.name, self.op_type = node.name, node.op_type
        self.input, self.output = tuple(node.input), tuple(node.output)
        self.attribute = node.attribute


def views(nodes: Sequence[onnx.NodeProto | NodeView]) -> list[NodeView]:
    """``nodes`` as :class:`NodeView` (those that already are kept)."""
    return [n if isinstance(n, NodeView) else NodeView(n) for n in nodes]


def kernels(nodes: Sequence[onnx.NodeProto | NodeView], shapes: Mapping[str, Sequence[int]], types: Mapping[str, int],
            family: str, static: bool, small: set[str] | None = None) -> list[AtcKernel]:
    """The CANN kernels ATC runs for ``nodes`` (in graph order) on a chip of ``family`` in this shape mode.

    ``shapes`` and ``types`` size every value; a value they do not size counts no bytes. ``small`` names the
    weights and constants a LayerNorm or GELU may read besides its data (default: every value of at most one
    dimension's elements, and every Constant's output)."""
    def nbytes(v: str) -> int:
        if not v or v not in shapes:
            return 0
        return math.prod(shapes[v]) * IO_TYPES.get(types.get(v, onnx.TensorProto.FLOAT), (None, 4))[1]

    nodes = views(nodes)

    consumers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for x in n.input:
            if x:
                consumers.setdefault(x, []).append(i)
    consts = {o for n in nodes if n.op_type == "Constant" for o in n.output}
    if small is None:
        small = consts | {v for v, s in shapes.items() if len(s) <= 1 or math.prod(s) <= max(s[-1:] or [1])}
    groups: list[tuple[list[int], str, list[str]]] = []  # (node indices, kernel, passes)
    taken: set[int] = set()

    def take(idx: list[int], kernel: str, passes: list[str]) -> None:
        groups.append((idx, kernel, passes))
        taken.update(idx)

    # GeluFusionPass, LayerNormFusionPass: a decomposed GELU or LayerNorm, grown from its data input
    if applies("LayerNormFusionPass", family, static) or applies("GeluFusionPass", family, static):
        for i, n in enumerate(nodes):
            if i in taken or n.op_type not in ("ReduceMean", "Erf", "Tanh", "Div", "Mul", "Pow"):
                continue
            for x in n.input:
                if not x or x in small:
                    continue
                members = _gelu_or_norm(x, nodes, consumers, small, taken)
                kind = _classify(x, members, nodes)
                if kind and applies(f"{kind}FusionPass", family, static) and i in members:
                    take(members, "LayerNormV3" if kind == "LayerNorm" else "Gelu", [f"{kind}FusionPass"])
                    break
    # BatchMatMulFusionPass: a last-two-dims Transpose into the MatMuls it feeds
    absorbed: dict[int, list[int]] = {}
    for i, n in enumerate(nodes):
        if i in taken or n.op_type != "Transpose" or not n.input or n.input[0] not in shapes:
            continue
        users = consumers.get(n.output[0], [])
        if users and swaps_last_two(n, len(shapes[n.input[0]])) and all(
                nodes[u].op_type in ("MatMul", "Gemm") and u not in taken for u in users):
            taken.add(i)
            for u in users:
                absorbed.setdefault(u, []).append(i)
    for i, n in enumerate(nodes):
        if i in taken or n.op_type not in CUBE:
            continue
        idx = sorted([i, *absorbed.get(i, [])])
        passes = ["BatchMatMulFusionPass"] if i in absorbed else []
        users = consumers.get(n.output[0], [])
        nxt = nodes[users[0]] if len(users) == 1 else None
        if (nxt is not None and users[0] not in taken and nxt.op_type == "Add" and n.op_type == "MatMul"
                and any(x in small for x in nxt.input)):
            idx.append(users[0])
            passes.append("MatMulBiasAddFusionPass")
            users = consumers.get(nxt.output[0], [])
            nxt = nodes[users[0]] if len(users) == 1 else None
        if (nxt is not None and users[0] not in taken and nxt.op_type in MATMUL_EPILOGUES
                and applies("TbeBatchMatmulElementWiseFusionPass", family, static)):
            idx.append(users[0])
            passes.append("TbeBatchMatmulElementWiseFusionPass")
        a = shapes.get(n.input[0], ())
        b = shapes.get(n.input[1], ()) if len(n.input) > 1 else ()
        kernel = ("BatchMatMulV2" if n.op_type == "MatMul" and len(a) > 2 and len(b) > 2 else
                  "MatMulV2" if n.op_type in ("MatMul", "Gemm") else n.op_type)
        take(sorted(idx), kernel, passes)
    # TbeEltwiseFusionPass: chains of up to 6 elementwise nodes, each intermediate read only inside the chain
    if applies("TbeEltwiseFusionPass", family, static):
        for i, n in enumerate(nodes):
            if i in taken or n.op_type not in ELEMENTWISE:
                continue
            chain = [i]
            while len(chain) < 6:
                users = [u for o in nodes[chain[-1]].output for u in consumers.get(o, [])]
                if len(users) != 1 or users[0] in taken or nodes[users[0]].op_type not in ELEMENTWISE:
                    break
                chain.append(users[0])
            if len(chain) > 1:
                take(chain, "EltwiseFused", ["TbeEltwiseFusionPass"])
    for i, n in enumerate(nodes):
        if i not in taken and n.op_type not in VIEWS:
            take([i], KERNEL_OF.get(n.op_type, n.op_type), [])

    out = []
    for idx, kernel, passes in sorted(groups, key=lambda g: g[0][0]):
        made = {o for i in idx for o in nodes[i].output if o}
        reads = list(dict.fromkeys(x for i in idx for x in nodes[i].input if x and x not in made and x not in consts))
        # written: what a node outside the kernel reads, or nothing reads (an output of the list)
        writes = [o for i in idx for o in nodes[i].output
                  if o and (o not in consumers or any(u not in idx for u in consumers[o]))]
        last = nodes[idx[-1]].output[0] if nodes[idx[-1]].output else ""
        size = math.prod(shapes.get(last, ()) or (1,))
        cube = next((nodes[i] for i in idx if nodes[i].op_type in CUBE), None)
        out.append(AtcKernel(kernel, [nodes[i].name for i in idx], [nodes[i].op_type for i in idx],
                             [(x, nbytes(x)) for x in reads], [(o, nbytes(o)) for o in writes],
                             sum(flops(nodes[i], shapes) for i in idx), passes,
                             types.get(last, onnx.TensorProto.FLOAT16),
                             any(1 < math.prod(shapes.get(x, (1,)) or (1,)) < size for x in reads),
                             int(shapes[cube.output[0]][-2]) if cube is not None and len(shapes.get(
                                 cube.output[0], ())) >= 2 else 0))
    return out


__all__ = ["AtcKernel", "NOT_APPLIED", "NodeView", "PASSES", "applies", "flops", "kernels", "swaps_last_two", "views"]
