"""Replay as a gate: the `agents.replay` block of a thresholds file (validated when the file is read),
`assert_replay` (bounds, and the two rules of every replay), and the suite's test_agents_replay and
a user's own test through the plugin (pytester), attached to the known-truth server."""
from __future__ import annotations

import json
from importlib import resources

import pytest

from pytest_glmf.config.thresholds import load_thresholds
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.agents import assert_replay
from pytest_glmf.gates.agents.spec import ReplaySettings
from pytest_glmf.gates.agents.traces import ReplayResult
from pytest_glmf.testing.truth_server import TruthServer

SUITE = str(resources.files("pytest_glmf.suites").joinpath("test_agents.py"))


def thresholds_with(tmp_path, replay: str):
    path = tmp_path / "thresholds.yaml"
    path.write_text(f"schema: 1\nlanes:\n  x:\n    agents:\n      replay: {replay}\n")
    return path


def test_a_replay_block_loads_with_its_settings_and_bounds(tmp_path):
    from pytest_glmf.gates.agents.spec import replay_parts

    path = thresholds_with(tmp_path, "{trace: mine.jsonl, start_s: 30, seconds: 20, speedup: 2, "
                                     "ttft_p95_s: {max: 2.0}, failed_requests: {max: 0}}")
    section = load_thresholds(path).for_gate("x", "agents")
    settings, bounds = replay_parts(section["replay"], "here")
    assert settings == ReplaySettings(trace="mine.jsonl", start_s=30.0, seconds=20.0, speedup=2.0)
    assert bounds == {"ttft_p95_s": {"max": 2.0}, "failed_requests": {"max": 0}}
    assert load_thresholds(path).bounds("x", "agents") == {}      # the block's bounds are not the sessions'


@pytest.mark.parametrize("replay, message", [
    ("{ttft_p99_s: {max: 1}}", "lanes.x.agents.replay: unknown key 'ttft_p99_s'; allowed metrics: failed_requests, "
                               "output_tokens_exact_pct, per_user_tok_s, prompt_tokens_error_p95_pct, "
                               "send_lateness_p99_s, ttft_p50_s, ttft_p95_s; other keys: between_tokens_timeout_s, "
                               "block_tokens, first_token_timeout_s, model, path, seconds, send_lateness_max_s, "
                               "session_prefix_tokens, speedup, start_s, trace"),
    ("{speedup: 0}", "lanes.x.agents.replay.speedup: expected a number > 0, got 0"),
    ("{trace: 3}", "lanes.x.agents.replay.trace: expected a non-empty string, got 3"),
    ("{seconds: soon}", "lanes.x.agents.replay.seconds: expected a number > 0, got 'soon'"),
    ("{failed_requests: {max: -1}}", "lanes.x.agents.replay: failed_requests: max -1 can never be met"),
    ("{output_tokens_exact_pct: {min: 101}}", "output_tokens_exact_pct: min 101 can never be met"),
    ("[60]", "lanes.x.agents.replay: must be a mapping like {trace: azure_llm_conv_2023_5min.csv"),
])
def test_a_bad_replay_block_names_file_key_and_what_is_allowed(tmp_path, replay, message):
    path = thresholds_with(tmp_path, replay)
    with pytest.raises(ConfigError) as err:
        load_thresholds(path)
    assert str(err.value).startswith(f"{path}: lanes.x.agents.replay") and message in str(err.value)


def replayed(**summary):
    base = {"requests": 10, "failed_requests": 0, "error_examples": [], "send_lateness_p99_s": 0.002,
            "ttft_p50_s": 0.1, "ttft_p95_s": 0.4, "output_tokens_exact_pct": 100.0, "source": "t", "speedup": 1.0}
    return ReplayResult({**base, **summary}, records=[], settings=ReplaySettings(send_lateness_max_s=0.05))


def failure(result, **bounds) -> str:
    with pytest.raises(pytest.fail.Exception) as err:
        assert_replay(result, **bounds)
    return str(err.value)


def test_assert_replay_passes_within_its_bounds_and_names_a_missed_one():
    assert_replay(replayed(), ttft_p95_s={"max": 0.5}, output_tokens_exact_pct={"min": 100})
    text = failure(replayed(ttft_p95_s=0.9), ttft_p95_s={"max": 0.5})
    assert text.startswith("trace replay: 1 threshold(s) missed")
    row = next(line for line in text.splitlines() if line.startswith("ttft_p95_s"))
    assert "| 0.9 " in row and "<= 0.5" in row and "+80.0 %" in row and "test_agents_replay.py:" in row
    assert "trace replay: t at x1" in text                      # then the replay's table


def test_every_replay_needs_every_request_answered_and_sent_on_time():
    text = failure(replayed(failed_requests=2, error_examples=["status 503"]))
    assert "failed_requests | 2 " in text and "status 503" in text and "(every request answered)" in text
    text = failure(replayed(send_lateness_p99_s=0.3))
    assert "send_lateness_p99_s | 0.3 " in text and "(settings.send_lateness_max_s)" in text
    # a bound of the same metric replaces the rule
    assert_replay(replayed(failed_requests=2), failed_requests={"max": 3})
    assert_replay(replayed(send_lateness_p99_s=0.3), send_lateness_p99_s={"max": 0.5})


