"""Progress on stderr while a run works: the stage, counts and elapsed time, one line rewritten in place.

A large model spends minutes in kernel compiles and emulation; a silent terminal looks hung. The line is
drawn only on a terminal (a pipe or a log file gets nothing) and ``--quiet`` turns it off. Stages call
the reporter; they never print themselves, so the API stays silent unless a caller asks.
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


class Progress:
    """A reporter that redraws one stderr line: ``[0:42] emulating kernels 3/7 AscSilu``."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.start = time.monotonic()
        self.width = 0

    def __call__(self, stage: str, done: int = 0, total: int = 0, detail: str = "") -> None:
        if not self.enabled:
            return
        secs = int(time.monotonic() - self.start)
        count = f" {done}/{total}" if total else ""
        line = f"[{secs // 60}:{secs % 60:02d}] {stage}{count}" + (f" {detail}" if detail else "")
        line = line[:100]
        self.stream.write("\r" + line + " " * max(0, self.width - len(line)))
        self.stream.flush()
        self.width = len(line)

    def close(self) -> None:
        """Clear the line, so the summary that follows starts on a clean one."""
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
