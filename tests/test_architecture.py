"""Data flows one way: a stage module imports only stages to its left (DESIGN.md), and the
public API stays what ``__all__`` says."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import asc_onnx

PKG = Path(asc_onnx.__file__).resolve().parent
#: Stage order (modules or sub-packages); helpers may be imported by anyone.
STAGES = ["load", "canonicalize_attention", "canonicalize", "match", "checks", "rewrite", "plan", "package",
          "validate", "emulator", "verify_kernels", "atc_passes", "atc_cost", "estimate", "verify_deployed", "prove",
          "decide", "report", "report_text", "report_charts", "report_html", "output", "api", "cli", "entry"]
#: Helpers any stage may import. ``kernels`` is the kernel classes: a library under the stages, not a stage.
HELPERS = {"cache", "config", "dtypes", "errors", "options", "graph", "graph_edit", "pattern", "fusion", "registry",
           "soc", "progress", "dims", "shape_values", "kernels", "hardware", "model_text", "overlap", "causal",
           "importer", "__init__"}
#: The kernel classes' own packages, and the modules they share.
KERNELS = PKG / "kernels"
CLASS_PACKAGES = sorted(p.name for p in KERNELS.iterdir() if (p / "__init__.py").is_file())


def _imports(path: Path) -> set[str]:
    """Top-level asc_onnx modules a file imports (relative imports resolved)."""
    depth = len(path.relative_to(PKG).parts) - 1  # 0 for asc_onnx/x.py, 1 for asc_onnx/emulator/x.py
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
    return sorted((PKG / stage).rglob("*.py")) if (PKG / stage).is_dir() else [PKG / f"{stage}.py"]


def _kernel_imports(path: Path) -> set[str]:
    """The modules under asc_onnx/kernels a file imports, as paths relative to it (``vector``, ``row/lower``)."""
    here = path.relative_to(KERNELS).parent.parts
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(here)[:len(here) - (node.level - 1)] if node.level - 1 <= len(here) else None
            if base is None:
                continue
            parts = base + [p for p in (node.module or "").split(".") if p]
            if node.module is None:
                out.update("/".join(parts + [a.name]) for a in node.names)
            elif parts:
                out.add("/".join(parts))
    return out


@pytest.mark.fast
def test_stages_import_only_to_their_left():
    for i, stage in enumerate(STAGES):
        allowed = set(STAGES[: i + 1]) | HELPERS
        for f in _files(stage):
            bad = _imports(f) - allowed
            assert not bad, f"{f.relative_to(PKG)} imports {bad}, which are later stages"


@pytest.mark.fast
def test_helpers_import_only_helpers():
    """A helper any stage may import cannot itself reach into a stage: that would be an import circle."""
    for helper in sorted(HELPERS - {"__init__"}):
        for f in _files(helper):
            bad = _imports(f) - HELPERS - {helper}
            assert not bad, f"{f.relative_to(PKG)} is a helper but imports the stages {bad}"


@pytest.mark.fast
def test_no_stage_branches_on_a_kernel_class():
    """The stages ask the class registry (``kernels.of``) what a kernel class is and has: no module outside the
    kernel packages names a class's IR type or compares a class's name."""
    irs = [f"{cls.capitalize()}Kernel" for cls in CLASS_PACKAGES]
    for f in sorted(PKG.rglob("*.py")):
        if KERNELS in f.parents:
            continue
        text = f.read_text()
        for ir in irs:
            assert f"isinstance(k.ir, {ir})" not in text and f"isinstance(ir, {ir})" not in text, f
        assert 'kernel == "' not in text and "kernel != \"" not in text, f


@pytest.mark.fast
def test_kernel_classes_share_only_the_shared_modules():
    """A class package imports its own modules, the modules every class shares (``kernels/*.py``) and helpers,
    never another class's: what two classes need lives in a shared module."""
    shared = {p.stem for p in KERNELS.glob("*.py")} - {"__init__"}
    for cls in CLASS_PACKAGES:
        for f in sorted((KERNELS / cls).glob("*.py")):
            for mod in _kernel_imports(f):
                top = mod.split("/")[0]
                assert top in shared or top == cls, f"{f.relative_to(PKG)} imports kernels/{mod}"
    for f in sorted(KERNELS.glob("*.py")):
        if f.name in ("__init__.py",):
            continue
        bad = {m for m in _kernel_imports(f) if m.split("/")[0] in CLASS_PACKAGES}
        assert not bad, f"the shared module {f.name} imports the classes {bad}"


@pytest.mark.fast
def test_every_class_package_has_its_roles():
    """Every registered class has a lowering, a renderer and an emulator driver with the functions the stages call."""
    from asc_onnx.kernels import CLASSES

    assert set(CLASS_PACKAGES) <= set(CLASSES)
    for name in CLASS_PACKAGES:
        cls = CLASSES[name]
        for fn in ("kernel_source", "tiling_header", "tiling_calc", "host_source", "struct_name", "tiling_call"):
            assert callable(getattr(cls.render, fn, None)), (name, fn)
        assert isinstance(cls.render.REFUSALS, dict) and cls.render.REFUSALS
        for fn in ("main_source", "output_shapes", "write_inputs"):
            assert callable(getattr(cls.driver, fn, None)), (name, fn)


@pytest.mark.fast
def test_every_module_is_placed():
    mods = {p.stem for p in PKG.glob("*.py")} | {p.name for p in PKG.iterdir() if p.is_dir() and
                                                  (p / "__init__.py").exists() and p.name != "patterns"}
    assert mods - {"__main__"} <= set(STAGES) | HELPERS


@pytest.mark.fast
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


@pytest.mark.fast
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


@pytest.mark.fast
def test_every_rule_names_a_registered_kernel_class():
    from asc_onnx.kernels import CLASSES, of

    rules = asc_onnx.load_rules()
    assert rules and {r.kernel for r in rules} <= set(CLASSES)
    for name, cls in CLASSES.items():
        assert of(name) is cls and cls.refusals  # every class states its tiling's refusals


@pytest.mark.fast
def test_nothing_below_the_command_line_reads_the_environment():
    """Configuration is one frozen value (asc_onnx.config), which the command line reads from the environment
    (cli.use_environment); no other module of the package reads a variable (passing the environment on to a child
    process, or setting one for onnxruntime, is not reading it)."""
    reads = []
    for path in sorted(PKG.rglob("*.py")):
        if path.name == "cli.py" and path.parent == PKG:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            env = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                f = node.func
                if f.attr == "getenv" and isinstance(f.value, ast.Name) and f.value.id == "os":
                    env = "os.getenv"
                elif f.attr == "get" and ast.unparse(f.value) == "os.environ":
                    env = "os.environ.get"
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
                    ast.unparse(node.value) == "os.environ":
                env = "os.environ[...]"
            if env:
                reads.append(f"{path.relative_to(PKG)}:{node.lineno} {env}")
    assert not reads, reads


@pytest.mark.fast
def test_no_stage_reads_a_field_of_a_class_ir():
    """Outside the kernel packages, a kernel's IR is read only through what every class's IR has (the
    ``KernelIR`` protocol); anything class-specific is asked of the class (its driver, schedule or budget)."""
    from asc_onnx.kernels.base import KernelIR, protocol_members

    common = protocol_members(KernelIR)
    assert {"dtypes", "snake", "op_type"} <= common
    for f in sorted(PKG.rglob("*.py")):
        if KERNELS in f.parents:
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            v = node.value
            held = (isinstance(v, ast.Attribute) and v.attr == "ir") or (isinstance(v, ast.Name) and v.id == "ir")
            assert not held or node.attr in common, \
                f"{f.relative_to(PKG)}:{node.lineno} reads the IR field {node.attr!r}, which is its class's own"
