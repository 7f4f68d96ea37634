"""The boundary and its confidence interval: where the service level's margin crosses zero (the
model's line between the probes either side of the answer), and a bootstrap over the per-request
records of the probes near it. Pure, seeded.

This is the boundary's interval, not the answer's: the answer is the last probed value that passed
(search.py), a measured fact; the boundary is the model's estimate of where, between that pass and
the first failure, the service level stops holding. Both are reported, each named (table.py).

    near:       the NEAR usable probes (margins known) on each side of the answer: at or below the
                last pass, and above it
    resample:   per probe, its runs with replacement, and within each drawn run its requests with
                replacement (the two levels a probe's numbers vary on); the probe's margin again
                from the resampled requests (slo.sample_numbers, slo.margin: the judge's own rule)
    boundary:   the model's zero of the resampled margins (model.fit_boundary, trusted or not),
                held between the outermost near probes (past them the line is a guess, not a
                measurement): the same quantity as the estimate (boundary_estimate: the zero of
                the measured margins), fractional like it, for users as for rates
    interval:   the 2.5th and 97.5th percentiles over RESAMPLES resamples, widened to the estimate
                when every resample but a few fell on one side of it (a percentile of few requests
                moves in steps): an interval always holds its estimate

Across a cliff (SearchResult.boundary) a line says nothing about where the step lies between the
last pass L and the first failure F: the interval is then [L, F], all the probes can say (there is
no estimate). None when the search did not stop on the service level (a bound or the floor is exact, not
estimated) or no probe near the boundary holds records. The interval speaks of the probes' noise
at the probed values; the model's line between them is taken as exact (on a smooth curve its error
is a fraction of the gap between the neighbours, and the search ends with them one step apart).
Issue 40: the interval was of the boundary rounded down to whole users (5.61 beside "95 % CI 5-5").
"""
from __future__ import annotations

import math
import random

from pytest_glmf.gates.capacity.model import fit_boundary
from pytest_glmf.gates.capacity.search import SearchResult
from pytest_glmf.gates.capacity.slo import Probe, margin, sample_numbers
from pytest_glmf.gates.capacity.spec import SLO

RESAMPLES = 200
NEAR = 2
LEVEL = 0.95
SEED = 0


def near_probes(result: SearchResult) -> list[Probe]:
    """The probes the interval is drawn from (module docstring)."""
    usable = sorted((p for p in result.probes if p.margin is not None and p.samples), key=lambda p: p.x)
    if result.value is None:
        return []
    below = [p for p in usable if p.x <= result.value][-NEAR:]
    above = [p for p in usable if p.x > result.value][:NEAR]
    return below + above


def resampled_margin(probe: Probe, slo: SLO, rng: random.Random) -> float | None:
    runs = [probe.samples[rng.randrange(len(probe.samples))] for _ in probe.samples]
    per_run = [sample_numbers([run[rng.randrange(len(run))] for _ in run], slo) for run in runs if run]
    return margin(per_run, slo)


def boundary_estimate(result: SearchResult) -> float | None:
    """The model's zero of the near probes' measured margins, held between them (None across a
    cliff, or when the search did not stop on the service level)."""
    if result.stopped_by != "slo" or result.boundary == "cliff":
        return None
    probes = near_probes(result)
    value = result.value
    if value is None or not probes or all(p.x <= value for p in probes):
        return None
    xs = [p.x for p in probes]
    root = fit_boundary([(p.x, p.margin) for p in probes if p.margin is not None]).root
    return None if root is None else min(max(root, min(xs)), max(xs))


def capacity_interval(result: SearchResult, slo: SLO, *, resamples: int = RESAMPLES, seed: int = SEED,
                      level: float = LEVEL) -> list[float] | None:
    """[low, high] of the boundary at `level` (module docstring), or None."""
    if result.stopped_by != "slo":
        return None
    probes = near_probes(result)
    value = result.value
    if value is None or not probes or all(p.x <= value for p in probes):
        return None
    if result.boundary == "cliff" and result.first_fail is not None:
        return [float(value), float(result.first_fail.x)]
    xs = [p.x for p in probes]
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        points = [(p.x, m) for p in probes if (m := resampled_margin(p, slo, rng)) is not None]
        root = fit_boundary(points).root
        if root is not None:
            values.append(min(max(root, min(xs)), max(xs)))
    if not values:
        return None
    values.sort()
    alpha = (1.0 - level) / 2.0
    low = values[math.floor(alpha * (len(values) - 1))]
    high = values[math.ceil((1.0 - alpha) * (len(values) - 1))]
    estimate = boundary_estimate(result)
    if estimate is not None:
        low, high = min(low, estimate), max(high, estimate)
    return [low, high]
