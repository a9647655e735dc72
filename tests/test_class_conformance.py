"""Every registered kernel class, the toy class of the test suite included, honours the protocols the stages call
(:mod:`asc_onnx.kernels.base`): a renderer whose banner carries model text only through the sanitizer and whose
``tiling_call`` is the one call of ``<op>ComputeTiling`` the host and the emulator's driver share, a driver whose
inputs, output shapes and byte counts agree with the op's body on onnxruntime, and a schedule that a written
package's record gives back."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import F32, model
from onnx import helper

from asc_onnx import FuseOptions, kernels
from asc_onnx.api import _candidates
from asc_onnx.kernels.base import CubeDriver, Driver, EmulationBudget, KernelClass, Renderer, Schedules
from asc_onnx.kernels.drive import concrete
from asc_onnx.plan import plan
from asc_onnx.soc import get_soc
from asc_onnx.verify_kernels import random_inputs, reference

pytestmark = pytest.mark.fast  # (no g++, no emulator run: tests/conftest.py)

MODELS = Path(__file__).resolve().parent.parent / "models"
#: Node names that would end a C++ comment and add a line of code if they reached a file raw.
HOSTILE = "n */\n#define EVIL 1\n// "


def _kernels(m: onnx.ModelProto, options: FuseOptions, soc: str = "Ascend910B") -> list:
    for i, node in enumerate(m.graph.node):
        node.name = f"{HOSTILE}{i}"
    p = plan(m, options)
    _, generated = _candidates(p, get_soc(soc), options)
    return list(generated.kernels)


@pytest.fixture(scope="module")
def by_class(tmp_path_factory):
    """One generated kernel of every registered class: LLaMA's (pointwise, row, matmul, attention) and the toy's,
    every node of both models named with text that would inject code."""
    import toyclass

    kernels.register(toyclass.CLASS)
    rules = tmp_path_factory.mktemp("toy") / "toy_rules.py"
    rules.write_text('from asc_onnx.pattern import generic_rule\n\nRULES = [generic_rule("ToyAbs", op_name="ToyAbs", '
                     'kernel="toyabs", doc="every lone float32 Abs")]\n')
    try:
        found = _kernels(onnx.load(str(MODELS / "llama_tiny_dynamo.onnx")), FuseOptions())
        toy = model([helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["y"])],
                    [("x", F32, [3, 1000])], [("y", F32, [3, 1000])])
        found += _kernels(toy, FuseOptions(pattern_files=(str(rules),)))
        out = {}
        for k in found:
            out.setdefault(kernels.of(k).name, k)
        classes = dict(kernels.CLASSES)
        assert set(out) == set(classes), f"no kernel of {set(classes) - set(out)}"
        yield {name: (classes[name], k) for name, k in out.items()}
    finally:
        kernels.unregister("toyabs")


CLASS_NAMES = ["pointwise", "row", "matmul", "attention", "toyabs"]


def test_every_registered_class_is_checked(by_class):
    assert set(by_class) == set(CLASS_NAMES) | set(kernels.CLASSES)


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_roles_honour_their_protocols(by_class, name):
    cls, _ = by_class[name]
    assert isinstance(cls.render, Renderer)
    assert isinstance(cls.driver, CubeDriver if cls.tiling_main else Driver)
    assert cls.schedule is None or isinstance(cls.schedule, Schedules)
    assert cls.budget is None or isinstance(cls.budget, EmulationBudget)


def test_a_class_missing_a_member_is_refused_when_built():
    import types

    render = kernels.of("row").render
    half = types.SimpleNamespace(**{n: getattr(render, n) for n in ("REFUSALS", "kernel_source", "tiling_header")})
    with pytest.raises(TypeError, match="its render lacks headers, host_source, struct_name, tiling_calc, tiling_call"):
        KernelClass("broken", object, lambda *a: None, half, kernels.of("row").driver)


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_the_banner_takes_model_text_through_the_sanitizer(by_class, name):
    _, k = by_class[name]
    assert any("EVIL" in text for text in k.files.values())  # (the names reached the files, in comments)
    for path, text in k.files.items():
        lines = text.splitlines()
        assert "#define EVIL 1" not in lines, path
        for line in lines:
            stripped = line.strip()
            assert not stripped.startswith("#define EVIL"), (path, line)


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_tiling_call_is_the_one_call_the_host_and_the_driver_share(by_class, name):
    cls, k = by_class[name]
    arity = len(inspect.signature(cls.render.tiling_call).parameters) - 1
    call = cls.render.tiling_call(k.ir, *(f"arg{i}" for i in range(arity)))
    call = call if isinstance(call, str) else " ".join(line.strip() for line in call)
    assert call.startswith(f"{k.ir.op_type}ComputeTiling(arg0") and call.rstrip(")").endswith(f"arg{arity - 1}")
    host = k.files[f"op_host/{k.ir.snake}.cpp"]
    driver = cls.driver.main_source(k.ir, cls.render.struct_name(k.ir))
    assert f"{k.ir.op_type}ComputeTiling(" in host and f"{k.ir.op_type}ComputeTiling(" in driver
    calc = k.files[f"op_host/{k.ir.snake}_tiling_calc.h"]
    assert f"{k.ir.op_type}ComputeTiling(" in calc  # the definition the two calls reach


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_the_driver_agrees_with_the_body(by_class, name):
    cls, k = by_class[name]
    inst = k.op.instances[0]
    dtype = k.ir.dtypes[0]
    shape = concrete(inst.output_shapes[0], 4)
    inputs = random_inputs(k, dtype, shape)
    want = reference(k.op, inputs, list(inst.params) or None)
    assert [tuple(s) for s in cls.driver.output_shapes(k.ir, inputs)] == [w.shape for w in want]
    data = cls.driver.data_shape(k.ir, inputs)
    assert isinstance(data, tuple) and all(isinstance(d, (int, np.integer)) and d > 0 for d in data)
    assert cls.driver.output_bytes(k.ir, data, inputs[0].itemsize) == sum(w.nbytes for w in want)


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_the_schedule_round_trips_through_the_record(by_class, name):
    cls, k = by_class[name]
    record = cls.schedule_record(k.ir)
    if cls.schedule is None:
        assert record is None
        return
    assert cls.scheduled(k.ir, None, record) == k.ir  # what a written package reads back is what it ran
    assert type(cls.schedule.choose(k.ir, get_soc("Ascend910B"))) is type(k.ir.schedule)
