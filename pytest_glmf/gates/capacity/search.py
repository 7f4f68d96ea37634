"""The search: the largest value (users, or a request rate) whose probe passes, never above a
bound. Pure: the measurement is a callback `probe(x) -> Probe`, so the same code runs against a
server, the simulator, or a table in a test.

    guided:  each next probe from what the probes so far say (model.py: a monotone fit of the
             service level's margin against x, the line to its zero): a probe at the model's
             largest passing value, and once that is within a resolution step of the last pass
             (or of the first failure), the probe a step beyond it (below it) that ends the
             search if it fails (passes)
    bracket: when the model is not to be trusted (no margins, non-monotone margins, a cliff
             between the neighbours either side of the boundary, a model probe outside the
             bracket, or two model probes that did not halve the bracket): today's steps. Up from
             the last pass while probes pass (the step doubles each time) until one fails or the
             bound is reached; down from a failing start the same way until one passes or the
             floor fails too; between a pass L and a failure F, the midpoint

A probe the client could not measure (slo.UNMEASURED: it stayed client-bound with as many client
processes as the machine allows, or the token counts disagree) is neither a pass nor a miss: the
search stops there, "undecided", with no answer and the reason (never a "missed" it did not see).

Every search stops by one rule: F - L <= step(L), the stated resolution (`resolution_users` when
set, else `resolution_pct` of L, at least one user; for rates, that share of L). The answer is L,
so the true capacity (the largest passing value, if passing is monotone) lies in [L, F): within
one step of the answer. A value is never measured twice and never outside [floor, bound]. Costs:
on a server whose load is linear in users, the first probe, one extrapolation, the model's
answer and the value a step past it (4 probes from most starts); bracket and bisect alone need about
log2(distance / step) probes to bracket plus as many to bisect (10 on the issue 24 curve).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_glmf.gates.capacity.model import fit_boundary
from pytest_glmf.gates.capacity.slo import Probe


@dataclass
class Bound:
    """The most the search may ask for, and why."""

    value: float
    kind: str        # "seats" | "kv_pool" | "max_users" | "max_rate"
    detail: str      # e.g. "KV pool 201,088 tokens / 8,592 per user"
    hint: str = ""   # the knob that raises it

    def text(self) -> str:
        return f"{self.detail}" + (f": {self.hint}" if self.hint else "")


@dataclass
class SearchResult:
    value: float | None               # the capacity: the largest value that passed (None: not even the floor)
    last_pass: Probe | None
    first_fail: Probe | None          # None when the bound (or nothing measurable) ended the search
    stopped_by: str                   # "slo", "floor" (nothing passed), "undecided", or the bound's kind
    bound: Bound
    step: float                       # the resolution at the answer
    probes: list[Probe] = field(default_factory=list)   # in the order measured
    wall_s: float = 0.0
    model_probes: int = 0             # probes the model chose (the rest: bracket and bisect)
    boundary: str | None = None       # "smooth" or "cliff" (a drop between L and F; model.py), when the SLO stopped it
    slope: float | None = None        # margin lost per unit x at the boundary (a neighbouring search's prior)
    boundary_x: float | None = None   # interval.py: where the fitted margin crosses zero (between the last pass
    #                                   and the first failure; None across a cliff, at a bound or the floor)
    boundary_ci95: list[float] | None = None   # interval.py: that boundary's 95 % interval (not the answer's)
    undecided: str = ""               # why the search could not decide (a probe the client could not measure)

    @property
    def requests(self) -> int:
        """Measured requests, over every probe (warm passes not counted)."""
        return sum(p.requests for p in self.probes)

    def cost(self) -> dict[str, Any]:
        return {"probes": len(self.probes), "model_probes": self.model_probes, "requests": self.requests,
                "wall_s": self.wall_s}

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "stopped_by": self.stopped_by, "step": self.step, "wall_s": self.wall_s,
                "bound": vars(self.bound), "last_pass": self.last_pass.to_dict() if self.last_pass else None,
                "first_fail": self.first_fail.to_dict() if self.first_fail else None,
                "probes": [p.to_dict() for p in self.probes], "boundary": self.boundary,
                "boundary_x": self.boundary_x, "boundary_ci95": self.boundary_ci95, "undecided": self.undecided,
                "slope": self.slope, "cost": self.cost()}


def users_step(resolution_users: int | None, resolution_pct: float) -> Callable[[float], float]:
    """The resolution for users: a fixed number, or a share of the value (at least one user)."""
    if resolution_users:
        return lambda x: float(resolution_users)
    return lambda x: float(max(1, math.floor(x * resolution_pct / 100.0)))


def rate_step(resolution_pct: float) -> Callable[[float], float]:
    return lambda x: x * resolution_pct / 100.0


def search(probe: Callable[[float], Probe], *, start: float, floor: float, bound: Bound,
           step: Callable[[float], float], integer: bool = True, guided: bool = True,
           prior_slope: float | None = None) -> SearchResult:
    """From `start`, within [floor, bound.value]: model-guided (`guided`), else bracket and bisect.
    `prior_slope`: margin lost per unit x near a neighbouring search's boundary, the model's
    slope until this search has two points of its own."""
    t0 = time.perf_counter()
    seen: dict[float, Probe] = {}
    order: list[Probe] = []
    top = math.floor(bound.value) if integer else bound.value

    def done(value: float | None, lo: float | None, hi: float | None, stopped_by: str,
             model_probes: int = 0) -> SearchResult:
        result = SearchResult(value=value, last_pass=seen.get(lo) if lo is not None else None,
                              first_fail=seen.get(hi) if hi is not None else None, stopped_by=stopped_by,
                              bound=bound, step=step(lo) if lo else step(floor), probes=order,
                              wall_s=time.perf_counter() - t0, model_probes=model_probes)
        fit = fit_boundary(_points(order))
        result.slope = fit.slope
        if stopped_by == "slo" and lo is not None and hi is not None:
            below = [p for p in order if p.x < lo]     # the neighbour below gives the slope beside the drop
            near = fit_boundary(_points([seen[lo], seen[hi]] + ([max(below, key=lambda p: p.x)] if below else [])))
            result.boundary = "cliff" if near.cliff == (lo, hi) else "smooth"
        return result

    if top < floor:   # the bound itself leaves no room (a pool that cannot hold one user of this size)
        return done(top if integer else None, None, None, bound.kind)
    x = min(max(start, floor), top)
    x = math.floor(x) if integer else x
    x0 = x
    lo: float | None = None
    hi: float | None = None
    ups = downs = model_probes = 0
    widths: list[float] = []
    while True:
        seen[x] = probe(x)
        order.append(seen[x])
        if seen[x].unmeasured:     # neither a pass nor a miss: no next probe can be chosen from it
            result = done(None, lo, hi, "undecided", model_probes)
            result.undecided = _undecided_why(seen[x], seen.get(lo) if lo is not None else None)
            return result
        if seen[x].passed:
            lo = x
        else:
            hi = x
        if lo is not None and hi is not None:
            if hi - lo <= step(lo):
                return done(lo, lo, hi, "slo", model_probes)
            widths.append(hi - lo)
        elif hi is None and lo is not None and lo >= top:
            return done(lo, lo, None, bound.kind, model_probes)
        elif lo is None and hi is not None and hi <= floor:
            return done(None, None, hi, "floor", model_probes)
        nxt = None
        if guided and not (len(widths) >= 3 and widths[-1] > widths[-3] / 2):    # two model probes, no halving
            fit = fit_boundary(_points(order), prior_slope)
            if fit.trusted and fit.root is not None:
                nxt = _aim(fit.root, lo, hi, step, integer, floor, top)
        if nxt is not None and nxt not in seen:
            model_probes += 1
        elif hi is None:
            nxt = min(top, lo + step(x0) * 2 ** ups)
            ups += 1
        elif lo is None:
            nxt = max(floor, hi - step(x0) * 2 ** downs)
            downs += 1
        else:
            nxt = (lo + hi) // 2 if integer else (lo + hi) / 2
        x = nxt


def _undecided_why(probe: Probe, last_pass: Probe | None) -> str:
    """'at 23 users the client could not measure the server (...)'."""
    workers = f" with {probe.workers} client process(es)" if probe.workers else ""
    held = (f"; the service level held at {last_pass.x:.4g}: the capacity is at least that"
            if last_pass is not None else "")
    return f"at {probe.x:.4g} the numbers are not the server's{workers} ({probe.unmeasured}){held}"


def _points(probes: list[Probe]) -> list[tuple[float, float]]:
    return [(p.x, p.margin) for p in probes if p.margin is not None]


def _aim(root: float, lo: float | None, hi: float | None, step: Callable[[float], float], integer: bool,
         floor: float, top: float) -> float | None:
    """The probe the model asks for, strictly inside the bracket (None: it asks for nothing new).
    Near a side, the probe that ends the search with the best odds: with the boundary within a
    step above the last pass, a step above it (ending it if it fails); within a step below the
    first failure, the lowest value a step below it (ending it if it passes)."""
    inside = math.floor(root) if integer else root - step(root) / 2
    past = inside + 1 if integer else root + step(root) / 2
    if lo is not None and past - lo <= step(lo):
        x = lo + step(lo)
    elif hi is not None and hi - inside <= step(inside):
        x = _lowest_within_a_step(hi, step, integer)
    else:
        x = inside
    x = min(max(x, floor), top)
    if (lo is not None and x <= lo) or (hi is not None and x >= hi):
        return None
    return x


def _lowest_within_a_step(hi: float, step: Callable[[float], float], integer: bool) -> float:
    """The lowest x with hi - x <= step(x): a pass there ends the search."""
    x = hi - step(hi)
    if integer:
        x = math.floor(x)
        while hi - x > step(x):
            x += 1
    else:
        x = hi / (1 + (step(hi) / hi))     # step(x) = x * pct: hi - x = x * pct
    return x
