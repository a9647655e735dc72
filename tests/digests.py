"""Digests of what every fuse run of the test suite generated, to prove that a restructuring changes no output.

With ``ASC_ONNX_DIGESTS=DIR`` set, ``conftest.py`` wraps :func:`asc_onnx.fuse` so that each call appends one JSON
line to ``DIR/<pid>.jsonl``: the input model's digest, the options, and the SHA-256 of every generated file
(both output models, the op package and atc.sh; the reports are left out: they hold paths and timings).
The CLI subprocess runs of the tests are not recorded; every in-process ``fuse`` is.

    ASC_ONNX_DIGESTS=/tmp/before python3 -m pytest tests      # before the change
    ASC_ONNX_DIGESTS=/tmp/after python3 -m pytest tests       # after it
    python3 tests/digests.py compare /tmp/before /tmp/after   # exit 1 on any difference
    python3 tests/digests.py summary /tmp/before              # how many runs, and one digest of them all
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

#: Output files that vary from run to run (paths, timings) and carry nothing generated.
VOLATILE = {"report.json", "report.html"}


def _sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _model_digest(model: Any) -> str:
    """The model's bytes, with its external-data files' where it has them."""
    if not isinstance(model, (str, os.PathLike)):
        return _sha(model.SerializeToString(deterministic=True))
    import onnx
    from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors, uses_external_data

    path = Path(model)
    proto = onnx.load(path, load_external_data=False)
    files = sorted({ExternalDataInfo(t).location for t in _get_all_tensors(proto) if uses_external_data(t)})
    return _sha(b"".join([path.read_bytes(), *((path.parent / f).read_bytes() for f in files)]))


def _options(options: Any) -> str:
    """The options as stable text: sets sorted (their order follows the run's hash seed), pattern files by
    their contents (their paths are temporary folders)."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if f.name == "progress" or (f.name in ("judge", "keep_slower") and not options.judge):
            continue  # (a run without the ship guard generates what runs before the guard existed did)
        if f.name == "config" and value is None:
            continue  # (the process default: what runs before the field existed used)
        if f.name == "pattern_files":
            value = [_sha(Path(p).read_bytes()) if Path(p).is_file() else str(p) for p in value]
        elif isinstance(value, (set, frozenset)):
            value = sorted(map(str, value))
        fields[f.name] = value
    return json.dumps(fields, sort_keys=True, default=str)


def outputs(result: Any) -> dict[str, str]:
    """Generated file -> SHA-256: the written folder's files, or, for a run without one, both models and every
    kernel source."""
    if result.out_dir is not None and Path(result.out_dir).is_dir():
        root = Path(result.out_dir)
        return {str(p.relative_to(root)): _sha(p.read_bytes()) for p in sorted(root.rglob("*"))
                if p.is_file() and p.name not in VOLATILE and not p.name.startswith(".")}
    out = {"model.asc.onnx": _sha(result.asc_model.SerializeToString(deterministic=True))}
    if result.atc_model is not None:
        out["model.atc.onnx"] = _sha(result.atc_model.SerializeToString(deterministic=True))
    for k in result.kernels:
        out.update({f"op_package/{path}": _sha(text) for path, text in sorted(k.files.items())})
    return out


def checks(result: Any) -> list[str]:
    """What the emulator computed and counted in every kernel check of the run (error, GM bytes, blocks, the timing
    model's estimate): where text moved into a header, these show that the kernels still compute and move the same."""
    return [f"{c.op_type}|{c.inputs}|{list(c.shape)}|{c.dtype}|{c.max_abs!r}|{c.gm_bytes}|{c.block_dim}|"
            f"{c.est_us!r}|{c.ok}" for c in result.kernel_checks]


def install(folder: Path) -> None:
    """Wrap :func:`asc_onnx.fuse` (and ``asc_onnx.api.fuse``) to record every run's digests in ``folder``."""
    import asc_onnx
    import asc_onnx.api as api
    from asc_onnx.options import FuseOptions

    folder.mkdir(parents=True, exist_ok=True)
    real = api.fuse

    def fuse(model, out_dir=None, options=FuseOptions(), validate=True, force=False):
        result = real(model, out_dir, options, validate, force)
        line = {"input": _model_digest(model), "options": _options(options), "validate": validate,
                "written": out_dir is not None, "outputs": outputs(result), "checks": checks(result)}
        with open(folder / f"{os.getpid()}.jsonl", "a") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")
        return result

    api.fuse = fuse
    asc_onnx.fuse = fuse


def load(folder: Path, what: str = "outputs") -> dict[str, Any]:
    """Run key (input, options, whether a folder was written) -> its outputs' digests (``what="checks"``: its kernel
    checks); a key run twice must agree with itself."""
    runs: dict[str, Any] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for text in path.read_text().splitlines():
            line = json.loads(text)
            if what not in line:
                continue
            key = _sha(line["input"] + line["options"] + str(line["validate"]) + str(line["written"]))
            if runs.setdefault(key, line[what]) != line[what]:
                raise SystemExit(f"{path}: one run's outputs differ from an earlier identical run's: the outputs "
                                 "are not deterministic, and no comparison can prove anything")
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="every run recorded in both: same digests")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    s = sub.add_parser("summary", help="the number of runs and one digest over all of them")
    s.add_argument("folder", type=Path)
    a = ap.parse_args()
    if a.cmd == "summary":
        runs = load(a.folder)
        files = sum(len(v) for v in runs.values())
        print(f"{len(runs)} fuse runs, {files} generated files; digest of the list "
              f"{_sha(json.dumps(runs, sort_keys=True))}")
        return 0
    before, after = load(a.before), load(a.after)
    common = sorted(set(before) & set(after))
    changed = [k for k in common if before[k] != after[k]]
    print(f"{len(common)} runs in both ({len(before)} before, {len(after)} after); {len(changed)} changed")
    for k in changed[:20]:
        diff = sorted(set(before[k].items()) ^ set(after[k].items()))
        print(f"  {k[:12]}: {', '.join(sorted({name for name, _ in diff}))}")
    cb, ca = load(a.before, "checks"), load(a.after, "checks")
    both = sorted(set(cb) & set(ca))
    moved = [k for k in both if cb[k] != ca[k]]
    print(f"kernel checks of {len(both)} runs in both: {len(moved)} changed")
    for k in moved[:20]:
        print(f"  {k[:12]}: " + "; ".join(sorted(set(cb[k]) ^ set(ca[k])))[:400])
    return 1 if changed or moved else 0


if __name__ == "__main__":
    sys.exit(main())
