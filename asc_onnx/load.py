"""Stage 1, load: read a model without its external weight bytes, check its paths, infer shapes.

External data stays on disk: tensors keep their ``external_data`` references and the folder
they are relative to is remembered, so the writer can stream-copy the files. A location that
leaves the model's folder (absolute path, ``..``, symlink pointing outside) is refused.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper, numpy_helper
from onnx.external_data_helper import ExternalDataInfo, uses_external_data

from .dims import name_input_dims, unnamed
from .errors import AscOnnxError
from .shape_values import name_body_dims, name_graph_dims

KNOWN_DTYPES = frozenset(v for v in TensorProto.DataType.values() if v != TensorProto.UNDEFINED)


@dataclass(frozen=True)
class LoadedModel:
    """A model as read from disk (or given in memory), with shapes inferred.

    Attributes:
        model: the model with value_info from shape inference; external tensors unread.
        source: the file it came from, or None for an in-memory model.
        base_dir: folder that external-data locations are relative to.
        external_files: relative locations of every external-data file the model uses.
        symbolic: with --input-shape, every tensor's shape inferred without it (dim params kept), so
            that kernels are built for every shape the deployed model accepts; empty otherwise.
        pending: ``load(..., defer=True)``: symbolic inference still running; ``model`` has onnx's shapes
            until its result is applied (``apply_value_info``).
    """

    model: ModelProto
    source: Path | None
    base_dir: Path | None
    external_files: tuple[str, ...]
    symbolic: Mapping[str, tuple[object, ...] | None] = field(default_factory=dict)
    pending: Symbolic | None = None


def _iter_tensors(model: ModelProto):
    """Every TensorProto of the model: initializers and Constant values, in all subgraphs."""
    yield from onnx.external_data_helper._get_all_tensors(model)


def _check_external(model: ModelProto, base_dir: Path | None) -> tuple[str, ...]:
    """Refuse external locations outside ``base_dir`` and missing files; return the locations."""
    files: list[str] = []
    for tensor in _iter_tensors(model):
        if not uses_external_data(tensor):
            continue
        info = ExternalDataInfo(tensor)
        loc = info.location
        if base_dir is None:
            raise AscOnnxError(f"tensor {tensor.name!r} uses external data {loc!r}, but the model was given "
                               "in memory: pass the model's path instead")
        if not loc or os.path.isabs(loc) or loc.startswith(("/", "\\")) or ".." in Path(loc).parts:
            raise AscOnnxError(f"external data location {loc!r} of tensor {tensor.name!r} leaves the model's "
                               "folder; refusing to read it")
        full = base_dir / loc
        real_base = base_dir.resolve()
        try:
            full.resolve().relative_to(real_base)
        except ValueError:
            raise AscOnnxError(f"external data location {loc!r} of tensor {tensor.name!r} resolves outside "
                               f"the model's folder {base_dir}; refusing to read it") from None
        if not full.is_file():
            raise AscOnnxError(f"external data file {full} for tensor {tensor.name!r} is missing")
        end = (info.offset or 0) + (info.length or 0)
        if info.length is not None and end > full.stat().st_size:
            raise AscOnnxError(f"external data file {full} is shorter ({full.stat().st_size} bytes) than "
                               f"tensor {tensor.name!r} needs ({end} bytes)")
        if loc not in files:
            files.append(loc)
    return tuple(files)


#: External tensors up to this many elements are read at load (shape constants, a norm's eps, a short bias): the
#: passes read small constants to match and fold them, and onnx-graphsurgeon would look for their files in the
#: working directory. Weights stay on disk.
INLINE_ELEMENTS = 64


def _inline_small(model: ModelProto, base_dir: Path) -> None:
    """Give every external tensor of at most :data:`INLINE_ELEMENTS` elements its bytes in the model."""
    for tensor in _iter_tensors(model):
        if uses_external_data(tensor) and tensor.data_type != onnx.TensorProto.STRING \
                and math.prod(tensor.dims) <= INLINE_ELEMENTS:
            values = read_tensor(tensor, base_dir)
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.DEFAULT
            tensor.raw_data = values.astype(values.dtype.newbyteorder("<"), copy=False).tobytes()


def read_tensor(t: onnx.TensorProto, base_dir: Path | None) -> np.ndarray:
    """One initializer's values, read from its external-data file region where it has one (onnx's own loader
    refuses a file with more than one hard link, which ``--link-weights`` makes, and loads the whole model)."""
    if t.data_location != onnx.TensorProto.EXTERNAL:
        return numpy_helper.to_array(t)
    info = {e.key: e.value for e in t.external_data}
    if base_dir is None or "location" not in info:
        raise AscOnnxError(f"initializer {t.name!r} has external data but no model folder to read it from")
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
    count = int(np.prod(t.dims)) if len(t.dims) else 1
    offset = int(info.get("offset", 0))
    raw = np.fromfile(base_dir / info["location"], dtype=np.uint8, count=count * dtype.itemsize, offset=offset)
    if raw.size != count * dtype.itemsize:
        raise AscOnnxError(f"initializer {t.name!r}: {info['location']} is shorter than its data")
    return raw.view(dtype).reshape(tuple(t.dims))


def _check_dtypes(model: ModelProto) -> None:
    """Refuse element types this version of onnx does not know."""
    graph = model.graph
    for vi in list(graph.input) + list(graph.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type not in KNOWN_DTYPES:
            raise AscOnnxError(f"tensor {vi.name!r} has unknown element type {vi.type.tensor_type.elem_type}")
    for init in graph.initializer:
        if init.data_type not in KNOWN_DTYPES:
            raise AscOnnxError(f"initializer {init.name!r} has unknown element type {init.data_type}")


def read_model(path: str | os.PathLike) -> tuple[ModelProto, Path]:
    """Parse the protobuf of ``path`` without loading external data; clear errors for bad files."""
    p = Path(path)
    if not p.exists():
        raise AscOnnxError(f"model file {p} does not exist")
    if not p.is_file():
        raise AscOnnxError(f"model path {p} is not a file")
    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError, and others for truncated input
        raise AscOnnxError(f"{p} is not a readable ONNX model ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else 'truncated or corrupt protobuf'})") from None
    if not model.HasField("graph") or len(model.graph.node) == 0 and len(model.graph.output) == 0:
        raise AscOnnxError(f"{p} holds no ONNX graph (empty or not a model file)")
    return model, p.parent


def _bind_inputs(work: ModelProto, input_shapes: dict[str, tuple[int, ...]]) -> None:
    """Write ``--input-shape`` dims into ``work``'s inputs; refuse unknown names and contradicted static dims."""
    names = {i.name for i in work.graph.input} - {i.name for i in work.graph.initializer}
    for name, dims in input_shapes.items():
        if name not in names:
            raise AscOnnxError(f"--input-shape names {name!r}, which is not an input of the model "
                               f"(inputs: {', '.join(sorted(names))})")
        vi = next(i for i in work.graph.input if i.name == name)
        shape = vi.type.tensor_type.shape
        if len(shape.dim) != len(dims):
            raise AscOnnxError(f"--input-shape {name}: gives {len(dims)} dims, the model input has {len(shape.dim)} "
                               f"({format_dims(shape)})")
        for i, (d, v) in enumerate(zip(shape.dim, dims)):
            if d.HasField("dim_value") and d.dim_value != v:
                raise AscOnnxError(f"--input-shape {name}: dim {i} is {v}, but the model fixes it to {d.dim_value} "
                                   f"({name} is {format_dims(shape)}); only dynamic dims can be set")
        for d, v in zip(shape.dim, dims):
            d.Clear()
            d.dim_value = v


