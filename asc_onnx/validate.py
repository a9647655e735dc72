"""Stage 8 (graph rung), verify: the original and ``model.asc.onnx`` on onnxruntime CPU.

Both run with graph optimizations off, so the comparison is of the two graphs' arithmetic,
not of onnxruntime's own fusions. Inputs are seeded random data of each input's dtype;
integer inputs that index a Gather stay inside the table, other integers are 0/1 (masks).
Tolerances are per dtype and stated in :data:`TOLERANCES`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx
from onnx import ModelProto, TensorProto

from .errors import AscOnnxError, whole
from .graph import body_graphs, input_dims

BF16 = ml_dtypes.bfloat16  # onnx depends on ml_dtypes; numpy has no bf16 of its own

#: dtype -> (rtol, atol): |got - ref| <= atol + rtol * |ref| elementwise.
TOLERANCES: dict[int, tuple[float, float]] = {
    TensorProto.FLOAT: (1e-5, 1e-5),
    TensorProto.FLOAT16: (1e-3, 1e-2),
    TensorProto.BFLOAT16: (1e-2, 5e-2),
    TensorProto.DOUBLE: (1e-9, 1e-12),
}


@dataclass(frozen=True)
class OutputCheck:
    """Comparison of one model output."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    rtol: float
    atol: float
    ok: bool


@dataclass(frozen=True)
class ValidationReport:
    """All outputs compared; ``ok`` when every one is within tolerance."""

    outputs: tuple[OutputCheck, ...]
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...]
    seed: int
    note: str = ""

    @property
    def ok(self) -> bool:
        """Every output within its dtype's tolerance."""
        return all(o.ok for o in self.outputs)

    def table(self) -> str:
        """A plain-text table of max errors per output."""
        head = f"{'output':<28} {'dtype':<9} {'max abs err':>12} {'max rel err':>12} {'tol (rtol/atol)':>17}  verdict"
        rows = [head]
        for o in self.outputs:
            rows.append(f"{o.name[:28]:<28} {o.dtype:<9} {o.max_abs:>12.3e} {o.max_rel:>12.3e} "
                        f"{o.rtol:>8.0e}/{o.atol:<8.0e}  {'ok' if o.ok else 'MISMATCH'}")
        return "\n".join(rows)


def _gather_limits(model: ModelProto) -> dict[str, int]:
    """Graph inputs used as Gather indices -> size of the gathered axis (from initializer shapes)."""
    shapes = {i.name: list(i.dims) for i in model.graph.initializer}
    limits: dict[str, int] = {}
    for n in model.graph.node:
        if n.op_type == "Gather" and len(n.input) == 2 and n.input[0] in shapes:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
            dims = shapes[n.input[0]]
            limits[n.input[1]] = min(limits.get(n.input[1], 1 << 62), dims[axis])
    return limits


def make_inputs(model: ModelProto, input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                seed: int = 0, default_dim: int = 4,
                values: Mapping[str, tuple[float, ...]] | None = None) -> dict[str, np.ndarray]:
    """Seeded random inputs for every graph input that is not an initializer; ``values`` (``--input-value``)
    fixes an input's contents: one value fills it, or as many values as it has elements, in order."""
    rng = np.random.default_rng(seed)
    limits = _gather_limits(model)
    shapes = input_dims(model, input_shapes, default_dim)
    unknown = sorted(set(values or {}) - set(shapes))
    if unknown:
        raise AscOnnxError(f"--input-value names {', '.join(unknown)}, not an input of the model "
                           f"(inputs: {', '.join(sorted(shapes))})")
    feeds: dict[str, np.ndarray] = {}
    for vi in model.graph.input:
        if vi.name not in shapes:
            continue
        tt = vi.type.tensor_type
        dims = shapes[vi.name]
        np_type = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if values and vi.name in values:
            feeds[vi.name] = _given(vi.name, values[vi.name], dims, np_type)
            continue
        if tt.elem_type == TensorProto.BOOL:
            arr = np.ones(dims, dtype=bool)
        elif np.issubdtype(np_type, np.integer):
            high = limits.get(vi.name, 2)
            arr = rng.integers(0, max(high, 1), size=dims).astype(np_type)
        else:
            arr = np.asarray(rng.standard_normal(dims), dtype=np.float32).astype(np_type)
        feeds[vi.name] = arr
    return feeds


