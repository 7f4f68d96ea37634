"""Capacity of agents against known truth: a server with K seats, a turn's TTFT is its own
first-token time while at most K turns are in flight and a whole answer longer for a queued one,
so under a TTFT bound between the two the capacity is exactly K sessions; then the simulator's
daily lane, its capacity and the frontier over session length."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_glmf.gates.agents.capacity import assert_agents_capacity, measure_agents_capacity
from pytest_glmf.gates.capacity.spec import SLO
from pytest_glmf.sim.process import SimProcess
from pytest_glmf.testing.truth_server import TruthServer

sys.path.insert(0, str(Path(__file__).parent))
from test_agents_sim import DAILY, SCALE  # noqa: E402


def test_the_capacity_is_the_seats_when_a_queued_turn_misses_the_ttft_bound():
    # TTFT 20 ms on a seat; a queued turn waits a whole answer (20 ms + 19 x 5 ms) more
    with TruthServer(ttft_ms=20, itl_ms=5, seats=4, cache_report=True) as ts:
        result = measure_agents_capacity(ts.url, SLO(ttft_s=0.07, ttft_pct=95), start=2, sessions=2, turns=2,
                                         system_tokens=10, user_tokens=5, max_tokens=20, think_time_s=0.0,
                                         max_sessions=16, resolution_sessions=1)
    assert result.sessions == 4 and result.search.stopped_by == "slo"
    assert result.search.last_pass.users == 4 and result.search.first_fail.users == 5
    assert any("turn TTFT p95" in m.text() for m in result.search.first_fail.misses)
    assert "agents capacity at 2 turns per session: 4 sessions" in result.table()


def test_capacity_and_frontier_on_the_daily_lane():
    slo = SLO(ttft_s=1.0, ttft_pct=95, per_user_tok_s=50, users_pct=90)
    with SimProcess(DAILY, time_scale=SCALE) as sim:
        result = measure_agents_capacity(sim.url, slo, time_scale=SCALE, start=8, turns=2, system_tokens=600,
                                         user_tokens=120, max_tokens=64, think_time_s=1.0, max_sessions=24,
                                         resolution_sessions=2, frontier_turns=[2, 4], send_lateness_max_s=1.0)
    assert result.sessions is not None and result.sessions >= 8
    assert [f.turns for f in result.frontier] == [2, 4]
    longer = result.frontier[1]
    # longer sessions, longer contexts: never more sessions fit (within the search's step)
    assert longer.sessions is not None and longer.sessions <= result.sessions + 2
    text = result.table()
    assert "frontier over session length" in text
    assert_agents_capacity(result, capacity_sessions={"min": 6})
    with pytest.raises(pytest.fail.Exception, match="capacity_sessions @ 2 turns"):
        assert_agents_capacity(result, capacity_sessions={"min": 1000})
