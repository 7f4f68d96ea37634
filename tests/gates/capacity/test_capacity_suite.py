"""The ready-made capacity suite through the plugin (pytester), attached to the known-truth server:
the verdict table, the evidence, the result file entry a baseline compares, and a regression."""
from __future__ import annotations

import json
from importlib import resources

import pytest

from pytest_glmf.testing.truth_server import TruthServer

SUITE = str(resources.files("pytest_glmf.suites").joinpath("test_capacity.py"))


def boot_log(seats: int) -> str:
    return (f"[2026-09-11 10:00:01] max_running_requests is capped to {seats} by the mamba state cache "
            f"(max_mamba_cache_size={seats * 5}, 5 state slots per request)\n"
            f"[2026-09-11 10:00:02 TP0] max_total_num_tokens=10000000, chunked_prefill_size=8192, "
            f"max_prefill_tokens=16384, max_running_requests={seats}, context_len=131072, available_gpu_mem=10.00 GB\n"
            "[2026-09-11 10:00:03] The server is fired up and ready to roll!\n")


@pytest.fixture(scope="module")
def truth():
    # per-user speed 1000 / (20 + 0.8 (running - 1)) tok/s: 27.17 at 22 users, 26.60 at 23
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=0.8) as ts:
        yield ts


def run_suite(pytester, url, section: str, *extra, seats: int = 64):
    log = pytester.makefile(".log", boot=boot_log(seats))
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{url}', boot_log: {log.name}}}\n")
    thresholds = pytester.makefile(".yaml", thresholds=(
        "schema: 1\nlanes:\n  truth:\n    capacity:\n"
        "      slo: {per_user_tok_s: 26.88, ttft_s: 1.0}\n"
        "      settings: {prompt_tokens: null, max_tokens: 60, runs: 2, resolution_users: 1, start_users: 22}\n"
        + section))
    return pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "truth", "--glmf-thresholds", str(thresholds),
                              "--glmf-results", str(pytester.path / "results"), "-v", "-p", "no:randomly", *extra, SUITE)


def result_doc(pytester) -> dict:
    return json.loads(max((pytester.path / "results").glob("truth-2*.json")).read_text())


def test_capacity_meets_its_bound_and_is_recorded(pytester, truth):
    result = run_suite(pytester, truth.url, "      users: {min: 20}\n")
    result.assert_outcomes(passed=1, skipped=2)     # no frontier contexts, no rate bound
    result.stdout.fnmatch_lines([
        "*capacity at >= 26.88 tok/s for 95 % of users, TTFT p95 <= 1 s, no queueing past the seats and KV pool "
        "(the prompt file's prompt + 60 output tokens): 22 users, 95 % CI 22-22 (the service level held at 22, 23 "
        "missed per-user tok/s: 0 % of users >= 26.88 (p5 26.*), needs 95 %; resolution 1); 2 probe(s) (1 chosen by "
        "the model), 90 requests, * s",
        "*users | verdict * | p5 tok/s | users >= 26.88 | per-user tok/s | TTFT p95 s | TTFT p50 s | aggregate tok/s*",
        "*22 * | pass (last pass) *| 100 % *",
        "*23 * | FAIL (first fail) *| 0 % *| per-user tok/s: 0 % of users >= 26.88*",
        "*test_capacity PASSED*",
    ])
    entry = result_doc(pytester)["gates"]["capacity"]["users@file+60"]
    assert entry["users"] == 22 and entry["stopped_by"] == "slo"
    # the spread: the 95 % interval's width (0 here), at least the resolution (1 user)
    assert entry["ci95"] == [22, 22] and entry["spread_by_metric_pct"]["users"] == pytest.approx(100 / 22)
    assert [p["x"] for p in entry["search"]["probes"]] == [22, 23]   # a good start: two probes
    assert entry["cost"]["probes"] == 2 and entry["cost"]["requests"] == entry["requests"] == 2 * 22 + 2 * 23


def test_a_capacity_under_its_bound_fails_with_the_table_and_the_evidence(pytester, truth):
    result = run_suite(pytester, truth.url, "      users: {min: 30}\n")
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines([
        "*capacity of lane 'truth': 1 threshold(s) missed",
        "metric * | measured | expected | note",
        "users @ the prompt file's prompt + 60 output tokens | 22 * | >= 30 * | -26.7 %; at 23 users: per-user tok/s: "
        "0 % of users >= 26.88 (p5 26.*), needs 95 %; (thresholds.yaml: lanes.truth.capacity)",
    ])


def test_the_seats_stop_the_search_and_the_failure_names_the_flag(pytester, truth):
    result = run_suite(pytester, truth.url, "      users: {min: 16}\n", seats=12)
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines([
        "users @ * | 12 * | >= 16 * | -25.0 %; stopped by the seats: 12 seats (max_running_requests): "
        "max_running_requests capped to 12 by the mamba state cache (max_mamba_cache_size=60, 5 state slots per "
        "request): increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
        "--mamba-ssm-dtype bfloat16; (thresholds.yaml: lanes.truth.capacity)",
    ])


def test_a_lower_capacity_than_the_baseline_is_a_regression(pytester, truth):
    base = pytester.path / "base.json"
    base.write_text(json.dumps({"schema": 1, "gates": {"capacity": {"users@file+60": {
        "users": 30, "spread_by_metric_pct": {"users": 3.3}}}}}))
    result = run_suite(pytester, truth.url, "      users: {min: 20}\n", "--glmf-baseline", str(base))
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(["*1 regression(s) against the baseline*",
                                 "capacity.users ?users@file+60? | 30.0 *| 22.0 *| -8 (-26.7 %) | drop <= 1.5 (5.0 %)"])


def test_no_service_level_skips_with_the_reason(pytester, truth):
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{truth.url}'}}\n")
    thresholds = pytester.makefile(".yaml", thresholds="schema: 1\nlanes:\n  truth:\n    capacity: {users: {min: 1}}\n")
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "truth", "--glmf-thresholds",
                                str(thresholds), "-rs", SUITE)
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*no capacity service level (slo) for lane 'truth' in thresholds.yaml: "
                                 "lanes.truth.capacity*"])
