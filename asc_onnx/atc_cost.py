"""What a CANN kernel costs on a chip, from kernels measured on chips.

The measurements are msprof profiles that ship with MindStudio's op performance model (``msopmodeling`` 1.0.9 on
PyPI), summarised by ``bench/extract_profiles.py`` into ``asc_onnx/data/msopmodeling_profiles.csv``: per CANN
kernel, chip (910B4-1 and 910B1) and shape, the fastest, median and slowest of its runs (each a whole task:
launch, execution and completion).

* A vector kernel's time is a monotone curve of the bytes it moves (:class:`Curve`): through the medians (a
  non-decreasing fit, the table value), and through the fastest and the slowest runs of each size (its corners:
  every run lies between them). Kernels with their own profiles use their own curve; the rest
  (Sigmoid, Where, Transpose, Cast, ReduceMean ...) use the pooled elementwise curve of Add and Mul and are
  ``measured=False``.
* A cube kernel's time is ``launch + FLOPs / (peak x efficiency) + bytes / bandwidth`` fitted to the MatMulV2/V3
  and BatchMatMulV2 profiles (relative least squares), its corners the spread of every run about the fit, never
  below the cube's peak; fp32 runs on the cube at a quarter of the fp16 rate.
* Another chip is reached by scaling: the bytes term by the chips' GM bandwidths, the FLOPs term by their cube
  peaks (cores x clock). A chip with no profiles of its own (910B2/B3, every 310P) is ``measured=False``.

Nothing here is our own design's cost: the unfused side is what ATC would run, as chips ran it.
"""

from __future__ import annotations

import ast
import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import TensorProto

from .atc_passes import AtcKernel
from .hardware import chip_of, value

DATA = Path(__file__).resolve().parent / "data" / "msopmodeling_profiles.csv"
#: The chip each profile file's name stands for (``910B4-1`` is 910B4's configuration the profiles ran on:
#: msopmodeling's ``910B4-1.yaml`` gives it 20 cube and 40 vector cores at 1650 MHz, as ``910B4.yaml``).
PROFILED = {"910B4-1": "Ascend910B4", "910B1": "Ascend910B1"}
SIZES = {"bf16": 2, "fp16": 2, "fp32": 4, "int64": 8, "int32": 4, "int8": 1, "bool": 1}
#: Curves: a CANN kernel and the profiled kernels it is fitted to. Add, Mul and the pooled elementwise curve come
#: in two: same-shape inputs, and a broadcast input (``/broadcast``), which CANN's profiles show slower per byte
#: (Mul [64, 128] x [64, 1] 11.9 us against [8, 1024] x [8, 1024] 2.9 us).
CURVES = {"Add": ("Add",), "Mul": ("Mul",), "elementwise": ("Add", "Mul"), "RmsNorm": ("RmsNorm",),
          "LayerNormV3": ("LayerNormV3",), "SoftmaxV2": ("SoftmaxV2",), "SliceAiCore": ("SliceAiCore",),
          "Add/broadcast": ("Add",), "Mul/broadcast": ("Mul",), "elementwise/broadcast": ("Add", "Mul")}
SPLIT = {"Add", "Mul", "elementwise"}  # the curves that come in two
#: The cube fit comes in two: at most this many rows (M), CANN's matmuls are bound by streaming B, not by FLOPs.
GEMV_ROWS = 16
CUBE_KERNELS = ("MatMulV2", "MatMulV3", "BatchMatMulV2")


