"""The one exception type users see: a single clear line, turned into exit code 2 by the CLI."""

from __future__ import annotations


class AscOnnxError(Exception):
    """Bad input or an impossible request. ``str(err)`` is the whole message a user needs."""


class ValidationError(AscOnnxError):
    """The rewritten model does not compute what the original computes."""
