"""What a kernel class is: the object every stage after matching asks instead of branching on a class's name.

A class is one package under ``asc_onnx/kernels/`` whose ``__init__`` builds one :class:`KernelClass` from its
own modules, by role:

* ``region``: its generic region pass for the match stage (optional: matmul regions come from named rules);
* ``lower``: its kernel IR and the lowering of a fused op into it (no C++);
* ``render``: the Ascend C of the IR: kernel, tiling header and arithmetic, host file (``skeleton.render``
  drives it);
* ``schedule``: the class's schedule policies (carried by the IR), the one a kernel ships with, named variants,
  and the traffic model: the GM bytes the kernel moves, in Python;
* ``driver``: the emulator's driver program for the IR, its input files and its output shapes.

:mod:`asc_onnx.kernels` registers the built-in classes; :func:`~asc_onnx.kernels.register` adds another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import onnx

from ..fusion import FusedOp
from ..soc import Soc

#: ``lower(op, symbolic, kinds)``: the IR of a fused op, or LoweringError with the reason. ``symbolic`` maps
#: tensor names to their shapes before any --input-shape binding, ``kinds`` re-lowers a written package with
#: the input kinds it recorded.
Lower = Callable[[FusedOp, "Mapping[str, tuple[object, ...] | None] | None", "Sequence[str] | None"], Any]


class KernelIR(Protocol):
    """What every class's kernel IR has (a frozen dataclass per class adds the program and its schedule)."""

    op_type: str  # the OpDef type
    snake: str  # the kernel entry's name (CANN's rule)
    outputs: tuple[str, ...]  # formal output names, in kernel argument order
    dtypes: tuple[int, ...]  # the ONNX element type of each dtype column
    params: tuple[float, ...]  # the first node's values of the scalars the host copies into the tiling data

    @property
    def input_names(self) -> tuple[str, ...]: ...  # formal input names in kernel argument order

    @property
    def num_params(self) -> int: ...


@runtime_checkable
class Renderer(Protocol):
    """A class's Ascend C: the files of one kernel from its IR (``skeleton.render`` adds the plugin)."""

    REFUSALS: Mapping[int, str]  # each non-zero return of ``<op>ComputeTiling`` in words

    def kernel_source(self, k: Any, rule: str, body_ops: list[str], sources: list[str]) -> str: ...
    def tiling_header(self, k: Any) -> str: ...
    def tiling_calc(self, k: Any) -> str: ...
    def host_source(self, k: Any, compute_units: list[str]) -> str: ...
    def struct_name(self, k: Any) -> str: ...
    def headers(self, k: Any) -> dict[str, str]: ...  # shared headers the files include, by package path
    def tiling_call(self, k: Any, *args: str) -> str | tuple[str, ...]: ...  # (one line, or its lines)


@runtime_checkable
class Driver(Protocol):
    """A class's emulator driver: its program, its input files, its output shapes, inputs for a check and the
    figures a run adds to its counters."""

    def main_source(self, k: Any, struct: str, prefix: str = "") -> str: ...
    def write_inputs(self, k: Any, folder: Path, inputs: Sequence[np.ndarray], out_shapes: Sequence[tuple[int, ...]],
                     soc: Soc, core_num: int, dtype_size: int, dtype_name: str,
                     cube_tiling: object = None) -> list[str]: ...
    def output_shapes(self, k: Any, inputs: Sequence[np.ndarray]) -> list[tuple[int, ...]]: ...
    def random_inputs(self, k: Any, inst: Any, np_dtype: type, out_shape: tuple[int, ...], rng: np.random.Generator,
                      broadcast_shapes: Sequence[tuple[int, ...]] | None = None,
                      dim: int = 4) -> list[np.ndarray]: ...
    def data_shape(self, k: Any, inputs: Sequence[np.ndarray]) -> tuple[int, ...]: ...
    def output_bytes(self, k: Any, shape: tuple[int, ...], itemsize: int) -> int: ...
    def finish(self, k: Any, inputs: Sequence[np.ndarray], info: dict[str, Any],
               dtype_size: int) -> dict[str, Any]: ...


@runtime_checkable
class CubeDriver(Driver, Protocol):
    """The driver of a class with Matmul objects (``tiling_main``): inputs at a chosen K and N, and the case its
    tiling program runs for input shapes."""

    def inputs_at(self, k: Any, inst: Any, np_dtype: type, lead: Sequence[int], rng: np.random.Generator,
                  k_dim: int | None = None, n_dim: int | None = None) -> list[np.ndarray]: ...
    def tiling_case(self, k: Any, shapes: Sequence[Sequence[int]]) -> list[int]: ...


@runtime_checkable
class Schedules(Protocol):
    """A class's schedules: the one a kernel ships with, named variants, and the GM bytes it moves."""

    VARIANTS: Mapping[str, Any]

    def choose(self, ir: Any, soc: Soc | None) -> Any: ...
    def traffic(self, ir: Any, shapes: Sequence[Sequence[int]], dtype_size: int, soc: Soc, block_dim: int,
                cube: Mapping[str, Any] | None = None) -> int: ...


@runtime_checkable
class EmulationBudget(Protocol):
    """How a class's big ops are emulated (the matmul class): at full size within a budget of multiply-accumulates,
    else cut down to a size that proves the same code."""

    def dims(self, ir: Any, inst: Any, out_shape: Sequence[int]) -> tuple[int, int, int]: ...
    def over(self, ir: Any, m: int, kk: int, n: int) -> bool: ...
    def over_at(self, ir: Any, args: Sequence[np.ndarray]) -> bool: ...
    def reduced(self, d: int) -> int: ...
    def cut(self, t: Mapping[str, int], m: int, n: int, k: int,
            org_n_factor: int = 1) -> tuple[dict[str, int], int, int, int]: ...
    def n_factor(self, ir: Any) -> int: ...



