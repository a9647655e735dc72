"""Progress on stderr while a run works: the stage, counts and elapsed time.

A large model spends minutes in kernel compiles and emulation; a silent terminal or log looks hung. On a terminal
one line is redrawn in place; into a pipe or a log file each new stage is one line of its own
(``asc-onnx: [0:42] emulating kernels 3/7 AscSilu``), a long stage's count again at most every
:data:`LOG_EVERY` seconds, from :data:`LOG_AFTER` seconds into the run on (a run over sooner, say one that stops at
bad input, prints only its result). ``--quiet`` turns both off. Stages call the reporter; they never print
themselves, so the API stays silent unless a caller asks.
"""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO


class Reporter(Protocol):
    """What a stage calls: ``(stage, done, total, detail)``; ``total`` 0 when the stage has no count."""

    def __call__(self, stage: str, done: int = 0, total: int = 0, detail: str = "") -> None: ...


def silent(stage: str, done: int = 0, total: int = 0, detail: str = "") -> None:
    """The reporter of a run nobody watches."""


#: Seconds between two log lines of one stage (a pipe or a log file).
LOG_EVERY = 10.0
#: Seconds a run works before it logs (a pipe or a log file): a run over sooner says only its result.
LOG_AFTER = 1.0


class Progress:
    """A reporter on stderr: one line redrawn on a terminal (``[0:42] emulating kernels 3/7 AscSilu``), a line per
    stage into a pipe or a log file. ``enabled`` False is silence; None decides by the stream."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        tty = self.stream.isatty()
        self.enabled = True if enabled is None else enabled
        self.redraw = tty if enabled is None else enabled and tty
        self.start = time.monotonic()
        self.width = 0
        self.logged = ("", -LOG_EVERY)  # the last stage logged, and when

    def __call__(self, stage: str, done: int = 0, total: int = 0, detail: str = "") -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        secs = int(now - self.start)
        count = f" {done}/{total}" if total else ""
        line = f"[{secs // 60}:{secs % 60:02d}] {stage}{count}" + (f" {detail}" if detail else "")
        line = line[:100]
        if not self.redraw:
            if now - self.start < LOG_AFTER:
                return
            if stage != self.logged[0] or now - self.logged[1] >= LOG_EVERY:
                self.stream.write(f"asc-onnx: {line}\n")
                self.stream.flush()
                self.logged = (stage, now)
            return
        self.stream.write("\r" + line + " " * max(0, self.width - len(line)))
        self.stream.flush()
        self.width = len(line)

    def close(self) -> None:
        """Clear the line, so the summary that follows starts on a clean one."""
        if self.enabled and self.redraw and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
