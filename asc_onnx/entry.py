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


def _on_sigterm(signum: int, frame: object) -> None:
    STOPPING_SIGNAL[0] = signum
    raise Terminated()


def _on_sigint(signum: int, frame: object) -> None:
    # Recorded as well: a Ctrl-C inside an import arrives as ImportError("initialization failed").
    STOPPING_SIGNAL[0] = signum
    raise KeyboardInterrupt()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``asc-onnx`` console script."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        from .cli import run

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
