"""Compile a generated kernel with its tiling arithmetic and its class's driver against the emulator headers
(g++, cached by a hash of every source), run the driver on numpy inputs, and return the outputs with the
emulator's counters (GM bytes, vector instructions by kind, UB peak, the cube's).

The files compiled are the generated files as written, unedited: what a class's driver needs (its entry point,
the tiling call, the include folder) it generates from the kernel IR. Programs are shared between kernels
whose files differ only in their names and comments: the cache key is computed from a canonical form of the
text (names replaced, comments blanked), and a program's error line names the op it was compiled for."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..cache import cache_root
from ..dtypes import np_type, onnx_type
from ..errors import AscOnnxError, crash_reason
from ..hardware import emulator_table
from ..kernels import KernelIR, of
from ..kernels.drive import ENTRY
from ..kernels.ir import IO_TYPES
from ..kernels.skeleton import tiling_guard
from ..soc import Soc
from . import INCLUDE_DIR


class EmulatorFaultError(AscOnnxError):
    """The kernel broke a hardware rule in the emulator (or its tiling refused the shape)."""


class TilingRefusedError(EmulatorFaultError):
    """The kernel's host tiling refused the shape, so the kernel never ran: a refusal with a stated reason,
    not a kernel that failed (ATC would get the same refusal from the op's TilingFunc)."""


def refusal_text(k: KernelIR, code: int) -> str:
    """The words for a non-zero return of a kernel's ``<op>ComputeTiling``, from its class's table."""
    why = of(k).refusals.get(code, "an unknown reason")
    return f"the host tiling refused the shape: {why} (reason {code})"


@dataclass(frozen=True)
class EmuResult:
    """Outputs and counters of one emulated kernel run."""

    outputs: tuple[np.ndarray, ...]
    block_dim: int
    gm_read_bytes: int
    gm_write_bytes: int
    vec_instr: Mapping[str, int]
    ub_peak_bytes: int
    scalar_instr: int = 0
    tile_length: int = 0
    vec_elems: int = 0
    cube: Mapping[str, int] | None = None  # matmul kernels: cube counters and the tiling the run used
    time: Mapping[str, object] | None = None  # the timing model's estimate (emu_runtime.h TimingJson)


def cache_dir() -> Path:
    """Where compiled emulator programs are kept (``ASC_ONNX_CACHE`` or ~/.cache/asc-onnx)."""
    return cache_root() / "emu"  # absolute: batch entries name their program by path


@functools.lru_cache(maxsize=1)
def _headers_digest() -> str:
    """A hash of every emulator header (read once per process: every program's cache key includes it)."""
    h = hashlib.sha256()
    for p in sorted(INCLUDE_DIR.rglob("*.h")):
        h.update(str(p.relative_to(INCLUDE_DIR)).encode() + p.read_bytes())
    return h.hexdigest()


#: The names a cache key is computed under: kernels whose files differ only in their op's names and comments
#: share one program (and one compile), whatever model they came from.
CANON_TYPE, CANON_SNAKE = "AscKernel", "asc_kernel"


def _key_text(k: KernelIR, text: str) -> str:
    """The canonical form of a file for the cache key only (never compiled): the op's names replaced, comments
    blanked with their lines kept, so two texts with one key have the same lines where a fault points."""
    text = text.replace(k.op_type, CANON_TYPE).replace(k.snake.upper(), CANON_SNAKE.upper())
    text = text.replace(k.snake, CANON_SNAKE)
    lines = []
    for line in text.split("\n"):
        code, sep, _ = line.partition("//")
        lines.append(code.rstrip() if sep and '"' not in code else line)
    return "\n".join(lines)


def _single_main(driver: str) -> str:
    """A driver as a program of its own."""
    return f"{driver}\nint main(int argc, char** argv) {{ return {ENTRY}(argc, argv); }}\n"


@dataclass(frozen=True)
class _Program:
    """What one emulator program is compiled from, and where the cache keeps it."""

    k: KernelIR
    struct: str
    sources: Mapping[str, str]  # the op's files the driver compiles, as written, by path relative to the op package
    defines: tuple[str, ...]  # -DDTYPE_<NAME>=<type>
    flags: tuple[str, ...]  # every flag but the defines
    target: Path

    @property
    def prog(self) -> Path:
        return self.target / "prog"

    def driver(self, prefix: str = "") -> str:
        """The class's driver for this kernel, its files under ``prefix``."""
        return of(self.k).driver.main_source(self.k, self.struct, prefix)


def _compiled(sources: Mapping[str, str]) -> dict[str, str]:
    """The files a driver compiles: the kernel, its tiling header and the tiling calc; never the host file or the
    plugin, which neither enter the program nor its cache key."""
    return {rel: text for rel, text in sources.items() if rel.startswith("op_kernel/") or rel.endswith(".h")}


def _program(k: KernelIR, sources: Mapping[str, str], struct: str, dtype: int, soc: Soc) -> _Program:
    sources = _compiled(sources)
    ctype = IO_TYPES[dtype][0]
    defines = tuple(f"-DDTYPE_{n.upper()}={ctype}" for n in k.input_names + k.outputs)
    # -O1: a cold test run is dominated by these compiles (-O1 builds a kernel ~30% faster than -O2); the
    # emulated runs stay short either way.
    flags = ("-std=c++17", "-O1", "-w", f"-D__NPU_ARCH__={soc.npu_arch}")
    pr = _Program(k, struct, sources, defines, flags, Path())
    h = hashlib.sha256()
    keyed = {_key_text(k, rel): _key_text(k, text) for rel, text in sources.items()}
    for part in [_key_text(k, pr.driver()), _headers_digest(), " ".join(flags + defines)] + \
            [keyed[key] for key in sorted(keyed)]:
        h.update(part.encode())
    return replace(pr, target=cache_dir() / h.hexdigest()[:24])


def _compile(main: str, sources: Mapping[str, str], flags: Sequence[str], dest: Path, what: str) -> None:
    """g++ on ``main`` beside ``sources`` (relative paths under the compile's include root) into ``dest``."""
    if shutil.which("g++") is None:
        raise AscOnnxError("the emulator needs g++ (not found on PATH)")
    work = Path(tempfile.mkdtemp(prefix="asc-emu-"))
    try:
        for rel, text in sources.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        (work / "main.cpp").write_text(main)
        cmd = ["g++", *flags, "-I", str(INCLUDE_DIR), "-I", str(work), str(work / "main.cpp"), "-o", str(work / "prog")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise AscOnnxError(f"g++ failed on the generated kernel {what}:\n{proc.stderr[-3000:]}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.parent / f"{dest.name}.{os.getpid()}"
        shutil.copy2(work / "prog", tmp)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _usable(prog: Path) -> bool:
    """A cached program, or a batch entry whose batch program is still there (a pruned or moved cache
    leaves entries pointing nowhere: those are rebuilt)."""
    if not prog.is_file():
        return False
    with open(prog, "rb") as f:
        head = f.read(2)
    if head != b"#!":
        return True
    target = prog.read_text().split("exec ", 1)[-1].rsplit(" ", 2)[0]
    return Path(shlex.split(target)[0]).is_file()


def build(k: KernelIR, sources: Mapping[str, str], struct: str, dtype: int, soc: Soc) -> Path:
    """Compile (or reuse) the emulator program of one kernel, dtype and SoC; returns the binary.

    Programs are cached by a hash of the canonical sources (:func:`_key_text`)."""
    pr = _program(k, sources, struct, dtype, soc)
    if not _usable(pr.prog):
        _compile(_single_main(pr.driver()), pr.sources, pr.flags + pr.defines, pr.prog, k.op_type)
    return pr.prog


#: Kernels per batch program: one g++ run instantiates the emulator's templates once for all of them, so a
#: batch costs little more than one kernel (3.35 s against 3.0 s for four pointwise kernels, measured).
BATCH = 12


def prebuild(items: Sequence[tuple[KernelIR, Mapping[str, str], str, int, Soc]], shared: bool = False) -> int:
    """Compile the programs of many (kernel, sources, struct, dtype, SoC) items in batches, before their runs.

    Each batch is one translation unit: every item's files in a folder of their own, its driver in a namespace
    of its own with its DTYPE macros defined around it; the item's cache entry becomes a two-line script that
    runs the batch program with the item's index, and its ``extern "C"`` entry is renamed for the batch (one op
    may be several items). Items already cached, matmul kernels and duplicates are skipped; a batch g++ refuses is left
    to :func:`build`, which then names the kernel. Returns how many programs the batches made.

    ``shared``: processes that prebuild the same list at once (the test suite's workers) split the work: the
    batches are made of every item, cached or not (so each process makes the same ones), a batch whose programs
    are all cached is skipped, and each of the others is compiled by whichever process takes its lock first; a
    process finds the batches another holds done on a second pass."""
    todo: dict[Path, tuple[_Program, Soc]] = {}
    for k, sources, struct, dtype, soc in items:
        if of(k).cube:
            continue
        pr = _program(k, sources, struct, dtype, soc)
        if shared or not _usable(pr.prog):
            todo.setdefault(pr.target, (pr, soc))
    made = 0
    by_soc: dict[int, list[_Program]] = {}
    for pr, soc in todo.values():
        by_soc.setdefault(soc.npu_arch, []).append(pr)
    for progs in by_soc.values():
        groups: list[list[_Program]] = []
        for pr in progs:
            group = next((g for g in groups if len(g) < BATCH), None)
            if group is None:
                groups.append(group := [])
            group.append(pr)
        busy = []
        for group in groups:
            if len(group) == 1 or all(_usable(pr.prog) for pr in group):
                continue  # build() compiles a lone program as it is
            got = _batch_locked(group, wait=not shared)
            if got is None:
                busy.append(group)  # another process is compiling it: looked at again below
            else:
                made += got
        for group in busy:
            made += _batch_locked(group, wait=True) or 0
    return made


def _batch_locked(group: Sequence[_Program], wait: bool) -> int | None:
    """:func:`_compile_batch` under the batch's lock (None: another process holds it and ``wait`` is False); 0 where
    g++ refuses the batch or another process made it meanwhile."""
    lock = cache_dir() / f"batch-{_batch_key(group)}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return None
        if all(_usable(pr.prog) for pr in group):
            return 0
        try:
            return _compile_batch(group)
        except AscOnnxError:
            return 0


def _batch_key(group: Sequence[_Program]) -> str:
    h = hashlib.sha256()
    for pr in group:
        h.update(pr.target.name.encode())
    return h.hexdigest()[:24]


def _compile_batch(group: Sequence[_Program]) -> int:
    dest = cache_dir() / f"batch-{_batch_key(group)}" / "prog"
    sources: dict[str, str] = {}
    hoisted: dict[str, None] = {'#include "kernel_operator.h"': None}
    parts: list[str] = []
    for j, pr in enumerate(group):
        for rel, text in pr.sources.items():
            # (marked: g++ takes two files of one text and time for one under #pragma once, and two items may
            # be one kernel at two dtypes)
            sources[f"k{j}/{rel}"] = f"{text}\n// (batch item {j})\n"
        driver = pr.driver(f"k{j}/")
        # The system headers of the driver and the files it compiles go before every namespace.
        for text in [driver, *pr.sources.values()]:
            for line in text.split("\n"):
                if line.startswith("#include <"):
                    hoisted.setdefault(line)
        # its DTYPE macros, and its entry renamed: an extern "C" symbol ignores the namespace, and two items may
        # be one op (the same op type at other dtypes, or other ops of one generic name)
        macros = [d[2:].split("=", 1) for d in pr.defines] + [[pr.k.snake, f"{pr.k.snake}_k{j}"]]
        parts += [*(f"#define {n} {v}" for n, v in macros), f"namespace emu_k{j} {{", driver,
                  f"}}  // namespace emu_k{j}", *(f"#undef {n}" for n, _ in macros),
                  f"#undef {tiling_guard(pr.k.snake)}"]
    calls = "\n".join(f'    if (which == "{j}") return emu_k{j}::{ENTRY}(argc - 1, argv + 1);'
                      for j in range(len(group)))
    main = "\n".join(["// asc-onnx emulator batch: one program for several kernels, chosen by argv[1].",
                      *hoisted, "#include <string>", *parts, "int main(int argc, char** argv) {",
                      "    if (argc < 2) return 2;", "    const std::string which = argv[1];", calls,
                      "    return 2;", "}", ""])
    if not dest.exists():
        _compile(main, sources, group[0].flags, dest, "batch")
    for j, pr in enumerate(group):
        pr.target.mkdir(parents=True, exist_ok=True)
        tmp = pr.target / f"prog.{os.getpid()}"
        tmp.write_text(f'#!/bin/sh\nexec {shlex.quote(str(dest))} {j} "$@"\n')
        tmp.chmod(0o755)
        os.replace(tmp, pr.prog)
    return len(group)


def run(k: KernelIR, sources: Mapping[str, str], struct: str,
        inputs: Sequence[np.ndarray], soc: Soc, core_num: int | None = None,
        cube_tiling: Mapping[str, int] | None = None, params: Sequence[float] | None = None,
        values: bool = True, timing: Mapping[str, float] | None = None, every_core: bool = False) -> EmuResult:
    """Run one kernel on ``inputs`` (all of the kernel's I/O dtype) and return outputs and counters.

    ``cube_tiling`` (matmul kernels): a TCubeTiling to run under instead of the host tiling's choice.
    ``params``: the op's parameters at the node being run (the tiling data's ``param``, as the host copies
    them from the node's attributes; by default the values the kernel was lowered with); they are data, not
    code, so every value runs the same program.

    ``values=False`` runs the kernel for its timing only: the same program, the pipes and their orderings, with no
    arithmetic, on zeros the program makes (``inputs`` may be broadcast views: only their shapes are used), and
    only the blocks of the first two and last two cores (every other core runs the blocks core 0 runs; with
    ``every_core``, every block, for traffic counters of the whole kernel); outputs come back empty. ``timing``:
    the timing model's constants (default: the SoC's row of :func:`asc_onnx.hardware.emulator_table`)."""
    params = tuple(k.params if params is None else params)
    if len(params) != k.num_params:
        raise AscOnnxError(f"{k.op_type} takes {k.num_params} parameters, {len(params)} given")
    dtypes = {onnx_type(a) for a in inputs}
    if len(dtypes) != 1:
        raise AscOnnxError(f"{k.op_type}: emulator inputs must share one dtype, got {dtypes}")
    dtype = dtypes.pop()
    prog = build(k, sources, struct, dtype, soc)
    driver = of(k).driver
    ctype, size = IO_TYPES[dtype]
    table = dict(emulator_table(soc.chip)) if timing is None else dict(timing)
    kept = None
    if not values:  # a timing-only run depends on the program, the shapes and the constants only: kept on disk
        key = json.dumps([str(prog), [list(a.shape) for a in inputs], params, core_num, sorted(table.items()),
                          sorted((cube_tiling or {}).items()), every_core])
        kept = cache_dir() / "time" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
        if kept.is_file():
            return _result(tuple(np.empty((0,)) for _ in k.outputs), json.loads(kept.read_text()))
    with tempfile.TemporaryDirectory(prefix="asc-emu-run-") as d:
        for i, a in enumerate(inputs):
            if values:
                Path(d, f"in{i}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
            else:  # timing only: the program makes zeros of this size (the arrays may be broadcast views)
                Path(d, f"in{i}.bin.size").write_text(str(a.size * a.itemsize))
        Path(d, "params.txt").write_text(" ".join(str(int(np.array(v, np.float32).view(np.uint32)))
                                                  for v in params))
        out_shapes = driver.output_shapes(k, inputs)
        args = driver.write_inputs(k, Path(d), inputs, out_shapes, soc, core_num or soc.vector_cores, size, ctype,
                                   cube_tiling)
        Path(d, "timing.txt").write_text("".join(f"{n} {v!r}\n" for n, v in table.items()))
        env = {**os.environ, "ASC_EMU_TIMING": str(Path(d, "timing.txt")), "ASC_EMU_VALUES": "1" if values else "0"}
        if not values and not every_core:  # the blocks of the first two and last two cores: the longest core
            env["ASC_EMU_CORES"] = "ends"
        proc = subprocess.run([str(prog), d, *args], capture_output=True, text=True, env=env)
        try:
            info = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            raise AscOnnxError(f"emulator run of {k.op_type} crashed, "
                               f"{crash_reason(proc.returncode, proc.stderr)}") from None
        if "error" in info:
            # A shared program names the op it was compiled for: its messages are told in this kernel's names.
            message = info["message"].replace(info["snake"], k.snake).replace(info["op_type"], k.op_type)
            refused = re.fullmatch(r"tiling refused the shape, reason (\d+)", message)
            if info["error"] == "tiling" and refused:
                raise TilingRefusedError(f"{k.op_type} on {soc.name}: {refusal_text(k, int(refused[1]))}")
            raise EmulatorFaultError(f"{k.op_type} on {soc.name}: {info['error']}: {message}")
        outs = tuple(_read(Path(d, f"out{o}.bin"), dtype, out_shapes[o]) if values else np.empty((0,))
                     for o in range(len(k.outputs)))
    info = driver.finish(k, inputs, info, size)
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_suffix(f".{os.getpid()}")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, kept)
    return _result(outs, info)


def _result(outs: tuple[np.ndarray, ...], info: Mapping[str, Any]) -> EmuResult:
    """A run's outputs and its JSON line's counters."""
    return EmuResult(outs, info["block_dim"], info["gm_read"], info["gm_write"], info["vec"], info["ub_peak"],
                     info["scalar"], info["tile_length"], info["vec_elems"], info.get("cube"), info.get("time"))


def output_shapes(k: KernelIR, inputs: Sequence[np.ndarray]) -> list[tuple[int, ...]]:
    """The shapes a run of ``k`` on ``inputs`` returns (its class's driver knows)."""
    return of(k).driver.output_shapes(k, inputs)


def _read(path: Path, dtype: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(path.read_bytes(), dtype=np_type(dtype)).reshape(shape).copy()
