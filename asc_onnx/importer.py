"""The model into onnx-graphsurgeon's IR, fast: the same graph ``gs.import_onnx`` builds, without its per-object
overhead.

graphsurgeon builds every tensor and node through ``__init__`` and ``__setattr__`` overrides that route each
field through a synchronised list, and looks each value up through two maps: on a 20,000-node model that is most
of the half second its import takes. Here each tensor and node gets its fields directly and each link is made
once, on both sides, as graphsurgeon's own synchronised lists would make it; attributes go through graphsurgeon's
own conversion. A model with functions, control-flow bodies or sparse initializers takes graphsurgeon's importer
(those are rare, and its handling of them is the reference). ``tests/test_importer.py`` holds the two imports
equal, field by field and exported, on every fixture.
"""

from __future__ import annotations

from typing import Any

import onnx
import onnx_graphsurgeon as gs
from onnx_graphsurgeon.importers.onnx_importer import (
    OnnxImporter,
    get_onnx_tensor_dtype,
    get_onnx_tensor_shape,
    get_onnx_tensor_type,
)
from onnx_graphsurgeon.ir.tensor import LazyValues
from onnx_graphsurgeon.util.misc import SynchronizedList

_BODIES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def import_model(model: onnx.ModelProto) -> gs.Graph:
    """``gs.import_onnx(model)``, built directly where the model allows (see the module doc)."""
    g = model.graph
    if model.functions or g.sparse_initializer or any(a.type in _BODIES for n in g.node for a in n.attribute):
        return gs.import_onnx(model)
    opset = OnnxImporter.get_opset(model)
    domains = OnnxImporter.get_import_domains(model)
    tensors: dict[str, gs.Tensor] = {}
    for init in g.initializer:
        if init.name not in tensors:
            tensors[init.name] = _constant(init)
    dtypes: dict[int, Any] = {}
    for vi in g.value_info:  # what shape inference knows: the first entry of a name, its gaps filled by later ones
        have = tensors.get(vi.name)
        if have is None:
            tensors[vi.name] = _variable(vi, dtypes)
        elif isinstance(have, gs.Variable):
            more = _variable(vi, dtypes)
            have.__dict__["dtype"] = have.dtype or more.dtype
            have.__dict__["shape"] = have.shape or more.shape
    weights = {t.name for t in g.initializer}
    inputs = [tensors.setdefault(vi.name, _variable(vi, dtypes)) for vi in g.input if vi.name not in weights]
    outputs = [tensors.setdefault(vi.name, _variable(vi, dtypes)) for vi in g.output]
    nodes = []
    for proto in g.node:
        node = gs.Node.__new__(gs.Node)
        fields = node.__dict__
        fields["op"] = proto.op_type
        fields["name"] = proto.name
        fields["attrs"] = (OnnxImporter.import_attributes(proto.attribute, {}, tensors, opset, domains)
                           if proto.attribute else {})
        ins = [_tensor(name, tensors) for name in proto.input]
        outs = [_tensor(name, tensors) for name in proto.output]
        fields["inputs"] = _linked(node, "outputs", ins)
        fields["outputs"] = _linked(node, "inputs", outs)
        fields["domain"] = proto.domain if proto.HasField("domain") else None
        nodes.append(node)
    return gs.Graph(nodes=nodes, inputs=inputs, outputs=outputs, name=g.name, doc_string=g.doc_string,
                    producer_name=model.producer_name, producer_version=model.producer_version, opset=opset,
                    import_domains=domains, functions=[], ir_version=model.ir_version)


def _synced(parent: object, field: str) -> SynchronizedList:
    """An empty synchronised list of ``parent``'s, linking to each element's ``field`` (its ``__init__``'s fields)."""
    out = SynchronizedList.__new__(SynchronizedList)
    out.parent_obj, out.field_name = parent, field
    return out


def _new(cls: type, name: str) -> Any:
    """A tensor of ``cls`` with its name and empty links (what ``__init__`` sets, without its overrides)."""
    t = cls.__new__(cls)
    t.__dict__["name"] = name
    t.__dict__["inputs"] = _synced(t, "outputs")
    t.__dict__["outputs"] = _synced(t, "inputs")
    return t


def _constant(proto: onnx.TensorProto) -> gs.Constant:
    """An initializer, its values left on disk or in the proto until read (graphsurgeon's LazyValues)."""
    c = _new(gs.Constant, proto.name)
    c.__dict__["_values"] = LazyValues(proto)
    c.__dict__["data_location"] = int(proto.data_location) if proto.HasField("data_location") else None
    c.__dict__["_export_dtype"] = None
    return c


def _variable(vi: onnx.ValueInfoProto, dtypes: dict[int, Any]) -> gs.Variable:
    """A value with what its ValueInfo says of its type and shape (nothing where it says nothing)."""
    v = _new(gs.Variable, vi.name)
    fields = v.__dict__
    fields["dtype"], fields["shape"], fields["type"] = None, None, "tensor_type"
    if vi.type.ByteSize() > 0:
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.elem_type in dtypes:
            fields["dtype"] = dtypes[tt.elem_type]
        else:
            fields["dtype"] = get_onnx_tensor_dtype(vi)
            if vi.type.HasField("tensor_type"):
                dtypes[tt.elem_type] = fields["dtype"]
        if vi.type.HasField("tensor_type"):
            fields["shape"] = None if not tt.HasField("shape") else [
                d.dim_param if d.HasField("dim_param") else d.dim_value if d.HasField("dim_value") else None
                for d in tt.shape.dim]
        else:
            fields["shape"] = get_onnx_tensor_shape(vi)
        fields["type"] = get_onnx_tensor_type(vi)
    return v


def _tensor(name: str, tensors: dict[str, gs.Tensor]) -> gs.Tensor:
    """A node's input or output by name: an omitted optional one is a fresh empty Variable (never shared)."""
    if not name:
        return gs.Variable.empty()
    t = tensors.get(name)
    if t is None:
        t = tensors[name] = _new(gs.Variable, name)
        t.__dict__.update(dtype=None, shape=None, type="tensor_type")
    return t


def _linked(node: gs.Node, field: str, tensors: list[gs.Tensor]) -> SynchronizedList:
    """The node's list of ``tensors``, each tensor's ``field`` list given the node (one synchronised link)."""
    out = _synced(node, field)
    list.extend(out, tensors)
    for t in tensors:
        list.append(t.__dict__[field], node)
    return out


__all__ = ["import_model"]
