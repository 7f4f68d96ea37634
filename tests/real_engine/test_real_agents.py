"""The agents gate against real vLLM on the CPU (SmolLM2-135M): 8 sessions x 4 turns, each turn
resending the conversation; vLLM's own prefix-cache report (usage.prompt_tokens_details.cached_tokens,
with --enable-prompt-tokens-details) shows every returning turn cached in whole KV blocks."""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.gates.agents import measure_agents

LANE = "real-agents"
BLOCK = 128     # vLLM 0.32's KV block on the CPU backend: cached counts come in whole blocks (measured)


@pytest.fixture(scope="module")
def agents_server(real_servers: Any) -> Any:
    return real_servers.get(LANE)


def test_eight_sessions_of_four_turns_on_real_vllm(agents_server: Any, real_report: dict) -> None:
    result = measure_agents(agents_server.base_url, sessions=8, turns=4, system_tokens=200, user_tokens=40,
                            max_tokens=16, think_time_s=0.2, send_lateness_max_s=1.0)
    real_report.setdefault("tables", {})["agents"] = result.table()
    assert result.valid, result.flags
    s = result.summary
    assert s["sessions_completed"] == 8 and s["turns_completed"] == 32
    assert all(t.cached_tokens is not None for t in result.turns)      # the server reported every turn
    returning = [t for t in result.turns if t.turn > 0]
    # vLLM caches whole blocks of what it computed before: a returning turn finds at least every
    # whole block of its previous prompt (and the first turns share the system prompt's blocks)
    assert all(t.cached_tokens % BLOCK == 0 for t in result.turns)
    for t in returning:
        earlier = next(e for e in result.turns if e.session == t.session and e.turn == t.turn - 1)
        assert t.cached_tokens >= earlier.prompt_tokens // BLOCK * BLOCK, (t.turn, t.cached_tokens, earlier.prompt_tokens)
    assert s["returning_cache_hit_pct"] > 50
    assert all(t.request.completion_tokens == 16 for t in result.turns)