def _given(name: str, vals: tuple[float, ...], dims: list[int], np_type: np.dtype) -> np.ndarray:
    """An input's contents as ``--input-value`` gives them."""
    n = int(np.prod(dims)) if dims else 1
    if len(vals) == 1:
        return np.full(dims, vals[0]).astype(np_type)
    if len(vals) != n:
        raise AscOnnxError(f"--input-value {name}: gives {len(vals)} values, the input has {n} elements "
                           f"(shape {list(dims)}); give one value to fill it or all {n}")
    return np.array(vals).reshape(dims).astype(np_type)


def _session(model: str | os.PathLike | ModelProto):
    import onnxruntime as ort

    ort.set_default_logger_severity(4)  # its own coloured log lines would precede our one-line error
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    src = model.SerializeToString() if isinstance(model, ModelProto) else str(model)
    try:
        return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        what = "the model" if isinstance(model, ModelProto) else model
        if "NOT_IMPLEMENTED" in str(exc):
            raise MissingKernelError(f"onnxruntime cannot load {what}: {whole(exc)}") from None
        raise AscOnnxError(f"onnxruntime cannot load {'the model' if isinstance(model, ModelProto) else model}: "
                           f"{whole(exc)}") from None


def branching_inputs(model: ModelProto) -> list[str]:
    """The graph inputs an ``If`` of the main graph branches on (its condition computed from them): random data there
    takes a branch the deployment may never take, so a failure suggests ``--input-value``."""
    producers = {o: n for n in model.graph.node for o in n.output}
    inputs = {vi.name for vi in model.graph.input} - {t.name for t in model.graph.initializer}
    found: list[str] = []
    for node in model.graph.node:
        if node.op_type != "If" or not node.input:
            continue
        seen, todo = set(), [node.input[0]]
        while todo:
            t = todo.pop()
            if t in seen or not t:
                continue
            seen.add(t)
            if t in inputs and t not in found:
                found.append(t)
            elif t in producers:
                todo.extend(producers[t].input)
    return found


def input_value_hint(model: ModelProto) -> str:
    """`` (the model branches on x: give its real value with --input-value x:V)``, or "" without such an input."""
    names = branching_inputs(model)
    if not names:
        return ""
    return (f"; the model branches on {', '.join(names)} (an If): give real values with "
            + " ".join(f"--input-value {n}:V" for n in names))


class MissingKernelError(AscOnnxError):
    """onnxruntime's CPU build has no kernel for an op at the model's dtype (bf16 Sigmoid, for one)."""


class Outputs(dict):
    """A run's outputs by name; ``via_fp32`` says why a bf16 model ran as its fp32 copy ("" when it did not)."""

    via_fp32: str = ""


def _has_bf16(model: ModelProto) -> bool:
    return any(vi.type.tensor_type.elem_type == TensorProto.BFLOAT16
               for vi in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info)) \
        or any(t.data_type == TensorProto.BFLOAT16 for t in model.graph.initializer)


def _widen_graph(g: onnx.GraphProto) -> None:
    for t in g.initializer:
        _widen_tensor(t)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    _widen_nodes(g.node)


def _widen_tensor(t: TensorProto) -> None:
    if t.data_type == TensorProto.BFLOAT16:
        t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).astype(np.float32), t.name))


def _widen_nodes(nodes) -> None:  # noqa: ANN001 - a repeated NodeProto field
    for node in nodes:
        for a in node.attribute:
            if a.HasField("t"):
                _widen_tensor(a.t)
            if a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i == TensorProto.BFLOAT16:
                a.i = TensorProto.FLOAT
        for sub in body_graphs(node):
            _widen_graph(sub)


def fp32_copy(model: ModelProto) -> ModelProto:
    """The model with every bf16 tensor, type and cast in fp32 (functions included): what onnxruntime's CPU
    build can run where it has no bf16 kernel. bf16 values widen exactly; only the arithmetic is wider."""
    m = ModelProto()
    m.CopyFrom(model)
    _widen_graph(m.graph)
    for f in m.functions:
        _widen_nodes(f.node)
    return m


