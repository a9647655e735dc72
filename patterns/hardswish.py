"""HardSwish decompositions: x * HardSigmoid(x) and x * Clip(x + 3, 0, 6) / 6.
A lone HardSwish op is left alone: one standard op gains nothing from a custom kernel."""

from __future__ import annotations

from asc_onnx.pattern import op, rule


def _relu6(x):
    return op.Clip(op.Add(x, 3.0), 0.0, 6.0)


def hardsigmoid_form(x):
    return op.Mul(x, op.HardSigmoid(x, alpha=1.0 / 6.0, beta=0.5))


def clip_div_outer(x):
    return op.Div(op.Mul(x, _relu6(x)), 6.0)


def clip_div_inner(x):
    return op.Mul(x, op.Div(_relu6(x), 6.0))


def clip_mul_outer(x):
    return op.Mul(op.Mul(x, _relu6(x)), 1.0 / 6.0)


def clip_mul_inner(x):
    return op.Mul(x, op.Mul(_relu6(x), 1.0 / 6.0))


RULES = [
    rule("HardSwish", hardsigmoid_form, clip_div_outer, clip_div_inner, clip_mul_outer, clip_mul_inner,
         op_name="HardSwish", kernel="pointwise", doc="x * relu6(x + 3) / 6 from HardSigmoid or Clip"),
]
