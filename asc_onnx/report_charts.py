"""The report page's charts, drawn as inline SVG from the report's ``estimates`` (:mod:`asc_onnx.estimate`):

* a roofline: each fused op at each judged shape, its kernel (filled) and its unfused nodes (hollow), placed by
  operational intensity (work per compulsory GM byte) and by the work rate its estimate gives, under the roofs of
  the GM bandwidth and the vector and cube peaks;
* the model's estimated time split by op type, fused against unfused, as two stacked bars.

Every number on them is an estimate of the timing model, and the captions say so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .hardware import value
from .model_text import write

#: Colours of the op types in the split chart, in turn.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")


def _esc(v: object) -> str:
    return write(v, "html")


def _log_axis(lo: float, hi: float) -> tuple[float, float]:
    """Decade bounds around [lo, hi]."""
    return 10 ** math.floor(math.log10(max(lo, 1e-30))), 10 ** math.ceil(math.log10(max(hi, lo * 10, 1e-29)))


def roofline(est: Mapping[str, Any], soc: str) -> str:
    """The roofline chart of every fused op at every judged shape (an empty string without estimates)."""
    points = []
    for op in est.get("ops", []):
        for e in op.get("estimates", []):
            work, nbytes = float(e.get("work", 0)), float(e.get("compulsory_bytes", 0))
            if e.get("error") or work <= 0 or nbytes <= 0 or e["body_us"] <= 0:
                continue
            points.append((op["op_type"], work / nbytes, work / (e["fused_us"] * 1e-6),
                           work / (max(e["unfused_us"], 1e-9) * 1e-6), op.get("shipped", True)))
    if not points:
        return ""
    bw = value(soc, "gm_bandwidth")
    vec = value(soc, "vector_fp16_elems")
    cube = value(soc, "cube_fp16_flops")
    xs = [p[1] for p in points]
    ys = [v for p in points for v in (p[2], p[3])]
    x0, x1 = _log_axis(min(xs) / 2, max(xs) * 2)
    y0, y1 = _log_axis(min(ys) / 2, max(cube, max(ys)) * 2)
    w, h, left, top, right, bottom = 640, 380, 70, 20, 20, 50

    def px(x: float) -> float:
        return left + (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0)) * (w - left - right)

    def py(y: float) -> float:
        return h - bottom - (math.log10(y) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)) * (h - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" class="chart" role="img" '
             'aria-label="roofline">']
    for d in range(int(math.log10(x0)), int(math.log10(x1)) + 1):
        parts.append(f'<line x1="{px(10**d):.1f}" y1="{top}" x2="{px(10**d):.1f}" y2="{h - bottom}" class="grid"/>'
                     f'<text x="{px(10**d):.1f}" y="{h - bottom + 16}" class="tick">1e{d}</text>')
    for d in range(int(math.log10(y0)), int(math.log10(y1)) + 1):
        parts.append(f'<line x1="{left}" y1="{py(10**d):.1f}" x2="{w - right}" y2="{py(10**d):.1f}" class="grid"/>'
                     f'<text x="{left - 6}" y="{py(10**d) + 4:.1f}" class="tick" text-anchor="end">1e{d}</text>')
    for peak, name in ((vec, "vector peak"), (cube, "cube peak")):
        knee = peak / bw
        a, b = max(x0, y0 / bw), min(x1, knee)
        if a < b:
            parts.append(f'<line x1="{px(a):.1f}" y1="{py(a * bw):.1f}" x2="{px(b):.1f}" y2="{py(b * bw):.1f}" '
                         'class="roof"/>')
        if knee < x1:
            parts.append(f'<line x1="{px(max(knee, x0)):.1f}" y1="{py(peak):.1f}" x2="{px(x1):.1f}" '
                         f'y2="{py(peak):.1f}" class="roof"/><text x="{w - right - 4}" y="{py(peak) - 4:.1f}" '
                         f'class="tick" text-anchor="end">{name}</text>')
    for i, (op, x, fused, unfused, shipped) in enumerate(points):
        colour = PALETTE[i % len(PALETTE)]
        parts.append(f'<circle cx="{px(x):.1f}" cy="{py(unfused):.1f}" r="5" fill="none" stroke="{colour}">'
                     f'<title>{_esc(op)} unfused nodes: {unfused:.3g} op/s (estimate)</title></circle>')
        parts.append(f'<circle cx="{px(x):.1f}" cy="{py(fused):.1f}" r="5" fill="{colour}"'
                     + ('' if shipped else ' fill-opacity="0.35"')
                     + f'><title>{_esc(op)} fused kernel{"" if shipped else " (not shipped)"}: {fused:.3g} op/s '
                     '(estimate)</title></circle>')
    parts.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" class="tick" text-anchor="middle">operational '
                 'intensity (operations per compulsory GM byte)</text>'
                 f'<text x="14" y="{(top + h - bottom) / 2}" class="tick" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(top + h - bottom) / 2})">operations per second (estimate)</text></svg>')
    return "".join(parts)


def split(model: Mapping[str, Any]) -> str:
    """Two stacked bars, unfused and fused, of the model's estimated time by op type (one binding)."""
    unf, fus = model.get("unfused_by_op_type", {}), model.get("fused_by_op_type", {})
    total = max(sum(unf.values()), sum(fus.values()), 1e-9)
    kinds = list(dict.fromkeys([*unf, *fus]))
    colour = {k: PALETTE[i % len(PALETTE)] if i < len(PALETTE) - 1 else PALETTE[-1] for i, k in enumerate(kinds)}
    w, bar, left = 640, 26, 90
    height = 3 * bar + 20 + 16 * ((len(kinds) + 3) // 4)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}"'
             ' class="chart" role="img" aria-label="time by op type">']
    for row, (name, data) in enumerate((("unfused", unf), ("fused", fus))):
        y = 8 + row * (bar + 8)
        x = float(left)
        parts.append(f'<text x="{left - 8}" y="{y + bar * 0.7:.1f}" class="tick" text-anchor="end">{name}</text>')
        for k, us in data.items():
            width = us / total * (w - left - 20)
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{max(width, 0):.2f}" height="{bar}" fill="{colour[k]}">'
                         f'<title>{_esc(k)}: {us:.1f} µs (estimate)</title></rect>')
            x += width
        parts.append(f'<text x="{x + 4:.1f}" y="{y + bar * 0.7:.1f}" class="tick">{sum(data.values()):.0f} µs</text>')
    for i, k in enumerate(kinds):
        x, y = left + (i % 4) * 135, 2 * (bar + 8) + 24 + (i // 4) * 16
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{colour[k]}"/>'
                     f'<text x="{x + 14}" y="{y}" class="tick">{_esc(k[:18])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def section(est: Mapping[str, Any] | None, soc: str) -> str:
    """The report's speed section: the rule, the split per binding and the roofline (empty without estimates)."""
    if not est:
        return ""
    out = ["<h2>Speed (timing model estimates)</h2>", f'<p class="muted">{_esc(est.get("rule", ""))}</p>']
    for m in est.get("model", []):
        b = ", ".join(f"{k}={v}" for k, v in sorted(m["binding"].items())) or "static shapes"
        w = m.get("slow_corner", m)
        out.append(f"<h3>Whole model at {_esc(b)}: est. {w['unfused_us'] / max(w['fused_us'], 1e-9):.2f}x at the slow "
                   f"corner ({w['fused_us']:.1f} µs fused against {w['unfused_us']:.1f} µs as ATC would run it), "
                   f"{m['unfused_us'] / max(m['fused_us'], 1e-9):.2f}x at the table values ({m['fused_us']:.1f} "
                   f"against {m['unfused_us']:.1f} µs)</h3>" + split(m)
                   + (f'<p class="muted">{m["unsized_nodes"]} nodes could not be sized and are not counted</p>'
                      if m.get("unsized_nodes") else ""))
    chart = roofline(est, soc)
    if chart:
        out.append("<h3>Roofline</h3>" + chart + '<p class="muted">Filled: the fused kernel; hollow: its unfused '
                   "nodes (CANN's kernels as measured, as ATC would run them), launches included on both sides; "
                   "faded: estimated slower, not shipped. One point per op and judged shape; hover for figures.</p>")
    rows = []
    for op in est.get("ops", []):
        slow = op.get("slow_corner", [])
        for i, e in enumerate(op.get("estimates", [])):
            w = slow[i] if i < len(slow) else e
            b = ", ".join(f"{k}={v}" for k, v in sorted(e["binding"].items())) or "static"
            rows.append(f"<tr><td>{_esc(op['op_type'])}</td><td>{_esc(b)}</td>"
                        f"<td>{w['unfused_us'] / max(w['fused_us'], 1e-9):.2f}x</td><td>{e['fused_us']:.1f}</td>"
                        f"<td>{e['unfused_us']:.1f}</td><td>{e['bound_us']:.2f}</td><td>{e['efficiency']:.0%}</td>"
                        f"<td>{_esc(e['bottleneck'])}</td><td>{'yes' if op['shipped'] else 'no'}</td></tr>")
    if rows:
        out.append("<table><tr><th>op</th><th>shape</th><th>est. speedup, slow corner</th><th>est. fused µs</th>"
                   "<th>est. unfused µs (as ATC would run it)</th>"
                   "<th>bound µs</th><th>efficiency</th><th>bottleneck</th><th>shipped</th></tr>"
                   + "".join(rows) + "</table>")
    return "\n".join(out)


__all__ = ["roofline", "section", "split"]
