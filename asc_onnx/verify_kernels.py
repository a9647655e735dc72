"""Stage 8 (kernel rung), verify: every generated kernel in the emulator against onnxruntime on
the fused op's function body, on random inputs, on activations captured from a run of the
original model, and on edge shapes; plus the data movement of each op (fused vs unfused vs the
compulsory minimum)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper

from .emulator.harness import EmulatorFaultError, run
from .errors import AscOnnxError
from .lower import IO_TYPES
from .package import Kernel
from .rewrite import DOMAIN, FusedOp
from .soc import Soc
from .validate import compare_arrays

NP = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16}


@dataclass(frozen=True)
class KernelCheck:
    """One emulated run compared with onnxruntime."""

    op_type: str
    inputs: str  # random / captured / edge name
    shape: tuple[int, ...]
    dtype: str
    max_abs: float
    max_rel: float
    gm_bytes: int
    block_dim: int
    ok: bool
    error: str | None = None
    vec_elems: int = 0  # elements processed by every vector instruction


@dataclass(frozen=True)
class DataMovement:
    """Global-memory bytes of one op type on one shape."""

    op_type: str
    shape: tuple[int, ...]
    fused: int
    unfused: int
    compulsory: int
    vec_per_elem: float = 0.0  # vector work: elements processed by all vector instructions per data element


def body_model(op: FusedOp, dtypes: Sequence[int]) -> ModelProto:
    """A one-node model calling the op's function: onnxruntime's reference for the kernel."""
    opset = next(o.version for o in op.function.opset_import if o.domain in ("", "ai.onnx"))
    node = helper.make_node(op.op_type, list(op.input_names), list(op.output_names), domain=DOMAIN)
    graph = helper.make_graph([node], "body",
                              [helper.make_tensor_value_info(n, dtypes[0], None) for n in op.input_names],
                              [helper.make_tensor_value_info(n, dtypes[0], None) for n in op.output_names])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, 1)],
                              functions=[op.function])
    model.ir_version = 10
    return model


def dtype_of(a: np.ndarray) -> int:
    """ONNX element type of a float array (bf16 through ml_dtypes)."""
    if a.dtype == np.float32:
        return TensorProto.FLOAT
    if a.dtype == np.float16:
        return TensorProto.FLOAT16
    if a.dtype.name == "bfloat16":
        return TensorProto.BFLOAT16
    raise AscOnnxError(f"kernel inputs must be float32, float16 or bfloat16, not {a.dtype}")


def reference(op: FusedOp, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The function body on onnxruntime CPU (graph optimizations off).

    The body runs in the dtype it was matched in (its constants are typed): inputs of another
    dtype (fp16 or bf16 through an fp32 body) are widened exactly, and the result is rounded
    to the inputs' dtype, which is what the kernel must reproduce."""
    import onnxruntime as ort

    body = op.instances[0].input_dtypes[0]
    have = dtype_of(inputs[0])
    feed = inputs if have == body else [a.astype(NP.get(body, np.float32)) for a in inputs]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(body_model(op, [dtype_of(feed[0])]).SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    outs = sess.run(None, dict(zip(op.input_names, feed)))
    return outs if have == body else [o.astype(inputs[0].dtype) for o in outs]


def concrete(shape: Sequence[object] | None, default_dim: int) -> tuple[int, ...]:
    """A shape with symbolic dims replaced by ``default_dim``."""
    return tuple(d if isinstance(d, int) and d >= 0 else default_dim for d in (shape or ()))


def random_inputs(k: Kernel, dtype: int, out_shape: tuple[int, ...], seed: int = 0,
                  broadcast_shapes: Sequence[tuple[int, ...]] | None = None, dim: int = 4) -> list[np.ndarray]:
    """Seeded normal inputs: full inputs of ``out_shape``; broadcast inputs of their instance shape with
    dynamic dims bound to ``dim`` (or ``broadcast_shapes``, one per broadcast input)."""
    rng = np.random.default_rng(seed)
    inst = k.op.instances[0]
    given = iter(broadcast_shapes or ())
    out = []
    for i, x in enumerate(k.ir.inputs):
        if x.kind == "full":
            shape = out_shape
        elif broadcast_shapes:
            shape = next(given)
        else:  # dynamic dims take the data's binding at the aligned axis (they are that axis, or 1 there)
            dims = list(inst.input_shapes[i] or ())
            shape = tuple(d if isinstance(d, int) and d >= 0 else
                          (out_shape[len(out_shape) - len(dims) + j] if len(out_shape) - len(dims) + j >= 0 else dim)
                          for j, d in enumerate(dims))
        out.append((rng.standard_normal(shape) * 2).astype(np.float32).astype(np_type(dtype)))
    return out


def np_type(dtype: int) -> type:
    """numpy type of an ONNX float type."""
    if dtype == TensorProto.BFLOAT16:
        import ml_dtypes

        return ml_dtypes.bfloat16
    return NP[dtype]


def data_shape(k: Kernel, inputs: Sequence[np.ndarray]) -> tuple[int, ...]:
    """The shape the kernel computes over: its full inputs' (row kernels: the broadcast of the inputs that
    carry rows, which may all be masks)."""
    return tuple(np.broadcast_shapes(*(a.shape for a, x in zip(inputs, k.ir.inputs) if x.kind in ("full", "bcast"))))


def check(k: Kernel, inputs: Sequence[np.ndarray], soc: Soc, label: str, core_num: int | None = None) -> KernelCheck:
    """Emulate one kernel on ``inputs`` and compare every output with onnxruntime."""
    dtype = dtype_of(inputs[0])
    shape = data_shape(k, inputs)
    name = IO_TYPES[dtype][0]
    try:
        res = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, soc, core_num)
    except EmulatorFaultError as exc:
        return KernelCheck(k.op.op_type, label, shape, name, float("inf"), float("inf"), 0, 0, False, str(exc))
    refs = reference(k.op, inputs)
    cmps = [compare_arrays(n, r, g, dtype) for n, r, g in zip(k.op.output_names, refs, res.outputs)]
    return KernelCheck(k.op.op_type, label, shape, name, max(c.max_abs for c in cmps), max(c.max_rel for c in cmps),
                       res.gm_read_bytes + res.gm_write_bytes, res.block_dim, all(c.ok for c in cmps), None,
                       res.vec_elems)


