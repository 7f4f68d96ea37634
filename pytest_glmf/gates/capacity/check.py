"""The capacity verdict: a result against the thresholds file's bounds, failing with one table
(docs/style.md) whose note says what stopped the search and which knob moves it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pytest_glmf.gates.capacity.measure import CapacityResult, RateResult
from pytest_glmf.gates.capacity.spec import SPEC
from pytest_glmf.gates.capacity.table import STOPPED, capacity_report, rate_report, workload_text
from pytest_glmf.gates.verdict import Check, failed_checks, failure_table


def _why(result: CapacityResult | RateResult) -> str:
    """What held the answer where it is, in one note."""
    s = result.search
    rate = isinstance(result, RateResult)
    if s.stopped_by == "undecided":
        return f"undecided: {s.undecided}"
    if s.stopped_by == "slo" and s.first_fail is not None:
        at = f"{s.first_fail.x:.3g}/s" if rate else f"{s.first_fail.users} users"
        return f"at {at}: " + "; ".join(m.text() for m in s.first_fail.misses)
    if s.stopped_by == "floor" and s.first_fail is not None:
        return "nothing passed: " + "; ".join(m.text() for m in s.first_fail.misses)
    return f"stopped by {STOPPED.get(s.bound.kind, s.bound.kind)}: {s.bound.text()}"


def capacity_checks(result: CapacityResult | RateResult, bounds: Mapping[str, Any], *, source: str = "") -> list[Check]:
    """One Check per bounded metric (`users`, `rate_per_s`) this result measures."""
    value = result.rate_per_s if isinstance(result, RateResult) else result.users
    metric = "rate_per_s" if isinstance(result, RateResult) else "users"
    out = []
    for name, bound in SPEC.bounds(bounds).items():
        if name != metric:
            continue
        where = f"@ {workload_text(result.workload)}"
        out.append(Check(name, 0 if value is None else value, bound, where=where, source=source, hint=_why(result)))
    return out


def assert_capacity(result: CapacityResult | RateResult, bounds: Mapping[str, Any], *, source: str = "",
                    title: str = "") -> None:
    """Fail the calling test when the capacity misses a bound, or when there is no capacity to
    judge (the search was undecided, or not even the floor met the service level), whatever the
    bounds: the verdict table (or why there is no answer), then the probes."""
    __tracebackhide__ = True
    failed = failed_checks(capacity_checks(result, bounds, source=source))   # counted: something verified
    value = result.rate_per_s if isinstance(result, RateResult) else result.users
    if failed or value is None:
        report = rate_report(result) if isinstance(result, RateResult) else capacity_report(result)
        head = f"{title}: " if title else ""
        if failed:
            pytest.fail(f"{head}{len(failed)} threshold(s) missed\n{failure_table(failed)}\n\n{report}", pytrace=False)
        pytest.fail(f"{head}no capacity: {_why(result)}" + (f" ({source})" if source else "") + f"\n\n{report}",
                    pytrace=False)
