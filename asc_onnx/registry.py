"""Load rules: the built-in pattern modules (package data) and user pattern files, one loader.

A pattern module is a Python file that defines ``RULES``, a list of
:class:`asc_onnx.pattern.Rule`. Rule names must be unique across all loaded modules.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from .errors import AscOnnxError
from .kernels import CLASSES
from .pattern import Rule

_HERE = Path(__file__).resolve().parent
#: The built-in pattern files: the repository's top-level ``patterns/`` folder, which a wheel installs as
#: ``asc_onnx/patterns/`` (package data). They are plain pattern files, loaded exactly as a user's are.
BUILTIN_DIR = next((d for d in (_HERE / "patterns", _HERE.parent / "patterns") if d.is_dir()), _HERE / "patterns")


def builtin_files() -> list[Path]:
    """The built-in pattern modules, in name order."""
    files = sorted(p for p in BUILTIN_DIR.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise AscOnnxError(f"the built-in patterns are missing from {BUILTIN_DIR}: reinstall asc-onnx")
    return files


def load_file(path: str | Path) -> list[Rule]:
    """Import one pattern module by path and return its rules tagged with the module's name."""
    p = Path(path)
    if not p.is_file():
        raise AscOnnxError(f"pattern file {p} does not exist")
    builtin = p.resolve().parent == BUILTIN_DIR
    mod_name = f"asc_onnx.patterns.{p.stem}" if builtin else f"asc_onnx_user_patterns.{p.stem}"
    if mod_name in sys.modules and builtin:
        module = sys.modules[mod_name]
    else:
        spec = importlib.util.spec_from_file_location(mod_name, p)
        if spec is None or spec.loader is None:
            raise AscOnnxError(f"pattern file {p} cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # a user's file: report it in one line
            del sys.modules[mod_name]
            raise AscOnnxError(f"pattern file {p} failed to load: {type(exc).__name__}: {exc}") from None
    rules = getattr(module, "RULES", None)
    if not isinstance(rules, (list, tuple)) or not all(isinstance(r, Rule) for r in rules):
        raise AscOnnxError(f"pattern file {p} must define RULES, a list of asc_onnx.pattern.Rule")
    for r in rules:
        if r.kernel not in CLASSES:
            raise AscOnnxError(f"pattern file {p}: rule {r.name} names the kernel class {r.kernel!r}; the classes "
                               f"are {', '.join(sorted(CLASSES))}")
    return [dataclasses.replace(r, family=p.stem) for r in rules]


def load_rules(extra_files: Iterable[str | Path] = (), only: Iterable[str] = (),
               skip: Iterable[str] = ()) -> list[Rule]:
    """Built-in rules plus user rules, filtered by ``only``/``skip`` (unknown names are an error)."""
    rules: list[Rule] = []
    for f in [*builtin_files(), *map(Path, extra_files)]:
        rules.extend(load_file(f))
    seen: dict[str, str] = {}
    for r in rules:
        if r.name in seen:
            raise AscOnnxError(f"rule name {r.name!r} is defined in both {seen[r.name]} and {r.family}")
        seen[r.name] = r.family
    only, skip = set(only), set(skip)
    unknown = sorted((only | skip) - set(seen))
    if unknown:
        raise AscOnnxError(f"unknown pattern name(s) {', '.join(unknown)}; `asc-onnx patterns` lists them")
    return [r for r in rules if (not only or r.name in only) and r.name not in skip]


def split_generic(rules: Sequence[Rule]) -> tuple[list[Rule], list[Rule]]:
    """Separate pattern rules from the generic-pass rules (the match stage runs those in their classes' order)."""
    return [r for r in rules if not r.generic], [r for r in rules if r.generic]
