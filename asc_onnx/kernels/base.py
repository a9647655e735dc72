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
from types import ModuleType
from typing import Any, Protocol

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


@dataclass(frozen=True)
class KernelClass:
    """One kernel class.

    Attributes:
        name: the class's name, as rules write it (``kernel="row"``).
        ir: its kernel IR type.
        lower: the lowering (:data:`Lower`).
        render: the module that renders the IR (``skeleton.render`` takes it).
        driver: the module that drives the IR in the emulator (``main_source``, ``write_inputs``,
            ``output_shapes``, ``random_inputs``, ``data_shape``, ``output_bytes``; ``finish``, where the class adds
            figures to a run's counters).
        region: ``find(graph, rule, claimed, outputs, ...)``, the generic region pass of rules with this kernel
            and no pattern, or None.
        region_rank: region passes run in ascending rank (rows first: a row region takes the elementwise ops
            around its reductions before the elementwise pass can).
        region_supersedes: a named rule's near miss inside a region this class fused is dropped (the region did
            what the rule wanted); false where the miss still explains a larger fusion that did not happen.
        schedule: the module of the class's schedules, or None for a class without one: ``choose(ir, soc)``
            (the schedule a kernel ships with, the IR's ``schedule`` field), ``VARIANTS`` (named schedules a
            benchmark sets side by side) and ``traffic(ir, shapes, dtype_size, soc, block_dim, cube)`` (the GM
            bytes the kernel moves for inputs of ``shapes``, from the launch and, for a cube kernel, the tiling
            it ran under).
        cube: runs on the cube (matmul): fp32 accumulation, CANN's Matmul tiling, the emulation budget.
        gemm_tiling: one gemm per op under CANN's Matmul tiling (the matmul class): the emulation budget by
            M x K x N, the cut tilings of big ops and CANN's own tiling compiled from the open sources apply.
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
    render: ModuleType
    driver: ModuleType
    region: Callable[..., Any] | None = None
    region_rank: int = 0
    region_supersedes: bool = False
    schedule: ModuleType | None = None
    cube: bool = False
    gemm_tiling: bool = False
    tiling_main: str | None = None
    fallback: bool = False
    scalar_params: bool = False

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


__all__ = ["KernelClass", "KernelIR", "Lower"]
