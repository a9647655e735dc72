"""``asc-onnx`` command line: fuse, validate, inspect, patterns.

Exit codes: 0 success, 1 validation mismatch, 2 bad input or usage, 3 internal error
(run with -v for the traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from . import __version__
from .api import REPORT, fuse, inspect, validate
from .errors import AscOnnxError, ValidationError
from .options import FuseOptions
from .registry import load_rules
from .report import summary


def _shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = text.rpartition(":")
    try:
        values = tuple(int(d) for d in dims.split(",") if d.strip())
    except ValueError:
        values = ()
    if not sep or not name or not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected NAME:D0,D1,... with positive dims, got {text!r}")
    return name, values


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _common(p: argparse.ArgumentParser, shapes: bool = True) -> None:
    p.add_argument("--patterns", action="append", default=[], metavar="FILE.py",
                   help="extra pattern module (defines RULES); may be repeated")
    if shapes:
        p.add_argument("--input-shape", action="append", default=[], type=_shape_arg, metavar="NAME:D0,D1",
                       help="concrete dims for a model input (dynamic dims); may be repeated")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument("-v", "--verbose", action="store_true", help="more detail (and tracebacks)")


def _select(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", type=_names, default=[], metavar="A,B", help="fuse only these patterns")
    p.add_argument("--skip", type=_names, default=[], metavar="A,B", help="never fuse these patterns")
    p.add_argument("--no-generic", action="store_true", help="skip the generic elementwise-chain pass")


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
    _select(f)
    _common(f)
    v = sub.add_parser("validate", help="compare MODEL with OUT/model.asc.onnx on onnxruntime")
    v.add_argument("model")
    v.add_argument("out")
    v.add_argument("--seed", type=int, default=0)
    _common(v)
    i = sub.add_parser("inspect", help="print what would fuse and the near misses; writes nothing")
    i.add_argument("model")
    _select(i)
    _common(i)
    pt = sub.add_parser("patterns", help="list the patterns")
    _common(pt, shapes=False)
    return ap


def _options(a: argparse.Namespace) -> FuseOptions:
    return FuseOptions(
        pattern_files=tuple(a.patterns), only=frozenset(getattr(a, "only", [])),
        skip=frozenset(getattr(a, "skip", [])), input_shapes=tuple(getattr(a, "input_shape", [])),
        atc_domain_mode=getattr(a, "atc_domain", "compat"), generic=not getattr(a, "no_generic", False),
        seed=getattr(a, "seed", 0))


def _cmd_fuse(a: argparse.Namespace) -> int:
    try:
        res = fuse(a.model, a.out, _options(a), validate=not a.no_validate, force=a.force)
        report, code = res.report, 0
    except ValidationError as exc:
        report = json.loads((Path(a.out) / REPORT).read_text())
        code = 1
        err = str(exc)
    if a.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print(summary(report, a.verbose))
        val = report.get("validation")
        if val:
            print(f"validation ({'ok' if val['ok'] else 'FAILED'}): {len(val['outputs'])} outputs compared, "
                  f"max abs error {max((o['max_abs'] for o in val['outputs']), default=0):.3e}")
        print(f"wrote {Path(a.out)}/")
    if code:
        print(f"asc-onnx: {err}", file=sys.stderr)
    return code


def _cmd_validate(a: argparse.Namespace) -> int:
    rep = validate(a.model, a.out, _options(a))
    if a.json:
        print(json.dumps({"ok": rep.ok, "outputs": [asdict(o) for o in rep.outputs]}, indent=1, default=str))
    else:
        print(rep.table())
        print("ok" if rep.ok else "MISMATCH")
    return 0 if rep.ok else 1


def _cmd_inspect(a: argparse.Namespace) -> int:
    res = inspect(a.model, _options(a))
    if a.json:
        print(json.dumps({"nodes": res.nodes_before, "fusions": list(res.fusions),
                          "near_misses": [asdict(n) for n in res.near_misses]}, indent=1))
        return 0
    counts: dict[str, int] = {}
    for f in res.fusions:
        counts[f["rule"]] = counts.get(f["rule"], 0) + 1
    print(f"{a.model}: {res.nodes_before} nodes, {len(res.fusions)} fusions")
    for rule_name, n in counts.items():
        print(f"  {rule_name:<20} x{n}")
    if a.verbose:
        for f in res.fusions:
            print(f"    {f['rule']}: {', '.join(f['nodes'])}")
    if res.near_misses:
        print(f"near misses ({len(res.near_misses)}):")
        for nm in res.near_misses:
            print(f"  {nm.rule} at {nm.node!r}: {nm.reason}")
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


COMMANDS = {"fuse": _cmd_fuse, "validate": _cmd_validate, "inspect": _cmd_inspect, "patterns": _cmd_patterns}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``asc-onnx`` console script."""
    a = parser().parse_args(argv)
    try:
        return COMMANDS[a.cmd](a)
    except AscOnnxError as exc:
        print(f"asc-onnx: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("asc-onnx: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line for users, the traceback with -v
        if a.verbose:
            raise
        print(f"asc-onnx: internal error: {type(exc).__name__}: {exc} (run with -v for the traceback)",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
