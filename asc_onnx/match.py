"""Stage 3, match: find every rule's matches in one indexed pass, without editing the graph.

Indexes (nodes by op type, node positions, graph outputs) are built once per call to
:func:`match`; the producer/consumer links come from onnx-graphsurgeon. Rule variants run
largest first; a node claimed by a match is not offered to later ones. A structural match
is refused when an internal value is a graph output or is read outside the match, when a
tensor has a dtype no kernel takes, or when the rule's check gives a reason. Refusals that
got far enough are kept as near misses with their reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import onnx_graphsurgeon as gs

from .fusion import Fusion
from .graph import (
    COMMUTATIVE,
    FLOAT_TYPES,
    attrs_of,
    const_array,
    data_inputs,
    graph_output_ids,
    has_subgraphs,
    masked_scores,
    onnx_dtype,
    producer,
)
from .kernels import of
from .pattern import ANY, Pattern, PConst, POut, PTensor, PValue, PVar, Rule

#: Relative tolerance of pattern constants by the constant's element type.
CONST_RTOL = {onnx.TensorProto.FLOAT16: 1e-3, onnx.TensorProto.BFLOAT16: 8e-3,
              onnx.TensorProto.FLOAT: 1e-6, onnx.TensorProto.DOUBLE: 1e-9}


@dataclass(frozen=True)
class NearMiss:
    """A place where a rule almost matched, and why it did not."""

    rule: str
    node: str
    reason: str


@dataclass(frozen=True)
class MatchResult:
    """Output of the match stage."""

    fusions: tuple[Fusion, ...]
    near_misses: tuple[NearMiss, ...]


class MatchView:
    """What a rule's check sees of a structural match."""

    def __init__(self, pattern: Pattern, state: _State) -> None:
        self.pattern = pattern
        self._state = state

    def tensor(self, var: str) -> gs.Tensor:
        """The graph tensor bound to pattern variable ``var``."""
        return self._state.vars[var]

    def has(self, var: str) -> bool:
        """``var`` is an input of this variant (false for an optional input its absent nodes would read)."""
        return var in self._state.vars

    def has_node(self, op_type: str) -> bool:
        """This variant matched a node of ``op_type``."""
        return any(pn.op_type == op_type for pn in self.pattern.nodes)

    def const(self, name: str) -> float:
        """The value of a captured constant (``Const("eps")``)."""
        return self._state.consts[name]

    def dtype(self, var: str) -> int | None:
        """ONNX element type of a variable's tensor."""
        return onnx_dtype(self._state.vars[var])

    def shape(self, var: str) -> Sequence[object] | None:
        """Shape (ints and symbols) of a variable's tensor."""
        return self._state.vars[var].shape

    def node(self, op_type: str) -> gs.Node:
        """The first matched node of ``op_type`` (in pattern order)."""
        for pn in self.pattern.nodes:
            if pn.op_type == op_type:
                return self._state.nodes[id(pn)]
        raise KeyError(op_type)

    @property
    def nodes(self) -> list[gs.Node]:
        """The matched graph nodes, in pattern order."""
        return [self._state.nodes[id(pn)] for pn in self.pattern.nodes]

    @property
    def output(self) -> gs.Tensor:
        """The main output tensor."""
        return self._state.nodes[id(self.pattern.root)].outputs[self.pattern.outputs[0].index]


class _State:
    """Bindings of one match attempt; copied on each branch (patterns are small)."""

    __slots__ = ("nodes", "used", "vars", "consts", "operands")

    def __init__(self) -> None:
        self.nodes: dict[int, gs.Node] = {}
        self.used: set[int] = set()
        self.vars: dict[str, gs.Tensor] = {}
        self.consts: dict[str, float] = {}
        self.operands: dict[int, tuple[gs.Tensor, ...]] = {}

    def copy(self) -> _State:
        s = _State()
        s.nodes, s.used, s.vars = dict(self.nodes), set(self.used), dict(self.vars)
        s.consts, s.operands = dict(self.consts), dict(self.operands)
        return s


def _close(a: float, b: float, rtol: float) -> bool:
    if a == b:
        return True
    return abs(a - b) <= rtol * max(abs(a), abs(b))


