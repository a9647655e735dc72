"""Checks for pattern rules, shared by the built-in patterns and open to users' pattern files: a rule's
``check`` returns None when a match is admissible, else the reason it is not (a near miss in the report)."""

from __future__ import annotations

from asc_onnx.match import MatchView

LAST_AXIS_OPS = ("ReduceMean", "ReduceSum", "ReduceMax", "Softmax", "LayerNormalization", "RMSNormalization")


def last_axis(m: MatchView) -> str | None:
    """Every reduction in the match runs over the last axis only."""
    from asc_onnx.graph import attrs_of

    for node in m.nodes:
        if node.op not in LAST_AXIS_OPS:
            continue
        rank = len(node.inputs[0].shape) if node.inputs[0].shape is not None else None
        attrs = attrs_of(node)
        axes = attrs.get("axes") if node.op.startswith("Reduce") else [attrs.get("axis", -1)]
        if axes is None or len(axes) != 1:
            return f"{node.op} {node.name!r} reduces over axes {axes}, the row kernel takes the last axis only"
        ax = axes[0]
        if ax != -1 and rank is None:
            return (f"{node.op} {node.name!r} reduces over axis {ax}, and the rank of {node.inputs[0].name!r} is "
                    "unknown (shape inference could not follow it): cannot tell whether that is the last axis; "
                    "--input-shape may help")
        if ax != -1 and ax != rank - 1:
            return f"{node.op} {node.name!r} reduces over axis {ax} of a rank-{rank} tensor, not the last axis"
        if node.op.startswith("Reduce") and attrs.get("keepdims", 1) != 1:
            return f"{node.op} {node.name!r} drops the reduced axis (keepdims=0)"
    return None


def trailing_vector(m: MatchView, var: str) -> str | None:
    """``var`` is a vector (or scalar) broadcast along the last axis of the main output."""
    shape = m.shape(var)
    out = m.output.shape
    if shape is None:
        return f"{var} {m.tensor(var).name!r} has an unknown shape (shape inference could not follow it)"
    if out is None:
        return (f"the output {m.output.name!r} has an unknown shape (shape inference could not follow it), so "
                f"{var} cannot be checked against its last axis; --input-shape may help")
    dims = [d for d in shape]
    while dims and dims[0] == 1:
        dims.pop(0)
    if len(dims) == 1 and out and not isinstance(out[-1], int):
        return (f"the last axis of the output {m.output.name!r} is unknown (shape inference could not follow "
                f"it), so {var} {m.tensor(var).name!r} cannot be checked against it; --input-shape may help")
    if len(dims) > 1 or (dims and out and dims[0] != out[-1]):
        last = out[-1] if out else ""
        return f"{var} {m.tensor(var).name!r} has shape {list(shape)}, not a vector along the last axis {last}"
    return None


def weight_matrix(m: MatchView, var: str) -> str | None:
    """``var`` is a rank-2 weight."""
    shape = m.shape(var)
    if shape is None or len(shape) != 2:
        return f"{var} {m.tensor(var).name!r} has shape {shape}, a Linear weight must be rank 2"
    return None


def dims_match(a: object, b: object) -> bool:
    """Two dims may be equal: equal ints, or either one symbolic (shape inference names
    unknown dims differently on different tensors)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return True


def same_shape(m: MatchView, a: str, b: str) -> bool:
    """Two variables have one shape as far as shape inference can tell."""
    sa, sb = m.shape(a), m.shape(b)
    return sa is not None and sb is not None and len(sa) == len(sb) and all(map(dims_match, sa, sb))


def broadcasts(shape, out) -> bool:
    """``shape`` broadcasts to ``out`` as ONNX's multidirectional broadcast would (dims of 1 repeat; symbols may
    match anything)."""
    return len(shape) <= len(out) and all(d == 1 or dims_match(d, o) for d, o in zip(shape[::-1], list(out)[::-1]))


def first_reason(*reasons: str | None) -> str | None:
    """The first non-empty reason."""
    return next((r for r in reasons if r), None)
