"""Stage 4, rewrite: replace each match by one fused node and build the two output models.

* Every fusion's subgraph becomes an ONNX function body with names from roles and counters
  (inputs as the rule names them, ``t0..`` internals, ``c0..`` constants, ``p0..`` parameters,
  ``y..`` outputs); weights stay inputs. The body's deterministic serialization is the op's
  identity: equal bodies share one op type and, later, one kernel.
* Op identity is by structure: in pointwise and row ops, a float scalar that only feeds arithmetic
  (``Add``/``Sub``/``Mul``/``Div``/``Max``/``Min``) is a *parameter*: the body's Constant refers to
  the function attribute ``pK`` and each fused node carries its own value, so 52 ``x*a+b`` blocks that
  differ only in ``a`` and ``b`` are one op type, and LayerNorms that differ in epsilon share one. Other
  constants (an exponent, a clip bound, a matmul epilogue's) are baked in as Constant nodes of their own dtype.
* ``model.asc.onnx``: fused nodes in domain ``asc_onnx`` (opset 1) plus one model-local
  function per op type, so onnxruntime runs it as it is.
* ``model.atc.onnx``: the same graph without functions. Compatibility mode puts fused nodes
  in the default domain with a single opset entry (released CANN refuses more, E16005);
  custom mode keeps the ``asc_onnx`` domain.

This stage knows nothing about Ascend C.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np
import onnx
import onnx_graphsurgeon as gs
from onnx import FunctionProto, ModelProto, helper
from onnx_graphsurgeon.exporters.onnx_exporter import OnnxExporter

from .errors import AscOnnxError
from .fusion import FusedOp, Fusion, Instance
from .graph import FLOAT_TYPES, all_nodes, body_graphs, const_proto, main_opset, onnx_dtype, producer
from .kernels import of
from .match import MatchResult

DOMAIN = "asc_onnx"
DOMAIN_VERSION = 1
#: ai.onnx opsets ATC takes (cann_facts.md §9).
ATC_OPSETS = range(11, 19)
#: IR version written: node metadata_props need IR 10.
MIN_IR = 10


class RewriteResult:
    """The fused op types and, exported when first asked for, the reference model; ``undo`` puts the graphs the
    rewrite changed back as they were (a re-match with declined ops starts from the canonical graph, not from a
    new load). A rewrite that is undone is never exported: the first pass of a run that declines ops is only
    judged."""

    def __init__(self, ops: tuple[FusedOp, ...], export: Callable[[], ModelProto],
                 restore: Callable[[], None] | None = None) -> None:
        self.ops = ops
        self._export: Callable[[], ModelProto] | None = export
        self._model: ModelProto | None = None
        self._restore = restore

    @property
    def asc_model(self) -> ModelProto:
        """The reference model: fused nodes with their functions (``model.asc.onnx``)."""
        if self._model is None:
            if self._export is None:
                raise RuntimeError("the rewrite was undone: its graphs no longer hold the fused nodes")
            self._model, self._export = self._export(), None
        return self._model

    def undo(self) -> None:
        """Put the graphs back as the plan left them (the exported model, if any, stays as it was)."""
        if self._restore is None:
            raise RuntimeError("this rewrite cannot be undone")
        self._restore()
        self._restore = self._export = None


class _Snapshot:
    """What a rewrite changes in its graphs, kept to put back: each graph's node list, and the links of every
    matched node and every tensor next to one (a fused node is linked to the same tensors)."""

    def __init__(self, graphs: Sequence[gs.Graph], fusions: Sequence[Fusion]) -> None:
        self.graphs = [(g, list(g.nodes)) for g in {id(g): g for g in graphs}.values()]
        nodes = {id(n): n for f in fusions for n in f.nodes}
        self.nodes = [(n, list(n.inputs), list(n.outputs)) for n in nodes.values()]
        tensors = {id(t): t for n in nodes.values() for t in [*n.inputs, *n.outputs]}
        self.tensors = [(t, list(t.inputs), list(t.outputs)) for t in tensors.values()]

    def restore(self) -> None:
        for obj, ins, outs in [*self.nodes, *self.tensors]:  # raw lists: the links are set on both sides here
            list.clear(obj.inputs)
            list.extend(obj.inputs, ins)
            list.clear(obj.outputs)
            list.extend(obj.outputs, outs)
        for g, nodes in self.graphs:
            g.nodes = list(nodes)


def _shape(t: gs.Tensor) -> tuple[object, ...] | None:
    return None if t.shape is None else tuple(d if isinstance(d, (int, str)) else str(d) for d in t.shape)


#: Ops whose float scalar operand becomes an op parameter in pointwise bodies: the value only reaches one
#: vector instruction's scalar (Adds, Muls, Maxs, Mins, or a Duplicate), never the kernel's structure.
PARAM_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min"})


def _param_ref(name: str) -> onnx.NodeProto:
    """``Constant() -> name`` whose value is the function attribute ``name``."""
    node = helper.make_node("Constant", [], [name])
    ref = onnx.AttributeProto()
    ref.name, ref.ref_attr_name, ref.type = "value", name, onnx.AttributeProto.TENSOR
    node.attribute.append(ref)
    return node


def build_body(f: Fusion, opset: int) -> tuple[list[onnx.NodeProto], str, list[onnx.TensorProto]]:
    """Function-body nodes of a fusion in canonical order, their identity hash, and the values of the
    body's parameters (``p0``.. in order)."""
    members = {id(n): n for n in f.nodes}
    params: list[onnx.TensorProto] = []
    param_names: dict[int, str] = {}
    names: dict[int, str] = {id(t): nm for t, nm in zip(f.inputs, f.input_names)}
    names.update({id(t): nm for t, nm in zip(f.outputs, f.output_names)})
    names.update({id(t): nm for nm, t, _ in f.derived})
    consts: list[onnx.NodeProto] = [n for _, _, write in f.derived for n in write(opset)]
    const_names: dict[bytes, str] = {}
    body: list[onnx.NodeProto] = []
    done: set[int] = set()
    counter = [0]

    def operand(t: gs.Tensor) -> str:
        if not t.name:
            return ""
        if id(t) in names:
            return names[id(t)]
        proto = const_proto(t)
        if proto is None:
            raise AscOnnxError(f"rule {f.rule}: {t.name!r} is read by the match but is neither an input nor a "
                               "small constant (a pattern variable is missing)")
        if _is_param(f, t, proto, members):
            if id(t) not in param_names:  # by tensor, not value: the body's structure never depends on a value
                param_names[id(t)] = f"p{len(params)}"
                params.append(proto)
                consts.append(_param_ref(param_names[id(t)]))
            return param_names[id(t)]
        key = proto.SerializeToString(deterministic=True)
        if key not in const_names:
            const_names[key] = f"c{len(const_names)}"
            consts.append(helper.make_node("Constant", [], [const_names[key]], value=proto))
        return const_names[key]

    def visit(n: gs.Node) -> None:
        if id(n) in done:
            return
        done.add(id(n))
        for t in f.operands[id(n)]:
            p = producer(t)
            if p is not None and id(p) in members:
                visit(p)
        proto = OnnxExporter.export_node(n)
        del proto.input[:]
        del proto.output[:]
        proto.input.extend(operand(t) for t in f.operands[id(n)])
        outs = []
        for t in n.outputs:
            if id(t) not in names and any(id(c) in members for c in t.outputs):
                names[id(t)] = f"t{counter[0]}"
                counter[0] += 1
            outs.append(names.get(id(t), ""))
        while outs and not outs[-1]:
            outs.pop()
        proto.output.extend(outs)
        proto.name = ""
        proto.doc_string = ""
        body.append(proto)

    for t in f.outputs:
        visit(producer(t))
    for n in f.nodes:  # nodes that only feed other outputs
        visit(n)
    nodes = consts + body
    h = hashlib.sha256()
    h.update(f"opset={opset};in={','.join(f.input_names)};out={','.join(f.output_names)};".encode())
    h.update(f"params={','.join(f'{p.data_type}:{list(p.dims)}' for p in params)};".encode())
    for node in nodes:
        h.update(node.SerializeToString(deterministic=True))
    return nodes, h.hexdigest(), params


