"""Writing the output folder atomically: build it in a temporary sibling, then rename.

A failed run leaves no half-written folder, an existing folder is replaced only with
``force``, and external weight files are stream-copied (never read into memory).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import onnx
from onnx import ModelProto

from .errors import AscOnnxError


def check_target(out_dir: Path, force: bool) -> None:
    """Refuse an existing output folder without ``force`` (checked before any work)."""
    if out_dir.exists() and not force:
        raise AscOnnxError(f"output folder {out_dir} exists; pass --force to replace it")
    if out_dir.exists() and not out_dir.is_dir():
        raise AscOnnxError(f"output path {out_dir} exists and is not a folder")


def write_atomic(out_dir: Path, force: bool, fill: Callable[[Path], None]) -> None:
    """Call ``fill(tmp)`` on a fresh temporary folder, then move it to ``out_dir``."""
    check_target(out_dir, force)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        fill(tmp)
        if out_dir.exists():
            old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
            out_dir.rename(old)
            tmp.rename(out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def copy_external(files: Sequence[str], src_dir: Path, dst_dir: Path) -> None:
    """Stream-copy external-data files, keeping their relative locations."""
    for rel in files:
        dst = dst_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            shutil.copyfile(src_dir / rel, dst)


def write_files(root: Path, files: dict[str, str]) -> None:
    """Write text files under ``root``; shell scripts get the executable bit."""
    for rel, text in sorted(files.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.endswith(".sh"):
            path.chmod(0o755)


def save_model(model: ModelProto, path: Path) -> None:
    """Save a model whose external tensors keep their references (written beside it)."""
    try:
        onnx.save(model, str(path))
    except ValueError as exc:  # protobuf over 2 GB
        raise AscOnnxError(f"cannot write {path.name}: {exc}; store the weights as external data") from None
