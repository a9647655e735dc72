"""Fused attention against the unfused nodes and against today's partial fusion, at deployment shapes, from the
timing model's timing-only path (every figure an estimate; asc_onnx.estimate says how each is made):

* HBM bytes of the fused kernel over the compulsory minimum (q, k, v and the mask read once, y written once;
  target at most 1.1x), beside the workspace ring's own first write: each vector core's two stages of scores, P
  and P @ v live in a ring of a few hundred KB that L2 keeps resident while the kernel runs; the timing model
  charges each ring byte's first write to HBM (the dirty lines' write-back once), which the target leaves out
  ("the scores never reach HBM beyond an L2-sized ring"), so both columns are printed (a split decode's parts,
  each part's rows of output and their max and sum, live in the same workspace);
* the parts a decode step's keys are split into over the cores (``parts``; 1: each item on one core), which the
  host tiling chooses when the items are too few to fill the cores;
* the estimate of the fused kernel, of the unfused nodes as ATC would run them (Transpose, two MatMuls, scale,
  mask Add, Softmax) and of the partial fusion (the MatMuls unfused, ScaleMaskSoftmax between them); speedups
  over both, the unfused one also at the slow corner (``x slow``; targets, at the table values: at least 1.5x over
  the unfused nodes at S >= 2048 with 8 or more heads, faster than the partial fusion at every shape);
* the cube's share of its peak (the two products' FLOPs over the estimate), beside what hand-written kernels
  reach on 910B2 at head dim 128 (hw-native-sys/pto-isa, kernels/manual/common/flash_atten/README.md: 7.2% at
  S = 1024, 18.7% at 2048, 27.3% at 4096; torch_npu's fused attention 2.6%, 8.6%, 20.5%).

    python bench/bench_attention.py [--smoke] [--match TEXT] [--fixtures]

``--smoke`` (what the tests run): one small shape, emulated with values against onnxruntime as well, the first
fixture of ``--fixtures`` and ``--tiling`` with five calls each way.
``--pto [--check] [--up-to S]``: one-sided against the best published kernels: our fused attention at pto-isa's own
shapes (b1 h1 S x S d128 fp16, no mask, S = 1K to 32K) on Ascend910B2, beside its hand kernel's and torch_npu's
measured times; an estimate more than 15% faster than the hand kernel is flagged (``--check``: exit 1), a bug in
the model until shown otherwise.
``--tiling [--calls N]``: the host's TilingFunc arithmetic (``<op>ComputeTiling``, linked with CANN's own Matmul
tiling where ``../shared/ascend`` is configured, else the emulator's) at a decode step of b1 h32 GQA 4:1 d128, timed
on this host: at key counts below one KV block (new products: CANN's tiling asked twice a call) against key counts
past it (the products' tilings cached, ``asc_onnx_cube_tiling.h``; target: at most a tenth of the uncached call).
``--causal``: the causal mask generated in the kernel (blocks past the diagonal skipped) against no mask at b1 h32
d128, S 4096 and 8192 (targets: at most 0.65x and 0.6x the time), and against the unfused nodes (at least 1.3x, and
shipped: faster at the slow corner).
``--fixtures``: the LLaMA, Qwen2, BERT, ViT and GPT-2 fixtures fused with the guard on: Attention ops per model,
whether they ship, and the whole model's estimate fused against unfused at each judged binding; then again with
every layer's attention fused (``--keep-slower``), the same estimates.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import asc_onnx  # noqa: E402
from asc_onnx import FuseOptions  # noqa: E402
from asc_onnx.cli import use_environment  # noqa: E402

use_environment()  # the cache and CANN sources the command line would use
from asc_onnx.emulator.harness import run  # noqa: E402
from asc_onnx.estimate import estimate_at  # noqa: E402
from asc_onnx.hardware import corner, value  # noqa: E402
from asc_onnx.soc import SOCS  # noqa: E402
from asc_onnx.verify_kernels import check, random_inputs  # noqa: E402

SOC = "Ascend910B"
#: Measured share of the cube's peak on 910B2 at head dim 128, by sequence length (pto-isa's README).
MEASURED = {1024: (7.2, 2.6), 2048: (18.7, 8.6), 4096: (27.3, 20.5)}
#: pto-isa kernels/manual/common/flash_atten/README.md, "910B2 Multi-Core Comparison": b1 h1 S x S d128 fp16, no
#: mask; its hand-written kernel and torch_npu's, us by S.
PTO = {1024: (20.960, 58.461), 2048: (32.461, 70.801), 4096: (88.902, 118.302), 8192: (292.626, 353.147),
       16384: (909.058, 1118.462), 32768: (3262.645, 3646.173)}
PTO_CHIP = "Ascend910B2"


@dataclass(frozen=True)
class Case:
    """One attention shape: batch, heads, query and key lengths, head dim, mask kind ('causal', 'padding' or
    'none') and the KV heads' group (GQA: K and V repeated in the graph, as exporters write it)."""

    b: int
    h: int
    sq: int
    sk: int
    d: int
    mask: str = "causal"
    group: int = 1

    @property
    def label(self) -> str:
        kv = f" gqa{self.group}:1" if self.group > 1 else ""
        return f"b{self.b} h{self.h} {self.sq}x{self.sk} d{self.d} {self.mask}{kv}"