def _attr_ok(spec: object, value: object) -> bool:
    if spec is ANY:
        return True
    if callable(spec):
        return bool(spec(value))
    if isinstance(spec, float) and isinstance(value, (int, float)):
        return _close(spec, float(value), 1e-6)
    if isinstance(spec, (list, tuple)) and isinstance(value, (list, tuple)):
        return len(spec) == len(value) and all(_attr_ok(s, v) for s, v in zip(spec, value))
    if isinstance(value, bytes):
        value = value.decode()
    return spec == value


class _Matcher:
    """Backtracking structural matcher for one pattern variant; records its deepest failure."""

    def __init__(self, claimed: set[int]) -> None:
        self.claimed = claimed
        self.best_depth = 0
        self.best_reason = ""

    def fail(self, st: _State, reason: str) -> None:
        depth = len(st.nodes)
        if depth > self.best_depth:
            self.best_depth, self.best_reason = depth, reason

    def value(self, pv: PValue, t: gs.Tensor, st: _State) -> Iterator[_State]:
        if isinstance(pv, PVar):
            bound = st.vars.get(pv.name)
            if bound is None:
                st = st.copy()
                st.vars[pv.name] = t
                yield st
            elif bound is t:
                yield st
            else:
                self.fail(st, f"'{pv.name}' would bind both {bound.name!r} and {t.name!r}")
            return
        if isinstance(pv, PTensor):
            if const_array(t, limit=64) is None:
                self.fail(st, f"{t.name!r} is not a small constant tensor")
                return
            yield st
            return
        if isinstance(pv, PConst):
            arr = const_array(t, limit=1)
            if arr is None or arr.size != 1 or not np.issubdtype(arr.dtype, np.number):
                self.fail(st, f"{t.name!r} is not a scalar constant")
                return
            got = float(arr.reshape(-1)[0])
            if pv.name is not None:
                prev = st.consts.get(pv.name)
                if prev is not None and prev != got:
                    self.fail(st, f"constant '{pv.name}' is {prev} in one place and {got} in another")
                    return
                st = st.copy()
                st.consts[pv.name] = got
                yield st
                return
            rtol = CONST_RTOL.get(onnx_dtype(t) or 0, 0.0)
            if not _close(pv.value, got, rtol):
                self.fail(st, f"constant {t.name!r} is {got:.8g}, the pattern needs {pv.value:.8g}")
                return
            yield st
            return
        assert isinstance(pv, POut)
        yield from self.node_out(pv, t, st)

    def node_out(self, pv: POut, t: gs.Tensor, st: _State) -> Iterator[_State]:
        pn = pv.node
        gn = producer(t)
        bound = st.nodes.get(id(pn))
        if bound is not None:
            if bound is gn and gn.outputs[pv.index] is t:
                yield st
            else:
                self.fail(st, f"{t.name!r} is not the {pn.op_type} output matched before")
            return
        if gn is None:
            self.fail(st, f"{t.name!r} is a graph input or initializer, the pattern needs {pn.op_type}")
            return
        if gn.op != pn.op_type or (gn.domain or "") not in (pn.domain, "ai.onnx" if pn.domain == "" else pn.domain):
            self.fail(st, f"{t.name!r} comes from {gn.op} {gn.name!r}, the pattern needs {pn.op_type}"
                      + _uncanonical_hint(gn, pn.op_type))
            return
        if id(gn) in self.claimed or id(gn) in st.used:
            self.fail(st, f"{gn.op} {gn.name!r} is already part of another fusion")
            return
        if len(gn.outputs) != pn.num_outputs and not (pn.num_outputs == 1 and pv.index == 0) \
                or gn.outputs[pv.index] is not t:
            self.fail(st, f"{gn.op} {gn.name!r} has {len(gn.outputs)} outputs, the pattern needs {pn.num_outputs}")
            return
        attrs = attrs_of(gn)
        for key, spec in pn.attrs.items():
            if key not in attrs and spec is not ANY:
                self.fail(st, f"{gn.op} {gn.name!r} has no attribute {key}")
                return
            if key in attrs and not _attr_ok(spec, attrs[key]):
                self.fail(st, f"{gn.op} {gn.name!r} has {key}={attrs[key]!r}, the pattern needs {spec!r}")
                return
        ins = data_inputs(gn)
        if len(ins) != len(pn.inputs):
            self.fail(st, f"{gn.op} {gn.name!r} has {len(ins)} inputs, the pattern needs {len(pn.inputs)}")
            return
        orders = [ins]
        if gn.op in COMMUTATIVE and len(ins) == 2 and ins[0] is not ins[1]:
            orders.append([ins[1], ins[0]])
        for order in orders:
            branch = st.copy()
            branch.nodes[id(pn)] = gn
            branch.used.add(id(gn))
            branch.operands[id(gn)] = tuple(order) if order is not ins else tuple(gn.inputs)
            yield from self.inputs(pn.inputs, order, 0, branch)

    def inputs(self, pins: list[PValue], tins: list[gs.Tensor], i: int, st: _State) -> Iterator[_State]:
        if i == len(pins):
            yield st
            return
        for st2 in self.value(pins[i], tins[i], st):
            yield from self.inputs(pins, tins, i + 1, st2)