def capture(model: str | os.PathLike | ModelProto, names: Sequence[str],
            feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Values of intermediate tensors ``names`` from an onnxruntime run of the original model."""
    import onnxruntime as ort

    proto = model if isinstance(model, ModelProto) else onnx.load(str(model))
    work = ModelProto()
    work.CopyFrom(proto)
    have = {o.name for o in work.graph.output} | {i.name for i in work.graph.input}
    for n in names:
        if n not in have:
            work.graph.output.append(onnx.ValueInfoProto(name=n))
            have.add(n)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(work.SerializeToString(), so, providers=["CPUExecutionProvider"])
        outs = sess.run(list(names), dict(feeds))
    except Exception as exc:
        raise AscOnnxError(f"capturing activations failed: {str(exc).splitlines()[0][:300]}") from None
    return dict(zip(names, outs))


def _body_numels(k: Kernel, inputs: Sequence[np.ndarray]) -> dict[str, int]:
    """Element counts of every body value on these inputs (shape inference over the body's nodes)."""
    body = k.op.function
    opset = next(o.version for o in body.opset_import if o.domain in ("", "ai.onnx"))
    graph = helper.make_graph(list(body.node), "sizes",
                              [helper.make_tensor_value_info(n, dtype_of(a), list(a.shape))
                               for n, a in zip(k.op.input_names, inputs)],
                              [helper.make_tensor_value_info(n, dtype_of(inputs[0]), None) for n in k.op.output_names])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - sizes fall back to the data's
        return {}
    out = {n: a.size for n, a in zip(k.op.input_names, inputs)}
    for v in list(inferred.graph.value_info) + list(inferred.graph.output):
        dims = v.type.tensor_type.shape.dim
        if v.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            out[v.name] = int(np.prod([d.dim_value for d in dims])) if dims else 1
    return out


def unfused_bytes(k: Kernel, inputs: Sequence[np.ndarray]) -> list[tuple[onnx.NodeProto, int]]:
    """GM bytes of each body node run as its own kernel: it reads its inputs and writes its outputs (a
    reduction writes one value per row)."""
    item = inputs[0].itemsize
    full = int(np.prod(data_shape(k, inputs)))
    numel = _body_numels(k, inputs)
    consts = {n.output[0] for n in k.op.function.node if n.op_type == "Constant"}
    return [(node, sum(numel.get(i, full) * item for i in node.input if i and i not in consts)
             + sum(numel.get(o, full) * item for o in node.output if o))
            for node in k.op.function.node if node.op_type != "Constant"]


def data_movement(k: Kernel, inputs: Sequence[np.ndarray], fused_bytes: int, vec_elems: int = 0) -> DataMovement:
    """GM bytes: fused kernel (emulator), unfused chain (each body node reads its inputs and writes
    its output), and the compulsory minimum (inputs read once, outputs written once)."""
    shape = data_shape(k, inputs)
    unfused = sum(b for _, b in unfused_bytes(k, inputs))
    # Outputs written once: the data's size, or one value per row for a row kernel's statistics.
    kinds = getattr(k.ir, "output_kinds", ("row",) * len(k.op.output_names))
    rows = int(np.prod(shape[:len(shape) - getattr(k.ir, "row_dims", 0)]))
    out_bytes = sum((int(np.prod(shape)) if kd == "row" else rows) * inputs[0].itemsize for kd in kinds)
    compulsory = sum(a.nbytes for a in inputs) + out_bytes
    return DataMovement(k.op.op_type, shape, fused_bytes, unfused, compulsory,
                        round(vec_elems / max(1, int(np.prod(shape))), 3))


__all__ = ["check", "data_shape", "capture", "reference", "random_inputs", "data_movement", "unfused_bytes",
           "KernelCheck", "DataMovement", "table", "verify_kernels", "body_model", "concrete"]


def _captured_inputs(kernels: Sequence[Kernel], original: str | os.PathLike | ModelProto,
                     feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Real activations for the first instance of every kernel (initializers read from the model)."""
    proto = original if isinstance(original, ModelProto) else onnx.load(str(original))
    inits = {i.name: i for i in proto.graph.initializer}
    wanted = [n for k in kernels for n in k.op.instances[0].inputs]
    values = {n: onnx.numpy_helper.to_array(inits[n]) for n in wanted if n in inits}
    values.update({n: feeds[n] for n in wanted if n in feeds})
    rest = [n for n in dict.fromkeys(wanted) if n not in values]
    if rest:
        values.update(capture(proto, rest, feeds))
    return values


def _bound_shape(inst, dim: int) -> tuple[int, ...]:
    """The output's shape with each dynamic dim bound to ``dim``, unless an input fixes it (a [1, 17, D]
    position embedding added to a [B, S, D] residual fixes S = 17)."""
    out = list(inst.output_shapes[0] or ())
    for shape in inst.input_shapes:
        for i, d in enumerate(reversed(list(shape or ()))):
            j = len(out) - 1 - i
            if j >= 0 and not (isinstance(out[j], int) and out[j] >= 0) and isinstance(d, int) and d > 1:
                out[j] = d
    return concrete(out, dim)


def verify_kernels(kernels: Sequence[Kernel], original: str | os.PathLike | ModelProto | None,
                   feeds: Mapping[str, np.ndarray] | None, soc: Soc, default_dim: int = 4
                   ) -> tuple[tuple[KernelCheck, ...], tuple[DataMovement, ...]]:
    """Every kernel on random inputs per dtype column and, given the original model and its
    feeds, on activations captured from it; data movement from the first random run."""
    checks: list[KernelCheck] = []
    moves: list[DataMovement] = []
    captured = _captured_inputs(kernels, original, feeds) if original is not None and feeds is not None else {}
    for k in kernels:
        inst = k.op.instances[0]
        dynamic = any(not isinstance(d, int) or d < 0 for d in inst.output_shapes[0] or ())
        # A kernel must be right for every shape its ATC model accepts: two bindings of each dynamic dim.
        for dim in (default_dim, default_dim + 3) if dynamic else (default_dim,):
            shape = _bound_shape(inst, dim)
            for j, dtype in enumerate(k.ir.dtypes):
                inputs = random_inputs(k, dtype, shape, dim=dim)
                c = check(k, inputs, soc, "random" if dim == default_dim else f"dims={dim}")
                checks.append(c)
                if j == 0 and dim == default_dim:  # data movement on the first dtype column
                    moves.append(data_movement(k, inputs, c.gm_bytes, c.vec_elems))
        real = [captured.get(n) for n in inst.inputs]
        if captured and all(r is not None and r.dtype in (np.float32, np.float16) for r in real) \
                and len({r.dtype for r in real}) == 1:
            checks.append(check(k, real, soc, "captured"))
    return tuple(checks), tuple(moves)


def table(checks: Sequence[KernelCheck]) -> str:
    """The emulate table: op, inputs, shape, dtype, max error, GM bytes, verdict."""
    rows = [f"{'op':<28} {'inputs':<9} {'shape':<20} {'dtype':<6} {'max abs err':>11} {'GM bytes':>10} "
            f"{'blocks':>6}  verdict"]
    for c in checks:
        verdict = "ok" if c.ok else ("FAULT " + (c.error or "")[:120] if c.error else "MISMATCH")
        rows.append(f"{c.op_type[:28]:<28} {c.inputs:<9} {str(list(c.shape))[:20]:<20} {c.dtype:<6} "
                    f"{c.max_abs:>11.3e} {c.gm_bytes:>10} {c.block_dim:>6}  {verdict}")
    return "\n".join(rows)
