"""The attention class: ``Softmax(scale * q @ k^T + mask) @ v`` as one mixed kernel (the cube computes both
products, the vector cores the softmax between them); regions come from the named ``Attention`` rule. Where an
attention op does not ship, its regions keep the smaller fusions inside them (``fallback``)."""

from dataclasses import dataclass
from typing import Any

from ...soc import Soc
from ..base import KernelClass
from . import driver, render, schedule
from .lower import AttentionKernel, lower_attention


@dataclass(frozen=True)
class _AttentionClass(KernelClass):
    def unsupported(self, ir: Any, soc: Soc) -> str | None:
        """The kernel is built for 910B's mixed cube and vector cores."""
        if not soc.has_data_copy_pad:
            return f"the attention kernel is built for 910B's separate cube and vector cores, not {soc.name}"
        return super().unsupported(ir, soc)


CLASS = _AttentionClass("attention", AttentionKernel, lower_attention, render, driver, schedule=schedule, cube=True,
                        tiling_main="attention_tiling_main.cpp", fallback=True, scalar_params=True)
