"""The row class's schedule: its policies (:class:`RowSchedule`, carried by the IR and printed by the renderer)
and, beside them, the traffic model: :func:`plan` is the host tiling's choice for a shape (whole rows per tile,
or split mode's column chunks) and :func:`gm_bytes` the global-memory bytes the kernel then moves. The tests hold
both to the emulated kernel, so a schedule can be judged before it is emulated, and a bench can show two side
by side."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..schedule import VectorSchedule
from ..skeleton import tiling_ub_bytes

if TYPE_CHECKING:
    from .lower import RowKernel, RowStep

#: Whole-row mode's buffers per (input, output) queue, best first: the host takes the first a one-row tile
#: fits (a double-buffered input alone still preloads the next tile during this one's compute).
BUFFERINGS = ((2, 2), (2, 1), (1, 1))
#: Whole rows of at most this many elements take the tile-wide forms: statistics folded over 64-column chunks and
#: applied by level-0 instructions, one per tile and 64 columns (longer rows: the per-row count forms, whose
#: scalar wait is then a small share of a row). Row strides stay within BinaryRepeatParams' 8-bit block stride.
FOLD_MAX = 1024

#: Split mode keeps the weights whole in UB (in the I/O type) when they fit 1/WEIGHT_SHARE of it: half still
#: leaves chunks of thousands of elements.
WEIGHT_SHARE = 2
#: fp32 elements per row statistic (64 bytes: a whole number of 32-byte blocks).
STAT_SLOT = 16
#: Rows per tile at most: DataCopyPad's blockCount is 12 bits.
MAX_TILE_ROWS = 4095


@dataclass(frozen=True)
class RowSchedule(VectorSchedule):
    """The row class's policies.

    Attributes:
        resident_share: a mask input with fewer rows than a core reads is loaded whole, once per core, when it
            fits 1/resident_share of the unified buffer (else one mapped row is streamed per data row).
    """

    resident_share: int = 3


def input_regs(k: RowKernel) -> dict[int, str]:
    """Each input's register: ``rK`` for inputs carrying rows, ``vK`` for weights, in input order."""
    counters, out = {"r": 0, "v": 0}, {}
    for i, x in enumerate(k.inputs):
        c = "v" if x.kind == "vec" else "r"
        out[i] = f"{c}{counters[c]}"
        counters[c] += 1
    return out


def direct_outputs(k: RowKernel) -> dict[str, int]:
    """Row outputs computed straight into their output tile (fp32: no copy pass; fp16: one Cast): those whose
    register is theirs alone (not an input's, not another output's, not a constant), by register."""
    hoisted = {st.dst for st in k.hoisted}
    regs = [r for o, r in enumerate(k.out_regs) if k.output_kinds[o] == "row"]
    ins = set(input_regs(k).values())
    return {r: o for o, r in enumerate(k.out_regs) if k.output_kinds[o] == "row" and regs.count(r) == 1
            and r not in ins and r not in hoisted}


def tile_inputs(k: RowKernel) -> set[str]:
    """Registers of the inputs read as full tiles (a mask input's may be gathered from its resident copy)."""
    return {r for i, r in input_regs(k).items() if k.inputs[i].kind == "full"}


def row_slots(k: RowKernel) -> dict[str, int]:
    """Each row register's slot in the register buffer, ordered so that the registers an I/O tile can hold come
    last: the hoisted constants, the other values, the direct outputs, the inputs. With fp32 I/O an input's
    register is its input tile, and in whole-row mode a direct output's is its output tile (a value computed
    before the output in that register lives in the output tile), so those need no slot: the buffer holds the
    first :func:`slot_counts` slots of the mode and type."""
    used = ({st.dst for st in k.steps + k.hoisted} | {s for st in k.steps + k.hoisted for s in st.srcs}
            | set(k.out_regs) | set(input_regs(k).values()))
    rows = sorted((u for u in used if u[0] == "r"), key=lambda n: int(n[1:]))
    hoisted = {st.dst for st in k.hoisted}
    direct, ins = set(direct_outputs(k)), tile_inputs(k)
    rank = {r: (0 if r in hoisted else 3 if r in ins else 2 if r in direct else 1) for r in rows}
    return {r: i for i, r in enumerate(sorted(rows, key=lambda r: (rank[r], int(r[1:]))))}


