"""The kernel classes, one package each, and the registry the stages ask (:func:`of`).

A fused op names its class (``pointwise``, ``row``, ``matmul``: the rule's ``kernel``). Everything a class
knows lives in its package (see :mod:`.base` for the roles of its modules); what classes share lives beside
them: the IR's element types and naming rule (:mod:`.ir`), vector programs and their op table
(:mod:`.vector`), the host and plugin skeleton (:mod:`.skeleton`), C++ text helpers (:mod:`.text`), region
helpers (:mod:`.regions`). This package is a library under the stages: it imports no stage.
"""

from __future__ import annotations

from typing import Any

from .attention import CLASS as ATTENTION
from .base import KernelClass, KernelIR
from .ir import LoweringError
from .matmul import CLASS as MATMUL
from .pointwise import CLASS as POINTWISE
from .row import CLASS as ROW

CLASSES: dict[str, KernelClass] = {}


def register(cls: KernelClass) -> KernelClass:
    """Add a class (a name already registered is replaced: a test or a plug-in may supersede one)."""
    CLASSES[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    """Remove a class added by :func:`register`."""
    CLASSES.pop(name, None)


for _cls in (POINTWISE, ROW, MATMUL, ATTENTION):
    register(_cls)


def of(what: str | Any) -> KernelClass:
    """The class of a name (a rule's ``kernel``), of a kernel IR, or of anything holding one (``.ir``)."""
    if isinstance(what, str):
        if what not in CLASSES:
            raise LoweringError(f"{what} kernels are not generated yet")
        return CLASSES[what]
    ir = getattr(what, "ir", what)
    exact = [c for c in CLASSES.values() if type(ir) is c.ir]  # a class whose IR subclasses another's is itself
    for c in exact or CLASSES.values():
        if isinstance(ir, c.ir):
            return c
    raise TypeError(f"not a kernel IR: {type(ir).__name__}")


__all__ = ["CLASSES", "KernelClass", "KernelIR", "of", "register", "unregister"]
