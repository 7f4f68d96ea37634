"""Agents gate: "the daily lane serves interactive and agent traffic", as numbers with bounds.

N agents' sessions run at once (the lane's `agents.settings`: a sessions file, or a template of
sessions x turns with token lengths and think time); each turn resends the conversation so far,
so the prefix cache decides the returning turns' first-token time. The table shows per turn the
TTFT, prompt and cached tokens and the cache hit; then the sessions. Bounds: `agents` in the
thresholds file (metrics and settings: pytest_glmf/gates/agents/spec.py). A lane without an
`agents` section skips. A bound on the cache hit needs the server to report cached tokens
(SGLang --enable-cache-report, vLLM --enable-prompt-tokens-details): without it the test fails
naming the flag.

`test_agents_capacity` (with an `slo:` in the section): the most concurrent sessions whose turns
meet that service level (TTFT percentile per turn, per-user tok/s of the answers), searched like
the capacity gate's users, and with `settings.frontier_turns` the same at each session length;
gated by `capacity_sessions` (gates/agents/capacity.py).

`test_agents_replay` (with a `replay:` block in the section): a window of a trace (the packaged
Azure slice, or a file) replayed open loop at its arrival times x `speedup`; its bounds (TTFT,
send lateness, failed requests, output tokens exact) are the block's (gates/agents/replay.py).
"""
from __future__ import annotations

import pytest

from pytest_glmf.gates.agents import assert_agents, assert_replay
from pytest_glmf.gates.agents.capacity import assert_agents_capacity, measure_agents_capacity
from pytest_glmf.gates.agents.spec import replay_parts
from pytest_glmf.gates.capacity.spec import build_slo
from pytest_glmf.plugin.progress import live_progress

pytestmark = [pytest.mark.glmf_gate("agents"), pytest.mark.glmf_serial]

CACHE_METRICS = ("returning_cache_hit_pct",)


def test_agents(glmf_agents, glmf_lane, glmf_thresholds, record_property):
    section = glmf_thresholds.for_gate(glmf_lane.name, "agents")
    if not section:
        pytest.skip(f"no agents section for lane {glmf_lane.name!r} in "
                    f"{glmf_thresholds.source(glmf_lane.name, 'agents')}")
    if set(section) == {"replay"}:
        pytest.skip(f"the agents section for lane {glmf_lane.name!r} holds only a trace replay (test_agents_replay)")
    result = glmf_agents(key="agents")
    print(result.table())
    for metric in ("ttft_p95_s", "returning_ttft_p95_s", "returning_cache_hit_pct", "sessions_completed_pct"):
        record_property(f"agents.{metric}", result.summary.get(metric))
    bounds = glmf_thresholds.bounds(glmf_lane.name, "agents")
    bounds.pop("capacity_sessions", None)     # test_agents_capacity's
    note = result.summary.get("cache_note")
    if note and any(m in bounds for m in CACHE_METRICS):
        pytest.fail(f"agents of lane {glmf_lane.name!r}: {note}; the cache-hit bound in "
                    f"{glmf_thresholds.source(glmf_lane.name, 'agents')} cannot be judged", pytrace=False)
    assert_agents(result, source=glmf_thresholds.source(glmf_lane.name, "agents"), **bounds)


def test_agents_capacity(request, glmf_server, glmf_lane, glmf_thresholds, glmf_results, record_property):
    section = glmf_thresholds.for_gate(glmf_lane.name, "agents")
    source = glmf_thresholds.source(glmf_lane.name, "agents")
    if "slo" not in section:
        pytest.skip(f"no agents service level (slo) for lane {glmf_lane.name!r} in {source}")
    slo = build_slo(section["slo"], f"{source}.slo")
    settings = glmf_thresholds.settings(glmf_lane.name, "agents")
    bounds = glmf_thresholds.bounds(glmf_lane.name, "agents")
    start = settings.start_sessions or int((bounds.get("capacity_sessions") or {}).get("min") or settings.sessions)
    time_scale = float(glmf_lane.time_scale) if glmf_lane.launcher == "sim" else 1.0
    result = measure_agents_capacity(glmf_server.base_url, slo, settings=settings, timeouts=glmf_lane.timeouts,
                                     time_scale=time_scale, start=start)
    result.lane = glmf_lane.name
    say = live_progress(request.config)
    for line in result.table().splitlines():
        if say is not None:
            say(line)
    print(result.table())
    glmf_results.record("agents", "capacity", result.to_record())
    record_property("agents.capacity_sessions", result.sessions)
    if "capacity_sessions" in bounds:
        assert_agents_capacity(result, source=source, capacity_sessions=bounds["capacity_sessions"])
    else:
        pytest.skip(f"no capacity_sessions bound for lane {glmf_lane.name!r} in {source} "
                    f"(measured: {result.sessions} sessions)")


def test_agents_replay(glmf_replay, glmf_lane, glmf_thresholds, record_property):
    section = glmf_thresholds.for_gate(glmf_lane.name, "agents")
    source = f"{glmf_thresholds.source(glmf_lane.name, 'agents')}.replay"
    if "replay" not in section:
        pytest.skip(f"no trace replay (replay:) for lane {glmf_lane.name!r} in {source}")
    _, bounds = replay_parts(section["replay"], source)
    result = glmf_replay(key="replay")
    print(result.table())
    for metric in ("ttft_p95_s", "send_lateness_p99_s", "failed_requests", "output_tokens_exact_pct"):
        record_property(f"agents.replay.{metric}", result.summary.get(metric))
    assert_replay(result, source=source, **bounds)