def _exposure(pattern: Pattern, st: _State, outputs: set[int]) -> tuple[list[gs.Tensor], str | None]:
    """Fused outputs (main + extra outputs read outside), or the reason an internal value escapes."""
    bound = {id(n) for n in st.nodes.values()}
    main = st.nodes[id(pattern.root)].outputs[pattern.outputs[0].index]
    extra = {id(st.nodes[id(o.node)].outputs[o.index]): o for o in pattern.outputs[1:]}
    fused_outs = [main]
    for pn in pattern.nodes:
        gn = st.nodes[id(pn)]
        for t in gn.outputs:
            if t is main:
                continue
            escapes = id(t) in outputs or any(id(c) not in bound for c in t.outputs)
            if id(t) in extra:
                if escapes:
                    fused_outs.append(t)
                continue
            if id(t) in outputs:
                return [], f"intermediate {t.name!r} ({gn.op} {gn.name!r}) is a graph output"
            outside = [c for c in t.outputs if id(c) not in bound]
            if outside:
                return [], (f"intermediate {t.name!r} ({gn.op} {gn.name!r}) is also read by "
                            f"{outside[0].op} {outside[0].name!r} outside the match")
    return fused_outs, None


def _uncanonical_hint(gn: gs.Node, wanted: str) -> str:
    """Why a node canonicalization would have rewritten into ``wanted`` was left alone: ``Pow(x, 2)`` becomes
    ``Mul(x, x)`` and ``Div(1, x)`` ``Reciprocal(x)`` only where x's rank is known (the rewrite may not
    drop a broadcast)."""
    if (gn.op, wanted) in (("Pow", "Mul"), ("Div", "Reciprocal")):
        x = gn.inputs[0] if gn.op == "Pow" else gn.inputs[-1]
        if x.shape is None:
            return (f" ({gn.op} is rewritten to {wanted} only where the rank of {x.name!r} is known, and shape "
                    "inference could not follow it; --input-shape may help)")
    return ""


def _dtype_reason(tensors: Sequence[gs.Tensor]) -> str | None:
    for t in tensors:
        dt = onnx_dtype(t)
        if dt not in FLOAT_TYPES:
            name = onnx.TensorProto.DataType.Name(dt) if dt else "unknown"
            return f"{t.name!r} has dtype {name}; fused kernels take float16, float32 and bfloat16"
        if t.shape is not None and any(d == 0 for d in t.shape):
            return f"{t.name!r} is empty (shape {list(t.shape)}): nothing to compute"
    return None


def _root_filter(pattern: Pattern) -> Counter[str]:
    """Op types that must produce the root's operands (with their counts), for a cheap pre-check per anchor."""
    return Counter(v.node.op_type for v in pattern.root.inputs if isinstance(v, POut))


class _Anchors:
    """Each op type's nodes, grouped by the op types that produce their operands, so a variant's root pre-check
    (:func:`_root_filter`) is taken once per group, not once per node: a 120-layer model's anchors meet every variant
    of their op, and most groups hold hundreds of nodes alike."""

    def __init__(self, by_type: dict[str, list[gs.Node]]) -> None:
        self.by_type = by_type
        self.groups: dict[str, tuple[list[int], list[Counter[str]]]] = {}

    def of(self, op_type: str, needed: Counter[str]) -> list[gs.Node]:
        """The ``op_type`` nodes, in graph order, whose operand producers include every op type ``needed`` does."""
        nodes = self.by_type.get(op_type, [])
        if not needed:
            return nodes
        if op_type not in self.groups:
            index: dict[frozenset, int] = {}
            tags = []
            for gn in nodes:
                have = Counter(p.op for p in (producer(t) for t in data_inputs(gn)) if p is not None)
                tags.append(index.setdefault(frozenset(have.items()), len(index)))
            self.groups[op_type] = (tags, [Counter(dict(k)) for k in index])
        tags, kinds = self.groups[op_type]
        ok = {i for i, have in enumerate(kinds) if all(have[t] >= n for t, n in needed.items())}
        return [gn for gn, tag in zip(nodes, tags) if tag in ok]


