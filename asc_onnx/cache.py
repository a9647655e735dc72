"""Where asc-onnx keeps what outlives a run: compiled emulator programs and the locks of output folders.

``ASC_ONNX_CACHE`` or ``~/.cache/asc-onnx``; the only place a run writes outside its output folder."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache folder (absolute; not created here)."""
    root = os.environ.get("ASC_ONNX_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "asc-onnx")
    return Path(root).resolve()
