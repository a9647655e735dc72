"""SiLU and Linear+SiLU: x*Sigmoid(x), on its own (after Conv) or after a MatMul(+Add) or Gemm."""

from __future__ import annotations

from asc_onnx.checks import first_reason, trailing_vector, weight_matrix
from asc_onnx.pattern import ANY, op, rule


def silu(x):
    return op.Mul(x, op.Sigmoid(x))


def linear_bias_silu(x, weight, bias):
    h = op.Add(op.MatMul(x, weight), bias)
    return op.Mul(h, op.Sigmoid(h))


def gemm_silu(x, weight, bias):
    h = op.Gemm(x, weight, bias, alpha=1.0, beta=1.0, transA=0, transB=ANY)
    return op.Mul(h, op.Sigmoid(h))


def linear_silu(x, weight):
    h = op.MatMul(x, weight)
    return op.Mul(h, op.Sigmoid(h))


def gemm_nobias_silu(x, weight):
    h = op.Gemm(x, weight, alpha=1.0, transA=0, transB=ANY)
    return op.Mul(h, op.Sigmoid(h))


RULES = [
    rule("LinearSiLU", linear_bias_silu, gemm_silu, op_name="LinearSilu", kernel="matmul",
         doc="SiLU(x @ W + b): MatMul+Add+Sigmoid+Mul, or Gemm+Sigmoid+Mul",
         check=lambda m: first_reason(weight_matrix(m, "weight"), trailing_vector(m, "bias"))),
    rule("LinearSiLUNoBias", linear_silu, gemm_nobias_silu, op_name="LinearSiluNoBias", kernel="matmul",
         doc="SiLU(x @ W): MatMul+Sigmoid+Mul, or Gemm without bias",
         check=lambda m: weight_matrix(m, "weight")),
    rule("SiLU", silu, op_name="Silu", kernel="pointwise", doc="x * Sigmoid(x) (SiLU / Swish), e.g. after Conv"),
]
