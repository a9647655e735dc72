"""asc-onnx: fuse exported ONNX models into custom ops for Huawei Ascend NPUs.

Public API::

    import asc_onnx
    result = asc_onnx.fuse("model.onnx", "out/")     # FuseResult
    plan = asc_onnx.inspect("model.onnx")           # InspectResult
    report = asc_onnx.validate("model.onnx", "out/")  # ValidationReport
"""

from __future__ import annotations

__version__ = "0.1.0"

from .api import FuseResult, InspectResult, fuse, inspect, validate, validate_kernels
from .errors import AscOnnxError, ValidationError
from .options import FuseOptions
from .pattern import ANY, Const, Rule, op, rule
from .registry import load_rules
from .rewrite import FusedOp
from .validate import TOLERANCES, ValidationReport

__all__ = [
    "__version__", "fuse", "inspect", "validate", "validate_kernels", "FuseResult", "InspectResult", "FuseOptions",
    "FusedOp",
    "ValidationReport", "TOLERANCES", "AscOnnxError", "ValidationError", "Rule", "rule", "op", "Const", "ANY",
    "load_rules",
]
