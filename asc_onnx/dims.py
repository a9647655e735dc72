"""Dynamic dims: what each one is (its role), the values a deployment runs it at, and a dim expression's value at a
binding of the input dims.

Exporters spell a dynamic dim in many ways: a name (``batch``, ``seq``), onnx's or tf2onnx's ``unk__214``,
paddle2onnx's ``p2o.DynamicDimension.0``, torch dynamo's ``s0``, a declared ``-1`` or nothing at all. Loading gives
every unnamed one a name of its own (:func:`name_input_dims`), so every dynamic input dim has a name; its role comes
from the graph's structure first (what consumes the input), then from the name, then from its place:

* ``spatial``: an axis after the second of a 4-D (or larger) input that reaches a Conv, a pool or a Resize through
  elementwise ops (NCHW images); the length of a 3-D one (NCL audio or text) is a ``sequence``;
* ``batch``: the first axis of an input of rank 2 or more (the image's N, the tokens' batch), or a batch-like name;
* ``sequence``: the last axis of integer indices into an embedding (Gather), or a sequence-like name;
* ``past``: the axis along which an input is concatenated with the new keys or values (a KV cache), or a name like
  ``past`` or ``cache``;
* ``other``: anything else.

A dim that two inputs share takes the strongest evidence either gives. The deployment sweep (:data:`SWEEP`) puts each
role at a small and a large value; the judge estimates every fused op with every role small, every role large, batch
1 with the rest large (b1 x 2048) and batch 8 with the rest small (b8 x 128), and, for a graph with a past-KV input,
decode: one query (sequence 1) against 2048 and 8192 cached keys (:data:`DECODE_PAST`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from onnx import ModelProto, TensorProto

ROLES = ("batch", "sequence", "past", "spatial", "other")

#: Each role's values at the sweep's small and large corners: batch 1 and 8, a sequence of 128 and 2048 tokens, a KV
#: cache of 128 and 2048 keys, images of 224 and 640 pixels a side, anything else at 128 and 2048.
SWEEP: Mapping[str, tuple[int, int]] = {"batch": (1, 8), "sequence": (128, 2048), "past": (128, 2048),
                                        "spatial": (224, 640), "other": (128, 2048)}

#: Decode: one new token against this many cached keys (graphs with a past-KV input).
DECODE_PAST = (2048, 8192)

_BATCH_NAMES = {"batch", "batch_size", "batchsize", "n", "b", "bs", "nbatch", "num_batch"}
_SEQ_WORDS = ("seq", "sequence", "length", "len", "token", "time", "frame", "step", "word", "text")
_PAST_WORDS = ("past", "cache", "kv", "total", "history", "memory")
_SPATIAL_NAMES = {"h", "w", "height", "width", "image_height", "image_width", "img_h", "img_w"}
#: Ops an image passes through on its way to a convolution (normalisation, layout-preserving casts).
_PASS = {"Cast", "Sub", "Div", "Mul", "Add", "Identity", "Clip", "Relu", "Sigmoid", "Pad", "Slice", "Concat",
         "BatchNormalization", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
_SPATIAL_OPS = {"Conv", "ConvInteger", "QLinearConv", "ConvTranspose", "MaxPool", "AveragePool", "Resize",
                "GlobalAveragePool", "GlobalMaxPool", "InstanceNormalization", "LpPool"}
_INTS = {TensorProto.INT64, TensorProto.INT32, TensorProto.INT16, TensorProto.INT8, TensorProto.UINT8}
#: Evidence strength: what the graph shows beats what a name says beats where the dim sits.
_STRUCTURE, _NAME, _PLACE = 3, 2, 1


@dataclass(frozen=True)
class DimRole:
    """One dynamic input dim: its name, role, why, and where it appears (``input[axis]``)."""

    name: str
    role: str
    why: str
    where: tuple[str, ...]

    @property
    def sweep(self) -> tuple[int, int]:
        return SWEEP[self.role]


#: dim_param spellings that name no dim: paddle2onnx writes ``?`` for every unknown axis, which would otherwise tie
#: an image's height to its width.
_UNNAMED = {"?", "-1", "None", "none", "null", "dynamic", "unknown"}


def _fresh(d: object) -> bool:
    """A dynamic dim with no name of its own: declared ``-1``, neither value nor name, or a placeholder (a declared
    0 is an empty static dim)."""
    if d.HasField("dim_value"):
        return d.dim_value < 0
    return not d.dim_param or d.dim_param.strip() in _UNNAMED


def unnamed(model: ModelProto) -> bool:
    """Whether some dynamic input dim has no name of its own, or an output dim is declared ``-1`` or a placeholder
    (what :func:`name_input_dims` changes)."""
    inits = {i.name for i in model.graph.initializer}

    def dims(vis):
        return (d for vi in vis if vi.name not in inits and vi.type.HasField("tensor_type")
                for d in vi.type.tensor_type.shape.dim)

    return any(_fresh(d) for d in dims(model.graph.input)) or any(
        _fresh(d) and (d.HasField("dim_value") or d.dim_param) for d in dims(model.graph.output))


def name_input_dims(model: ModelProto) -> dict[str, str]:
    """Give every dynamic input dim without a name (declared ``-1``, or neither value nor name) a name of its own,
    ``<input>_dim<axis>``, in place; returns the names given (name -> ``input[axis]``). A name other dims may already
    use is never reused."""
    taken = {d.dim_param for vi in model.graph.input for d in vi.type.tensor_type.shape.dim
             if d.dim_param and not _fresh(d)}
    inits = {i.name for i in model.graph.initializer}
    given: dict[str, str] = {}
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        for j, d in enumerate(vi.type.tensor_type.shape.dim):
            if not _fresh(d):
                continue
            base = name = f"{vi.name}_dim{j}"
            n = 1
            while name in taken:
                name, n = f"{base}_{n}", n + 1
            taken.add(name)
            d.Clear()
            d.dim_param = name
            given[name] = f"{vi.name}[{j}]"
    for vi in model.graph.output:  # an output's -1 or '?' says nothing: left to inference, never a name of its own
        if vi.type.HasField("tensor_type"):
            for d in vi.type.tensor_type.shape.dim:
                if _fresh(d):
                    d.Clear()
    return given


def _name_role(name: str) -> str | None:
    low = name.lower()
    if low in _BATCH_NAMES or "batch" in low:
        return "batch"
    words = set(re.split(r"[^a-z]+", low))
    if any(w in low for w in _PAST_WORDS) and not low.startswith(("unk", "p2o")):
        return "past"
    if low in _SPATIAL_NAMES or words & {"height", "width", "h", "w"}:
        return "spatial"
    if any(w in low for w in _SEQ_WORDS) and not low.startswith(("unk", "p2o")):
        return "sequence"
    return None


def roles(model: ModelProto) -> dict[str, DimRole]:
    """The role of every named dynamic dim of the model's inputs (name -> :class:`DimRole`), in input order (a plan
    computes them once: :attr:`asc_onnx.plan.Planned.dims`)."""
    g = model.graph
    inits = {i.name for i in g.initializer}
    consumers: dict[str, list] = {}
    for node in g.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    evidence: dict[str, tuple[int, str, str]] = {}  # name -> (strength, role, why)
    where: dict[str, list[str]] = {}

    def note(name: str, strength: int, role: str, why: str) -> None:
        if strength > evidence.get(name, (-1, "", ""))[0]:
            evidence[name] = (strength, role, why)

    for vi in g.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_param if d.dim_param else None for d in tt.shape.dim]
        rank = len(dims)
        image = _reaches(vi.name, consumers, _SPATIAL_OPS)
        embedded = tt.elem_type in _INTS and _reaches(vi.name, consumers, {"Gather"}, through={"Cast"})
        cache_axis = _concat_axis(vi.name, consumers, rank)
        for j, name in enumerate(dims):
            if name is None:
                continue
            where.setdefault(name, []).append(f"{vi.name}[{j}]")
            if image and rank >= 4 and j >= 2:
                note(name, _STRUCTURE, "spatial", f"an axis after the channels of {vi.name}, which reaches a {image}")
            elif image and rank == 3 and j == 2:  # a 1-D convolution's length: audio frames or text
                note(name, _STRUCTURE, "sequence", f"the length of {vi.name}, which reaches a 1-D {image}")
            elif image and rank >= 3 and j == 0:
                note(name, _STRUCTURE, "batch", f"the first axis of {vi.name}, which reaches a {image}")
            elif embedded and j == rank - 1:
                note(name, _STRUCTURE, "sequence", f"the last axis of token ids {vi.name} (an embedding's Gather)")
            elif cache_axis == j:
                note(name, _STRUCTURE, "past", f"the axis along which {vi.name} is concatenated (a cache)")
            role = None if re.fullmatch(re.escape(f"{vi.name}_dim{j}") + r"(_\d+)?", name) else _name_role(name)
            if role is not None:  # (a name loading gave says nothing but its input's name)
                note(name, _NAME, role, f"named {name!r}")
            if j == 0 and rank >= 2:
                note(name, _PLACE, "batch", f"the first axis of {vi.name}")
            note(name, 0, "other", "no evidence")
    return {n: DimRole(n, evidence[n][1], evidence[n][2], tuple(where[n])) for n in where}


def _reaches(name: str, consumers: Mapping[str, list], targets: set[str], through: set[str] = _PASS,
             depth: int = 6) -> str | None:
    """The op type among ``targets`` that ``name`` reaches through ops of ``through`` (at most ``depth`` hops)."""
    seen, frontier = {name}, [name]
    for _ in range(depth):
        nxt = []
        for t in frontier:
            for node in consumers.get(t, ()):
                if node.op_type in targets and (node.op_type != "Gather" or list(node.input).index(t) == 1):
                    return node.op_type
                if node.op_type in through:
                    for o in node.output:
                        if o and o not in seen:
                            seen.add(o)
                            nxt.append(o)
        frontier = nxt
    return None


def _concat_axis(name: str, consumers: Mapping[str, list], rank: int) -> int | None:
    """The axis along which the input is concatenated with another tensor of its rank (a KV cache), if it is."""
    for node in consumers.get(name, ()):
        if node.op_type == "Concat" and len(node.input) >= 2:
            axis = next((a.i for a in node.attribute if a.name == "axis"), None)
            if axis is not None and rank >= 3:
                return axis % rank
    return None


def sweep(model: ModelProto, shape_map: Mapping[str, Sequence[int]],
          found: Mapping[str, DimRole] | None = None) -> list[dict[str, int]]:
    """The bindings of the model's dynamic input dims an op is judged at: the user's (``--input-shape``) where they
    give every one, else each role at its small values and then at its large ones (dims the user gave keep
    their value at both). ``found``: the model's :func:`roles`, where the caller has them."""
    given = given_binding(model, shape_map)
    found = roles(model) if found is None else found
    if all(n in given for n in found):
        return [{n: given[n] for n in found}]

    def at(batch: int, rest: int, **fixed: int) -> dict[str, int]:
        return {n: given.get(n, fixed.get(r.role, r.sweep[batch if r.role == "batch" else rest]))
                for n, r in found.items()}

    out = [at(0, 0), at(1, 1), at(0, 1), at(1, 0)]  # all small, all large, b1 x 2048, b8 x 128
    if any(r.role == "past" for r in found.values()):  # decode: one query against a long KV cache
        out += [at(0, 0, sequence=1, past=p) for p in DECODE_PAST]
    unique: list[dict[str, int]] = []
    for b in out:
        if b not in unique:
            unique.append(b)
    return unique


