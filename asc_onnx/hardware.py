"""The hardware constants every time estimate is made from, one table per SoC, each with its source.

A figure here is either published (``source`` names the document; ``quote`` is the phrase that states it where
the document is one of the open Ascend sources beside this repository, ``../shared/ascend``, and a test checks
that the phrase is there) or an assumption nobody publishes (``assumed``: the range it may take; any decision an
estimate makes must hold across that range). Changing a figure needs a new source, and the figures that depend
on it are re-reported (the benchmarks print from this table).

Representative parts: ``Ascend910B`` is Atlas A2 with 24 AI Cores (910B1/910B2; 910B3/910B4 have 20), and
``Ascend310P`` is one Ascend 310P3 chip (an Atlas 300I Pro card has one, an Atlas 300I Duo two).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

#: Where the open-source documents cited by path live, relative to the repository's parent folder.
SHARED = "shared/ascend"
OPS_NN_GUIDE = "hicann/ops-nn docs/zh/develop/cross_platform_migration_guide.md (table: Atlas A2)"
CATLASS_HW = "hicann/catlass docs/zh/2_Design/01_kernel_design/00_basics/atlasA2_hardware_info.md"
CATLASS_PERF = "hicann/catlass docs/zh/1_Practice/evaluation/bottleneck_analysis_and_optimization.md"
GUIDE_L2 = f"{SHARED}/asc-devkit/docs/zh/guide/算子实践参考/SIMD算子性能优化/内存访问/L2-Cache切分.md"
GUIDE_PERF = f"{SHARED}/asc-devkit/docs/zh/guide/算子实践参考/性能分析/分析性能数据.md"
GUIDE_VECTOR = (f"{SHARED}/asc-devkit/docs/zh/guide/编程指南/编程模型/AI-Core-SIMD编程/基于Tensor的CPP编程/"
                "Memory矢量计算编程.md")
PLATFORM = f"{SHARED}/asc-devkit/impl/utils/tiling/platform/platform_ascendc.cpp"
FACTS_15 = "shared/reference/cann_facts.md section 15 (vendor product pages)"
CATLASS_MIX = "hicann/catlass examples/102_dynamic_optimized_matmul/docs/en/CommonMatmul_en.md"


@dataclass(frozen=True)
class Fact:
    """One constant.

    Attributes:
        value: in ``unit``.
        source: the document that states it (a path under ``shared/ascend`` is checked by the tests).
        quote: the phrase of that document that states it, verbatim, where it is a file beside the repository.
        note: how the value follows from the source where it is derived, or what the figure does not cover.
        assumed: the range the figure may take: an assumption's (nobody publishes it), or the spread of the
            published values; None for a figure with one published value.
    """

    value: float
    unit: str
    source: str
    quote: str = ""
    note: str = ""
    assumed: tuple[float, float] | None = None


FACTS: dict[str, dict[str, Fact]] = {
    "Ascend910B": {
        "clock": Fact(1.8e9, "Hz", OPS_NN_GUIDE, note="频率 1.8 (GHz), AICore"),
        "cube_cores": Fact(24, "cores", OPS_NN_GUIDE, note="核数 24, AICore"),
        "vector_cores": Fact(48, "cores", PLATFORM, quote="MIX_AIC_AIV_RATION_910B1 = 2",
                             note="two vector cores per cube core"),
        "cube_fp16_flops": Fact(353.9e12, "FLOP/s", OPS_NN_GUIDE,
                                note="353T @BF16,FP16: 24 cores x 16x16x16 MACs x 2 x 1.8 GHz"),
        "vector_fp16_elems": Fact(11.06e12, "elements/s", CATLASS_PERF,
                                  note="Vector理论峰值算力11.06 TOPS (float16): 48 cores x 128 lanes x 1.8 GHz, one "
                                       "256-byte repeat per cycle per core; the migration guide's 23.5T counts two "
                                       "operations per lane"),
        "vector_repeat_bytes": Fact(256, "bytes", GUIDE_VECTOR, quote="单次迭代固定处理32B × 8 block = 256B数据"),
        "gm_bandwidth": Fact(1.6e12, "bytes/s", GUIDE_L2, quote="GM的带宽约为1.6TB/s",
                             note="the migration guide also gives 1.6TB/s; CATLASS and the guide's performance "
                                  "chapter (某款AI处理器) use 1.8 TB/s: estimates are also reported at 1.8",
                             assumed=(1.6e12, 1.8e12)),
        "gm_peak_bandwidth": Fact(1.8e12, "bytes/s", GUIDE_PERF, quote="GM峰值带宽约为1.8TB/s",
                                  note="the higher published figure (CATLASS uses it too)"),
        "l2_bytes": Fact(192 * 2**20, "bytes", GUIDE_L2, quote="L2 Cache大小为192MB"),
        "l2_bandwidth": Fact(7e12, "bytes/s", GUIDE_L2, quote="L2 Cache读写混合带宽约为7TB/s"),
        "ub_bytes": Fact(192 * 1024, "bytes", CATLASS_HW, note="UB 192KB (the host tiling sees 256 B less, KFC)"),
        "l1_bytes": Fact(512 * 1024, "bytes", CATLASS_HW, note="L1 Buffer 512KB"),
        "l0ab_bytes": Fact(64 * 1024, "bytes", CATLASS_HW, note="L0A/L0B 分别64KB"),
        "l0c_bytes": Fact(128 * 1024, "bytes", CATLASS_HW, note="L0C 128KB"),
        "launch_us": Fact(20.0, "us", CATLASS_PERF,
                          note="满核头开销约20~21μs: an empty kernel's TaskDuration on all cores (core start, "
                               "TLB misses, initialisation); a graph-mode launch of a small node may cost less",
                          assumed=(3.0, 21.0)),
        "v_to_s_drain_cycles": Fact(30, "cycles", "none published",
                                    note="a vector-to-scalar wait drains the vector pipe: assumed",
                                    assumed=(10, 100)),
        "flag_latency_cycles": Fact(20, "cycles", "none published", note="SetFlag to WaitFlag: assumed",
                                    assumed=(5, 60)),
        "kfc_message_us": Fact(1.0, "us", "none published",
                               note="a vector core's Matmul request to the cube core and back (KFC): assumed",
                               assumed=(0.3, 3.0)),
        **{n: Fact(v, u, "none published", note=why, assumed=r) for n, (v, u, why, r) in {
            "core_dma_bytes": (64, "bytes/cycle", "what one core's DMA engines move at most, whatever share of GM "
                               "bandwidth it has: binds only when fewer than about 14 cores run", (32, 128)),
            "cube_dma_bytes": (128, "bytes/cycle", "what one cube core's MTE2 moves into L1 at most: at the tiling "
                               "CANN picks for 4096^3 the published 89% of peak needs about 96 B/cycle "
                               "(bench/bench_chip.py)", (64, 256)),
            "dma_latency_cycles": (500, "cycles", "a copy's completion after its last byte (GM round trip)",
                                   (200, 1000)),
            "vec_issue_cycles": (8, "cycles", "a vector instruction's fixed cost before its first repeat", (2, 20)),
            "vec_slow_repeat_cycles": (2, "cycles", "one repeat of Exp, Ln, Sqrt, Rsqrt, Div or Reciprocal", (1, 4)),
            "scalar_op_cycles": (2, "cycles", "one scalar access of UB or GM", (1, 10)),
            "mte1_bytes_per_cycle": (256, "bytes/cycle", "L1 -> L0A/L0B", (128, 512)),
            "fix_bytes_per_cycle": (128, "bytes/cycle", "L0C out through the fixpipe, before the GM share", (64, 256)),
        }.items()},
        "sync_all_us": Fact(1.0, "us", "none published",
                            note="SyncAll's hard sync (FFTS cross-core flags): the last core's arrival to every "
                                 "core's release, assumed", assumed=(0.3, 3.0)),
        "mix_launch_us": Fact(3.0, "us", CATLASS_MIX,
                              note="Whenever a MIX kernel is launched, it incurs a deterministic latency of roughly "
                                   "1-5 us: added to the launch of a fused cube+vector kernel", assumed=(1.0, 5.0)),
        "matmul_efficiency": Fact(0.889, "fraction", "zzc0721/torch-performance-test-data issue 109 (GitHub)",
                                  note="torch_npu's fp16 MatMul at 4096^3 on 910B2: 314.5 of 353.9 TFLOPS; the "
                                       "unfused MatMul nodes are costed at this fraction of the cube peak"),
    },
    "Ascend310P": {
        "clock": Fact(1.08e9, "Hz", "Atlas 300I Pro datasheet (AI Core frequency)",
                      note="vendor product page; not in the open sources", assumed=(1.0e9, 1.08e9)),
        "ai_cores": Fact(8, "cores", FACTS_15, note="8 AI cores with cube and vector coupled: one core, one UB"),
        "gm_bandwidth": Fact(204.8e9, "bytes/s", "Atlas 300I Pro datasheet (LPDDR4X 204.8 GB/s)",
                             note="press reports of the Atlas 300I Duo give 408 GB/s for its two chips",
                             assumed=(180e9, 204.8e9)),
        "vector_repeat_bytes": Fact(256, "bytes", GUIDE_VECTOR, quote="单次迭代固定处理32B × 8 block = 256B数据"),
        "ub_bytes": Fact(256 * 1024, "bytes", FACTS_15, note="UB 256 KB; the host tiling sees the whole of it"),
        "l1_bytes": Fact(1024 * 1024, "bytes", FACTS_15, note="L1 1 MB (ini-derived, third-party)"),
        "l0c_bytes": Fact(256 * 1024, "bytes", FACTS_15, note="L0C 256 KB (ini-derived, third-party)"),
        "launch_us": Fact(10.0, "us", "none published for 310P", note="assumed, as on 910B", assumed=(3.0, 21.0)),
        "cube_fp16_flops": Fact(70e12, "FLOP/s", "Atlas 300I Pro datasheet (70 TFLOPS FP16)",
                                note="8 AI cores x 16x16x16 MACs x 2 x 1.08 GHz = 70.8T: the clock agrees",
                                assumed=(60e12, 70.8e12)),
        "vector_fp16_elems": Fact(8 * 128 * 1.08e9, "elements/s", "derived",
                                  note="8 AI cores x one 256-byte repeat (128 fp16 lanes) per cycle x 1.08 GHz"),
        "matmul_efficiency": Fact(0.80, "fraction", "none published for 310P",
                                  note="assumed below 910B's published 0.889", assumed=(0.6, 0.9)),
    },
}

#: The 910B assumptions the emulator's timing model shares on 310P (nobody publishes either SoC's).
SHARED_ASSUMPTIONS = ("v_to_s_drain_cycles", "flag_latency_cycles", "core_dma_bytes", "cube_dma_bytes",
                      "dma_latency_cycles",
                      "vec_issue_cycles", "vec_slow_repeat_cycles", "scalar_op_cycles", "mte1_bytes_per_cycle",
                      "fix_bytes_per_cycle")


def fact(soc: str, name: str) -> float:
    """The value of one constant."""
    return FACTS[soc][name].value


def value(soc: str, name: str, overrides: dict[str, float] | None = None) -> float:
    """A constant as an estimate uses it: an override (an assumption moved within its range, for the tests that
    show a decision holds across it), the SoC's own figure, or the 910B assumption both SoCs share."""
    if overrides and name in overrides:
        return overrides[name]
    if name in FACTS[soc]:
        return FACTS[soc][name].value
    if name in SHARED_ASSUMPTIONS:
        return FACTS["Ascend910B"][name].value
    raise KeyError(f"{soc} has no constant {name!r}")


