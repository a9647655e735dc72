"""Models as users bring them: odd shapes, bf16, control flow, integer inputs a model branches on, dims
the default binding cannot run. Each case is a defect a new user met, turned into a regression test."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from conftest import F32, PROGRESS, messages, model
from onnx import TensorProto, helper

import asc_onnx
from asc_onnx import FuseOptions
from asc_onnx.validate import make_inputs

NODE = helper.make_node
BF16 = TensorProto.BFLOAT16


def _silu(shape, dtype=F32):
    return model([NODE("Sigmoid", ["x"], ["s"]), NODE("Mul", ["x", "s"], ["y"])], [("x", dtype, shape)],
                 [("y", dtype, shape)])


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asc_onnx", *args], capture_output=True, text=True, timeout=300)


def test_rank0_input_fuses_and_its_kernel_runs():
    res = asc_onnx.fuse(_silu([]))
    assert [op.rule for op in res.ops] == ["SiLU"]
    assert res.kernel_checks and all(c.ok for c in res.kernel_checks), res.kernel_checks
    assert res.deployed is not None and res.deployed.ok


@pytest.mark.fast
def test_static_empty_dim_is_not_fused_and_says_why():
    res = asc_onnx.inspect(_silu([0, 8]))
    assert res.fusions == ()
    assert any("empty" in n.reason for n in res.near_misses), res.near_misses
    assert asc_onnx.fuse(_silu([0, 8])).validation.ok


def test_bf16_model_is_validated_through_an_fp32_copy(tmp_path):
    res = asc_onnx.fuse(_silu([4, 16], BF16), tmp_path / "o")
    assert res.validation.ok and "fp32 copies" in res.validation.note and "Sigmoid" in res.validation.note
    assert res.report["validation"]["outputs"][0]["rtol"] == 1e-2  # the bf16 tolerance, not fp32's
    assert res.kernel_checks and all(c.ok and c.dtype == "bfloat16_t" for c in res.kernel_checks)
    p = tmp_path / "bf16.onnx"  # and without the graph rung (it once was exit 3)
    onnx.save(_silu([4, 16], BF16), p)
    proc = _cli("fuse", str(p), "-o", str(tmp_path / "nv"), "--no-validate", "--quiet")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_input_shape_may_not_contradict_a_static_dim(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(_silu([2, 8]), p)
    proc = _cli("fuse", str(p), "-o", str(tmp_path / "o"), "--input-shape", "x:2,16")
    assert proc.returncode == 2 and "dim 1 is 16, but the model fixes it to 8" in proc.stderr, proc.stderr
    assert not (tmp_path / "o").exists()


def _reshape_model(width: int):
    """x [N, M] -> Reshape [-1, width] -> SiLU: only dims whose product ``width`` divides can run."""
    target = onnx.numpy_helper.from_array(np.array([-1, width], np.int64), "target")
    g = model([NODE("Reshape", ["x", "target"], ["r"]), NODE("Sigmoid", ["r"], ["s"]), NODE("Mul", ["r", "s"], ["y"])],
              [("x", F32, ["n", "m"])], [("y", F32, ["k", width])], [target])
    return g


@pytest.mark.fast
def test_dynamic_dims_too_small_for_the_model_are_retried_larger():
    res = asc_onnx.fuse(_reshape_model(32), options=FuseOptions(judge=False, emulate=False))
    assert res.validation.ok and dict(res.validation.input_shapes)["x"] == (32, 32)


def test_dims_no_default_fits_ask_for_input_shape(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(_reshape_model(7 * 9 * 11), p)
    proc = _cli("fuse", str(p), "-o", str(tmp_path / "o"))
    assert proc.returncode == 2 and len(messages(proc.stderr)) == 1, proc.stderr
    assert "x: [4, 4] or x: [32, 32] or x: [64, 64]" in proc.stderr and "--input-shape x:n,m" in proc.stderr
    assert "\x1b[" not in proc.stderr  # no onnxruntime colour codes before our line
    ok = _cli("fuse", str(p), "-o", str(tmp_path / "o"), "--input-shape", "x:63,11", "--no-emulate")
    assert ok.returncode == 0, ok.stderr


def _branching_model():
    """y = SiLU(x) when rate == 16000, else x: the fusable branch runs only for that input value."""
    then = helper.make_graph([NODE("Sigmoid", ["x"], ["s"]), NODE("Mul", ["x", "s"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F32, [4, 8])])
    other = helper.make_graph([NODE("Identity", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F32, [4, 8])])
    k = onnx.numpy_helper.from_array(np.array(16000, np.int64), "k")
    return model([NODE("Equal", ["rate", "k"], ["c"]), NODE("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                 [("x", F32, [4, 8]), ("rate", TensorProto.INT64, [])], [("y", F32, [4, 8])], [k])


@pytest.mark.fast
def test_input_value_sets_an_integer_input():
    m = _branching_model()
    feeds = make_inputs(m, values={"rate": (16000.0,)})
    assert feeds["rate"].dtype == np.int64 and int(feeds["rate"]) == 16000
    assert int(make_inputs(m)["rate"]) in (0, 1)


def test_ops_inside_if_branches_fuse_and_the_control_flow_stays(tmp_path):
    """A model whose fusable ops sit inside If branches (a VAD model's whole graph does): the branch is fused
    like a graph, both output models keep the If, and with --input-value the fused branch is the one run."""
    p = tmp_path / "m.onnx"
    onnx.save(_branching_model(), p)
    res = asc_onnx.fuse(str(p), tmp_path / "o", FuseOptions(judge=False, input_values=(("rate", (16000.0,)),)))
    assert [(op.rule, len(op.instances)) for op in res.ops] == [("SiLU", 1)]
    bodies = sorted((b["op"], b["body"], b["nodes"], b["fusions"]) for b in res.report["control_flow_bodies"])
    assert bodies == [("If", "else_branch", 1, 0), ("If", "then_branch", 2, 1)]
    for name in ("model.asc.onnx", "model.atc.onnx"):
        m = onnx.load(tmp_path / "o" / name)
        (if_node,) = [n for n in m.graph.node if n.op_type == "If"]
        then = next(a.g for a in if_node.attribute if a.name == "then_branch")
        assert [n.op_type for n in then.node] == ["AscSilu"], name
    assert res.validation.ok and res.kernel_checks and all(c.ok for c in res.kernel_checks)
    assert res.deployed is not None and res.deployed.ok
    proc = _cli("inspect", str(p))
    assert "then_branch: 2 nodes searched, 1 fused" in proc.stdout, proc.stdout


def test_input_value_for_a_missing_input_is_a_clean_error(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(_branching_model(), p)
    proc = _cli("fuse", str(p), "-o", str(tmp_path / "o"), "--input-value", "rat:16000")
    assert proc.returncode == 2 and "--input-value names rat" in proc.stderr, proc.stderr


def _on_terminal(*args: str) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal; its exit code and what the terminal showed."""
    import os
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "asc_onnx", *args], stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return proc.wait(timeout=300), shown.decode(errors="replace")


