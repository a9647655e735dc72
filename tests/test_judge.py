"""The judge's unfused side is what ATC would run on the chip: its passes (a closed list, by chip and shape mode),
its kernels costed from measured profiles, one L2 rule and one launch model for both sides, the chips by name,
the judged shapes by dim role, and ``asc-onnx estimate`` giving the figures ``fuse`` reports."""

from __future__ import annotations

import json

import onnx
import pytest
from conftest import MODELS
from onnx import TensorProto, helper

import asc_onnx
from asc_onnx import FuseOptions, atc_passes
from asc_onnx.atc_cost import GEMV_ROWS, cube_fit, curve, kernel_cost, launch_us, profiles
from asc_onnx.atc_passes import AtcKernel
from asc_onnx.cli import run
from asc_onnx.dims import DECODE_PAST, sweep
from asc_onnx.errors import AscOnnxError
from asc_onnx.estimate import l2_hits, static_shapes
from asc_onnx.hardware import corner, emulator_table, value
from asc_onnx.soc import get_soc

F16 = TensorProto.FLOAT16


def _kernels(nodes, shapes, family="Ascend910B", static=True, dtype=F16):
    return atc_passes.kernels(nodes, dict(shapes), {v: dtype for v in shapes}, family, static)


@pytest.mark.fast
def test_a_last_two_dims_transpose_goes_into_the_matmul_a_head_transpose_costs_a_kernel():
    shapes = {"a": (2, 4, 64, 32), "b": (2, 4, 64, 32), "bt": (2, 4, 32, 64), "s": (2, 4, 64, 64),
              "h": (2, 64, 4, 32), "hq": (2, 4, 64, 32), "o": (2, 4, 64, 64)}
    swap = helper.make_node("Transpose", ["b"], ["bt"], perm=[0, 1, 3, 2], name="t")
    mm = helper.make_node("MatMul", ["a", "bt"], ["s"], name="mm")
    ks = _kernels([swap, mm], shapes)
    assert [k.kernel for k in ks] == ["BatchMatMulV2"]
    assert ks[0].passes == ["BatchMatMulFusionPass"] and ks[0].op_types == ["Transpose", "MatMul"]
    head = helper.make_node("Transpose", ["h"], ["hq"], perm=[0, 2, 1, 3], name="head")
    mm2 = helper.make_node("MatMul", ["hq", "bt"], ["o"], name="mm2")
    ks = _kernels([head, swap, mm2], shapes)
    assert sorted(k.kernel for k in ks) == ["BatchMatMulV2", "Transpose"]
    assert next(k for k in ks if k.kernel == "Transpose").bytes == 2 * 2 * 64 * 4 * 32 * 2


def _ew_chain(n: int):
    names = [f"v{i}" for i in range(n + 1)]
    ops = ["Sigmoid", "Neg", "Exp", "Abs", "Relu", "Sqrt", "Tanh", "Erf"]
    nodes = [helper.make_node(ops[i % len(ops)], [names[i]], [names[i + 1]], name=f"n{i}") for i in range(n)]
    return nodes, {v: (8, 1024) for v in names}


@pytest.mark.fast
def test_a_static_310p_chain_of_up_to_six_elementwise_nodes_is_one_kernel_a_dynamic_one_is_not():
    nodes, shapes = _ew_chain(6)
    static = _kernels(nodes, shapes, "Ascend310P", static=True)
    assert len(static) == 1 and static[0].passes == ["TbeEltwiseFusionPass"]
    assert static[0].bytes == 2 * 8 * 1024 * 2  # one read, one write
    assert len(_kernels(nodes, shapes, "Ascend310P", static=False)) == 6
    assert len(_kernels(nodes, shapes, "Ascend910B", static=True)) == 6  # a 310P pass only
    nodes, shapes = _ew_chain(8)
    assert [len(k.nodes) for k in _kernels(nodes, shapes, "Ascend310P", static=True)] == [6, 2]


@pytest.mark.fast
def test_matmul_bias_add_is_one_kernel_and_a_310p_matmul_takes_one_elementwise_node():
    shapes = {"x": (64, 256), "w": (256, 512), "y": (64, 512), "b": (512,), "z": (64, 512), "r": (64, 512)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
             helper.make_node("Add", ["y", "b"], ["z"], name="bias"),
             helper.make_node("Relu", ["z"], ["r"], name="act")]
    a2 = _kernels(nodes, shapes)
    assert [k.kernel for k in a2] == ["MatMulV2", "Relu"] and a2[0].passes == ["MatMulBiasAddFusionPass"]
    p310 = _kernels(nodes, shapes, "Ascend310P")
    assert len(p310) == 1 and p310[0].passes == ["MatMulBiasAddFusionPass", "TbeBatchMatmulElementWiseFusionPass"]