def _match_rule_variant(rule: Rule, pattern: Pattern, anchors: list[gs.Node], claimed: set[int],
                        outputs: set[int], order: dict[int, int], fusions: list[Fusion], misses: list[NearMiss],
                        declined: Mapping[tuple[str, str], str]) -> None:
    root_out = pattern.outputs[0]
    min_depth = max(3, pattern.size - 1)  # near misses must have got most of the way
    for gn in anchors:
        if id(gn) in claimed or len(gn.outputs) <= root_out.index:
            continue
        key = (rule.name, gn.outputs[root_out.index].name)
        if key in declined:  # an op of this region was not shipped: its smaller fusions instead
            misses.append(NearMiss(rule.name, gn.name or key[1], declined[key]))
            continue
        m = _Matcher(claimed)
        accepted = False
        reason = ""
        for st in m.node_out(root_out, gn.outputs[root_out.index], _State()):
            fused_outs, reason = _exposure(pattern, st, outputs)
            if reason:
                continue
            inputs = [st.vars[v] for v in pattern.variables]
            reason = _dtype_reason(inputs + fused_outs)
            if reason is None and rule.check is not None:
                reason = rule.check(MatchView(pattern, st))
            if reason:
                continue
            nodes = sorted(st.nodes.values(), key=lambda n: order[id(n)])
            names = ("y",) + tuple(
                f"y{k}" for k, o in enumerate(pattern.outputs[1:], 1)
                if st.nodes[id(o.node)].outputs[o.index] in fused_outs)
            made = rule.derive(MatchView(pattern, st)) if rule.derive is not None else {}
            derived = tuple((v, st.vars[v], made[v]) for v in pattern.variables if v in made)
            kept = [(v, t) for v, t in zip(pattern.variables, inputs) if v not in made]
            fusions.append(Fusion(rule.name, rule.op_name, rule.kernel, rule.family, tuple(nodes),
                                  tuple(t for _, t in kept), tuple(v for v, _ in kept), tuple(fused_outs), names,
                                  st.operands, tuple(sorted(st.consts.items())), derived))
            claimed.update(id(n) for n in nodes)
            accepted = True
            break
        if accepted:
            continue
        if reason:
            misses.append(NearMiss(rule.name, gn.name, reason))
        elif m.best_depth >= min_depth:
            misses.append(NearMiss(rule.name, gn.name, m.best_reason))


def match(graph: gs.Graph, rules: Sequence[Rule], generic: Rule | Sequence[Rule] | None = None,
          declined: Mapping[tuple[str, str], str] | None = None) -> MatchResult:
    """Match ``rules`` (largest variants first), then the generic passes if given: row regions around
    trailing-axes reductions, then elementwise chains. ``declined`` maps (rule, main output tensor) to why a
    fusion there was not shipped: the rule skips that anchor (a near miss with that reason) and the nodes stay for
    the smaller rules."""
    by_type: dict[str, list[gs.Node]] = {}
    for n in graph.nodes:
        by_type.setdefault(n.op, []).append(n)
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    outputs = graph_output_ids(graph)
    claimed: set[int] = set()
    fusions: list[Fusion] = []
    misses: list[NearMiss] = []
    variants = sorted(((r, p) for r in rules for p in r.variants), key=lambda rp: -rp[1].size)
    grouped = _Anchors(by_type)
    for rule, pattern in variants:
        if all(pn.op_type in by_type for pn in pattern.nodes):  # else it cannot match anywhere
            anchors = grouped.of(pattern.root.op_type, _root_filter(pattern))
            _match_rule_variant(rule, pattern, anchors, claimed, outputs, order, fusions, misses, declined or {})
    near = _dedupe_misses(misses, claimed, graph)  # before the generic pass: its chains are no excuse
    passes = [generic] if isinstance(generic, Rule) else list(generic or ())
    for g in sorted(passes, key=lambda r: of(r.kernel).region_rank):
        cls = of(g.kernel)
        if cls.region is None:
            continue
        found = cls.region(graph, g, claimed, outputs, order)
        fusions.extend(found)
        if cls.region_supersedes:  # a named rule's near miss that this class's region fused whole is no longer news
            fused = {n.name for f in found for n in f.nodes}
            near = [m for m in near if m.node not in fused]
    fusions.sort(key=lambda f: order[id(f.nodes[-1])])
    near.extend(_strided_softmax(graph, claimed))
    near.extend(_attention_ops(graph))
    near.extend(_masked_by_where(graph))
    return MatchResult(tuple(fusions), tuple(near))