@dataclass(frozen=True)
class KernelClass:
    """One kernel class.

    Attributes:
        name: the class's name, as rules write it (``kernel="row"``).
        ir: its kernel IR type.
        lower: the lowering (:data:`Lower`).
        render: what renders the IR (a :class:`Renderer`: the class's ``render`` module).
        driver: what drives the IR in the emulator (a :class:`Driver`, a :class:`CubeDriver` for a class with
            ``tiling_main``: the class's ``driver`` module).
        region: ``find(graph, rule, claimed, outputs, ...)``, the generic region pass of rules with this kernel
            and no pattern, or None.
        region_rank: region passes run in ascending rank (rows first: a row region takes the elementwise ops
            around its reductions before the elementwise pass can).
        region_supersedes: a named rule's near miss inside a region this class fused is dropped (the region did
            what the rule wanted); false where the miss still explains a larger fusion that did not happen.
        schedule: the class's :class:`Schedules`, or None for a class without one: ``choose(ir, soc)`` (the
            schedule a kernel ships with, the IR's ``schedule`` field), ``VARIANTS`` (named schedules a
            benchmark sets side by side) and ``traffic(ir, shapes, dtype_size, soc, block_dim, cube)`` (the GM
            bytes the kernel moves for inputs of ``shapes``, from the launch and, for a cube kernel, the tiling
            it ran under).
        budget: how its big ops are emulated (:class:`EmulationBudget`), or None: every op at full size.
        cube: runs on the cube (matmul, attention): fp32 accumulation, Matmul objects.
        tiling_main: for a class with Matmul objects, the program (``asc_onnx/emulator/cann/``) that runs its tiling
            calc against CANN's own Matmul tiling and prints the tilings; its driver's ``tiling_case`` turns input
            shapes into that program's case.
        fallback: where an op of this class is not shipped (refused, rejected by the emulator, estimated slower,
            not served on the SoC), its regions are matched again without it and keep the smaller fusions
            inside them (attention keeps ScaleMaskSoftmax), not the original nodes.
        scalar_params: a float scalar that only feeds arithmetic in the op's body is a parameter of the op (the
            node's attribute, ``td.param[i]`` in the kernel), so ops that differ only in it share one kernel.
    """

    name: str
    ir: type
    lower: Lower
    render: Renderer
    driver: Driver
    region: Callable[..., Any] | None = None
    region_rank: int = 0
    region_supersedes: bool = False
    schedule: Schedules | None = None
    budget: EmulationBudget | None = None
    cube: bool = False
    tiling_main: str | None = None
    fallback: bool = False
    scalar_params: bool = False

    def __post_init__(self) -> None:
        """A class that lacks a member the stages call is refused when it is built, not when a stage meets it."""
        roles: list[tuple[str, Any, type]] = [("render", self.render, Renderer),
                                               ("driver", self.driver, CubeDriver if self.tiling_main else Driver)]
        if self.schedule is not None:
            roles.append(("schedule", self.schedule, Schedules))
        if self.budget is not None:
            roles.append(("budget", self.budget, EmulationBudget))
        for role, value, protocol in roles:
            if not isinstance(value, protocol):
                missing = sorted(m for m in protocol_members(protocol) if not hasattr(value, m))
                raise TypeError(f"kernel class {self.name}: its {role} lacks {', '.join(missing)}")

    def scheduled(self, ir: Any, soc: Soc | None, recorded: Mapping[str, Any] | None = None) -> Any:
        """``ir`` with the schedule it ships with on ``soc``, or the one a written package ``recorded``."""
        if self.schedule is None:
            return ir
        if recorded is not None:
            return dataclasses.replace(ir, schedule=type(ir.schedule)(**recorded))
        return dataclasses.replace(ir, schedule=self.schedule.choose(ir, soc))

    @staticmethod
    def schedule_record(ir: Any) -> dict[str, Any] | None:
        """The IR's schedule as a written package records it (None for a class without one)."""
        sched = getattr(ir, "schedule", None)
        return dataclasses.asdict(sched) if sched is not None else None

    @property
    def refusals(self) -> Mapping[int, str]:
        """Each non-zero return of the class's ``<op>ComputeTiling`` in words."""
        return self.render.REFUSALS

    def input_kinds(self, ir: Any) -> list[str]:
        """The inputs' kinds as a written package records them (re-lowering reads them back)."""
        return [getattr(x, "kind", self.name) for x in ir.inputs]

    def unsupported(self, ir: Any, soc: Soc) -> str | None:
        """Why ``soc`` cannot run this kernel, or None."""
        if not soc.has_bf16 and onnx.TensorProto.BFLOAT16 in ir.dtypes:
            return f"bfloat16 is not supported on {soc.name}"
        if self.cube and not soc.has_data_copy_pad and onnx.TensorProto.FLOAT in ir.dtypes:
            return f"the {soc.name} cube takes half inputs: a float MatMul stays with ATC"
        return None


def protocol_members(protocol: type) -> set[str]:
    """The members a protocol asks for (its methods and annotated attributes, its bases' too)."""
    out: set[str] = set()
    for base in protocol.__mro__:
        if base in (object, Protocol) or not getattr(base, "_is_protocol", False):
            continue
        out |= {n for n in vars(base) if not n.startswith("_")} | set(getattr(base, "__annotations__", {}))
    return out


__all__ = ["CubeDriver", "Driver", "EmulationBudget", "KernelClass", "KernelIR", "Lower", "Renderer", "Schedules",
           "protocol_members"]
