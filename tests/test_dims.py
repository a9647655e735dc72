"""Dynamic dims have roles: every exporter's spelling of a dim is named and given a role from the graph's structure,
the judge sweeps each role at its own values, expressions of the input dims are computed, and --input-shape fixes any
dynamic dim, a declared -1 included, with kernel support decided at the dims it gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import F32, const, model
from onnx import helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.cli import main
from asc_onnx.dims import DECODE_PAST, SWEEP, evaluate, name_input_dims, roles, show, sweep
from asc_onnx.load import load

MODELS = Path(__file__).resolve().parent.parent / "models"

#: Every fixture's dynamic dims and the role each must get (dims spelled by torch, dynamo, paddle2onnx, tf2onnx and a
#: declared -1, named at load where the exporter gave no name).
FIXTURE_ROLES = {
    "bert_fp16_opset14_legacy": {"batch": "batch", "seq": "sequence"},
    "bert_tiny_dynamo": {"batch": "batch"},
    "bert_tiny_legacy": {"batch": "batch", "seq": "sequence"},
    "bert_quant_dynamic": {"batch": "batch", "seq": "sequence"},
    "bert_quant_qdq": {"batch": "batch", "seq": "sequence"},
    "clip_text_tiny_legacy": {"batch": "batch"},
    "cnn_silu_dynamo": {"batch": "batch"},
    "cnn_silu_dynamo_fp16": {"batch": "batch"},
    "cnn_silu_legacy": {"batch": "batch"},
    "cnn_silu_legacy_fp16": {"batch": "batch"},
    "cnn_dynamic_hw_legacy": {"batch": "batch", "height": "spatial", "width": "spatial"},
    "cnn_dynamic_hw_dynamo": {"s77": "batch", "s53": "spatial", "s0": "spatial"},
    "cnn_paddle_dims_legacy": {"p2o.DynamicDimension.0": "batch", "images_dim2": "spatial",
                               "images_dim3": "spatial"},
    "cnn_unk_dims_legacy": {"unk__214": "batch", "unk__215": "spatial", "unk__216": "spatial"},
    "cnn_minus1_dims_legacy": {"images_dim0": "batch"},
    "gpt2_tiny_dynamo": {"batch": "batch"},
    "gpt2_tiny_legacy": {"batch": "batch", "seq": "sequence"},
    "if_rate_legacy": {"batch": "batch", "frames": "sequence"},
    "levit_tiny_legacy": {"batch": "batch"},
    "llama_causal_fp16_mask_legacy": {"batch": "batch", "seq": "sequence"},
    "llama_decode_legacy": {"batch": "batch", "past": "past"},
    "llama_sdpa_legacy": {"batch": "batch", "seq": "sequence"},
    "llama_tiny_dynamo": {"batch": "batch"},
    "llama_tiny_dynamo_fp16": {"batch": "batch"},
    "llama_tiny_legacy": {"batch": "batch", "seq": "sequence"},
    "llama_tiny_legacy_fp16": {"batch": "batch", "seq": "sequence"},
    "phi3_tiny_legacy": {"batch": "batch", "seq": "sequence"},
    "qwen2_tiny_dynamo": {"batch": "batch"},
    "qwen2_tiny_legacy": {"batch": "batch", "seq": "sequence"},
    "sdpa_bool_mask_dynamo": {"seq": "sequence"},
    "vit_tiny_dynamo": {"batch": "batch"},
    "vit_tiny_legacy": {"batch": "batch"},
}


@pytest.mark.fast
def test_every_fixture_is_listed():
    assert {p.stem for p in MODELS.glob("*.onnx")} == set(FIXTURE_ROLES)


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(FIXTURE_ROLES))
def test_the_dim_roles_of_every_fixture(name):
    m = onnx.load(str(MODELS / f"{name}.onnx"), load_external_data=False)
    name_input_dims(m)
    found = roles(m)
    assert {n: r.role for n, r in found.items()} == FIXTURE_ROLES[name]
    corners = sweep(m, {})
    if not found:
        assert corners == [{}]
        return
    roles_ = FIXTURE_ROLES[name]
    # every role small, every role large, then batch 1 with the rest large and batch 8 with the rest small, and
    # decode (one query against DECODE_PAST cached keys) where there is a past-KV input; no binding twice
    assert corners[:2] == [{n: SWEEP[r][c] for n, r in roles_.items()} for c in (0, 1)]
    cross = [{n: SWEEP[r][b if r == "batch" else x] for n, r in roles_.items()} for b, x in ((0, 1), (1, 0))]
    assert all(c in corners for c in cross)
    assert len(corners) == len({tuple(sorted(c.items())) for c in corners})
    past = [n for n, r in roles_.items() if r == "past"]
    assert bool(past) == any(c.get(past[0]) == DECODE_PAST[-1] for c in corners) if past else True


@pytest.mark.fast
def test_inspect_lists_the_roles(capsys):
    assert main(["inspect", "-q", str(MODELS / "cnn_unk_dims_legacy.onnx")]) == 0
    text = capsys.readouterr().out
    assert "'unk__214' in images[0]: batch (1 and 8)" in text
    assert "'unk__215' in images[2]: spatial (224 and 640)" in text
    assert main(["inspect", "-q", "--json", str(MODELS / "llama_decode_legacy.onnx")]) == 0
    dims = {d["name"]: d for d in json.loads(capsys.readouterr().out)["dims"]}
    assert dims["past"]["role"] == "past" and dims["past"]["sweep"] == list(SWEEP["past"])


@pytest.mark.fast
def test_names_say_what_the_structure_does_not():
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    m = model(nodes, [("x", F32, ["N", "seq_len", "hidden"])], [("y", F32, ["N", "seq_len", "hidden"])])
    found = roles(m)
    assert (found["N"].role, found["seq_len"].role, found["hidden"].role) == ("batch", "sequence", "other")


@pytest.mark.fast
def test_unnamed_dims_get_names_of_their_own_and_the_callers_model_is_untouched():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [("x", F32, [-1, "?", "?"])], [("y", F32, [-1, "?", "?"])])
    before = m.SerializeToString()
    loaded = load(m, shapes=False)
    assert m.SerializeToString() == before
    dims = [d.dim_param for d in loaded.model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["x_dim0", "x_dim1", "x_dim2"]  # two '?' are two dims, not one
    out = loaded.model.graph.output[0].type.tensor_type.shape.dim
    assert not any(d.HasField("dim_value") or d.dim_param for d in out)


@pytest.mark.fast
def test_expressions_of_the_input_dims_are_computed():
    b = {"p2o.DynamicDimension.1": 640, "past": 7, "s0": 10}
    assert evaluate("floor(floor(p2o.DynamicDimension.1/2 - 1/2)/2) + 1", b) == 160
    assert evaluate("past + 1", b) == 8 and evaluate("2*s0", b) == 20 and evaluate("s0", b) == 10
    assert evaluate("unk__3", b) is None and evaluate(5, b) == 5 and evaluate(None, b) is None
    assert evaluate("s01", b) is None  # a longer name is not a bound one
    assert show([1, "batch", "(floor(p2o.DynamicDimension.1/2 - 1/2) + 1)*8", None]) == \
        "[1, batch, f(p2o.DynamicDimension.1), ?]"


def _layernorm_minus1():
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1], keepdims=1),
             helper.make_node("Sub", ["x", "m"], ["c"]), helper.make_node("Mul", ["c", "c"], ["c2"]),
             helper.make_node("ReduceMean", ["c2"], ["v"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["v", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["c", "sd"], ["n"]), helper.make_node("Mul", ["n", "w"], ["nw"]),
             helper.make_node("Add", ["nw", "b"], ["y"])]
    m = model(nodes, [("x", F32, ["?", "?"])], [("y", F32, ["?", "?"])],
              [const("eps", 1e-5), const("w", np.ones(64)), const("b", np.zeros(64))], opset=13)
    for vi in (*m.graph.input, *m.graph.output):
        d = vi.type.tensor_type.shape.dim[0]
        d.Clear()
        d.dim_value = -1
    return m


def test_input_shape_fixes_a_dim_declared_minus_one(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(_layernorm_minus1(), p)
    out = tmp_path / "o"
    assert main(["fuse", str(p), "-o", str(out), "-q", "--input-shape", "x:3,64"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["input_shapes"] == {"x": [3, 64]}
    assert [o["rule"] for o in report["ops"]] == ["LayerNorm"]
    assert report["validation"]["input_shapes"] == {"x": [3, 64]}
    assert "INPUT_SHAPE='x:3,64'" in (out / "atc.sh").read_text()
    # the estimates are at the given dims only
    assert [m["binding"] for m in report["estimates"]["model"]] == [{"x_dim0": 3, "x_dim1": 64}]


def test_kernel_support_is_decided_at_the_given_dims():
    """An op the kernel cannot serve at every shape the model accepts (its input's rows may not be its output's) is
    served at the dims --input-shape gives, which atc.sh fixes, and the ATC notes say so."""
    from asc_onnx.api import plan
    from asc_onnx.package import package
    from asc_onnx.rewrite import rewrite
    from asc_onnx.soc import get_soc

    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    m = model(nodes, [("x", F32, ["N", 8])], [("y", F32, ["N", 8])])
    given = FuseOptions(judge=False, input_shapes=(("x", (4, 8)),))
    p = plan(m, given)
    r = rewrite(p.graph, p.loaded.model, p.matched.fusions, p.scopes)
    inst = r.ops[0].instances[0]
    # at the model's dynamic shapes the input's rows may differ from the output's (N against an expression of N
    # the kernel cannot prove equal): refused there; at the given dims both are 4
    symbolic = {inst.inputs[0]: ("N", 8), inst.outputs[0]: ("N*1", 8)}
    pkg = package(r, get_soc("Ascend910B"), "compat", given.shape_map, None, symbolic)
    assert [k.op.op_type for k in pkg.kernels] == ["AscSilu"] and not pkg.skipped
    note = next(n for n in pkg.atc_notes if "decided at the dims --input-shape gives" in n)
    assert "AscSilu (at the model's dynamic shapes: input x [N, 8]" in note
    res = asc_onnx.fuse(m, None, given)  # and the kernel proven at those dims
    assert res.kernels and all(c.ok for c in res.kernel_checks) and res.deployed.ok


def _branch_on_rate():
    """y = SiLU(If(rate > 0, Reshape(x, [3, 5]), x)): the then-branch fails on onnxruntime (16 elements)."""
    then = helper.make_graph([helper.make_node("Reshape", ["x", "bad"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F32, ["a", "b"])],
                             [const("bad", [3, 5], np.int64)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F32, ["a", "b"])])
    nodes = [helper.make_node("Greater", ["rate", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["h"], then_branch=then, else_branch=other),
             helper.make_node("Sigmoid", ["h"], ["s"]), helper.make_node("Mul", ["h", "s"], ["y"])]
    return model(nodes, [("x", F32, [2, 8]), ("rate", onnx.TensorProto.INT64, [])], [("y", F32, ["a", "b"])],
                 [const("zero", 0, np.int64)])


@pytest.mark.fast
def test_a_failure_of_a_model_that_branches_on_an_input_suggests_input_value(tmp_path, capsys):
    p = tmp_path / "m.onnx"
    onnx.save(_branch_on_rate(), p)
    assert main(["fuse", str(p), "-o", str(tmp_path / "a"), "-q", "--input-value", "rate:1"]) == 2
    err = capsys.readouterr().err
    assert "onnxruntime failed to run the model" in err and "--input-value rate:V" in err
    assert "\n" not in err.strip()  # onnxruntime's message whole, on the one line
    assert main(["fuse", str(p), "-o", str(tmp_path / "b"), "-q", "--input-value", "rate:0"]) == 0
