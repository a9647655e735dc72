"""Model text never becomes code: every registered kernel class (the test suite's toy class too) rendered from a model
whose node, tensor, input and initializer names and whose rule names are hostile, and every file of the output folder
checked for a payload that left its comment or its quotes (asc_onnx/model_text.py is the one writer)."""

from __future__ import annotations

import json
import re
import shlex
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from conftest import F32, const, model
from onnx import helper
from test_attention import attention_model

import asc_onnx
from asc_onnx import FuseOptions, kernels
from asc_onnx.model_text import write
from asc_onnx.registry import builtin_files, load_file

pytestmark = pytest.mark.fast  # (no g++, no emulator run: tests/conftest.py)

#: Each payload carries PWN, the marker the checks look for.
PAYLOADS = ["a\n#error PWN", "b\r#error PWN", "c\u2028#error PWN", "d */ #error PWN /*", "PWN trailing \\",
            "PWN ??/", "e'PWN\"", "$(touch /tmp/PWN)", "`PWN`;", "<script>PWN</script>", "f\u0085#error PWN"]


def hostile(m):
    """``m`` with every node, tensor, input, output and initializer name replaced by a payload of its own."""
    names: dict[str, str] = {}

    def rename(name: str) -> str:
        if not name:
            return name
        if name not in names:
            names[name] = f"{PAYLOADS[len(names) % len(PAYLOADS)]} {len(names)}"
        return names[name]

    g = m.graph
    for i, node in enumerate(g.node):
        node.name = f"{PAYLOADS[i % len(PAYLOADS)]} node{i}"
        node.input[:] = [rename(x) for x in node.input]
        node.output[:] = [rename(x) for x in node.output]
    for vi in [*g.input, *g.output, *g.value_info]:
        vi.name = rename(vi.name)
    for t in g.initializer:
        t.name = rename(t.name)
    return m


def _rules_file(tmp: Path) -> tuple[Path, frozenset[str]]:
    """A user pattern file holding every built-in rule under a hostile name; the built-in names to skip."""
    f = tmp / "evil_rules.py"
    f.write_text("import dataclasses\nfrom asc_onnx.registry import builtin_files, load_file\n"
                 f"RULES = [dataclasses.replace(r, name={PAYLOADS[0]!r} + ' ' + r.name) "
                 "for f in builtin_files() for r in load_file(f)]\n")
    return f, frozenset(r.name for b in builtin_files() for r in load_file(b))


def _pointwise():
    nodes = [helper.make_node("Add", ["x", "b"], ["h"]), helper.make_node("Sigmoid", ["h"], ["s"]),
             helper.make_node("Mul", ["h", "s"], ["y"])]
    return model(nodes, [("x", F32, ["batch", 40])], [("y", F32, ["batch", 40])], [const("b", np.ones(40))])


def _row():
    nodes = [helper.make_node("Add", ["x", "r"], ["h"]), helper.make_node("Softmax", ["h"], ["y"], axis=-1)]
    return model(nodes, [("x", F32, [4, 64]), ("r", F32, [4, 64])], [("y", F32, [4, 64])])


def _matmul():
    w = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "bias"], ["h"]),
             helper.make_node("Sigmoid", ["h"], ["s"]), helper.make_node("Mul", ["h", "s"], ["y"])]
    return model(nodes, [("x", F32, [32, 64])], [("y", F32, [32, 96])], [const("w", w), const("bias", np.ones(96))])


def _toy():
    return model([helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["y"])],
                 [("x", F32, [3, 100])], [("y", F32, [3, 100])])


CASES = {"pointwise": _pointwise, "row": _row, "matmul": _matmul, "attention": attention_model, "toyabs": _toy}


@pytest.fixture
def toy_registered():
    import toyclass

    kernels.register(toyclass.CLASS)
    try:
        yield
    finally:
        kernels.unregister("toyabs")


def test_every_registered_class_is_covered(toy_registered):
    assert set(kernels.CLASSES) == set(CASES)


class _Tags(HTMLParser):
    """Every start tag and attribute value of a page: a payload must reach neither."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [f"{k}={v}" for k, v in attrs if k != "title"]


def _check_cpp(path: Path, text: str) -> None:
    assert "??/" not in text and "*/" not in text and "\u2028" not in text and "\r" not in text, path
    for line in text.split("\n"):
        if "PWN" in line or "#error" in line:
            assert "//" in line and line.index("//") < line.index("PWN"), (path, line)
            assert not line.rstrip().endswith("\\"), (path, line)


def _check_sh(path: Path, text: str) -> None:
    for line in text.split("\n"):
        if "PWN" in line:  # only as one single-quoted word of an assignment
            name, _, value = line.partition("=")
            assert re.fullmatch(r"[A-Z_]+", name) and value.startswith("'"), (path, line)
            assert len(shlex.split(value)) == 1, (path, line)


def _check_folder(out: Path) -> int:
    seen = 0
    for path in sorted(out.rglob("*")):
        if not path.is_file() or path.suffix == ".onnx":
            continue
        text = path.read_text()
        seen += text.count("PWN")
        if path.suffix in (".cpp", ".cc", ".h"):
            _check_cpp(path, text)
        elif path.suffix == ".sh":
            _check_sh(path, text)
        elif path.suffix == ".json":
            json.loads(text)
        elif path.suffix == ".html":
            tags = _Tags()
            tags.feed(text)
            assert "script" not in tags.tags and not any("PWN" in a for a in tags.attrs), path
            assert "<script>PWN" not in text
        elif path.name == "CMakeLists.txt":
            assert "PWN" not in text, path
        else:
            assert "PWN" not in text, path
    return seen


@pytest.mark.parametrize("kind", sorted(CASES))
def test_hostile_names_stay_in_their_comments_and_quotes(kind, tmp_path, toy_registered):
    rules, builtin = _rules_file(tmp_path)
    files = (str(rules),)
    if kind == "toyabs":
        toy_rules = tmp_path / "toy_rules.py"
        toy_rules.write_text("from asc_onnx.pattern import generic_rule\n\nRULES = [generic_rule("
                             f"{PAYLOADS[3]!r}, op_name='ToyAbs', kernel='toyabs', doc={PAYLOADS[0]!r})]\n")
        files += (str(toy_rules),)
    m = hostile(CASES[kind]())
    out = tmp_path / "out"
    res = asc_onnx.fuse(m, out, FuseOptions(pattern_files=files, skip=builtin, emulate=False, judge=False))
    assert any(kernels.of(k).name == kind for k in res.kernels), [k.op.op_type for k in res.kernels]
    assert res.validation is not None and res.validation.ok
    seen = _check_folder(out)
    kernel = next(p for p in (out / "op_package" / "op_kernel").glob("*.cpp"))
    if kind != "toyabs":  # the toy class writes no banner; every other kernel names its nodes in comments
        assert "PWN" in kernel.read_text()
    assert seen > 0  # the report names the nodes, escaped


def test_each_target_keeps_its_payload_inert():
    for p in PAYLOADS:
        c = write(p, "cpp")
        assert "\n" not in c and "*/" not in c and "??" not in c and not c.endswith("\\")
        assert shlex.split(write(p, "sh")) == [p.replace("\n", "_").replace("\r", "_").replace("\u0085", "_")
                                                 .replace("\u2028", "_")]
        assert "<" not in write(p, "html") and '"' not in write(p, "html") and "'" not in write(p, "html")
    with pytest.raises(ValueError):
        write("x", "python")