@dataclass(frozen=True)
class Profile:
    """One profiled kernel shape: its runs' fastest, median and slowest times (us)."""

    kernel: str
    chip: str
    inputs: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    outputs: tuple[tuple[int, ...], ...]
    out_dtypes: tuple[str, ...]
    block_dim: int
    runs: int
    lo: float
    median: float
    hi: float

    @property
    def bytes(self) -> int:
        return (sum(math.prod(s) * SIZES[d] for s, d in zip(self.inputs, self.dtypes))
                + sum(math.prod(s) * SIZES[d] for s, d in zip(self.outputs, self.out_dtypes)))

    @property
    def broadcast(self) -> bool:
        """An input of more than one element smaller than the output (as :class:`AtcKernel` says it)."""
        size = math.prod(self.outputs[0])
        return any(1 < math.prod(s) < size for s in self.inputs)

    @property
    def rows(self) -> int:
        return int(self.outputs[0][-2]) if len(self.outputs[0]) >= 2 else 1

    @property
    def flops(self) -> float:
        """2 x M x N x K x batch of a matmul (B given as [N, K] or [K, N])."""
        a, out = self.inputs[0], self.outputs[0]
        m = out[-2]
        k = a[-1] if a[-2] == m else a[-2]
        return 2.0 * math.prod(out) * k


@functools.cache
def profiles() -> tuple[Profile, ...]:
    """Every profiled kernel shape of the committed table."""
    out = []
    with DATA.open(encoding="utf-8") as f:
        for r in csv.DictReader(f):
            out.append(Profile(r["kernel"], PROFILED[r["chip"]],
                               tuple(map(tuple, ast.literal_eval(r["inputs_shape"]))),
                               tuple(r["inputs_dtype"].split(",")),
                               tuple(map(tuple, ast.literal_eval(r["outputs_shape"]))),
                               tuple(r["outputs_dtype"].split(",")), int(r["block_dim"]), int(r["runs"]),
                               float(r["min_us"]), float(r["median_us"]), float(r["max_us"])))
    return tuple(out)


@dataclass(frozen=True)
class Curve:
    """Time against bytes on the chip the kernels were measured on: ``xs`` bytes, and at each the fastest run, the
    median fit (non-decreasing) and the slowest run of the kernels of that size (us); the corners never cross the
    median fit. Between points the curve is interpolated on log axes; below the first it is the first point's (the
    kernel's floor); beyond the last the further bytes take the sustained rate of the largest profiled Add
    (:func:`sustained_rate`), not the last point's own rate (a small kernel's is far below it)."""

    name: str
    chip: str
    xs: tuple[float, ...]
    lo: tuple[float, ...]
    med: tuple[float, ...]
    hi: tuple[float, ...]

    def at(self, nbytes: float) -> tuple[float, float, float]:
        if nbytes > self.xs[-1]:  # beyond the profiles: the rest of the bytes at the sustained rate
            extra = (nbytes - self.xs[-1]) / sustained_rate()
            lo, med, hi = (ys[-1] + extra for ys in (self.lo, self.med, self.hi))
        else:
            lo, med, hi = (_interp(nbytes, self.xs, ys) for ys in (self.lo, self.med, self.hi))
        return min(lo, med), med, max(hi, med)


def _interp(x: float, xs: tuple[float, ...], ys: tuple[float, ...]) -> float:
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    j = int(np.searchsorted(xs, x))
    t = (math.log(x) - math.log(xs[j - 1])) / (math.log(xs[j]) - math.log(xs[j - 1]))
    return math.exp(math.log(ys[j - 1]) + t * (math.log(ys[j]) - math.log(ys[j - 1])))


