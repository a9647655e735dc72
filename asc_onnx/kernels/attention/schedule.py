"""The attention class's schedule: its policies (:class:`AttentionSchedule`, carried by the IR and printed into the
host tiling, which sizes the blocks at run time by them) and, in Python beside them, the traffic model of the flash
loop under the tiling a run used (:func:`traffic`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .lower import AttentionKernel


@dataclass(frozen=True)
class AttentionSchedule:
    """The attention class's policies.

    Attributes:
        max_block: Q rows of a work item at most (the cube's M of both products); the tiling tries this, then
            halves down to 16.
        kv_block: keys per KV block where the sequence is longer (the scores' N), halved while the score rows of a
            chunk of 8 do not fit UB.
        max_splits: decode's split of the keys over cores: parts at most.
        unit_keys / split_keys / part_keys: the costs, in keys, the split choice weighs: a unit's own overhead (its
            products' messages and waits, the pipeline's fill), a split's (SyncAll and the combine's start) and
            each part's in the combine.
    """

    max_block: int = 128
    kv_block: int = 1024
    max_splits: int = 32
    unit_keys: int = 512
    split_keys: int = 1024
    part_keys: int = 64

    def __post_init__(self) -> None:
        if self.max_block not in (16, 32, 64, 128):
            raise ValueError(f"max_block must be 16, 32, 64 or 128 (the cube's M), not {self.max_block}")
        if self.kv_block < 64 or self.kv_block % 64 or self.kv_block > 4096:
            raise ValueError(f"kv_block must be a multiple of 64 from 64 to 4096, not {self.kv_block}")
        if not 1 <= self.max_splits <= 64:
            raise ValueError(f"max_splits must be 1 to 64, not {self.max_splits}")


def choose(k: AttentionKernel, soc: object) -> AttentionSchedule:
    """The schedule a kernel ships with."""
    return AttentionSchedule()


#: Schedules a benchmark may set side by side.
VARIANTS = {"KV blocks of 1024": AttentionSchedule(), "KV blocks of 512": AttentionSchedule(kv_block=512)}


#: The run's tiling the traffic model reads, as the driver records it in a check's ``cube``: the item walk's fields
#: (record key -> tiling field), and of each product's Matmul tiling (``qk_<field>``, ``pv_<field>``) what decides
#: its loads.
WALK_FIELDS = {"chunk_rows": "chunkRows", "out_rows": "outRows", "q_blocks": "qBlocks", "head_rows": "headRows",
               "part_keys": "partKeys", "sk": "sk", "score_stage": "scoreStage", "out_stage": "outStage",
               "ws_core_bytes": "wsCoreBytes", "dv_rows": "dv", "causal": "causal"}
PRODUCT_FIELDS = ("baseM", "baseN", "baseK", "depthA1", "depthB1", "stepM", "stepN", "iterateOrder")


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def product_reads(m: int, n: int, kk: int, tiling: Mapping[str, int], a_size: int, b_size: int) -> int:
    """GM bytes the cube reads for one ``m x kk @ kk x n`` product under a Matmul tiling (the norm schedule): base
    blocks in the tiling's order, each block's A and B base tiles along K loaded into L1 unless still held there
    (``depthA1`` and ``depthB1`` tiles, least recently used out; A's copies dropped where a new group of ``stepN``
    columns starts under ORDER_M, B's where a group of ``stepM`` rows starts under ORDER_N)."""
    base_m, base_n, base_k = tiling["baseM"], tiling["baseN"], tiling["baseK"]
    m_iter, n_iter, k_iter = _ceil(m, base_m), _ceil(n, base_n), _ceil(kk, base_k)
    order_m = tiling["iterateOrder"] == 0
    a_cache: list[tuple[int, int]] = []
    b_cache: list[tuple[int, int]] = []
    last_group = None
    total = 0

    def load(cache: list[tuple[int, int]], depth: int, key: tuple[int, int]) -> bool:
        if key in cache:
            cache.remove(key)
            cache.insert(0, key)
            return False
        cache.insert(0, key)
        del cache[max(1, depth):]
        return True

    for bm, bn in _block_order(m_iter, n_iter, tiling["stepM"], tiling["stepN"], order_m):
        group = (bm, bn // tiling["stepN"]) if order_m else (bn, bm // tiling["stepM"])
        if group != last_group:
            (a_cache if order_m else b_cache).clear()
            last_group = group
        rows, cols = min(base_m, m - bm * base_m), min(base_n, n - bn * base_n)
        for kc in range(k_iter):
            kw = min(base_k, kk - kc * base_k)
            if load(a_cache, tiling["depthA1"], (bm, kc)):
                total += rows * kw * a_size
            if load(b_cache, tiling["depthB1"], (kc, bn)):
                total += kw * cols * b_size
    return total


def _block_order(m_iter: int, n_iter: int, step_m: int, step_n: int, order_m: bool) -> Iterator[tuple[int, int]]:
    if order_m:  # N step groups outermost, then M, then N within the group
        for n0 in range(0, n_iter, step_n):
            for m in range(m_iter):
                for n in range(n0, min(n_iter, n0 + step_n)):
                    yield m, n
    else:
        for m0 in range(0, m_iter, step_m):
            for n in range(n_iter):
                for m in range(m0, min(m_iter, m0 + step_m)):
                    yield m, n


def traffic(k: AttentionKernel, shapes: Sequence[Sequence[int]], dtype_size: int, soc: Any, block_dim: int = 0,
            cube: Mapping[str, Any] | None = None) -> int:
    """GM bytes of the flash loop under the tiling a run used (``cube``: the emulated check's record of it, with
    the two products' Matmul tilings ``qk`` and ``pv``). Per unit (a Q block of a head, or one part of its keys) and
    KV block: the cube reads q's rows and k's keys (:func:`product_reads`) and writes the fp32 scores; the vector
    core reads them and the mask's rows chunk by chunk (one row a block where broadcast along the queries) and
    writes P; the cube reads P and v's rows and writes the fp32 product, which the vector core reads back. After
    the last block y is written once, or (split keys) the part's rows and statistics, which the combine reads again
    before it writes y. 0 without a tiling record."""
    if not cube or "qk_baseM" not in cube:
        return 0
    t = {**cube, **{p: {f: int(cube[f"{p}_{f}"]) for f in PRODUCT_FIELDS} for p in ("qk", "pv")}}
    size = dtype_size
    d, dv = int(shapes[0][-1]), int(shapes[2][-1])
    wide = int(t.get("dv_rows", dv))  # P @ v's rows in the workspace and UB (dv, to 16 if no multiple of 8)
    mask_inputs = (2 if k.has_keep else 1) if k.has_mask else 0
    total = 0
    for rows, keys in _units(t):
        for b in range(_ceil(keys, t["kv_block"])):
            cols = min(t["kv_block"], keys - b * t["kv_block"])
            total += product_reads(rows, cols, d, t["qk"], size, size) + rows * cols * 4  # q @ k^T -> scores
            # the mask's rows chunk by chunk; broadcast along the queries, its one row once a block
            total += mask_inputs * cols * size if t["mask_broadcast"] else 0
            for r0 in range(0, rows, t["chunk_rows"]):
                chunk = min(t["chunk_rows"], rows - r0)
                total += chunk * cols * 4  # scores in
                total += 0 if t["mask_broadcast"] else mask_inputs * chunk * cols * size
                total += chunk * cols * size  # P out
            total += product_reads(rows, dv, cols, t["pv"], size, size) + rows * dv * 4  # P @ v -> o
            total += rows * wide * 4  # o in
        total += 2 * rows * 4 + rows * wide * 4 if t["splits"] > 1 else rows * dv * size
    if t["splits"] > 1:  # the combine: every part's statistics and rows in, y out
        for rows, _ in _units(t, first_parts=True):
            for r0 in range(0, rows, t["out_rows"]):
                chunk = min(t["out_rows"], rows - r0)
                total += t["splits"] * (2 * chunk * 4 + chunk * wide * 4) + chunk * dv * size
    return total


def _units(t: Mapping[str, Any], first_parts: bool = False) -> Iterator[tuple[int, int]]:
    """(rows, keys) of every unit (``first_parts``: of every item once)."""
    for u in range(0, t["units"], t["splits"] if first_parts else 1):
        i, part = u // t["splits"], u % t["splits"]
        q0 = i % t["q_blocks"] * t["mBlock"]
        rows = min(t["mBlock"], t["head_rows"] - q0)
        c0 = part * t["part_keys"]
        keys = min(t["part_keys"], t["sk"] - c0)
        if t.get("causal"):  # (one part) keys up to the block's last row's last visible one
            keys = min(keys, q0 + rows + t["sk"] - t["head_rows"])
        yield rows, keys


__all__ = ["PRODUCT_FIELDS", "VARIANTS", "WALK_FIELDS", "AttentionSchedule", "choose", "product_reads", "traffic"]