def emulator_table(soc: str, overrides: dict[str, float] | None = None) -> dict[str, float]:
    """The emulator timing model's constants (``TimingConsts`` in ``emu_runtime.h``) from this table."""
    v = functools.partial(value, soc, overrides=overrides)
    coupled = soc == "Ascend310P"
    cores = v("ai_cores") if coupled else v("vector_cores")
    return {
        "clock_hz": v("clock"), "gm_bytes_per_s": v("gm_bandwidth"),
        "l2_bytes_per_s": 0 if coupled else v("l2_bandwidth"), "l2_bytes": 0 if coupled else v("l2_bytes"),
        "core_dma_bytes": v("core_dma_bytes"), "cube_dma_bytes": v("cube_dma_bytes"),
        "dma_latency": v("dma_latency_cycles"),
        "vec_issue": v("vec_issue_cycles"), "vec_repeat": 1, "vec_slow_repeat": v("vec_slow_repeat_cycles"),
        "scalar_op": v("scalar_op_cycles"), "dispatch": 1, "v_to_s": v("v_to_s_drain_cycles"),
        "flag": v("flag_latency_cycles"), "kfc": 0 if coupled else v("kfc_message_us") * 1e-6 * v("clock"),
        "cube_macs": 16 ** 3, "mte1_bytes": v("mte1_bytes_per_cycle"), "fix_bytes": v("fix_bytes_per_cycle"),
        "cores": cores, "cube_cores": cores if coupled else v("cube_cores"), "coupled": 1 if coupled else 0,
        "sync_all": 0 if coupled else v("sync_all_us") * 1e-6 * v("clock"),  # (310P: no hard SyncAll)
    }