#: Attention written as one op: ONNX's own (opset 23) and onnxruntime's contrib ops (its transformer optimizer's).
CONTRIB_ATTENTION = ("Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention",
                     "PackedMultiHeadAttention", "SparseAttention", "DecoderMaskedMultiHeadAttention")


def _attention_ops(graph: gs.Graph) -> list[NearMiss]:
    """Attention ops the model already holds: none is served, each for a stated reason (the Attention rule fuses
    the MatMul/Softmax form exporters write at the opsets ATC takes)."""
    out = []
    for n in graph.nodes:
        domain = n.domain or ""
        if n.op == "Attention" and domain in ("", "ai.onnx"):
            out.append(NearMiss("Attention", n.name, "ONNX's Attention op (opset 23) is not served: ATC takes opsets "
                                "11 to 18 and has no parser for it; export at opset 18 or lower (torch.onnx.export "
                                "opset_version=18) and the MatMul/Softmax form it writes fuses into one attention op"))
        elif domain == "com.microsoft" and n.op in CONTRIB_ATTENTION:
            out.append(NearMiss("Attention", n.name, f"onnxruntime's contrib op com.microsoft.{n.op} is not served: "
                                "ATC has no parser for com.microsoft ops; convert the model as exported, before "
                                "onnxruntime's transformer optimizer fuses it (its MatMul/Softmax form fuses into one "
                                "attention op)"))
    return out


def _masked_by_where(graph: gs.Graph) -> list[NearMiss]:
    """Scores masked by ``Where(mask, scores, fill)`` that canonicalization could not make additive (a fill of +inf
    or NaN): why the attention around them is not one op. (A graph with subgraphs is not canonicalized: no line.)"""
    out = []
    if has_subgraphs(graph):
        return out
    for n in graph.nodes:
        found = masked_scores(n)
        src = producer(found[1]) if found is not None else None
        if src is None or src.op not in ("MatMul", "Mul", "Div"):
            continue
        out.append(NearMiss("Attention", n.name, f"the scores are masked by Where(mask, scores, {found[2]:g}): a fill "
                            "that is neither finite nor -inf has no additive form (a score plus it is NaN), so the "
                            "region keeps its smaller fusions"))
    return out


def _strided_softmax(graph: gs.Graph, claimed: set[int]) -> list[NearMiss]:
    """Softmax/LogSoftmax over a non-last axis (YOLOv8's distribution-focal-loss head): each output reduces across
    rows, a strided walk the row kernel does not serve (it reduces the trailing axes of whole rows). Said in the
    report rather than left unexplained."""
    out = []
    for n in graph.nodes:
        if id(n) in claimed or n.op not in ("Softmax", "LogSoftmax") or not n.inputs or n.inputs[0].shape is None:
            continue
        rank = len(n.inputs[0].shape)
        axis = int(n.attrs.get("axis", -1)) % max(rank, 1)
        if rank and axis != rank - 1:
            out.append(NearMiss("RowChain", n.name, f"{n.op} over axis {axis} of a rank-{rank} tensor reduces across "
                                "rows with a stride, not along them: the row kernel reduces trailing axes only; the "
                                "node is left to ATC"))
    return out


def _dedupe_misses(misses: list[NearMiss], claimed: set[int], graph: gs.Graph) -> list[NearMiss]:
    """Keep one near miss per (rule, anchor), dropping anchors that another rule fused."""
    fused_names = {n.name for n in graph.nodes if id(n) in claimed}
    seen: set[tuple[str, str]] = set()
    out = []
    for nm in misses:
        key = (nm.rule, nm.node)
        if key in seen or nm.node in fused_names:
            continue
        seen.add(key)
        out.append(nm)
    return out


__all__ = ["match", "Fusion", "NearMiss", "MatchResult", "MatchView"]
