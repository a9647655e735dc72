"""Where a run keeps what outlives it and which CANN sources its cube kernels are proven under: one frozen value
(:class:`Config`), given by the caller. The command line reads the environment (``ASC_ONNX_CACHE``,
``ASC_ONNX_CANN_SOURCE``) and its flags into it; nothing below reads the environment.

A run of the API (``fuse``, ``plan`` ...) holds its options' config for its whole length (:func:`using`); outside a
run, the process default (:func:`set_default`: the command line and the test suite set it once) or the built-in
default, ``~/.cache/asc-onnx`` and no CANN sources."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import AscOnnxError

#: The folders a tree of the open CANN sources must have (as ``../shared/ascend`` beside this repository).
CANN_LAYOUT = ("asc-devkit/impl/adv_api/tiling/matmul", "metadef/inc", "check/check.sh")


@dataclass(frozen=True)
class Config:
    """``cache_dir``: compiled emulator programs, CANN's tiling objects and output folders' locks (the only place a
    run writes outside its output folder). ``cann_source``: the open CANN sources whose Matmul tiling cube kernels
    are proven under, or None (then under the emulator's own, which the device never runs: the report says so)."""

    cache_dir: Path
    cann_source: Path | None = None

    @staticmethod
    def of(cache_dir: str | os.PathLike | None = None, cann_source: str | os.PathLike | None = None) -> Config:
        """A config from a caller's values (None: the default cache, no CANN sources), checked: a CANN tree must have
        the open sources' layout."""
        cache = Path(cache_dir).expanduser() if cache_dir else Path.home() / ".cache" / "asc-onnx"
        src = None
        if cann_source:
            src = Path(cann_source).expanduser().resolve()
            for need in CANN_LAYOUT:
                if not (src / need).exists():
                    raise AscOnnxError(f"the CANN sources {cann_source}: {need} is missing (expected the open CANN "
                                       "sources' layout, as ../shared/ascend)")
        return Config(cache.resolve(), src)


_default = Config.of()
_active: list[Config] = []


def current() -> Config:
    """The config of the run in progress, else the process default."""
    return _active[-1] if _active else _default


def set_default(config: Config) -> None:
    """The config outside any run (a process that serves many: the command line, the test suite)."""
    global _default
    _default = config


@contextlib.contextmanager
def using(config: Config) -> Iterator[Config]:
    """Hold ``config`` for the length of a run (threads the run starts see it too: it is not per thread)."""
    _active.append(config)
    try:
        yield config
    finally:
        _active.pop()
