"""The capacity verdict: a result against bounds written like the thresholds file's (checked as the
loader checks them), failing with one table (docs/style.md) whose note says what stopped the search
and which knob moves it; and the frontier's verdict: every point a clean measurement, capacity
never rising with context. Both count what they judge (the session's "something was verified")."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pytest_glmf.gates.bounds import caller_source, checked_bounds, lane_phrase
from pytest_glmf.gates.capacity.measure import CapacityResult, FrontierResult, RateResult
from pytest_glmf.gates.capacity.slo import INVALID
from pytest_glmf.gates.capacity.spec import SPEC
from pytest_glmf.gates.capacity.table import STOPPED, capacity_report, rate_report, workload_text
from pytest_glmf.gates.verdict import Check, failed_checks, failure_message, failure_table, note_evaluated


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


def assert_capacity(result: CapacityResult | RateResult, *, source: str | None = None, lane: Any = None,
                    **bounds: Any) -> None:
    """Fail the test unless the capacity meets `bounds` (`users={"min": 32}`, `rate_per_s={"min": 4}`:
    the thresholds file's keys), and when there is no capacity to judge (the search was undecided,
    or not even the floor met the service level), whatever the bounds: the verdict table (or why
    there is no answer), then the probes. `source` names where the bounds come from (default: the
    calling test's file:line)."""
    __tracebackhide__ = True
    where = source or caller_source()
    bounds = checked_bounds("capacity", bounds, "assert_capacity", (), where)
    failed = failed_checks(capacity_checks(result, bounds, source=where))   # counted: something verified
    note_evaluated()      # the search gave an answer (or not): judged whatever the bounds
    value = result.rate_per_s if isinstance(result, RateResult) else result.users
    if failed or value is None:
        report = rate_report(result) if isinstance(result, RateResult) else capacity_report(result)
        head = f"{'open-loop ' if isinstance(result, RateResult) else ''}capacity{lane_phrase(lane)}: " if lane else ""
        if failed:
            pytest.fail(f"{head}{len(failed)} threshold(s) missed\n{failure_table(failed)}\n\n{report}", pytrace=False)
        pytest.fail(f"{head}no capacity: {_why(result)}" + (f" ({source})" if source else "") + f"\n\n{report}",
                    pytrace=False)


def frontier_problems(frontier: FrontierResult) -> list[str]:
    """Why the frontier is no clean measurement, one line each: a point undecided, or resting on an
    invalid probe (failed requests, a client that could not keep up); capacity rising with context
    by more than the resolution (physics says it cannot: the numbers are noise)."""
    problems = []
    for p in frontier.points:
        if p.undecided:
            problems.append(f"{p.workload['prompt_tokens']:,} tokens: undecided: {p.undecided}")
        for probe in (p.last_pass, p.first_fail):
            bad = [m.text() for m in (probe.misses if probe else []) if m.what in INVALID]
            if probe is not None and bad:
                problems.append(f"{p.workload['prompt_tokens']:,} tokens @ {probe.users} users: {'; '.join(bad)}")
    for (c0, u0, _), (c1, u1, s1) in _measured_pairs(frontier):
        if u1 > u0 + s1:
            problems.append(f"capacity rises with context: {u0} users at {c0:,} tokens, {u1} at {c1:,} "
                            f"(more than the resolution, {s1:g}): noisy measurements")
    return problems


def _measured_pairs(frontier: FrontierResult) -> list[tuple[tuple[int, int, float], tuple[int, int, float]]]:
    """Neighbouring points with an answer, (context, users, resolution) each: capacity must not rise between them."""
    measured = [(p.workload["prompt_tokens"], p.users, p.search.step) for p in frontier.points if p.users]
    return list(zip(measured, measured[1:]))


def assert_frontier(frontier: FrontierResult, *, source: str | None = None, lane: Any = None, details: str = "",
                    **bounds: Any) -> None:
    """Fail the test unless every point of the frontier is a clean measurement and capacity does not
    rise with context (`frontier_problems`), and every point meets `bounds` (`users={"min": 8}`,
    the thresholds file's keys). Each point and each neighbouring pair is a check counted as
    verified. `details` (the frontier's table, say) follows the failure."""
    __tracebackhide__ = True
    where = source or caller_source()
    bounds = checked_bounds("capacity", bounds, "assert_frontier", (), where)
    problems = frontier_problems(frontier)
    note_evaluated(len(frontier.points) + len(_measured_pairs(frontier)))
    failed = failed_checks([c for p in frontier.points for c in capacity_checks(p, bounds, source=where)])
    tail = f"\n\n{details}" if details else ""
    if problems:
        pytest.fail("capacity frontier not measured cleanly:\n" + "\n".join(problems) + tail, pytrace=False)
    if failed:
        pytest.fail(failure_message(failed, f"capacity frontier{lane_phrase(lane)}", details), pytrace=False)
