"""The generic passes: a reduction over trailing axes with the elementwise ops around it becomes one
row fused op (AscFusedRow<hash>); any remaining chain of two or more elementwise ops (unary ops,
binary ops with scalar or broadcast operands) one pointwise fused op (AscFusedEw<hash>). The
searches are the kernel classes' region passes (:mod:`asc_onnx.kernels`); this module only names the rules."""

from __future__ import annotations

from asc_onnx.pattern import generic_rule

RULES = [
    generic_rule("RowChain", op_name="FusedRow", kernel="row",
                 doc="a reduction over trailing axes (or Softmax/LogSoftmax/LayerNormalization/RMSNormalization) "
                     "with the elementwise ops around it, left after the named patterns (AscFusedRow<hash>)"),
    generic_rule("ElementwiseChain", op_name="FusedEw",
                 doc="any chain of 2+ elementwise ops left after the named patterns (AscFusedEw<hash>)"),
]
