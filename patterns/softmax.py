"""Softmax over the last axis: the decomposed Exp/ReduceSum/Div form (with or without the max
subtraction), and a Softmax op with the scale and/or additive mask that feed it (attention)."""

from __future__ import annotations

from asc_onnx.checks import broadcasts, dims_match, first_reason, last_axis
from asc_onnx.pattern import ANY, Const, op, rule


def softmax_stable(x):
    e = op.Exp(op.Sub(x, op.ReduceMax(x, axes=ANY, keepdims=1)))
    return op.Div(e, op.ReduceSum(e, axes=ANY, keepdims=1))


def softmax_plain(x):
    e = op.Exp(x)
    return op.Div(e, op.ReduceSum(e, axes=ANY, keepdims=1))


def scale_mask_mul(x, mask):
    return op.Softmax(op.Add(op.Mul(x, Const("scale")), mask), axis=ANY)


def scale_mask_div(x, mask):
    return op.Softmax(op.Add(op.Div(x, Const("scale")), mask), axis=ANY)


def scale_mul(x):
    return op.Softmax(op.Mul(x, Const("scale")), axis=ANY)


def scale_div(x):
    return op.Softmax(op.Div(x, Const("scale")), axis=ANY)


def mask_add(x, mask):
    return op.Softmax(op.Add(x, mask), axis=ANY)


def _check_mask(m) -> str | None:
    reason = last_axis(m)
    if reason:
        return reason
    xs, ms, out = m.shape("x"), m.shape("mask"), m.output.shape
    if xs is None or ms is None or out is None or len(xs) != len(out) or not all(map(dims_match, xs, out)):
        return f"x {m.tensor('x').name!r} {xs} does not have the output's shape {out}"
    if not broadcasts(ms, out):
        return f"mask shape {list(ms)} does not broadcast to {list(out)}"
    return None


RULES = [
    rule("ScaleMaskSoftmax", scale_mask_mul, scale_mask_div, op_name="ScaleMaskSoftmax", kernel="row",
         doc="Softmax(x * scale + mask) over the last axis (attention scores)", check=_check_mask),
    rule("SoftmaxDecomposed", softmax_stable, softmax_plain, op_name="Softmax", kernel="row",
         doc="Exp(x - max) / ReduceSum(...) over the last axis, as a decomposed softmax",
         check=lambda m: last_axis(m)),
    rule("MaskSoftmax", mask_add, op_name="MaskSoftmax", kernel="row",
         doc="Softmax(x + mask) over the last axis", check=_check_mask),
    rule("ScaleSoftmax", scale_mul, scale_div, op_name="ScaleSoftmax", kernel="row",
         doc="Softmax(x * scale) over the last axis", check=lambda m: first_reason(last_axis(m))),
]
