"""The boundary model of the guided search: where the probes so far say the service level's
margin (slo.py: 1 - load, > 0 inside) crosses zero. Pure functions over (x, margin) points.

    fit:    a monotone (non-increasing) fit of margin against x (pool-adjacent-violators), then
            the straight line between the two fitted points either side of zero; with the probes
            all on one side, the line through the two nearest the boundary, extended (at most
            MAX_JUMP times the nearest x); with one point, load proportional to x (a server whose
            time per token has a fixed part is then reached from below: the guess passes), or
            the slope of a neighbouring search (the frontier's previous context)
    trust:  not when raw margins fall out of order by more than NON_MONOTONE (noise bigger than
            the trend), nor across a cliff: a drop between the neighbours either side of zero more
            than CLIFF_FACTOR times the slope beside it and at least CLIFF_MIN_DROP of margin (a
            straight line through a step lands anywhere; the search bisects there instead)

On a server whose load is linear in users (time per token growing by a fixed amount per running
request: the truth server, SGLang's decode below its knee) two points on one side give the
boundary exactly. AIPerf's smooth_isotonic planner (aiperf 0.13.0,
orchestrator/search_planner/_smooth_isotonic_fit.py) pools with PAVA too, but interpolates with
PCHIP after a doubling bracket and three evenly spaced probes inside it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Point = tuple[float, float]          # (users or requests/s, margin)

NON_MONOTONE = 0.05      # margin units: a later point this much above an earlier one is not noise
CLIFF_FACTOR = 4.0       # a drop this many times steeper than the slope beside it is a cliff
CLIFF_MIN_DROP = 0.15    # ...and at least this much margin (15 % of the service level)
MAX_JUMP = 4.0           # an extrapolation never goes past 4x (or below 1/4 of) the nearest probe


@dataclass
class Fit:
    root: float | None                    # where the fitted margin crosses 0 (None: no points)
    trusted: bool
    why: str = ""                         # why not trusted: "no margins", "non-monotone ...", "cliff ..."
    slope: float | None = None            # margin lost per unit x at the boundary (> 0)
    cliff: tuple[float, float] | None = None   # the neighbours a cliff lies between


def pava_non_increasing(ys: Sequence[float]) -> list[float]:
    """The least-squares non-increasing fit (pool adjacent violators, equal weights)."""
    blocks: list[list[float]] = []          # [sum, count]
    for y in ys:
        blocks.append([y, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            s, n = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += n
    out: list[float] = []
    for s, n in blocks:
        out += [s / n] * int(n)
    return out


def _slope(a: Point, b: Point) -> float | None:
    """Margin lost per unit x from a to b (None when it is not a loss)."""
    dx = b[0] - a[0]
    drop = a[1] - b[1]
    return drop / dx if dx and drop > 0 else None


def _proportional(p: Point) -> float | None:
    """The slope if load were proportional to x: load(x) = load(p) * x / p.x."""
    load = 1.0 - p[1]
    return load / p[0] if load > 0 and p[0] > 0 else None


def _extend(p: Point, slope: float) -> float:
    root = p[0] + p[1] / slope
    return min(max(root, p[0] / MAX_JUMP), p[0] * MAX_JUMP)


def fit_boundary(points: Sequence[Point], prior_slope: float | None = None) -> Fit:
    """The model's boundary from these points (each x once), and whether to trust it."""
    pts = sorted(points)
    if not pts:
        return Fit(None, False, "no margins")
    fitted = list(zip([x for x, _ in pts], pava_non_increasing([m for _, m in pts])))
    worst = max((b[1] - a[1] for i, a in enumerate(pts) for b in pts[i + 1:]), default=0.0)
    inside = [p for p in fitted if p[1] >= 0]
    beyond = [p for p in fitted if p[1] < 0]
    if inside and beyond:
        a, b = inside[-1], beyond[0]
        slope = _slope(a, b) or 0.0
        root = a[0] + (b[0] - a[0]) * a[1] / (a[1] - b[1])
        i = len(inside) - 1                 # the fit is non-increasing: a, b are neighbours i, i + 1
        pairs = [(fitted[j], fitted[j + 1]) for j in (i - 1, i + 1) if 0 <= j and j + 1 < len(fitted)]
        beside = [s for s in (_slope(u, v) for u, v in pairs) if s is not None]
        if beside and a[1] - b[1] >= CLIFF_MIN_DROP and slope > CLIFF_FACTOR * max(beside):
            return Fit(root, False, f"cliff between {a[0]:g} and {b[0]:g}", slope, (a[0], b[0]))
    else:
        side = inside if inside else beyond
        near = side[-1] if inside else side[0]
        pair = side[-2:] if inside else side[:2]
        slope = (_slope(pair[0], pair[1]) if len(pair) == 2 else None) or prior_slope or _proportional(near) or 0.0
        if slope <= 0:
            return Fit(None, False, "no slope to extend", None)
        root = _extend(near, slope)
    if worst > NON_MONOTONE:
        return Fit(root, False, f"non-monotone margins (one rises by {worst:.2f})", slope)
    return Fit(root, True, "", slope)
