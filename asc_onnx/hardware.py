"""The hardware constants every time estimate is made from, one table per SoC, each with its source.

A figure here is either published (``source`` names the document; ``quote`` is the phrase that states it where
the document is one of the open Ascend sources beside this repository, ``../shared/ascend``, and a test checks
that the phrase is there) or an assumption nobody publishes (``assumed``: the range it may take; any decision an
estimate makes must hold across that range). Changing a figure needs a new source, and the figures that depend
on it are re-reported (the benchmarks print from this table).

Two tables: :data:`FACTS` per SoC family (what every chip of the family shares: memories, the vector repeat, the
assumptions), and :data:`CHIPS` per chip ATC names with ``--soc_version`` (cores, clock, bandwidth and the peaks
they make). :func:`value` takes a chip (``Ascend910B4``) or a family, which names the chip it stands for
(:data:`ALIASES`: ``Ascend910B`` is ``Ascend910B1``, atc.sh's default; ``Ascend310P`` is ``Ascend310P3``, one chip
of an Atlas 300I Pro card).
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
MATMUL_README = (f"{SHARED}/asc-devkit/examples/01_simd_cpp_api/05_best_practices/01_matrix_compute/"
                 "matmul_basic_api_high_performance/README.md")
MSOPMODELING = ("msopmodeling 1.0.9 (PyPI) tilesim/core/config/arc_config/<chip>/<chip>.yaml: MindStudio's op "
                "performance model, whose profiles of the same chip are the measurements the judge is fitted to")
FACTS_TABLE = "shared/reference/cann_facts.md section 13 (chip table; CANN platform ini values, S9)"
ARCH_2201 = f"{SHARED}/asc-devkit/docs/zh/guide/编程指南/高级编程/硬件实现/硬件约束/NPU架构版本2201.md"
DATA_COPY_README = (f"{SHARED}/asc-devkit/examples/01_simd_cpp_api/05_best_practices/04_memory_access/"
                    "data_copy/README_en.md")
BANK_README = (f"{SHARED}/asc-devkit/examples/01_simd_cpp_api/05_best_practices/04_memory_access/"
               "bank_conflict_ub/README_en.md")
ADD_README = (f"{SHARED}/asc-devkit/examples/01_simd_cpp_api/05_best_practices/00_vector_compute/"
              "add_high_performance/README_en.md")


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
        "vector_repeat_bytes": Fact(256, "bytes", GUIDE_VECTOR, quote="单次迭代固定处理32B × 8 block = 256B数据"),
        "cube_fp32_share": Fact(0.25, "fraction", ARCH_2201, quote="Cube计算场景float算力为half算力的1/4",
                                note="torch_npu measures 84.5 TFLOPS fp32 at 4096^3 on 910B2 against 314.5 fp16"),
        "gm_peak_bandwidth": Fact(1.8e12, "bytes/s", GUIDE_PERF, quote="GM峰值带宽约为1.8TB/s",
                                  note="the higher published figure (CATLASS uses it too)"),
        "l2_bytes": Fact(192 * 2**20, "bytes", GUIDE_L2, quote="L2 Cache大小为192MB"),
        "l2_bandwidth": Fact(5e12, "bytes/s", MATMUL_README, quote="L2Cache 峰值带宽约 5TB/s",
                             note="the read figure the best-practice samples cost re-reads at (the data_copy sample's "
                                  "is 5.2 TB/s); the L2 page gives 7 TB/s for mixed reads and writes. One figure for "
                                  "a fused kernel's re-reads and an unfused chain's intermediates alike. data_copy's "
                                  "Case 6 (906 MB of hits after 302 MB of misses, 354.56 us aiv_time) needs about 6 "
                                  "TB/s: the range",
                             assumed=(5e12, 6e12)),
        "ub_bytes": Fact(192 * 1024, "bytes", CATLASS_HW, note="UB 192KB (the host tiling sees 256 B less, KFC)"),
        "l1_bytes": Fact(512 * 1024, "bytes", CATLASS_HW, note="L1 Buffer 512KB"),
        "l0ab_bytes": Fact(64 * 1024, "bytes", CATLASS_HW, note="L0A/L0B 分别64KB"),
        "l0c_bytes": Fact(128 * 1024, "bytes", CATLASS_HW, note="L0C 128KB"),
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
                               "bandwidth it has: binds when fewer than about 14 cores run, and on writes into L2 "
                               "(its share of 5 TB/s is 56 B/cycle on 48 cores). Below 48 the Add sample's Cases 5 "
                               "and 6 fall under 0.85 of their measurements", (48, 128)),
            "cube_dma_bytes": (128, "bytes/cycle", "what one cube core's MTE2 moves into L1 at most: at the tiling "
                               "CANN picks for 4096^3 the published 89% of peak needs about 96 B/cycle "
                               "(bench/bench_chip.py); below 96 the basic-API matmul sample's two scenarios fall "
                               "under 0.92 of their measurements (0.69 at the 64 once assumed)", (96, 256)),
            "vec_slow_repeat_cycles": (2, "cycles", "one repeat of Exp, Ln, Sqrt, Rsqrt, Div or Reciprocal", (1, 4)),
            "scalar_op_cycles": (2, "cycles", "one scalar access of UB or GM", (1, 10)),
        }.items()},
        "mte1_bytes_per_cycle": Fact(115, "bytes/cycle", MATMUL_README, quote="aic_mte1_time(μs)",
                                     note="L1 -> L0A/L0B while the cube runs: Scenario 1 loads 48 KB into L0A and L0B "
                                          "per 128 x 256 x 64 step, 12288 steps on a full core, in 2538.348 us "
                                          "aic_mte1_time averaged over 24 cores of which 4 do a third of the work "
                                          "(2855 us on a full core: 114 B/cycle at 1.85 GHz); Scenario 2 is the "
                                          "check. Was 256, assumed: 2.2x the measured rate. The range keeps both "
                                          "scenarios' MTE1 within 0.85-1.15",
                                     assumed=(100, 130)),
        "mmad_issue_cycles": Fact(10, "cycles", MATMUL_README, quote="aic_mac_time(μs)",
                                  note="an Mmad instruction's fixed M time beyond its fractals: Scenario 1's 12288 "
                                       "Mmads of 128 x 256 x 64 a full core take 1.96% over the MACs (3081.664 us "
                                       "against 3022.92 averaged over the cores); Scenario 2 is the check",
                                  assumed=(2, 20)),
        "fix_bytes_per_cycle": Fact(38, "bytes/cycle", MATMUL_README, quote="aic_fixpipe_time(μs)",
                                    note="L0C read by the fixpipe (NZ2ND, F322F16) before the GM share: Scenario 1 "
                                         "writes 96 C blocks of 128 x 256 a full core in 160.405 us averaged over "
                                         "the cores (180 us on a full core: 128 KB of L0C in 3470 cycles). Was "
                                         "128, assumed. The fixpipe is issued with the last Mmad of a block and "
                                         "waits for its units: how much of the measured time is that wait msprof "
                                         "does not say (the last Mmad alone is 520 cycles), so the range reaches "
                                         "64, which both scenarios' measured task times need between the corners",
                                    assumed=(34, 64)),
        "dma_issue_cycles": Fact(13, "cycles", DATA_COPY_README, quote="blockLen=128B",
                                 note="a vector core's copy instruction holds its MTE before its bytes: Case 1 moves "
                                      "301.99 MB in 128-byte DataCopyPads on 48 AIVs in 548.161 us aiv_mte2_time, "
                                      "11.15 ns (20.6 cycles) an instruction, of which a core's share of 1.6 TB/s "
                                      "takes 7 (fitted before the sustained 1.48 and the row cost; Case 1 is now "
                                      "0.99 of its measurement). Cases 2 and 3 are the out-of-sample checks "
                                      "(tests/test_samples.py)",
                                 assumed=(11, 16)),
        "dma_latency_cycles": Fact(200, "cycles", ADD_README, quote="Multi-Core Even Splitting + Small Block Transfer",
                                   note="a copy's completion after its last byte (GM round trip): fitted to Case 2, "
                                        "whose 341 single-buffered 4096-element iterations a core expose two copy "
                                        "completions each (306.58 us; 0.99 of it at 200 cycles, 0.84 at the 500 "
                                        "once assumed); Case 3 (85 iterations) is the out-of-sample check (1.00). "
                                        "The range is what keeps Case 2 within 0.85-1.15",
                                   assumed=(100, 400)),
        "hbm_write_back_cost": Fact(1.5, "read bytes", ADD_README, quote="mixed read-write bandwidth",
                                    note="a dirty L2 line written back to HBM during the kernel costs 1.5 read "
                                         "bytes' time (the bus turns from reads to writes): fitted to Case 4, whose "
                                         "x and y evict z from L2 (264.02 us; 1.12x too fast at 1.0); out of sample "
                                         "Cases 2 and 3 at 0.95 of theirs",
                                    assumed=(1.25, 2.0)),
        "dma_row_cycles": Fact(0.43, "cycles", DATA_COPY_README, quote="blockCount=64, blockLen=128B",
                               note="each row (burst) of a copy holds its MTE this much beyond its bytes: Case 2 moves "
                                    "the 128-byte rows of Case 1 64 to an instruction, 49152 rows a core in 220.772 "
                                    "us aiv_mte2_time, 11.4 us over the bytes and instructions alone; Cases 1 and 3 "
                                    "(one and 64 rows of 2 KB) are the out-of-sample checks",
                               assumed=(0.3, 0.6)),
        "nd2nz_row_cycles": Fact(5.1, "cycles", DATA_COPY_README, quote="Nd2NzParams={nValue=64, dValue=64",
                                 note="the cube core's MTE2 turns at most one ND row into NZ per 5.1 cycles: fitted "
                                      "to the GM -> L1 Case 1 (128-byte rows, 98304 a core in 283.508 us "
                                      "aic_mte2_time, 5.3 cycles a row with the copy instructions); Case 2's "
                                      "512-byte rows are bandwidth-bound (the out-of-sample check); out of sample "
                                      "too, the Matmul API sample's NORM Cases 1-3 (base tiles of 128-byte rows) "
                                      "at 0.89-1.02. Not above 5.5: at 5.6 its Case 3 falls to 0.85 of its "
                                      "measurement. (msprof puts those cases' MTE2 time at 3.4-3.8 cycles a row of "
                                      "L2 hits: rows from L2 may be cheaper than data_copy's from HBM, which the "
                                      "model does not tell apart)",
                                 assumed=(4.8, 5.5)),
        "vec_issue_cycles": Fact(22, "cycles", ADD_README, quote="aiv_vec_time",
                                 note="a vector instruction's fixed cost before its first repeat: fitted to Case 3 "
                                      "(85.3 Adds of 128 repeats a core, each repeat conflicting, in 12.845 us at "
                                      "1.85 GHz: 278.5 cycles an Add, 22.5 over 256); out of sample, Case 2 (341.3 "
                                      "Adds of 32+32 beats, 15.885 us) gives 22.1, Case 6 (86 conflict-free Adds "
                                      "of 127 repeats, 6.954 us) 22.6, and bank_conflict_ub's conflict-free 4096-"
                                      "float Add (2390 ticks of 50 MHz for 1000) 22-24. It was assumed 8 (2-20)",
                                 assumed=(20, 25)),
        "ub_read_conflict_beats": Fact(1.0, "cycles", BANK_README, quote="Read-read conflict",
                                       note="a repeat whose two sources read one UB bank group takes one beat more: "
                                            "4096-float Adds (64 repeats) measure 4167 against 2390 ticks without "
                                            "conflict (1.74x; 1.74x modelled with the 22-cycle issue), half the "
                                            "repeats conflicting 3584 (1.50x; 1.37x modelled); the Add sample's "
                                            "Case 5 to 6 aiv_vec_time is 1.85x",
                                       assumed=(0.75, 1.0)),
        "ub_write_conflict_beats": Fact(0.75, "cycles", BANK_README, quote="Read-write conflict",
                                        note="a repeat whose destination writes a bank a source reads elsewhere in "
                                             "the repeat: 3751 against 2389 ticks (1.57x; 1.56x modelled)",
                                        assumed=(0.6, 1.0)),
        "sync_all_us": Fact(1.0, "us", "none published",
                            note="SyncAll's hard sync (FFTS cross-core flags): the last core's arrival to every "
                                 "core's release, assumed", assumed=(0.3, 3.0)),
        "mix_launch_us": Fact(3.0, "us", CATLASS_MIX,
                              note="Whenever a MIX kernel is launched, it incurs a deterministic latency of roughly "
                                   "1-5 us: added to the launch of a fused cube+vector kernel", assumed=(1.0, 5.0)),
    },
    "Ascend310P": {
        "clock": Fact(1.08e9, "Hz", "Atlas 300I Pro datasheet (AI Core frequency)",
                      note="vendor product page; not in the open sources", assumed=(1.0e9, 1.08e9)),
        "ai_cores": Fact(8, "cores", FACTS_15, note="8 AI cores with cube and vector coupled: one core, one UB"),
        "gm_bandwidth": Fact(204.8e9, "bytes/s", "Atlas 300I Pro datasheet (LPDDR4X 204.8 GB/s)",
                             note="press reports of the Atlas 300I Duo give 408 GB/s for its two chips",
                             assumed=(180e9, 204.8e9)),
        "vector_repeat_bytes": Fact(256, "bytes", GUIDE_VECTOR, quote="单次迭代固定处理32B × 8 block = 256B数据"),
        "cube_fp32_share": Fact(0.25, "fraction", "none published for 310P",
                                note="NPU架构版本2002.md states none; 2201's quarter assumed", assumed=(0.25, 0.5)),
        "ub_bytes": Fact(256 * 1024, "bytes", FACTS_15, note="UB 256 KB; the host tiling sees the whole of it"),
        "l1_bytes": Fact(1024 * 1024, "bytes", FACTS_15, note="L1 1 MB (ini-derived, third-party)"),
        "l0c_bytes": Fact(256 * 1024, "bytes", FACTS_15, note="L0C 256 KB (ini-derived, third-party)"),
        "cube_fp16_flops": Fact(70e12, "FLOP/s", "Atlas 300I Pro datasheet (70 TFLOPS FP16)",
                                note="8 AI cores x 16x16x16 MACs x 2 x 1.08 GHz = 70.8T: the clock agrees",
                                assumed=(60e12, 70.8e12)),
        "vector_fp16_elems": Fact(8 * 128 * 1.08e9, "elements/s", "derived",
                                  note="8 AI cores x one 256-byte repeat (128 fp16 lanes) per cycle x 1.08 GHz"),
    },
}

@dataclass(frozen=True)
class Chip:
    """One chip ATC names with ``--soc_version``: its family (the kernels' code path) and the figures of its own
    (cores, clock, bandwidth and the peaks they make); everything else is its family's."""

    name: str
    family: str
    facts: dict[str, Fact]
    note: str = ""


def _a2(name: str, cube: int, clock: Fact, gm: Fact, note: str) -> Chip:
    hz = clock.value
    return Chip(name, "Ascend910B", {
        "clock": clock, "cube_cores": Fact(cube, "cores", FACTS_TABLE, note=f"{cube} AIC"),
        "vector_cores": Fact(2 * cube, "cores", PLATFORM, quote="MIX_AIC_AIV_RATION_910B1 = 2",
                             note="two vector cores per cube core"),
        "cube_fp16_flops": Fact(cube * 16**3 * 2 * hz, "FLOP/s", "derived",
                                note=f"{cube} cores x 16x16x16 MACs x 2 x {hz / 1e9:g} GHz"),
        "vector_fp16_elems": Fact(2 * cube * 128 * hz, "elements/s", "derived",
                                  note=f"{2 * cube} vector cores x one 256-byte repeat x {hz / 1e9:g} GHz"),
        "gm_bandwidth": gm}, note)


_GM_A2 = Fact(1.48e12, "bytes/s", DATA_COPY_README, quote="Full matrix transferred 4 times consecutively",
              note="the sustained HBM read rate: data_copy's Case 5 reads 1207.96 MB on 48 AIVs, no L2 hits, in "
                   "816.05 us aiv_time (1.480 TB/s; its large-block Case 3 1.49 TB/s of aiv_mte2_time). The guide's "
                   "GM的带宽约为1.6TB/s and the 1.8 TB/s peak (CATLASS, the performance chapter) are not sustained: at "
                   "1.8 the Add sample's double-buffered Case 4 is estimated 1.19x faster than measured. Out of "
                   "sample, the Add sample's Cases 5 and 6 (HBM reads, L2 writes) at 0.98 and 0.97 of their "
                   "measurements (tests/test_samples.py). The range spans what the samples imply, 1.41 TB/s "
                   "(data_copy's GM -> L1, 214.519 us) to 1.49 (GM -> UB); above 1.55 Add Case 4 leaves its band",
              assumed=(1.40e12, 1.55e12))
CHIPS: dict[str, Chip] = {c.name: c for c in [
    _a2("Ascend910B1", 24, Fact(1.85e9, "Hz", MSOPMODELING, note="910B1.yaml: clock_freq: 1850"), _GM_A2,
        "atc.sh's default chip; SoftmaxV2 and SliceAiCore are profiled on it"),
    _a2("Ascend910B2", 24, Fact(1.8e9, "Hz", OPS_NN_GUIDE, note="频率 1.8 (GHz), AICore (Atlas A2)"), _GM_A2,
        "the part the published 4096^3 MatMul efficiency was measured on"),
    _a2("Ascend910B3", 20, Fact(1.8e9, "Hz", "none published", note="assumed as 910B2", assumed=(1.65e9, 1.85e9)),
        _GM_A2, "20 AI cores (cann_facts.md); no clock or profile published"),
    _a2("Ascend910B4", 20, Fact(1.65e9, "Hz", MSOPMODELING,
                                note="910B4.yaml and 910B4-1.yaml: clock_freq: 1650. cann_facts.md quotes a "
                                     "third-party ini at 1500 MHz; the profiles settle it: MatMulV3 "
                                     "4096x1536x3072 bf16 runs at 241.5 TFLOPS, 98% of a 1.5 GHz peak but 89% of "
                                     "1.65 GHz, the published efficiency"),
        Fact(1.48e12, "bytes/s", "none published for 910B4",
             note="the profiled Add [4096, 7168] bf16 moves 176 MB in 138 us (1.28 TB/s sustained): the A2 chips' "
                  "sustained figure (data_copy) is kept, so the profiles scale to them unchanged; its range reaches "
                  "down to what was measured", assumed=(1.28e12, 1.55e12)),
        "the Add, Mul, RmsNorm, LayerNormV3 and MatMul profiles ran on its 910B4-1 configuration"),
    Chip("Ascend310P3", "Ascend310P", {}, "one chip of an Atlas 300I Pro card (the Duo has two)"),
    Chip("Ascend310P1", "Ascend310P", {}, "the 310P the CANN simulator models (dav-2002); figures as 310P3, assumed"),
]}
#: A family name names the chip it stands for.
ALIASES = {"Ascend910B": "Ascend910B1", "Ascend310P": "Ascend310P3"}


def chip_of(name: str) -> str:
    """The chip a ``--soc`` name means: a chip ATC names, or a family alias (:data:`ALIASES`)."""
    chip = ALIASES.get(name, name)
    if chip not in CHIPS:
        raise KeyError(name)
    return chip


#: The 910B assumptions the emulator's timing model shares on 310P (nobody publishes either SoC's).
SHARED_ASSUMPTIONS = ("v_to_s_drain_cycles", "flag_latency_cycles", "core_dma_bytes", "cube_dma_bytes",
                      "dma_latency_cycles", "dma_issue_cycles",
                      "vec_issue_cycles", "vec_slow_repeat_cycles", "scalar_op_cycles", "mte1_bytes_per_cycle",
                      "fix_bytes_per_cycle", "mmad_issue_cycles", "nd2nz_row_cycles", "dma_row_cycles")


def fact_of(soc: str, name: str) -> Fact:
    """One constant of a chip or a family (a family stands for its alias chip): the chip's own figure, its
    family's, or the 910B assumption both families share."""
    c = CHIPS[chip_of(soc)]
    if name in c.facts:
        return c.facts[name]
    if name in FACTS[c.family]:
        return FACTS[c.family][name]
    if name in SHARED_ASSUMPTIONS:
        return FACTS["Ascend910B"][name]
    raise KeyError(f"{soc} has no constant {name!r}")


def fact(soc: str, name: str) -> float:
    """The value of one constant."""
    return fact_of(soc, name).value


def value(soc: str, name: str, overrides: dict[str, float] | None = None) -> float:
    """A constant as an estimate uses it: an override (an assumption moved within its range, for the tests that
    show a decision holds across it), else :func:`fact`."""
    if overrides and name in overrides:
        return overrides[name]
    return fact_of(soc, name).value


def emulator_table(soc: str, overrides: dict[str, float] | None = None) -> dict[str, float]:
    """The emulator timing model's constants (``TimingConsts`` in ``emu_runtime.h``) from this table."""
    v = functools.partial(value, soc, overrides=overrides)
    coupled = CHIPS[chip_of(soc)].family == "Ascend310P"
    cores = v("ai_cores") if coupled else v("vector_cores")
    return {
        "clock_hz": v("clock"), "gm_bytes_per_s": v("gm_bandwidth"),
        "l2_bytes_per_s": 0 if coupled else v("l2_bandwidth"), "l2_bytes": 0 if coupled else v("l2_bytes"),
        "core_dma_bytes": v("core_dma_bytes"), "cube_dma_bytes": v("cube_dma_bytes"),
        "dma_latency": v("dma_latency_cycles"), "dma_issue": v("dma_issue_cycles"),
        "dma_row": v("dma_row_cycles"),
        "vec_issue": v("vec_issue_cycles"), "vec_repeat": 1, "vec_slow_repeat": v("vec_slow_repeat_cycles"),
        "hbm_write_back": 1 if coupled else v("hbm_write_back_cost"), "nd2nz_row": v("nd2nz_row_cycles"),
        "ub_read_conflict": 0 if coupled else v("ub_read_conflict_beats"),
        "ub_write_conflict": 0 if coupled else v("ub_write_conflict_beats"),
        "scalar_op": v("scalar_op_cycles"), "dispatch": 1, "v_to_s": v("v_to_s_drain_cycles"),
        "flag": v("flag_latency_cycles"), "kfc": 0 if coupled else v("kfc_message_us") * 1e-6 * v("clock"),
        "cube_macs": 16 ** 3, "cube_fp32": v("cube_fp32_share"), "mte1_bytes": v("mte1_bytes_per_cycle"),
        "fix_bytes": v("fix_bytes_per_cycle"), "mmad_issue": v("mmad_issue_cycles"),
        "cores": cores, "cube_cores": cores if coupled else v("cube_cores"), "coupled": 1 if coupled else 0,
        "sync_all": 0 if coupled else v("sync_all_us") * 1e-6 * v("clock"),  # (310P: no hard SyncAll)
    }


#: Which end of each range is the slow end for a fused kernel against its unfused nodes. The sides are costed
#: differently: the fused kernel is emulated and pays a launch from the measured launch line
#: (:func:`asc_onnx.atc_cost.launch_us`, its slowest line at the slow corner); the unfused nodes are CANN kernels
#: costed from measurements (:mod:`asc_onnx.atc_cost`), at their fastest measured runs at the slow corner
#: (``UNFUSED_END`` -1; the fused launch takes the opposite end). The fused kernel's bandwidth, peaks and clock are
#: slowest at "low".
SLOW_END = {"mix_launch_us": "high", "cube_fp32_share": "low", "gm_bandwidth": "low", "l2_bandwidth": "low",
            "clock": "low",
            "cube_fp16_flops": "low", "core_dma_bytes": "low", "cube_dma_bytes": "low",
            "mte1_bytes_per_cycle": "low", "fix_bytes_per_cycle": "low"}


#: The override that puts the unfused side's measured kernels at their fastest runs (-1), their medians (0) or
#: their slowest runs (+1).
UNFUSED_END = "unfused_end"


def corner(soc: str, slow: bool) -> dict[str, float]:
    """Every range of ``soc`` (a chip or a family; and the assumptions it shares) at its slow end for a fused kernel
    (``slow``), or at its fast end: the corners a ship decision is checked at."""
    chip = chip_of(soc)
    out = {}
    names = {n for _, n, _ in assumptions_of(chip)} | set(SHARED_ASSUMPTIONS)
    for name in names:
        lo, hi = fact_of(chip, name).assumed
        high = SLOW_END.get(name, "high") == "high"
        out[name] = hi if high == slow else lo
    out[UNFUSED_END] = -1.0 if slow else 1.0
    return out


def assumptions() -> list[tuple[str, str, Fact]]:
    """Every constant given as a range: (SoC family or chip, name, fact)."""
    return ([(s, n, f) for s, table in FACTS.items() for n, f in table.items() if f.assumed is not None]
            + [(c.name, n, f) for c in CHIPS.values() for n, f in c.facts.items() if f.assumed is not None])


def assumptions_of(chip: str) -> list[tuple[str, str, Fact]]:
    """The ranges one chip's estimates take: its own and its family's."""
    c = CHIPS[chip_of(chip)]
    names = {n for n, f in c.facts.items() if f.assumed} | {n for n, f in FACTS[c.family].items() if f.assumed}
    return [(c.name, n, fact_of(c.name, n)) for n in sorted(names)]


__all__ = ["ALIASES", "CHIPS", "Chip", "FACTS", "Fact", "UNFUSED_END", "assumptions", "assumptions_of", "chip_of",
           "corner", "emulator_table", "fact", "fact_of", "value"]