def _is_param(f: Fusion, t: gs.Tensor, proto: onnx.TensorProto, members: dict[int, gs.Node]) -> bool:
    """A float scalar of a fusion that only feeds PARAM_OPS inside it (a matmul's epilogue constants too: every
    Linear+GELU of a model shares one kernel whatever its constants)."""
    if not of(f.kernel).scalar_params or proto.data_type not in FLOAT_TYPES or \
            any(d != 1 for d in proto.dims):
        return False
    readers = [c for c in t.outputs if id(c) in members]
    return bool(readers) and all(c.op in PARAM_OPS for c in readers)


def param_values(params: Sequence[onnx.TensorProto]) -> tuple[float, ...]:
    """Parameter tensors as floats (fp16 and bf16 values are exact in fp32)."""
    return tuple(float(onnx.numpy_helper.to_array(p).astype(np.float32).reshape(-1)[0]) for p in params)


def _op_types(fusions: Sequence[Fusion], sigs: Sequence[str]) -> dict[str, str]:
    """Op type per signature: ``Asc<OpName>`` when a name has one body, else a hash suffix."""
    per_name: dict[str, list[str]] = {}
    for f, sig in zip(fusions, sigs):
        lst = per_name.setdefault(f.op_name, [])
        if sig not in lst:
            lst.append(sig)
    out: dict[str, str] = {}
    for name, lst in per_name.items():
        hashed = len(lst) > 1 or name == "FusedEw"
        for sig in lst:
            out[sig] = f"Asc{name}{sig[:8]}" if hashed else f"Asc{name}"
    return out


