"""Data flows one way: a stage module imports only stages to its left (DESIGN.md), and the
public API stays what ``__all__`` says."""

from __future__ import annotations

import ast
from pathlib import Path

import asc_onnx

PKG = Path(asc_onnx.__file__).resolve().parent
#: Stage order; helpers (errors, options, graph, pattern) may be imported by anyone.
STAGES = ["load", "canonicalize", "match", "chains", "rewrite", "validate", "report", "output", "api", "cli"]
HELPERS = {"errors", "options", "graph", "pattern", "registry"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_stages_import_only_to_their_left():
    for i, stage in enumerate(STAGES):
        allowed = set(STAGES[:i]) | HELPERS | {"__init__"}
        bad = _imports(PKG / f"{stage}.py") - allowed
        if stage == "match":
            bad -= {"chains"}  # the generic pass is part of the match stage
        assert not bad, f"{stage} imports {bad}, which are later stages"


def test_public_api():
    assert set(asc_onnx.__all__) >= {"fuse", "inspect", "validate", "FuseOptions", "FuseResult", "AscOnnxError"}
    for name in asc_onnx.__all__:
        assert hasattr(asc_onnx, name), name
