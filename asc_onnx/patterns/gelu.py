"""GELU, exact (Erf) and tanh forms, as torch exporters write them, with or without a bias Add.

Exporters differ in where the 0.5 and the x multiply go and in whether x is divided by
sqrt(2) or multiplied by 1/sqrt(2); every combination is a variant.
"""

from __future__ import annotations

import itertools
import math

from asc_onnx.pattern import op, rule

from ._common import trailing_vector

SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _scaled_erf(x, div: bool):
    return op.Erf(op.Div(x, SQRT2) if div else op.Mul(x, 1.0 / SQRT2))


def _cube(x, pow_form: bool):
    return op.Pow(x, 3.0) if pow_form else op.Mul(x, op.Mul(x, x))


def _tanh_inner(x, pow_form: bool):
    return op.Tanh(op.Mul(op.Add(x, op.Mul(_cube(x, pow_form), 0.044715)), SQRT_2_OVER_PI))


def _outer(x, t, shape: int):
    """0.5 * x * (1 + t) in the three product shapes exporters emit."""
    one_plus = op.Add(t, 1.0)
    if shape == 0:
        return op.Mul(op.Mul(x, one_plus), 0.5)
    if shape == 1:
        return op.Mul(x, op.Mul(one_plus, 0.5))
    return op.Mul(op.Mul(x, 0.5), one_plus)


def _variants(kind: str, bias: bool) -> list:
    """Pattern functions for every product shape x inner form."""
    forms = []
    for shape, inner in itertools.product(range(3), (True, False)):
        def core(x, shape=shape, inner=inner):
            t = _scaled_erf(x, inner) if kind == "erf" else _tanh_inner(x, inner)
            return _outer(x, t, shape)

        if bias:
            def fn(x, bias, core=core):
                return core(op.Add(x, bias))
        else:
            def fn(x, core=core):
                return core(x)
        fn.__name__ = f"{'bias_' if bias else ''}gelu_{kind}_{shape}_{'a' if inner else 'b'}"
        forms.append(fn)
    if bias:
        approx = "none" if kind == "erf" else "tanh"

        def gelu_op(x, bias, approx=approx):
            return op.Gelu(op.Add(x, bias), approximate=approx)

        gelu_op.__name__ = f"bias_gelu_op_{kind}"
        forms.append(gelu_op)
    return forms


def _bias_check(m) -> str | None:
    return trailing_vector(m, "bias")


RULES = [
    rule("BiasGELU", *_variants("erf", True), op_name="BiasGelu", kernel="pointwise",
         doc="GELU(x + b), exact Erf form or a Gelu op after a bias Add", check=_bias_check),
    rule("BiasGELUTanh", *_variants("tanh", True), op_name="BiasGeluTanh", kernel="pointwise",
         doc="GELU(x + b), tanh approximation", check=_bias_check),
    rule("GELU", *_variants("erf", False), op_name="Gelu", kernel="pointwise",
         doc="0.5*x*(1+erf(x/sqrt(2))): exact GELU as exporters decompose it"),
    rule("GELUTanh", *_variants("tanh", False), op_name="GeluTanh", kernel="pointwise",
         doc="0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))): tanh-approximated GELU"),
]