def format_dims(shape: onnx.TensorShapeProto) -> str:
    """``[batch, 3, 640, ?]``: a shape as the model states it."""
    return "[" + ", ".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
                           for d in shape.dim) + "]"


#: Seconds symbolic shape inference may take before onnx's shapes are used alone: its sympy algebra can be slow
#: (a detector's 18 Resizes over dynamic H and W took 20 s), and a run should not wait on it.
SYMBOLIC_SECONDS = 8.0


def _symbolic_in_process(model: ModelProto, ort: bool = True) -> ModelProto | None:
    """Dims onnx's inference left unknown: our own pass over the shape arithmetic exporters write (fast), then,
    where it leaves a dim unknown and ``ort``, onnxruntime's symbolic inference (slow: sympy) on what it gave."""
    named = ModelProto()
    named.CopyFrom(model)
    try:
        if name_graph_dims(named):
            return named
    except Exception:  # noqa: BLE001 - onnx's inference errors are many and varied: onnxruntime's alone
        named = model
    return _onnxruntime_symbolic(named) if ort else None


def _additions(model: ModelProto, ort: bool = True) -> ModelProto | None:
    """:func:`_symbolic_in_process`, as a model holding only the value_info entries it adds or improves (what a
    parent parses and applies)."""
    res = _symbolic_in_process(model, ort)
    if res is None:
        return None
    added = ModelProto()
    added.graph.value_info.extend(merge_value_info(model, res))
    return added