def test_a_bad_bound_in_a_test_is_the_loaders_sentence():
    text = failure(replayed(), ttft_p99_s={"max": 1})
    assert text.startswith("assert_replay() at ") and "unknown key 'ttft_p99_s'; allowed metrics: failed_requests" in text


# ---------------------------------------------------------------------------- through the plugin

TRACE = "".join(json.dumps({"t_s": t, "input_tokens": 30, "output_tokens": n}) + "\n"
                for t, n in [(0.0, 4), (0.2, 6), (0.3, 3), (0.9, 5), (1.4, 2), (2.5, 4)])


@pytest.fixture(scope="module")
def truth():
    with TruthServer(ttft_ms=10, itl_ms=2) as ts:
        yield ts


def run_suite(pytester, url, agents: str, *extra):
    pytester.makefile(".jsonl", trace=TRACE)     # beside the thresholds file: a relative trace is read there
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{url}'}}\n")
    thresholds = pytester.makefile(".yaml", thresholds="schema: 1\nlanes:\n  truth:\n" + agents)
    return pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "truth", "--glmf-thresholds", str(thresholds),
                              "--glmf-results", str(pytester.path / "results"), "-v", "-s", "-p", "no:randomly",
                              *extra)


REPLAY = "    agents:\n      replay: {trace: trace.jsonl, seconds: 2, speedup: 2, send_lateness_p99_s: {max: 0.5}, "


def test_the_suite_replays_the_lanes_trace_window_and_records_it(pytester, truth):
    result = run_suite(pytester, truth.url, REPLAY + "output_tokens_exact_pct: {min: 100}, failed_requests: {max: 0}}\n",
                       SUITE)
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*trace replay of lane 'truth': */trace.jsonl [[]0, 2) s at x2",
                                 "requests * | 5", "failed_requests * | 0", "output_tokens_exact_pct * | 100.0"])
    doc = json.loads(max((pytester.path / "results").glob("truth-2*.json")).read_text())
    entry = doc["gates"]["agents"]["replay"]
    assert entry["requests"] == 5 and entry["valid"] and entry["wall_s"] == pytest.approx(0.7)


def test_a_missed_replay_bound_names_the_block(pytester, truth):
    result = run_suite(pytester, truth.url, REPLAY + "ttft_p50_s: {max: 0.000001}}\n", SUITE)
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(["*trace replay of lane 'truth': 1 threshold(s) missed",
                                 "ttft_p50_s | 0.0* | <= 1e-06 | * (thresholds.yaml: lanes.truth.agents.replay)"])


def test_a_lane_without_a_replay_block_skips_saying_so(pytester, truth):
    result = run_suite(pytester, truth.url, "    agents:\n      ttft_p95_s: {max: 5}\n      settings: {sessions: 1, "
                       "turns: 1, system_tokens: 5, user_tokens: 5, max_tokens: 2, think_time_s: 0}\n", "-rs", SUITE)
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*no trace replay (replay:) for lane 'truth' in thresholds.yaml: "
                                 "lanes.truth.agents.replay*"])


def test_a_users_own_test_replays_with_the_same_fixture(pytester, truth):
    pytester.makepyfile(test_mine="""
        from pytest_glmf.gates.agents import assert_replay

        def test_our_traffic(glmf_replay):
            result = glmf_replay("trace.jsonl", speedup=4, seconds=None)
            print(result.table())
            assert result.summary["requests"] == 6
            assert_replay(result, ttft_p95_s={"max": 0.000001})
    """)
    result = run_suite(pytester, truth.url, "    agents: {}\n", "test_mine.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*trace replay of lane 'truth': 1 threshold(s) missed",
                                 "ttft_p95_s | * | <= 1e-06 | * (test_mine.py:7)"])


def test_the_daily_lanes_builtin_replay_holds_on_the_simulator(pytester):
    # the shipped thresholds' replay block, on the simulator's daily lane at time scale 0.1
    lanes = str(resources.files("pytest_glmf.examples").joinpath("sim-lanes.yaml"))
    result = pytester.runpytest("--glmf-lanes", lanes, "--glmf-lane", "daily", "--glmf-results",
                                str(pytester.path / "results"), "-p", "no:randomly", "-s", "-k", "replay", SUITE)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["trace replay of lane 'daily': azure_llm_conv_2023_5min.csv [[]0, 30) s at x1, "
                                 "simulator time scale 0.1: recipe units", "requests * | 59", "failed_requests * | 0"])


def test_the_warm_pass_replays_the_window_once_more_and_is_discarded(tmp_path, truth):
    from pytest_glmf.gates.agents import measure_replay

    trace = tmp_path / "trace.jsonl"
    trace.write_text(TRACE)
    before = len(truth.truth())
    lines: list[str] = []
    result = measure_replay(truth.url, trace, start_s=0.25, seconds=1.0, speedup=4, progress=lines.append)
    assert len(truth.truth()) - before == 2 * 2            # the window [0.25, 1.25) s holds 2 requests
    assert result.summary["requests"] == 2 and len(result.records) == 2
    assert lines[0] == "replay: warmup pass over the window (2 requests, discarded)"
    measure_replay(truth.url, trace, start_s=0.25, seconds=1.0, speedup=4, warmup=False)
    assert len(truth.truth()) - before == 2 * 2 + 2
