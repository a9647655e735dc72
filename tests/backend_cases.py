"""The ONNX backend cases shipped inside the onnx package, made by importing only the case modules a test needs:
``collect_testcases`` runs every operator's (9 s, at collection, on every worker)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Sequence


def cases(modules: Sequence[str], keep: Callable[[str], bool]) -> list:
    """The cases the case modules ``modules`` (``onnx/backend/test/case/node/<module>.py``) make whose names
    ``keep`` accepts, sorted by name."""
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module in modules:
            importlib.import_module(f"{node_cases.__name__}.{module}")
    made = getattr(node_cases, "_NodeTestCases", None)
    if made is None:  # (an onnx that keeps them elsewhere: every case, the slow way)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            made = node_cases.collect_testcases(None)
    return sorted((c for c in made if keep(c.name)), key=lambda c: c.name)
