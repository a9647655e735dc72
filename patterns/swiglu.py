"""SwiGLU MLP: silu(x @ Wg [+ bg]) * (x @ Wu [+ bu]) (LLaMA, Qwen, Mistral), and the fused
gate-up projection followed by Split (Phi-3)."""

from __future__ import annotations

from asc_onnx.checks import first_reason, trailing_vector, weight_matrix
from asc_onnx.graph import attrs_of
from asc_onnx.pattern import ANY, op, rule


def _silu(h):
    return op.Mul(h, op.Sigmoid(h))


def swiglu(x, w_gate, w_up):
    return op.Mul(_silu(op.MatMul(x, w_gate)), op.MatMul(x, w_up))


def swiglu_bias(x, w_gate, b_gate, w_up, b_up):
    return op.Mul(_silu(op.Add(op.MatMul(x, w_gate), b_gate)), op.Add(op.MatMul(x, w_up), b_up))


def swiglu_split(x, w_gate_up):
    gate, up = op.Split(op.MatMul(x, w_gate_up), axis=ANY, _outputs=2)
    return op.Mul(_silu(gate), up)


def swiglu_act(gate, up):
    return op.Mul(_silu(gate), up)


def _check(m) -> str | None:
    return first_reason(weight_matrix(m, "w_gate"), weight_matrix(m, "w_up"))


def _check_bias(m) -> str | None:
    return first_reason(_check(m), trailing_vector(m, "b_gate"), trailing_vector(m, "b_up"))


def _check_split(m) -> str | None:
    reason = weight_matrix(m, "w_gate_up")
    if reason:
        return reason
    split = m.node("Split")
    attrs = attrs_of(split)
    rank = len(split.inputs[0].shape or [])
    if attrs.get("axis") not in (-1, rank - 1):
        return f"Split {split.name!r} splits axis {attrs.get('axis')}, not the last axis"
    sizes = attrs.get("split")
    if sizes is not None and (len(sizes) != 2 or sizes[0] != sizes[1]):
        return f"Split {split.name!r} makes parts {sizes}, SwiGLU needs two equal halves"
    return None


def _check_act(m) -> str | None:
    if list(m.shape("gate") or []) != list(m.shape("up") or [None]):
        return "gate and up do not have one known shape"
    return None


RULES = [
    rule("SwiGLUBias", swiglu_bias, op_name="SwiGluBias", kernel="matmul",
         doc="silu(x@Wg+bg) * (x@Wu+bu): gated MLP with biases", check=_check_bias),
    rule("SwiGLU", swiglu, op_name="SwiGlu", kernel="matmul",
         doc="silu(x@Wg) * (x@Wu): the LLaMA/Qwen/Mistral gated MLP (two MatMuls sharing x)", check=_check),
    rule("SwiGLUSplit", swiglu_split, op_name="SwiGluSplit", kernel="matmul",
         doc="silu(g) * u with g, u = Split(x @ W_gate_up): the Phi-3 fused gate-up projection",
         check=_check_split),
    rule("SwiGLUAct", swiglu_act, op_name="SwiGluAct", kernel="pointwise",
         doc="silu(gate) * up on two tensors of one shape (the SwiGLU activation alone)", check=_check_act),
]
