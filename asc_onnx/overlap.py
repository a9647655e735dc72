"""Work that runs in a forked child while this process goes on: the second core of a two-core machine.

A fuse is one Python thread; where a stage's result is not needed until later (the whole-model estimates, which
the report alone reads), a fork computes it on the other core while the package is assembled and written. The
child gets the parent's memory as it is at the fork (copy-on-write: nothing is serialized going in) and sends its
result back pickled through a pipe. It leaves by ``os._exit``, so none of the parent's cleanup (the staging
folder, atexit handlers) runs twice.
"""

from __future__ import annotations

import os
import pickle
import signal
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Forked(Generic[T]):
    """``fn(*args)`` computed in a forked child; :meth:`result` waits for it and returns it, or raises what it
    raised. Without ``fork`` (not Linux), or with ``inline``, :meth:`result` computes it in this process. One of
    :meth:`result` or :meth:`cancel` must be reached on every path (``with`` does the latter on an error)."""

    def __init__(self, fn: Callable[..., T], *args: Any, inline: bool = False) -> None:
        self.fn, self.args = fn, args
        self.pid: int | None = None
        self.fd: int | None = None
        if inline or not hasattr(os, "fork"):
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: compute, send, leave without unwinding the parent's stack
            os.close(read)
            code = 0
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to handle
                try:
                    payload = pickle.dumps((True, fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
                    payload = _pickled_error(exc)
                with os.fdopen(write, "wb") as f:
                    f.write(payload)
            except BaseException:  # noqa: BLE001 - the pipe is gone: the parent reports the exit code
                code = 1
            os._exit(code)
        os.close(write)
        self.pid, self.fd = pid, read

    def result(self) -> T:
        """The function's result (waiting for the child), or what it raised, raised here."""
        if self.pid is None:
            return self.fn(*self.args)
        try:
            with os.fdopen(self.fd, "rb") as f:
                self.fd = None
                payload = f.read()  # read to the end before waiting: a full pipe would block the child
        finally:
            _, status = os.waitpid(self.pid, 0)
            self.pid = None
        if not payload:
            raise RuntimeError(f"the forked {getattr(self.fn, '__name__', 'worker')} ended without a result "
                               f"(exit status {status})")
        ok, value = pickle.loads(payload)
        if not ok:
            raise value
        return value

    def cancel(self) -> None:
        """Stop the child, if any, and reap it (the caller is unwinding: an error or a signal)."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.pid = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> Forked[T]:
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        if kind is not None:
            self.cancel()


def _pickled_error(exc: BaseException) -> bytes:
    """``exc`` pickled for the parent; one that does not pickle goes back as a RuntimeError with its text."""
    try:
        return pickle.dumps((False, exc), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an exception holding something unpicklable
        return pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))


__all__ = ["Forked"]
