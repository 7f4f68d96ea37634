"""Agents gate: "the daily lane serves interactive and agent traffic", as numbers with bounds.

N agents' sessions run at once (the lane's `agents.settings`: a sessions file, or a template of
sessions x turns with token lengths and think time); each turn resends the conversation so far,
so the prefix cache decides the returning turns' first-token time. The table shows per turn the
TTFT, prompt and cached tokens and the cache hit; then the sessions. Bounds: `agents` in the
thresholds file (metrics and settings: pytest_glmf/gates/agents/spec.py). A lane without an
`agents` section skips. A bound on the cache hit needs the server to report cached tokens
(SGLang --enable-cache-report, vLLM --enable-prompt-tokens-details): without it the test fails
naming the flag.
"""
from __future__ import annotations

import pytest

from pytest_glmf.gates.agents import assert_agents

pytestmark = [pytest.mark.glmf_gate("agents"), pytest.mark.glmf_serial]

CACHE_METRICS = ("returning_cache_hit_pct",)


def test_agents(glmf_agents, glmf_lane, glmf_thresholds, record_property):
    section = glmf_thresholds.for_gate(glmf_lane.name, "agents")
    if not section:
        pytest.skip(f"no agents section for lane {glmf_lane.name!r} in "
                    f"{glmf_thresholds.source(glmf_lane.name, 'agents')}")
    result = glmf_agents(key="agents")
    print(result.table())
    for metric in ("ttft_p95_s", "returning_ttft_p95_s", "returning_cache_hit_pct", "sessions_completed_pct"):
        record_property(f"agents.{metric}", result.summary.get(metric))
    bounds = glmf_thresholds.bounds(glmf_lane.name, "agents")
    note = result.summary.get("cache_note")
    if note and any(m in bounds for m in CACHE_METRICS):
        pytest.fail(f"agents of lane {glmf_lane.name!r}: {note}; the cache-hit bound in "
                    f"{glmf_thresholds.source(glmf_lane.name, 'agents')} cannot be judged", pytrace=False)
    assert_agents(result, source=glmf_thresholds.source(glmf_lane.name, "agents"), **bounds)
