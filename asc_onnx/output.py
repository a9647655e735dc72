"""Writing the output folder without ever losing data.

The folder is built in a temporary sibling and renamed into place only when it is complete, so a
failed or interrupted run leaves nothing half-written. The rules that keep a user's files safe:

- the output folder may not be, or contain, the input model or its external data, nor be the
  current folder or one of its parents (it is renamed away when replaced);
- an existing folder is replaced only with ``force``, and only if asc-onnx wrote it (it holds
  :data:`MARKER`); an empty folder is used as if it did not exist;
- the temporary sibling doubles as a lock: it is created exclusively and names the writing
  process, so a second run into the same folder fails at once instead of racing the first;
- it is removed on any exception, including KeyboardInterrupt and the CLI's SIGTERM exit.

External weight files are stream-copied, never read into memory.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import onnx
from onnx import ModelProto

from .errors import AscOnnxError

#: The file that marks a folder as written by asc-onnx (``--force`` replaces nothing else).
MARKER = ".asc-onnx"


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def check_target(out_dir: str | os.PathLike, force: bool, protected: Sequence[Path] = ()) -> Path:
    """Refuse an output folder whose replacement could lose data; return its absolute path.

    ``protected`` are the files the run reads (the model and its external data); the output folder
    may contain none of them. Checked before any work and again under the lock.
    """
    out = Path(os.path.abspath(out_dir))
    real = Path(os.path.realpath(out))
    for p in protected:
        rp = Path(os.path.realpath(p))
        if _inside(rp, real):
            raise AscOnnxError(f"output folder {out} contains the input {p}; write the output to a new folder")
    cwd = Path(os.path.realpath(os.getcwd()))
    if out.exists() or out.is_symlink():
        if not out.is_dir() or out.is_symlink():
            raise AscOnnxError(f"output path {out} exists and is not a folder")
        if not any(out.iterdir()):
            pass  # an empty folder holds nothing to lose
        elif not force:
            raise AscOnnxError(f"output folder {out} exists; pass --force to replace it")
        elif not (out / MARKER).is_file():
            raise AscOnnxError(f"output folder {out} was not written by asc-onnx (it has no {MARKER} file); "
                               "--force replaces only asc-onnx output folders: choose a new folder")
        if _inside(cwd, real):
            raise AscOnnxError(f"output folder {out} is the current folder or holds it; "
                               "write the output to a new folder")
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _claim(tmp: Path, out: Path) -> None:
    """Create ``tmp`` exclusively (the lock); take over a stale one left by a killed process."""
    for _ in range(2):
        try:
            tmp.mkdir()
        except FileExistsError:
            try:
                pid = int((tmp / "pid").read_text())
            except (OSError, ValueError):
                pid = 0
            if pid and pid != os.getpid() and _pid_alive(pid):
                raise AscOnnxError(f"another asc-onnx run (pid {pid}) is writing {out}; wait for it or choose "
                                   "another folder") from None
            shutil.rmtree(tmp, ignore_errors=True)  # stale: its writer was killed (SIGKILL leaves it)
            continue
        except OSError as exc:
            raise AscOnnxError(f"cannot create the output folder next to {out}: {exc.strerror}") from None
        (tmp / "pid").write_text(str(os.getpid()))
        return
    raise AscOnnxError(f"cannot lock {out}: {tmp} reappears")


@contextlib.contextmanager
def staged(out_dir: str | os.PathLike, force: bool, protected: Sequence[Path] = ()) -> Iterator[Path]:
    """Yield a fresh temporary folder; on normal exit it replaces ``out_dir``, on any exception it is removed.

    Hold it over the whole run: it is also the lock that keeps two runs out of one folder.
    """
    out = check_target(out_dir, force, protected)
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AscOnnxError(f"cannot create {parent}: {exc.strerror}") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise AscOnnxError(f"cannot write the output folder: {parent} is not writable")
    tmp = parent / f".{out.name}.asc-onnx-tmp"
    _claim(tmp, out)
    try:
        yield tmp
        check_target(out, force, protected)  # nothing changed under us while the run worked
        (tmp / "pid").unlink()
        (tmp / MARKER).write_text(json.dumps({"tool": "asc-onnx"}) + "\n")
        if out.exists():
            old = parent / f".{out.name}.asc-onnx-old-{os.getpid()}"
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def copy_external(files: Sequence[str], src_dir: Path, dst_dir: Path) -> None:
    """Stream-copy external-data files, keeping their relative locations."""
    for rel in files:
        dst = dst_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            try:
                shutil.copyfile(src_dir / rel, dst)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise AscOnnxError(f"no space left writing {dst.name} into {dst_dir.parent}") from None
                raise


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
