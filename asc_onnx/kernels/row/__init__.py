"""The row class: reductions over trailing axes (softmax, norms, their decompositions) with the elementwise ops
around them, as one vector kernel that keeps each row in the unified buffer."""

from ..base import KernelClass
from . import driver, render, schedule
from .lower import RowKernel, lower_row
from .region import find_row_chains

CLASS = KernelClass("row", RowKernel, lower_row, render, driver, region=find_row_chains, region_rank=-1,
                    region_supersedes=True, schedule=schedule, scalar_params=True)
