"""Frozen configuration passed down through the stages; nothing below the CLI reads the environment."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .config import Config
from .errors import stop_if_signalled


@dataclass(frozen=True)
class FuseOptions:
    """What to fuse and how to write it.

    Attributes:
        pattern_files: user pattern modules loaded beside the built-in ones.
        only: if non-empty, only these rule names may fuse.
        skip: rule names that must not fuse.
        input_shapes: concrete dims for model inputs (name -> dims) used for shape
            inference, validation inputs and the ATC command.
        input_values: contents for model inputs (name -> one fill value, or every element) in place of
            random data: an integer input a model branches on (a sample rate, a mode flag).
        atc_domain_mode: ``"compat"`` (default: fused nodes in the default domain with one
            opset entry, for released CANN) or ``"custom"`` (fused nodes keep the
            ``asc_onnx`` domain, for CANN with the empty-domain fix).
        generic: run the generic passes (row regions, then elementwise chains) after the named patterns.
        seed: seed of the random validation inputs.
        soc: target SoC family (``Ascend910B`` or ``Ascend310P``).
        emulate: run every generated kernel in the emulator against onnxruntime, and the deployed
            ATC model with those kernels end to end.
        strict: a kernel the emulator rejects, or one the timing model estimates slower than the nodes it
            replaces, fails the run (exit 1) instead of a warning; either way it is not shipped.
        judge: estimate every fused op with the timing model and ship only those faster than their nodes
            (:mod:`asc_onnx.estimate`); False skips the estimates (and the guard) entirely, for callers that
            want every kernel the emulator accepts and no figures (the kernel tests).
        keep_slower: ship every kernel the emulator accepts, even one the timing model estimates slower than its
            unfused nodes at a judged shape (:mod:`asc_onnx.estimate`); the report still shows both estimates.
        link_weights: hard-link external-data files into the output (it then shares the input's files)
            instead of reflinking or copying them.
        memory_budget: weight bytes up to which the whole model is run (the graph and deployed rungs, and the
            kernel rung's captured activations, each load every weight into one onnxruntime session); a
            bigger model is proven op by op by the kernel rung alone, and the report says so.
        config: where the run keeps its cache and which CANN sources prove its cube kernels
            (:class:`asc_onnx.config.Config`); None: the process default.
        progress: called as ``progress(stage, done, total, detail)`` while the run works
            (:class:`asc_onnx.progress.Progress` draws it on a terminal); None for silence.
    """

    pattern_files: tuple[str, ...] = ()
    only: frozenset[str] = frozenset()
    skip: frozenset[str] = frozenset()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    input_values: tuple[tuple[str, tuple[float, ...]], ...] = ()
    atc_domain_mode: str = "compat"
    generic: bool = True
    seed: int = 0
    default_dim: int = field(default=4)
    soc: str = "Ascend910B"
    emulate: bool = True
    strict: bool = False
    judge: bool = True
    keep_slower: bool = False
    link_weights: bool = False
    memory_budget: int = 4 << 30
    config: Config | None = None
    progress: Callable[..., None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.atc_domain_mode not in ("compat", "custom"):
            raise ValueError(f"atc_domain_mode must be 'compat' or 'custom', not {self.atc_domain_mode!r}")

    def report(self, stage: str, done: int = 0, total: int = 0, detail: str = "") -> None:
        """Tell ``progress`` where the run is (a no-op without one); a stage boundary, where a SIGTERM whose
        exception was lost stops the run."""
        stop_if_signalled()
        if self.progress is not None:
            self.progress(stage, done, total, detail)

    @property
    def shape_map(self) -> dict[str, tuple[int, ...]]:
        """``input_shapes`` as a dict."""
        return dict(self.input_shapes)

    @property
    def value_map(self) -> dict[str, tuple[float, ...]]:
        """``input_values`` as a dict."""
        return dict(self.input_values)
