"""A minimal kernel class, defined in the test suite to prove that adding a class is one folder and one registry
line: ``toyabs`` fuses every lone float32 ``Abs`` into a kernel of its own (one tile loop, one vector instruction),
with its own region pass, IR, renderer and emulator driver, and no change to any stage."""

from asc_onnx.kernels.base import KernelClass

from . import driver, render
from .lower import AbsKernel, lower
from .region import find

CLASS = KernelClass("toyabs", AbsKernel, lower, render, driver, region=find, region_rank=-10)