@pytest.mark.fast
def test_a_decomposed_layernorm_is_one_kernel_on_a2_at_static_shapes_only():
    s = {"x": (8, 128, 256), "m": (8, 128, 1), "d": (8, 128, 256), "p": (8, 128, 256), "v": (8, 128, 1),
         "ve": (8, 128, 1), "sd": (8, 128, 1), "n": (8, 128, 256), "g": (256,), "gn": (8, 128, 256), "b": (256,),
         "y": (8, 128, 256), "two": (), "eps": ()}
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1], name="m1"),
             helper.make_node("Sub", ["x", "m"], ["d"], name="sub"),
             helper.make_node("Pow", ["d", "two"], ["p"], name="pow"),
             helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1], name="m2"),
             helper.make_node("Add", ["v", "eps"], ["ve"], name="eps"),
             helper.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
             helper.make_node("Div", ["d", "sd"], ["n"], name="div"),
             helper.make_node("Mul", ["n", "g"], ["gn"], name="gamma"),
             helper.make_node("Add", ["gn", "b"], ["y"], name="beta")]
    ks = _kernels(nodes, s)
    assert [k.kernel for k in ks] == ["LayerNormV3"] and ks[0].passes == ["LayerNormFusionPass"]
    assert len(_kernels(nodes, s, static=False)) == 9
    assert len(_kernels(nodes, s, "Ascend310P", static=False)) == 9


@pytest.mark.fast
def test_one_l2_rule_for_both_sides():
    """An intermediate that fits is read back from L2 at the bandwidth the emulator gives a fused kernel's re-reads;
    one that does not fit (or on 310P, which has none modelled) is read from HBM."""
    chip = "Ascend910B1"
    small = [AtcKernel("Sigmoid", ["a"], ["Sigmoid"], [("x", 1 << 20)], [("y", 1 << 20)]),
             AtcKernel("Mul", ["b"], ["Mul"], [("x", 1 << 20), ("y", 1 << 20)], [("z", 1 << 20)])]
    assert l2_hits(small, chip) == [0, 1 << 20]
    big = 200 << 20
    large = [AtcKernel("Sigmoid", ["a"], ["Sigmoid"], [("x", big)], [("y", big)]),
             AtcKernel("Mul", ["b"], ["Mul"], [("x", big), ("y", big)], [("z", big)])]
    assert l2_hits(large, chip) == [0, 0]
    assert l2_hits(small, "Ascend310P3") == [0, 0]
    assert emulator_table(chip)["l2_bytes_per_s"] == value(chip, "l2_bandwidth")
    assert emulator_table(chip)["l2_bytes"] == value(chip, "l2_bytes")
    hbm, l2 = kernel_cost(small[1], chip), kernel_cost(small[1], chip, 1 << 20)
    assert l2.us < hbm.us


@pytest.mark.fast
def test_an_fp32_matmul_is_costed_at_the_fp32_cube_rate():
    n = 4096
    a = AtcKernel("MatMulV2", ["m"], ["MatMul"], [("a", n * n * 2), ("b", n * n * 2)], [("c", n * n * 2)],
                  2.0 * n ** 3, dtype=F16)
    b = AtcKernel("MatMulV2", ["m"], ["MatMul"], [("a", n * n * 4), ("b", n * n * 4)], [("c", n * n * 4)],
                  2.0 * n ** 3, dtype=TensorProto.FLOAT)
    fp16, fp32 = kernel_cost(a, "Ascend910B2"), kernel_cost(b, "Ascend910B2")
    assert fp32.lo >= 2.0 * n ** 3 / (value("Ascend910B2", "cube_fp16_flops") / 4) * 1e6  # never above fp32 peak
    assert 3.0 < fp32.us / fp16.us < 4.5


@pytest.mark.fast
def test_measured_kernels_lie_inside_their_corners_and_unmeasured_ones_say_so():
    for p in profiles():
        if p.kernel == "MatMulV2":
            lo, mid, hi = cube_fit(p.rows <= GEMV_ROWS).at(p.flops, p.bytes, p.chip, p.dtypes[0] == "fp32")
        elif p.kernel in ("Add", "RmsNorm", "SoftmaxV2"):
            lo, mid, hi = curve(p.kernel + ("/broadcast" if p.kernel == "Add" and p.broadcast else "")).at(p.bytes)
        else:
            continue
        assert lo <= p.lo + 1e-9 and p.hi <= hi + 1e-9, p
    sig = AtcKernel("Sigmoid", ["s"], ["Sigmoid"], [("x", 1 << 20)], [("y", 1 << 20)])
    assert not kernel_cost(sig, "Ascend910B4").measured
    add = AtcKernel("Add", ["s"], ["Add"], [("x", 1 << 20), ("w", 1 << 20)], [("y", 1 << 20)])
    assert kernel_cost(add, "Ascend910B4").measured and not kernel_cost(add, "Ascend910B1").measured
    # one launch model: the fused kernel's launch on every core lies in the range the best-practice sample measured
    assert 2.5 <= launch_us(48, -1) < launch_us(48, 1) <= 9.5


