"""GELU, exact (Erf) and tanh forms, as torch exporters write them, with or without a bias Add.

Exporters differ in where the 0.5 and the x multiply go, in whether x is divided by
sqrt(2) or multiplied by 1/sqrt(2), and in how the cube is written (``Pow(x, 3)``, ``x*(x*x)``, or
tf2onnx's ``x*(x*(0.044715*x))`` with the constant innermost); every combination is a variant.
Reassociating the products into one form would change their rounding, so each form is matched as it is.
"""

from __future__ import annotations

import itertools
import math

from asc_onnx.checks import first_reason, trailing_vector, weight_matrix
from asc_onnx.pattern import ANY, op, rule

SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _scaled_erf(x, div: bool):
    return op.Erf(op.Div(x, SQRT2) if div else op.Mul(x, 1.0 / SQRT2))


def _scaled_cube(x, form: str):
    """0.044715 * x^3 as torch (``Pow``, or ``x*(x*x)``) and tf2onnx (constant innermost) write it."""
    if form == "tf":
        return op.Mul(x, op.Mul(x, op.Mul(x, 0.044715)))
    return op.Mul(op.Pow(x, 3.0) if form == "pow" else op.Mul(x, op.Mul(x, x)), 0.044715)


def _tanh_inner(x, form: str):
    return op.Tanh(op.Mul(op.Add(x, _scaled_cube(x, form)), SQRT_2_OVER_PI))


def _outer(x, t, shape: int):
    """0.5 * x * (1 + t) in the three product shapes exporters emit."""
    one_plus = op.Add(t, 1.0)
    if shape == 0:
        return op.Mul(op.Mul(x, one_plus), 0.5)
    if shape == 1:
        return op.Mul(x, op.Mul(one_plus, 0.5))
    return op.Mul(op.Mul(x, 0.5), one_plus)


def _cores(kind: str) -> list:
    """GELU(x) written every way exporters do: product shape x inner form, and the Gelu op (opset 20)."""
    cores = []
    inners = ("div", "mul") if kind == "erf" else ("pow", "mul", "tf")
    for shape, inner in itertools.product(range(3), inners):
        def core(x, shape=shape, inner=inner):
            t = _scaled_erf(x, inner == "div") if kind == "erf" else _tanh_inner(x, inner)
            return _outer(x, t, shape)

        core.__name__ = f"gelu_{kind}_{shape}_{inner}"
        cores.append(core)
    return cores


def _gelu_op(x, kind: str):
    return op.Gelu(x, approximate="none" if kind == "erf" else "tanh")


def _variants(kind: str, bias: bool) -> list:
    """Pattern functions for every product shape x inner form (and the Gelu op after a bias Add)."""
    forms = []
    for core in _cores(kind):
        if bias:
            def fn(x, bias, core=core):
                return core(op.Add(x, bias))
        else:
            def fn(x, core=core):
                return core(x)
        fn.__name__ = f"{'bias_' if bias else ''}{core.__name__}"
        forms.append(fn)
    if bias:
        def gelu_op(x, bias):
            return _gelu_op(op.Add(x, bias), kind)

        gelu_op.__name__ = f"bias_gelu_op_{kind}"
        forms.append(gelu_op)
    return forms


def _linear_variants(kind: str) -> list:
    """GELU(x @ W + b) in every GELU form, after MatMul+Add or after a Gemm (the BERT and GPT-2 FFN)."""
    forms = []
    for core in [*_cores(kind), lambda h: _gelu_op(h, kind)]:
        name = getattr(core, "__name__", "gelu_op") if core.__name__ != "<lambda>" else f"gelu_op_{kind}"

        def matmul_fn(x, weight, bias, core=core):
            return core(op.Add(op.MatMul(x, weight), bias))

        def gemm_fn(x, weight, bias, core=core):
            return core(op.Gemm(x, weight, bias, alpha=1.0, beta=1.0, transA=0, transB=ANY))

        matmul_fn.__name__ = f"linear_{name}"
        gemm_fn.__name__ = f"gemm_{name}"
        forms += [matmul_fn, gemm_fn]
    return forms


def _linear_nobias_variants(kind: str) -> list:
    """GELU(x @ W) in every GELU form, after a MatMul or a two-input Gemm (GPT-2's dynamo export)."""
    forms = []
    for core in [*_cores(kind), lambda h: _gelu_op(h, kind)]:
        name = getattr(core, "__name__", "gelu_op") if core.__name__ != "<lambda>" else f"gelu_op_{kind}"

        def matmul_fn(x, weight, core=core):
            return core(op.MatMul(x, weight))

        def gemm_fn(x, weight, core=core):
            return core(op.Gemm(x, weight, alpha=1.0, beta=1.0, transA=0, transB=ANY))

        matmul_fn.__name__ = f"linear_nobias_{name}"
        gemm_fn.__name__ = f"gemm_nobias_{name}"
        forms += [matmul_fn, gemm_fn]
    return forms


def _linear_check(m) -> str | None:
    return first_reason(weight_matrix(m, "weight"), trailing_vector(m, "bias"))


def _bias_check(m) -> str | None:
    return trailing_vector(m, "bias")


RULES = [
    rule("LinearGELU", *_linear_variants("erf"), op_name="LinearGelu", kernel="matmul",
         doc="GELU(x @ W + b), exact: MatMul+Add or Gemm, then GELU in any exporter's form (BERT FFN)",
         check=_linear_check),
    rule("LinearGELUTanh", *_linear_variants("tanh"), op_name="LinearGeluTanh", kernel="matmul",
         doc="GELU(x @ W + b), tanh approximation: MatMul+Add or Gemm, then tanh-GELU (GPT-2 FFN)",
         check=_linear_check),
    rule("LinearGELUNoBias", *_linear_nobias_variants("erf"), op_name="LinearGeluNoBias", kernel="matmul",
         doc="GELU(x @ W), exact: a MatMul or a two-input Gemm, then GELU in any exporter's form",
         check=lambda m: weight_matrix(m, "weight")),
    rule("LinearGELUTanhNoBias", *_linear_nobias_variants("tanh"), op_name="LinearGeluTanhNoBias", kernel="matmul",
         doc="GELU(x @ W), tanh approximation: a MatMul or a two-input Gemm (GPT-2's dynamo export), then tanh-GELU",
         check=lambda m: weight_matrix(m, "weight")),
    rule("BiasGELU", *_variants("erf", True), op_name="BiasGelu", kernel="pointwise",
         doc="GELU(x + b), exact Erf form or a Gelu op after a bias Add", check=_bias_check),
    rule("BiasGELUTanh", *_variants("tanh", True), op_name="BiasGeluTanh", kernel="pointwise",
         doc="GELU(x + b), tanh approximation", check=_bias_check),
    rule("GELU", *_variants("erf", False), op_name="Gelu", kernel="pointwise",
         doc="0.5*x*(1+erf(x/sqrt(2))): exact GELU as exporters decompose it"),
    rule("GELUTanh", *_variants("tanh", False), op_name="GeluTanh", kernel="pointwise",
         doc="0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))): tanh-approximated GELU"),
]
