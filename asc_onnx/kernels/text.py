"""Text helpers for generated C++: the comment writer, float literals with full precision, an indent-aware line
buffer. Anything from the model goes through :func:`comment` (the C++ target of :mod:`asc_onnx.model_text`)."""

from __future__ import annotations

import numpy as np

from ..model_text import write


def comment(text: str, limit: int = 160) -> str:
    """Model text made safe for a ``//`` comment (:func:`asc_onnx.model_text.write`, target ``cpp``): a whitelist of
    characters, so no newline, no ``*/``, no trailing backslash and no trigraph."""
    return write(text, "cpp", limit)


def f32(v: float) -> str:
    """A float32 literal that round-trips exactly (``1.41421354f``), or the named special value; an op
    parameter reads the tiling data instead (``td.param[0]``)."""
    if hasattr(v, "expr"):
        return v.expr()
    x = np.float32(v)
    if np.isnan(x):
        return "(__builtin_nanf(\"\"))"
    if np.isinf(x):
        return "(__builtin_inff())" if x > 0 else "(-__builtin_inff())"
    text = np.format_float_scientific(x, unique=True, trim="-") if (abs(x) >= 1e7 or 0 < abs(x) < 1e-4) \
        else np.format_float_positional(x, unique=True, trim="0")
    if "." not in text and "e" not in text:
        text += ".0"
    return text + "f"


class Lines:
    """An indent-aware list of lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, *lines: str) -> Lines:
        for line in lines:
            self.lines.append(("    " * self.depth + line) if line else "")
        return self

    def indent(self) -> _Indent:
        return _Indent(self)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class _Indent:
    def __init__(self, lines: Lines) -> None:
        self.l = lines

    def __enter__(self) -> None:
        self.l.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.l.depth -= 1
