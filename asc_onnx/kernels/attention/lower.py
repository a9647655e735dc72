"""Stage 5, lower (attention class): the fused op's body read back into what the kernel needs (no C++ here).

The body is ``MatMul(Softmax(scale * MatMul(q, kT) + mask), v)`` with the optional parts of
``patterns/attention.py``: a Transpose of k (the cube then reads K ``[Sk, D]`` as a transposed B), scale factors
(``Mul``/``Div`` by scalars on the scores, on q and on k, multiplied into one factor), an additive mask, the
Softmax as an op or decomposed (ReduceMax, Sub, Exp, ReduceSum, Div: the same function of each row), and the
fp32 round trip of the probabilities (two Casts that change no value).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from onnx import helper, numpy_helper

from ...causal import split_mask_nodes
from ...fusion import FusedOp
from ..ir import IO_TYPES, IRBase, LoweringError, snake_case
from ..vector import scalar
from .schedule import AttentionSchedule


@dataclass(frozen=True)
class ScaleTerm:
    """One factor of the scores' scale: a literal, or parameter ``index`` of the op (``td.param[index]``);
    ``inverse`` for a ``Div``."""

    value: float
    index: int | None = None
    inverse: bool = False


@dataclass(frozen=True)
class AttentionKernel(IRBase):
    """Kernel IR of one attention op type.

    Attributes:
        op_type / snake: OpDef type and kernel entry name.
        inputs / outputs: formal names in kernel argument order (q, k, v[, keep][, mask]; y).
        trans_k: k is ``[.., Sk, D]`` (a Transpose in the body); else the op takes kT ``[.., D, Sk]``.
        has_mask: an additive mask broadcast over the scores is the last input.
        kv_repeat: the body repeats K's and V's heads (grouped-query attention): k and v have heads / g heads.
        kv_tiled: ... as a Tile of the heads does: query head h reads KV head h mod Hkv (else h / g).
        has_keep: the scores are multiplied by a keep mask (0 or 1, the additive mask's shape) before the mask is
            added: ``Where(mask, s, fill)`` with a fill a score would move off (canonicalization).
        causal: the mask is the causal triangle, which the body computes from q's and v's shapes
            (:func:`asc_onnx.causal.mask_nodes`): the kernel generates it and skips the KV blocks it masks whole.
        scale: the factors whose product scales the scores.
        dtypes: the one I/O element type.
    """

    op_type: str
    snake: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    trans_k: bool
    has_mask: bool
    scale: tuple[ScaleTerm, ...]
    dtypes: tuple[int, ...]
    params: tuple[float, ...] = ()
    kv_repeat: bool = False
    kv_tiled: bool = False
    has_keep: bool = False
    causal: bool = False
    schedule: AttentionSchedule = AttentionSchedule()  # the policies the host tiling sizes the blocks by

    @property
    def input_names(self) -> tuple[str, ...]:
        """Formal input names in kernel argument order."""
        return self.inputs

    @property
    def scale_value(self) -> float:
        """The scale at the first instance's parameters."""
        v = 1.0
        for t in self.scale:
            v = v / t.value if t.inverse else v * t.value
        return v


def lower_attention(op: FusedOp, symbolic=None, kinds=None) -> AttentionKernel:
    """Lower one attention op; raises LoweringError with the reason when it cannot."""
    cols = op.dtype_columns
    if len(cols) != 1 or len(set(cols[0])) != 1 or cols[0][0] not in IO_TYPES:
        raise LoweringError(f"dtype columns {cols}: the attention kernel takes one float type for q, k, v, mask and y")
    formal = set(op.input_names)
    body = list(op.function.node)
    opset = next((o.version for o in op.function.opset_import if o.domain in ("", "ai.onnx")), 0)
    causal = "mask" not in formal and split_mask_nodes(body, cols[0][0], opset)
    if causal:
        body = causal[0]
    refs = {n.output[0]: n.attribute[0].ref_attr_name for n in body
            if n.op_type == "Constant" and n.attribute[0].ref_attr_name}
    literals = {n.output[0]: scalar(n.attribute[0].t) for n in body
                if n.op_type == "Constant" and n.output[0] not in refs
                and math.prod(n.attribute[0].t.dims) == 1}  # (the KV repeat's shapes are not scalars)
    index = {name: i for i, name in enumerate(op.params)}
    first = op.instances[0].params if op.instances and op.instances[0].params else (1.0,) * len(index)

    def term(name: str, inverse: bool) -> ScaleTerm:
        if name in refs:
            i = index[refs[name]]
            return ScaleTerm(float(first[i]), i, inverse)
        if name in literals:
            return ScaleTerm(float(literals[name]), None, inverse)
        raise LoweringError(f"the scale {name!r} is not a scalar constant")

    trans_k = False
    scale: list[ScaleTerm] = []
    sums = {n.output[0] for n in body if n.op_type == "ReduceSum"}
    for node in body:
        t = node.op_type
        if t in ("Constant", "MatMul", "Softmax", "Cast", "Add", "ReduceMax", "Sub", "Exp", "ReduceSum",
                 "Unsqueeze", "Expand", "Reshape"):
            continue  # (a decomposed softmax is the kernel's online softmax; the KV repeat, its head walk)
        if t == "Div" and node.input[1] in sums:
            continue
        if t == "Mul" and "keep" in node.input:  # Where's multiplicative half: the kernel's keep input
            continue
        if t == "Transpose":
            trans_k = True
        elif t == "Mul":
            scale.append(term(node.input[1], False))
        elif t == "Div":
            scale.append(term(node.input[1], True))
        else:
            raise LoweringError(f"{t} in an attention body is not served")
    has_mask = "mask" in formal
    has_keep = "keep" in formal
    expected = ("q", "k", "v") + (("keep",) if has_keep else ()) + (("mask",) if has_mask else ())
    if tuple(op.input_names) != expected:
        raise LoweringError(f"inputs {op.input_names}: the kernel takes {expected}")
    kv_repeat = any(n.op_type == "Expand" for n in body)
    consts = {n.output[0]: n.attribute[0].t for n in body if n.op_type == "Constant"
              and n.attribute[0].HasField("t")}
    axes = [numpy_helper.to_array(consts[n.input[1]]).reshape(-1).tolist() if len(n.input) > 1 and n.input[1] in consts
            else [int(v) for a in n.attribute if a.name == "axes" for v in helper.get_attribute_value(a)]
            for n in body if n.op_type == "Unsqueeze"]
    kv_tiled = any(a in ([1], [-4]) for a in axes)  # (the pattern checked K and V repeat alike)
    return AttentionKernel(op.op_type, snake_case(op.op_type), tuple(op.input_names), tuple(op.output_names),
                           trans_k, has_mask, tuple(scale), (cols[0][0],), tuple(float(v) for v in first), kv_repeat,
                           kv_tiled, has_keep, bool(causal))


__all__ = ["AttentionKernel", "ScaleTerm", "lower_attention"]