#: Which end of each range is the slow end for a fused kernel against its unfused nodes: a launch saved is worth
#: least at "low", a latency costs most at "high"; bandwidth and peaks make the unfused roofline cheapest at "high".
SLOW_END = {"launch_us": "low", "mix_launch_us": "high", "gm_bandwidth": "high", "clock": "low",
            "cube_fp16_flops": "high", "matmul_efficiency": "high", "core_dma_bytes": "low", "cube_dma_bytes": "low",
            "mte1_bytes_per_cycle": "low", "fix_bytes_per_cycle": "low"}


def corner(soc: str, slow: bool) -> dict[str, float]:
    """Every range of ``soc`` (and the assumptions it shares) at its slow end for a fused kernel (``slow``), or
    at its fast end: the corners a ship decision is checked at."""
    out = {}
    for name in {n for s, n, _ in assumptions() if s == soc} | set(SHARED_ASSUMPTIONS):
        f = FACTS[soc].get(name) or FACTS["Ascend910B"][name]
        lo, hi = f.assumed
        high = SLOW_END.get(name, "high") == "high"
        out[name] = hi if high == slow else lo
    return out


def assumptions() -> list[tuple[str, str, Fact]]:
    """Every constant given as a range: (SoC, name, fact)."""
    return [(s, n, f) for s, table in FACTS.items() for n, f in table.items() if f.assumed is not None]


__all__ = ["FACTS", "Fact", "assumptions", "corner", "emulator_table", "fact", "value"]
