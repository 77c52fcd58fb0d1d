"""Inline SVG bar charts for the trajectory pages: no JavaScript, no fonts, no network.

    hbars(rows)     one horizontal bar per row (a tool, a task), stacked segments
    columns(rows)   one vertical stacked column per row, for long series (tasks of a batch)
    intervals(rows) one estimate per row with its interval (a difference and its CI), and 0
    legend(items)   the colour key, as HTML

A row is (label, [(value, colour), ...]); segments stack left to right / bottom to top.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

OK = "#2f9e6b"
FAIL = "#d64545"
BLUE = "#3b6fd8"
LIGHT_BLUE = "#a9c1f0"
AMBER = "#e0a030"
GREY = "#9aa3ad"

Row = tuple[str, Sequence[tuple[float, str]]]

ROW_HEIGHT = 24
BAR_HEIGHT = 15
MAX_LABEL_CHARS = 28


def _num(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:,.0f}k"
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.1f}"


def _clip(label: str, limit: int = MAX_LABEL_CHARS) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def hbars(
    rows: Sequence[Row], *, width: int = 720, label_width: int = 170, unit: str = "",
    max_value: float | None = None, totals: list[str] | None = None, title: str = "",
) -> str:
    """Horizontal stacked bars; `totals` overrides the number printed after each bar."""
    if not rows:
        return '<p class="empty">Nothing to chart.</p>'
    top = max_value or max((sum(v for v, _ in segs) for _, segs in rows), default=0) or 1
    plot = width - label_width - 70
    height = len(rows) * ROW_HEIGHT + 6
    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']
    for i, (label, segments) in enumerate(rows):
        y = i * ROW_HEIGHT + 4
        mid = y + BAR_HEIGHT / 2 + 4
        out.append(f'<text x="{label_width - 8}" y="{mid:.1f}" text-anchor="end" '
                   f'class="label">{escape(_clip(label))}</text>')
        x = float(label_width)
        out.append(f'<rect x="{label_width}" y="{y}" width="{plot}" height="{BAR_HEIGHT}" '
                   'rx="3" fill="#eef1f5"/>')
        for value, colour in segments:
            w = plot * value / top
            if w > 0:
                out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{BAR_HEIGHT}" '
                           f'rx="3" fill="{colour}"><title>{escape(label)}: {_num(value)}'
                           f'{escape(unit)}</title></rect>')
            x += w
        total = totals[i] if totals else _num(sum(v for v, _ in segments)) + unit
        out.append(f'<text x="{label_width + plot + 8}" y="{mid:.1f}" class="value">'
                   f'{escape(total)}</text>')
    out.append("</svg>")
    return "".join(out)


def columns(
    rows: Sequence[Row], *, width: int = 960, height: int = 220, unit: str = "", title: str = "",
) -> str:
    """Vertical stacked columns with a y axis (0, half, max); labels when they fit."""
    if not rows:
        return '<p class="empty">Nothing to chart.</p>'
    left, bottom, top_pad = 56, 26, 10
    right = 28  # room for the last x label, centred under its column
    plot_w, plot_h = width - left - right, height - bottom - top_pad
    top = max((sum(v for v, _ in segs) for _, segs in rows), default=0) or 1
    slot = plot_w / len(rows)
    bar = max(1.0, min(36.0, slot * 0.72))
    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']
    for frac in (0.0, 0.5, 1.0):
        y = top_pad + plot_h * (1 - frac)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" '
                   'stroke="#dde2e8" stroke-width="1"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="axis">'
                   f'{_num(top * frac)}{escape(unit)}</text>')
    widest = max(len(_clip(label, 10)) for label, _ in rows) * 7 + 8  # ~7 px a character
    every = max(1, -(-widest // int(slot)) if slot >= 1 else len(rows))  # labels never overlap
    for i, (label, segments) in enumerate(rows):
        x = left + i * slot + (slot - bar) / 2
        y = top_pad + plot_h
        for value, colour in segments:
            h = plot_h * value / top
            if h > 0:
                y -= h
                out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                           f'fill="{colour}"><title>{escape(label)}: {_num(value)}{escape(unit)}'
                           '</title></rect>')
        if i % every == 0:
            out.append(f'<text x="{x + bar / 2:.1f}" y="{height - 8}" text-anchor="middle" '
                       f'class="axis">{escape(_clip(label, 10))}</text>')
    out.append("</svg>")
    return "".join(out)


def intervals(
    rows: Sequence[tuple[str, float, float, float]], *, width: int = 720, label_width: int = 190,
    span: tuple[float, float] = (-1.0, 1.0), title: str = "",
) -> str:
    """Rows of (label, estimate, low, high): the interval as a bar, the estimate as a dot, on
    an axis covering `span` (widened to fit), with the zero line drawn."""
    if not rows:
        return '<p class="empty">Nothing to chart.</p>'
    low = min(span[0], *(r[2] for r in rows))
    high = max(span[1], *(r[3] for r in rows))
    plot = width - label_width - 190  # room for "+0.200 [+0.100, +0.290]" on the right
    height = len(rows) * ROW_HEIGHT + 26

    def x(value: float) -> float:
        return label_width + plot * (value - low) / ((high - low) or 1)

    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']
    ticks = sorted({low, low / 2, 0.0, high / 2, high}) if low < 0 < high else [low, high]
    for tick in ticks:
        out.append(f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="2" y2="{height - 20}" '
                   f'stroke="{"#7a8794" if tick == 0 else "#dde2e8"}" stroke-width="1"/>'
                   f'<text x="{x(tick):.1f}" y="{height - 6}" text-anchor="middle" class="axis">'
                   f"{tick:+.2g}</text>")
    for i, (label, estimate, lo, hi) in enumerate(rows):
        mid = i * ROW_HEIGHT + 4 + BAR_HEIGHT / 2
        colour = OK if lo > 0 else FAIL if hi < 0 else GREY
        out.append(f'<text x="{label_width - 8}" y="{mid + 4:.1f}" text-anchor="end" '
                   f'class="label">{escape(_clip(label, 30))}</text>'
                   f'<rect x="{x(lo):.1f}" y="{mid - 3:.1f}" width="{max(1.0, x(hi) - x(lo)):.1f}" '
                   f'height="6" rx="3" fill="{colour}" opacity="0.55"/>'
                   f'<circle cx="{x(estimate):.1f}" cy="{mid:.1f}" r="5" fill="{colour}">'
                   f"<title>{escape(label)}: {estimate:+.3f} [{lo:+.3f}, {hi:+.3f}]</title></circle>"
                   f'<text x="{label_width + plot + 10}" y="{mid + 4:.1f}" class="value">'
                   f"{estimate:+.3f} [{lo:+.3f}, {hi:+.3f}]</text>")
    out.append("</svg>")
    return "".join(out)


def legend(items: list[tuple[str, str]]) -> str:
    keys = "".join(f'<span><i style="background:{colour}"></i>{escape(name)}</span>'
                   for name, colour in items)
    return f'<div class="legend">{keys}</div>'
