"""Read-only helpers over an onnx-graphsurgeon graph shared by the stages.

The graph IR is onnx-graphsurgeon: its tensors already carry their producer (``inputs``) and
consumers (``outputs``), which are the indexes the matcher needs, built once at import.
"""

from __future__ import annotations

import contextlib
import gc
import math
import sys
from collections.abc import Mapping

import numpy as np
import onnx
import onnx_graphsurgeon as gs
from onnx import ModelProto, TensorProto

from .dtypes import NP_TYPES

#: The element types a fused kernel may compute on (bf16 through fp32, see DESIGN.md).
FLOAT_TYPES = frozenset(NP_TYPES)  # the element types a kernel takes

#: Largest constant (elements) read into memory to compare with a pattern or to bake in.
SMALL_CONST = 16

#: Inputs that act as attributes in newer opsets, by op type: index -> attribute name.
ATTR_INPUTS: dict[str, dict[int, str]] = {
    "ReduceMean": {1: "axes"},
    "ReduceSum": {1: "axes"},
    "ReduceMax": {1: "axes"},
    "ReduceMin": {1: "axes"},
    "ReduceProd": {1: "axes"},
    "ReduceL2": {1: "axes"},
    "ReduceSumSquare": {1: "axes"},
    "Squeeze": {1: "axes"},
    "Unsqueeze": {1: "axes"},
    "Split": {1: "split"},
}

#: Elementwise ops whose two operands can be swapped without changing a single bit.
COMMUTATIVE = frozenset({"Add", "Mul", "Max", "Min", "And", "Or", "Xor", "Equal", "Sum"})


def _gs_logs_to_stderr() -> None:
    """onnx-graphsurgeon prints its log with ``print``: to stdout, where it would corrupt ``--json``. Send it
    to stderr, errors only (its warnings are about tensors it could not type, which the report covers)."""
    log = gs.logger.G_LOGGER
    to_stdout = log.log

    def to_stderr(*args: object, **kwargs: object) -> None:
        with contextlib.redirect_stdout(sys.stderr):
            to_stdout(*args, **kwargs)

    log.log = to_stderr
    log.severity = log.ERROR


_gs_logs_to_stderr()


