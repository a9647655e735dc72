"""The ATC model: no functions, one opset entry in compatibility mode, fused nodes in the
default domain; the custom-domain mode; opsets outside ATC's 11..18."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import F32, MODELS, const, model
from onnx import defs, helper

import asc_onnx
from asc_onnx import FuseOptions

NODE = helper.make_node


def _register(ops, domain: str, opset: int) -> list[tuple[str, int, str]]:
    done = []
    for op in ops:
        schema = defs.OpSchema(
            op.op_type, domain, opset,
            inputs=[defs.OpSchema.FormalParameter(n, f"T{i}") for i, n in enumerate(op.input_names)],
            outputs=[defs.OpSchema.FormalParameter(n, f"U{i}") for i, n in enumerate(op.output_names)],
            type_constraints=[(f"T{i}", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "")
                              for i in range(len(op.input_names))]
            + [(f"U{i}", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "")
               for i in range(len(op.output_names))],
            # the op's parameters travel as INT attributes (fp32 bits) in the ATC model
            attributes=[defs.OpSchema.Attribute(n, defs.OpSchema.AttrType.INT, "fp32 bits") for n in op.params])
        defs.register_schema(schema)
        done.append((op.op_type, opset, domain))
    return done


def test_compat_mode_single_opset_default_domain_checker_passes():
    res = asc_onnx.fuse(MODELS / "llama_tiny_dynamo.onnx", validate=False)
    atc = res.atc_model
    assert [(o.domain, o.version) for o in atc.opset_import] == [("", 18)]
    assert len(atc.functions) == 0
    fused = [n for n in atc.graph.node if n.op_type.startswith("Asc")]
    assert fused and all(n.domain == "" for n in fused)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(atc)  # unknown ops in the default domain
    done = _register(res.ops, "", 18)
    try:
        onnx.checker.check_model(atc)
    finally:
        for name, version, domain in done:
            defs.deregister_schema(name, version, domain)


def test_custom_domain_mode_keeps_the_domain():
    res = asc_onnx.fuse(MODELS / "cnn_silu_legacy.onnx", options=FuseOptions(judge=False, atc_domain_mode="custom"),
                        validate=False)
    atc = res.atc_model
    assert sorted((o.domain, o.version) for o in atc.opset_import) == [("", 17), ("asc_onnx", 1)]
    assert {n.domain for n in atc.graph.node if n.op_type.startswith("Asc")} == {"asc_onnx"}
    onnx.checker.check_model(atc)


def _silu_model(opset: int):
    return model([NODE("Sigmoid", ["x"], ["s"]), NODE("Mul", ["x", "s"], ["y"]), NODE("Relu", ["y"], ["z"])],
                 [("x", F32, [2, 8])], [("z", F32, [2, 8])], opset=opset)


def test_opset_above_18_is_converted_for_atc():
    res = asc_onnx.fuse(_silu_model(20))
    assert res.validation.ok
    assert [(o.domain, o.version) for o in res.atc_model.opset_import] == [("", 18)]
    assert any("outside ATC's range" in n for n in res.report["atc"]["notes"])
    assert [n.op_type for n in res.atc_model.graph.node] == ["AscSilu", "Relu"]


def test_opset_below_11_is_converted_for_atc():
    m = model([NODE("Sigmoid", ["x"], ["s"]), NODE("Mul", ["x", "s"], ["y"]),
               NODE("Unsqueeze", ["y"], ["z"], axes=[0])], [("x", F32, [2, 8])], [("z", F32, [1, 2, 8])], opset=10)
    res = asc_onnx.fuse(m)
    assert [(o.domain, o.version) for o in res.atc_model.opset_import] == [("", 11)]


def test_gelu_op_model_at_opset_20_fuses_bias_gelu():
    m = model([NODE("Add", ["x", "b"], ["h"]), NODE("Gelu", ["h"], ["y"])], [("x", F32, [2, 8])],
              [("y", F32, [2, 8])], [const("b", np.ones(8))], opset=20)
    res = asc_onnx.fuse(m)
    assert res.validation.ok and res.ops[0].rule == "BiasGELU"