def rewrite(graph: gs.Graph, source: ModelProto, fusions: Sequence[Fusion],
            scopes: Sequence[tuple[gs.Graph, MatchResult]] = ()) -> RewriteResult:
    """Replace ``fusions`` in ``graph`` and each control-flow body's fusions in that body (in place) and return
    the fused op types with the reference model (the ATC model is :func:`asc_onnx.package.assemble`'s, of what
    ships). Op types are shared across scopes: a SiLU inside an If branch is the same op."""
    opset = main_opset(source)
    scope_of = [graph] * len(fusions)
    fusions = list(fusions)
    for body, found in scopes:
        fusions += found.fusions
        scope_of += [body] * len(found.fusions)
    snapshot = _Snapshot([graph, *scope_of], fusions)
    bodies = [build_body(f, opset) for f in fusions]
    types = _op_types(fusions, [sig for _, sig, _ in bodies])
    functions: dict[str, FunctionProto] = {}
    instances: dict[str, list[Instance]] = {}
    first: dict[str, Fusion] = {}
    fused_nodes: dict[int, list[tuple[gs.Node, Fusion]]] = {id(g): [] for g in scope_of}
    removed: set[int] = set()
    node_params: dict[str, list[onnx.TensorProto]] = {}
    first_params: dict[str, list[onnx.TensorProto]] = {}
    for f, (nodes, sig, params), scope in zip(fusions, bodies, scope_of):
        op_type = types[sig]
        if op_type not in functions:
            functions[op_type] = helper.make_function(
                DOMAIN, op_type, list(f.input_names), list(f.output_names), nodes,
                [helper.make_opsetid("", opset)], doc_string=f"asc-onnx rule {f.rule}",
                attributes=[f"p{i}" for i in range(len(params))])
            first[op_type] = f
            first_params[op_type] = params
        name = f"{op_type}_{len(instances.get(op_type, []))}"
        instances.setdefault(op_type, []).append(Instance(
            name, tuple(n.name for n in f.nodes), tuple(t.name for t in f.inputs), tuple(t.name for t in f.outputs),
            tuple(onnx_dtype(t) or 0 for t in f.inputs), tuple(onnx_dtype(t) or 0 for t in f.outputs),
            tuple(_shape(t) for t in f.inputs), tuple(_shape(t) for t in f.outputs), param_values(params)))
        node_params[name] = params
        removed.update(id(n) for n in f.nodes)
        _detach(f.nodes, removed)
        node = gs.Node(op=op_type, name=name, domain=DOMAIN, inputs=list(f.inputs), outputs=list(f.outputs))
        fused_nodes[id(scope)].append((node, f))
    for scope in {id(g): g for g in scope_of}.values():
        _place(scope, fused_nodes[id(scope)], removed)
        _drop_unread(scope, [t for _, f in fused_nodes[id(scope)] for _, t, _ in f.derived])
    ops = tuple(FusedOp(t, first[t].rule, first[t].family, first[t].kernel,
                        next(sig for sig, tt in types.items() if tt == t), functions[t],
                        tuple(first[t].input_names), tuple(first[t].output_names), tuple(instances[t]),
                        tuple(functions[t].attribute), tuple(p.data_type for p in first_params[t]),
                        tuple(name for name, _, _ in first[t].derived))
                for t in functions)
    kept = [f for f in source.functions if f.domain == DOMAIN and f.name not in functions]

    def export() -> ModelProto:
        asc = _export(graph, source, opset, kept + [functions[t] for t in functions])
        meta = {n.name: f for lst in fused_nodes.values() for n, f in lst}
        for node in all_nodes(asc.graph):
            f = meta.get(node.name)
            if f is not None:
                helper.set_metadata_props(node, {"asc_onnx.rule": f.rule, "asc_onnx.kernel": f.kernel,
                                                 "asc_onnx.source_nodes": ",".join(n.name for n in f.nodes)})
                node.attribute.extend(helper.make_attribute(f"p{i}", v)
                                      for i, v in enumerate(node_params[node.name]))
        _record_fused_shapes(asc, ops)
        return asc

    return RewriteResult(ops, export, snapshot.restore)


