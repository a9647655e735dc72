"""The matmul class: MatMul or Gemm with an elementwise epilogue (bias, activation, SwiGLU), the cube computing
and the vector cores finishing each block; regions come from named rules only."""

from ..base import KernelClass
from . import budget, driver, render, schedule
from .lower import MatmulKernel, lower_matmul


def _lower(op, symbolic=None, kinds=None) -> MatmulKernel:
    return lower_matmul(op)  # weights are inputs of fixed role: no kinds to decide


CLASS = KernelClass("matmul", MatmulKernel, _lower, render, driver, schedule=schedule, budget=budget, cube=True,
                    tiling_main="tiling_main.cpp", scalar_params=True)
