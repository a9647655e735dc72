"""asc-onnx: fuse exported ONNX models into custom ops for Huawei Ascend NPUs.

Public API::

    import asc_onnx
    result = asc_onnx.fuse("model.onnx", "out/")     # FuseResult
    plan = asc_onnx.inspect("model.onnx")           # InspectResult
    report = asc_onnx.validate("model.onnx", "out/")  # ValidationReport

The names are imported on first use: ``import asc_onnx`` stays cheap, so the command line can
install its signal handlers before onnx and onnxruntime load (a Ctrl-C at start-up is one line).
"""

from __future__ import annotations

import os
import signal
import sys

if sys.argv[:1] == ["-m"]:  # ``python -m asc_onnx`` locating its __main__: nothing to clean up yet
    # a Ctrl-C or SIGTERM before entry.py installs its handlers (a loaded machine takes tens of ms to get there) is
    # the same one line as after, not a KeyboardInterrupt inside the import machinery
    def _early_stop(signum: int, frame: object) -> None:
        os.write(2, b"asc-onnx: interrupted\n" if signum == signal.SIGINT else b"asc-onnx: terminated\n")
        os._exit(130 if signum == signal.SIGINT else 143)

    signal.signal(signal.SIGINT, _early_stop)
    signal.signal(signal.SIGTERM, _early_stop)

import importlib  # noqa: E402
from typing import Any  # noqa: E402

__version__ = "0.1.0"

# onnxruntime 1.32 records telemetry when it loads: a session file (.ses) in TMPDIR and a database under
# ~/.cache/Microsoft. A run of asc-onnx writes nothing outside its output folder and its own cache, so it asks
# onnxruntime not to (set ORT_DISABLE_TELEMETRY=0 to let it); this must happen before onnxruntime loads.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

_WHERE = {
    "fuse": "api", "inspect": "api", "validate": "api", "validate_kernels": "api", "emulate": "api",
    "FuseResult": "api",
    "InspectResult": "api", "AscOnnxError": "errors", "ValidationError": "errors", "FuseOptions": "options",
    "ANY": "pattern", "Const": "pattern", "Rule": "pattern", "op": "pattern", "rule": "pattern",
    "load_rules": "registry", "FusedOp": "rewrite", "TOLERANCES": "validate", "ValidationReport": "validate",
}

__all__ = ["__version__", *_WHERE]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'asc_onnx' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
