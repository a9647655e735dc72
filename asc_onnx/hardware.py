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
    },
}


def fact(soc: str, name: str) -> float:
    """The value of one constant."""
    return FACTS[soc][name].value


def assumptions() -> list[tuple[str, str, Fact]]:
    """Every constant given as a range: (SoC, name, fact)."""
    return [(s, n, f) for s, table in FACTS.items() for n, f in table.items() if f.assumed is not None]


__all__ = ["FACTS", "Fact", "assumptions", "fact"]
