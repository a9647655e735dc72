"""Seeded random elementwise DAGs, the inputs of the property tests and of ``bench/soak_dags.py``.

A draw is fp16 or fp32 of rank 1-5 with one or two full inputs and broadcast inputs of every kind the
kernels meet (a scalar, a trailing vector, a mid-axis ``[.., C, 1]`` tensor, a leading-1s row); 3-8 ops
from arithmetic, Relu/Abs/Neg/Sigmoid/Tanh, comparisons feeding ``Where`` and ``Cast`` round trips; float
constants; and intermediates that are graph outputs or read by a node outside any fusion (a Transpose).
Values stay within a few units so that fp16 rounding differences between one fused kernel (fp32 inside)
and onnxruntime's per-node fp16 stay inside the stated fp16 tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
SOCS = ("Ascend910B", "Ascend310P")
DIMS = (1, 2, 3, 4, 5, 7, 8, 16, 33)


@dataclass(frozen=True)
class Draw:
    """One random DAG: the model, the SoC it targets and a one-line description for failure messages."""

    seed: int
    model: onnx.ModelProto
    soc: str
    what: str

    @property
    def repro(self) -> str:
        return (f"python3 bench/soak_dags.py --seed {self.seed} --count 1   # {self.what} on {self.soc}")


def _shape(rng: np.random.Generator, rank: int) -> list[int]:
    while True:
        dims = [int(rng.choice(DIMS)) for _ in range(rank)]
        if int(np.prod(dims)) <= 4096:
            return dims


def draw(seed: int) -> Draw:
    """The DAG of ``seed`` (the same model every time)."""
    rng = np.random.default_rng(seed)
    dtype = F16 if rng.random() < 0.5 else F32
    np_t = np.float16 if dtype == F16 else np.float32
    rank = int(rng.integers(1, 6))
    shape = _shape(rng, rank)
    soc = SOCS[seed % 2]
    inputs = [("a", dtype, shape)]
    inits: list[onnx.TensorProto] = []
    values: dict[str, float] = {"a": 2.0}  # name -> bound on |value|
    if rng.random() < 0.5:
        inputs.append(("b", dtype, shape))
        values["b"] = 2.0
    kinds = []
    for kind in rng.permutation(["scalar", "vector", "mid", "row"])[: int(rng.integers(1, 4))]:
        if kind == "scalar":
            bshape: list[int] = [] if rng.random() < 0.5 else [1]
        elif kind == "vector":
            bshape = [shape[-1]]
        elif kind == "mid" and rank >= 2:
            axis = int(rng.integers(0, rank - 1))
            bshape = [shape[axis] if i == axis else 1 for i in range(rank)][axis:]
        elif kind == "row" and rank >= 2:
            bshape = [1] + shape[1:]
        else:
            continue
        name = f"k{len(kinds)}"
        kinds.append(kind)
        if rng.random() < 0.5:
            inputs.append((name, dtype, bshape))
        else:
            inits.append(numpy_helper.from_array(rng.uniform(-1.5, 1.5, bshape).astype(np_t), name))
        values[name] = 1.5
    nodes: list[onnx.NodeProto] = []
    made: list[str] = []
    c = 0

    def const(v: float) -> str:
        nonlocal c
        c += 1
        inits.append(numpy_helper.from_array(np.array(v, np_t), f"c{c}"))
        values[f"c{c}"] = abs(v)
        return f"c{c}"

    for i in range(int(rng.integers(3, 9))):
        out = f"t{i}"
        x = str(rng.choice(list(values)))
        y = str(rng.choice(list(values)))
        op = str(rng.choice(["Add", "Sub", "Mul", "MulC", "AddC", "Max", "Min", "Div", "Relu", "Abs", "Neg",
                             "Sigmoid", "Tanh", "Where", "Cast"],
                            p=[.1, .08, .1, .1, .1, .06, .06, .06, .05, .05, .04, .06, .06, .06, .02]))
        if op in ("Add", "Sub") and values[x] + values[y] <= 8:
            nodes.append(helper.make_node(op, [x, y], [out]))
            values[out] = values[x] + values[y]
        elif op == "Mul" and values[x] * values[y] <= 8:
            nodes.append(helper.make_node("Mul", [x, y], [out]))
            values[out] = values[x] * values[y]
        elif op == "MulC":
            v = float(np.float32(rng.uniform(0.25, 1.5)))
            nodes.append(helper.make_node("Mul", [x, const(v)], [out]))
            values[out] = values[x] * v
        elif op == "AddC" and values[x] <= 6:
            v = float(np.float32(rng.uniform(-1, 1)))
            nodes.append(helper.make_node("Add", [const(v), x], [out]))
            values[out] = values[x] + abs(v)
        elif op in ("Max", "Min"):
            nodes.append(helper.make_node(op, [x, y], [out]))
            values[out] = max(values[x], values[y])
        elif op == "Div":  # x / (1 + |y|): never near a zero divisor
            nodes += [helper.make_node("Abs", [y], [f"{out}a"]), helper.make_node("Add", [f"{out}a", const(1.0)],
                                                                                 [f"{out}d"]),
                      helper.make_node("Div", [x, f"{out}d"], [out])]
            values[out] = values[x]
        elif op in ("Relu", "Abs", "Neg"):
            nodes.append(helper.make_node(op, [x], [out]))
            values[out] = values[x]
        elif op in ("Sigmoid", "Tanh"):
            nodes.append(helper.make_node(op, [x], [out]))
            values[out] = 1.0
        elif op == "Where":
            nodes += [helper.make_node(str(rng.choice(["Less", "Greater"])), [x, y], [f"{out}m"]),
                      helper.make_node("Where", [f"{out}m", x, y], [out])]
            values[out] = max(values[x], values[y])
        elif op == "Cast":  # through the other float type and back: rounds, and splits a chain
            other = F32 if dtype == F16 else F16
            nodes += [helper.make_node("Cast", [x], [f"{out}c"], to=other),
                      helper.make_node("Cast", [f"{out}c"], [out], to=dtype)]
            values[out] = values[x]
        else:
            nodes.append(helper.make_node("Relu", [x], [out]))
            values[out] = values[x]
        made.append(out)
    outputs = [(made[-1], dtype, None)]
    extra = [m for m in made[:-1] if rng.random() < 0.25]
    for m in extra:
        if rng.random() < 0.5:
            outputs.append((m, dtype, None))  # an intermediate that is a graph output
        else:  # read outside any fusion
            nodes.append(helper.make_node("Transpose", [m], [f"{m}T"]))
            outputs.append((f"{m}T", dtype, None))
    graph = helper.make_graph(nodes, f"dag{seed}", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    done = onnx.shape_inference.infer_shapes(model).graph
    inferred = {vi.name: vi for vi in list(done.value_info) + list(done.output)}
    for o in model.graph.output:  # the outputs' shapes, as onnx infers them (broadcasts decide them)
        o.type.CopyFrom(inferred[o.name].type)
    onnx.checker.check_model(model)
    ops = [n.op_type for n in nodes]
    what = (f"seed {seed}: {'fp16' if dtype == F16 else 'fp32'} {shape}, broadcasts {kinds or 'none'}, "
            f"{len(ops)} nodes {'/'.join(ops)}, {len(extra)} intermediates read outside")
    return Draw(seed, model, soc, what)
