"""Writing the output folder without ever losing data.

The folder is built in a temporary sibling and renamed into place only when it is complete, so a
failed or interrupted run leaves nothing half-written. The rules that keep a user's files safe:

- the output folder may not be, or contain, the input model or its external data, nor be the
  current folder or one of its parents (it is renamed away when replaced);
- an existing folder is replaced only with ``force``, and only if asc-onnx wrote it (it holds
  :data:`MARKER`); an empty folder is used as if it did not exist;
- a lock (an ``flock`` the kernel drops when the process dies) on a file in the cache folder named by a hash
  of the output's real path is held over the whole run, so a second run into the same folder fails at once
  instead of racing the first; nothing is left beside the output (the lock files stay in the cache, never
  deleted: deleting a lock file races with the next taker);
- the temporary sibling is removed on any exception, including KeyboardInterrupt and the CLI's SIGTERM
  exit; SIGINT and SIGTERM wait during the final swap, which puts the previous folder back if it fails.

External weight files are reflinked where the file system clones, else stream-copied, or hard-linked with
``link``; never read into memory.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path

import onnx
from onnx import ModelProto

from .cache import cache_root
from .errors import AscOnnxError, stop_if_signalled

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


def lock_path(out: Path) -> Path:
    """The lock file of output folder ``out``: in the cache, named by a hash of its real path (two spellings
    of one folder share it)."""
    key = hashlib.sha256(os.path.realpath(out).encode()).hexdigest()[:32]
    return cache_root() / "locks" / f"{key}.lock"


def _lock(lock: Path, out: Path):  # noqa: ANN202 - an open file object
    """Hold an exclusive ``flock`` on ``lock`` (created if missing, never deleted: deleting a lock file races
    with the next taker). The kernel drops it when the process dies, so a SIGKILL leaves no stale lock."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        f = open(lock, "a+")  # noqa: SIM115 - held until the run ends
    except OSError as exc:
        raise AscOnnxError(f"cannot create the lock {lock} in the asc-onnx cache (ASC_ONNX_CACHE): "
                           f"{exc.strerror}") from None
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip()
        f.close()
        raise AscOnnxError(f"another asc-onnx run{f' (pid {holder})' if holder.isdigit() else ''} is writing {out}; "
                           "wait for it or choose another folder") from None
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    return f


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """SIGINT and SIGTERM wait while the finished folder is swapped into place (two renames)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def staged(out_dir: str | os.PathLike, force: bool, protected: Sequence[Path] = ()) -> Iterator[Path]:
    """Yield a fresh temporary folder; on normal exit it replaces ``out_dir``, on any exception it is removed.

    Hold it over the whole run: its lock (:func:`lock_path`) keeps two runs out of one folder.
    """
    out = check_target(out_dir, force, protected)
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AscOnnxError(f"cannot create {parent}: {exc.strerror}") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise AscOnnxError(f"cannot write the output folder: {parent} is not writable")
    held = _lock(lock_path(out), out)
    tmp = parent / f".{out.name}.asc-onnx-tmp"
    old = parent / f".{out.name}.asc-onnx-old"
    try:
        check_target(out, force, protected)  # again, now that no other run can change it
        for leftover in (tmp, old):  # a killed run's (we hold the lock: nobody else's)
            shutil.rmtree(leftover, ignore_errors=True)
        try:
            tmp.mkdir()  # inside the try: a signal right after it must still remove the folder
            yield tmp
            (tmp / MARKER).write_text(json.dumps({"tool": "asc-onnx"}) + "\n")
            stop_if_signalled()  # a SIGTERM a finalizer swallowed: nothing is swapped in
            with _signals_blocked():
                check_target(out, force, protected)  # nothing changed under us while the run worked
                if out.is_dir() and not any(out.iterdir()):
                    # An empty folder stays the same folder (it may be a mount point, which no rename can
                    # replace): the finished files move into it.
                    for entry in tmp.iterdir():
                        entry.rename(out / entry.name)
                    tmp.rmdir()
                elif out.exists():
                    out.rename(old)
                    try:
                        tmp.rename(out)
                    except BaseException:
                        old.rename(out)  # put the previous result back
                        raise
                else:
                    tmp.rename(out)
            _drop_old(old)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    finally:
        held.close()


def _drop_old(old: Path) -> None:
    """Delete the replaced folder, unless files appeared in it that asc-onnx did not write."""
    if old.exists() and ((old / MARKER).is_file() or not any(old.iterdir())):
        shutil.rmtree(old, ignore_errors=True)


#: ioctl(FICLONE): the destination file shares the source's blocks until either is written (Btrfs, XFS, ...).
FICLONE = 0x40049409


def _reflink(src: Path, dst: Path) -> bool:
    """Clone ``src`` into a new ``dst`` where the file system can; False (and no ``dst``) where it cannot."""
    if not hasattr(fcntl, "ioctl") or os.uname().sysname != "Linux":
        return False
    with open(src, "rb") as s, open(dst, "wb") as d:
        try:
            fcntl.ioctl(d.fileno(), FICLONE, s.fileno())
            return True
        except OSError:
            pass
    dst.unlink()
    return False


def _copy_data(src: Path, dst: Path) -> None:
    """Copy ``src`` to a new ``dst``, its data regions only where the file system reports holes (a sparse
    weights file stays sparse; a dense one is one region): in-kernel where it can, no bytes through Python."""
    with open(src, "rb") as s, open(dst, "wb") as d:
        size = os.fstat(s.fileno()).st_size
        pos = 0
        while pos < size:
            try:
                start = os.lseek(s.fileno(), pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # only a hole is left
                    break
                raise
            end = os.lseek(s.fileno(), start, os.SEEK_HOLE)
            while start < end:
                try:
                    n = os.copy_file_range(s.fileno(), d.fileno(), end - start, start, start)
                except OSError as exc:  # another file system, an old kernel: through the page cache
                    if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                        raise
                    os.lseek(d.fileno(), start, os.SEEK_SET)
                    n = os.sendfile(d.fileno(), s.fileno(), start, end - start)
                if n <= 0:
                    raise OSError(errno.EIO, f"copying {src} stopped at byte {start} of {size}")
                start += n
            pos = end
        d.truncate(size)


def place_external(files: Sequence[str], src_dir: Path, dst_dir: Path, link: bool = False) -> dict[str, object]:
    """Put the model's external-data files into the output, keeping their relative locations, without reading
    them: a reflink where the file system clones (a separate file that shares blocks until written; the input
    is never touched), else a stream copy; with ``link``, a hard link (the output then shares the input's
    files: writing one writes the other), else the same as without. Returns how: ``{"files", "bytes",
    "method"}``, method one of reflink, copy, hard link, or several joined by ``+``."""
    methods: list[str] = []
    total = 0
    for rel in files:
        src, dst = src_dir / rel, dst_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.exists():
            continue
        total += src.stat().st_size
        try:
            if link:
                try:
                    os.link(src, dst)
                    methods.append("hard link")
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                        raise
            if _reflink(src, dst):
                methods.append("reflink")
            else:
                _copy_data(src, dst)
                methods.append("copy")
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise AscOnnxError(f"no space left writing {dst.name} into {dst_dir.parent}") from None
            raise
    return {"files": len(files), "bytes": total, "method": "+".join(dict.fromkeys(methods)) or "none"}


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
