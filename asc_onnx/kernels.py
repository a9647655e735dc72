"""The kernel classes as objects in one registry: what each class provides to the stages that follow it.

A fused op names its class (``pointwise``, ``row``, ``matmul``: the rule's ``kernel``); the stages after
lowering ask the registry (:func:`of`) instead of branching on the class's name or IR type. A class here
bundles its lowering, its rendering and the facts the later stages need: whether it runs on the cube, the
input kinds a written package records, what a SoC lacks for it, and the words for its tiling's refusals.
(Issue 17 moves each class's modules into a package of its own behind these objects.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import onnx

from .codegen import matmul as matmul_codegen
from .codegen import pointwise as pointwise_codegen
from .codegen import row as row_codegen
from .lower import LoweringError, PointwiseKernel, RowKernel, lower_pointwise, lower_row
from .lower.matmul import MatmulKernel, lower_matmul
from .rewrite import FusedOp
from .soc import Soc

#: Any class's kernel IR.
KernelIR = PointwiseKernel | RowKernel | MatmulKernel


@dataclass(frozen=True)
class KernelClass:
    """One kernel class.

    Attributes:
        name: the class's name, as rules write it.
        ir: its kernel IR type.
        lower: ``lower(op, symbolic, kinds)``: the IR of a fused op, or LoweringError with the reason.
        codegen: the module that renders the IR (``skeleton.render`` takes it).
        cube: runs on the cube (matmul): fp32 accumulation, CANN's Matmul tiling, the emulation budget.
    """

    name: str
    ir: type
    lower: Callable[[FusedOp, Mapping[str, tuple[object, ...] | None] | None, Sequence[str] | None], Any]
    codegen: ModuleType
    cube: bool = False

    @property
    def refusals(self) -> Mapping[int, str]:
        """Each non-zero return of the class's ``<op>ComputeTiling`` in words."""
        return self.codegen.REFUSALS

    def input_kinds(self, ir: KernelIR) -> list[str]:
        """The inputs' kinds as a written package records them (re-lowering reads them back)."""
        return [getattr(x, "kind", self.name) for x in ir.inputs]

    def unsupported(self, ir: KernelIR, soc: Soc) -> str | None:
        """Why ``soc`` cannot run this kernel, or None."""
        if not soc.has_bf16 and onnx.TensorProto.BFLOAT16 in ir.dtypes:
            return f"bfloat16 is not supported on {soc.name}"
        if self.cube and not soc.has_data_copy_pad and onnx.TensorProto.FLOAT in ir.dtypes:
            return f"the {soc.name} cube takes half inputs: a float MatMul stays with ATC"
        return None


CLASSES: dict[str, KernelClass] = {c.name: c for c in (
    KernelClass("pointwise", PointwiseKernel, lower_pointwise, pointwise_codegen),
    KernelClass("row", RowKernel, lower_row, row_codegen),
    KernelClass("matmul", MatmulKernel, lambda op, symbolic=None, kinds=None: lower_matmul(op), matmul_codegen,
                cube=True),
)}


def of(what: str | KernelIR | Any) -> KernelClass:
    """The class of a name (a rule's ``kernel``), of a kernel IR, or of anything holding one (``.ir``)."""
    if isinstance(what, str):
        if what not in CLASSES:
            raise LoweringError(f"{what} kernels are not generated yet")
        return CLASSES[what]
    ir = getattr(what, "ir", what)
    for c in CLASSES.values():
        if isinstance(ir, c.ir):
            return c
    raise TypeError(f"not a kernel IR: {type(ir).__name__}")


__all__ = ["CLASSES", "KernelClass", "KernelIR", "of"]
