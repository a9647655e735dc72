"""The pattern DSL: a pattern is a Python function that reads like the ONNX it matches.

    from asc_onnx.pattern import op, Const, rule

    def silu(x):
        return op.Mul(x, op.Sigmoid(x))

    RULES = [rule("SiLU", silu, op_name="SiLU", kernel="pointwise",
                  doc="x * Sigmoid(x), the SiLU/Swish activation")]

* Each parameter of a pattern function without a default is a variable; the fused op's inputs are the
  variables in parameter order (every variant of one rule takes the same parameters, less the
  optional inputs of its absent nodes, below).
* ``op.<OpType>(*inputs, **attrs)`` is a node. Attribute values match exactly (floats within
  1e-6 relative); :data:`ANY` matches anything; a callable is a predicate on the value.
  ``_outputs=n`` gives a node with ``n`` outputs (returns a tuple), ``_domain`` a domain.
* A Python number as an input is a scalar constant that must match within a dtype-aware
  tolerance; ``Const("eps")`` matches any scalar constant and captures its value by name;
  ``ConstTensor()`` matches any small constant tensor (the check reads it from the matched node).
* The function returns the fused op's main output, or a tuple: main output first, then
  values that become extra outputs only where something outside the match reads them
  (the residual sum of Add+LayerNorm).
* Operand order of commutative ops (Add, Mul, Max, Min ...) is the matcher's job: write
  one order.
* ``_optional="group"`` makes a node optional: the rule also matches with every node of that
  group absent, each passing its first input through (``op.Add(s, mask, _optional="mask")`` is an
  attention with or without a mask). A pattern with k groups is 2**k variants, largest tried
  first; a variable only an absent node read is not an input of that variant (an optional input).

A ``check(match) -> str | None`` runs after a structural match; a string is the reason the
match is refused and shows up as a near miss in the report.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

ANY: Any = object()


class PValue:
    """A value in a pattern: a variable, a constant or a node output."""

    __slots__ = ()


@dataclass(eq=False)
class PVar(PValue):
    """A pattern variable (a fused-op input)."""

    name: str


@dataclass(eq=False)
class PConst(PValue):
    """A scalar constant: a fixed ``value`` or, with ``name``, any scalar captured by name."""

    value: float | None = None
    name: str | None = None


@dataclass(eq=False)
class PNode:
    """A node in a pattern."""

    op_type: str
    inputs: list[PValue]
    attrs: dict[str, Any]
    num_outputs: int = 1
    domain: str = ""
    outputs: list[POut] = field(default_factory=list)
    optional: str | None = None  # the group of optional nodes this node belongs to


@dataclass(eq=False)
class POut(PValue):
    """Output ``index`` of a pattern node."""

    node: PNode
    index: int = 0


@dataclass(eq=False)
class PTensor(PValue):
    """A small constant tensor of any value (a Reshape's target, an Expand's shape): matched as a constant, kept in
    the fused op's body, read by the rule's check."""


def ConstTensor() -> PTensor:  # noqa: N802 - reads like a pattern node
    """A small constant tensor of any value; the rule's ``check`` says which values it serves."""
    return PTensor()


def Const(name_or_value: str | float) -> PConst:  # noqa: N802 - reads like a pattern node
    """A scalar constant: ``Const(0.5)`` must equal 0.5; ``Const("eps")`` captures any scalar."""
    if isinstance(name_or_value, str):
        return PConst(name=name_or_value)
    return PConst(value=float(name_or_value))


def _as_value(v: object) -> PValue:
    if isinstance(v, PValue):
        return v
    if isinstance(v, (int, float)):
        return PConst(value=float(v))
    raise TypeError(f"pattern input must be a pattern value or a number, not {type(v).__name__}")


class _OpBuilder:
    """``op.Mul(a, b)`` builds a pattern node; see the module docstring."""

    def __getattr__(self, op_type: str) -> Callable[..., Any]:
        if op_type.startswith("_"):
            raise AttributeError(op_type)

        def make(*inputs: object, _outputs: int = 1, _domain: str = "", _optional: str | None = None, **attrs: Any):
            if _optional is not None and (_outputs != 1 or not inputs):
                raise TypeError(f"optional {op_type}: an optional node has one output and passes its first input")
            node = PNode(op_type, [_as_value(i) for i in inputs], attrs, _outputs, _domain, optional=_optional)
            node.outputs = [POut(node, i) for i in range(_outputs)]
            return node.outputs[0] if _outputs == 1 else tuple(node.outputs)

        return make


op = _OpBuilder()


@dataclass(eq=False)
class Pattern:
    """One variant of a rule: its variables, outputs and nodes (root last)."""

    fn_name: str
    variables: tuple[str, ...]
    outputs: tuple[POut, ...]
    nodes: tuple[PNode, ...]

    @property
    def root(self) -> PNode:
        """The node writing the main output: the matcher's anchor."""
        return self.outputs[0].node

    @property
    def size(self) -> int:
        """Number of nodes: larger patterns are tried first."""
        return len(self.nodes)


def _collect(outs: Sequence[POut]) -> list[PNode]:
    """The nodes the outputs depend on, inputs before their readers."""
    seen: dict[int, PNode] = {}
    order: list[PNode] = []

    def visit(node: PNode) -> None:
        if id(node) in seen:
            return
        seen[id(node)] = node
        for v in node.inputs:
            if isinstance(v, POut):
                visit(v.node)
        order.append(node)

    for o in outs:
        visit(o.node)
    return order