def body_graphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The control-flow bodies a node carries as attributes (If branches, a Loop or Scan body)."""
    return [g for a in node.attribute for g in ([a.g] if a.HasField("g") else []) + list(a.graphs)]


def all_nodes(graph: onnx.GraphProto):
    """Every node of ``graph`` and of its control-flow bodies, outer ones first."""
    for node in graph.node:
        yield node
        for sub in body_graphs(node):
            yield from all_nodes(sub)


_keeping = 0  # kept_alive blocks entered and not yet left


@contextlib.contextmanager
def graph_work():
    """No cyclic garbage collection while a graph is built or rewritten: a 20,000-node model makes hundreds of
    thousands of linked node and tensor objects, and each full collection walks them all again (a quarter of
    the import's time). Nothing there is cyclic garbage worth collecting early; the collector resumes after.
    Within :func:`kept_alive`, what the work made is frozen before the collector resumes: its first collection
    would otherwise walk every object made while it was off (a fifth of a second on that model)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _keeping:
            gc.freeze()
        if was:
            gc.enable()


@contextlib.contextmanager
def kept_alive():
    """Within, the collector does not walk what is alive on entry, nor what :func:`graph_work` makes (the planned
    graph and its rewrite, which a fuse run holds to its end): a full collection would otherwise walk them again
    for every few thousand objects the later stages allocate. All of it is walked again once the block is left."""
    global _keeping
    gc.freeze()
    _keeping += 1
    try:
        yield
    finally:
        _keeping -= 1
        if not _keeping:
            gc.unfreeze()


def to_gs(model: onnx.ModelProto) -> gs.Graph:
    """Import a model into onnx-graphsurgeon (external tensors stay lazy): :mod:`asc_onnx.importer`'s direct
    build of the graph ``gs.import_onnx`` makes."""
    from .importer import import_model

    return import_model(model)


def refine_shapes(graph: gs.Graph, infos: list[onnx.ValueInfoProto]) -> None:
    """Give the graph's variables the shapes (and missing types) of ``infos``, which know more than the ones
    they were imported with (symbolic inference, merged after the import)."""
    from onnx_graphsurgeon.importers.onnx_importer import get_onnx_tensor_dtype, get_onnx_tensor_shape

    tensors = graph.tensors()
    for vi in infos:
        t = tensors.get(vi.name)
        if isinstance(t, gs.Variable):
            t.shape = get_onnx_tensor_shape(vi)
            if t.dtype is None and vi.type.tensor_type.elem_type:
                t.dtype = get_onnx_tensor_dtype(vi)


def producer(tensor: gs.Tensor) -> gs.Node | None:
    """The node that writes ``tensor``, or None for graph inputs and initializers."""
    return tensor.inputs[0] if tensor.inputs else None


def onnx_dtype(tensor: gs.Tensor) -> int | None:
    """The ONNX element type of a tensor, or None when shape inference did not find it."""
    dt = tensor.dtype
    if dt is None:
        return None
    if isinstance(dt, int):
        return dt
    try:
        return onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    except (TypeError, KeyError, ValueError):
        return getattr(dt, "onnx_type", None) or _ml_dtype(dt)


def _ml_dtype(dt: object) -> int | None:
    """Map ml_dtypes' bfloat16 and friends that numpy cannot name."""
    name = getattr(dt, "__name__", str(dt))
    return {"bfloat16": TensorProto.BFLOAT16}.get(name)


def const_array(tensor: gs.Tensor, limit: int = SMALL_CONST) -> np.ndarray | None:
    """Value of a small constant tensor (initializer or Constant node output), else None.

    Larger constants return None without reading their bytes, so external weights stay on disk.
    """
    if isinstance(tensor, gs.Constant):
        if tensor.shape is not None and math.prod(tensor.shape) > limit:
            return None
        return np.asarray(tensor.values)
    node = producer(tensor)
    if node is None or node.op != "Constant" or (node.domain or "") not in ("", "ai.onnx"):
        return None
    attrs = node.attrs
    if "value" in attrs:
        return const_array(attrs["value"], limit)
    for key in ("value_float", "value_int"):
        if key in attrs:
            return np.asarray(attrs[key])
    for key in ("value_floats", "value_ints"):
        if key in attrs and len(attrs[key]) <= limit:
            return np.asarray(attrs[key])
    return None


def const_proto(tensor: gs.Tensor) -> TensorProto | None:
    """A small constant as a TensorProto of its own dtype (for baking into a function body)."""
    from onnx_graphsurgeon.exporters.onnx_exporter import OnnxExporter

    node = producer(tensor)
    if node is not None and node.op == "Constant":
        if isinstance(node.attrs.get("value"), gs.Constant):
            return const_proto(node.attrs["value"])
        arr = const_array(tensor)
        return None if arr is None else onnx.numpy_helper.from_array(arr, "")
    if not isinstance(tensor, gs.Constant) or numel(tensor) is None or numel(tensor) > SMALL_CONST:
        return None
    proto = TensorProto()
    proto.CopyFrom(OnnxExporter.export_tensor_proto(tensor))
    proto.name = ""
    return proto


def is_const(tensor: gs.Tensor) -> bool:
    """True for initializers and Constant-node outputs."""
    if isinstance(tensor, gs.Constant):
        return True
    node = producer(tensor)
    return node is not None and node.op == "Constant"


def has_subgraphs(graph: gs.Graph) -> bool:
    """The graph has control flow (If, Loop, Scan), whose bodies canonicalization leaves alone."""
    return any(n.op in ("If", "Loop", "Scan") for n in graph.nodes)


def same_dim(a: object, b: object) -> bool:
    """Two dims known to be equal: one static size, or one symbol (where ``dims_match`` is "may be equal")."""
    return a is not None and a == b and (isinstance(a, (int, np.integer)) or (isinstance(a, str) and a != ""))


def masked_scores(node: gs.Node) -> tuple[gs.Tensor, gs.Tensor, float] | None:
    """``Where(mask, s, fill)`` of a boolean mask, float scores s of the output's shape and a scalar constant fill,
    read by Softmax alone: (mask, s, fill), else None."""
    if node.op != "Where" or len(node.inputs) != 3 or not node.outputs:
        return None
    mask, s, fill = node.inputs
    value = const_array(fill, limit=1)
    out = node.outputs[0]
    if value is None or value.size != 1 or onnx_dtype(mask) != onnx.TensorProto.BOOL \
            or onnx_dtype(s) not in FLOAT_TYPES or s.shape is None or out.shape is None \
            or len(s.shape) != len(out.shape) or not all(same_dim(a, b) for a, b in zip(s.shape, out.shape)):
        return None
    if not out.outputs or any(r.op != "Softmax" for r in out.outputs):
        return None
    return mask, s, float(value.reshape(-1)[0])


def numel(tensor: gs.Tensor) -> int | None:
    """Element count when every dim is known."""
    shape = tensor.shape
    if shape is None or any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
        return None
    return int(np.prod(shape)) if shape else 1


def data_inputs(node: gs.Node) -> list[gs.Tensor]:
    """The node's inputs without the attribute-like ones (axes, split) listed in ATTR_INPUTS."""
    extra = ATTR_INPUTS.get(node.op)
    if not extra:
        return list(node.inputs)
    return [t for i, t in enumerate(node.inputs) if i not in extra]


def attrs_of(node: gs.Node) -> dict[str, object]:
    """Attributes with attribute-like constant inputs folded in (axes as input or attribute)."""
    attrs = dict(node.attrs)
    for idx, name in ATTR_INPUTS.get(node.op, {}).items():
        if idx < len(node.inputs) and node.inputs[idx].name:
            arr = const_array(node.inputs[idx], limit=64)
            attrs[name] = None if arr is None else [int(v) for v in arr.reshape(-1)]
    return attrs


def graph_output_ids(graph: gs.Graph) -> set[int]:
    """ids of the tensors that are graph outputs."""
    return {id(t) for t in graph.outputs}


def main_opset(model: onnx.ModelProto) -> int:
    """The model's ai.onnx opset version."""
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    from .errors import AscOnnxError

    raise AscOnnxError("model has no ai.onnx opset_import entry")


def input_dims(model: ModelProto, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
               default_dim: int = 4) -> dict[str, list[int]]:
    """Dims of every graph input: ``input_shapes`` first, else static dims, else ``default_dim`` (-1 keeps
    a dynamic dim dynamic, as ATC's --input_shape writes it)."""
    inits = {i.name for i in model.graph.initializer}
    fixed = dict(input_shapes or {})
    dims: dict[str, list[int]] = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if vi.name in fixed:
            dims[vi.name] = list(fixed[vi.name])
        else:
            dims[vi.name] = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else default_dim
                             for d in vi.type.tensor_type.shape.dim]
    return dims


def attr(node: onnx.NodeProto, name: str, default: object = None) -> object:
    """A node's attribute ``name`` as its Python value, or ``default`` when the node does not set it."""
    a = next((x for x in node.attribute if x.name == name), None)
    return default if a is None else onnx.helper.get_attribute_value(a)