def test_progress_is_drawn_on_a_terminal_and_logged_elsewhere(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(_silu([4, 16]), p)
    code, shown = _on_terminal("fuse", str(p), "-o", str(tmp_path / "a"))
    assert code == 0, shown
    for stage in ("loading and inferring shapes", "matching", "emulating kernels 0/1 AscSilu",
                  "validating the rewritten model", "writing"):
        assert stage in shown, shown
    assert "\r[0:0" in shown and shown.endswith("\r")  # elapsed time; the line is cleared at the end
    code, shown = _on_terminal("fuse", str(p), "-o", str(tmp_path / "b"), "--quiet")
    assert code == 0 and shown == "", shown
    piped = _cli("fuse", str(p), "-o", str(tmp_path / "c"))
    # into a pipe or a log: progress lines only (a line per stage once the run has worked a second), no redraws
    assert piped.returncode == 0 and "\r" not in piped.stderr and not messages(piped.stderr), piped.stderr
    assert _cli("fuse", str(p), "-o", str(tmp_path / "d"), "--quiet").stderr == ""
    assert "asc-onnx build" in piped.stdout and (tmp_path / "c" / "report.html").is_file()


@pytest.mark.fast
def test_progress_into_a_log_is_a_line_per_stage(monkeypatch):
    import io

    import asc_onnx.progress as progress

    log = io.StringIO()
    monkeypatch.setattr(progress, "LOG_AFTER", 0.0)
    p = progress.Progress(log)
    for stage, done, total in [("loading and inferring shapes", 0, 0), ("matching", 0, 0),
                               ("emulating kernels", 0, 3), ("emulating kernels", 1, 3), ("writing", 0, 0)]:
        p(stage, done, total, "AscSilu" if total else "")
    p.close()
    lines = log.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == ["loading and inferring shapes", "matching",
                                                          "emulating kernels 0/3 AscSilu", "writing"]
    assert all(PROGRESS.match(line) for line in lines) and "\r" not in log.getvalue()
    monkeypatch.setattr(progress, "LOG_AFTER", 60.0)
    quick = io.StringIO()
    progress.Progress(quick)("loading and inferring shapes")
    assert quick.getvalue() == ""  # a run over within LOG_AFTER prints only its result


@pytest.mark.fast
def test_tf2onnx_and_paddle_forms_fuse():
    c = lambda n, v: onnx.numpy_helper.from_array(np.array(v, np.float32), n)  # noqa: E731
    tf_gelu = model([NODE("Mul", ["x", "c0"], ["a"]), NODE("Mul", ["x", "a"], ["b"]), NODE("Mul", ["x", "b"], ["cube"]),
                     NODE("Add", ["x", "cube"], ["inner"]), NODE("Mul", ["inner", "k"], ["t0"]),
                     NODE("Tanh", ["t0"], ["t"]), NODE("Add", ["t", "one"], ["t1"]), NODE("Mul", ["x", "t1"], ["t2"]),
                     NODE("Mul", ["t2", "half"], ["y"])], [("x", F32, [4, 16])], [("y", F32, [4, 16])],
                    [c("c0", 0.044715), c("k", np.sqrt(2 / np.pi)), c("one", 1.0), c("half", 0.5)])
    swish = model([NODE("Mul", ["x", "one"], ["x1"]), NODE("Sigmoid", ["x1"], ["s"]), NODE("Mul", ["x", "s"], ["y"])],
                  [("x", F32, [4, 16])], [("y", F32, [4, 16])], [c("one", 1.0)])
    for m, rule in ((tf_gelu, "GELUTanh"), (swish, "SiLU")):
        res = asc_onnx.fuse(m, options=FuseOptions(judge=False, emulate=False))
        assert [op.rule for op in res.ops] == [rule] and len(res.asc_model.graph.node) == 1
        assert res.validation.ok


def _layernorm_behind_reshape():
    """x [batch, seq, 32] -> Reshape to a target computed from Shape(x) by Equal/Where (an exporter's
    ``view`` with a -1 guard) -> LayerNorm written out with axes=[2] and Pow(d, 2)."""
    i64 = lambda n, v: onnx.numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    f32 = lambda n, v: onnx.numpy_helper.from_array(np.array(v, np.float32), n)  # noqa: E731
    nodes = [NODE("Shape", ["x"], ["s"]), NODE("Equal", ["s", "m1"], ["eq"]), NODE("Where", ["eq", "one", "s"], ["t"]),
             NODE("Reshape", ["x", "t"], ["r"]),
             NODE("ReduceMean", ["r"], ["mu"], axes=[2]), NODE("Sub", ["r", "mu"], ["d"]),
             NODE("Pow", ["d", "two"], ["d2"]), NODE("ReduceMean", ["d2"], ["var"], axes=[2]),
             NODE("Add", ["var", "eps"], ["ve"]), NODE("Sqrt", ["ve"], ["sd"]), NODE("Div", ["d", "sd"], ["nrm"]),
             NODE("Mul", ["nrm", "g"], ["ng"]), NODE("Add", ["ng", "b"], ["ln"]), NODE("Transpose", ["ln"], ["y"])]
    return model(nodes, [("x", F32, ["batch", "seq", 32])], [("y", F32, [32, "seq", "batch"])],
                 [i64("m1", [-1]), i64("one", [1]), f32("two", 2.0), f32("eps", 1e-5),
                  f32("g", np.linspace(0.5, 1.5, 32)), f32("b", np.linspace(-1, 1, 32))])


def test_layernorm_behind_a_reshape_chain_fuses_with_the_dims_symbolic_inference_finds():
    from asc_onnx.load import infer_shapes, tensor_shapes

    m = _layernorm_behind_reshape()
    assert tensor_shapes(onnx.shape_inference.infer_shapes(m, data_prop=True))["r"][2] != 32  # onnx alone: lost
    assert tensor_shapes(infer_shapes(m))["r"] == ("batch", "seq", 32)  # symbolic: the input's own dims
    res = asc_onnx.fuse(m, options=FuseOptions(judge=False))
    assert [op.rule for op in res.ops] == ["LayerNorm"], res.near_misses
    assert res.ops[0].instances[0].input_shapes[0] == ("batch", "seq", 32)
    assert res.validation.ok and res.deployed.ok and all(c.ok for c in res.kernel_checks)


@pytest.mark.fast
def test_near_misses_name_an_unknown_rank_as_the_cause(monkeypatch):
    """Where no inference could follow the shapes, the reasons say that, not "needs Mul" or "not the last axis"."""
    import asc_onnx.load as load

    monkeypatch.setattr(load, "_symbolic_in_process", lambda model: None)  # the forked child inherits it
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda model, **kw: model)
    res = asc_onnx.inspect(_layernorm_behind_reshape())
    assert not res.fusions
    reasons = [n.reason for n in res.near_misses if n.rule == "LayerNorm"]
    assert reasons and all("could not follow" in r and "--input-shape may help" in r for r in reasons), reasons


