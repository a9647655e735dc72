"""What every kernel class's lowering shares: the I/O element types, the error that says why an op has
no kernel, and CANN's op-type to kernel-name rule."""

from __future__ import annotations

import re

from onnx import TensorProto

from ..errors import AscOnnxError

#: Element types a kernel reads and writes, by ONNX type: C++ name, size.
IO_TYPES = {TensorProto.FLOAT: ("float", 4), TensorProto.FLOAT16: ("half", 2), TensorProto.BFLOAT16: ("bfloat16_t", 2)}


class LoweringError(AscOnnxError):
    """The op cannot be served by its kernel class; the message says why."""


class Param(float):
    """A scalar that comes from the tiling data (the op's parameter ``p<index>``), not the kernel source.

    Its float value is the first instance's, for code that must see a number; it compares by slot, never by
    value, so two parameters (or a parameter and a literal) that happen to be equal stay apart. Negation
    stays symbolic: ``Sub(x, p0)`` is ``Adds(x, -p0)``."""

    index: int
    neg: bool

    def __new__(cls, value: float, index: int, neg: bool = False) -> Param:
        obj = float.__new__(cls, value)
        obj.index, obj.neg = index, neg
        return obj

    def __neg__(self) -> Param:
        return Param(-float(self), self.index, not self.neg)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Param) and (other.index, other.neg) == (self.index, self.neg)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(("param", self.index, self.neg))

    def __reduce__(self) -> tuple[object, ...]:
        return (Param, (float(self), self.index, self.neg))

    def __repr__(self) -> str:
        return f"{'-' if self.neg else ''}p{self.index}"

    def expr(self) -> str:
        """The C++ expression that reads it in a kernel (``td.param[0]``)."""
        return f"(-td.param[{self.index}])" if self.neg else f"td.param[{self.index}]"


class IRBase:
    """What every class's IR derives the same way from its fields (a base without fields: each IR stays a frozen
    dataclass of its own)."""

    params: tuple[float, ...]

    @property
    def num_params(self) -> int:
        """Scalars read from the tiling data (``td.param[i]``), set per node from its attributes."""
        return len(self.params)


class NamedInputs(IRBase):
    """An IR whose inputs are records with a ``name`` (and a ``kind``)."""

    inputs: tuple

    @property
    def input_names(self) -> tuple[str, ...]:
        """Formal input names in kernel argument order."""
        return tuple(x.name for x in self.inputs)


def snake_case(op_type: str) -> str:
    """CANN's OpType -> kernel name rule (cann_facts §1.2): ``AscFusedEw3f`` -> ``asc_fused_ew3f``."""
    s = op_type[0].lower() + op_type[1:]
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", s)
    s = re.sub(r"(?<=[A-Z])([A-Z])(?=[a-z])", r"_\1", s)
    return s.lower()


__all__ = ["IO_TYPES", "IRBase", "LoweringError", "NamedInputs", "Param", "snake_case"]
