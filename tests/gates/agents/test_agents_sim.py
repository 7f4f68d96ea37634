"""Agents on the simulator's daily lane (its flags, time scale 0.1): 8 sessions x 4 turns, each
returning turn finds its conversation in the radix cache; without the cache nothing is hit; a
pool too small for every idle conversation evicts them and the hits fall."""
from __future__ import annotations

import pytest

from pytest_glmf.gates.agents import measure_agents
from pytest_glmf.sim.process import SimProcess

DAILY = ["--model-path", "/models/GLM-5.3-Flash-NVFP4", "--speculative-algorithm", "DFLASH",
         "--speculative-draft-model-path", "/models/GLM-5.3-Flash-DFlash2", "--speculative-dflash-block-size", "7",
         "--kv-cache-dtype", "fp8_e4m3", "--mem-fraction-static", "0.85", "--context-length", "1048576",
         "--cuda-graph-max-bs-decode", "16", "--max-mamba-cache-size", "48", "--tool-call-parser", "glm47",
         "--enable-cache-report", "--autotune-s", "0"]
SCALE = 0.1
# the simulator shares this box's 2 cores with the client: turns sent late are the truth test's
# concern (test_agents_truth.py), here they would only flag the run
WORKLOAD = dict(sessions=8, turns=4, system_tokens=2000, user_tokens=200, max_tokens=64, think_time_s=1.0,
                send_lateness_max_s=1.0)


def run(extra=(), **overrides):
    with SimProcess(DAILY + list(extra), time_scale=SCALE) as sim:
        return measure_agents(sim.url, time_scale=SCALE, **{**WORKLOAD, **overrides})


def test_eight_sessions_of_four_turns_hit_their_conversations_on_the_daily_lane():
    result = run()
    assert result.valid, result.flags
    s = result.summary
    assert s["sessions_completed"] == 8 and s["turns_completed"] == 32
    assert [t["turns"] for t in s["per_turn"]] == [8, 8, 8, 8]
    for t in result.turns:
        # cached is whole 64-token pages of what the server had seen, never the new turn's message
        assert t.cached_tokens is not None and t.cached_tokens % 64 == 0 and t.cached_tokens < t.prompt_tokens
        if t.turn > 0:
            earlier = next(e for e in result.turns if e.session == t.session and e.turn == t.turn - 1)
            assert t.cached_tokens >= earlier.prompt_tokens - 64       # the previous turn's prompt, page-aligned
    # the first turn shares only the system prompt; returning turns find most of their prompt
    assert 20 < s["per_turn"][0]["cache_hit_pct"] < 80
    assert s["returning_cache_hit_pct"] > 80
    assert s["prompt_tokens_p50"] > 2000
    text = result.table()
    assert "recipe units" in text and "sessions: 8/8 completed" in text


def test_without_the_radix_cache_no_turn_is_cached():
    result = run(["--disable-radix-cache"], sessions=4, turns=2)
    assert result.valid and result.summary["turns_completed"] == 8
    assert all(t.cached_tokens == 0 for t in result.turns)
    assert result.returning_cache_hit_pct == 0.0


def test_a_pool_too_small_for_the_idle_conversations_evicts_them():
    # 8 conversations of ~2.7K tokens of their own (a short shared system prompt, long turns) do
    # not all stay in a 16K-token pool while their agents think: the last turn finds less of its own
    shape = dict(sessions=8, turns=3, system_tokens=200, user_tokens=800)
    roomy = run(**shape)
    tight = run(["--max-total-tokens", "16000"], **shape)
    assert roomy.valid and tight.valid, (roomy.flags, tight.flags)
    last_roomy, last_tight = roomy.per_turn[2]["cache_hit_pct"], tight.per_turn[2]["cache_hit_pct"]
    assert last_tight < last_roomy - 10, (last_roomy, last_tight)
    assert tight.returning_cache_hit_pct < roomy.returning_cache_hit_pct


@pytest.mark.parametrize("tool_every", [2])
def test_tool_results_alternate_with_user_turns(tool_every):
    result = run(sessions=2, turns=4, tool_every=tool_every)
    assert result.valid
    kinds = [t.kind for t in sorted(result.turns, key=lambda t: (t.session, t.turn))]
    assert kinds == ["user", "user", "tool", "user"] * 2