def _onnxruntime_symbolic(model: ModelProto) -> ModelProto | None:
    try:
        import logging

        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    except ImportError:  # sympy missing: onnx's own inference alone
        return None
    logging.getLogger("onnxruntime.tools.symbolic_shape_infer").setLevel(logging.CRITICAL)
    # (where it gives up, onnxruntime saves a debugging copy of the model, weights included, into the working
    # directory: it runs only in the forked child of Symbolic, whose working directory is its scratch folder)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return SymbolicShapeInference.infer_shapes(model, int_max=2**31 - 1, auto_merge=True,
                                                       guess_output_rank=False, verbose=0)
    except Exception:  # noqa: BLE001 - an op it does not know: keep onnx's shapes
        return None


class Symbolic:
    """onnxruntime's symbolic shape inference, which follows Shape/Slice/Concat/Reshape arithmetic and keeps
    dim params as expressions, running in a forked child while the caller works on onnx's own shapes (it costs
    seconds on a large model, about what importing the graph costs: the two overlap on two cores).
    :meth:`result` waits at most ``seconds`` from the start, then stops the child; it gives None where the
    inference cannot run (it gives up on some ops and on unreadable weights). Its scratch folder is removed by
    :meth:`result` or :meth:`cancel`, one of which a caller must reach on every path."""

    def __init__(self, model: ModelProto, seconds: float = SYMBOLIC_SECONDS) -> None:
        import multiprocessing
        import tempfile
        import time

        self.model, self.proc, self.folder = model, None, None
        self.deadline = time.monotonic() + seconds
        try:
            ctx = multiprocessing.get_context("fork")
        except ValueError:  # no fork (not Linux): our own pass in this process, at result(); not onnxruntime's,
            return          # which would litter the working directory where it gives up
        self.folder = Path(tempfile.mkdtemp(prefix="asc-shapes-"))
        out = self.folder / "inferred.onnx"

        def child() -> None:
            import signal

            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's handler raises; here: just stop
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to handle
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.chdir(out.parent)  # what onnxruntime saves where it gives up lands in the scratch folder
            res = _additions(model)
            if res is not None:
                out.write_bytes(res.SerializeToString())

        self.proc = ctx.Process(target=child, daemon=True)
        self.proc.start()

    def cancel(self) -> None:
        """Stop the child now and remove its folder (the caller is unwinding: an error or a signal)."""
        self.deadline = 0.0
        self.result()

    def result(self) -> ModelProto | None:
        """A model whose value_info holds what the inference adds (entries new or knowing more than the model's:
        put them in with :func:`apply_value_info`), or None (no result, or over time)."""
        import shutil
        import time

        if self.proc is None:
            return _additions(self.model, ort=False) if self.deadline else None  # no fork; 0 once cancelled
        try:
            self.proc.join(max(0.0, self.deadline - time.monotonic()))
        finally:
            if self.proc.is_alive():  # over time, or the parent was interrupted
                self.proc.kill()
                self.proc.join()
        try:
            out = self.folder / "inferred.onnx"
            if self.proc.exitcode != 0 or not out.is_file():
                return None
            inferred = ModelProto()
            inferred.ParseFromString(out.read_bytes())
            return inferred
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def _all_static(model: ModelProto) -> bool:
    """Every tensor of the main graph has a known rank and only numeric dims."""
    for vi in list(model.graph.value_info) + list(model.graph.output):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            return False
        if any(not d.HasField("dim_value") for d in tt.shape.dim):
            return False
    return True


def merge_value_info(into: ModelProto, richer: ModelProto) -> list[onnx.ValueInfoProto]:
    """Replace ``into``'s value_info entries with ``richer``'s where those know more (a rank or a dim); return
    the entries that changed."""
    def known(vi: onnx.ValueInfoProto) -> float:
        # a rank, then static dims, then dims tied to a named input dim (``seq``, not onnx's fresh ``unk__3``)
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            return -1
        return sum(1 + 2 * d.HasField("dim_value") + (bool(d.dim_param) and not d.dim_param.startswith("unk__"))
                   for d in tt.shape.dim)

    have = {vi.name: vi for vi in into.graph.value_info}
    outputs = {vi.name: vi for vi in into.graph.output}
    changed: list[onnx.ValueInfoProto] = []
    for vi in richer.graph.value_info:
        old = have.get(vi.name)
        if vi.name in outputs or (old is not None and old == vi):  # (an equal entry knows nothing more)
            continue
        if old is None:
            into.graph.value_info.append(vi)
            changed.append(vi)
        elif known(vi) > known(old) and (not old.type.tensor_type.elem_type
                                         or old.type.tensor_type.elem_type == vi.type.tensor_type.elem_type):
            old.CopyFrom(vi)
            changed.append(old)
    return changed


