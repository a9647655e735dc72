"""Adding a kernel class is one folder and one registry line: ``tests/toyclass`` is a class the package has never
heard of, registered from here, and it goes through every stage (match, rewrite, package, the emulator, the
verification ladder) with no change to any of them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import F32, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions, kernels
from asc_onnx.api import emulate


@pytest.fixture
def toy(tmp_path):
    import toyclass

    kernels.register(toyclass.CLASS)
    rules = tmp_path / "toy_rules.py"
    rules.write_text('from asc_onnx.pattern import generic_rule\n\nRULES = [generic_rule("ToyAbs", op_name="ToyAbs", '
                     'kernel="toyabs", doc="every lone float32 Abs")]\n')
    try:
        yield rules
    finally:
        kernels.unregister("toyabs")


def test_a_class_registered_from_the_tests_runs_through_fuse_package_and_emulate(toy, tmp_path):
    m = model([helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["y"])],
              [("x", F32, [3, 1000])], [("y", F32, [3, 1000])])
    out = tmp_path / "out"
    res = asc_onnx.fuse(m, out, options=FuseOptions(judge=False, pattern_files=(str(toy),)))
    (op,) = res.ops
    assert op.kernel == "toyabs" and [n.op_type for n in op.function.node] == ["Abs"]
    assert kernels.of(res.kernels[0]).name == "toyabs"
    # The emulated kernel matches onnxruntime on the body (random inputs and the model's own activations).
    assert res.kernel_checks and all(c.ok for c in res.kernel_checks)
    assert res.validation is not None and res.validation.ok
    kernel = out / "op_package" / "op_kernel" / f"{res.kernels[0].ir.snake}.cpp"
    assert "AscendC::Abs(yLocal, xLocal, len);" in kernel.read_text()
    report = json.loads((out / "report.json").read_text())
    assert report["kernels"]["generated"][0]["input_kinds"] == ["full"]
    # A written package is emulated again from its files, through the same registry.
    checks = emulate(out)
    assert checks and all(c.ok for c in checks)


@pytest.mark.fast
def test_an_unregistered_class_is_one_clear_error(tmp_path):
    rules = tmp_path / "rules.py"
    rules.write_text('from asc_onnx.pattern import generic_rule\n\nRULES = [generic_rule("Nope", op_name="Nope", '
                     'kernel="nope", doc="")]\n')
    m = model([helper.make_node("Abs", ["x"], ["y"])], [("x", F32, [4])], [("y", F32, [4])])
    with pytest.raises(asc_onnx.AscOnnxError, match="names the kernel class 'nope'"):
        asc_onnx.fuse(m, options=FuseOptions(judge=False, pattern_files=(str(rules),)))


@pytest.mark.fast
def test_the_registry_answers_by_name_and_by_ir():
    from asc_onnx.kernels.row.lower import RowKernel

    assert kernels.of("row").ir is RowKernel
    with pytest.raises(asc_onnx.AscOnnxError, match="not generated yet"):
        kernels.of("nope")
    with pytest.raises(TypeError):
        kernels.of(np.zeros(1))