def slot_counts(k: RowKernel) -> dict[str, int]:
    """Slots the register buffer holds: ``all`` (fp16/bf16 I/O), ``whole32`` and ``split32`` (fp32 I/O in
    whole-row and split mode)."""
    slots = row_slots(k)
    direct, ins = set(direct_outputs(k)), tile_inputs(k)
    return {"all": len(slots), "whole32": sum(r not in direct and r not in ins for r in slots),
            "split32": sum(r not in ins for r in slots)}


def ub_counts(k: RowKernel) -> dict[str, int]:
    """What a tile row holds in the unified buffer, by kind: I/O rows of T (``io``), statistic outputs
    (``statout``), weights staged in T (``vec_in``; split mode only: whole rows stage them in the register
    buffer) and fp32 registers (``stat``, ``vec``, and the row registers' slots: :func:`slot_counts`); the stat
    buffer holds ``stat_slots``: the stats, a chunk's partial, split mode's previous max and shifted sum."""
    ins = [x.kind for x in k.inputs]
    return {"io": ins.count("full") + ins.count("bcast") + k.output_kinds.count("row"),
            "in": ins.count("full") + ins.count("bcast"), "out": k.output_kinds.count("row"),
            "statout": k.output_kinds.count("stat"), "vec_in": ins.count("vec"),
            "stat": k.num_regs["stat"], "stat_slots": max(1, k.num_regs["stat"]) + 3, "vec": k.num_regs["vec"],
            **slot_counts(k)}


@dataclass(frozen=True)
class RowPlan:
    """The host tiling's choice for one shape (None fields where it refuses)."""

    rows: int
    row_length: int
    block_dim: int
    tile_rows: int  # whole rows per tile (1 in split mode)
    chunk: int  # split mode: columns per chunk; 0 when whole rows fit
    resident: tuple[bool, ...]  # per mask input: loaded whole once per core
    buffers: tuple[int, int] = (2, 2)  # buffers per input queue and per output queue
    weights_resident: bool = False  # split mode: the weights loaded whole once per core (whole rows always are)
    group: int = 0  # grouped walk: the mask's rows, split over the cores (each core reads its slice once)

    @property
    def mode(self) -> str:
        return "split" if self.chunk else "whole"


