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

import numpy as np
import onnx
from onnx import ModelProto, TensorProto

from .errors import AscOnnxError
from .graph import input_dims

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
                seed: int = 0, default_dim: int = 4) -> dict[str, np.ndarray]:
    """Seeded random inputs for every graph input that is not an initializer."""
    rng = np.random.default_rng(seed)
    limits = _gather_limits(model)
    shapes = input_dims(model, input_shapes, default_dim)
    feeds: dict[str, np.ndarray] = {}
    for vi in model.graph.input:
        if vi.name not in shapes:
            continue
        tt = vi.type.tensor_type
        dims = shapes[vi.name]
        np_type = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if tt.elem_type == TensorProto.BOOL:
            arr = np.ones(dims, dtype=bool)
        elif np.issubdtype(np_type, np.integer):
            high = limits.get(vi.name, 2)
            arr = rng.integers(0, max(high, 1), size=dims).astype(np_type)
        else:
            arr = rng.standard_normal(dims).astype(np.float32).astype(np_type)
        feeds[vi.name] = arr
    return feeds


def _session(model: str | os.PathLike | ModelProto):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    src = model.SerializeToString() if isinstance(model, ModelProto) else str(model)
    try:
        return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise AscOnnxError(f"onnxruntime cannot load {'the model' if isinstance(model, ModelProto) else model}: "
                           f"{str(exc).splitlines()[0][:300]}") from None


def run(model: str | os.PathLike | ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run a model on onnxruntime CPU and return its outputs by name."""
    sess = _session(model)
    names = [o.name for o in sess.get_outputs()]
    try:
        outs = sess.run(names, dict(feeds))
    except Exception as exc:
        raise AscOnnxError(f"onnxruntime failed to run the model: {str(exc).splitlines()[0][:300]}") from None
    return dict(zip(names, outs))


def compare_arrays(name: str, ref: np.ndarray, got: np.ndarray, elem_type: int) -> OutputCheck:
    """Compare one output with its dtype's tolerance (exact for integers and bools)."""
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
    ok = bool(np.all(diff <= atol + rtol * np.abs(np.nan_to_num(r)))) and not np.isnan(max_abs)
    return OutputCheck(name, dtype, tuple(ref.shape), max_abs, max_rel, rtol, atol, ok)


def validate_models(original: str | os.PathLike | ModelProto, fused: str | os.PathLike | ModelProto,
                    input_shapes: Mapping[str, tuple[int, ...]] | None = None, seed: int = 0,
                    default_dim: int = 4, ref: Mapping[str, np.ndarray] | None = None) -> ValidationReport:
    """Run both models on the same seeded inputs and compare every output (``ref``: the original's
    outputs on those inputs, when the caller already has them)."""
    proto = original if isinstance(original, ModelProto) else onnx.load(str(original), load_external_data=False)
    feeds = make_inputs(proto, input_shapes, seed, default_dim)
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
    return ValidationReport(tuple(checks), shapes, seed)