def _record_fused_shapes(model: ModelProto, ops: Sequence[FusedOp]) -> None:
    """Type the main graph's fused-node inputs and outputs in the reference model's value_info with the dims
    this run knew: a reloaded model (``asc-onnx emulate OUT``) gets only onnx's own inference, which cannot
    type an asc_onnx node's outputs and loses what symbolic inference found (an attention MatMul behind a
    computed Reshape has no rank for it)."""
    g = model.graph
    skip = {i.name for i in g.input} | {o.name for o in g.output} | {t.name for t in g.initializer}
    main = {t for n in g.node for t in [*n.input, *n.output]}
    for op in ops:
        for inst in op.instances:
            for names, dtypes, shapes in ((inst.inputs, inst.input_dtypes, inst.input_shapes),
                                          (inst.outputs, inst.output_dtypes, inst.output_shapes)):
                for name, dtype, shape in zip(names, dtypes, shapes):
                    if name in skip or name not in main or not dtype or shape is None:
                        continue
                    skip.add(name)
                    dims = [d if isinstance(d, int) else (str(d) if d not in (None, "", "?") else None) for d in shape]
                    g.value_info.append(helper.make_tensor_value_info(name, dtype, dims))


def _detach(nodes: Sequence[gs.Node], removed: set[int]) -> None:
    """Unlink nodes from their tensors by identity.

    graphsurgeon's own ``inputs.clear()`` removes the node from each tensor's consumer list with
    ``list.remove``, which compares nodes attribute by attribute: quadratic on shared scalars.
    """
    for n in nodes:
        for t in list(n.inputs) + list(n.outputs):
            for lst in (t.outputs, t.inputs):
                keep = [x for x in lst if id(x) not in removed]
                if len(keep) != len(lst):
                    list.clear(lst)
                    list.extend(lst, keep)
        list.clear(n.inputs)
        list.clear(n.outputs)


def _drop_unused_constants(graph: gs.Graph) -> None:
    """Remove Constant nodes nothing reads any more (what graphsurgeon's cleanup would do, in O(n))."""
    outputs = {id(t) for t in graph.outputs}
    graph.nodes = [n for n in graph.nodes if not (n.op == "Constant" and all(
        not t.outputs and id(t) not in outputs for t in n.outputs))]


def _drop_unread(graph: gs.Graph, tensors: Sequence[gs.Tensor]) -> None:
    """Leave out of the graph's node list what computed ``tensors`` (values fused ops now compute themselves: a
    causal mask) where nothing else reads it, and what computed only that in turn. Links stay as they are (an
    undo puts the node list back)."""
    if not tensors:
        return
    live = {id(n) for n in graph.nodes}
    outputs = {id(t) for t in graph.outputs}
    stack = [producer(t) for t in tensors]
    while stack:
        n = stack.pop()
        if n is None or id(n) not in live:
            continue
        if any(id(o) in outputs or any(id(c) in live for c in o.outputs) for o in n.outputs):
            continue
        live.discard(id(n))
        stack.extend(producer(x) for x in n.inputs)
    graph.nodes = [n for n in graph.nodes if id(n) in live]


