"""The ready-made agents suite through the plugin (pytester), attached to the known-truth server:
the per-turn table, the result file entry a baseline compares, a missed bound with its source, a
cache bound on a server that reports no cached tokens, a lane without a section."""
from __future__ import annotations

import json
from importlib import resources

import pytest

from pytest_glmf.testing.truth_server import TruthServer

SUITE = str(resources.files("pytest_glmf.suites").joinpath("test_agents.py"))
SETTINGS = ("      settings: {sessions: 3, turns: 3, system_tokens: 40, user_tokens: 10, max_tokens: 6, "
            "think_time_s: 0.05}\n")


@pytest.fixture(scope="module")
def truth():
    with TruthServer(ttft_ms=20, itl_ms=2, cache_report=True) as ts:
        yield ts


def run_suite(pytester, url, section: str, *extra):
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{url}'}}\n")
    thresholds = pytester.makefile(".yaml", thresholds="schema: 1\nlanes:\n  truth:\n" + section)
    return pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "truth", "--glmf-thresholds", str(thresholds),
                              "--glmf-results", str(pytester.path / "results"), "-v", "-s", "-p", "no:randomly",
                              *extra, SUITE)


def result_doc(pytester) -> dict:
    return json.loads(max((pytester.path / "results").glob("truth-2*.json")).read_text())


def test_agents_meet_their_bounds_and_are_recorded(pytester, truth):
    result = run_suite(pytester, truth.url, "    agents:\n" + SETTINGS
                       + "      ttft_p95_s: {max: 1.0}\n      returning_cache_hit_pct: {min: 50}\n"
                       + "      sessions_completed_pct: {min: 100}\n")
    result.assert_outcomes(passed=1, skipped=2)      # no slo: no capacity search; no replay
    result.stdout.fnmatch_lines(["*agents of lane 'truth'",
                                 "turn | turns | TTFT p50 s | TTFT p95 s | prompt tok p50 | cached tok p50 | cache hit *",
                                 "1    | 3     | *| 0 * | 0.0 % *",
                                 "all  | 9 *",
                                 "sessions: 3/3 completed (100.0 %), 9 turns answered*"])
    entry = result_doc(pytester)["gates"]["agents"]["agents"]
    assert entry["valid"] and entry["turns_completed"] == 9 and entry["sessions_completed_pct"] == 100.0
    assert 50 < entry["returning_cache_hit_pct"] < 100
    assert len(entry["turn_records"]) == 9 and len(entry["per_turn"]) == 3


def test_a_missed_bound_names_the_thresholds_section(pytester, truth):
    result = run_suite(pytester, truth.url, "    agents:\n" + SETTINGS + "      ttft_p95_s: {max: 0.001}\n")
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(["*agents of lane 'truth': 1 threshold(s) missed",
                                 "ttft_p95_s | 0.0* | <= 0.001 | * (thresholds.yaml: lanes.truth.agents)"])


def test_a_slower_turn_than_the_baseline_is_a_regression(pytester, truth):
    base = pytester.path / "base.json"
    base.write_text(json.dumps({"schema": 1, "gates": {"agents": {"agents": {
        "ttft_p95_s": 0.005, "spread_by_metric_pct": {"ttft_p95_s": 5.0}}}}}))
    result = run_suite(pytester, truth.url, "    agents:\n" + SETTINGS + "      ttft_p95_s: {max: 1.0}\n",
                       "--glmf-baseline", str(base))
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(["*1 regression(s) against the baseline*", "agents.ttft_p95_s ?agents? | 0.005 *"])


def test_a_cache_bound_on_a_server_without_cache_reports_names_the_flag(pytester):
    with TruthServer(ttft_ms=20, itl_ms=2) as plain:
        result = run_suite(pytester, plain.url, "    agents:\n" + SETTINGS + "      returning_cache_hit_pct: {min: 50}\n")
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(["*agents of lane 'truth': the server reports no cached tokens (SGLang: "
                                 "--enable-cache-report; vLLM: --enable-prompt-tokens-details); the cache-hit "
                                 "bound in thresholds.yaml: lanes.truth.agents cannot be judged"])


def test_a_lane_without_an_agents_section_skips(pytester, truth):
    result = run_suite(pytester, truth.url, "    curve: {}\n", "-rs")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*no agents section for lane 'truth' in thresholds.yaml: lanes.truth.agents*"])


def test_an_unknown_setting_is_refused_before_anything_runs(pytester, truth):
    result = run_suite(pytester, truth.url, "    agents:\n      settings: {session: 3}\n")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*lanes.truth.agents.settings*unknown*'session'*"])


@pytest.fixture(scope="module")
def seats4():
    with TruthServer(ttft_ms=20, itl_ms=5, seats=4, cache_report=True) as ts:
        yield ts


CAPACITY = ("    agents:\n      settings: {sessions: 2, turns: 2, system_tokens: 10, user_tokens: 5, max_tokens: 20, "
            "think_time_s: 0.0, max_sessions: 16}\n      slo: {ttft_s: 0.07, ttft_pct: 95}\n")


def test_the_capacity_of_agents_is_gated_and_recorded(pytester, seats4):
    result = run_suite(pytester, seats4.url, CAPACITY + "      capacity_sessions: {min: 4}\n")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*agents capacity at 2 turns per session: 4 sessions (TTFT p95 <= 0.07 s, "
                                 "queueing allowed; stopped by slo)*"])
    entry = result_doc(pytester)["gates"]["agents"]["capacity"]
    assert entry["capacity_sessions"] == 4 and entry["search"]["stopped_by"] == "slo"


def test_a_capacity_below_its_bound_fails_with_the_probes(pytester, seats4):
    result = run_suite(pytester, seats4.url, CAPACITY + "      capacity_sessions: {min: 5}\n")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*agents capacity of lane 'truth': 1 threshold(s) missed",
                                 "capacity_sessions @ 2 turns | 4 * | >= 5 * (thresholds.yaml: lanes.truth.agents)",
                                 "*5 * | fail | *turn TTFT p95*"])
