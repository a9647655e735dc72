"""report.html: written beside report.json, escaped, and rendered by a real browser.

Headless Chromium takes a screenshot of the page with each picture layout (graphviz ``dot`` and our own);
the test decodes the PNG and finds the fused node's fill colour in it, so a page whose SVG did not
render, or rendered blank, fails. ``.ci/run`` installs Chromium and graphviz; elsewhere the browser test
skips when Chromium is missing, unless ``ASC_ONNX_CI`` is set (then a missing browser fails)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import F32, const, model
from onnx import helper

import asc_onnx
from asc_onnx.report_html import FUSED_FILL, dot_available, render

NODE = helper.make_node
HOSTILE = '<img src=x onerror="alert(1)">'


def _model():
    """SiLU, a LayerNorm, and a node named like an HTML injection."""
    nodes = [NODE("Sigmoid", ["x"], ["s"], name=HOSTILE), NODE("Mul", ["x", "s"], ["h"]),
             NODE("ReduceMean", ["h"], ["mu"], axes=[-1]), NODE("Sub", ["h", "mu"], ["d"]),
             NODE("Mul", ["d", "d"], ["d2"]), NODE("ReduceMean", ["d2"], ["var"], axes=[-1]),
             NODE("Add", ["var", "eps"], ["ve"]), NODE("Sqrt", ["ve"], ["sd"]), NODE("Div", ["d", "sd"], ["n"]),
             NODE("Mul", ["n", "g"], ["ng"]), NODE("Add", ["ng", "b"], ["y"])]
    return model(nodes, [("x", F32, [4, 64])], [("y", F32, [4, 64])],
                 [const("eps", 1e-5), const("g", np.linspace(0.5, 1.5, 64)), const("b", np.linspace(-1, 1, 64))])


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("html") / "out"
    asc_onnx.fuse(_model(), folder)
    return folder


def test_report_html_is_written_and_escapes_the_model(out):
    page = (out / "report.html").read_text()
    report = json.loads((out / "report.json").read_text())
    pictures = page.count("<svg") - page.count('class="chart"')  # two per op; the speed charts apart
    assert page.startswith("<!DOCTYPE html>") and pictures == 2 * len(report["ops"]) >= 4
    assert HOSTILE not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    for op in report["ops"]:
        assert op["op_type"] in page
    assert "asc-onnx build out" in page and "asc-onnx convert out" in page
    assert "max abs error" in page and "estimated time at its static shapes" in page and "Speed (timing model" in page


def _png_pixels(data: bytes) -> np.ndarray:
    """RGB(A) pixels of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, head = 8, [], None
    while pos < len(data):
        (n,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + n
    w, h, depth, color, _, _, interlace = head
    assert depth == 8 and color in (2, 6) and interlace == 0, head
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = w * bpp
    img = np.zeros((h, stride), np.uint8)
    prev = np.zeros(stride, np.int32)
    for y in range(h):
        f, line = raw[y * (stride + 1)], np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        cur = np.zeros(stride, np.int32)
        if f in (0, 2):
            cur = (line + (prev if f == 2 else 0)) & 255
        else:  # Sub, Average, Paeth: left neighbours first
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[i] = (line[i] + pred) & 255
        img[y], prev = cur, cur
    return img.reshape(h, w, bpp)[:, :, :3]


def _chromium() -> str:
    exe = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if exe is None:
        if os.environ.get("ASC_ONNX_CI"):
            pytest.fail("Chromium is missing: .ci/run installs it")
        pytest.skip("Chromium is not installed (.ci/run installs it)")
    return exe


@pytest.mark.parametrize("layout", ["dot", "own"])
def test_report_renders_in_headless_chromium(out, tmp_path, layout):
    if layout == "dot" and not dot_available():
        if os.environ.get("ASC_ONNX_CI"):
            pytest.fail("graphviz is missing: .ci/run installs it")
        pytest.skip("graphviz is not installed")
    exe = _chromium()
    report = json.loads((out / "report.json").read_text())
    fns = {f.name: f for f in onnx.load(out / "model.asc.onnx").functions}
    page = tmp_path / "report.html"
    page.write_text(render(report, fns, "out", use_dot=layout == "dot"))
    shot = tmp_path / "shot.png"
    subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1100,1600", page.as_uri()],
                   capture_output=True, timeout=180, check=True)
    px = _png_pixels(shot.read_bytes()).astype(int)
    fill = np.array([int(FUSED_FILL[i:i + 2], 16) for i in (1, 3, 5)])
    fused = int((np.abs(px - fill).sum(axis=2) < 40).sum())
    ink = float((px.sum(axis=2) < 600).mean())
    assert fused > 1500, f"the fused nodes' fill is missing from the screenshot ({fused} pixels)"
    assert 0.01 < ink < 0.6, f"{ink:.1%} of the screenshot is ink: blank or broken"
