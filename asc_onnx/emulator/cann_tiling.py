"""CANN's own Matmul tiling in the proof: the TCubeTiling that the open ``MultiCoreMatmulTiling``
(``asc-devkit/impl/adv_api/tiling/matmul``) computes for a generated tiling calc, so that matmul kernels are
emulated under the tiling the device's host code would hand them, not only under our own.

Enabled by the config's ``cann_source`` (:mod:`asc_onnx.config`; the command line takes ``ASC_ONNX_CANN_SOURCE``): a
folder laid out as the open CANN sources (``asc-devkit/``,
``metadef/`` and the open-header checker ``check/check.sh``, as ``../shared/ascend`` beside this repository).
Nothing of those sources is copied: their five tiling files are compiled from that folder into the cache once,
with ``cann/cann_shim.cpp`` standing in for the libraries that are not public (logging, TilingDef); each
generated calc is then linked into ``cann/tiling_main.cpp``, one program per calc that takes a list of shapes.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import config
from ..errors import AscOnnxError, crash_reason
from ..kernels import KernelIR, of
from ..kernels.ir import IO_TYPES
from ..soc import Soc
from .harness import _headers_digest, cache_dir

HERE = Path(__file__).resolve().parent / "cann"
SOURCES = ("matmul_tiling.cpp", "matmul_tiling_base.cpp", "matmul_tiling_algorithm.cpp", "math_util.cpp",
           "bmm_tiling.cpp")


def source_root() -> Path | None:
    """The open CANN sources the run's config names (:mod:`asc_onnx.config`), or None."""
    return config.current().cann_source


def _gen_dir() -> Path:
    """Where check.sh keeps what it generates once (its kernel_tiling.h, the include links): under our cache, handed
    to it as ASCC_GEN."""
    return cache_dir().parent / "cann-check"


def _flags(root: Path) -> list[str]:
    gen = _gen_dir()
    a, md = root / "asc-devkit", root / "metadef"
    return ["-std=c++17", "-w", "-I", str(HERE), "-I", str(root / "check" / "stubs"),
            "-isystem", str(md / "inc" / "external"), "-isystem", str(md / "inc"),
            "-isystem", str(a / "include" / "utils"), "-isystem", str(a / "include"),
            "-isystem", str(a / "include" / "adv_api"), "-isystem", str(a), "-isystem", str(gen),
            "-isystem", str(gen / "asc" / "include"), "-isystem", str(a / "impl"), "-DNO_OPERATOR_IMPL",
            "-D__NPU_ARCH__=2201"]


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little") + p)
    return h.hexdigest()[:20]


def _locked(path: Path):
    path.mkdir(parents=True, exist_ok=True)
    f = open(path.with_suffix(".lock"), "w")  # held until the build is done
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def _run(cmd: list[str], what: str, env: Mapping[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env} if env else None)
    if proc.returncode != 0:
        raise AscOnnxError(f"building CANN's Matmul tiling ({what}) failed: {proc.stderr[-800:]}")


@functools.lru_cache(maxsize=2)
def _objects(root: Path) -> list[Path]:
    """CANN's tiling objects and the shim, built once per source digest (and the sources hashed once per
    process: every tiling call asks for them)."""
    srcs = [root / "asc-devkit" / "impl" / "adv_api" / "tiling" / "matmul" / s for s in SOURCES]
    key = _digest(*(p.read_bytes() for p in srcs), (HERE / "cann_shim.cpp").read_bytes(),
                  " ".join(_flags(root)).encode())
    d = cache_dir().parent / "cann-tiling" / key
    objs = [d / (p.name + ".o") for p in srcs] + [d / "shim.o"]
    if all(o.exists() for o in objs):
        return objs
    with _locked(d):
        if all(o.exists() for o in objs):
            return objs
        # check.sh generates the kernel_tiling.h and include links the headers expect, once.
        _run(["bash", str(root / "check" / "check.sh"), str(HERE / "empty.cpp")], "check.sh",
             {"ASCC_GEN": str(_gen_dir())})
        with tempfile.TemporaryDirectory(dir=d) as tmp:
            for src, obj in zip([*srcs, HERE / "cann_shim.cpp"], objs):
                _run(["g++", *_flags(root), "-c", str(src), "-o", os.path.join(tmp, obj.name)], src.name)
            for obj in objs:
                os.replace(os.path.join(tmp, obj.name), obj)
    return objs


