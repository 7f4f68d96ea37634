"""The search: the largest value (users, or a request rate) whose probe passes, by bracketing then
bisecting, never above a bound. Pure: the measurement is a callback `probe(x) -> Probe`, so the
same code runs against a server, the simulator, or a table in a test.

    bracket: probe `start`; while it passes, step up (the step doubles each time) until a probe
             fails or the bound is reached; if `start` fails, step down the same way until one
             passes or the floor fails too
    bisect:  between the last passing value L and the first failing F until F - L <= step(L)

`step(L)` is the stated resolution: `resolution_users` when set, else `resolution_pct` of L (at
least one user; for rates, that share of L). The answer is L, so the true capacity (the largest
passing value, if passing is monotone) lies in [L, F): within one step of the answer. A value
is never measured twice. Costs: with a good start (the thresholds' min) two probes; from far
off, about log2(distance / step) to bracket plus as many to bisect.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
    stopped_by: str                   # "slo", "floor" (nothing passed), or the bound's kind
    bound: Bound
    step: float                       # the resolution at the answer
    probes: list[Probe] = field(default_factory=list)   # in the order measured
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "stopped_by": self.stopped_by, "step": self.step, "wall_s": self.wall_s,
                "bound": vars(self.bound), "last_pass": self.last_pass.to_dict() if self.last_pass else None,
                "first_fail": self.first_fail.to_dict() if self.first_fail else None,
                "probes": [p.to_dict() for p in self.probes]}


def users_step(resolution_users: int | None, resolution_pct: float) -> Callable[[float], float]:
    """The resolution for users: a fixed number, or a share of the value (at least one user)."""
    if resolution_users:
        return lambda x: float(resolution_users)
    return lambda x: float(max(1, math.floor(x * resolution_pct / 100.0)))


def rate_step(resolution_pct: float) -> Callable[[float], float]:
    return lambda x: x * resolution_pct / 100.0


def search(probe: Callable[[float], Probe], *, start: float, floor: float, bound: Bound,
           step: Callable[[float], float], integer: bool = True) -> SearchResult:
    """Bracket from `start`, then bisect, within [floor, bound.value]."""
    t0 = time.perf_counter()
    seen: dict[float, Probe] = {}
    order: list[Probe] = []

    def passes(x: float) -> bool:
        if x not in seen:
            seen[x] = probe(x)
            order.append(seen[x])
        return seen[x].passed

    def done(value: float | None, lo: float | None, hi: float | None, stopped_by: str) -> SearchResult:
        return SearchResult(value=value, last_pass=seen.get(lo) if lo is not None else None,
                            first_fail=seen.get(hi) if hi is not None else None, stopped_by=stopped_by, bound=bound,
                            step=step(lo) if lo else step(floor), probes=order, wall_s=time.perf_counter() - t0)

    top = math.floor(bound.value) if integer else bound.value
    if top < floor:   # the bound itself leaves no room (a pool that cannot hold one user of this size)
        return done(top if integer else None, None, None, bound.kind)
    x = min(max(start, floor), top)
    x = math.floor(x) if integer else x
    lo: float | None = None
    hi: float | None = None
    if passes(x):
        lo, k = x, step(x)
        while lo < top:
            nxt = min(top, lo + k)
            if passes(nxt):
                lo, k = nxt, k * 2
            else:
                hi = nxt
                break
        if hi is None:
            return done(lo, lo, None, bound.kind)
    else:
        hi, k = x, step(x)
        while hi > floor:
            nxt = max(floor, hi - k)
            if passes(nxt):
                lo = nxt
                break
            hi, k = nxt, k * 2
        if lo is None:
            return done(None, None, hi, "floor")
    while hi - lo > step(lo):
        mid = (lo + hi) // 2 if integer else (lo + hi) / 2
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return done(lo, lo, hi, "slo")
