"""RMSNorm over the last axis: decomposed forms, with the Cast-to-float32 wrapper that fp16
exports carry, and a residual Add feeding an RMSNorm (decomposed or RMSNormalization) as one
Add+RMSNorm op whose second output is the residual sum when something else reads it."""

from __future__ import annotations

from onnx import TensorProto

from asc_onnx.checks import first_reason, last_axis, same_shape, trailing_vector
from asc_onnx.graph import onnx_dtype
from asc_onnx.pattern import ANY, Const, op, rule


def _core(xf, recip: bool):
    ms = op.ReduceMean(op.Mul(xf, xf), axes=ANY, keepdims=1)
    denom = op.Sqrt(op.Add(ms, Const("eps")))
    return op.Mul(xf, op.Reciprocal(denom)) if recip else op.Div(xf, denom)


def _rms(x, weight, recip: bool, cast: bool, gemma: bool = False):
    if gemma:  # Gemma scales by (1 + w): the Add joins the op, computed once per core
        weight = op.Add(weight, Const("offset"))
    if cast:
        return op.Mul(weight, op.Cast(_core(op.Cast(x, to=TensorProto.FLOAT), recip), to=ANY))
    return op.Mul(weight, _core(x, recip))


def _variants(add: bool) -> list:
    forms = []
    for recip in (True, False):
        for cast in (True, False):
            for gemma in (True, False):
                if add:
                    def fn(a, b, weight, recip=recip, cast=cast, gemma=gemma):
                        s = op.Add(a, b)
                        return _rms(s, weight, recip, cast, gemma), s
                else:
                    def fn(x, weight, recip=recip, cast=cast, gemma=gemma):
                        return _rms(x, weight, recip, cast, gemma)
                fn.__name__ = (f"{'add_' if add else ''}rmsnorm_{'recip' if recip else 'div'}{'_cast' if cast else ''}"
                               f"{'_gemma' if gemma else ''}")
                forms.append(fn)
    if add:
        def add_rmsnorm_op(a, b, weight):
            s = op.Add(a, b)
            return op.RMSNormalization(s, weight, axis=ANY, epsilon=ANY), s

        forms.append(add_rmsnorm_op)
    return forms


def _check(m) -> str | None:
    reason = first_reason(last_axis(m), trailing_vector(m, "weight"))
    if reason:
        return reason
    x = m.pattern.variables[0]
    if onnx_dtype(m.output) != m.dtype(x):
        return f"output dtype {onnx_dtype(m.output)} differs from the input dtype {m.dtype(x)}"
    return None


def _check_add(m) -> str | None:
    return first_reason(_check(m), None if same_shape(m, "a", "b") else trailing_vector(m, "b"))


RULES = [
    rule("AddRMSNorm", *_variants(True), op_name="AddRmsNorm", kernel="row",
         doc="RMSNorm(a + b) (decomposed or RMSNormalization), the sum as a second output", check=_check_add),
    rule("RMSNorm", *_variants(False), op_name="RmsNorm", kernel="row",
         doc="x / sqrt(mean(x^2) + eps) * w over the last axis, with or without the fp32 Cast wrapper, "
             "w or Gemma's (1 + w)",
         check=_check),
]
