"""The capacity gate: the most concurrent users (and request rate) that meet a service level.

Public API (import it from here; the modules behind it may move):
    measure_capacity(url, slo, settings) -> CapacityResult   users, stopped_by, boundary_ci95, probes
    measure_frontier(url, slo, settings, contexts=)          capacity per context length
    measure_rate_capacity(url, slo, settings) -> RateResult  the open-loop twin
    assert_capacity(result, users={"min": 32})               fails on a missed bound, or no answer
    assert_frontier(frontier)                                fails on an unclean point, or capacity rising with context
    SLO, CapacitySettings                                    the service level and the settings
In a test, the `glmf_capacity` fixture measures on the session's server.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_glmf.gates import lazy_exports

if TYPE_CHECKING:
    from pytest_glmf.gates.capacity.api import (
        CapacityResult,
        FrontierResult,
        RateResult,
        assert_capacity,
        assert_frontier,
        measure_capacity,
        measure_frontier,
        measure_rate_capacity,
    )
    from pytest_glmf.gates.capacity.spec import SLO, CapacitySettings

__all__ = ["SLO", "CapacityResult", "CapacitySettings", "FrontierResult", "RateResult", "assert_capacity",
           "assert_frontier", "measure_capacity", "measure_frontier", "measure_rate_capacity"]
__getattr__, __dir__ = lazy_exports(__name__)   # the names imported above, each from its module
