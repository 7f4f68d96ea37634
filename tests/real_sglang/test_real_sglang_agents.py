"""The agents gate against the released SGLang 0.5.23 on the CPU (SmolLM2-135M): 8 sessions x 4
turns; SGLang's radix cache, reported per turn with --enable-cache-report
(usage.prompt_tokens_details.cached_tokens = meta_info cached_tokens), finds each returning turn's
conversation."""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.gates.agents import measure_agents

LANE = "sglang-agents"


@pytest.fixture(scope="module")
def agents_server(sglang_servers: Any) -> Any:
    return sglang_servers.get(LANE)


def test_eight_sessions_of_four_turns_on_real_sglang(agents_server: Any, sglang_report: dict) -> None:
    result = measure_agents(agents_server.base_url, sessions=8, turns=4, system_tokens=200, user_tokens=40,
                            max_tokens=16, think_time_s=0.2, send_lateness_max_s=1.0)
    sglang_report.setdefault("tables", {})["agents"] = result.table()
    assert result.valid, result.flags
    s = result.summary
    assert s["sessions_completed"] == 8 and s["turns_completed"] == 32
    assert all(t.cached_tokens is not None for t in result.turns)
    assert all(t.request.completion_tokens == 16 for t in result.turns)
    for t in result.turns:
        assert 0 <= t.cached_tokens < t.prompt_tokens     # the radix cache never serves the whole prompt
        if t.turn > 0:
            earlier = next(e for e in result.turns if e.session == t.session and e.turn == t.turn - 1)
            # page size 1 on the CPU: the whole previous prompt (the answer may re-tokenize differently)
            assert t.cached_tokens >= earlier.prompt_tokens - 1, (t.turn, t.cached_tokens, earlier.prompt_tokens)
    assert s["returning_cache_hit_pct"] > 60