def _place(graph: gs.Graph, fused: list[tuple[gs.Node, Fusion]], removed: set[int]) -> None:
    """Put each fused node where its last matched node was; toposort only if that breaks order."""
    pos = {id(n): i for i, n in enumerate(graph.nodes)}
    at = {pos[id(f.nodes[-1])]: node for node, f in fused}
    pos.update({id(node): pos[id(f.nodes[-1])] for node, f in fused})
    ordered_ok = all(pos.get(id(c), -1) > pos[id(f.nodes[-1])]
                     for node, f in fused for t in node.outputs for c in t.outputs if c is not node)
    nodes = []
    for i, n in enumerate(graph.nodes):
        if i in at:
            nodes.append(at[i])
        elif id(n) not in removed:
            nodes.append(n)
    graph.nodes = nodes
    _drop_unused_constants(graph)
    if not ordered_ok:
        graph.toposort()


def _export(graph: gs.Graph, source: ModelProto, opset: int, functions: list[FunctionProto]) -> ModelProto:
    model = gs.export_onnx(graph, do_type_check=False)
    del model.graph.value_info[:]
    del model.functions[:]  # graphsurgeon carries the source's functions; they are in ``functions``
    del model.opset_import[:]
    used = {n.domain for n in model.graph.node} | {n.domain for f in functions for n in f.node}
    for o in source.opset_import:
        if (o.domain in ("", "ai.onnx") or o.domain in used) and all(o.domain != m.domain for m in model.opset_import):
            model.opset_import.append(o)
    if functions:
        if all(o.domain != DOMAIN for o in model.opset_import):
            model.opset_import.append(helper.make_opsetid(DOMAIN, DOMAIN_VERSION))
        model.functions.extend(functions)
    model.ir_version = max(source.ir_version, MIN_IR)
    model.producer_name, model.producer_version = "asc-onnx", _version()
    model.doc_string = source.doc_string
    model.graph.name = source.graph.name
    del model.metadata_props[:]
    model.metadata_props.extend(source.metadata_props)
    return model


def _version() -> str:
    from . import __version__

    return __version__


def build_atc_model(asc: ModelProto, op_types: set[str], mode: str) -> tuple[ModelProto | None, tuple[str, ...]]:
    """The model for ATC: no functions, fused nodes placed per ``mode`` (see module doc)."""
    notes: list[str] = []
    atc = ModelProto()
    atc.CopyFrom(asc)
    del atc.functions[:]
    opset = main_opset(atc)
    for node in all_nodes(atc.graph):
        if node.op_type in op_types:
            _params_as_bits(node)
    if mode == "compat":
        for node in all_nodes(atc.graph):
            if node.domain == DOMAIN:
                node.domain = ""
    others = sorted({n.domain for n in all_nodes(atc.graph)} - {"", "ai.onnx", DOMAIN})
    if others:
        notes.append(f"the model uses op domains {others}: ATC needs a parser plugin for each of their ops, and "
                     "released CANN refuses a model with more than one opset entry (E16005)")
    keep = {"", "ai.onnx"} | set(others) | ({DOMAIN} if mode == "custom" and op_types else set())
    entries = [o for o in atc.opset_import if o.domain in keep]
    del atc.opset_import[:]
    atc.opset_import.extend(entries)
    if opset not in ATC_OPSETS:
        converted = _convert_opset(atc, op_types)
        if converted is None:
            notes.append(f"ai.onnx opset {opset} is outside ATC's range 11..18 and onnx's version converter "
                         "could not convert it: model.atc.onnx was not written")
            return None, tuple(notes)
        notes.append(f"ai.onnx opset {opset} is outside ATC's range 11..18: model.atc.onnx was converted to "
                     f"opset {main_opset(converted)} by onnx's version converter")
        atc = converted
    return atc, tuple(notes)


def _params_as_bits(node: onnx.NodeProto) -> None:
    """Parameters as INT attributes holding their fp32 bits: ATC hands a plugin float attributes printed
    with 6 significant digits (cann_facts.md §8.3), which would change the kernel's constants."""
    for a in node.attribute:
        if a.type == onnx.AttributeProto.TENSOR and a.name.startswith("p") and a.name[1:].isdigit():
            bits = int(np.array(param_values([a.t])[0], np.float32).view(np.uint32))
            a.CopyFrom(helper.make_attribute(a.name, bits))


def param_attributes(op: FusedOp, values: Sequence[float]) -> list[onnx.AttributeProto]:
    """The tensor attributes that give a node of ``op`` the parameter ``values`` (as model.asc.onnx has them)."""
    return [helper.make_attribute(name, onnx.numpy_helper.from_array(
        np.array(v, np.float32).astype(helper.tensor_dtype_to_np_dtype(t)), name))
        for name, t, v in zip(op.params, op.param_types, values)]


