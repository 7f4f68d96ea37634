"""Our agent still fits the lane: 8 users at once, each in a 4-turn conversation with our support
agent (my_agent.yaml: our system prompt, a tool result fed back, our users' think time), get their
first token quickly on every turn, and the prefix cache serves what each turn resends.

    pytest examples/test_my_agent.py --glmf-lanes examples/sim-lanes.yaml --glmf-lane daily

`glmf_agents` runs the sessions on the session's server and records them (the result file, the
baseline comparison); `assert_agents` takes the agents gate's bounds (pytest_glmf/gates/agents/spec.py).
The cached tokens come from the server: SGLang with --enable-cache-report, vLLM with
--enable-prompt-tokens-details.
"""
from pathlib import Path

from pytest_glmf.gates.agents import assert_agents

SESSIONS = Path(__file__).with_name("my_agent.yaml")


def test_our_agent_on_eight_users(glmf_agents):
    agents = glmf_agents(SESSIONS, sessions=8)
    print(agents.table())
    assert_agents(agents, ttft_p95_s={"max": 1.0}, returning_cache_hit_pct={"min": 45},
                  sessions_completed_pct={"min": 100})
