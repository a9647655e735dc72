"""The one exception type users see: a single clear line, turned into exit code 2 by the CLI."""

from __future__ import annotations

import signal


class AscOnnxError(Exception):
    """Bad input or an impossible request. ``str(err)`` is the whole message a user needs."""


class ValidationError(AscOnnxError):
    """The rewritten model does not compute what the original computes."""


#: The signal that is stopping this process (0: none). Set by the console script's SIGTERM handler, whose
#: exception an import in progress may turn into an ImportError (the CLI still reports the signal), and a
#: finalizer running at that moment may swallow (:func:`stop_if_signalled` raises it again).
STOPPING_SIGNAL = [0]


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every ``finally`` runs."""


def whole(exc: BaseException) -> str:
    """An exception's message on one line and never cut (onnxruntime's name the node, the shapes and the cause at its
    end): its lines joined, runs of white space made one space."""
    return " ".join(str(exc).split()) or type(exc).__name__


def crash_reason(returncode: int, stderr: str) -> str:
    """Why a child program ended abnormally, in words that end the crash message: its signal by name (SIGKILL with
    no message of its own is most likely the out-of-memory killer), then its last standard-error lines, whole."""
    tail = "\n".join(stderr.strip().splitlines()[-5:])
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        why = f"killed by {name}"
        if -returncode == signal.SIGKILL and not tail:
            why += " (most likely the out-of-memory killer: the machine ran out of memory)"
        elif -returncode == signal.SIGABRT and "bad_alloc" in tail:
            why += " (it could not allocate memory)"
    else:
        why = f"exit status {returncode}"
    return why + (f": {tail}" if tail else "")


def stopped() -> int:
    """The one line and exit code of a run a signal stopped: 130 for SIGINT, 143 for SIGTERM."""
    import sys

    print("asc-onnx: interrupted" if STOPPING_SIGNAL[0] == signal.SIGINT else "asc-onnx: terminated", file=sys.stderr)
    return 128 + STOPPING_SIGNAL[0]


def stop_if_signalled() -> None:
    """Raise :class:`Terminated` if a SIGTERM arrived: called between stages and before the output folder is
    swapped in, so a signal whose first exception was lost still stops the run and leaves nothing behind."""
    if STOPPING_SIGNAL[0]:
        raise KeyboardInterrupt() if STOPPING_SIGNAL[0] == signal.SIGINT else Terminated()