def model(c: Case):
    """The attention subgraph as torch exports it, in fp16: q [B,H,Sq,D], k and v [B,H,Sk,D] (for GQA, K and V
    of H/group heads repeated by Unsqueeze/Expand/Reshape, which the op takes in: it reads each KV head once), K
    transposed in the graph, the scale, the additive mask ([1,1,Sq,Sk] causal, [B,1,1,Sk] padding), Softmax, and
    P @ v."""
    f16 = TensorProto.FLOAT16
    hk = c.h // c.group
    ins = [helper.make_tensor_value_info("q", f16, [c.b, c.h, c.sq, c.d]),
           helper.make_tensor_value_info("k", f16, [c.b, hk, c.sk, c.d]),
           helper.make_tensor_value_info("v", f16, [c.b, hk, c.sk, c.d])]
    inits = [numpy_helper.from_array(np.array(c.d ** -0.5, np.float16), "scale")]
    nodes = []
    k, v = "k", "v"
    if c.group > 1:
        inits += [numpy_helper.from_array(np.array([2], np.int64), "axis2"),
                  numpy_helper.from_array(np.array([c.b, hk, c.group, c.sk, c.d], np.int64), "shape5"),
                  numpy_helper.from_array(np.array([c.b, c.h, c.sk, c.d], np.int64), "shape4")]
        for x in ("k", "v"):
            nodes += [helper.make_node("Unsqueeze", [x, "axis2"], [f"{x}5"]),
                      helper.make_node("Expand", [f"{x}5", "shape5"], [f"{x}e"]),
                      helper.make_node("Reshape", [f"{x}e", "shape4"], [f"{x}r"])]
        k, v = "kr", "vr"
    nodes += [helper.make_node("Transpose", [k], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "scale"], ["ss"])]
    last = "ss"
    if c.mask == "causal":  # built from the shapes as HF's legacy export does: the op generates it
        inits += [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                  (("two", 2), ("zero", 0), ("one", 1), ("ax0", [0]), ("ax1", [1]))]
        inits += [numpy_helper.from_array(np.array(v, np.float16), n) for n, v in
                  (("fill", np.finfo(np.float16).min), ("none", 0.0))]
        nodes += [helper.make_node("Shape", ["q"], ["qs"]), helper.make_node("Shape", [v], ["vs"]),
                  helper.make_node("Gather", ["qs", "two"], ["nq"], axis=0),
                  helper.make_node("Gather", ["vs", "two"], ["nk"], axis=0),
                  helper.make_node("Sub", ["nk", "nq"], ["past"]),
                  helper.make_node("Range", ["past", "nk", "one"], ["rows"]),
                  helper.make_node("Range", ["zero", "nk", "one"], ["cols"]),
                  helper.make_node("Unsqueeze", ["rows", "ax1"], ["rows2"]),
                  helper.make_node("Unsqueeze", ["cols", "ax0"], ["cols2"]),
                  helper.make_node("LessOrEqual", ["cols2", "rows2"], ["vis"]),
                  helper.make_node("Where", ["vis", "none", "fill"], ["mask"]),
                  helper.make_node("Add", ["ss", "mask"], ["sm"])]
        last = "sm"
    elif c.mask != "none":
        ins.append(helper.make_tensor_value_info("mask", f16, [c.b, 1, 1, c.sk]))
        nodes.append(helper.make_node("Add", ["ss", "mask"], ["sm"]))
        last = "sm"
    nodes += [helper.make_node("Softmax", [last], ["p"], axis=-1), helper.make_node("MatMul", ["p", v], ["o"]),
              helper.make_node("Transpose", ["o"], ["y"], perm=[0, 2, 1, 3])]
    g = helper.make_graph(nodes, "attention", ins, [helper.make_tensor_value_info("y", f16, [c.b, c.sq, c.h, c.d])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def kernel_of(m, rule: str, skip: frozenset[str] = frozenset()):
    """The fused op of ``rule`` in ``m`` (generated, not emulated or judged)."""
    res = asc_onnx.fuse(m, None, options=FuseOptions(emulate=False, judge=False, skip=skip, soc=SOC), validate=False)
    return next(k for k in res.kernels if k.op.rule == rule)


def tiling(calls: int) -> int:
    """Host time of the tiling arithmetic, uncached against cached (this host's clock: not an NPU figure)."""
    import subprocess

    from asc_onnx.emulator import cann_tiling
    from asc_onnx.kernels import of

    k = kernel_of(model(Case(1, 32, 1, 4096, 128, "padding", group=4)), "Attention")
    exe = cann_tiling.tiling_program(k.ir, k.files, ROOT / "bench" / "attention_tiling_time.cpp")
    shapes = [(1, 32, 1, 128), (1, 8, 4096, 128), (1, 8, 4096, 128), (1, 1, 1, 4096)]
    case = " ".join(map(str, of(k).driver.tiling_case(k.ir, shapes))) + " " + cann_tiling.case_tail(SOCS[SOC],
                                                                                                     TensorProto.FLOAT16)
    proc = subprocess.run([str(exe)], input=f"{calls} {case}\n", capture_output=True, text=True, check=True)
    words = proc.stdout.split()
    got = {words[i]: float(words[i + 1]) for i in range(0, len(words), 2)}
    whose = "CANN's" if cann_tiling.source_root() is not None else "the emulator's own"
    ratio = got["cached_us"] / got["uncached_us"]
    print(f"TilingFunc arithmetic, {whose} Matmul tiling, decode b1 h32 gqa4:1 d128, {calls} calls each (host time):")
    print(f"  new product shapes (keys below one KV block): {got['uncached_us']:8.2f} us a call")
    print(f"  cached (keys past one KV block):              {got['cached_us']:8.2f} us a call   "
          f"{ratio:.3f} of uncached (target: at most 0.1)")
    return 1 if got["refused"] else 0


def targets() -> list[Case]:
    """The issue's shapes: fp16, batch 1 and 4, S = 512, 2048 and 4096, head dims 64 and 128, 8 to 32 heads,
    causal and padding masks, GQA 4:1, and a decode step (Sq = 1 against Sk = 4096)."""
    cases = [Case(b, h, s, s, d) for b in (1, 4) for s in (512, 2048, 4096) for h, d in ((32, 64), (8, 128))]
    cases += [Case(1, 32, 2048, 2048, 128, "padding"), Case(1, 32, 2048, 2048, 128, group=4),
              Case(1, 32, 1024, 1024, 128), Case(1, 32, 1, 4096, 128, "padding"),
              Case(4, 32, 1, 4096, 128, "padding", group=4),
              # batch 1 decode with grouped KV heads: 8 items for 48 vector cores, the keys split over them
              Case(1, 32, 1, 4096, 128, "padding", group=4), Case(1, 32, 1, 16384, 128, "padding", group=4)]
    return cases


def row(c: Case) -> tuple[str, bool]:
    """One case's figures, and whether it meets its targets."""
    m = model(c)
    k = kernel_of(m, "Attention")
    shapes = [list(a.type.tensor_type.shape.dim) for a in m.graph.input]
    shapes = [[d.dim_value for d in s] for s in shapes]
    # the op's inputs: q, k and v (with their own heads: the op repeats them for GQA), the mask
    hk = c.h // c.group
    shapes = [shapes[0], [c.b, hk, c.sk, c.d], [c.b, hk, c.sk, c.d]] + shapes[3:]
    soc = SOCS[SOC]
    e = estimate_at(k, shapes, soc)
    if e.error:
        return f"{c.label:<34} FAILED: {e.error[:200]}", False
    partial_nodes = sum(n.us for n in e.nodes if set(n.op_types) <= {"MatMul", "Transpose", "Unsqueeze", "Expand",
                                                                       "Reshape"})
    slow = estimate_at(k, shapes, soc, corner(soc.chip, slow=True))
    sms = kernel_of(m, "ScaleMaskSoftmax" if c.mask != "none" else "ScaleSoftmax", frozenset({"Attention"}))
    mask_shape = [[c.sq, c.sk]] if c.mask == "causal" else shapes[3:]  # (causal: the graph's own [Sq, Sk])
    p = estimate_at(sms, [[c.b, c.h, c.sq, c.sk]] + mask_shape, soc)
    partial = partial_nodes + min(p.fused_us, p.unfused_us)
    flops = 4.0 * c.b * c.h * c.sq * c.sk * c.d
    cube = flops / (e.fused_us * 1e-6) / value(SOC, "cube_fp16_flops")
    # HBM bytes of every core (the estimate times the longest cores only)
    zero = np.zeros((), np.float16)
    whole = run(k.ir, k.files, f"{k.op.op_type}TilingData", [np.broadcast_to(zero, tuple(s)) for s in shapes], soc,
                values=False, every_core=True)
    ring = (whole.cube or {}).get("workspace_hbm", 0)  # the ring's HBM bytes: its first write
    hbm = ((whole.time or {}).get("hbm_bytes", 0) - ring) / e.compulsory_bytes
    speedup, over_partial = e.unfused_us / e.fused_us, partial / e.fused_us
    ok = hbm <= 1.1 and over_partial > 1.0 and e.fused_us < e.unfused_us
    if c.sq >= 2048 and c.h >= 8:
        ok = ok and speedup >= 1.5
    measured = MEASURED.get(c.sq) if c.d == 128 and c.sq == c.sk else None
    hand = f"{measured[0]:>5.1f}% / {measured[1]:>4.1f}%" if measured else f"{'-':>15}"
    parts = (whole.cube or {}).get("splits", 1)
    return (f"{c.label:<34} {hbm:>6.2f} {ring / e.compulsory_bytes:>5.2f} {parts:>5} {e.fused_us:>9.1f} "
            f"{e.unfused_us:>9.1f} {partial:>9.1f} {speedup:>6.2f} {slow.unfused_us / slow.fused_us:>6.2f} "
            f"{over_partial:>6.2f} {e.bottleneck:>6} {cube:>6.1%} {hand}  {'yes' if ok else 'NO'}"), ok


def causal(sizes: tuple[int, ...] = (4096, 8192)) -> int:
    """The causal mask generated and its blocks skipped: b1 h32 d128 fp16 at each S, causal against no mask (targets:
    at most 0.65x at S = 4096, 0.6x from 8192), and both ops against their unfused nodes as the judge costs them
    (at least 1.3x at the table values, and faster at the slow corner: shipped)."""
    soc = SOCS[SOC]
    print("causal against no mask, b1 h32 d128 fp16 (estimates, us):")
    print("  (x: over the op's unfused nodes as the judge costs them, at the table values and at the slow corner)")
    print(f"{'S':>6} {'causal':>9} {'no mask':>9} {'ratio':>6} {'target':>6}   {'causal x':>8} {'slow':>6}   "
          f"{'no mask x':>9} {'slow':>6}  ok")
    bad = 0
    for n in sizes:
        shapes = [[1, 32, n, 128]] * 3
        est = {}
        for kind in ("causal", "none"):
            k = kernel_of(model(Case(1, 32, n, n, 128, kind)), "Attention")
            est[kind] = (estimate_at(k, shapes, soc), estimate_at(k, shapes, soc, corner(soc.chip, slow=True)))
        (e, slow), (plain, plain_slow) = est["causal"], est["none"]
        ratio, target = e.fused_us / plain.fused_us, 0.65 if n <= 4096 else 0.6
        speedup, plain_speedup = e.unfused_us / e.fused_us, plain.unfused_us / plain.fused_us
        ok = (ratio <= target and min(speedup, plain_speedup) >= 1.3 and slow.fused_us < slow.unfused_us
              and plain_slow.fused_us < plain_slow.unfused_us)
        bad += not ok
        print(f"{n:>6} {e.fused_us:>9.1f} {plain.fused_us:>9.1f} {ratio:>6.2f} {target:>6.2f}   {speedup:>8.2f} "
              f"{slow.unfused_us / slow.fused_us:>6.2f}   {plain_speedup:>9.2f} "
              f"{plain_slow.unfused_us / plain_slow.fused_us:>6.2f}  {'yes' if ok else 'NO'}")
    return 1 if bad else 0


def smoke() -> int:
    """One small shape: emulated with values against onnxruntime, then estimated."""
    c = Case(1, 2, 128, 128, 64)
    k = kernel_of(model(c), "Attention")
    inputs = random_inputs(k, TensorProto.FLOAT16, (1, 2, 128, 64))
    chk = check(k, inputs, SOCS[SOC], "smoke")
    print(f"{c.label}: emulated, max abs error {chk.max_abs:.3e} ({'ok' if chk.ok else 'FAILED: ' + str(chk.error)})")
    line, _ = row(c)
    print(line)
    fixtures(FIXTURES[:1])
    causal((512,))  # it runs (at 512 the targets, set for 4096 and up, are not asserted)
    return tiling(5) if chk.ok else 1


FIXTURES = ("llama_tiny_legacy", "llama_sdpa_legacy", "qwen2_tiny_legacy", "bert_tiny_legacy", "vit_tiny_legacy",
            "gpt2_tiny_legacy")


def fixtures(names: tuple[str, ...] = FIXTURES) -> int:
    """Each named fixture fused (guard on, no emulation): its Attention ops and the whole model's estimate."""
    from asc_onnx.estimate import label

    for name in names:
        for keep in (False, True):  # the guard's choice, then attention fused in every layer whatever it estimates
            res = asc_onnx.fuse(ROOT / "models" / f"{name}.onnx", None,
                                options=FuseOptions(emulate=False, soc=SOC, keep_slower=keep), validate=False)
            est = res.report.get("estimates") or {}
            shipped = sum(len(k.op.instances) for k in res.kernels if k.op.rule == "Attention")
            declined = [n.reason for n in res.near_misses if n.rule == "Attention"]
            if keep:
                print(f"    every layer's attention fused ({shipped} ops, --keep-slower):")
            else:
                print(f"{name}: {shipped + len(declined)} attention regions, {shipped} shipped"
                      + (f"; not shipped: {declined[0]}" if declined else ""))
            for m in est.get("model", []):
                w = m["slow_corner"]
                print(f"    model at {label(m['binding'])}: est. {w['unfused_us'] / max(w['fused_us'], 1e-9):.2f}x at "
                      f"the slow corner ({w['fused_us']:.1f} us fused against {w['unfused_us']:.1f} us unfused), "
                      f"{m['unfused_us'] / max(m['fused_us'], 1e-9):.2f}x at the table values")
    return 0


HEAD = (f"{'shape':<34} {'HBM/min':>6} {'ring':>5} {'parts':>5} {'est us':>9} {'est unf':>9} {'partial':>9} "
        f"{'x unf':>6} {'x slow':>6} "
        f"{'x part':>6} {'bound':>6} {'cube':>6} {'hand/torch_npu':>15}  ship")


def pto(check: bool, up_to: int) -> int:
    """Our fused attention at pto-isa's shapes on 910B2 against its measured kernels (one-sided)."""
    from asc_onnx.soc import get_soc

    soc = get_soc(PTO_CHIP)
    print(f"fused attention at pto-isa's shapes on {PTO_CHIP} (b1 h1 S x S d128 fp16, no mask; estimates, launch "
          "included)")
    print(f"{'S':>6} {'est us':>9} {'hand us':>9} {'torch_npu':>9} {'hand/est':>8}")
    flagged = 0
    for s, (hand, torch_npu) in PTO.items():
        if s > up_to:
            continue
        c = Case(1, 1, s, s, 128, "none")
        k = kernel_of(model(c), "Attention")
        e = estimate_at(k, [[1, 1, s, 128]] * 3, soc)
        if e.error:
            print(f"{s:>6} FAILED: {e.error[:200]}")
            flagged += 1
            continue
        over = hand / e.fused_us
        flagged += over > 1.15
        print(f"{s:>6} {e.fused_us:>9.1f} {hand:>9.2f} {torch_npu:>9.2f} {over:>8.2f}"
              + ("  FASTER THAN THE HAND KERNEL BY MORE THAN 15%" if over > 1.15 else ""), flush=True)
    return 1 if check and flagged else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pto", action="store_true", help="one-sided against pto-isa's measured attention kernels")
    ap.add_argument("--check", action="store_true", help="with --pto: exit 1 if an estimate beats one by > 15%%")
    ap.add_argument("--up-to", type=int, default=32768, help="with --pto: the longest sequence")
    ap.add_argument("--smoke", action="store_true", help="one small shape, emulated and estimated")
    ap.add_argument("--match", default="", help="only cases whose label contains this text")
    ap.add_argument("--fixtures", action="store_true", help="the transformer fixtures' attention and model estimates")
    ap.add_argument("--tiling", action="store_true", help="the host tiling's time, uncached against cached")
    ap.add_argument("--causal", action="store_true", help="the generated causal mask against no mask")
    ap.add_argument("--calls", type=int, default=200, help="with --tiling: calls timed each way")
    args = ap.parse_args()
    if args.tiling:
        return tiling(args.calls)
    if args.pto:
        return pto(args.check, args.up_to)
    if args.fixtures:
        return fixtures()
    if args.causal:
        return causal()
    print(HEAD)
    if args.smoke:
        return smoke()
    met = total = 0
    for c in targets():
        if args.match not in c.label:
            continue
        line, ok = row(c)
        print(line, flush=True)
        met += ok
        total += 1
    print(f"targets met: {met} of {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
