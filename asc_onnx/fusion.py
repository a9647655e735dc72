"""What the stages hand each other about a fusion: :class:`Fusion`, one subgraph the match stage (named rules and
the generic region passes) hands to the rewrite; :class:`FusedOp`, one fused op type the rewrite hands to the
kernel classes (its function body and every node that uses it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import onnx_graphsurgeon as gs
from onnx import FunctionProto, NodeProto


@dataclass(frozen=True, eq=False)
class Fusion:
    """One subgraph to replace by a fused node: what the rewrite stage needs, nothing more.

    Attributes:
        rule: rule name; op_name: stem of the op type; kernel: kernel class; family: module.
        nodes: the matched nodes, in graph order.
        inputs / input_names: fused-node inputs and their formal names in the function body.
        outputs / output_names: fused-node outputs and formal names (main output first).
        operands: node -> its inputs in the rule's canonical operand order (commutative ops
            reordered as the pattern writes them, so equal subgraphs give equal bodies).
        consts: scalar constants the pattern captured by name (eps ...).
        derived: values the body computes itself instead of taking them as inputs (the rule's ``derive``):
            (formal name, the graph tensor it stands for, what writes its body nodes at an opset).
    """

    rule: str
    op_name: str
    kernel: str
    family: str
    nodes: tuple[gs.Node, ...]
    inputs: tuple[gs.Tensor, ...]
    input_names: tuple[str, ...]
    outputs: tuple[gs.Tensor, ...]
    output_names: tuple[str, ...]
    operands: dict[int, tuple[gs.Tensor, ...]] = field(repr=False)
    consts: tuple[tuple[str, float], ...] = ()
    derived: tuple[tuple[str, gs.Tensor, Callable[[int], list[NodeProto]]], ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class Instance:
    """One fused node of the rewritten model."""

    node: str
    source_nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    input_dtypes: tuple[int, ...]
    output_dtypes: tuple[int, ...]
    input_shapes: tuple[tuple[object, ...] | None, ...]
    output_shapes: tuple[tuple[object, ...] | None, ...]
    params: tuple[float, ...] = ()  # the op's parameters (``FusedOp.params``) at this node, exact in fp32


@dataclass(frozen=True)
class FusedOp:
    """A fused op type: its function body, formal I/O and every place it is used.

    ``dtype_columns`` (distinct input+output dtype tuples) become the OpDef's dtype columns;
    ``function`` is the subgraph the kernel must reproduce.
    """

    op_type: str
    rule: str
    family: str
    kernel: str
    signature: str
    function: FunctionProto
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    instances: tuple[Instance, ...]
    params: tuple[str, ...] = ()  # function attributes (``p0``..), one float scalar each
    param_types: tuple[int, ...] = ()  # their element types (the body computes in them)
    derived: tuple[str, ...] = ()  # values of the matched region the body computes itself (a causal mask)

    @property
    def dtype_columns(self) -> tuple[tuple[int, ...], ...]:
        """Distinct (inputs..., outputs...) dtype tuples in first-use order."""
        seen: dict[tuple[int, ...], None] = {}
        for inst in self.instances:
            seen.setdefault(inst.input_dtypes + inst.output_dtypes, None)
        return tuple(seen)
