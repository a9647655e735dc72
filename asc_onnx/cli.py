"""``asc-onnx`` command line: fuse, validate, inspect, patterns.

Exit codes: 0 success, 1 validation mismatch, 2 bad input or usage, 3 internal error
(run with -v for the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from . import __version__, config
from .api import REPORT, emulate, estimate_model, fuse, inspect, validate, validate_kernels
from .errors import STOPPING_SIGNAL, AscOnnxError, ValidationError, stopped
from .estimate import label
from .hardware import ALIASES, CHIPS
from .options import FuseOptions
from .progress import Progress
from .registry import load_rules
from .report import to_json
from .report_text import estimate_lines, fuse_text, table
from .validate import ValidationReport


def _shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = text.rpartition(":")
    try:
        values = tuple(int(d) for d in dims.split(",") if d.strip())
    except ValueError:
        values = ()
    if not sep or not name or not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected NAME:D0,D1,... with positive dims, got {text!r}")
    return name, values


def _value_arg(text: str) -> tuple[str, tuple[float, ...]]:
    name, sep, vals = text.rpartition(":")
    try:
        values = tuple(float(v) for v in vals.split(",") if v.strip())
    except ValueError:
        values = ()
    if not sep or not name or not values:
        raise argparse.ArgumentTypeError(f"expected NAME:V or NAME:V0,V1,... with numbers, got {text!r}")
    return name, values


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _common(p: argparse.ArgumentParser, shapes: bool = True) -> None:
    p.add_argument("--patterns", action="append", default=[], metavar="FILE.py",
                   help="extra pattern module (defines RULES); may be repeated")
    if shapes:
        p.add_argument("--input-shape", action="append", default=[], type=_shape_arg, metavar="NAME:D0,D1",
                       help="concrete dims for a model input (dynamic dims); may be repeated")
        p.add_argument("--input-value", action="append", default=[], type=_value_arg, metavar="NAME:V[,V...]",
                       help="contents of a model input in the checks (one fill value or every element), in place "
                            "of random data: an integer input the model branches on; may be repeated")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line on stderr (drawn on a terminal only)")
    p.add_argument("-v", "--verbose", action="store_true", help="more detail (and tracebacks)")


def _select(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", type=_names, default=[], metavar="A,B", help="fuse only these patterns")
    p.add_argument("--skip", type=_names, default=[], metavar="A,B", help="never fuse these patterns")
    p.add_argument("--no-generic", action="store_true",
                   help="skip the generic passes (row regions, elementwise chains)")


SOC_HELP = ("target chip, as ATC's --soc_version names it: " + ", ".join(CHIPS) + "; or a family: "
            + ", ".join(f"{a} (= {c})" for a, c in ALIASES.items()) + "; default Ascend910B")


def parser() -> argparse.ArgumentParser:
    """The argument parser (kept separate for tests and docs)."""
    ap = argparse.ArgumentParser(prog="asc-onnx", description="Fuse ONNX subgraphs into Ascend custom ops.")
    ap.add_argument("--version", action="version", version=f"asc-onnx {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fuse", help="fuse a model and write the output folder")
    f.add_argument("model")
    f.add_argument("-o", "--out", required=True, help="output folder (must not exist unless --force)")
    f.add_argument("--force", action="store_true", help="replace an existing output folder")
    f.add_argument("--no-validate", action="store_true", help="skip the onnxruntime comparison")
    f.add_argument("--atc-domain", choices=("compat", "custom"), default="compat",
                   help="compat: fused ops in the default domain, one opset entry (released CANN); "
                        "custom: keep the asc_onnx domain (CANN with the empty-domain fix)")
    f.add_argument("--seed", type=int, default=0, help="seed of the validation inputs")
    f.add_argument("--soc", default="Ascend910B", help=SOC_HELP)
    f.add_argument("--no-emulate", action="store_true", help="skip running the generated kernels in the emulator")
    f.add_argument("--link-weights", action="store_true",
                   help="hard-link the model's external-data files into OUT (OUT then shares the input's weight "
                        "files: writing one writes the other) instead of reflinking or copying them")
    f.add_argument("--memory-budget", type=float, default=4.0, metavar="GIB",
                   help="weights (GiB) up to which the whole model is run to check it (default 4); a bigger model "
                        "is proven op by op by the kernel rung alone")
    f.add_argument("--keep-slower", action="store_true",
                   help="ship fused ops the timing model estimates slower than the nodes they replace")
    f.add_argument("--strict", action="store_true",
                   help="exit 1 when a kernel fails in the emulator (it is never shipped either way)")
    _select(f)
    _common(f)
    e = sub.add_parser("emulate", help="run every kernel of OUT/op_package in the emulator against onnxruntime")
    e.add_argument("out")
    e.add_argument("--model", help="original model for captured activations (default: the one OUT was made from)")
    e.add_argument("--seed", type=int, default=0)
    _common(e)
    b = sub.add_parser("build", help="build OUT/op_package with CANN and install it into OUT/opp")
    b.add_argument("out")
    c = sub.add_parser("convert", help="run OUT/atc.sh (ATC) for the ATC model")
    c.add_argument("out")
    c.add_argument("--soc-version", help="atc --soc_version (default: the one in atc.sh)")
    v = sub.add_parser("validate", help="compare MODEL with OUT/model.asc.onnx on onnxruntime")
    v.add_argument("model")
    v.add_argument("out")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--kernels", action="store_true",
                   help="run OUT/model.atc.onnx with every fused node executed by its emulated kernel instead")
    _common(v)
    i = sub.add_parser("inspect", help="print what would fuse and the near misses; writes nothing")
    i.add_argument("model")
    _select(i)
    _common(i)
    es = sub.add_parser("estimate", help="what the model costs on a chip, unfused as ATC would run it and fused "
                                         "(estimates of the timing model); writes nothing")
    es.add_argument("model")
    es.add_argument("--soc", default="Ascend910B", help=SOC_HELP)
    _select(es)
    _common(es)
    pt = sub.add_parser("patterns", help="list the patterns")
    _common(pt, shapes=False)
    return ap


def _options(a: argparse.Namespace) -> FuseOptions:
    if not hasattr(a, "progress"):
        a.progress = Progress(enabled=False if getattr(a, "quiet", False) else None)
    return FuseOptions(
        progress=a.progress,
        pattern_files=tuple(a.patterns), only=frozenset(getattr(a, "only", [])),
        skip=frozenset(getattr(a, "skip", [])), input_shapes=tuple(getattr(a, "input_shape", [])),
        input_values=tuple(getattr(a, "input_value", [])),
        atc_domain_mode=getattr(a, "atc_domain", "compat"), generic=not getattr(a, "no_generic", False),
        seed=getattr(a, "seed", 0), soc=getattr(a, "soc", "Ascend910B"), emulate=not getattr(a, "no_emulate", False),
        strict=getattr(a, "strict", False), keep_slower=getattr(a, "keep_slower", False),
        link_weights=getattr(a, "link_weights", False),
        memory_budget=int(getattr(a, "memory_budget", 4.0) * (1 << 30)))


def _cmd_fuse(a: argparse.Namespace) -> int:
    try:
        try:
            res = fuse(a.model, a.out, _options(a), validate=not a.no_validate, force=a.force)
        finally:
            a.progress.close()
        report, code = res.report, 0
    except ValidationError as exc:
        report = json.loads((Path(a.out) / REPORT).read_text())
        code = 1
        err = str(exc)
    if a.json:
        print(to_json(report), end="")
    else:
        lines, warnings = fuse_text(report, a.verbose, str(Path(a.out)))
        print("\n".join(lines))
        for w in warnings:
            print(f"asc-onnx: {w}", file=sys.stderr)
    if code:
        print(f"asc-onnx: {err}", file=sys.stderr)
    return code


def _cmd_validate(a: argparse.Namespace) -> int:
    if a.kernels:
        try:
            dep = validate_kernels(a.model, a.out, _options(a))
        finally:
            a.progress.close()
        if a.json:
            print(to_json({"ok": dep.ok, "emulated_nodes": dep.emulated_nodes, "error": dep.error,
                           "outputs": [asdict(o) for o in dep.outputs]}), end="")
        else:
            print(ValidationReport(dep.outputs, (), a.seed).table())
            print(f"{dep.emulated_nodes} fused nodes ran in the emulator")
            print("ok" if dep.ok else f"MISMATCH{': ' + dep.error if dep.error else ''}")
        return 0 if dep.ok else 1
    rep = validate(a.model, a.out, _options(a))
    if a.json:
        print(to_json({"ok": rep.ok, "outputs": [asdict(o) for o in rep.outputs]}), end="")
    else:
        print(rep.table())
        print("ok" if rep.ok else "MISMATCH")
    return 0 if rep.ok else 1


def _cmd_emulate(a: argparse.Namespace) -> int:
    try:
        checks = emulate(a.out, _options(a), a.model)
    finally:
        a.progress.close()
    if a.json:
        print(to_json([asdict(c) for c in checks]), end="")
    else:
        print(table(checks))
    return 0 if all(c.ok for c in checks) else 1


def _cann_home() -> Path:
    home = os.environ.get("ASCEND_HOME_PATH")
    if not home or not Path(home).is_dir():
        raise AscOnnxError("CANN is not installed here (ASCEND_HOME_PATH is not set): source the CANN set_env.sh "
                           "on a machine with CANN to build the op package or run ATC")
    return Path(home)


def _cmd_build(a: argparse.Namespace) -> int:
    _cann_home()
    pkg = Path(a.out) / "op_package"
    if not (pkg / "build.sh").is_file():
        raise AscOnnxError(f"{pkg}/build.sh does not exist; run `asc-onnx fuse` first")
    subprocess.run(["bash", str(pkg / "build.sh")], check=True)
    runs = sorted((pkg / "build_out").glob("custom_opp_*.run"))
    if not runs:
        raise AscOnnxError(f"the build wrote no custom_opp_*.run under {pkg / 'build_out'}")
    subprocess.run([str(runs[-1]), f"--install-path={Path(a.out).resolve() / 'opp'}"], check=True)
    print(f"installed {runs[-1].name} into {Path(a.out) / 'opp'}")
    return 0


def _cmd_convert(a: argparse.Namespace) -> int:
    _cann_home()
    script = Path(a.out) / "atc.sh"
    if not script.is_file():
        raise AscOnnxError(f"{script} does not exist; run `asc-onnx fuse` first")
    subprocess.run(["bash", str(script)] + ([a.soc_version] if a.soc_version else []), check=True)
    return 0


def _cmd_inspect(a: argparse.Namespace) -> int:
    try:
        res = inspect(a.model, _options(a))
    finally:
        a.progress.close()
    if a.json:
        print(to_json({"nodes": res.nodes_before, "fusions": list(res.fusions),
                       "near_misses": [asdict(n) for n in res.near_misses],
                       "control_flow_bodies": list(res.subgraphs),
                       "dims": [{**asdict(d), "sweep": list(d.sweep)} for d in res.dims]}), end="")
        return 0
    counts: dict[str, int] = {}
    for f in res.fusions:
        counts[f["rule"]] = counts.get(f["rule"], 0) + 1
    print(f"{a.model}: {res.nodes_before} nodes, {len(res.fusions)} fusions")
    if res.dims:
        print("dynamic dims (role: the values the timing model judges it at, unless --input-shape gives it):")
        for d in res.dims:
            print(f"  {d.name!r} in {', '.join(d.where)}: {d.role} ({d.sweep[0]} and {d.sweep[1]}), {d.why}")
    for rule_name, n in counts.items():
        print(f"  {rule_name:<20} x{n}")
    if a.verbose:
        for f in res.fusions:
            print(f"    {f['rule']}: {', '.join(f['nodes'])}")
    if res.near_misses:
        print(f"near misses ({len(res.near_misses)}):")
        for nm in res.near_misses:
            print(f"  {nm.rule} at {nm.node!r}: {nm.reason}")
    for sub in res.subgraphs:
        print(f"{sub['op']} {sub['node']!r} {sub['body']}: {sub['nodes']} nodes searched, {sub['fusions']} fused")
    return 0


def _cmd_estimate(a: argparse.Namespace) -> int:
    try:
        est = estimate_model(a.model, _options(a))
    finally:
        a.progress.close()
    if a.json:
        print(to_json(est), end="")
        return 0
    print(f"{a.model} on {est['soc']} ({'static' if est['static'] else 'dynamic'} shapes for ATC; estimates of the "
          f"timing model, nothing here ran on an NPU)")
    for b in est["bindings"]:
        by_kernel: dict[str, list[float]] = {}
        unmeasured = set()
        for n in b["nodes"]:
            if n.get("us") is not None:
                t = by_kernel.setdefault(n["kernel"], [0.0, 0.0, 0.0, 0])
                t[0] += n["us"]
                t[1] += n["slow_corner_us"]
                t[2] += n["fast_corner_us"]
                t[3] += 1
                if not n["measured"]:
                    unmeasured.add(n["kernel"])
        print(f"at {label(b['binding'])}, unfused as ATC would run it, by CANN kernel (us: table value, and the "
              f"fastest-to-slowest measured range):")
        for kname, (t, lo, hi, count) in sorted(by_kernel.items(), key=lambda x: -x[1][0]):
            print(f"  {kname:<22} x{count:<4} est. {t:10.1f}  ({lo:.1f} .. {hi:.1f})"
                  + ("  unmeasured" if kname in unmeasured else ""))
    lines = estimate_lines(est["estimates"])
    if lines:
        print(lines)
    for name, why in est["not_applied"].items():
        print(f"  not applied: {name} ({why})")
    return 0


def _cmd_patterns(a: argparse.Namespace) -> int:
    rules = load_rules(a.patterns)
    if a.json:
        print(json.dumps([{"name": r.name, "op_type": f"Asc{r.op_name}", "kernel": r.kernel, "family": r.family,
                           "variants": len(r.variants), "doc": r.doc} for r in rules], indent=1))
        return 0
    for r in rules:
        print(f"{r.name:<20} {r.kernel:<9} {r.family:<12} {r.doc}")
    return 0


COMMANDS = {"fuse": _cmd_fuse, "validate": _cmd_validate, "inspect": _cmd_inspect, "patterns": _cmd_patterns,
            "estimate": _cmd_estimate,
            "emulate": _cmd_emulate, "build": _cmd_build, "convert": _cmd_convert}


def use_environment() -> None:
    """The environment's cache folder and CANN sources (``ASC_ONNX_CACHE``, ``ASC_ONNX_CANN_SOURCE``) as the
    process's config: the one place asc-onnx reads them, first thing in :func:`run`, and in scripts that call the
    API in-process (the benches)."""
    config.set_default(config.Config.of(os.environ.get("ASC_ONNX_CACHE") or None,
                                        os.environ.get("ASC_ONNX_CANN_SOURCE") or None))


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the command; every failure is one line on stderr and an exit code."""
    a = parser().parse_args(argv)
    try:
        use_environment()
        return COMMANDS[a.cmd](a)
    except AscOnnxError as exc:
        if STOPPING_SIGNAL[0]:  # a wrapper of ours turned the interrupted import into an error message
            return stopped()
        print(f"asc-onnx: error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"asc-onnx: error: {' '.join(map(str, exc.cmd))} failed with exit code {exc.returncode}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise
    except OSError as exc:  # the machine refused: permissions, a full disk, a vanished folder
        if a.verbose:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        print(f"asc-onnx: error: cannot access{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - one line for users, the traceback with -v
        if STOPPING_SIGNAL[0]:  # a signal inside an import arrives as ImportError("initialization failed")
            return stopped()
        if a.verbose:
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"asc-onnx: internal error: {type(exc).__name__}: {first} (run with -v for the traceback)",
              file=sys.stderr)
        return 3


#: In-process entry (tests, embedding); the console script is :func:`asc_onnx.entry.main`, which adds signals.
main = run