def _isotonic(ys: list[float]) -> list[float]:
    """The non-decreasing least-squares fit of ``ys`` on log axes (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean of logs, count]
    for y in ys:
        blocks.append([math.log(y), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m1, n1), (m2, n2) = blocks[-2], blocks[-1]
            blocks[-2:] = [[(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2]]
    return [math.exp(m) for m, n in blocks for _ in range(int(n))]


@functools.cache
def curve(name: str) -> Curve:
    """The fitted curve of one vector kernel (:data:`CURVES`), on the chip most of its profiles ran on."""
    base = name.split("/")[0]
    ps = [p for p in profiles() if p.kernel in CURVES[name]
          and (base not in SPLIT or p.broadcast == name.endswith("/broadcast"))]
    chip = max({p.chip for p in ps}, key=lambda c: sum(p.chip == c for p in ps))
    ps = sorted((p for p in ps if p.chip == chip), key=lambda p: (p.bytes, p.median))
    xs: list[float] = []
    for p in ps:  # equal byte counts: one point, nudged so the axis strictly grows
        xs.append(max(float(p.bytes), xs[-1] * (1 + 1e-9) if xs else 1.0))
    med = _isotonic([p.median for p in ps])
    lo = [min(q.lo for q in ps if q.bytes == p.bytes) for p in ps]
    hi = [max(q.hi for q in ps if q.bytes == p.bytes) for p in ps]
    return Curve(name, chip, tuple(xs), tuple(map(float, lo)), tuple(med), tuple(map(float, hi)))


@functools.cache
def sustained_rate() -> float:
    """Bytes per us a CANN vector kernel sustains on its profiled chip: the largest profiled Add's (176 MB in
    138 us on 910B4-1, 1.28 TB/s), what a curve adds beyond its largest profile."""
    p = max((p for p in profiles() if p.kernel in CURVES["Add"]), key=lambda p: p.bytes)
    return p.bytes / p.median


@dataclass(frozen=True)
class CubeFit:
    """``launch + flops / (peak x efficiency) + bytes / bandwidth`` on the profiled chip, with the spread of every
    run about it (``lo`` and ``hi`` as factors). A term the profiles do not support is infinite (no cost): at a few
    rows, CANN's matmuls take their time streaming B, not in FLOPs."""

    chip: str
    launch_us: float
    efficiency: float
    bandwidth: float
    lo: float
    hi: float

    def at(self, flops: float, nbytes: float, chip: str, fp32: bool) -> tuple[float, float, float]:
        peak = _cube_peak(chip) * (value(chip, "cube_fp32_share") if fp32 else 1.0)
        mid = self.launch_us + (flops / (peak * self.efficiency)
                                + _scaled_bytes(nbytes, self.chip, chip) / self.bandwidth) * 1e6
        roof = flops / peak * 1e6  # (a profiled kernel's bytes may be L2 hits: only the FLOPs bound it)
        return max(mid * self.lo, roof), mid, mid * self.hi


def _cube_peak(chip: str) -> float:
    return value(chip, "cube_fp16_flops")


@functools.cache
def cube_fit(gemv: bool = False) -> CubeFit:
    """The cube kernels' fit to their profiles (relative least squares on the launch, FLOPs and bytes terms), for
    at most :data:`GEMV_ROWS` rows (``gemv``) or more."""
    ps = [p for p in profiles() if p.kernel in CUBE_KERNELS and (p.rows <= GEMV_ROWS) == gemv]
    chip = ps[0].chip
    f = np.array([p.flops for p in ps])
    b = np.array([float(p.bytes) for p in ps])
    y = np.array([p.median for p in ps])
    cols = [np.ones_like(f), f, b]
    keep = [0, 1, 2]
    while True:  # least squares with no negative term: a term that fits negative is dropped and the rest refitted
        a = np.stack([cols[i] for i in keep], 1) / y[:, None]
        x, *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
        if (x >= 0).all() or len(keep) == 1:
            break
        keep.pop(int(np.argmin(x)))
    coef = dict(zip(keep, map(float, x)))
    launch, per_flop, per_byte = coef.get(0, 0.0), coef.get(1, 0.0), coef.get(2, 0.0)
    fit = CubeFit(chip, launch, 1e6 / (per_flop * _cube_peak(chip)) if per_flop else math.inf,
                  1e6 / per_byte if per_byte else math.inf, 1.0, 1.0)
    mids = [fit.at(p.flops, p.bytes, chip, False)[1] for p in ps]
    return CubeFit(chip, fit.launch_us, fit.efficiency, fit.bandwidth,
                   float(min(p.lo / m for p, m in zip(ps, mids))), float(max(p.hi / m for p, m in zip(ps, mids))))


@dataclass(frozen=True)
class Cost:
    """One CANN kernel's estimate (us): at the table value and both corners, and whether it is measured (a kernel
    with profiles of its own, on a chip that has them) or follows the stated rule."""

    kernel: str
    us: float
    lo: float
    hi: float
    measured: bool
    rule: str


