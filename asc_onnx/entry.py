"""The console script's first frame: signals and the closed pipe, before anything heavy loads.

SIGTERM becomes an exception like Ctrl-C, so the output folder's staging is removed on either; a
Ctrl-C while onnx and onnxruntime are still importing prints one line; a reader that closes the
pipe early (``asc-onnx inspect --json m.onnx | head``) ends the run quietly.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

from .errors import STOPPING_SIGNAL, Terminated, stopped

#: True while the command line's modules import: nothing to clean up yet, and an exception raised inside an
#: extension module's initialisation (onnx's nanobind enums) would end the process in std::terminate.
_STARTING = [True]


def _leave_at_start(signum: int) -> None:
    """A signal during start-up: the one line, and out at once (no exception through C++ frames)."""
    os.write(2, b"asc-onnx: interrupted\n" if signum == signal.SIGINT else b"asc-onnx: terminated\n")
    os._exit(130 if signum == signal.SIGINT else 143)


def _on_sigterm(signum: int, frame: object) -> None:
    STOPPING_SIGNAL[0] = signum
    if _STARTING[0]:
        _leave_at_start(signum)
    raise Terminated()


def _on_sigint(signum: int, frame: object) -> None:
    # Recorded as well: a Ctrl-C inside an import arrives as ImportError("initialization failed").
    STOPPING_SIGNAL[0] = signum
    if _STARTING[0]:
        _leave_at_start(signum)
    raise KeyboardInterrupt()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``asc-onnx`` console script."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        from .cli import run

        _STARTING[0] = False
        code = run(argv)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print("asc-onnx: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("asc-onnx: terminated", file=sys.stderr)
        return 143
    except BrokenPipeError:
        # The reader stopped reading; Python would complain again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ImportError:
        # A signal inside the import of the command line itself (numpy's C modules) arrives as an ImportError,
        # before cli.run's own handling exists.
        if not STOPPING_SIGNAL[0]:
            raise
        return stopped()
