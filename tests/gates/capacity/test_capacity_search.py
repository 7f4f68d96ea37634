"""The search as a pure function over a probe callback: it finds the true capacity within its
resolution from any start, stops at a bound with the bound's reason, never probes above the bound
or the same value twice, and its cost is what the docstring says."""
from __future__ import annotations

import pytest

from pytest_glmf.gates.capacity.search import Bound, rate_step, search, users_step
from pytest_glmf.gates.capacity.slo import Miss, Probe


def table_probe(capacity: float, seen: list[float]):
    """Passes up to `capacity` (inclusive), records what was asked."""
    def probe(x: float) -> Probe:
        seen.append(x)
        ok = x <= capacity
        return Probe(x=x, passed=ok, misses=[] if ok else [Miss("per-user tok/s", "40", ">= 50")])
    return probe


CEILING = Bound(1024, "max_users", "ceiling")


@pytest.mark.parametrize("true", [1, 2, 7, 21, 48, 50, 127, 300, 1000])
@pytest.mark.parametrize("start", [1, 8, 48, 200])
def test_finds_the_true_capacity_within_the_resolution(true, start):
    seen: list[float] = []
    step = users_step(None, 10)
    r = search(table_probe(true, seen), start=start, floor=1, bound=CEILING, step=step)
    assert r.stopped_by == "slo" and r.value <= true < r.first_fail.x
    assert r.first_fail.x - r.value <= step(r.value)          # the stated resolution
    assert true - r.value <= step(r.value)
    assert len(seen) == len(set(seen)) == len(r.probes)       # nothing measured twice
    assert r.last_pass.x == r.value and r.last_pass.passed and not r.first_fail.passed


def test_a_good_start_costs_two_probes():
    seen: list[float] = []
    r = search(table_probe(49, seen), start=48, floor=1, bound=CEILING, step=users_step(4, 10))
    assert seen == [48, 52] and r.value == 48


def test_absolute_resolution_and_exact_answer_at_one_user_steps():
    seen: list[float] = []
    r = search(table_probe(37, seen), start=8, floor=1, bound=CEILING, step=users_step(1, 10))
    assert r.value == 37 and r.first_fail.x == 38


def test_the_bound_stops_it_with_its_reason():
    seen: list[float] = []
    kv = Bound(23, "kv_pool", "KV pool 201,088 tokens / 8,608 per user", "raise --mem-fraction-static")
    r = search(table_probe(100, seen), start=8, floor=1, bound=kv, step=users_step(None, 10))
    assert r.value == 23 and r.stopped_by == "kv_pool" and r.first_fail is None
    assert max(seen) == 23                                     # never above the bound
    assert r.bound.text() == "KV pool 201,088 tokens / 8,608 per user: raise --mem-fraction-static"


def test_a_start_above_the_bound_is_clamped():
    seen: list[float] = []
    r = search(table_probe(2, seen), start=48, floor=1, bound=Bound(3, "kv_pool", "kv"), step=users_step(None, 10))
    assert seen[0] == 3 and r.value == 2 and r.stopped_by == "slo"


def test_nothing_passes():
    seen: list[float] = []
    r = search(table_probe(0, seen), start=8, floor=1, bound=CEILING, step=users_step(None, 10))
    assert r.value is None and r.stopped_by == "floor" and r.first_fail.x == 1 and r.last_pass is None


def test_a_bound_below_the_floor_measures_nothing():
    seen: list[float] = []
    r = search(table_probe(10, seen), start=8, floor=1, bound=Bound(0, "kv_pool", "no room"), step=users_step(None, 10))
    assert seen == [] and r.value == 0 and r.stopped_by == "kv_pool"


def test_rates_bisect_to_a_relative_resolution():
    seen: list[float] = []
    r = search(table_probe(6.3, seen), start=1.0, floor=0.01, bound=Bound(1000, "max_rate", "ceiling"),
               step=rate_step(5), integer=False)
    assert r.value <= 6.3 < r.first_fail.x and r.first_fail.x - r.value <= 0.05 * r.value
