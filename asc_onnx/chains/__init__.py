"""The generic passes of the match stage, one per kernel class: elementwise chains (``pointwise``) and
reductions over trailing axes with the elementwise ops around them (``row``)."""

from .pointwise import BINARY, ELEMENTWISE, UNARY, find_chains
from .row import find_row_chains

__all__ = ["find_chains", "find_row_chains", "ELEMENTWISE", "UNARY", "BINARY"]
