"""How big matmul ops are emulated: at their model's size up to a budget of multiply-accumulates (the emulated
cube is a scalar loop), cut down beyond it to a size that runs in seconds while the same code is proven: the
kernel and its host tiling are shape-generic, and the cut keeps every residue mod 16 and the tiling's blocks,
steps and core split (:func:`cut`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ...fusion import Instance
from ..drive import concrete
from .lower import MatmulKernel

#: A matmul kernel is emulated at its model's K and N up to this many multiply-accumulates per run. A bigger op
#: runs at a reduced size and skips the captured run, which would need its real weights in memory; the check's
#: label says so.
MATMUL_EMU_MACS = 50_000_000


def dims(ir: MatmulKernel, inst: Instance, out_shape: Sequence[int]) -> tuple[int, int, int]:
    """(M, K, N) of instance ``inst`` at output ``out_shape`` (its weight's dynamic dims as 1)."""
    w = concrete(inst.input_shapes[ir.gemms[0].weight], 1)
    kk = w[1] if ir.trans_b else w[0]
    return int(np.prod(out_shape[:-1])), kk, int(out_shape[-1])


def over(ir: MatmulKernel, m: int, kk: int, n: int) -> bool:
    """A run at M x K x N over :data:`MATMUL_EMU_MACS` (both gemms of a SwiGLU counted)."""
    return m * kk * n * len(ir.gemms) > MATMUL_EMU_MACS


def over_at(ir: MatmulKernel, args: Sequence[np.ndarray]) -> bool:
    """A node over the budget at its real inputs ``args`` (the deployed rung's)."""
    x, w = args[0].shape, args[ir.gemms[0].weight].shape
    return over(ir, int(np.prod(x[:-1])), x[-1], int(w[0] if ir.trans_b else w[1]))


def reduced(d: int) -> int:
    """K or N cut for a run under asc-onnx's own tiling: at most 256, the residue mod 16 kept."""
    return d if d <= 256 else 240 + d % 16


def _cut_dim(single: int, group: int, total: int) -> tuple[int, int]:
    """One dim of a core split cut down for emulation: at most two cores, each core's share cut to one step
    group plus its remainder mod the group (so the partial block and the step phase stay), the last core
    short of a full share by what it really is."""
    cores = -(-total // single)
    last = total - (cores - 1) * single
    single2 = single if single <= 2 * group else group + (single % group or group)
    cut = single - single2
    last2 = last - cut if last > cut else min(last, single2)
    return single2, (min(cores, 2) - 1) * single2 + last2


def cut(t: Mapping[str, int], m: int, n: int, k: int, org_n_factor: int = 1
        ) -> tuple[dict[str, int], int, int, int]:
    """A tiling chosen for (m, n, k) cut to a size the emulator runs in seconds, with (m', n', k'): the same
    base blocks, steps, depths, iterate order and buffering; along M and N at most two cores, each with one step
    group of blocks plus the real share's remainder, the last core as short as the real last core (so CANN's
    uneven per-core N, 250 of 2000 over 8 cores, stays uneven); K cut to one base block plus K's remainder mod
    baseK. Residues mod 16 of M, N and K are kept. ``org_n_factor``: the tiling's N per output column (2 for a
    gate-up weight read untransposed)."""
    sm, m2 = _cut_dim(t["singleCoreM"], t["baseM"] * t["stepM"], m)
    sn, n2 = _cut_dim(t["singleCoreN"], t["baseN"] * t["stepN"], n)
    bk = t["baseK"]
    k2 = k if k <= 2 * bk else bk + (k % bk or bk)
    out = dict(t, M=m2, N=n2 * org_n_factor, Ka=k2, Kb=k2, singleCoreM=sm, singleCoreN=sn, singleCoreK=k2)
    return out, m2, n2, k2


def n_factor(ir: MatmulKernel) -> int:
    """The tiling's N per output column: 2 where a gate-up weight is read untransposed."""
    return 2 if ir.split and not ir.trans_b else 1