def test_a_scalar_computed_by_a_node_is_a_runtime_input_of_the_fused_op():
    """A 0-d tensor made by a node (a dequantization scale) feeding a chain: a broadcast input of the fused
    op, fed at run time; its random and captured runs once crashed onnxruntime with a numpy scalar."""
    m = model([NODE("ReduceMax", ["z"], ["scale"], keepdims=0), NODE("Mul", ["x", "scale"], ["xs"]),
               NODE("Add", ["xs", "one"], ["a"]), NODE("Tanh", ["a"], ["y"])],
              [("x", F32, [4, 16]), ("z", F32, [8])], [("y", F32, [4, 16])],
              [onnx.numpy_helper.from_array(np.array(1.0, np.float32), "one")])
    res = asc_onnx.fuse(m)
    (op,) = res.ops
    assert op.instances[0].inputs == ("x", "scale") and op.instances[0].input_shapes[1] == ()
    assert [x.kind for x in res.kernels[0].ir.inputs] == ["full", "broadcast"]
    assert {c.inputs for c in res.kernel_checks} == {"random", "captured"} and all(c.ok for c in res.kernel_checks)
    assert res.validation.ok and res.deployed.ok


def test_json_output_is_strict_and_stdout_holds_nothing_else(tmp_path):
    """No NaN or Infinity (a failed comparison's error is often infinite) and no onnx-graphsurgeon log lines
    on stdout: every --json output parses with a parser that refuses them."""
    import json

    from asc_onnx.report import to_json

    def strict(text: str):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))

    assert strict(to_json({"max_abs": float("inf"), "rel": [float("nan"), -float("inf")]})) == \
        {"max_abs": "inf", "rel": ["nan", "-inf"]}
    p = tmp_path / "m.onnx"
    onnx.save(_silu([4, 16]), p)
    for args in (["inspect", "--json", str(p)], ["fuse", str(p), "-o", str(tmp_path / "o"), "--json"]):
        proc = _cli(*args)
        assert proc.returncode == 0, proc.stderr
        strict(proc.stdout)
    strict((tmp_path / "o" / "report.json").read_text())