def _scaled_bytes(nbytes: float, measured_on: str, chip: str) -> float:
    """Bytes on ``chip`` as the bytes that take as long on the chip the curve was measured on."""
    return nbytes * value(measured_on, "gm_bandwidth") / value(chip, "gm_bandwidth")


def kernel_cost(k: AtcKernel, chip: str, l2_bytes: int = 0) -> Cost:
    """What kernel ``k`` costs on ``chip``; ``l2_bytes`` of what it reads are L2 hits (written earlier in the same
    chain while they fit), read at the L2 bandwidth instead of from HBM."""
    return _cost(k.kernel, k.bytes, k.flops, 0 < k.rows <= GEMV_ROWS, k.dtype == TensorProto.FLOAT, k.broadcast,
                 chip_of(chip), l2_bytes)


@functools.lru_cache(maxsize=65536)
def _cost(kernel: str, nbytes: int, flops: float, gemv: bool, fp32: bool, broadcast: bool, chip: str,
          l2_bytes: int) -> Cost:
    """:func:`kernel_cost` by what it depends on (a deep model repeats its layers' kernels: each is costed once)."""
    hbm = max(0, nbytes - l2_bytes)
    l2 = 0.0 if not l2_bytes else value(chip, "gm_bandwidth") / value(chip, "l2_bandwidth")
    eff = hbm + l2_bytes * l2
    if flops:
        fit = cube_fit(gemv)
        lo, mid, hi = fit.at(flops, eff, chip, fp32)
        measured = kernel in CUBE_KERNELS and chip == fit.chip
        return Cost(kernel, mid, lo, hi, measured, "cube fit" + ("" if measured else ", scaled to the chip"))
    name = kernel if kernel in CURVES else "elementwise"
    if name in SPLIT and broadcast:
        name += "/broadcast"
    c = curve(name)
    lo, mid, hi = c.at(_scaled_bytes(eff, c.chip, chip))
    measured = not name.startswith("elementwise") and c.chip == chip
    rule = (f"{name} curve" if not name.startswith("elementwise") else f"the {name} curve (Add, Mul)") + (
        "" if c.chip == chip else f", measured on {c.chip}, scaled by GM bandwidth")
    return Cost(kernel, mid, lo, hi, measured, rule)


#: Launch and completion beyond execution, fitted per block dim: the same-shape Add and Mul profiles of at most
#: 1 MiB, each run less its data at the Add curve's sustained bandwidth.
LAUNCH_MAX_BYTES = 1 << 20


@functools.cache
def launch_lines() -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """(intercept us, us per core) of the fastest, median and slowest runs' lines: the launch model of both sides
    (the measured kernels carry theirs; a fused kernel pays the line at its block dim)."""
    rate = sustained_rate()
    ps = [p for p in profiles() if p.kernel in ("Add", "Mul") and p.bytes <= LAUNCH_MAX_BYTES
          and all(s == p.outputs[0] for s in p.inputs) and p.dtypes[0] in ("bf16", "fp16", "fp32")]
    cores = np.array([float(p.block_dim) for p in ps])
    a = np.stack([np.ones_like(cores), cores], 1)
    out = []
    for attr in ("lo", "median", "hi"):
        y = np.array([max(0.1, getattr(p, attr) - p.bytes / rate) for p in ps])
        (x0, x1), *_ = np.linalg.lstsq(a, y, rcond=None)
        out.append((float(x0), float(x1)))
    return out[0], out[1], out[2]


def launch_us(block_dim: int, end: int = 0) -> float:
    """A kernel's launch and completion on ``block_dim`` cores: the fastest runs' line (``end`` -1), the medians'
    (0) or the slowest runs' (+1)."""
    x0, x1 = launch_lines()[end + 1]
    return x0 + x1 * max(1, block_dim)


__all__ = ["Cost", "Curve", "CubeFit", "Profile", "cube_fit", "curve", "kernel_cost", "launch_lines", "launch_us",
           "profiles"]