@pytest.mark.fast
def test_chips_by_name_and_families_as_aliases():
    b4 = get_soc("Ascend910B4")
    assert (b4.name, b4.chip, b4.vector_cores) == ("Ascend910B", "Ascend910B4", 40)
    assert get_soc("Ascend910B").chip == "Ascend910B1" and get_soc("Ascend310P").chip == "Ascend310P3"
    assert value("Ascend910B4", "cube_fp16_flops") == 20 * 16 ** 3 * 2 * 1.65e9
    with pytest.raises(AscOnnxError, match="Ascend910B4"):
        get_soc("Ascend910B9")
    assert corner("Ascend910B4", slow=True)["unfused_end"] == -1


def test_judged_shapes_by_role_with_decode_on_a_kv_cache_fixture():
    model = onnx.load(str(MODELS / "llama_decode_legacy.onnx"), load_external_data=False)
    binds = sweep(model, {})
    past = [b for b in binds if any(v == DECODE_PAST[-1] for v in b.values())]
    assert past, binds
    assert not static_shapes(model, {})
    res = asc_onnx.fuse(model, options=FuseOptions(emulate=False), validate=False)
    softmax = next(o for o in res.report["estimates"]["ops"] if "Softmax" in o["op_type"])
    # the scores' last dim is the cache: judged (at both ends) against 8192 cached keys
    assert any(e["binding"] == past[0] and not e["error"] for e in softmax["estimates"])
    assert any(e["binding"] == past[0] for e in softmax["slow_corner"])


def test_estimate_json_gives_the_figures_fuse_reports(tmp_path, capsys):
    model = str(MODELS / "cnn_silu_dynamo.onnx")
    assert run(["estimate", model, "--soc", "Ascend910B4", "--json", "-q"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert not list(tmp_path.iterdir())  # writes nothing
    assert run(["fuse", model, "-o", str(tmp_path / "o"), "--soc", "Ascend910B4", "--no-emulate", "--no-validate",
                "--json", "-q"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert est["estimates"]["ops"] == report["estimates"]["ops"]
    assert est["estimates"]["model"] == report["estimates"]["model"]
    assert "Ascend910B4" in (tmp_path / "o" / "atc.sh").read_text()
    nodes = est["bindings"][0]["nodes"]
    costed = [n for n in nodes if n.get("us") is not None]
    assert costed and all(n["slow_corner_us"] <= n["us"] <= n["fast_corner_us"] for n in costed)
    assert {n["kernel"] for n in costed} >= {"Sigmoid", "Mul"}
    assert all("measured" in n and "input_shapes" in n for n in costed)


@pytest.mark.fast
def test_an_erf_gelu_is_one_kernel_on_a2_at_static_shapes_and_a_tanh_chain_is_not_a_gelu():
    s = {v: (8, 1024) for v in ("x", "d", "e", "a", "m", "y")} | {"c": (), "one": (), "half": ()}
    gelu = [helper.make_node("Div", ["x", "c"], ["d"], name="div"), helper.make_node("Erf", ["d"], ["e"], name="erf"),
            helper.make_node("Add", ["e", "one"], ["a"], name="add"), helper.make_node("Mul", ["x", "a"], ["m"]),
            helper.make_node("Mul", ["m", "half"], ["y"], name="half")]
    ks = _kernels(gelu, s)
    assert [k.kernel for k in ks] == ["Gelu"] and ks[0].passes == ["GeluFusionPass"]
    assert len(_kernels(gelu, s, static=False)) == 5
    chain = [helper.make_node("Mul", ["x", "c"], ["d"]), helper.make_node("Add", ["d", "one"], ["a"]),
             helper.make_node("Tanh", ["a"], ["y"])]
    assert len(_kernels(chain, s)) == 3


@pytest.mark.fast
def test_a_broadcast_input_takes_canns_broadcast_curve_and_a_few_row_matmul_its_gemv_fit():
    s = {"x": (64, 128), "r": (64, 1), "y": (64, 128), "z": (64, 128)}
    same, = _kernels([helper.make_node("Mul", ["x", "y"], ["z"], name="m")], s)
    bcast, = _kernels([helper.make_node("Mul", ["x", "r"], ["z"], name="m")], s)
    assert bcast.broadcast and not same.broadcast
    assert "broadcast" in kernel_cost(bcast, "Ascend910B4").rule
    assert "broadcast" not in kernel_cost(same, "Ascend910B4").rule
    m = {"a": (8, 4096), "w": (4096, 11008), "o": (8, 11008)}
    mm, = _kernels([helper.make_node("MatMul", ["a", "w"], ["o"], name="mm")], m)
    assert mm.rows == 8
    # at 8 rows the time is B's bytes streamed, well above the FLOPs' share of the cube
    c = kernel_cost(mm, "Ascend910B4")
    assert c.us > mm.bytes / value("Ascend910B4", "gm_bandwidth") * 1e6
