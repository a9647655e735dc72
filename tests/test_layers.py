"""The fast layer holds its tests to it: a test marked ``fast`` that reaches g++ or the emulator fails (the guard in
conftest.py), wherever it runs."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from conftest import F32, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.soc import SOCS

pytestmark = pytest.mark.fast


def test_a_compiler_run_fails_a_fast_test():
    with pytest.raises(AssertionError, match="reached the emulator or g\\+\\+"):
        subprocess.run(["g++", "--version"], capture_output=True)
    assert subprocess.run(["true"]).returncode == 0  # (any other program runs)


def test_an_emulator_run_fails_a_fast_test_even_from_a_warm_cache():
    from asc_onnx.emulator.harness import run

    m = model([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])],
              [("x", F32, [4, 64])], [("y", F32, [4, 64])])
    (k,) = asc_onnx.fuse(m, options=FuseOptions(judge=False, emulate=False), validate=False).kernels
    with pytest.raises(AssertionError, match="reached the emulator"):
        run(k.ir, k.files, f"{k.op.op_type}TilingData", [np.zeros((4, 64), np.float32)], SOCS["Ascend910B"])
