"""Data flows one way: a stage module imports only stages to its left (DESIGN.md), and the
public API stays what ``__all__`` says."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import asc_onnx

PKG = Path(asc_onnx.__file__).resolve().parent
#: Stage order (modules or sub-packages); helpers may be imported by anyone.
STAGES = ["load", "canonicalize", "chains", "match", "checks", "rewrite", "lower", "codegen", "kernels", "package",
          "validate", "emulator", "verify_kernels", "verify_deployed", "report", "report_html", "output", "api", "cli",
          "entry"]
HELPERS = {"cache", "errors", "options", "graph", "pattern", "fusion", "registry", "soc", "progress",
           "shape_values", "__init__"}


def _imports(path: Path) -> set[str]:
    """Top-level asc_onnx modules a file imports (relative imports resolved)."""
    depth = len(path.relative_to(PKG).parts) - 1  # 0 for asc_onnx/x.py, 1 for asc_onnx/codegen/x.py
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("asc_onnx."):
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("asc_onnx."))
        elif isinstance(node, ast.ImportFrom) and node.level:
            parts = (node.module or "").split(".")
            if node.level - 1 == depth and parts[0]:
                out.add(parts[0])
            elif node.level - 1 < depth:
                out.add(path.relative_to(PKG).parts[0])  # within its own sub-package
    return out


def _files(stage: str) -> list[Path]:
    return sorted((PKG / stage).glob("*.py")) if (PKG / stage).is_dir() else [PKG / f"{stage}.py"]


def test_stages_import_only_to_their_left():
    for i, stage in enumerate(STAGES):
        allowed = set(STAGES[: i + 1]) | HELPERS
        for f in _files(stage):
            bad = _imports(f) - allowed
            assert not bad, f"{f.relative_to(PKG)} imports {bad}, which are later stages"


def test_helpers_import_only_helpers():
    """A helper any stage may import cannot itself reach into a stage: that would be an import circle."""
    for helper in sorted(HELPERS - {"__init__"}):
        for f in _files(helper):
            bad = _imports(f) - HELPERS - {helper}
            assert not bad, f"{f.relative_to(PKG)} is a helper but imports the stages {bad}"


def test_no_stage_after_lowering_branches_on_a_kernel_class_ir_type():
    """The stages after lowering ask the class registry (``kernels.of``) what a kernel class is and has; only the
    emulator's drivers still tell the row class apart (issue 17 moves them into the classes)."""
    for stage in ("package", "verify_kernels", "verify_deployed", "api", "report", "output"):
        for f in _files(stage):
            text = f.read_text()
            for ir in ("PointwiseKernel", "RowKernel", "MatmulKernel"):
                assert f"isinstance(k.ir, {ir})" not in text and f"isinstance(ir, {ir})" not in text, f
            assert 'kernel == "' not in text, f


def test_every_module_is_placed():
    mods = {p.stem for p in PKG.glob("*.py")} | {p.name for p in PKG.iterdir() if p.is_dir() and
                                                  (p / "__init__.py").exists() and p.name != "patterns"}
    assert mods - {"__main__"} <= set(STAGES) | HELPERS


def test_public_api():
    assert set(asc_onnx.__all__) >= {"fuse", "inspect", "validate", "FuseOptions", "FuseResult", "AscOnnxError"}
    for name in asc_onnx.__all__:
        assert hasattr(asc_onnx, name), name


def test_installed_package_carries_every_subpackage_and_the_emulator_headers(tmp_path):
    """Build the wheel as a user's `pip install .` would and look inside it."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"  # a clean copy: an in-tree build/ folder would hide a missing package
    shutil.copytree(PKG.parent, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".git", "models", "bench", "tests", "out"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(src)],
                   check=True, capture_output=True)
    names = set(zipfile.ZipFile(next(tmp_path.glob("asc_onnx-*.whl"))).namelist())
    for p in PKG.rglob("*"):
        if p.suffix in (".py", ".h") and "__pycache__" not in p.parts:
            assert f"asc_onnx/{p.relative_to(PKG).as_posix()}" in names, p
    # The built-in patterns: the top-level folder, installed as package data where the loader finds them.
    patterns = sorted((PKG.parent / "patterns").glob("*.py"))
    assert patterns and all(f"asc_onnx/patterns/{p.name}" in names for p in patterns)


def test_builtin_patterns_load_through_the_user_loader():
    from asc_onnx import registry

    assert registry.BUILTIN_DIR == PKG.parent / "patterns"
    rules = registry.load_rules()
    assert {r.family for r in rules} == {p.stem for p in registry.builtin_files()}
    # A copy of a built-in file loads as a user's --patterns file: the same loader, no package imports.
    with pytest.raises(asc_onnx.AscOnnxError, match="defined in both"):
        registry.load_rules([registry.BUILTIN_DIR / "silu.py"])


def test_ruff_is_clean():
    """The style the README promises, checked where CI runs (ruff is a test extra)."""
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]  # the repository (asc_onnx itself may be an installed copy)
    ruff = [sys.executable, "-m", "ruff"] if shutil.which("ruff") is None else ["ruff"]
    proc = subprocess.run([*ruff, "check", "asc_onnx", "tests", "models", "bench"], cwd=root,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]


def test_every_rule_names_a_registered_kernel_class():
    from asc_onnx.kernels import CLASSES, of

    rules = asc_onnx.load_rules()
    assert rules and {r.kernel for r in rules} <= set(CLASSES)
    for name, cls in CLASSES.items():
        assert of(name) is cls and cls.refusals  # every class states its tiling's refusals
