"""tests/digests.py, the record that proves a restructuring changes no generated file."""

from __future__ import annotations

import digests
from conftest import F32, model
from onnx import helper

import asc_onnx
import asc_onnx.api as api


def _silu(alpha: float = 1.0):
    nodes = [helper.make_node("Mul", ["x", "a"], ["xa"]), helper.make_node("Sigmoid", ["xa"], ["s"]),
             helper.make_node("Mul", ["xa", "s"], ["y"])]
    return model(nodes, [("x", F32, [4, 64])], [("y", F32, [4, 64])], [helper.make_tensor("a", 1, [], [alpha])])


def test_runs_are_recorded_and_a_changed_output_is_found(tmp_path, monkeypatch):
    monkeypatch.setattr(api, "fuse", api.fuse)  # restored after: install() wraps it
    monkeypatch.setattr(asc_onnx, "fuse", asc_onnx.fuse)
    digests.install(tmp_path / "a")
    asc_onnx.fuse(_silu(), tmp_path / "out", validate=False)
    asc_onnx.fuse(_silu(2.0), validate=False)
    runs = digests.load(tmp_path / "a")
    assert len(runs) == 2
    written = next(v for v in runs.values() if "atc.sh" in v)
    assert {"model.asc.onnx", "model.atc.onnx"} <= set(written) and "report.json" not in written
    assert any(k.startswith("op_package/") for v in runs.values() for k in v)
    # the same runs again agree; a changed digest is reported
    (tmp_path / "b").mkdir()
    for p in (tmp_path / "a").glob("*.jsonl"):
        (tmp_path / "b" / p.name).write_text(p.read_text().replace(written["model.asc.onnx"], "0" * 64))
    monkeypatch.setattr("sys.argv", ["digests", "compare", str(tmp_path / "a"), str(tmp_path / "a")])
    assert digests.main() == 0
    monkeypatch.setattr("sys.argv", ["digests", "compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert digests.main() == 1