def bridge_objects(root: Path) -> list[Path]:
    """CANN's tiling objects with ``cann/matmul_tiling_bridge.cpp``: what a host program compiled against the
    emulator's ``tiling/tiling_api.h`` with ``-DASC_EMU_CANN_TILING`` links to get CANN's own tilings (Huawei's
    samples, run whole in ``bench/samples.py``)."""
    from . import INCLUDE_DIR

    objs = _objects(root)
    request = INCLUDE_DIR / "tiling" / "emu_tiling_request.h"
    src = HERE / "matmul_tiling_bridge.cpp"
    flags = [*_flags(root), "-include", str(request)]
    key = _digest(src.read_bytes(), request.read_bytes(), objs[0].parent.name.encode(), " ".join(flags).encode())
    obj = objs[0].parent / f"bridge-{key}.o"
    if not obj.exists():
        with _locked(obj.parent / "bridge"):
            if not obj.exists():
                with tempfile.TemporaryDirectory(dir=obj.parent) as tmp:
                    _run(["g++", *flags, "-c", str(src), "-o", os.path.join(tmp, "b.o")], src.name)
                    os.replace(os.path.join(tmp, "b.o"), obj)
    return [*objs, obj]


def tiling_program(k: KernelIR, files: Mapping[str, str], main: Path | None = None, own: bool = False) -> Path:
    """A program of one generated calc: its main the class's (``KernelClass.tiling_main``) or ``main`` (a bench's,
    with the same macros), linked with CANN's tiling from the configured sources, or with ``own`` (or none
    configured) against the emulator's own ``tiling/tiling_api.h``."""
    return _program(None if own else source_root(), k, files, main)


def _program(root: Path | None, k: KernelIR, files: Mapping[str, str], main: Path | None = None) -> Path:
    """The tiling program for one generated calc (cached by the calc's text), its main the class's
    (``KernelClass.tiling_main``) unless given: linked with CANN's tiling from ``root``, or, with ``root`` None,
    compiled against the emulator's own ``tiling/tiling_api.h``."""
    main = main or HERE / of(k).tiling_main
    from . import INCLUDE_DIR

    calc, head = f"op_host/{k.snake}_tiling_calc.h", f"op_kernel/{k.snake}_tiling.h"
    # the calc, the tiling struct and the shared host headers the calc includes
    written = [head, *sorted(rel for rel in files if rel.startswith("op_host/") and rel.endswith(".h"))]
    objs = _objects(root) if root is not None else []
    flags = _flags(root) if root is not None else ["-std=c++17", "-w", "-I", str(HERE), "-I", str(INCLUDE_DIR)]
    key = _digest(*(files[rel].encode() for rel in written), main.read_bytes(),
                  *(h.read_bytes() for h in sorted(HERE.glob("*.h"))),  # the mains' own headers (platform_in.h ...)
                  (objs[0].parent.name if objs else "own:" + _headers_digest()).encode())
    d = cache_dir().parent / "cann-tiling" / "calc" / key
    exe = d / "tiling"
    if exe.exists():
        return exe
    with _locked(d):
        if exe.exists():
            return exe
        with tempfile.TemporaryDirectory(dir=d) as tmp:
            for rel in written:
                (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / rel).write_text(files[rel])
            out = os.path.join(tmp, "tiling")
            _run(["g++", *flags, f'-DASC_CALC_HEADER="{Path(tmp) / calc}"',
                  f"-DASC_COMPUTE_TILING={k.op_type}ComputeTiling", f"-DASC_TILING_DATA={k.op_type}TilingData",
                  str(main), *map(str, objs), "-o", out], f"{k.op_type}'s tiling calc")
            os.replace(out, exe)
    return exe


