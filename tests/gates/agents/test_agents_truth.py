"""The agents' numbers against a server whose truth is known (testing/truth_server.py): per-turn
TTFT, the arrival of every turn (previous answer + think time), the cached tokens the server
reported for each turn, and the session numbers."""
from __future__ import annotations

import pytest

from pytest_glmf.gates.agents import Session, Turn, measure_agents
from pytest_glmf.testing.truth_server import TruthServer, true_metrics

TOL_S = 0.003     # as the curve's definitions test: generous for a shared 2-core box


@pytest.fixture(scope="module")
def truth():
    with TruthServer(ttft_ms=40, itl_ms=3, cache_report=True) as ts:
        yield ts


def measured(ts, **settings):
    ts.reset()
    result = measure_agents(ts.url, **settings)
    jobs = {t["request_tag"]: t for t in ts.truth()}
    warm = [tag for tag in jobs if tag.startswith("agents-warmup-")]
    # the warm pass sent every session's first turn once; the flush after it left nothing cached
    assert len(warm) == (len(result.summary["per_session"]) if settings.get("warmup", True) else 0)
    return result, {tag: t for tag, t in jobs.items() if tag not in warm}


def test_per_turn_ttft_arrival_and_cached_tokens_are_the_servers(truth):
    result, jobs = measured(truth, sessions=4, turns=3, system_tokens=40, user_tokens=12, max_tokens=10,
                            think_time_s=0.25)
    assert result.valid, result.flags
    assert len(result.turns) == 12 and len(jobs) == 12
    by_key = {(t.session, t.turn): t for t in result.turns}
    for t in result.turns:
        job = jobs[f"agents-s{t.session}-t{t.turn}"]
        true = true_metrics(job)
        # TTFT: first content received - sent; the server's first content send bounds it
        assert t.ttft_s == pytest.approx(true["t_first_s"] - t.request.t_send_s, abs=TOL_S)
        assert t.ttft_s >= true["ttft_s"] - 0.0005
        assert t.request.completion_tokens == true["tokens"] == 10
        # the cached tokens are exactly what the server reported for this turn
        assert t.cached_tokens == job["cached_tokens"] and t.prompt_tokens == job["prompt_tokens"]
        assert job["messages"] == 2 + 2 * t.turn          # system + user, then each answer and the next turn
        if t.turn == 0:
            assert t.cached_tokens == 0
        else:
            prev = by_key[(t.session, t.turn - 1)]
            prev_job = jobs[f"agents-s{t.session}-t{t.turn - 1}"]
            # the earlier conversation and its answer were cached: all but this turn's message
            assert prev.prompt_tokens < t.cached_tokens < t.prompt_tokens
            # the turn arrived the think time after the previous answer's last token
            gap = job["t_recv_s"] - prev_job["sends"][-1][0]
            assert gap == pytest.approx(0.25, abs=0.02)
            assert t.lateness_s < 0.02
    s = result.summary
    assert s["sessions"] == 4 and s["sessions_completed"] == 4 and s["turns_completed"] == 12
    assert s["sessions_completed_pct"] == 100.0
    first = [t for t in result.turns if t.turn == 0]
    assert s["per_turn"][0]["cache_hit_pct"] == 0.0
    returning = [t for t in result.turns if t.turn > 0]
    expected = 100.0 * sum(t.cached_tokens for t in returning) / sum(t.prompt_tokens for t in returning)
    assert s["returning_cache_hit_pct"] == pytest.approx(expected)
    # a session lasts from its first send to its last token: 3 answers and 2 think times
    for p in s["per_session"]:
        mine = [t for t in result.turns if t.session == p["session"]]
        assert p["session_time_s"] == pytest.approx(max(t.request.t_last_token_s for t in mine)
                                                    - min(t.request.t_send_s for t in mine))
        assert p["session_time_s"] == pytest.approx(2 * 0.25 + 3 * (0.040 + 9 * 0.003), abs=0.03)
    assert len(first) == 4 and s["send_lateness_p99_s"] < 0.02


def test_sessions_start_at_their_offsets_and_tool_results_are_fed_back(truth):
    sessions = [Session("a", (Turn("user", "look it up"), Turn("tool", '{"found": 3}'), Turn("user", "thanks")),
                        max_tokens=5, think_time_s=0.1),
                Session("b", (Turn("user", "hi"),), max_tokens=5, start_s=0.3)]
    result, jobs = measured(truth, conversations=sessions)
    assert result.valid and result.summary["turns_completed"] == 4
    a1, b0 = jobs["agents-s0-t1"], jobs["agents-s1-t0"]
    assert a1["messages"] == 3                           # user, answer, the tool result (as a user turn)
    assert b0["t_recv_s"] - jobs["agents-s0-t0"]["t_recv_s"] == pytest.approx(0.3, abs=0.02)
    assert [t.kind for t in sorted(result.turns, key=lambda t: (t.session, t.turn))] == ["user", "tool", "user", "user"]


def test_a_server_that_reports_no_cached_tokens_says_so():
    with TruthServer(ttft_ms=20, itl_ms=2) as ts:       # no --cache-report
        result = measure_agents(ts.url, sessions=2, turns=2, system_tokens=10, user_tokens=5, max_tokens=4,
                                think_time_s=0.0)
    assert result.valid
    assert all(t.cached_tokens is None for t in result.turns)
    assert result.returning_cache_hit_pct is None
    assert "--enable-cache-report" in result.summary["cache_note"]
    assert "cache hit" in result.table() and "-  " in result.table()


def test_a_failed_turn_ends_its_session_and_marks_the_result():
    with TruthServer(ttft_ms=20, itl_ms=2, cache_report=True) as ts:
        result = measure_agents(ts.url, sessions=2, turns=3, system_tokens=10, user_tokens=5, max_tokens=4,
                                think_time_s=0.0, path="/v1/nowhere")
    assert not result.valid and result.flags == ["2 turn(s) failed"]
    assert result.summary["turns_completed"] == 0 and result.summary["sessions_completed_pct"] == 0.0
    assert all(t.turn == 0 and "HTTP 404" in t.request.error for t in result.turns)
