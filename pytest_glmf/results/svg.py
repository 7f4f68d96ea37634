"""Charts as inline SVG text for the HTML report (results/html.py): one quantity per chart, points
with their spread as bars, bound lines, marked points (not a measurement, failed run). Written
here, not by matplotlib, so the page needs no optional extra and every number stays text a
browser, a test and a screen reader can read (each point carries a <title>).

A series' line joins only points that compare with each other: it breaks at a point drawn `apart`
(a row excluded from comparison: not a measurement of its users) and at a `gap` (a row whose
number was not measured, drawn as a cross on the x axis), so no line runs from a comparable point
to one that is not, or across a number nobody measured.

A chart is `line_chart(Chart(...))`: x numeric (users, context) or categorical (runs, labelled by
image), one or more `Series` of `Point`s.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

from pytest_glmf.text import fmt

WIDTH, HEIGHT = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 62, 16, 26, 46
COLORS = ("#1f6fb4", "#d9731a", "#2f9a48", "#b8323a", "#7b58b5", "#7f5a4a", "#c4539e", "#5f6b6d")


@dataclass(frozen=True)
class Point:
    x: float | str
    y: float
    lo: float | None = None        # the spread bar's ends (None: no bar)
    hi: float | None = None
    marked: str = ""               # why the point is hollow (not a measurement, failed run); "" when solid
    note: str = ""                 # more words for its tooltip
    apart: bool = False            # no line joins it (excluded from comparison): the series' line breaks here


@dataclass
class Series:
    label: str
    points: list[Point]
    dashed: bool = False
    color: str | None = None       # None: the next of COLORS
    joined: bool = True            # a line through the points (False: categories with no order)
    gaps: Sequence[tuple[float | str, str]] = ()   # (x, why) where the series has no
    # number (not measured): the line breaks there, and a cross on the x axis says why


@dataclass
class Chart:
    title: str
    y_label: str                   # the quantity and its unit, e.g. "per-user tok/s"
    x_label: str
    series: list[Series]
    bounds: list[tuple[float, str]] = field(default_factory=list)   # (y, "min 45") lines
    floors: list[tuple[float, str]] = field(default_factory=list)   # (y, "noise floor 0.004"): what the
    # measurement cannot tell from zero, drawn and named apart from the bounds
    categories: list[str] | None = None   # categorical x: the labels, in order (points' x are labels)
    marked_legend: str = ""        # what a hollow point means, for the legend
    bars_legend: str = "bars: run-to-run spread"   # what a bar around a point is


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    out, v = [round(start, 12)], start
    while v < hi - step * 1e-9:   # the last tick at or above the highest value
        v += step
        out.append(round(v, 12))
    return out


def tick(value: float) -> str:
    """An axis label: 100,000 rather than 1e+05."""
    return f"{value:,.0f}" if abs(value) >= 10000 else fmt(value)


def line_chart(chart: Chart) -> str:
    """The chart as an <svg> element (scales with its container; fixed aspect ratio)."""
    pts = [p for s in chart.series for p in s.points]
    if not pts:
        return ""
    ys = ([p.y for p in pts] + [v for p in pts for v in (p.lo, p.hi) if v is not None]
          + [b for b, _ in [*chart.bounds, *chart.floors]])
    y_lo, y_hi = min(0.0, min(ys)), max(ys)
    yt = _ticks(y_lo, y_hi * 1.05 if y_hi > 0 else y_hi + 1)
    y_lo, y_hi = yt[0], yt[-1]
    gaps = [g for s in chart.series for g in s.gaps]
    if chart.categories is not None:
        cats = chart.categories
        x_of = {c: i for i, c in enumerate(cats)}
        x_lo, x_hi = -0.5, len(cats) - 0.5

        def xpos(x: float | str) -> float:
            return float(x_of[str(x)])
    else:
        xs = [float(p.x) for p in pts] + [float(x) for x, _ in gaps]
        pad = (max(xs) - min(xs)) * 0.05 or 1.0
        x_lo, x_hi = min(xs) - pad, max(xs) + pad

        def xpos(x: float | str) -> float:
            return float(x)

    def xv(p: Point) -> float:
        return xpos(p.x)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x_lo) / (x_hi - x_lo) * plot_w

    def sy(y: float) -> float:
        return TOP + plot_h - (y - y_lo) / ((y_hi - y_lo) or 1.0) * plot_h

    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(chart.title)}" '
           f'xmlns="http://www.w3.org/2000/svg">', f"<title>{escape(chart.title)}</title>",
           f'<text class="ct" x="{LEFT}" y="16">{escape(chart.title)}</text>']
    for t in yt:
        y = sy(t)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick(t)}</text>')
    if chart.categories is not None:
        room = max(6, int(plot_w / max(1, len(chart.categories)) / 7))   # characters a label may take
        for i, c in enumerate(chart.categories):
            label = c if len(c) <= room else c[:room // 2] + "…" + c[-(room - room // 2 - 1):]
            out.append(f'<text class="tick" x="{sx(i):.1f}" y="{HEIGHT - BOTTOM + 14}" text-anchor="middle">'
                       f'<title>{escape(c)}</title>{escape(label)}</text>')
    else:
        for t in _ticks(x_lo, x_hi, 6):
            if x_lo <= t <= x_hi:
                out.append(f'<text class="tick" x="{sx(t):.1f}" y="{HEIGHT - BOTTOM + 14}" '
                           f'text-anchor="middle">{tick(t)}</text>')
    out.append(f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + plot_h}" y2="{TOP + plot_h}"/>'
               f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}"/>')
    out.append(f'<text class="al" x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - 8}" text-anchor="middle">'
               f'{escape(chart.x_label)}</text>'
               f'<text class="al" transform="translate(14 {TOP + plot_h / 2:.0f}) rotate(-90)" '
               f'text-anchor="middle">{escape(chart.y_label)}</text>')
    for b, label in chart.bounds:
        y = sy(b)
        out.append(f'<line class="bound" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="bl" x="{WIDTH - RIGHT - 4}" y="{y - 4:.1f}" text-anchor="end">{escape(label)}</text>')
    for b, label in chart.floors:
        y = sy(b)
        out.append(f'<line class="floor" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="fl" x="{LEFT + 4}" y="{y - 4:.1f}">{escape(label)}</text>')
    for s, color in zip(chart.series, colors(chart.series)):
        ordered = sorted(s.points, key=xv)
        for part in (line_parts(ordered, [xpos(x) for x, _ in s.gaps], xv) if s.joined else []):
            path = " ".join(f"{sx(xv(p)):.1f},{sy(p.y):.1f}" for p in part)
            dash = ' stroke-dasharray="6 4"' if s.dashed else ""
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6"{dash} points="{path}"/>')
        for x, why in s.gaps:     # a cross on the x axis: here the series has no number
            out.append(f'<text class="gap" x="{sx(xpos(x)):.1f}" y="{TOP + plot_h - 3:.1f}" text-anchor="middle" '
                       f'fill="{color}" font-size="13">×<title>{escape(f"{s.label} @ {x}: {why}")}</title></text>')
        for p in ordered:
            x, y = sx(xv(p)), sy(p.y)
            if p.lo is not None and p.hi is not None:
                out.append(f'<line stroke="{color}" stroke-width="1.2" x1="{x:.1f}" x2="{x:.1f}" '
                           f'y1="{sy(p.lo):.1f}" y2="{sy(p.hi):.1f}"/>'
                           f'<line stroke="{color}" x1="{x - 4:.1f}" x2="{x + 4:.1f}" y1="{sy(p.lo):.1f}" '
                           f'y2="{sy(p.lo):.1f}"/><line stroke="{color}" x1="{x - 4:.1f}" x2="{x + 4:.1f}" '
                           f'y1="{sy(p.hi):.1f}" y2="{sy(p.hi):.1f}"/>')
            fill = "#fff" if p.marked else color
            tip = f"{s.label} @ {p.x}: {fmt(p.y)}"
            if p.lo is not None and p.hi is not None:
                tip += f" (spread {fmt(p.lo)} .. {fmt(p.hi)})"
            tip += "".join(f"; {t}" for t in (p.marked, p.note) if t)
            out.append(f'<circle class="pt{" marked" if p.marked else ""}" cx="{x:.1f}" cy="{y:.1f}" r="4" '
                       f'fill="{fill}" stroke="{color}" stroke-width="1.8" data-y="{p.y:g}">'
                       f'<title>{escape(tip)}</title></circle>')
    out.append("</svg>")
    return "".join(out) + legend(chart)


def line_parts(ordered: Sequence[Point], gaps: Sequence[float], xv: Callable[[Point], float]) -> list[list[Point]]:
    """The runs of points (in x order) a series' line joins: broken at a point drawn apart and at
    a gap's x; runs of one point get no line."""
    parts: list[list[Point]] = [[]]
    for p in ordered:
        last = parts[-1][-1] if parts[-1] else None
        if p.apart or (last is not None and any(xv(last) < g < xv(p) for g in gaps)):
            parts.append([])
        if not p.apart:
            parts[-1].append(p)
    return [part for part in parts if len(part) > 1]