def _without(outs: tuple[POut, ...], nodes: Sequence[PNode], absent: frozenset[str]) -> tuple[POut, ...]:
    """Copies of ``outs`` and their nodes with every node of the ``absent`` groups passing its first input."""
    copies: dict[int, PNode] = {}

    def value(v: PValue) -> PValue:
        if not isinstance(v, POut):
            return v
        if v.node.optional in absent:
            return value(v.node.inputs[0])
        return copies[id(v.node)].outputs[v.index]

    for n in nodes:
        if n.optional in absent:
            continue
        c = PNode(n.op_type, [value(v) for v in n.inputs], dict(n.attrs), n.num_outputs, n.domain)
        c.outputs = [POut(c, i) for i in range(n.num_outputs)]
        copies[id(n)] = c
    out = tuple(value(o) for o in outs)
    if not all(isinstance(o, POut) for o in out):
        raise TypeError(f"an output would be a bare input with optional groups {sorted(absent)} absent")
    return out  # type: ignore[return-value]


def build_patterns(fn: Callable[..., Any]) -> list[Pattern]:
    """Call a pattern function with fresh variables and collect its node DAG: one pattern per choice of
    optional groups present (all of them first)."""
    params = [name for name, p in inspect.signature(fn).parameters.items() if p.default is inspect.Parameter.empty]
    result = fn(*[PVar(p) for p in params])
    outs = result if isinstance(result, tuple) else (result,)
    if not outs or not all(isinstance(o, POut) for o in outs):
        raise TypeError(f"pattern {fn.__name__} must return node outputs, not {result!r}")
    order = _collect(outs)
    used = {v.name for n in order for v in n.inputs if isinstance(v, PVar)}
    missing = [p for p in params if p not in used]
    if missing:
        raise TypeError(f"pattern {fn.__name__}: parameters {missing} are not used")
    groups = sorted({n.optional for n in order if n.optional is not None})
    if any(o.node.optional is not None for o in outs):
        raise TypeError(f"pattern {fn.__name__}: an output node cannot be optional")
    patterns = []
    for mask in range(2 ** len(groups)):
        absent = frozenset(g for i, g in enumerate(groups) if mask >> i & 1)
        vouts = _without(outs, order, absent) if absent else outs
        nodes = _collect(vouts)
        have = {v.name for n in nodes for v in n.inputs if isinstance(v, PVar)}
        name = fn.__name__ + "".join(f"-{g}" for g in sorted(absent))
        patterns.append(Pattern(name, tuple(p for p in params if p in have), tuple(vouts), tuple(nodes)))
    return patterns


def build_pattern(fn: Callable[..., Any]) -> Pattern:
    """The pattern of ``fn`` with every optional node present."""
    return build_patterns(fn)[0]


_OP_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")


@dataclass(frozen=True)
class Rule:
    """A named fusion: one or more pattern variants, a check and the fused op's name.

    Attributes:
        name: the rule name users pass to ``--only``/``--skip``.
        op_name: CamelCase stem of the fused op type (``AscRmsNorm``).
        variants: structural forms, tried largest first.
        kernel: kernel class, a name in the registry (:data:`asc_onnx.kernels.CLASSES`).
        doc: one line for ``asc-onnx patterns``.
        check: optional ``check(match) -> reason | None``.
        family: the pattern module the rule came from.
        derive: optional ``derive(match) -> {variable: nodes(opset)}``, after the check: variables the fused op's
            body computes itself (a causal mask, from q's and v's shapes), so they are not its inputs; each maps
            to what writes the body's nodes for that value at the model's opset.
    """

    name: str
    op_name: str
    variants: tuple[Pattern, ...]
    kernel: str
    doc: str
    check: Callable[[Any], str | None] | None = None
    family: str = ""
    derive: Callable[[Any], dict[str, Callable[[int], list[Any]]]] | None = None

    @property
    def size(self) -> int:
        """Size of the largest variant (0 for the generic chain rule)."""
        return max((v.size for v in self.variants), default=0)

    @property
    def generic(self) -> bool:
        """True for the generic elementwise-chain rule, which has no pattern variants."""
        return not self.variants


def rule(name: str, *variants: Callable[..., Any], op_name: str, kernel: str, doc: str,
         check: Callable[[Any], str | None] | None = None,
         derive: Callable[[Any], dict[str, Callable[[int], list[Any]]]] | None = None) -> Rule:
    """Define a rule from pattern functions; validates names and variable lists early."""
    if not kernel or not isinstance(kernel, str):
        raise ValueError(f"rule {name}: kernel must name a kernel class, not {kernel!r}")
    if not _OP_NAME.match(op_name):
        raise ValueError(f"rule {name}: op_name must be CamelCase letters and digits, not {op_name!r}")
    if not variants:
        raise ValueError(f"rule {name}: needs at least one pattern function")
    built = tuple(p for v in variants for p in build_patterns(v))
    first = built[0]
    for b in built[1:]:
        # A variant without an optional input takes the others in the same order.
        if [v for v in first.variables if v in b.variables] != list(b.variables) \
                or len(b.outputs) != len(first.outputs):
            raise ValueError(f"rule {name}: variant {b.fn_name} takes {b.variables} -> {len(b.outputs)} outputs, "
                             f"but {first.fn_name} takes {first.variables} -> {len(first.outputs)}")
    ordered = tuple(sorted(built, key=lambda p: -p.size))
    return Rule(name, op_name, ordered, kernel, doc, check, derive=derive)


def generic_rule(name: str, *, op_name: str, doc: str, kernel: str = "pointwise") -> Rule:
    """The rule that runs a kernel class's generic region pass (:mod:`asc_onnx.kernels`)."""
    return Rule(name, op_name, (), kernel, doc)


__all__ = ["generic_rule", "ANY", "Const", "ConstTensor", "PTensor", "op", "rule", "Rule", "Pattern", "PVar",
           "PConst", "PNode", "POut", "build_pattern", "build_patterns"]
