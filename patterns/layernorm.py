"""LayerNorm over the last axis: decomposed forms, and a residual Add feeding a LayerNorm
(decomposed or the LayerNormalization op) as one Add+LayerNorm op whose second output is the
residual sum when something else reads it."""

from __future__ import annotations

from asc_onnx.checks import first_reason, last_axis, same_shape, trailing_vector
from asc_onnx.pattern import ANY, Const, op, rule

AXES = ANY  # checked by last_axis()


def _ln(x, gamma, beta, recip: bool):
    d = op.Sub(x, op.ReduceMean(x, axes=AXES, keepdims=1))
    var = op.ReduceMean(op.Mul(d, d), axes=AXES, keepdims=1)
    denom = op.Sqrt(op.Add(var, Const("eps")))
    n = op.Mul(d, op.Reciprocal(denom)) if recip else op.Div(d, denom)
    return op.Add(op.Mul(n, gamma), beta)


def layernorm_div(x, gamma, beta):
    return _ln(x, gamma, beta, False)


def layernorm_recip(x, gamma, beta):
    return _ln(x, gamma, beta, True)


def add_layernorm_div(a, b, gamma, beta):
    s = op.Add(a, b)
    return _ln(s, gamma, beta, False), s


def add_layernorm_recip(a, b, gamma, beta):
    s = op.Add(a, b)
    return _ln(s, gamma, beta, True), s


def add_layernorm_op(a, b, gamma, beta):
    s = op.Add(a, b)
    return op.LayerNormalization(s, gamma, beta, axis=ANY, epsilon=ANY), s


def _check(m) -> str | None:
    return first_reason(last_axis(m), trailing_vector(m, "gamma"), trailing_vector(m, "beta"))


def _check_add(m) -> str | None:
    return first_reason(_check(m), None if same_shape(m, "a", "b") else trailing_vector(m, "b"))


RULES = [
    rule("AddLayerNorm", add_layernorm_div, add_layernorm_recip, add_layernorm_op, op_name="AddLayerNorm",
         kernel="row", doc="LayerNorm(a + b) (decomposed or LayerNormalization), the sum as a second output",
         check=_check_add),
    rule("LayerNorm", layernorm_div, layernorm_recip, op_name="LayerNorm", kernel="row",
         doc="(x - mean) / sqrt(var + eps) * gamma + beta, decomposed over the last axis", check=_check),
]