def platform_line(soc: Soc) -> str:
    """The platform numbers CANN's tiling is given for ``soc``: coupled l1 l0a l0b l0c ub."""
    coupled = int(soc.npu_arch == 2002)
    return f"{coupled} {soc.l1_bytes} {soc.l0ab_bytes} {soc.l0ab_bytes} {soc.l0c_bytes} {soc.ub_bytes}"


def case_tail(soc: Soc, dtype: int, core_num: int | None = None) -> str:
    """The words a tiling program reads after a class's case (``tiling_case``): the I/O size, the float and bf16
    flags, the core count (default: the SoC's vector cores) and the platform."""
    name, size = IO_TYPES[dtype][0], IO_TYPES[dtype][1]
    cores = core_num or soc.vector_cores
    return f"{size} {int(name == 'float')} {int(name == 'bfloat16_t')} {cores} {platform_line(soc)}"


def _tilings(k: KernelIR, files: Mapping[str, str], soc: Soc, dtype: int, cases: Sequence[Sequence[int]],
             core_num: int | None, own: bool) -> list[dict[str, int] | int]:
    """Run the class's tiling program on ``cases`` (each the words its main reads before the dtype, the core count
    and the platform): the fields of each tiling it chose, or the calc's refusal code."""
    root = None if own else source_root()
    if root is None and not own:
        raise AscOnnxError("no CANN sources configured (ASC_ONNX_CANN_SOURCE on the command line, cann_source in the "
                           "options): CANN's Matmul tiling needs the open CANN sources")
    exe = _program(root, k, files)
    tail = case_tail(soc, dtype, core_num)
    lines = "".join(" ".join(map(str, case)) + f" {tail}\n" for case in cases)
    proc = subprocess.run([str(exe)], input=lines, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AscOnnxError(f"the Matmul tiling of {k.op_type} crashed, {crash_reason(proc.returncode, proc.stderr)}")
    out: list[dict[str, int] | int] = []
    for line in proc.stdout.splitlines():
        words = line.split()
        rc = int(words[1])
        out.append(rc if rc else {words[i]: int(words[i + 1]) for i in range(2, len(words), 2)})
    if len(out) != len(cases):
        raise AscOnnxError(f"the Matmul tiling of {k.op_type} answered {len(out)} of {len(cases)} shapes")
    return out


def cann_tilings(k: KernelIR, files: Mapping[str, str], soc: Soc, dtype: int,
                 shapes: Sequence[tuple[int, int, int]], core_num: int | None = None, own: bool = False
                 ) -> list[dict[str, int] | int]:
    """A matmul kernel: CANN's TCubeTiling for each (M, N, K), as ``<op>ComputeTiling`` fills it with CANN's
    MultiCoreMatmulTiling (so with the generated calc's caps and corrections), or the calc's refusal code;
    ``own``: the same with the emulator's own MultiCoreMatmulTiling, for comparison."""
    return _tilings(k, files, soc, dtype, [list(s) for s in shapes], core_num, own)


def tilings_for(k: KernelIR, files: Mapping[str, str], soc: Soc, dtype: int,
                shapes: Sequence[Sequence[Sequence[int]]], core_num: int | None = None, own: bool = False
                ) -> list[dict[str, int] | int]:
    """CANN's tilings of a kernel with Matmul objects for inputs of each list of ``shapes`` (the class's driver
    turns them into its tiling program's case: ``tiling_case``), or the calc's refusal code."""
    case = of(k).driver.tiling_case
    return _tilings(k, files, soc, dtype, [case(k, s) for s in shapes], core_num, own)


def for_inputs(ir: KernelIR, files: Mapping[str, str], soc: Soc, inputs: Sequence[object],
               core_num: int | None = None) -> dict[str, int] | int | None:
    """CANN's tiling for a kernel with Matmul objects run on ``inputs``, its refusal code, or None where the class
    has no tiling program or the open CANN sources are not at hand."""
    if of(ir).tiling_main is None or source_root() is None:
        return None
    from ..dtypes import onnx_type

    return tilings_for(ir, files, soc, onnx_type(inputs[0]), [[list(a.shape) for a in inputs]], core_num)[0]
