"""Huawei's best-practice Ascend C samples run in our emulator, built from ``../shared/ascend`` at run time and never
copied: each sample's whole program (kernel and host main) is compiled against the emulator's headers, its host
runtime calls served by ``acl/acl.h``, its kernel launches rewritten from ``kernel<<<blocks, 0, stream>>>(args)``
to ``asc_emu::Launch(kind, kernel, blocks, 0, stream)(args)`` (the one edit: ``<<<>>>`` is not C++). The kind is
the kernel's qualifier in the source (``__vector__``, ``__cube__``, ``__mix__``).

Each case is run for its timing only, at the chip's table values or a corner's, and compared with what msprof
measured on Atlas A2 in the sample's ``README_en.md`` (:data:`MEASURED`, each figure with the table it is from).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEST = Path("asc-devkit/examples/01_simd_cpp_api/05_best_practices")


def shared_root() -> Path:
    """The open CANN sources: ``ASC_ONNX_CANN_SOURCE`` or ``../shared/ascend`` beside the repository."""
    env = os.environ.get("ASC_ONNX_CANN_SOURCE")
    return Path(env).resolve() if env else ROOT.parent / "shared" / "ascend"


@dataclass(frozen=True)
class Case:
    """One measured case of a sample: how it is built and what msprof measured (us)."""

    sample: str          # folder under 05_best_practices
    source: str          # the file with main()
    case: str            # the README's name for it
    defines: tuple[str, ...]
    task_us: float       # Task Duration
    pipes: Mapping[str, float] = field(default_factory=dict)  # pipe times held to the band: aiv_vec_time as V ...
    cores: str = "vector"  # the cores it runs on: "vector" (48 AIV), "cube" (24 AIC) or "mix" (24 AI Cores)
    pipe_share: float = 1.0  # the reported pipe times over the critical core's (an average over unequal cores)
    patch: tuple[tuple[str, str], ...] = ()  # (text, replacement) in every file of the sample: what it gets wrong
    sweep: bool = True  # moved through every range end by the calibration tests (not a second run of one kernel)

    one_core: bool = False  # launched on one block (the single-core cases)
    #: How far the model's fast corner may stay above the measurement (0: not at all), for the cases where the chip
    #: beats the model's fastest: each says why in MEASURED. A ratchet: the test holds the gap, not the bare rule.
    fast_gap: float = 0.0

    @property
    def blocks(self) -> int:
        return 1 if self.one_core else 48 if self.cores == "vector" else 24


ADD = "00_vector_compute/add_high_performance"
COPY = "04_memory_access/data_copy"
MMAD = "01_matrix_compute/matmul_basic_api_high_performance"
GELU = "03_fusion_compute/matmul_gelu_high_performance"
#: What the matmul_gelu sample leaves unordered on its AIVs, which the emulator refuses (tests/test_samples.py shows
#: it does): the next block's copy into xUB (MTE2) may overwrite what the last GELU's vector instructions still read,
#: and its GELU (V) what the last copy-out (MTE3) still reads; only the AIC's slowness keeps them apart on the chip.
#: The patch adds the two flags (no time to speak of: the waits are long over).
GELU_ORDERING = (
    ("        // ---- Step 1: DataCopy GM → xUB ----\n",
     "        // ---- Step 1: DataCopy GM → xUB ----\n"
     "        AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(EVENT_ID1);\n"
     "        AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(EVENT_ID1);\n"
     "        AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(EVENT_ID1);\n"
     "        AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(EVENT_ID1);\n"),
)
MATMUL = "01_matrix_compute/matmul_high_performance"
#: What the matmul sample gets wrong: it sets B transposed at run time (SetTensorB(b, true)) on a B MatmulType whose
#: ISTRANS is false, which CANN's Matmul asserts against (matmul_tensor_info.h CheckMatrixB: "not allowed to set matrix
#: B transpose when matmul B transpose is not defined") and SetTensorB.md says loses precision. The emulator refuses it
#: (tests/test_samples.py shows it does); the patch declares the transpose, which moves the same bytes.
MATMUL_TRANS_B = (("CubeFormat::ND, BType>", "CubeFormat::ND, BType, IS_TRANS_B>"),)
#: The README's pipe times are averages over the 24 cores; 20 of them compute 2048 x 1536 of C and 4 of them
#: 2048 x 512, so the average is this share of a full core's.
MMAD_SHARE = (20 + 4 / 3) / 24
#: The measured cases (README_en.md "Performance data" tables, Atlas A2, 48 AIV, 8192 x 8192 fp16).
MEASURED: tuple[Case, ...] = (
    Case(ADD, "add.asc", "Add Case 2 (48 cores, 4096-element copies)", ("SCENARIO=2",), 306.58, {"V": 15.885}),
    Case(ADD, "add.asc", "Add Case 3 (16384-element copies)", ("SCENARIO=3",), 268.5, {"V": 12.845}),
    Case(ADD, "add.asc", "Add Case 4 (double buffer)", ("SCENARIO=4",), 264.02, {"V": 12.846}),
    Case(ADD, "add.asc", "Add Case 5 (x, y bypass L2)", ("SCENARIO=5",), 187.68, {"V": 12.846}),
    Case(ADD, "add.asc", "Add Case 6 (no UB bank conflicts)", ("SCENARIO=6",), 184.52, {"V": 6.954}),
    # data_copy README_en.md: a [12288, 12288] fp16 matrix read tile by tile with DataCopyPad into one UB buffer
    # on 48 AIV (GM -> UB), or with the ND2NZ DataCopy into one L1 buffer on 24 AIC (GM -> L1)
    Case(COPY, "data_copy.asc", "data_copy UB Case 1 (128-byte copies)", ("SCENARIO_NUM=1", "COPY_DST_UB"), 564.84,
         {"MTE2": 548.161}),
    Case(COPY, "data_copy.asc", "data_copy UB Case 2 (64 x 128-byte copies)", ("SCENARIO_NUM=2", "COPY_DST_UB"),
         233.54, {"MTE2": 220.772}),
    Case(COPY, "data_copy.asc", "data_copy UB Case 3 (64 x 2 KB copies)", ("SCENARIO_NUM=3", "COPY_DST_UB"), 215.82,
         {"MTE2": 202.657}),
    Case(COPY, "data_copy.asc", "data_copy UB Case 5 (the matrix 4 times, no L2 hits)",
         ("SCENARIO_NUM=5", "COPY_DST_UB"), 828.06, {}),
    Case(COPY, "data_copy.asc", "data_copy UB Case 6 (a quarter 4 times: 75% L2 hits)",
         ("SCENARIO_NUM=6", "COPY_DST_UB"), 365.74, {}),
    Case(COPY, "data_copy.asc", "data_copy L1 Case 1 (ND2NZ 64 x 64 tiles)", ("SCENARIO_NUM=1", "COPY_DST_L1"),
         300.7, {"MTE2": 283.508}, cores="cube"),
    Case(COPY, "data_copy.asc", "data_copy L1 Case 2 (ND2NZ 64 x 256 tiles)", ("SCENARIO_NUM=2", "COPY_DST_L1"),
         230.24, {"MTE2": 214.519}, cores="cube"),
    # matmul_basic_api_high_performance README_en.md: 8192^3 fp16 on 24 AIC through LoadData/Mmad/Fixpipe,
    # 128 x 256 x 64 base blocks, singleCoreN 1536 (the sixth column of cores has 512). Its aic_fixpipe_time is
    # not held: the fixpipe waits on the last Mmad's units inside that time (fix_bytes_per_cycle's note)
    Case(MMAD, "mmad.asc", "matmul basic API Scenario 1 (one round)", ("SCENARIO_NUM=1",), 4121.16,
         {"M": 3081.664, "MTE1": 2538.348, "MTE2": 3552.248}, cores="cube", pipe_share=MMAD_SHARE),
    Case(MMAD, "mmad.asc", "matmul basic API Scenario 2 (two rounds for L2)", ("SCENARIO_NUM=2",), 4081.64,
         {"M": 3082.158, "MTE1": 2553.064, "MTE2": 3487.068}, cores="cube", pipe_share=MMAD_SHARE, sweep=False),
    # matmul_high_performance README_en.md: 8192^3 fp16 through the Matmul API in its cube-only form (__cube__,
    # ASCENDC_CUBE_ONLY) under CANN's own host tiling (linked from ../shared/ascend), 128 x 256 x 64 base blocks.
    # Cases 1-3 (NORM, one tile of each operand in L1) are MTE2-bound by their 128-byte ND rows, and their MTE2 time
    # is not held: the model charges the serial wait for L1 (depth 1) as MTE2 time, msprof does not. Case 0 (64^3
    # blocks on one core, 759 ms) is a baseline the README itself calls not for use. The chip beats the model's fast
    # corner on Cases 1 and 3 (msprof's MTE2 time is 3.4-3.8 cycles a 128-byte row of L2 hits, where the model's
    # floor, fitted to data_copy's HBM rows, is 4.8 at its fast end) and on 7 and 8 (its M and MTE2 overlap closer
    # than the model's per-block fill and drain: 150 us beyond the MTE2 time, the model's 290)
    Case(MATMUL, "matmul.asc", "Matmul API Case 1 (one core, NORM)", ("SCENARIO_NUM=1",), 249467.08,
         {"M": 81477.188, "MTE1": 52003.703}, cores="cube", patch=MATMUL_TRANS_B, sweep=False, one_core=True,
         fast_gap=0.07),
    Case(MATMUL, "matmul.asc", "Matmul API Case 2 (2 x 12 cores, NORM)", ("SCENARIO_NUM=2",), 12541.22,
         {"M": 3462.802, "MTE1": 2260.551}, cores="cube", patch=MATMUL_TRANS_B, sweep=False),
    Case(MATMUL, "matmul.asc", "Matmul API Case 3 (4 x 6 cores, NORM)", ("SCENARIO_NUM=3",), 12283.84,
         {"M": 3394.884, "MTE1": 2166.824}, cores="cube", pipe_share=MMAD_SHARE, patch=MATMUL_TRANS_B,
         fast_gap=0.02),
    Case(MATMUL, "matmul.asc", "Matmul API Case 4 (MDL)", ("SCENARIO_NUM=4",), 5039.86,
         {"M": 3116.472, "MTE1": 2332.914, "MTE2": 4051.458}, cores="cube", pipe_share=MMAD_SHARE,
         patch=MATMUL_TRANS_B, sweep=False),
    Case(MATMUL, "matmul.asc", "Matmul API Case 5 (MDL, stepKa 8)", ("SCENARIO_NUM=5",), 4156.76,
         {"M": 3352.087, "MTE1": 2750.454, "MTE2": 3778.555}, cores="cube", pipe_share=MMAD_SHARE,
         patch=MATMUL_TRANS_B),
    Case(MATMUL, "matmul.asc", "Matmul API Case 6 (MDL, two rounds for L2)", ("SCENARIO_NUM=6",), 4088.36,
         {"M": 3254.31, "MTE1": 2680.849, "MTE2": 3625.42}, cores="cube", pipe_share=MMAD_SHARE,
         patch=MATMUL_TRANS_B, sweep=False),
    Case(MATMUL, "matmul.asc", "Matmul API Case 7 (constant tiling)", ("SCENARIO_NUM=7",), 4053.44,
         {"M": 3163.682, "MTE1": 2609.617, "MTE2": 3513.806}, cores="cube", pipe_share=MMAD_SHARE,
         patch=MATMUL_TRANS_B, sweep=False, fast_gap=0.01),
    Case(MATMUL, "matmul.asc", "Matmul API Case 8 (constant tiling, unit flags)", ("SCENARIO_NUM=8",), 4012.44,
         {"M": 3076.396, "MTE1": 2533.512, "MTE2": 3435.584}, cores="cube", pipe_share=MMAD_SHARE,
         patch=MATMUL_TRANS_B, sweep=False, fast_gap=0.02),
    # matmul_gelu_high_performance README_en.md: the same matmul, C in float, __mix__(1, 2): each AIC sets a
    # cross-core flag after its Fixpipe to GM, its two AIVs read half of the C block back each and apply GELU in place
    Case(GELU, "mmad_gelu.asc", "matmul+GELU Scenario 1 (CV fusion through GM)", ("SCENARIO_NUM=1",), 4236.944,
         {"M": 3083.235, "MTE1": 2520.852, "CUBE_MTE2": 3687.839, "V": 174.327, "MTE2": 90.315}, cores="mix",
         pipe_share=MMAD_SHARE,
         patch=GELU_ORDERING),
)

_KIND = {"__vector__": "Vector", "__cube__": "Cube"}
_QUALIFIED = re.compile(r"(?:__global__\s+(__vector__|__cube__|__mix__\([^)]*\))|(__vector__|__cube__|__mix__\([^)]*\))"
                        r"\s+__global__)\s+void\s+(\w+)")
_LAUNCH = re.compile(r"(\b[A-Za-z_]\w*(?:<[^;<>]*(?:<[^;<>]*>[^;<>]*)*>)?)\s*<<<(.*?)>>>")


class SampleError(RuntimeError):
    """A sample that could not be built or run in the emulator."""


def kernel_kinds(text: str) -> dict[str, str]:
    """Each ``__global__`` kernel's name -> where it runs ("Vector", "Cube", "Mix")."""
    kinds = {}
    for m in _QUALIFIED.finditer(text):
        q = m.group(1) or m.group(2)
        kinds[m.group(3)] = _KIND.get(q, "Mix")
    return kinds


