"""A fusion: one subgraph the match stage (named rules and the generic region passes) hands to the rewrite."""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx_graphsurgeon as gs


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
