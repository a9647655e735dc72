"""Helpers shared by the tests: small graphs built with onnx.helper and the fixture folder."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from asc_onnx.cli import use_environment

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
#: The open CANN sources beside the repository (../shared/ascend): where present, every matmul kernel the tests
#: emulate runs under the tiling CANN's own MultiCoreMatmulTiling computes (asc_onnx.emulator.cann_tiling);
#: the tests' subprocesses inherit it.
SHARED_ASCEND = ROOT.parent / "shared" / "ascend"
if (SHARED_ASCEND / "asc-devkit" / "impl" / "adv_api" / "tiling" / "matmul").is_dir():
    os.environ.setdefault("ASC_ONNX_CANN_SOURCE", str(SHARED_ASCEND))
use_environment()  # in-process runs take the same, as the command line does (nothing below it reads the environment)
if os.environ.get("ASC_ONNX_DIGESTS"):  # record what every fuse generates (tests/digests.py)
    from digests import install

    install(Path(os.environ["ASC_ONNX_DIGESTS"]))
F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16


def fuse_and_prebuild(models, runs) -> dict:
    """Each of ``models`` (key -> (model, FuseOptions)) fused once, and the programs ``runs(key, kernel)`` names
    ((dtype, SoC name) pairs) compiled in batches the suite's workers split between them (``prebuild(shared=True)``):
    a module's tests then run cached programs. A model that does not fuse keeps its error, which :func:`fused`
    raises again in its own test."""
    import asc_onnx
    from asc_onnx.emulator.harness import prebuild
    from asc_onnx.soc import SOCS

    out = {}
    for key, (m, options) in models.items():
        try:
            out[key] = asc_onnx.fuse(m, options=options, validate=False)
        except Exception as exc:  # noqa: BLE001 - raised again by the model's test
            out[key] = exc
    prebuild([(k.ir, k.files, f"{k.op.op_type}TilingData", dtype, SOCS[soc]) for key, res in out.items()
              if not isinstance(res, Exception) for k in res.kernels for dtype, soc in runs(key, k)], shared=True)
    return out


def fused(results: dict, key):
    """A result of :func:`fuse_and_prebuild`, or its model's error raised."""
    res = results[key]
    if isinstance(res, Exception):
        raise res
    return res


def const(name: str, value, dtype=np.float32) -> onnx.TensorProto:
    """An initializer."""
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    """A model from nodes; ``inputs``/``outputs`` are (name, elem_type, shape) tuples."""
    g = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


#: A progress line of a run whose stderr is a pipe or a log (asc_onnx/progress.py).
PROGRESS = re.compile(r"asc-onnx: \[\d+:\d\d\] ")


def messages(stderr: str) -> list[str]:
    """The lines of a run's stderr that are not progress lines: what it says (one line for bad input)."""
    return [line for line in stderr.strip().splitlines() if not PROGRESS.match(line)]


def rules_of(result) -> dict[str, int]:
    """Fused instance count per rule."""
    out: dict[str, int] = {}
    for op in result.ops:
        out[op.rule] = out.get(op.rule, 0) + len(op.instances)
    return out


@pytest.fixture
def models_dir() -> Path:
    return MODELS


def wait_for_staging(proc, stage: Path, seconds: float = 120.0) -> None:
    """Wait until a running ``asc-onnx fuse`` has created its staging folder (the model is planned and the
    output folder held), or has ended; the caller checks which."""
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end and not stage.exists() and proc.poll() is None:
        time.sleep(0.01)


#: The two SoCs' __NPU_ARCH__, for the emulator's hand-written C++ tests.
ARCHES = {"Ascend910B": "2201", "Ascend310P": "2002"}


def cpp_scenarios(folder: Path, name: str):
    """``tests/cpp/<name>.cpp`` built for each SoC (:func:`build_cpp_tests`), as a function (SoC, scenario) -> what
    the program prints, stripped."""
    import subprocess

    exes = build_cpp_tests(folder, name)
    return lambda soc, scenario: subprocess.run([str(exes[soc]), scenario], check=True, capture_output=True,
                                                text=True).stdout.strip()


def build_cpp_tests(folder: Path, name: str) -> dict[str, Path]:
    """``tests/cpp/<name>.cpp`` compiled against the emulator's headers for each SoC: SoC -> program."""
    import subprocess

    from asc_onnx.emulator import INCLUDE_DIR

    exes = {}
    for soc, arch in ARCHES.items():
        exes[soc] = folder / f"{name}{arch}"
        subprocess.run(["g++", "-std=c++17", "-O1", "-w", f"-D__NPU_ARCH__={arch}", "-I", str(INCLUDE_DIR),
                        str(Path(__file__).resolve().parent / "cpp" / f"{name}.cpp"), "-o", str(exes[soc])],
                       check=True, capture_output=True)
    return exes


# ------------------------------------------------------------------ the fast layer
# ``pytest -m fast`` runs the tests that need no g++ and no emulator run (render, match, rewrite, onnxruntime, the
# timing tables). Every run of a test marked ``fast``, in that layer or in the whole suite, is held to it: the
# emulator's program builds (cached or not) and CANN's tiling builds fail it. ``python3 tests/fast_layer.py`` runs
# the layer with no g++ on PATH and prints its wall time.


def _no_emulator(*args, **kwargs):
    raise AssertionError("a test marked fast reached the emulator or g++: take the kernel run out of it, or unmark it")


_POPEN_INIT = subprocess.Popen.__init__


def _popen_without_compilers(self, args, *rest, **kwargs):
    """subprocess.Popen for a fast test: a compiler run is the guard's failure, anything else runs."""
    first = args[0] if isinstance(args, (list, tuple)) and args else str(args).split(" ", 1)[0]
    if Path(str(first)).name in ("g++", "gcc", "c++", "cc", "clang++", "clang"):
        _no_emulator()
    _POPEN_INIT(self, args, *rest, **kwargs)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if item.get_closest_marker("fast") is not None:
        import asc_onnx.emulator.cann_tiling as cann_tiling
        import asc_onnx.emulator.harness as harness

        guard = pytest.MonkeyPatch()
        guard.setattr(harness, "_program", _no_emulator)
        guard.setattr(cann_tiling, "_program", _no_emulator)
        guard.setattr(cann_tiling, "_run", _no_emulator)
        guard.setattr(subprocess.Popen, "__init__", _popen_without_compilers)
        item.stash[_GUARD] = guard


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    guard = item.stash.get(_GUARD, None)
    if guard is not None:
        guard.undo()


_GUARD = pytest.StashKey[pytest.MonkeyPatch]()
