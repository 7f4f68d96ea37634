"""Slow drift: a metric that got worse across the last runs although no single run crossed the
tolerance (each night 2 % slower inside a 5 % tolerance, while a baseline made of the last
runs moves along with them).

The test looks at the whole sequence, not at steps: the last K runs (this one included) against the
K runs before them, on the same lane, GPU, model revision and engine. It flags a drift when both

  * the last K are worse as a group: a one-sided Mann-Whitney rank test (scipy; exact when there
    are no ties), p < 0.01, in the metric's bad direction; ranks, so one wild run cannot do it, and
  * the shift is material: the median of the last K is worse than the median of the K before by
    more than the metric's baseline tolerance (thresholds.yaml `baseline:`, default 5 %).

What that means in numbers (K = 5, from `bench/drift_power.py`, 1000-20000 simulated series):
a series falling 2 % per run is flagged on its 5th worse run (median; 95 % of series by the 6th
when runs scatter by 1 %, by the 7th at 2 %); on a flat series the false-alarm rate per check is
0.01 % at 2 % run-to-run noise, 0.14 % at 3 %, 0.5 % at 5 %, and at most the rank test's own
exact level, 2/252 = 0.79 %, which very noisy series approach (0.86 % +- 0.06 % measured at 8 %).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_glmf.results.baseline import Tolerance
from pytest_glmf.text import fmt, render_table

ALPHA = 0.01
MIN_WINDOW = 3     # below 3 against 3 the exact rank test cannot reach p < 0.05, let alone 0.01


@dataclass
class Drift:
    gate: str
    key: str
    metric: str
    direction: str           # "higher" | "lower" is better
    before: list[float]      # the K runs before, oldest first
    recent: list[float]      # the last K runs, oldest first (the last is this run)
    p_value: float
    worse_pct: float         # median shift in the bad direction, % of the earlier median
    allowed_pct: float
    allowed: float
    sessions: list[str]      # the runs of both windows, oldest first

    @property
    def flagged(self) -> bool:
        return self.p_value < ALPHA and self.worse_by > self.allowed + 1e-12

    @property
    def worse_by(self) -> float:
        mb, mr = statistics.median(self.before), statistics.median(self.recent)
        return mb - mr if self.direction == "higher" else mr - mb

    def row(self) -> list[str]:
        return [f"{self.gate}.{self.metric} [{self.key}]", fmt(statistics.median(self.before)),
                fmt(statistics.median(self.recent)), f"{-self.worse_pct if self.direction == 'higher' else self.worse_pct:+.1f} %",
                f"{self.allowed_pct:.1f} %", f"{self.p_value:.3g}",
                " ".join(fmt(v) for v in [*self.before, *self.recent])]


def drift_test(values: Sequence[float], direction: str, window: int,
               tolerance: Tolerance | None = None, *, gate: str = "", key: str = "", metric: str = "",
               sessions: Sequence[str] = ()) -> Drift | None:
    """The test on one metric's series (oldest first, the current run last). None when the series
    is shorter than two windows or flat (every value equal)."""
    from scipy.stats import mannwhitneyu

    values = [float(v) for v in values]
    if window < MIN_WINDOW or len(values) < 2 * window:
        return None
    before, recent = values[-2 * window:-window], values[-window:]
    if len(set(before + recent)) == 1:
        return None
    tolerance = tolerance or Tolerance()
    alternative = "less" if direction == "higher" else "greater"
    method = "exact" if len(set(before + recent)) == 2 * window else "asymptotic"   # exact assumes no ties
    p_value = float(mannwhitneyu(recent, before, alternative=alternative, method=method).pvalue)
    mid = statistics.median(before)
    allowed = max(abs(mid) * tolerance.rel_pct / 100, tolerance.abs)
    drift = Drift(gate, key, metric, direction, before, recent, p_value, 0.0, tolerance.rel_pct, allowed,
                  list(sessions)[-2 * window:])
    drift.worse_pct = drift.worse_by / abs(mid) * 100 if mid else math.inf
    return drift


def drift_table(drifts: Sequence[Drift]) -> str:
    return render_table([d.row() for d in drifts],
                        ["metric", "median before", "median last", "change", "allowed", "p", "series (oldest first)"])


def drift_message(drifts: Sequence[Drift], window: int, where: str) -> str:
    return (f"slow drift: {len(drifts)} metric(s) worse over the last {window} runs than the {window} before "
            f"({where}; rank test p < {ALPHA}, median shift beyond the tolerance)\n{drift_table(drifts)}")


def find_drifts(series: Mapping[tuple[str, str, str], Sequence[tuple[str, float]]],
                current: Mapping[tuple[str, str, str], float], directions: Mapping[str, Mapping[str, str]],
                window: int, tolerance_for: Any, current_session: str = "this run") -> list[Drift]:
    """Every flagged (gate, key, metric) of the current run, given the stored series of the earlier
    runs ((session id, value), oldest first) and this run's values."""
    out = []
    for (gate, key, metric), now in current.items():
        direction = directions.get(gate, {}).get(metric)
        if direction is None or metric == "spread_pct":   # the spread is the noise yardstick
            continue
        earlier = list(series.get((gate, key, metric), ()))
        found = drift_test([v for _, v in earlier] + [now], direction, window,
                           Tolerance.for_metric(tolerance_for(gate), metric), gate=gate, key=key, metric=metric,
                           sessions=[s for s, _ in earlier] + [current_session])
        if found is not None and found.flagged:
            out.append(found)
    return out
