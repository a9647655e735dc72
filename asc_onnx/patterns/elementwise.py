"""The generic pass: any remaining chain of two or more elementwise ops (unary ops, binary ops
with scalar or broadcast operands) becomes one pointwise fused op named by its body's hash.
The search itself lives in :mod:`asc_onnx.chains`; this module only names the rule."""

from __future__ import annotations

from asc_onnx.pattern import generic_rule

RULES = [
    generic_rule("ElementwiseChain", op_name="FusedEw",
                 doc="any chain of 2+ elementwise ops left after the named patterns (AscFusedEw<hash>)"),
]