def param_bits_to_values(node: onnx.NodeProto, names: Sequence[str]) -> tuple[float, ...]:
    """A fused node's parameters from either model: tensors (model.asc.onnx) or fp32 bits (model.atc.onnx)."""
    attrs = {a.name: a for a in node.attribute}
    out = []
    for n in names:
        a = attrs[n]
        out.append(param_values([a.t])[0] if a.type == onnx.AttributeProto.TENSOR
                   else float(np.array(a.i, np.uint32).view(np.float32)))
    return tuple(out)


def _convert_opset(model: ModelProto, op_types: set[str]) -> ModelProto | None:
    """Convert the default-domain opset into 11..18; fused nodes are parked in a custom domain meanwhile."""
    target = 18 if main_opset(model) > 18 else 11
    work = ModelProto()
    work.CopyFrom(model)
    parked = [n for n in work.graph.node if n.op_type in op_types]
    for n in parked:
        n.domain = "asc_onnx.parked"
    work.opset_import.append(helper.make_opsetid("asc_onnx.parked", 1))
    try:
        conv = onnx.version_converter.convert_version(work, target)
    except Exception:  # noqa: BLE001 - the converter raises many types; the caller reports it
        return None
    for n in conv.graph.node:
        if n.domain == "asc_onnx.parked":
            n.domain = next((o.domain for o in model.opset_import if o.domain == DOMAIN), "")
    kept = [o for o in conv.opset_import if o.domain != "asc_onnx.parked"]
    del conv.opset_import[:]
    conv.opset_import.extend(kept)
    return conv


def ops_from_model(asc: ModelProto) -> tuple[FusedOp, ...]:
    """Rebuild the fused-op records of a written ``model.asc.onnx`` (for ``asc-onnx emulate OUT``)."""
    inferred = onnx.shape_inference.infer_shapes(asc)
    types: dict[str, tuple[int, tuple[object, ...] | None]] = {}
    infos = list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)
    for node in all_nodes(inferred.graph):  # control-flow bodies keep their own value_info
        for sub in body_graphs(node):
            infos += list(sub.value_info) + list(sub.input) + list(sub.output)
    for vi in infos:
        tt = vi.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param for d in tt.shape.dim) \
            if tt.HasField("shape") else None
        types[vi.name] = (tt.elem_type, dims)
    for init in asc.graph.initializer:
        types[init.name] = (init.data_type, tuple(init.dims))
    functions = {f.name: f for f in asc.functions if f.domain == DOMAIN}
    instances: dict[str, list[Instance]] = {}
    meta: dict[str, dict[str, str]] = {}
    ptypes: dict[str, tuple[int, ...]] = {}
    for node in all_nodes(asc.graph):
        if node.domain != DOMAIN or node.op_type not in functions:
            continue
        props = {p.key: p.value for p in node.metadata_props}
        meta.setdefault(node.op_type, props)
        attrs = {a.name: a for a in node.attribute}
        ptypes.setdefault(node.op_type, tuple(attrs[n].t.data_type for n in functions[node.op_type].attribute))
        ins = [types.get(n, (0, None)) for n in node.input]
        outs = [types.get(n, (0, None)) for n in node.output]
        instances.setdefault(node.op_type, []).append(Instance(
            node.name, tuple(props.get("asc_onnx.source_nodes", "").split(",")), tuple(node.input),
            tuple(node.output), tuple(t for t, _ in ins), tuple(t for t, _ in outs), tuple(s for _, s in ins),
            tuple(s for _, s in outs), param_bits_to_values(node, functions[node.op_type].attribute)))
    return tuple(FusedOp(t, meta[t].get("asc_onnx.rule", ""), "", meta[t].get("asc_onnx.kernel", ""), "",
                         functions[t], tuple(functions[t].input), tuple(functions[t].output), tuple(insts),
                         tuple(functions[t].attribute), ptypes[t])
                 for t, insts in instances.items())


__all__ = ["ops_from_model", "rewrite", "param_attributes", "param_bits_to_values", "RewriteResult", "FusedOp",
           "Instance", "build_body", "build_atc_model",
           "DOMAIN"]
