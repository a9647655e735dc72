"""Work forked onto the other core (asc_onnx.overlap) gives what the same call gives in this process: its result,
or its exception raised here; a cancelled child is reaped; and a fuse whose whole-model estimates are split between
a child and this process reports the same estimates as one that computes them all here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import asc_onnx
import asc_onnx.decide as decide_mod
from asc_onnx.errors import AscOnnxError
from asc_onnx.options import FuseOptions
from asc_onnx.overlap import Forked

MODELS = Path(__file__).resolve().parent.parent / "models"


def _square_with_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _fails(text: str) -> None:
    raise AscOnnxError(text)


def _never_ends() -> None:
    import time

    while True:
        time.sleep(1)


@pytest.mark.parametrize("inline", [False, True])
def test_the_result_comes_back_from_the_child_or_from_here(inline):
    value, pid = Forked(_square_with_pid, 7, inline=inline).result()
    assert value == 49
    assert (pid == os.getpid()) == inline  # forked: computed in another process


def test_an_exception_in_the_child_is_raised_here_with_its_text():
    with pytest.raises(AscOnnxError, match="the child's own words"):
        Forked(_fails, "the child's own words").result()


def test_a_cancelled_child_is_stopped_and_reaped():
    job = Forked(_never_ends)
    pid = job.pid
    assert pid is not None
    with pytest.raises(KeyError):
        with job:
            raise KeyError("the caller unwinds")
    assert job.pid is None and job.fd is None
    with pytest.raises(ChildProcessError):  # reaped: no zombie left to wait for
        os.waitpid(pid, 0)


def test_forked_whole_model_estimates_equal_those_computed_here(tmp_path, monkeypatch):
    model = MODELS / "llama_tiny_dynamo.onnx"
    opts = FuseOptions(emulate=False)
    here = asc_onnx.fuse(model, tmp_path / "here", opts, validate=False)
    monkeypatch.setattr(decide_mod, "FORK_NODES", 0)  # every model splits its bindings with a child
    calls: list[bool] = []
    real = decide_mod.Forked

    def spy(*args, inline=False):
        calls.append(inline)
        return real(*args, inline=inline)

    monkeypatch.setattr(decide_mod, "Forked", spy)
    forked = asc_onnx.fuse(model, tmp_path / "forked", opts, validate=False)
    assert calls == [False]
    models = here.report["estimates"]["model"]
    assert len(models) >= 2  # both halves hold bindings
    assert forked.report["estimates"] == here.report["estimates"]
    assert json.loads((tmp_path / "forked" / "report.json").read_text())["estimates"] == \
        json.loads((tmp_path / "here" / "report.json").read_text())["estimates"]
