"""The pointwise class: any chain of elementwise ops, inputs full-shaped or broadcast along leading axes, as one
vector kernel that streams tiles through the unified buffer."""

from ..base import KernelClass
from . import driver, render, schedule
from .lower import PointwiseKernel, lower_pointwise
from .region import find_chains

CLASS = KernelClass("pointwise", PointwiseKernel, lower_pointwise, render, driver, region=find_chains,
                    schedule=schedule, scalar_params=True)