_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_FUNCS = {"floor", "ceiling", "Max", "Min", "Mod", "ceil", "max", "min"}


@functools.lru_cache(maxsize=65536)
def _evaluate(expr: str, binding: tuple[tuple[str, int], ...]) -> int | None:
    values = dict(binding)
    if expr in values:
        return values[expr]
    names: dict[str, str] = {}

    def sub(m: re.Match) -> str:
        tok = m.group(0).rstrip(".")
        if tok in _FUNCS:
            return m.group(0)
        if tok not in values:
            raise KeyError(tok)
        names.setdefault(tok, f"_d{len(names)}")
        return names[tok] + m.group(0)[len(tok):]

    try:
        text = _TOKEN.sub(sub, expr)
    except KeyError:
        return None
    import sympy

    try:
        val = sympy.sympify(text, locals={"ceil": sympy.ceiling, "max": sympy.Max, "min": sympy.Min}).subs(
            {sympy.Symbol(v): values[k] for k, v in names.items()})
    except (sympy.SympifyError, TypeError, ValueError, SyntaxError):
        return None
    if not getattr(val, "is_number", False):
        return None
    out = int(val)
    return out if out == val and out >= 0 else None


def given_binding(model: ModelProto, shape_map: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """The dim names of the model's inputs that ``--input-shape`` (``shape_map``) fixes, with their values."""
    out: dict[str, int] = {}
    for vi in model.graph.input:
        dims = shape_map.get(vi.name)
        if dims is None:
            continue
        for j, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_param and j < len(dims):
                out[d.dim_param] = int(dims[j])
    return out


def bind_shapes(shapes: Mapping[str, Sequence[object] | None], binding: Mapping[str, int]
                ) -> dict[str, tuple[object, ...] | None]:
    """Tensor shapes with the bound names, and expressions of them, computed (other dims as they are)."""
    out: dict[str, tuple[object, ...] | None] = {}
    for name, shape in shapes.items():
        if shape is None:
            out[name] = None
            continue
        vals = [evaluate(d, binding) if isinstance(d, str) else None for d in shape]
        out[name] = tuple(d if v is None else v for v, d in zip(vals, shape))
    return out


def show(shape: Sequence[object] | None) -> str:
    """A shape for a message: ints and names as they are, an expression of names (what symbolic inference writes for
    a strided convolution's output, hundreds of characters long) as ``f(name, ...)``; ``?`` where unknown."""
    if shape is None:
        return "an unknown shape"
    out = []
    for d in shape:
        text = "?" if d is None else str(d)
        if not isinstance(d, int) and d is not None and not _TOKEN.fullmatch(text):
            names = sorted({t.rstrip(".") for t in _TOKEN.findall(text)} - _FUNCS)
            text = f"f({', '.join(names)})" if names else "?"
        out.append(text)
    return "[" + ", ".join(out) + "]"


def evaluate(dim: object, binding: Mapping[str, int]) -> int | None:
    """A dim's value at a binding of the input dims: an int as it is, a name or an expression of names
    (``floor(H/2 - 1/2) + 1``, ``past + 1``, as symbolic inference writes them) computed; None if unknown."""
    if isinstance(dim, int):
        return dim if dim >= 0 else None
    if dim is None:
        return None
    return _evaluate(str(dim), tuple(sorted(binding.items())))


__all__ = ["DimRole", "ROLES", "SWEEP", "bind_shapes", "evaluate", "given_binding", "name_input_dims", "roles", "show",
           "sweep", "unnamed"]
