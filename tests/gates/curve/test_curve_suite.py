"""The ready-made curve suite through the plugin (pytester), attached to the known-truth server."""
from __future__ import annotations

import json
from importlib import resources

import pytest

from pytest_glmf.testing.truth_server import TruthServer

BOOT_LOG = """\
[2026-09-11 10:00:01] max_running_requests is capped to 2 by the mamba state cache (max_mamba_cache_size=10, 5 state slots per request)
[2026-09-11 10:00:02 TP0] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=2, context_len=131072, available_gpu_mem=10.00 GB
[2026-09-11 10:00:03] The server is fired up and ready to roll!
"""
SUITE = str(resources.files("pytest_glmf.suites").joinpath("test_curve.py"))


@pytest.fixture
def truth():
    with TruthServer(ttft_ms=10, itl_ms=2, seats=2) as ts:
        yield ts


def run_suite(pytester, url, rows, *extra):
    # the client self-check is relaxed: these tests are about seats, and a shared CI box stalls us
    log = pytester.makefile(".log", boot=BOOT_LOG)
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  seats2: {{launcher: attach, url: '{url}', boot_log: {log.name}}}\n")
    thresholds = pytester.makefile(".yaml", thresholds=(
        "schema: 1\nlanes:\n  seats2:\n    curve:\n      settings: {max_tokens: 24, runs: 2, lag_p99_max_s: 1.0, client_error_max_pct: 1.0e+9}\n      rows:\n" + rows))
    return pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "seats2", "--glmf-thresholds",
                              str(thresholds), "--glmf-results", str(pytester.path / "results"), "-v", *extra, SUITE)


def test_rows_within_seats_pass_and_beyond_fail_with_the_cap(pytester, truth, unfold):
    result = run_suite(pytester, truth.url, "        - {users: 2, per_user_tok_s: {min: 100}}\n"
                                            "        - {users: 4, per_user_tok_s: {min: 100}}\n")
    result.assert_outcomes(passed=1, failed=1)
    # the cap's note and the row's flags are too long for 120 columns: under their tables
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([
        "*test_curve_row?users=2? PASSED*",
        "*curve of lane 'seats2' @ 4 users: * threshold(s) missed*",
        "seats @ 4 users | 2        | >= 4     | note 1",
        "note 1: -50.0 %; max_running_requests capped to 2 by the mamba state cache *: increase "
        "--mamba-full-memory-ratio or --max-mamba-cache-size*",
        "the row:",
        "4     | * | 2 (shared) | note 1",
        "note 1: 4 clients sharing 2 seats*",
    ])
    result.stdout.fnmatch_lines(["*glmf concurrency curve (measured):*", "*users | aggregate tok/s*",
                                 "*aggregate * at the last row*"])
    doc = json.loads(next((pytester.path / "results").rglob("*.json")).read_text())
    rows = doc["gates"]["curve"]
    assert {"users=2", "users=4"} <= set(rows) and rows["users=4"]["seats"] == 2


def test_allow_queueing_accepts_the_shared_seats_and_bounds_still_gate(pytester, truth, unfold):
    result = run_suite(pytester, truth.url,
                       "        - {users: 4, allow_queueing: true, per_user_tok_s: {min: 100}}\n"
                       "        - {users: 3, allow_queueing: true, ttft_p95_s: {max: 0.001}}\n")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["ttft_p95_s @ 3 users | * | <= 0.001 | note 1"])
    assert "thresholds.yaml: lanes.seats2.curve[3])" in unfold(result.stdout.str())
    assert "seats @" not in result.stdout.str()
