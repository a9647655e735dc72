"""Model text into generated files: the one writer, and one sanitizer per target language.

Node, tensor, input and rule names and doc strings come from whoever made the model (or the pattern file). None of
them may become code: every generated file takes such text only through :func:`write`, which makes it inert for the
file's language:

* ``cpp``: the inside of a ``//`` comment. A whitelist of characters, every other one (newline, CR, U+2028, ``*``,
  a backslash, ``?``, quotes ...) written ``_``; so no line break, no ``*/``, no line-continuing backslash and no
  trigraph (``??/`` is a backslash where a compiler still reads trigraphs) can occur.
* ``sh``: one single-quoted shell word (``'...'``, a ``'`` written ``'\\''``), so ``$(...)``, backquotes and
  ``;`` are characters; control characters and line separators are written ``_`` first, so a quoted word never
  spans lines.
* ``cmake``: the inside of a ``#`` comment, by the C++ whitelist (CMake reads nothing in a comment but its end of
  line, which the whitelist removes).
* ``html``: text or a quoted attribute value, with ``& < > " '`` escaped.
"""

from __future__ import annotations

import html
import re

TARGETS = ("cpp", "sh", "cmake", "html")

#: What a comment keeps as it is: letters, digits and the punctuation names are made of.
_COMMENT_SAFE = re.compile(r"[^A-Za-z0-9 _.,:/()=+\-\[\]]")
#: Characters that end or break a line somewhere (C0 and C1 controls, DEL, the Unicode line and paragraph
#: separators, NEL).
_LINE_BREAKING = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u0085]")


def write(text: object, target: str, limit: int | None = None) -> str:
    """``text`` made inert for ``target`` (one of :data:`TARGETS`), cut to ``limit`` characters first (0: no cut;
    by default 160 in a comment, whole elsewhere).

    The result is what goes between the target's delimiters, except for ``sh``, whose result is the whole quoted
    word."""
    s = str(text)
    if limit is None:
        limit = 160 if target in ("cpp", "cmake") else 0
    if limit:
        s = s[:limit]
    if target in ("cpp", "cmake"):
        return _COMMENT_SAFE.sub("_", s)
    if target == "sh":
        return "'" + _LINE_BREAKING.sub("_", s).replace("'", "'\\''") + "'"
    if target == "html":
        return html.escape(s, quote=True)
    raise ValueError(f"no sanitizer for {target!r}: one of {', '.join(TARGETS)}")


__all__ = ["TARGETS", "write"]
