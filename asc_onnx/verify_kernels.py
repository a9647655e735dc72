"""Stage 8 (kernel rung), verify: every generated kernel in the emulator against onnxruntime on
the fused op's function body, on random inputs, on activations captured from a run of the
original model, and on edge shapes; plus the data movement of each op (fused vs unfused vs the
compulsory minimum)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper

from .dtypes import NP_TYPES, np_type, onnx_type
from .emulator import cann_tiling
from .emulator.harness import EmulatorFaultError, TilingRefusedError, prebuild, refusal_text, run
from .errors import AscOnnxError, whole
from .kernels import of
from .kernels.drive import concrete
from .kernels.ir import IO_TYPES
from .load import read_tensor
from .package import Kernel
from .rewrite import DOMAIN, FusedOp, param_attributes
from .soc import Soc
from .validate import compare_arrays


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
    cube: Mapping[str, int] | None = None  # matmul kernels: cube counters and the tiling used
    tiling: str = ""  # matmul kernels: whose Matmul tiling the run used ("CANN" or "asc-onnx")
    refused: bool = False  # the host tiling refused the shape (the kernel never ran): ``error`` says why
    tile_length: int = 0  # the run's tile: elements (pointwise), rows (row; 0 in split mode), C block elements
    ub_peak: int = 0  # unified-buffer bytes the run used at most
    est_us: float = 0.0  # the timing model's estimate of the kernel at this shape (no launch), microseconds
    bottleneck: str = ""  # the pipe busiest on the longest core in that estimate


@dataclass(frozen=True)
class DataMovement:
    """Global-memory bytes of one op type on one shape."""

    op_type: str
    shape: tuple[int, ...]
    fused: int
    unfused: int
    compulsory: int
    vec_per_elem: float = 0.0  # vector work: elements processed by all vector instructions per data element
    tiling_min: int = 0  # matmul: the least GM traffic the tiling allows (each core reads its x rows, W columns once)
    cube_macs: int = 0  # matmul: multiply-accumulates the cube ran (whole fractals)
    staging: int = 0  # matmul: of ``fused``, the C blocks' round trip through the per-core GM slots (910B)


def body_model(op: FusedOp, dtypes: Sequence[int], params: Sequence[float] | None = None) -> ModelProto:
    """A one-node model calling the op's function: onnxruntime's reference for the kernel, with the op's
    parameters (``params``, else the first instance's) as the node's attributes."""
    opset = next(o.version for o in op.function.opset_import if o.domain in ("", "ai.onnx"))
    node = helper.make_node(op.op_type, list(op.input_names), list(op.output_names), domain=DOMAIN)
    node.attribute.extend(param_attributes(op, op.instances[0].params if params is None else params))
    graph = helper.make_graph([node], "body",
                              [helper.make_tensor_value_info(n, dtypes[0], None) for n in op.input_names],
                              [helper.make_tensor_value_info(n, dtypes[0], None) for n in op.output_names])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, 1)],
                              functions=[op.function])
    model.ir_version = 10
    return model


def reference(op: FusedOp, inputs: Sequence[np.ndarray], params: Sequence[float] | None = None) -> list[np.ndarray]:
    """The function body on onnxruntime CPU (graph optimizations off).

    The body runs in the dtype it was matched in (its constants are typed): inputs of another
    dtype (fp16 or bf16 through an fp32 body) are widened exactly, and the result is rounded
    to the inputs' dtype, which is what the kernel must reproduce."""
    body = op.instances[0].input_dtypes[0]
    have = onnx_type(inputs[0])
    if of(op.kernel).cube and body != TensorProto.FLOAT or body == TensorProto.BFLOAT16:
        # The cube accumulates in fp32, and onnxruntime's CPU build lacks most bf16 kernels: the reference is
        # the body in fp32, rounded to the I/O type once (every kernel computes in fp32 registers).
        return [o.astype(inputs[0].dtype)
                for o in reference(_fp32_op(op), [a.astype(np.float32) for a in inputs], params)]
    feed = inputs if have == body else [a.astype(NP_TYPES.get(body, np.float32)) for a in inputs]
    sess = _body_session(body_model(op, [onnx_type(feed[0])], params).SerializeToString())
    outs = sess.run(None, dict(zip(op.input_names, feed)))
    return outs if have == body else [o.astype(inputs[0].dtype) for o in outs]


#: onnxruntime sessions of op bodies, by the body model's bytes (the deployed check asks for one per fused node;
#: making a session costs far more than running it).
_SESSIONS: OrderedDict[bytes, Any] = OrderedDict()


def _body_session(model: bytes) -> Any:
    import onnxruntime as ort

    key = hashlib.sha256(model).digest()
    sess = _SESSIONS.get(key)
    if sess is None:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        _SESSIONS[key] = sess
        while len(_SESSIONS) > 64:
            _SESSIONS.popitem(last=False)
    else:
        _SESSIONS.move_to_end(key)
    return sess


def _fp32_op(op: FusedOp) -> FusedOp:
    """The op with its body's constants and casts in fp32 (the reference of a kernel that computes in fp32)."""
    from dataclasses import replace

    fn = onnx.FunctionProto()
    fn.CopyFrom(op.function)
    for node in fn.node:
        for a in node.attribute:
            if a.name == "value" and a.t.data_type in (TensorProto.FLOAT16, TensorProto.BFLOAT16):
                a.t.CopyFrom(onnx.numpy_helper.from_array(
                    onnx.numpy_helper.to_array(a.t).astype(np.float32), a.t.name))
            if node.op_type == "Cast" and a.name == "to" and a.i in (TensorProto.FLOAT16, TensorProto.BFLOAT16):
                a.i = TensorProto.FLOAT
    inst = replace(op.instances[0], input_dtypes=(TensorProto.FLOAT,) * len(op.instances[0].input_dtypes))
    wide = tuple(TensorProto.FLOAT if t in (TensorProto.FLOAT16, TensorProto.BFLOAT16) else t for t in op.param_types)
    return replace(op, function=fn, instances=(inst,), param_types=wide)


def random_inputs(k: Kernel, dtype: int, out_shape: tuple[int, ...], seed: int = 0,
                  broadcast_shapes: Sequence[tuple[int, ...]] | None = None, dim: int = 4) -> list[np.ndarray]:
    """Seeded inputs of a kernel's class's kind (normal values; matmul weights scaled as trained layers are):
    full inputs of ``out_shape``; broadcast inputs of their instance shape with dynamic dims bound to ``dim``
    (or ``broadcast_shapes``, one per broadcast input)."""
    return of(k).driver.random_inputs(k.ir, k.op.instances[0], np_type(dtype), out_shape, np.random.default_rng(seed),
                                      broadcast_shapes, dim)


def matmul_inputs(k: Kernel, dtype: int, lead: Sequence[int], rng: np.random.Generator,
                  k_dim: int | None = None, n_dim: int | None = None) -> list[np.ndarray]:
    """A cube kernel's inputs at x's leading dims ``lead`` (and K, N when given)."""
    return of(k).driver.inputs_at(k.ir, k.op.instances[0], np_type(dtype), lead, rng, k_dim, n_dim)


def data_shape(k: Kernel, inputs: Sequence[np.ndarray]) -> tuple[int, ...]:
    """The shape the kernel computes over (its class's driver knows: the full inputs', the rows', y's)."""
    return of(k).driver.data_shape(k.ir, inputs)


def check(k: Kernel, inputs: Sequence[np.ndarray], soc: Soc, label: str, core_num: int | None = None,
          cube_tiling: Mapping[str, int] | None = None, params: Sequence[float] | None = None) -> KernelCheck:
    """Emulate one kernel on ``inputs`` and compare every output with onnxruntime; the op's parameters are
    ``params``, else the first instance's. A matmul kernel runs under ``cube_tiling``, else under the tiling
    CANN's own algorithm computes for its shape where the open CANN sources are at hand
    (``ASC_ONNX_CANN_SOURCE``), else under the emulator's own; the check says which."""
    params = tuple(k.ir.params if params is None else params)
    dtype = onnx_type(inputs[0])
    shape = data_shape(k, inputs)
    name = IO_TYPES[dtype][0]
    whose = ""
    if of(k).cube:
        whose = "given" if cube_tiling else "asc-onnx"
        got = cann_tiling.for_inputs(k.ir, k.files, soc, inputs, core_num) if cube_tiling is None else None
        if got is not None:
            whose = "CANN"
            if isinstance(got, int):
                return _refused(k, label, shape, name, soc, "the shape", got)
            cube_tiling = got
    try:
        res = run(k.ir, k.files, f"{k.op.op_type}TilingData", inputs, soc, core_num, cube_tiling, params)
    except EmulatorFaultError as exc:
        return KernelCheck(k.op.op_type, label, shape, name, float("inf"), float("inf"), 0, 0, False, str(exc),
                           tiling=whose, refused=isinstance(exc, TilingRefusedError))
    refs = reference(k.op, inputs, params)
    if soc.saturates:  # what onnxruntime rounds to an infinity, the SoC's saturating unit gives as the largest value
        refs = [_saturated(r) for r in refs]
    cmps = [compare_arrays(n, r, g, dtype) for n, r, g in zip(k.op.output_names, refs, res.outputs)]
    return KernelCheck(k.op.op_type, label, shape, name, max(c.max_abs for c in cmps), max(c.max_rel for c in cmps),
                       res.gm_read_bytes + res.gm_write_bytes, res.block_dim, all(c.ok for c in cmps), None,
                       res.vec_elems, res.cube, whose, tile_length=res.tile_length, ub_peak=res.ub_peak_bytes,
                       **_timed(res.time))


def _timed(time: Mapping[str, Any] | None) -> dict[str, Any]:
    """A run's estimate (``EmuResult.time``) as KernelCheck fields."""
    if not time:
        return {}
    busy = {p: c for p, c in dict(time.get("busy", {})).items() if c}
    return {"est_us": round(float(time["cycles"]) / float(time["clock_hz"]) * 1e6, 3),
            "bottleneck": max(busy, key=busy.get) if busy else ""}


def _saturated(a: np.ndarray) -> np.ndarray:
    """``a`` with its infinities replaced by its type's largest finite value of the same sign."""
    if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
        return a
    big = ml_dtypes.finfo(a.dtype).max
    return np.where(np.isposinf(a), big, np.where(np.isneginf(a), -big, a)).astype(a.dtype)


def _refused(k: Kernel, label: str, shape: tuple[int, ...], dtype: str, soc: Soc, what: str, reason: int
             ) -> KernelCheck:
    """The failed check of a matmul kernel whose host tiling refuses ``what`` under CANN's Matmul tiling."""
    return KernelCheck(k.op.op_type, label, shape, dtype, float("inf"), float("inf"), 0, 0, False,
                       f"{k.op.op_type} on {soc.name}: {refusal_text(k.ir, reason)} ({what} under CANN's Matmul "
                       "tiling)", tiling="CANN", refused=True)


def capture(model: str | os.PathLike | ModelProto, names: Sequence[str],
            feeds: Mapping[str, np.ndarray], given: Sequence[str] = (), base_dir: Path | None = None
            ) -> dict[str, np.ndarray]:
    """Values of intermediate tensors ``names`` from an onnxruntime run of the original model; the tensors
    ``given`` are fed (from ``feeds``) instead of computed: the nodes writing them are left out. External data
    is read from the model's folder (``base_dir`` for a model given in memory)."""
    import onnxruntime as ort

    proto = model if isinstance(model, ModelProto) else onnx.load(str(model), load_external_data=False)
    work = ModelProto()
    work.CopyFrom(proto)
    del work.graph.value_info[:]  # the graph as its file has it: onnxruntime infers its own shapes
    if given:
        keep = [n for n in work.graph.node if not set(n.output) & set(given)]
        del work.graph.node[:]
        work.graph.node.extend(keep)
        for g in given:
            a = np.asarray(feeds[g])
            work.graph.input.append(helper.make_tensor_value_info(g, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                                  list(a.shape)))
    have = {o.name for o in work.graph.output} | {i.name for i in work.graph.input}
    for n in names:
        if n not in have:
            work.graph.output.append(onnx.ValueInfoProto(name=n))
            have.add(n)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    # External weights stay on disk. onnxruntime looks for them, in a model given as bytes, under the working
    # directory (1.32 checks the path against it even where session.model_external_initializers_file_folder_path
    # names another folder), so the session is made from within the model's folder.
    if not isinstance(model, ModelProto):
        base_dir = Path(os.path.abspath(model)).parent
    folder = contextlib.chdir(base_dir) if base_dir is not None else contextlib.nullcontext()
    try:
        with folder:
            sess = ort.InferenceSession(work.SerializeToString(), so, providers=["CPUExecutionProvider"])
        outs = sess.run(list(names), dict(feeds))
    except Exception as exc:
        raise AscOnnxError(f"capturing activations failed: {whole(exc)}") from None
    return dict(zip(names, outs))


def body_shapes(k: Kernel, inputs: Sequence[np.ndarray]) -> dict[str, tuple[int, ...]]:
    """Shapes of every body value on these inputs (shape inference over the body's nodes; empty where onnx cannot
    size the body). Only the inputs' shapes and dtypes are read: broadcast views will do."""
    body = k.op.function
    opset = next(o.version for o in body.opset_import if o.domain in ("", "ai.onnx"))
    graph = helper.make_graph(list(body.node), "sizes",
                              [helper.make_tensor_value_info(n, onnx_type(a), list(a.shape))
                               for n, a in zip(k.op.input_names, inputs)],
                              [helper.make_tensor_value_info(n, onnx_type(inputs[0]), None) for n in k.op.output_names])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - sizes fall back to the data's
        return {}
    out = {n: tuple(a.shape) for n, a in zip(k.op.input_names, inputs)}
    for v in list(inferred.graph.value_info) + list(inferred.graph.output):
        dims = v.type.tensor_type.shape.dim
        if v.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            out[v.name] = tuple(d.dim_value for d in dims)
    return out


def _body_numels(k: Kernel, inputs: Sequence[np.ndarray]) -> dict[str, int]:
    """Element counts of every body value on these inputs."""
    return {n: int(np.prod(s)) if s else 1 for n, s in body_shapes(k, inputs).items()}


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


def data_movement(k: Kernel, inputs: Sequence[np.ndarray], fused_bytes: int, vec_elems: int = 0,
                  cube: Mapping[str, int] | None = None) -> DataMovement:
    """GM bytes: fused kernel (emulator), unfused chain (each body node reads its inputs and writes
    its output), and the compulsory minimum (inputs read once, outputs written once)."""
    shape = data_shape(k, inputs)
    unfused = sum(b for _, b in unfused_bytes(k, inputs))
    compulsory = sum(a.nbytes for a in inputs) + of(k).driver.output_bytes(k.ir, shape, inputs[0].itemsize)
    vec = round(vec_elems / max(1, int(np.prod(shape))), 3)
    if not cube:
        return DataMovement(k.op.op_type, shape, fused_bytes, unfused, compulsory, vec)
    return DataMovement(k.op.op_type, shape, fused_bytes, unfused, compulsory, vec, int(cube.get("tiling_min", 0)),
                        int(cube.get("macs", 0)), 2 * int(cube.get("c_bytes", 0)))


__all__ = ["body_shapes", "check", "data_shape", "capture", "reference", "random_inputs", "data_movement",
           "unfused_bytes", "verify_regions",
           "KernelCheck", "DataMovement", "verify_kernels", "body_model", "concrete"]


def _captured_inputs(kernels: Sequence[Kernel], original: str | os.PathLike | ModelProto,
                     feeds: Mapping[str, np.ndarray], proto: ModelProto | None = None) -> dict[str, np.ndarray]:
    """Real activations for the first instance of every kernel (initializers read from the model; ``proto``: its
    graph, external data unread, when the caller has it loaded)."""
    if not kernels:
        return {}
    if proto is None:
        proto = original if isinstance(original, ModelProto) else onnx.load(str(original), load_external_data=False)
    base = None if isinstance(original, ModelProto) else Path(os.path.abspath(original)).parent
    inits = {i.name: i for i in proto.graph.initializer}
    wanted = [n for k in kernels for n in k.op.instances[0].inputs]
    values = {n: read_tensor(inits[n], base) for n in wanted if n in inits}
    values.update({n: feeds[n] for n in wanted if n in feeds})
    # Only tensors the original computes: a constant that canonicalization folded (``t0__folded``) has no
    # node there, and its kernel's captured run is skipped (its random runs cover it).
    produced = {o for node in proto.graph.node for o in node.output}
    rest = [n for n in dict.fromkeys(wanted) if n not in values and n in produced]
    if rest:
        values.update(capture(proto, rest, feeds, base_dir=base))
    return values


def _bound_shape(inst, dim: int, x_only: bool = False) -> tuple[int, ...]:
    """The output's shape with each dynamic dim bound to ``dim``, unless an input fixes it (a [1, 17, D]
    position embedding added to a [B, S, D] residual fixes S = 17; for a matmul only x can)."""
    out = list(inst.output_shapes[0] or ())
    for shape in inst.input_shapes[:1] if x_only else inst.input_shapes:
        for i, d in enumerate(reversed(list(shape or ()))):
            j = len(out) - 1 - i
            if j >= 0 and not (isinstance(out[j], int) and out[j] >= 0) and isinstance(d, int) and d > 1:
                out[j] = d
    return concrete(out, dim)


def _over_budget(k: Kernel, shape: tuple[int, ...]) -> bool:
    """A kernel whose class emulates it cut down at output ``shape`` (a big matmul; ``KernelClass.budget``)."""
    b = of(k).budget
    return b is not None and b.over(k.ir, *b.dims(k.ir, k.op.instances[0], shape))


def verify_kernels(kernels: Sequence[Kernel], original: str | os.PathLike | ModelProto | None,
                   feeds: Mapping[str, np.ndarray] | None, soc: Soc, default_dim: int = 4,
                   progress: Callable[..., None] | None = None, proto: ModelProto | None = None
                   ) -> tuple[tuple[KernelCheck, ...], tuple[DataMovement, ...]]:
    """Every kernel on random inputs per dtype column and, given the original model and its
    feeds, on activations captured from it; data movement from the first random run. ``progress`` hears
    ``(stage, done, total, op_type)`` before each kernel (its first run compiles it)."""
    checks: list[KernelCheck] = []
    moves: list[DataMovement] = []
    big = {id(k) for k in kernels if _over_budget(k, _bound_shape(k.op.instances[0], default_dim + 3, True))}
    captured = _captured_inputs([k for k in kernels if id(k) not in big], original, feeds, proto) \
        if original is not None and feeds is not None else {}
    if progress is not None and kernels:
        progress("compiling kernels", 0, len(kernels))
    prebuild([(k.ir, k.files, f"{k.op.op_type}TilingData", d, soc) for k in kernels for d in k.ir.dtypes])
    for i, k in enumerate(kernels):
        if progress is not None:
            progress("emulating kernels", i, len(kernels), k.op.op_type)
        inst = k.op.instances[0]
        dynamic = any(not isinstance(d, int) or d < 0 for d in inst.output_shapes[0] or ())
        # A kernel must be right for every shape its ATC model accepts: two bindings of each dynamic dim.
        for dim in (default_dim, default_dim + 3) if dynamic else (default_dim,):
            shape = _bound_shape(inst, dim, of(k).cube)
            for j, dtype in enumerate(k.ir.dtypes):
                label = "random" if dim == default_dim else f"dims={dim}"
                tiling = None
                if id(k) in big:
                    b = of(k).budget
                    m, kk, n = b.dims(k.ir, inst, shape)
                    if cann_tiling.source_root() is not None:  # CANN's choice at the real size, cut down
                        got = cann_tiling.cann_tilings(k.ir, k.files, soc, dtype, [(m, n, kk)])[0]
                        if isinstance(got, int):
                            checks.append(_refused(k, label, shape, IO_TYPES[dtype][0], soc, f"M={m} K={kk} N={n}",
                                                   got))
                            continue
                        tiling, m2, n2, k2 = b.cut(got, m, n, kk, b.n_factor(k.ir))
                        lead = (1,) * (len(shape) - 2) + (m2,)
                        inputs = matmul_inputs(k, dtype, lead, np.random.default_rng(0), k2, n2)
                        label += f" M={m2} K={k2} N={n2} (CANN's tiling of M={m} K={kk} N={n}, cut)"
                    else:
                        k2, n2 = b.reduced(kk), b.reduced(n)
                        inputs = matmul_inputs(k, dtype, shape[:-1], np.random.default_rng(0), k2, n2)
                        label += f" K={k2} N={n2}"
                else:
                    inputs = random_inputs(k, dtype, shape, dim=dim)
                c = check(k, inputs, soc, label, cube_tiling=tiling)
                if tiling is not None:
                    c = replace(c, tiling="CANN, cut")
                checks.append(c)
                if j == 0 and dim == default_dim:  # data movement on the first dtype column
                    moves.append(data_movement(k, inputs, c.gm_bytes, c.vec_elems, c.cube))
        real = [captured.get(n) for n in inst.inputs]
        if captured and id(k) not in big and all(r is not None and r.dtype in (np.float32, np.float16) for r in real) \
                and len({r.dtype for r in real}) == 1:
            checks.append(check(k, real, soc, "captured"))
    return tuple(checks), tuple(moves)


def verify_regions(kernels: Sequence[Kernel], model: ModelProto, base_dir: Path | None, soc: Soc,
                   default_dim: int = 4, progress: Callable[..., None] | None = None) -> tuple[KernelCheck, ...]:
    """The check for a model over the memory budget, whose whole-model rungs do not run: each fused node that
    reads weights, its kernel on random activations with that node's own weights (read from the file one
    region at a time) and parameters, against the same region of the original (the op's body, which is that
    region's nodes). Matmul nodes over ``MATMUL_EMU_MACS`` are left to the kernel rung's reduced check."""
    inits = {t.name: t for t in model.graph.initializer}
    regions = [(k, inst) for k in kernels for inst in k.op.instances if any(n in inits for n in inst.inputs)]
    checks = []
    for i, (k, inst) in enumerate(regions):
        if progress is not None:
            progress("checking regions with their weights", i, len(regions), inst.node)
        shape = _bound_shape(inst, default_dim, of(k).cube)
        if _over_budget(k, shape):
            continue
        dtype = inst.input_dtypes[0] if inst.input_dtypes[0] in k.ir.dtypes else k.ir.dtypes[0]
        inputs = random_inputs(k, dtype, shape, dim=default_dim)
        for j, name in enumerate(inst.inputs):
            if name in inits:
                weight = read_tensor(inits[name], base_dir)
                if weight.shape != inputs[j].shape:
                    break  # a weight the kernel reads at another shape (a broadcast view): not this check's
                inputs[j] = weight.astype(inputs[j].dtype)
        else:
            checks.append(check(k, inputs, soc, f"weights of {inst.node}", params=inst.params))
    return tuple(checks)