def rewrite_launches(text: str, kinds: Mapping[str, str]) -> str:
    """``k<<<blocks, ub, stream>>>(args)`` -> ``asc_emu::Launch(asc_emu::KernelKind::K, k, blocks, ub,
    stream)(args)``; a launch through a pointer takes the one kind every kernel of the program has."""
    def one(m: re.Match) -> str:
        name = m.group(1)
        base = name.split("<", 1)[0]
        kind = kinds.get(base)
        if kind is None:
            if len(set(kinds.values())) != 1:
                raise SampleError(f"launch of {base}: not a kernel of the program, and its kernels run on more "
                                  f"than one kind of core ({sorted(set(kinds.values()))})")
            kind = next(iter(kinds.values()))
        return f"asc_emu::Launch(asc_emu::KernelKind::{kind}, {name}, {m.group(2)})"

    out, n = _LAUNCH.subn(one, text)
    if n == 0:
        raise SampleError("no kernel launch (<<<...>>>) in the program")
    return out


def build(case: Case, cache: Path) -> Path:
    """The case's program, compiled once per source and emulator digest into ``cache``."""
    from asc_onnx.emulator import INCLUDE_DIR
    from asc_onnx.emulator.harness import _headers_digest

    folder = shared_root() / BEST / case.sample
    src = folder / case.source
    if not src.exists():
        raise SampleError(f"{src} is missing (the open CANN sources are expected at {shared_root()})")
    local = sorted(p for p in folder.iterdir() if p.suffix in (".h", ".asc"))
    texts = {p.name: p.read_text() for p in local}
    for old, new in case.patch:  # every file of the sample that has the text
        if not any(old in t for t in texts.values()):
            raise SampleError(f"{case.case}: the sample no longer has the text its patch replaces: {old.strip()!r}")
        texts = {n: t.replace(old, new) for n, t in texts.items()}
    patched = {n: t for n, t in texts.items() if n != src.name and t != (folder / n).read_text()}
    kinds = kernel_kinds("\n".join(texts.values()))
    main = rewrite_launches(texts[src.name], kinds)
    flags = ["-std=c++17", "-O1", "-w", "-D__NPU_ARCH__=2201", "-DNPU_ARCH=2201",
             *(f"-D{d}" for d in case.defines)]
    # A host that computes Matmul tilings gets CANN's own (its open algorithm, built from the same sources)
    links: list[Path] = []
    if any('"tiling/tiling_api.h"' in t for t in texts.values()):
        from asc_onnx.emulator.cann_tiling import bridge_objects

        links = bridge_objects(shared_root())
        flags.append("-DASC_EMU_CANN_TILING")
    h = hashlib.sha256(main.encode())
    for o in links:
        h.update(o.name.encode() + o.parent.name.encode())
    for p in local:
        h.update(texts[p.name].encode())
    h.update((_headers_digest() + " ".join(flags)).encode())
    exe = cache / f"{Path(case.sample).name}-{h.hexdigest()[:16]}"
    if exe.exists():
        return exe
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as d:
        cpp = Path(d) / "main.cpp"
        for name, t in patched.items():  # found before the sample's own: beside main.cpp
            (Path(d) / name).write_text(t)
        cpp.write_text(f'#include "acl/acl.h"\n#line 1 "{src.name}"\n{main}')
        proc = subprocess.run(["g++", *flags, "-I", str(INCLUDE_DIR), "-I", str(folder), str(cpp), *map(str, links),
                               "-o", str(Path(d) / "prog")], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SampleError(f"{case.case}: the sample does not compile against the emulator:\n"
                              + proc.stderr[-3000:])
        os.replace(Path(d) / "prog", exe)
    return exe


def run(exe: Path, table: Mapping[str, float], every_core: bool = False) -> dict:
    """The program's timing-only run under ``table`` (the emulator's constants): its JSON line. Only the blocks of
    the first two and last two cores run unless ``every_core`` (the samples give every core the same work)."""
    with tempfile.TemporaryDirectory(prefix="asc-sample-") as d:
        (Path(d) / "timing.txt").write_text("".join(f"{k} {v!r}\n" for k, v in table.items()))
        env = {**os.environ, "ASC_EMU_TIMING": str(Path(d) / "timing.txt"), "ASC_EMU_VALUES": "0"}
        if not every_core:
            env["ASC_EMU_CORES"] = "ends"
        proc = subprocess.run([str(exe)], cwd=d, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SampleError(f"{exe.name} printed no result (exit {proc.returncode}): {proc.stderr[-800:]}")
    info = json.loads(lines[-1])
    if "error" in info:
        raise SampleError(f"{exe.name}: {info['message']}")
    return info


#: The chip the samples were measured on: "Atlas A2" with 48 AIV and 24 AIC (910B1 or 910B2; 910B1's constants).
CHIP = "Ascend910B1"

#: The timing model's assumed constants a sample's time depends on, by the cores it runs on: each is moved alone to
#: both ends of its range by the calibration tests.
CONSTANTS = {
    "vector": ("gm_bandwidth", "l2_bandwidth", "core_dma_bytes", "dma_latency_cycles", "dma_issue_cycles",
               "dma_row_cycles", "vec_issue_cycles", "flag_latency_cycles", "ub_read_conflict_beats",
               "ub_write_conflict_beats", "hbm_write_back_cost"),
    "cube": ("gm_bandwidth", "l2_bandwidth", "cube_dma_bytes", "dma_latency_cycles", "dma_issue_cycles",
             "dma_row_cycles", "nd2nz_row_cycles", "mte1_bytes_per_cycle", "mmad_issue_cycles",
             "fix_bytes_per_cycle", "flag_latency_cycles"),
}
CONSTANTS["mix"] = CONSTANTS["cube"] + ("core_dma_bytes", "vec_issue_cycles", "vec_slow_repeat_cycles")


def estimate_us(info: Mapping, launch_us: float) -> float:
    """The task's estimate: the kernel's cycles at the table's clock plus a launch."""
    t = info["time"]
    return t["cycles"] / t["clock_hz"] * 1e6 + launch_us


def estimate(exe: Path, overrides: Mapping[str, float] | None = None, blocks: int = 48,
             every_core: bool = False) -> tuple[float, dict]:
    """A case's task estimate (us) under the chip's constants with ``overrides`` (a corner, a range end), and the
    run's JSON. The launch comes from the measured launch line (:func:`asc_onnx.atc_cost.launch_us`): its slowest
    line at the slow corner (``unfused_end`` -1), its fastest at the fast one."""
    from asc_onnx.atc_cost import launch_us
    from asc_onnx.hardware import UNFUSED_END, emulator_table

    ov = dict(overrides or {})
    end = {-1.0: 1, 1.0: -1}.get(float(ov.pop(UNFUSED_END, 0.0)), 0)
    info = run(exe, emulator_table(CHIP, ov), every_core)
    return estimate_us(info, launch_us(blocks, end)), info


def pipe_us(info: Mapping, pipe: str, share: float = 1.0) -> float:
    """One pipe's busy time on the critical core (us), times ``share`` (a case's ``pipe_share``: what the README
    reports is an average over cores that do less)."""
    t = info["time"]
    return t["busy"][pipe] / t["clock_hz"] * 1e6 * share
