"""The direct import (asc_onnx.importer) builds the graph onnx-graphsurgeon's importer builds: every node's op,
name, domain, attributes and tensors, every tensor's kind, dtype, shape and links, the graph's inputs, outputs and
metadata, and the same model exported, on every fixture and on the ONNX backend cases' models."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_graphsurgeon as gs
import pytest
from conftest import MODELS

from asc_onnx.importer import import_model

FIXTURES = sorted(p.stem for p in MODELS.glob("*.onnx"))


def _tensor_facts(t: gs.Tensor) -> tuple:
    kind = type(t).__name__
    if isinstance(t, gs.Constant):
        return (kind, t.name, tuple(t.shape), str(t.dtype), t.data_location)
    return (kind, t.name, str(t.dtype), None if t.shape is None else tuple(t.shape), t.type)


def _attr(v: object) -> object:
    if isinstance(v, gs.Constant):
        return ("const", v.name, tuple(v.shape), str(v.dtype), np.asarray(v.values).tobytes())
    return v


def _facts(g: gs.Graph) -> tuple:
    nodes = tuple((n.op, n.name, n.domain, tuple((k, _attr(v)) for k, v in n.attrs.items()),
                   tuple(_tensor_facts(t) for t in n.inputs), tuple(_tensor_facts(t) for t in n.outputs),
                   tuple(tuple(c.name for c in t.outputs) for t in n.outputs),
                   tuple(tuple(p.name for p in t.inputs) for t in n.inputs))
                  for n in g.nodes)
    return (nodes, tuple(_tensor_facts(t) for t in g.inputs), tuple(_tensor_facts(t) for t in g.outputs),
            g.name, g.doc_string, g.producer_name, g.producer_version, g.opset, list(g.import_domains),
            g.ir_version)


@pytest.mark.parametrize("name", FIXTURES)
def test_the_direct_import_is_graphsurgeons(name):
    model = onnx.load(MODELS / f"{name}.onnx", load_external_data=False)
    model = onnx.shape_inference.infer_shapes(model)  # (value_info as the pipeline has it)
    ours, theirs = import_model(model), gs.import_onnx(model)
    assert _facts(ours) == _facts(theirs)
    assert gs.export_onnx(ours).SerializeToString() == gs.export_onnx(theirs).SerializeToString()


def test_the_backend_cases_import_alike():
    """The onnx package's node tests: optional inputs left empty, every attribute kind, constants as attributes."""
    from onnx.backend.test.loader import load_model_tests

    cases = [c for c in load_model_tests(kind="node")][:400]
    assert len(cases) > 100
    for case in cases:
        model = case.model if case.model_dir is None else onnx.load(case.model_dir + "/model.onnx")
        if model is None:
            continue
        ours, theirs = import_model(model), gs.import_onnx(model)
        assert _facts(ours) == _facts(theirs), case.name