def plan(k: RowKernel, shapes: Sequence[Sequence[int]], dtype_size: int, ub_bytes: int, core_num: int,
         has_pad: bool = True) -> RowPlan | None:
    """The tiling ``<op>ComputeTiling`` computes for inputs of ``shapes`` (None where it refuses): the same
    arithmetic, in Python."""
    s = k.schedule
    data = [int(d) for d in np.broadcast_shapes(*(tuple(shapes[i]) for i in k.data_inputs))]
    rank, rd = len(data), k.row_dims
    if rank < rd or rd == 0 or core_num == 0:
        return None
    row_length, rows = math.prod(data[rank - rd:]), math.prod(data[:rank - rd])
    if row_length == 0 or rows == 0:
        return None
    align = 32 // dtype_size
    edge = 32 if not has_pad and row_length % align else 0
    stride = -(-row_length // align) * align
    min_rows = -(-s.min_core_bytes // (row_length * dtype_size))
    block_dim = min(max(1, rows // min_rows), core_num)
    core_rows = rows // block_dim + (1 if rows % block_dim else 0)
    c, bn = ub_counts(k), s.buffer_num
    c["row"], c["row_split"] = (c["whole32"], c["split32"]) if dtype_size == 4 else (c["all"], c["all"])
    vec_row = -(-stride // 64) * 64
    tmp = (2 * -(-row_length // 64) + 7) // 8 * 8
    fixed = (256 * c["row"] + 512 * c["stat_slots"] + 4 * tmp + 4 * c["vec"] * vec_row
             + 32 * (2 * (c["io"] + c["statout"]) + 5 + c["vec_in"]) + 2 * edge)
    fold = 256 if has_pad and 64 < row_length <= FOLD_MAX else 0
    group = _group(k, data, shapes, dtype_size, ub_bytes, block_dim, core_rows, fixed, c, stride, edge + fold)
    if group:
        block_dim = min(block_dim, group)
        core_rows = -(-group // block_dim)
    resident, used = [], 0
    for i in k.broadcast_inputs:
        mask_rows = math.prod(shapes[i]) // row_length
        size = (mask_rows * stride * dtype_size + 31) // 32 * 32
        if group:  # a core's slice
            resident.append(True)
            used += (core_rows * stride * dtype_size + 31) // 32 * 32
            continue
        keep = mask_rows < core_rows and used + size <= ub_bytes // s.resident_share
        resident.append(keep)
        used += size if keep else 0
    # Double-buffered where a tile of one row fits so, else single; masks leave the UB only if neither fits.
    tile_rows, buffers = 0, (bn, bn)
    for keep in (True, False):
        if not keep:
            if not used:
                break
            resident, used = [False] * len(resident), 0
        for buffers in BUFFERINGS[BUFFERINGS.index((bn, bn)):]:
            per_row = _row_bytes(c, *buffers, stride, dtype_size, edge + fold)
            tile_rows = (ub_bytes - fixed - used) // per_row if ub_bytes > fixed + used else 0
            if tile_rows:
                break
        if tile_rows:
            break
    tile_rows = min(tile_rows, MAX_TILE_ROWS, core_rows)
    if tile_rows >= 1:
        return RowPlan(rows, row_length, block_dim, tile_rows, 0, tuple(resident), buffers, group=group)
    # Split mode: the weights stay in UB in their I/O type when they fit half of it, else stream per chunk.
    weight_bytes = c["vec_in"] * ((stride * dtype_size + 31) // 32 * 32)
    keep_weights = c["vec_in"] > 0 and weight_bytes <= ub_bytes // WEIGHT_SHARE
    per_elem = (bn * c["io"] * dtype_size + 4 * c["row_split"] + 4 * c["vec"]
                + (0 if keep_weights else bn * c["vec_in"] * dtype_size) + 1)
    split_fixed = (1024 + 4 * 128 * c["stat_slots"] + bn * STAT_SLOT * c["statout"] * dtype_size
                   + 32 * (2 * (c["io"] + c["statout"]) + 4 + c["vec_in"]) + 3 * edge
                   + (weight_bytes if keep_weights else 0))
    if ub_bytes <= split_fixed:
        return None
    chunk = (ub_bytes - split_fixed) // per_elem // 64 * 64
    if chunk < 64:
        return None

    def short_end(n: int) -> bool:
        return row_length % n != 0 and row_length % n < align

    while edge and chunk > 64 and short_end(chunk):
        chunk -= 64
    if edge and short_end(chunk):
        return None
    return RowPlan(rows, row_length, block_dim, 1, chunk, (False,) * len(resident), (bn, bn), keep_weights)


def _row_bytes(c: dict[str, int], in_buffers: int, out_buffers: int, stride: int, dtype_size: int, extra: int) -> int:
    """UB bytes one row of a whole-row tile takes (``rowBytes`` in the host tiling): its I/O tiles, row registers,
    stat slots and stat outputs, plus ``extra`` (310P's edge window, 910B's fold lanes)."""
    return ((in_buffers * c["in"] + out_buffers * c["out"]) * stride * dtype_size + 4 * c["row"] * stride
            + 4 * STAT_SLOT * c["stat_slots"] + out_buffers * STAT_SLOT * c["statout"] * dtype_size + extra)


def _group(k: RowKernel, data: list[int], shapes: Sequence[Sequence[int]], dtype_size: int, ub_bytes: int,
           block_dim: int, core_rows: int, fixed: int, c: dict[str, int], stride: int, edge: int) -> int:
    """The grouped walk's mask rows (0: the ordinary walk): one mask input that repeats along the leading axes
    before its own (a [1, 1, S, S] mask over [B, H, S, S]) and that a core's rows would read more than once;
    the cores split the mask's rows and walk each under every repeat, a core's slice held in UB."""
    if len(k.broadcast_inputs) != 1:
        return 0
    lead = data[:len(data) - k.row_dims]
    mask = list(shapes[k.broadcast_inputs[0]])
    md = [1] * max(0, len(data) - len(mask)) + mask[max(0, len(mask) - len(data)):]
    md = md[:len(lead)]
    first = len(lead)
    while first > 0 and md[first - 1] == lead[first - 1]:
        first -= 1
    mask_rows, rows = math.prod(md), math.prod(lead)
    cores = min(block_dim, mask_rows)
    slice_bytes = (-(-mask_rows // cores) * stride * dtype_size + 31) // 32 * 32
    one_row = _row_bytes(c, 1, 1, stride, dtype_size, edge)
    if (all(d == 1 for d in md[:first]) and mask_rows < rows and mask_rows >= core_rows
            and slice_bytes <= ub_bytes // k.schedule.resident_share and fixed + slice_bytes + one_row <= ub_bytes):
        return mask_rows
    return 0


def pass_steps(k: RowKernel, p: int, final: bool) -> list[RowStep]:
    """Row steps (program order) that pass ``p`` must run per chunk: those feeding its reductions, read where
    each reduction stands (row registers are reused later), and on the final pass those feeding the outputs."""
    need: set[str] = {k.out_regs[o] for o, kd in enumerate(k.output_kinds) if kd == "row"} if final else set()
    keep = []
    for st in reversed(k.steps):
        if st.form == "reduce":
            if st.avail == p + 1 and st.online[:1] != ("shifted",):  # that reads x beside the sum of x
                need.add(st.srcs[0])
            continue
        if st.dst[0] == "s" or st.dst not in need:
            continue
        keep.append(st)
        need.discard(st.dst)
        need.update(s for s in st.srcs if s[0] == "r")
    return list(reversed(keep))


def weight_passes(k: RowKernel) -> int:
    """Split-mode passes that read the weights (``vec`` inputs): those whose chunk steps use a weight register."""
    final = k.passes - 1
    return sum(any(s[0] == "v" for st in pass_steps(k, p, p == final) for s in st.srcs) for p in range(k.passes))


def gm_bytes(k: RowKernel, p: RowPlan, shapes: Sequence[Sequence[int]], dtype_size: int) -> int:
    """Global-memory bytes the kernel moves under plan ``p`` (910B's byte-exact copies): the data's rows once
    per pass over them (split mode reads a row ``passes`` times), masks once per core when resident, weights
    once per core (split mode, where they do not fit: once per row and pass that uses them), each output once."""
    row_bytes = p.row_length * dtype_size
    passes = k.passes if p.chunk else 1
    total = 0
    for i, x in enumerate(k.inputs):
        if x.kind == "full":
            total += passes * p.rows * row_bytes
        elif x.kind == "bcast":
            j = k.broadcast_inputs.index(i)
            if p.group:
                total += math.prod(shapes[i]) * dtype_size  # each core its slice
            else:
                total += p.block_dim * math.prod(shapes[i]) * dtype_size if p.resident[j] else \
                    passes * p.rows * row_bytes
        elif x.kind == "vec":
            total += (weight_passes(k) * p.rows if p.chunk and not p.weights_resident else p.block_dim) * row_bytes
    for kd in k.output_kinds:
        total += p.rows * (row_bytes if kd == "row" else dtype_size)
    return total




def choose(k: RowKernel, soc: object) -> RowSchedule:
    """The schedule a kernel ships with."""
    return RowSchedule()


#: Schedules a benchmark may set side by side.
VARIANTS = {"double-buffered": RowSchedule(), "single-buffered": RowSchedule(buffer_num=1)}

def traffic(k: RowKernel, shapes: Sequence[Sequence[int]], dtype_size: int, soc: Any, block_dim: int = 0,
            cube: object = None) -> int:
    """The model's GM bytes: :func:`plan` on the SoC's unified buffer and cores, then :func:`gm_bytes`
    (0 where the tiling refuses the shape)."""
    p = plan(k, shapes, dtype_size, tiling_ub_bytes(k, soc), soc.vector_cores, soc.has_data_copy_pad)
    return gm_bytes(k, p, shapes, dtype_size) if p is not None else 0


__all__ = ["FOLD_MAX", "MAX_TILE_ROWS", "WEIGHT_SHARE", "STAT_SLOT", "VARIANTS", "RowPlan", "RowSchedule", "choose",
           "gm_bytes", "pass_steps", "plan", "row_slots", "slot_counts", "traffic", "ub_counts", "weight_passes"]
