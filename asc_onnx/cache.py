"""Where asc-onnx keeps what outlives a run: compiled emulator programs and the locks of output folders.

The config's ``cache_dir`` (:mod:`asc_onnx.config`): ``~/.cache/asc-onnx`` unless the caller says otherwise; the only
place a run writes outside its output folder."""

from __future__ import annotations

from pathlib import Path

from . import config


def cache_root() -> Path:
    """The cache folder (absolute; not created here)."""
    return config.current().cache_dir