def test_ops_inside_a_loop_body_fuse():
    """A Loop whose body applies SiLU to its carried state three times: the body is fused like a graph."""
    body = helper.make_graph(
        [NODE("Identity", ["cond_in"], ["cond_out"]), NODE("Sigmoid", ["h"], ["s"]), NODE("Mul", ["h", "s"], ["h2"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("h", F32, [4, 8])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h2", F32, [4, 8])])
    m = model([NODE("Loop", ["trips", "cond", "x"], ["y"], body=body)], [("x", F32, [4, 8])], [("y", F32, [4, 8])],
              [onnx.numpy_helper.from_array(np.array(3, np.int64), "trips"),
               onnx.numpy_helper.from_array(np.array(True), "cond")])
    res = asc_onnx.fuse(m)
    assert [(op.rule, len(op.instances)) for op in res.ops] == [("SiLU", 1)]
    loop = next(n for n in res.atc_model.graph.node if n.op_type == "Loop")
    assert "AscSilu" in [n.op_type for n in loop.attribute[0].g.node]
    assert res.validation.ok and res.deployed.ok and res.deployed.in_bodies == 1


def test_fifty_blocks_that_differ_only_in_constants_are_one_kernel():
    """The PP-OCRv4 detector's case: x*a+b blocks (folded batch norms) between other ops, each with its own
    a and b. One op type, one kernel, one compile; every node runs with its own values."""
    rng = np.random.default_rng(0)
    nodes, inits, cur = [], [], "x"
    for i in range(50):
        inits += [onnx.numpy_helper.from_array(np.array(rng.uniform(0.5, 1.5), np.float32), f"a{i}"),
                  onnx.numpy_helper.from_array(np.array(rng.uniform(-1, 1), np.float32), f"b{i}")]
        nodes += [NODE("Mul", [cur, f"a{i}"], [f"m{i}"]), NODE("Add", [f"m{i}", f"b{i}"], [f"s{i}"]),
                  NODE("Transpose", [f"s{i}"], [f"t{i}"], perm=[1, 0])]
        cur = f"t{i}"
    nodes.append(NODE("Identity", [cur], ["y"]))
    res = asc_onnx.fuse(model(nodes, [("x", F32, [16, 16])], [("y", F32, [16, 16])], inits))
    (op,) = res.ops
    assert len(op.instances) == 50 and op.params == ("p0", "p1") and len(res.kernels) == 1
    assert len({inst.params for inst in op.instances}) == 50
    assert res.validation.ok and res.deployed.ok and res.deployed.emulated_nodes == 50
    assert "td.param[0]" in next(t for p, t in res.kernels[0].files.items() if p.startswith("op_kernel/")
                                 and p.endswith(".cpp"))
    atc = [n for n in res.atc_model.graph.node if n.op_type == op.op_type]
    assert all([a.type for a in n.attribute] == [onnx.AttributeProto.INT] * 2 for n in atc)


def test_layernorms_that_differ_in_epsilon_share_one_row_kernel():
    nodes, inits = [], [onnx.numpy_helper.from_array(np.linspace(0.5, 1.5, 32).astype(np.float32), "g"),
                        onnx.numpy_helper.from_array(np.linspace(-1, 1, 32).astype(np.float32), "b")]
    cur = "x"
    for i, eps in enumerate((1e-5, 1e-6, 1e-12)):
        inits.append(onnx.numpy_helper.from_array(np.array(eps, np.float32), f"eps{i}"))
        nodes += [NODE("ReduceMean", [cur], [f"mu{i}"], axes=[-1]), NODE("Sub", [cur, f"mu{i}"], [f"d{i}"]),
                  NODE("Mul", [f"d{i}", f"d{i}"], [f"q{i}"]), NODE("ReduceMean", [f"q{i}"], [f"v{i}"], axes=[-1]),
                  NODE("Add", [f"v{i}", f"eps{i}"], [f"ve{i}"]), NODE("Sqrt", [f"ve{i}"], [f"sd{i}"]),
                  NODE("Div", [f"d{i}", f"sd{i}"], [f"n{i}"]), NODE("Mul", [f"n{i}", "g"], [f"ng{i}"]),
                  NODE("Add", [f"ng{i}", "b"], [f"l{i}"]), NODE("Transpose", [f"l{i}"], [f"t{i}"], perm=[0, 2, 1]),
                  NODE("Transpose", [f"t{i}"], [f"o{i}"], perm=[0, 2, 1])]
        cur = f"o{i}"
    nodes.append(NODE("Identity", [cur], ["y"]))
    res = asc_onnx.fuse(model(nodes, [("x", F32, [2, 8, 32])], [("y", F32, [2, 8, 32])], inits))
    (op,) = res.ops
    assert op.rule == "LayerNorm" and op.kernel == "row" and len(op.instances) == 3 and len(res.kernels) == 1
    assert sorted(i.params[0] for i in op.instances) == sorted(float(np.float32(e)) for e in (1e-5, 1e-6, 1e-12))
    assert res.validation.ok and res.deployed.ok and res.deployed.emulated_nodes == 3


@pytest.mark.fast
@pytest.mark.parametrize("fixture,alone", [
    ("llama_tiny_legacy.onnx", True), ("qwen2_tiny_legacy.onnx", True), ("gpt2_tiny_legacy.onnx", True),
    ("bert_tiny_legacy.onnx", True), ("vit_tiny_legacy.onnx", True),
    # traced at sequence 8 with the 8 baked into their masks: onnxruntime's inference merges it with ``seq``
    ("llama_causal_fp16_mask_legacy.onnx", False), ("phi3_tiny_legacy.onnx", False)])
def test_exporter_shape_arithmetic_is_followed_without_onnxruntime(monkeypatch, fixture, alone):
    """Our own pass names every dim the exporters' Reshape/Expand/Range/Slice arithmetic leaves to onnx as
    unknown, so onnxruntime's symbolic inference (seconds on a large model) is not run, and what fuses is what
    fused with it; where the pass stops short, onnxruntime's runs on what it named, with the same result."""
    from conftest import MODELS

    import asc_onnx.load as load

    def rows(res):
        return [(f["rule"], tuple(f["nodes"])) for f in res.fusions]

    with monkeypatch.context() as m:  # onnxruntime's inference alone, as before our pass existed
        m.setattr(load, "name_graph_dims", lambda model: False)
        theirs = asc_onnx.inspect(MODELS / fixture)
    ours = asc_onnx.inspect(MODELS / fixture)
    assert rows(ours) == rows(theirs) and rows(ours)

    def forbidden(model):
        raise AssertionError("onnxruntime's symbolic inference ran")

    inferred, pending = load.start_shapes(load.read_model(MODELS / fixture)[0])
    if pending is not None:
        pending.cancel()
    monkeypatch.setattr(load, "_onnxruntime_symbolic", forbidden)
    if alone:
        assert load._symbolic_in_process(inferred) is not None
    else:
        with pytest.raises(AssertionError, match="symbolic inference ran"):
            load._symbolic_in_process(inferred)
