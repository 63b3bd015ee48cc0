"""The one HTML renderer: the page frame (``page``), tables and plots shared by the run
report, the sweep report, `dfsu forget`'s report and the audit page."""

from __future__ import annotations

import html
from typing import Any

CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;
text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.ci{color:#888;font-size:.8em}mark{background:#ffd9a0;border-radius:3px;padding:0 2px}
.box{border:1px solid #ddd;border-radius:6px;padding:.6rem;margin:.5rem 0;font-family:monospace;
font-size:.9em;white-space:pre-wrap}.muted{color:#777}h2{margin-top:2rem}
.verdict{border:2px solid #bbb;border-radius:8px;padding:.4rem 1rem;margin:1rem 0}
.verdict p{font-size:1.1em}.good{background:#dff3df}.mixed{background:#fbefc9}
.bad{background:#f8d4cf}.verdict td:last-child,.verdict th:last-child{text-align:left}
td.wrap,td.wrap code{white-space:pre-wrap;text-align:left;word-break:break-word}
table.compact td,table.compact th{padding:.2rem .3rem;font-size:.85em}
"""


def page(title: str, body: str, css: str = "") -> str:
    """A self-contained page (inline CSS, no scripts, no network) around ``body`` (HTML);
    ``css``: rules the page adds to the shared ones."""
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{CSS}{css}</style></head><body>{body}</body></html>"
    )


def table(header: list[str], rows: list[list[str]]) -> str:
    """A table: ``header`` as text (escaped here), ``rows`` of cells already in HTML."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def label_table(rows: list[dict[str, Any]]) -> str:
    """E-Hit per label: a row per label, a column per model (labels outnumber models: the
    table grows down, not sideways), each cell hits/entities, shaded by the share hit."""
    labels = sorted({label for r in rows for label in r.get("E_Hit_by_label") or {}})
    if not labels:
        return ""
    head = "".join(f"<th>{html.escape(r['method'])}</th>" for r in rows)
    body = []
    for label in labels:
        cells = []
        for row in rows:
            v = (row.get("E_Hit_by_label") or {}).get(label)
            if v is None:
                cells.append("<td>–</td>")
                continue
            alpha = v["pct"] / 100 * 0.6
            cells.append(
                f'<td style="background:rgba(220,60,40,{alpha:.2f})" title="{v["pct"]:.1f}%">'
                f"{v['hit']}/{v['total']}</td>"
            )
        body.append(f"<tr><td>{html.escape(label)}</td>{''.join(cells)}</tr>")
    return f"<table class=compact><tr><th>label</th>{head}</tr>{''.join(body)}</table>"


def scatter(
    points: list[tuple[str, float, float]],
    xlabel: str,
    ylabel: str,
    lines: dict[str, list[tuple[float, float]]] | None = None,
    marked: dict[str, str] | None = None,
) -> str:
    """A small SVG scatter (and optional polylines), axes scaled to the data; ``marked``
    draws the named points larger, in the given colour."""
    xs = [p[1] for p in points] + [x for pts in (lines or {}).values() for x, _ in pts]
    ys = [p[2] for p in points] + [y for pts in (lines or {}).values() for _, y in pts]
    if not xs:
        return "<p class=muted>no data</p>"
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    x1, y1 = x1 + (x1 - x0) * 0.1 + 1e-9, y1 + (y1 - y0) * 0.1 + 1e-9
    x0, y0 = x0 - (x1 - x0) * 0.05, y0 - (y1 - y0) * 0.05
    w, h, m = 640, 360, 50

    def sx(x: float) -> float:
        return m + (x - x0) / (x1 - x0) * (w - 2 * m)

    def sy(y: float) -> float:
        return h - m - (y - y0) / (y1 - y0) * (h - 2 * m)

    parts = [
        f'<svg width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="#444"/>',
        f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="#444"/>',
        f'<text x="{w / 2}" y="{h - 10}" text-anchor="middle">{html.escape(xlabel)}</text>',
        f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" '
        f'text-anchor="middle">{html.escape(ylabel)}</text>',
        f'<text x="{m}" y="{h - m + 16}" font-size="11">{x0:.2f}</text>',
        f'<text x="{w - m}" y="{h - m + 16}" font-size="11" text-anchor="end">{x1:.2f}</text>',
        f'<text x="{m - 4}" y="{h - m}" font-size="11" text-anchor="end">{y0:.1f}</text>',
        f'<text x="{m - 4}" y="{m + 4}" font-size="11" text-anchor="end">{y1:.1f}</text>',
    ]
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
    for i, (name, pts) in enumerate((lines or {}).items()):
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        color = palette[i % len(palette)]
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{color}" '
            f'stroke-width="1.5" opacity=".7"><title>{html.escape(name)}</title></polyline>'
        )
        x, y = pts[-1]
        parts.append(
            f'<text x="{sx(x) + 4:.1f}" y="{sy(y):.1f}" font-size="11" '
            f'fill="{color}">{html.escape(name)}</text>'
        )
    for name, x, y in points:
        color = (marked or {}).get(name)
        parts.append(
            f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{7 if color else 5}" '
            f'fill="{color or "#333"}"/>'
            f'<text x="{sx(x) + 7:.1f}" y="{sy(y) - 6:.1f}" font-size="12">'
            f"{html.escape(name)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def highlight(text: str, spans: list[tuple[int, int, str]]) -> str:
    out, last = [], 0
    for start, end, label in sorted(spans):
        if start < last:
            continue
        out.append(html.escape(text[last:start]))
        out.append(f'<mark title="{html.escape(label)}">{html.escape(text[start:end])}</mark>')
        last = end
    out.append(html.escape(text[last:]))
    return "".join(out)


def bars(
    groups: list[tuple[str, list[float]]],
    series: list[str],
    unit: str = "",
    rules: list[tuple[float, str]] | None = None,
) -> str:
    """Horizontal bars as a small SVG: one group per ``groups`` item (a name and one value per
    ``series``, e.g. before and after), scaled to the largest value; ``rules``: vertical
    lines at a value, each with its label."""
    if not groups:
        return "<p class=muted>no data</p>"
    palette = ["#9aa7b8", "#d62728", "#1f77b4", "#2ca02c"]
    top = max([v for _, vals in groups for v in vals] + [x for x, _ in rules or []] + [1e-9])
    bar, gap, left, w = 12, 10, 170, 640
    height = len(groups) * (bar * len(series) + gap) + 40

    def sx(v: float) -> float:
        return left + v / top * (w - left - 60)

    parts = [f'<svg width="{w}" height="{height}" xmlns="http://www.w3.org/2000/svg">']
    for i, name in enumerate(series):
        parts.append(
            f'<rect x="{left + 120 * i}" y="4" width="10" height="10" fill="{palette[i]}"/>'
            f'<text x="{left + 120 * i + 14}" y="13" font-size="11">{html.escape(name)}</text>'
        )
    y = 24
    for name, values in groups:
        parts.append(
            f'<text x="{left - 6}" y="{y + bar * len(series) / 2 + 4}" font-size="12" '
            f'text-anchor="end">{html.escape(name)}</text>'
        )
        for i, value in enumerate(values):
            parts.append(
                f'<rect x="{left}" y="{y}" width="{sx(value) - left:.1f}" height="{bar - 2}" '
                f'fill="{palette[i % len(palette)]}"/><text x="{sx(value) + 4:.1f}" '
                f'y="{y + bar - 3}" font-size="10">{value:g}{html.escape(unit)}</text>'
            )
            y += bar
        y += gap
    for value, label in rules or []:
        parts.append(
            f'<line x1="{sx(value):.1f}" y1="20" x2="{sx(value):.1f}" y2="{height - 4}" '
            f'stroke="#444" stroke-dasharray="3,3"/><text x="{sx(value) + 3:.1f}" '
            f'y="{height - 6}" font-size="10">{html.escape(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
