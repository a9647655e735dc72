"""Speed and memory of ``asc-onnx fuse --no-validate`` against its peers, on the same input.

Peers, each run in a fresh child process (so peak RSS is its own), on ``llama_deep.onnx``
(a 120-layer LLaMA, ~20k nodes, written by ``make_deep_llama.py``):

* ``onnx load+save``: the floor any tool that reads and writes the model pays;
* ``asc-onnx fuse --no-validate --no-emulate``: the rewrite alone (issue 16: within 3x the floor);
* ``asc-onnx fuse --no-validate`` (every kernel emulated);
* ``onnxruntime.transformers.optimizer`` at opt_level 0 (its Python fusion passes).

Then the external-data check: the same small model with 0.5 GiB and 4 GiB of weights on disk
(sparse zero files), fused with --no-validate; peak RSS must not grow with the weight bytes.

    python bench/bench_fuse.py                 # everything (the onnxruntime optimizer takes minutes)
    python bench/bench_fuse.py --skip-ort      # without the slow peer
    python bench/bench_fuse.py --repeat 3      # medians of three runs
    python bench/bench_fuse.py --smoke         # a small fixture: what the tests run
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = HERE / "llama_deep.onnx"

CHILD = {
    "onnx load+save": """
        import onnx
        m = onnx.load(MODEL)
        onnx.save(m, OUT + "/copy.onnx")
    """,
    "asc-onnx fuse --no-emulate": """
        import asc_onnx
        from asc_onnx.options import FuseOptions
        r = asc_onnx.fuse(MODEL, OUT + "/fused", FuseOptions(emulate=False), validate=False)
        extra = {"fused": sum(len(op.instances) for op in r.ops), "nodes_after": r.report["nodes_after"]}
    """,
    "asc-onnx fuse": """
        import asc_onnx
        r = asc_onnx.fuse(MODEL, OUT + "/fused", validate=False)
        extra = {"fused": sum(len(op.instances) for op in r.ops), "nodes_after": r.report["nodes_after"]}
    """,
    "ort optimizer opt_level=0": """
        from onnxruntime.transformers import optimizer
        m = optimizer.optimize_model(MODEL, model_type="bert", opt_level=0, num_heads=0, hidden_size=0)
        m.save_model_to_file(OUT + "/ort.onnx")
    """,
}

WRAP = """
import json, sys, time
MODEL, OUT = sys.argv[1], sys.argv[2]
extra = {{}}
t0 = time.perf_counter()
{body}
# VmHWM: this process's own peak (ru_maxrss would carry the parent's pre-exec high-water mark too)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"seconds": time.perf_counter() - t0, "peak_rss_mib": hwm / 1024, **extra}}))
"""


#: ``--smoke`` (what the tests run): a small fixture in place of the 120-layer model, 1 and 8 MiB of weights.
SMOKE_MODEL = HERE.parent / "models" / "llama_tiny_legacy.onnx"


#: Compiled modules for the children (what an installed package has beside its sources): a sandbox that sets
#: PYTHONDONTWRITEBYTECODE would otherwise have every child compile asc_onnx's sources again (about 0.25 s) while
#: onnx comes precompiled from site-packages. Filled by a first import, then read by every timed run.
PYCACHE = tempfile.TemporaryDirectory(prefix="bench-fuse-pycache-")


def _child_env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = PYCACHE.name
    return env


def warm_imports() -> None:
    """Compile what the children import once, into :data:`PYCACHE`."""
    subprocess.run([sys.executable, "-c", "import asc_onnx.api, asc_onnx.options, onnx_graphsurgeon, onnx"],
                   env=_child_env(), check=True, capture_output=True)


def run_child(body: str, model: Path) -> dict:
    with tempfile.TemporaryDirectory() as out:
        code = WRAP.format(body=textwrap.indent(textwrap.dedent(body), ""))
        proc = subprocess.run([sys.executable, "-c", code, str(model), out], capture_output=True, text=True,
                              env=_child_env())
        if proc.returncode:
            raise SystemExit(f"child failed:\n{proc.stderr[-2000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])


def speed(repeat: int, skip_ort: bool, model: Path = MODEL) -> dict[str, dict]:
    import onnx

    nodes = len(onnx.load(model, load_external_data=False).graph.node)
    warm_imports()
    print(f"model: {model.name}, {nodes} nodes; medians of {repeat} run(s), each in a fresh process (modules "
          "compiled once before, as an installed package has them)")
    results: dict[str, dict] = {}
    for name, body in CHILD.items():
        if skip_ort and name.startswith("ort"):
            continue
        runs = [run_child(body, model) for _ in range(repeat)]
        results[name] = {"seconds": statistics.median(r["seconds"] for r in runs),
                         "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in runs),
                         **{k: v for k, v in runs[0].items() if k not in ("seconds", "peak_rss_mib")}}
        print(f"  {name:<28} {results[name]['seconds']:>9.2f} s  {results[name]['peak_rss_mib']:>8.0f} MiB peak RSS"
              + (f"  ({results[name]['fused']} fused, {results[name]['nodes_after']} nodes after)"
                 if "fused" in results[name] else ""))
    ours = results["asc-onnx fuse"]["seconds"]
    base = results["onnx load+save"]["seconds"]
    bare = results["asc-onnx fuse --no-emulate"]["seconds"]
    print(f"  asc-onnx --no-validate --no-emulate / load+save: {bare / base:.1f}x   (target: within 3x, goal 2x)")
    print(f"  asc-onnx --no-validate / load+save: {ours / base:.1f}x")
    if "ort optimizer opt_level=0" in results:
        print(f"  ort optimizer / asc-onnx: {results['ort optimizer opt_level=0']['seconds'] / ours:.0f}x faster"
              "   (target: at least 50x)")
    return results


def external_memory(sizes_gib: tuple[float, ...] = (0.5, 4.0)) -> dict[str, float]:
    """Peak RSS of fuse --no-validate for 0.5 GiB and 4 GiB of external weights."""
    import onnx
    from onnx import TensorProto, helper

    out: dict[str, float] = {}
    print("external data (sparse zero files; weights never read):")
    for gib in sizes_gib:
        with tempfile.TemporaryDirectory() as tmp:
            nbytes = int(gib * (1 << 30))
            rows = nbytes // (2 * 64 * 4)
            inits = []
            for i, name in enumerate(("wg", "wu")):
                t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[64, rows])
                t.data_location = TensorProto.EXTERNAL
                for k, v in (("location", "w.bin"), ("offset", str(i * nbytes // 2)), ("length", str(nbytes // 2))):
                    e = t.external_data.add()
                    e.key, e.value = k, v
                inits.append(t)
            nodes = [helper.make_node("MatMul", ["x", "wg"], ["g"]), helper.make_node("MatMul", ["x", "wu"], ["u"]),
                     helper.make_node("Sigmoid", ["g"], ["s"]), helper.make_node("Mul", ["g", "s"], ["sg"]),
                     helper.make_node("Mul", ["sg", "u"], ["y"])]
            g = helper.make_graph(nodes, "ext", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, rows])], inits)
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
            with open(Path(tmp) / "w.bin", "wb") as f:
                f.truncate(nbytes)
            onnx.save(m, Path(tmp) / "m.onnx")
            r = run_child(CHILD["asc-onnx fuse"], Path(tmp) / "m.onnx")
            out[f"{gib} GiB"] = r["peak_rss_mib"]
            size = f"{gib:g} GiB" if gib >= 0.5 else f"{gib * 1024:g} MiB"
            print(f"  {size:>8} of weights: {r['seconds']:6.2f} s, peak RSS {r['peak_rss_mib']:.0f} MiB")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--skip-ort", action="store_true", help="skip the (minutes-long) onnxruntime optimizer")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--smoke", action="store_true", help="a small fixture, no onnxruntime optimizer, MiBs of "
                    "weights (what the tests run)")
    a = ap.parse_args()
    if a.smoke:
        figures = {"speed": speed(1, True, SMOKE_MODEL), "external_peak_rss_mib": external_memory((1 / 1024, 8 / 1024))}
    else:
        if not MODEL.exists():
            raise SystemExit(f"{MODEL} is missing: run bench/make_deep_llama.py (needs torch + transformers)")
        figures = {"speed": speed(a.repeat, a.skip_ort), "external_peak_rss_mib": external_memory()}
    if a.json:
        a.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