def apply_value_info(into: ModelProto, entries: list[onnx.ValueInfoProto]) -> None:
    """Put ``entries`` (what :meth:`Symbolic.result` gives: each knows more than ``into``'s entry of its name, if
    any) into ``into``'s value_info."""
    names = {vi.name for vi in entries}
    have = {vi.name: vi for vi in into.graph.value_info if vi.name in names}
    for vi in entries:
        old = have.get(vi.name)
        if old is None:
            into.graph.value_info.append(vi)
        else:
            old.CopyFrom(vi)


def infer_shapes(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None) -> ModelProto:
    """Return a copy with value_info filled by onnx shape inference, refined by symbolic inference.

    ``input_shapes`` fixes the named inputs' dims in the copy used for inference only when
    given; the returned model keeps the original (possibly symbolic) input dims.
    """
    inferred, pending = start_shapes(model, input_shapes)
    richer = pending.result() if pending is not None else None
    if richer is not None:
        apply_value_info(inferred, list(richer.graph.value_info))
    return inferred


def start_shapes(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None
                 ) -> tuple[ModelProto, Symbolic | None]:
    """:func:`infer_shapes` with onnx's inference done and symbolic inference left running (None where it has
    nothing to add): put its result in with :func:`apply_value_info`."""
    work = ModelProto()
    work.CopyFrom(model)
    _bind_inputs(work, input_shapes or {})
    try:
        inferred = onnx.shape_inference.infer_shapes(work, check_type=False, strict_mode=False, data_prop=True)
    except Exception as exc:
        raise AscOnnxError(f"shape inference failed: {str(exc).splitlines()[0]}") from None
    # Symbolic inference does not enter If/Loop/Scan bodies: their Reshape arithmetic is followed here (on a
    # copy: where onnx's inference then objects to a dim it named, its first answer stands).
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
           for node in inferred.graph.node for a in node.attribute):
        named = ModelProto()
        named.CopyFrom(inferred)
        if name_body_dims(named):
            try:
                inferred = onnx.shape_inference.infer_shapes(named, check_type=False, strict_mode=False,
                                                             data_prop=True)
            except Exception:  # noqa: BLE001 - onnx's inference errors are many and varied
                pass
    if input_shapes:
        del inferred.graph.input[:]
        inferred.graph.input.extend(model.graph.input)
    # Symbolic inference does not look into local functions (they are inlined before matching), and has
    # nothing to add where onnx's inference already knows every dim.
    pending = None
    if not inferred.functions and not _all_static(inferred):
        with_bound = inferred
        if input_shapes:  # it sees the bound inputs, as onnx's inference did
            with_bound = ModelProto()
            with_bound.CopyFrom(inferred)
            del with_bound.graph.input[:]
            with_bound.graph.input.extend(work.graph.input)
        pending = Symbolic(with_bound)
    return inferred, pending


def load(model: str | os.PathLike | ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None,
         shapes: bool = True, defer: bool = False) -> LoadedModel:
    """Load a model from a path or take a ModelProto, check its external data, infer shapes (``shapes``;
    without it, the checks alone: callers that only feed the model's inputs skip the inference). With
    ``defer``, symbolic inference is left running in ``LoadedModel.pending``."""
    if isinstance(model, ModelProto):
        proto, source, base = model, None, None
    else:
        proto, base = read_model(model)
        source = Path(model)
    _check_dtypes(proto)
    if unnamed(proto):  # a dim declared -1, or spelled '?', gets a name of its own (never in the caller's proto)
        if source is None:
            proto = _copy(proto)
        name_input_dims(proto)
    files = _check_external(proto, base)
    if files:
        _inline_small(proto, base)
    if not shapes:
        return LoadedModel(model=proto, source=source, base_dir=base, external_files=files)
    symbolic = tensor_shapes(infer_shapes(proto)) if input_shapes else {}
    inferred, pending = start_shapes(proto, input_shapes) if defer else (infer_shapes(proto, input_shapes), None)
    return LoadedModel(model=inferred, source=source, base_dir=base, external_files=files, symbolic=symbolic,
                       pending=pending)


def _copy(model: ModelProto) -> ModelProto:
    out = ModelProto()
    out.CopyFrom(model)
    return out


def tensor_shapes(model: ModelProto) -> dict[str, tuple[object, ...] | None]:
    """Name -> shape (ints and dim-param names) of every typed tensor in an inferred model's main graph."""
    out: dict[str, tuple[object, ...] | None] = {}
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            out[vi.name] = None
            continue
        out[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return out
