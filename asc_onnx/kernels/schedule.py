"""Schedules as data: the policies a kernel was lowered with, carried by its IR, printed by its renderer and
read by its traffic model.

The sizes of a tile and of a core's share depend on the shape, which ATC gives only at run time, so the host
tiling (``<op>ComputeTiling``) computes them; the *policies* it computes them by are fixed when the kernel is
generated and live here: how many buffers each queue has, how much data a core must have before another is
launched, and each class's own (row: the tile's row cap and the UB share of resident masks; matmul: the
epilogue's C staging). Two schedules of one op are two IRs that differ in this field: generated, emulated and
compared side by side (``bench/bench_schedules.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VectorSchedule:
    """The policies of a vector kernel (pointwise, row).

    Attributes:
        buffer_num: buffers per queue. 2 overlaps a tile's copies with the previous tile's compute; 1 leaves
            the copies waiting for compute but gives each tile the room of two (longer tiles, or whole rows
            where two buffers would force a row kernel into split mode).
        min_core_bytes: data a core must have before another core is launched (GM transfers are efficient
            from 16 KB per burst, cann_facts.md §7; smaller slices cost launches and re-reads).
    """

    buffer_num: int = 2
    min_core_bytes: int = 16384

    def __post_init__(self) -> None:
        if self.buffer_num not in (1, 2):
            raise ValueError(f"buffer_num must be 1 or 2, not {self.buffer_num}")
        if self.min_core_bytes < 1:
            raise ValueError("min_core_bytes must be positive")

    @property
    def buffering(self) -> str:
        """The kernel's comment on its BUFFER_NUM."""
        if self.buffer_num == 2:
            return "double buffering: two buffers per queue, queue depth 1"
        return "single buffering: one buffer per queue (copies wait for compute; a tile gets twice the room)"


__all__ = ["VectorSchedule"]
