"""Capacity gate: "48 users at 50 tok/s each, first token inside a second", as a number with a bound.

`test_capacity`: the largest number of concurrent users for which the lane's service level
(`capacity.slo`) holds, searched (each probe where a fit of the probes so far puts the boundary, bracket and bisect
where it cannot be trusted, to the stated resolution; beside it the boundary the probes put between the
last pass and the first failure, with its 95 % interval) with the curve's
discipline: one discarded warm pass per probed shape, `runs` measured runs, the client's
self-check. It never probes beyond the seats and the KV pool of the boot log (unless the service
level allows queueing) and says which bound stopped it and the flag that raises it. Fails when
the capacity misses `capacity.users`; the failure shows the last passing and the first failing
probe with their numbers. It fails without an answer too, saying why: nothing met the service
level, or the search was undecided (a probe the client could not measure even with as many client
processes as the cores allow: `capacity.settings.workers`, or a quieter machine).

`test_capacity_frontier` (with `capacity.settings.frontier.contexts`): the same search at each
context length per user, a table and a PNG (results directory) of users at the service level
against context, the KV pool's bound beside it. It fails when a point rests on an invalid
measurement (failed requests, a client that could not keep up) or when capacity rises with
context by more than the resolution (physics says it cannot: the numbers are noise).

`test_capacity_rate` (with a `capacity.rate_per_s` bound): the open-loop twin, the highest
Poisson arrival rate at which the service level holds.

Settings and their defaults: pytest_glmf/gates/capacity/spec.py.
"""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.gates.capacity import assert_capacity, assert_frontier
from pytest_glmf.gates.capacity.plot import plot_frontier
from pytest_glmf.gates.capacity.table import capacity_report, frontier_table, rate_report
from pytest_glmf.plugin.progress import live_progress

pytestmark = [pytest.mark.glmf_gate("capacity"), pytest.mark.glmf_serial]



def _section(glmf_lane, glmf_thresholds) -> dict[str, Any]:
    section = glmf_thresholds.for_gate(glmf_lane.name, "capacity")
    if "slo" not in section:
        pytest.skip(f"no capacity service level (slo) for lane {glmf_lane.name!r} in "
                    f"{glmf_thresholds.source(glmf_lane.name, 'capacity')}")
    return section


def _say(request: pytest.FixtureRequest, text: str) -> None:
    say = live_progress(request.config)
    for line in [""] + text.splitlines():
        if say is not None:
            say(line)


def test_capacity(glmf_capacity, glmf_lane, glmf_thresholds, record_property, request):
    _section(glmf_lane, glmf_thresholds)
    source = glmf_thresholds.source(glmf_lane.name, "capacity")
    bounds = glmf_thresholds.bounds(glmf_lane.name, "capacity")
    start = (bounds.get("users") or {}).get("min")
    result = glmf_capacity.measure(**({"start_users": int(start)} if start and not glmf_capacity.settings.start_users
                                      else {}))
    record_property("capacity.users", result.users)
    record_property("capacity.stopped_by", result.stopped_by)
    _say(request, capacity_report(result))
    assert_capacity(result, source=source, lane=glmf_lane, **bounds)


def test_capacity_frontier(glmf_capacity, glmf_lane, glmf_thresholds, glmf_results, request):
    _section(glmf_lane, glmf_thresholds)
    if not glmf_capacity.settings.frontier.contexts:
        pytest.skip(f"no capacity.settings.frontier.contexts for lane {glmf_lane.name!r}")
    bounds = glmf_thresholds.bounds(glmf_lane.name, "capacity")
    start = (bounds.get("users") or {}).get("min")
    frontier = glmf_capacity.frontier(**({"start_users": int(start)} if start and not glmf_capacity.settings.start_users
                                         else {}))
    facts = glmf_capacity.facts
    text = (f"capacity frontier of lane {glmf_lane.name!r}: {frontier.slo.describe()} "
            f"({frontier.wall_s:.0f} s)\n{frontier_table(frontier, facts)}")
    try:
        png = plot_frontier(frontier, glmf_results.results_dir / f"{glmf_lane.name}-frontier.png", facts=facts,
                            title=f"capacity frontier of lane {glmf_lane.name}")
        text += f"\nplot: {png}"
    except RuntimeError as exc:      # matplotlib missing: the table is still the result
        text += f"\nno plot: {exc}"
    _say(request, text)
    assert_frontier(frontier, source=glmf_thresholds.source(glmf_lane.name, "capacity"), lane=glmf_lane, details=text)


def test_capacity_rate(glmf_capacity, glmf_lane, glmf_thresholds, record_property, request):
    _section(glmf_lane, glmf_thresholds)
    bounds = glmf_thresholds.bounds(glmf_lane.name, "capacity")
    if "rate_per_s" not in bounds:
        pytest.skip(f"no capacity.rate_per_s bound for lane {glmf_lane.name!r}")
    result = glmf_capacity.rate()
    record_property("capacity.rate_per_s", result.rate_per_s)
    _say(request, rate_report(result))
    assert_capacity(result, source=glmf_thresholds.source(glmf_lane.name, "capacity"), lane=glmf_lane, **bounds)