def colors(series: Sequence[Series]) -> list[str]:
    out, i = [], 0
    for s in series:
        out.append(s.color or COLORS[i % len(COLORS)])
        i += s.color is None
    return out


def legend(chart: Chart) -> str:
    items = []
    for s, color in zip(chart.series, colors(chart.series)):
        if not s.joined and s.points and all(p.marked for p in s.points):   # hollow points of their own
            items.append(f'<span><i class="hollow" style="border-color:{color}"></i>{escape(s.label)}</span>')
            continue
        style = "dashed" if s.dashed else "solid"
        items.append(f'<span><i style="border-top:2px {style} {color}"></i>{escape(s.label)}</span>')
    if any(p.marked for s in chart.series if s.joined or not all(p.marked for p in s.points) for p in s.points):
        items.append(f'<span><i class="hollow"></i>{escape(chart.marked_legend or "hollow: marked")}</span>')
    if any(s.gaps for s in chart.series):
        items.append("<span>× on the x axis: not measured there (no number: the line breaks)</span>")
    if any(p.lo is not None for s in chart.series for p in s.points):
        items.append(f"<span>{escape(chart.bars_legend)}</span>")
    if chart.bounds:
        items.append('<span><i class="boundkey"></i>bound (thresholds)</span>')
    if chart.floors:
        items.append('<span><i class="floorkey"></i>noise floor</span>')
    return f'<p class="legend">{"".join(items)}</p>'


def spread_bar(y: float, spread_pct: float | None) -> tuple[float | None, float | None]:
    """A value's spread bar from its run-to-run spread ((max - min) / median, in %): the range
    centred on the value, as wide as that spread."""
    if spread_pct is None or not isinstance(spread_pct, (int, float)) or math.isnan(spread_pct):
        return None, None
    half = abs(y) * spread_pct / 200
    return y - half, y + half