def run(model: str | os.PathLike | ModelProto, feeds: Mapping[str, np.ndarray]) -> Outputs:
    """Run a model on onnxruntime CPU and return its outputs by name.

    A bf16 model that onnxruntime cannot run runs as its :func:`fp32_copy`, with the inputs widened and
    the outputs rounded back to bf16; ``Outputs.via_fp32`` then says so."""
    import onnxruntime as ort

    out = Outputs()
    try:
        sess = _session(model)
    except MissingKernelError as exc:
        proto = model if isinstance(model, ModelProto) else onnx.load(str(model))
        if not _has_bf16(proto):
            raise
        sess = _session(fp32_copy(proto))
        out.via_fp32 = "onnxruntime's CPU build " + str(exc).rsplit("NOT_IMPLEMENTED : ", 1)[-1].replace(
            "Could not find an implementation for", "has no kernel for")
        feeds = {k: v.astype(np.float32) if v.dtype.name == "bfloat16" else v for k, v in feeds.items()}
        bf16 = {o.name for o in proto.graph.output if o.type.tensor_type.elem_type == TensorProto.BFLOAT16}
    names = [o.name for o in sess.get_outputs()]
    try:
        opts = ort.RunOptions()
        opts.log_severity_level = 4  # the error comes back as the exception; its log line would precede it
        outs = sess.run(names, dict(feeds), opts)
    except Exception as exc:
        raise AscOnnxError(f"onnxruntime failed to run the model: {whole(exc)}") from None
    for name, arr in zip(names, outs):
        out[name] = arr.astype(BF16) if out.via_fp32 and name in bf16 else arr
    return out


def compare_arrays(name: str, ref: np.ndarray, got: np.ndarray, elem_type: int,
                   allow: float | None = None) -> OutputCheck:
    """Compare one output with its dtype's tolerance (exact for integers and bools); ``allow``, an error every
    element may have beyond it (the deployed check's spread of the reference)."""
    rtol, atol = TOLERANCES.get(elem_type, (0.0, 0.0))
    dtype = TensorProto.DataType.Name(elem_type).lower() if elem_type else str(ref.dtype)
    if ref.shape != got.shape:
        return OutputCheck(name, dtype, tuple(ref.shape), float("inf"), float("inf"), rtol, atol, False)
    r = ref.astype(np.float64)
    g = got.astype(np.float64)
    both_nan = np.isnan(r) & np.isnan(g)
    with np.errstate(invalid="ignore"):  # inf - inf: equal infinities are equal, not NaN apart
        diff = np.where(both_nan | (r == g), 0.0, np.abs(g - r))
    max_abs = float(np.max(diff)) if diff.size else 0.0
    rel = diff / np.maximum(np.abs(r), 1e-30)
    max_rel = float(np.max(np.where(diff == 0, 0.0, rel))) if diff.size else 0.0
    bound = atol + rtol * np.abs(np.nan_to_num(r)) + (0.0 if allow is None else allow)
    ok = bool(np.all(diff <= bound)) and not np.isnan(max_abs)
    return OutputCheck(name, dtype, tuple(ref.shape), max_abs, max_rel, rtol, atol, ok)


def validate_models(original: str | os.PathLike | ModelProto, fused: str | os.PathLike | ModelProto,
                    input_shapes: Mapping[str, tuple[int, ...]] | None = None, seed: int = 0,
                    default_dim: int = 4, ref: Mapping[str, np.ndarray] | None = None,
                    feeds: Mapping[str, np.ndarray] | None = None, proto: ModelProto | None = None
                    ) -> ValidationReport:
    """Run both models on the same seeded inputs and compare every output (``ref``: the original's
    outputs on ``feeds``, and ``proto`` its graph, when the caller already has them)."""
    if proto is None:
        proto = original if isinstance(original, ModelProto) else onnx.load(str(original), load_external_data=False)
    feeds = make_inputs(proto, input_shapes, seed, default_dim) if feeds is None else feeds
    ref = run(original, feeds) if ref is None else ref
    got = run(fused, feeds)
    types = {o.name: o.type.tensor_type.elem_type for o in proto.graph.output}
    checks = []
    for name, r in ref.items():
        if name not in got:
            checks.append(OutputCheck(name, "?", tuple(r.shape), float("inf"), float("inf"), 0, 0, False))
            continue
        checks.append(compare_arrays(name, r, got[name], types.get(name, 0)))
    shapes = tuple((k, tuple(int(d) for d in v.shape)) for k, v in feeds.items())
    why = getattr(ref, "via_fp32", "") or getattr(got, "via_fp32", "")
    note = (f"bf16 checked through fp32 copies of the models, outputs rounded to bf16 and compared with the bf16 "
            f"tolerance: {why}") if why else ""
    return ValidationReport(tuple(checks), shapes, seed, note)
