"""Stage 2, prove: the verification ladder's rungs on the CPU.

The kernel rung runs every generated kernel in the emulator before anything is decided (a kernel the emulator
rejects never ships); the graph rung compares the rewritten model with the original on onnxruntime, and the
deployed rung runs the ATC model with every fused node executed by its emulated kernel. The three share one set
of seeded inputs (:class:`Inputs`) and one run of the original on them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto

from .errors import AscOnnxError
from .load import LoadedModel
from .options import FuseOptions
from .package import Kernel, PackageResult
from .plan import Planned
from .soc import Soc
from .validate import ValidationReport, input_value_hint, make_inputs, validate_models
from .validate import run as run_model
from .verify_deployed import DeployedReport, verify_deployed
from .verify_kernels import DataMovement, KernelCheck, verify_kernels, verify_regions


@dataclass(frozen=True)
class Inputs:
    """What every rung of one run shares: the seeded inputs, the original's outputs on them, and which rungs may
    run the whole model."""

    options: FuseOptions  # with the dynamic dim the original ran at
    original: str | os.PathLike | ModelProto
    feeds: Mapping[str, np.ndarray]
    ref: Mapping[str, np.ndarray] | None  # the original's outputs on ``feeds`` (None: not run)
    whole: bool  # the whole model fits the memory budget
    validate: bool  # the graph and deployed rungs run
    whole_model: str | None = None  # why the whole-model rungs did not run, for the report
    graph: ModelProto | None = None  # the original as loaded (external data unread): no rung reads its file again


@dataclass(frozen=True)
class KernelProof:
    """The kernel rung's results: every check and the data movement of each kernel's first run."""

    checks: tuple[KernelCheck, ...] = ()
    moves: tuple[DataMovement, ...] = ()

    def of(self, op_types: set[str]) -> KernelProof:
        """The results of these op types only."""
        return KernelProof(tuple(c for c in self.checks if c.op_type in op_types),
                           tuple(m for m in self.moves if m.op_type in op_types))

    def rejected(self) -> dict[str, str]:
        """Op type -> why it does not ship, from its failed checks (the last one's reason)."""
        return {c.op_type: not_shipped(c) for c in self.checks if not c.ok}


def inputs(p: Planned, options: FuseOptions, validate: bool, name: str) -> Inputs:
    """The run's shared inputs. Over the memory budget the whole-model rungs do not run (every one loads every
    weight into one onnxruntime session): each op is then proven on random inputs and on its own weights."""
    original = p.loaded.source if p.loaded.source is not None else p.loaded.model
    weights = weight_bytes(p.loaded)
    whole = weights <= options.memory_budget or not (validate or options.emulate)
    note = None
    if not whole:
        note = (f"not run: {weights / 2**30:.1f} GiB of weights exceed the {options.memory_budget / 2**30:.1f} GiB "
                "memory budget (--memory-budget); the graph and deployed rungs and the captured activations were "
                "skipped; each fused op is proven on random inputs by the kernel rung, and each fused node with "
                "weights on its own weights against the same region of the original")
        validate = False
    if validate:
        options, feeds, ref = choose_inputs(p.loaded.model, original, options, name)
        return Inputs(options, original, feeds, ref, whole, True, note, p.loaded.model)
    feeds = make_inputs(p.loaded.model, options.shape_map, options.seed, options.default_dim, options.value_map) \
        if options.emulate else {}
    return Inputs(options, original, feeds, None, whole, False, note, p.loaded.model)


def prove_kernels(kernels: Sequence[Kernel], p: Planned, shared: Inputs, soc: Soc) -> KernelProof:
    """The kernel rung: each kernel on random inputs and on activations captured from the original (within the
    budget), else each fused region on its own weights, one region in memory at a time."""
    if not kernels or not shared.options.emulate:
        return KernelProof()
    options = shared.options
    checks, moves = verify_kernels(kernels, shared.original if shared.whole else None, shared.feeds, soc,
                                   options.default_dim, options.report, p.loaded.model)
    if not shared.whole:
        checks += verify_regions(kernels, p.loaded.model, p.loaded.base_dir, soc, options.default_dim,
                                 options.report)
    return KernelProof(checks, moves)


def prove_models(shared: Inputs, folder: Path | None, asc_model: ModelProto, pkg: PackageResult, soc: Soc
                 ) -> tuple[ValidationReport | None, DeployedReport | None]:
    """The graph rung and the deployed rung, on the written files when there is a folder; one run of the original
    on the shared inputs serves both."""
    if not shared.validate:
        return None, None
    options = shared.options
    fused = folder / "model.asc.onnx" if folder is not None else asc_model
    options.report("validating the rewritten model on onnxruntime")
    validation = validate_models(shared.original, fused, options.shape_map, options.seed, options.default_dim,
                                 shared.ref, shared.feeds, shared.graph)
    deployed = None
    if options.emulate and pkg.kernels and pkg.atc_model is not None:
        atc = folder / "model.atc.onnx" if folder is not None else pkg.atc_model
        options.report("running the ATC model with the emulated kernels")
        deployed = verify_deployed(shared.original, atc, pkg.kernels, soc, pkg.atc_inputs, options.shape_map,
                                   options.seed, options.default_dim, shared.ref, shared.feeds, shared.graph)
    return validation, deployed


def weight_bytes(loaded: LoadedModel) -> int:
    """Bytes of the model's weights: initializers held in the file, and its external-data files."""
    inline = sum(len(t.raw_data) or onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize * int(
        np.prod(t.dims, dtype=np.int64)) for t in loaded.model.graph.initializer if not t.external_data)
    files = sum((loaded.base_dir / f).stat().st_size for f in loaded.external_files) if loaded.base_dir else 0
    return int(inline) + files


def not_shipped(c: KernelCheck) -> str:
    """Why a kernel does not ship, from its first failed check: its host tiling refused a shape the model
    has (a stated limit), or the kernel failed in the emulator (a fault, or an error beyond tolerance)."""
    if c.refused:
        return f"its host tiling refuses {list(c.shape)} {c.dtype} ({c.error})"
    return "its kernel failed in the emulator (" + (
        c.error or f"max abs error {c.max_abs:.3e} beyond the {c.dtype} tolerance") + ")"


#: Dynamic dims tried, in order, after ``FuseOptions.default_dim``: small dims keep the checks fast, but a
#: detector's Resize or a stride-32 backbone needs larger ones.
RETRY_DIMS = (32, 64)


def choose_inputs(model: ModelProto, original: str | os.PathLike | ModelProto, options: FuseOptions,
                  name: str) -> tuple[FuseOptions, dict[str, Any], dict[str, Any]]:
    """The seeded inputs every rung shares and the original's outputs on them.

    Dynamic dims the user did not give start at ``options.default_dim``; when onnxruntime cannot run the
    model on those, larger ones are tried before asking for ``--input-shape`` with the dims that failed.
    The options come back with the dim that worked."""
    given = options.shape_map
    dynamic = {vi.name: vi.type.tensor_type.shape for vi in model.graph.input
               if vi.name not in given and vi.name not in {i.name for i in model.graph.initializer}
               and any(not d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)}
    tried: list[str] = []
    for dim in (options.default_dim, *(d for d in RETRY_DIMS if d > options.default_dim)):
        feeds = make_inputs(model, given, options.seed, dim, options.value_map)
        try:
            return dataclasses.replace(options, default_dim=dim), feeds, run_model(original, feeds)
        except AscOnnxError as exc:
            shapes = ", ".join(f"{k}: {list(feeds[k].shape)}" for k in dynamic if k in feeds)
            tried.append(f"{shapes}" if shapes else "its static shapes")
            first = str(exc)
            if not dynamic:
                raise AscOnnxError(f"{exc}{input_value_hint(model)}") from None
    hint = " ".join(f"--input-shape {k}:" + ",".join(str(d.dim_value) if d.HasField("dim_value") else
                                                   (d.dim_param or "?") for d in shape.dim)
                    for k, shape in dynamic.items())
    raise AscOnnxError(f"{name or 'the model'} does not run on random inputs with its dynamic dims set to "
                       f"{' or '.join(tried)} ({first}); give the real dims with {hint}{input_value_hint(model)}")
