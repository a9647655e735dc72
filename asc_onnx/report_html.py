"""``report.html``: the report as a page people read, beside the ``report.json`` machines read.

Per fused op type it shows the matched subgraph before and the one fused node after (SVG), the count and
the source nodes, the kernel class, the emulator's numerical error, the GM bytes and the time the fusion
is estimated to save; then the near misses with their reasons, the control-flow bodies searched,
and the commands to run next. Pictures come from graphviz's ``dot`` where it is installed and from a
small layered layout of our own where it is not. Every string from the model is HTML-escaped.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from onnx import FunctionProto, numpy_helper

from .model_text import write
from .report_charts import section as speed_section

#: Colours of the pictures (the page test looks for FUSED_FILL in its screenshot).
FUSED_FILL, OP_FILL, IO_FILL, CONST_FILL = "#1f6feb", "#dbe7fb", "#eeeeee", "#fff4d6"

_CSS = """
svg.chart .grid{stroke:#eee} svg.chart .roof{stroke:#555;stroke-width:1.5} svg.chart .tick{font-size:11px;fill:#555}
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1100px;
color:#1b1f24;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:16px;margin:18px 0 6px} .muted{color:#59636e} .ok{color:#1a7f37;font-weight:600}
.bad{color:#cf222e;font-weight:600} table{border-collapse:collapse;margin:6px 0 12px}
td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top} th{background:#f6f8fa}
.op{border:1px solid #d0d7de;border-radius:6px;padding:8px 14px;margin:14px 0}
.pics{display:flex;gap:28px;align-items:flex-start;flex-wrap:wrap} .pics figure{margin:0}
figcaption{font-size:12px;color:#59636e;text-align:center} code,pre{background:#f6f8fa;border-radius:4px}
pre{padding:8px 12px;overflow-x:auto} details{margin:4px 0}
"""


def _esc(v: object) -> str:
    return write(v, "html")


def _graph(fn: FunctionProto) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """Boxes ``(id, label, kind)`` and edges of a function body; kinds: io, const, op."""
    boxes = [(f"in:{n}", n, "io") for n in fn.input]
    where: dict[str, str] = {n: f"in:{n}" for n in fn.input}
    edges: list[tuple[str, str]] = []
    for i, node in enumerate(fn.node):
        bid = f"n{i}"
        if node.op_type == "Constant":
            label = "const"
            t = node.attribute[0].t if node.attribute and node.attribute[0].HasField("t") else None
            if t is not None and _numel(t) == 1:
                label = f"{float(numpy_helper.to_array(t).reshape(-1)[0]):.6g}"
            boxes.append((bid, label, "const"))
        else:
            boxes.append((bid, node.op_type, "op"))
            edges.extend((where[x], bid) for x in node.input if x in where)
        for y in node.output:
            where[y] = bid
    for n in fn.output:
        boxes.append((f"out:{n}", n, "io"))
        if n in where:
            edges.append((where[n], f"out:{n}"))
    return boxes, edges


def _numel(t: Any) -> int:
    n = 1
    for d in t.dims:
        n *= d
    return n


def _fused_graph(fn: FunctionProto, op_type: str) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    boxes = [(f"in:{n}", n, "io") for n in fn.input] + [("fused", op_type, "fused")]
    boxes += [(f"out:{n}", n, "io") for n in fn.output]
    edges = [(f"in:{n}", "fused") for n in fn.input] + [("fused", f"out:{n}") for n in fn.output]
    return boxes, edges


_FILL = {"io": IO_FILL, "const": CONST_FILL, "op": OP_FILL, "fused": FUSED_FILL}


def _svg_own(boxes: Sequence[tuple[str, str, str]], edges: Sequence[tuple[str, str]]) -> str:
    """A layered top-down layout: each box one layer below its deepest source, boxes of a layer side by side."""
    preds: dict[str, list[str]] = {b: [] for b, _, _ in boxes}
    for a, b in edges:
        preds[b].append(a)
    layer: dict[str, int] = {}
    for bid, _, _ in boxes:  # bodies are in topological order
        layer[bid] = 1 + max((layer[p] for p in preds[bid]), default=-1)
    for bid, _, kind in boxes:  # a constant sits just above its first reader, not among the inputs
        readers = [layer[b] for a, b in edges if a == bid]
        if kind == "const" and readers:
            layer[bid] = max(0, min(readers) - 1)
    rows: dict[int, list[tuple[str, str, str]]] = {}
    for b in boxes:
        rows.setdefault(layer[b[0]], []).append(b)
    size = {bid: (max(44, 9 * len(label) + 20), 28) for bid, label, _ in boxes}
    width = max(sum(size[b[0]][0] + 16 for b in row) for row in rows.values()) + 16
    pos: dict[str, tuple[float, float]] = {}
    for r, row in rows.items():
        x = (width - sum(size[b[0]][0] + 16 for b in row) + 16) / 2
        for bid, _, _ in row:
            pos[bid] = (x + size[bid][0] / 2, 24 + r * 58)
            x += size[bid][0] + 16
    height = 24 + max(rows) * 58 + 34
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica,Arial,sans-serif" font-size="13">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#57606a"/></marker></defs>']
    for a, b in edges:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        out.append(f'<line x1="{x1:.0f}" y1="{y1 + 14:.0f}" x2="{x2:.0f}" y2="{y2 - 15:.0f}" stroke="#57606a" '
                   'stroke-width="1.3" marker-end="url(#arrow)"/>')
    for bid, label, kind in boxes:
        (x, y), (w, h) = pos[bid], size[bid]
        rx = h / 2 if kind == "io" else 5
        color = "#ffffff" if kind == "fused" else "#1b1f24"
        out.append(f'<rect x="{x - w / 2:.0f}" y="{y - h / 2:.0f}" width="{w}" height="{h}" rx="{rx:.0f}" '
                   f'fill="{_FILL[kind]}" stroke="#57606a"/>')
        out.append(f'<text x="{x:.0f}" y="{y + 4.5:.0f}" text-anchor="middle" fill="{color}">{_esc(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _dot_text(boxes: Sequence[tuple[str, str, str]], edges: Sequence[tuple[str, str]]) -> str:
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ['digraph G {', 'rankdir=TB; bgcolor="transparent"; nodesep=0.25; ranksep=0.35;',
             'node [fontname="Helvetica" fontsize=11 style="filled,rounded" shape=box color="#57606a" height=0.3];',
             'edge [color="#57606a" arrowsize=0.6];']
    for bid, label, kind in boxes:
        extra = ' fontcolor="white"' if kind == "fused" else ""
        shape = ' shape=ellipse' if kind == "io" else ""
        lines.append(f'{q(bid)} [label={q(label)} fillcolor="{_FILL[kind]}"{shape}{extra}];')
    lines += [f"{q(a)} -> {q(b)};" for a, b in edges]
    return "\n".join(lines + ["}"])


def _svg(boxes: Sequence[tuple[str, str, str]], edges: Sequence[tuple[str, str]], use_dot: bool) -> str:
    if use_dot:
        try:
            proc = subprocess.run(["dot", "-Tsvg"], input=_dot_text(boxes, edges), capture_output=True, text=True,
                                  timeout=60, check=True)
            svg = proc.stdout
            return svg[svg.index("<svg"):]
        except (OSError, subprocess.SubprocessError, ValueError):
            pass  # a broken graphviz install: our own layout
    return _svg_own(boxes, edges)


def dot_available() -> bool:
    """graphviz's ``dot`` is on PATH."""
    return shutil.which("dot") is not None


def _per_op(report: Mapping[str, Any], key: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in report.get("kernels", {}).get(key, []):
        out.setdefault(row["op_type"], []).append(row)
    return out


def _num(v: object) -> float:
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("inf")


def _op_section(op: Mapping[str, Any], fn: FunctionProto | None, checks: Sequence[Mapping[str, Any]],
                moves: Sequence[Mapping[str, Any]], why_not: str, soc: str, use_dot: bool,
                est: Mapping[str, Any] | None = None) -> str:
    parts = [f'<div class="op"><h3>{_esc(op["op_type"])} <span class="muted">x{op["count"]} · rule '
             f'{_esc(op["rule"])} · {_esc(op["kernel"])} kernel</span></h3>']
    if fn is not None:
        before = _svg(*_graph(fn), use_dot)
        after = _svg(*_fused_graph(fn, op["op_type"]), use_dot)
        ops = sum(1 for n in fn.node if n.op_type != "Constant")
        parts.append(f'<div class="pics"><figure>{before}<figcaption>before: {ops} nodes'
                     f'</figcaption></figure><figure>{after}<figcaption>after: one {_esc(op["op_type"])} node'
                     '</figcaption></figure></div>')
    rows = []
    if checks:
        worst = max(checks, key=lambda c: _num(c["max_abs"]))
        verdict = all(c["ok"] for c in checks)
        rows.append(("emulated kernel", f'<span class="{"ok" if verdict else "bad"}">'
                     f'{"ok" if verdict else "FAILED"}</span> in {len(checks)} runs; max abs error '
                     f'{_num(worst["max_abs"]):.3e} ({_esc(worst["dtype"])}, {_esc(worst["inputs"])} inputs)'))
    elif why_not and not (est and not est.get("shipped", True)):
        rows.append(("kernel", f'<span class="bad">not generated</span>: {_esc(why_not)}'))
    if moves:
        m = moves[0]
        fused, unfused = int(m["fused"]), int(m["unfused"])
        rows.append(("GM bytes", f"{fused} fused, {unfused} as separate nodes "
                     f"({unfused / max(fused, 1):.1f}x less), at the checked shape {list(m['shape'])}"))
    slow_list = (est or {}).get("slow_corner", [])
    for i, e in enumerate((est or {}).get("estimates", [])):
        if e.get("error"):
            continue
        w = slow_list[i] if i < len(slow_list) else e
        b = ", ".join(f"{k}={v}" for k, v in sorted(e["binding"].items())) or "its static shapes"
        rows.append((f"estimated time at {_esc(b)}",
                     f"{w['unfused_us'] / max(w['fused_us'], 1e-9):.2f}x at the slow corner ({w['fused_us']:.1f} "
                     f"against {w['unfused_us']:.1f} µs); at the table values {e['fused_us']:.1f} µs fused "
                     f"(kernel {e['body_us']:.1f} µs, {e['efficiency']:.0%} of its bound, "
                     f"{_esc(e['bottleneck'] or '-')}-bound) against {e['unfused_us']:.1f} µs as ATC would run the "
                     "nodes; timing model estimates"))
    if est and not est.get("shipped", True):
        rows.append(("not shipped", f'<span class="bad">estimated slower</span>: {_esc(est["reason"])}'))
    srcs = "".join(f"<li><code>{_esc(i['node'])}</code>: {_esc(', '.join(i['source_nodes']))}</li>"
                   for i in op["instances"][:50])
    more = f"<li>... {len(op['instances']) - 50} more in report.json</li>" if len(op["instances"]) > 50 else ""
    rows.append(("source nodes", f"<details><summary>{len(op['instances'])} fused nodes</summary><ul>{srcs}{more}"
                 "</ul></details>"))
    parts.append("<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table></div>")
    return "\n".join(parts)


def render(report: Mapping[str, Any], functions: Mapping[str, FunctionProto], out_name: str = "OUT",
           use_dot: bool | None = None) -> str:
    """The page for ``report`` (a report.json dict); ``functions`` are the fused ops' bodies by op type."""
    use_dot = dot_available() if use_dot is None else use_dot
    soc = report.get("atc", {}).get("soc", "Ascend910B")
    val = report.get("validation") or {}
    checks, moves = _per_op(report, "emulated"), _per_op(report, "data_movement")
    estimates = {o["op_type"]: o for o in (report.get("estimates") or {}).get("ops", [])}
    not_gen = {r["op_type"]: r["reason"] for r in report.get("kernels", {}).get("not_generated", [])}
    head = [f"<h1>asc-onnx: {_esc(report.get('model', ''))}</h1>",
            f'<p class="muted">{report["nodes_before"]} nodes → {report["nodes_after"]} nodes · '
            f'{sum(o["count"] for o in report["ops"])} fused nodes of {len(report["ops"])} op types · target '
            f'{_esc(soc)} · pictures by {"graphviz dot" if use_dot else "asc-onnx layout"}</p>']
    if val:
        worst = max((_num(o["max_abs"]) for o in val.get("outputs", [])), default=0.0)
        head.append(f'<p>Rewritten model against the original on onnxruntime: <span class="'
                    f'{"ok" if val["ok"] else "bad"}">{"ok" if val["ok"] else "MISMATCH"}</span>, '
                    f'{len(val.get("outputs", []))} outputs, max abs error {worst:.3e}'
                    + (f' <span class="muted">({_esc(val["note"])})</span>' if val.get("note") else "") + "</p>")
    own = report.get("kernels", {}).get("own_tiling")
    if own:
        head.append('<p><span class="bad">Proven under asc-onnx\'s own Matmul tiling</span>, not the one CANN\'s host '
                    'code computes and the device runs (no CANN sources were given): '
                    + ", ".join(f"<code>{_esc(t)}</code>" for t in own) + "</p>")
    dep = report.get("deployed")
    if dep:
        head.append(f'<p>ATC model with every fused node run by its emulated kernel: <span class="'
                    f'{"ok" if dep["ok"] else "bad"}">{"ok" if dep["ok"] else "FAILED"}</span>, '
                    f'{dep["emulated_nodes"]} fused nodes</p>')
    body = ["<h2>Fused op types</h2>"] if report["ops"] else ["<h2>Nothing fused</h2>"]
    for op in report["ops"]:
        body.append(_op_section(op, functions.get(op["op_type"]), checks.get(op["op_type"], []),
                                moves.get(op["op_type"], []), not_gen.get(op["op_type"], ""), soc, use_dot,
                                estimates.get(op["op_type"])))
    body.append(speed_section(report.get("estimates"), soc))
    near = report.get("near_misses", [])
    if near:
        body.append(f"<h2>Near misses ({len(near)})</h2><table><tr><th>rule</th><th>at node</th><th>reason</th></tr>"
                    + "".join(f"<tr><td>{_esc(n['rule'])}</td><td><code>{_esc(n['node'])}</code></td>"
                              f"<td>{_esc(n['reason'])}</td></tr>" for n in near) + "</table>")
    bodies = report.get("control_flow_bodies", [])
    if bodies:
        body.append("<h2>Control-flow bodies</h2><p>Searched like graphs; their fused nodes stay inside them.</p>"
                    "<ul>" + "".join(f"<li>{_esc(s['op'])} <code>{_esc(s['node'])}</code> {_esc(s['body'])}: "
                                     f"{s['nodes']} nodes, {s['fusions']} fused</li>" for s in bodies) + "</ul>")
    o = _esc(out_name)
    body.append("<h2>Next</h2><p>On a machine with CANN (source its <code>set_env.sh</code>):</p>"
                f"<pre>asc-onnx build {o}     # compile op_package and install it into {o}/opp\n"
                f"asc-onnx convert {o}   # run {o}/atc.sh: ATC on model.atc.onnx with the custom ops</pre>"
                f"<p>Here: <code>asc-onnx emulate {o}</code> reruns every kernel in the emulator; "
                f"<code>asc-onnx validate MODEL {o} --kernels</code> runs the ATC model with them.</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>asc-onnx report: "
            f"{_esc(report.get('model', ''))}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(head + body) + "\n</body></html>\n")
