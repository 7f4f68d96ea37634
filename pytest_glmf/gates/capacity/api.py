"""The capacity gate's public API: the most concurrent users (or the highest request rate) that
meet a service level, and the verdict against bounds written like the thresholds file's.

    from pytest_glmf.gates.capacity import SLO, assert_capacity, measure_capacity

    result = measure_capacity("http://127.0.0.1:30000", SLO(per_user_tok_s=50, ttft_s=1.0))
    print(result.users, result.stopped_by, result.boundary_ci95)
    assert_capacity(result, users={"min": 32})             # inside a test

`measure_capacity` needs no pytest (a script or notebook calls it the same way); in a test the
`glmf_capacity` fixture calls it on the session's server with the lane's boot facts, timeouts,
simulator time scale and `capacity` section, and records the result in the session's result
file. The ready-made suite (`pytest_glmf/suites/test_capacity.py`) is a user of these names.
"""
from __future__ import annotations

from pytest_glmf.gates.capacity.check import assert_capacity, assert_frontier, capacity_checks, frontier_problems
from pytest_glmf.gates.capacity.measure import (
    CapacityResult,
    FrontierResult,
    RateResult,
    measure_capacity,
    measure_frontier,
    measure_rate_capacity,
)
from pytest_glmf.gates.capacity.spec import SLO, CapacitySettings

__all__ = ["SLO", "CapacityResult", "CapacitySettings", "FrontierResult", "RateResult", "assert_capacity",
           "assert_frontier", "capacity_checks", "frontier_problems", "measure_capacity", "measure_frontier",
           "measure_rate_capacity"]
