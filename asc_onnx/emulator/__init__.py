"""The Ascend C CPU emulator: headers under ``include/`` and a harness that compiles and runs kernels."""

from __future__ import annotations

from pathlib import Path

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
