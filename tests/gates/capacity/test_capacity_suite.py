"""The ready-made capacity suite through the plugin (pytester), attached to the known-truth server:
the verdict table, the evidence, the result file entry a baseline compares, and a regression."""
from __future__ import annotations

import json
import multiprocessing.heap  # noqa: F401
import multiprocessing.sharedctypes  # noqa: F401
from importlib import resources

import pytest

from pytest_glmf.testing.truth_server import TruthServer

# The client's worker processes share memory through multiprocessing.heap. Imported here, before any
# in-process pytester run: a run that imported it first would drop it from sys.modules at its end,
# and the next run's pool could not pickle the old module's buffers ("not the same object").
SUITE = str(resources.files("pytest_glmf.suites").joinpath("test_capacity.py"))


def boot_log(seats: int) -> str:
    return (f"[2026-09-11 10:00:01] max_running_requests is capped to {seats} by the mamba state cache "
            f"(max_mamba_cache_size={seats * 5}, 5 state slots per request)\n"
            f"[2026-09-11 10:00:02 TP0] max_total_num_tokens=10000000, chunked_prefill_size=8192, "
            f"max_prefill_tokens=16384, max_running_requests={seats}, context_len=131072, available_gpu_mem=10.00 GB\n"
            "[2026-09-11 10:00:03] The server is fired up and ready to roll!\n")


@pytest.fixture(scope="module")
def truth():
    # per-user speed 1000 / (20 + 8 (running - 1)) tok/s: 19.23 at 5 users, 16.67 at 6 (7 % either side
    # of 17.9: a busy machine's late sends do not move the answer; test_capacity_truth.py)
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=8) as ts:
        yield ts


def run_suite(pytester, url, section: str, *extra, seats: int = 64):
    log = pytester.makefile(".log", boot=boot_log(seats))
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{url}', boot_log: {log.name}}}\n")
    thresholds = pytester.makefile(".yaml", thresholds=(
        "schema: 1\nlanes:\n  truth:\n    capacity:\n"
        "      slo: {per_user_tok_s: 17.9, ttft_s: 1.0}\n"
        "      settings: {prompt_tokens: null, max_tokens: 40, runs: 2, resolution_users: 1, start_users: 5,\n"
        "                 lag_p99_max_s: 0.02}\n"
        + section))
    return pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "truth", "--glmf-thresholds", str(thresholds),
                              "--glmf-results", str(pytester.path / "results"), "-v", "-p", "no:randomly", *extra, SUITE)


def result_doc(pytester) -> dict:
    return json.loads(max((pytester.path / "results").glob("truth-2*.json")).read_text())


def test_capacity_meets_its_bound_and_is_recorded(pytester, truth, unfold):
    result = run_suite(pytester, truth.url, "      users: {min: 4}\n")
    result.assert_outcomes(passed=1, skipped=2)     # no frontier contexts, no rate bound
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([   # progress folds at 120
        "*capacity at >= 17.9 tok/s for 95 % of users, TTFT p95 <= 1 s, no queueing past the seats and KV pool "
        "(the prompt file's prompt + 40 output tokens): 5 users (the last probe that passed: the service level held "
        "at 5, 6 missed per-user tok/s: 0 % of users >= 17.9 (p5 16.*), needs 95 %; resolution 1); the boundary (a "
        "fit of the probes' margins) at 5.*, 95 % CI 5.*-*; 2 probe(s) (1 chosen by the model), 22 requests, * s",
        "*users | verdict * | p5 tok/s | users   | per-user | TTFT  | TTFT  | aggregate | missed",   # fits 120 columns
        "*      | * |          | >= 17.9 | tok/s    | p95 s | p50 s | tok/s     | / flags",
        "*5 * | pass (last pass) *| 100 % *",
        "*6 * | FAIL (first fail) *| 0 % *| note 1",
        "*note 1: per-user tok/s: 0 % of users >= 17.9*",
        "*users | spread | margin | runs | requests | wall s",
        "*test_capacity PASSED*",
    ])
    entry = result_doc(pytester)["gates"]["capacity"]["users@file+40"]
    assert entry["users"] == 5 and entry["stopped_by"] == "slo"
    # the spread: the boundary interval's width (0 here), at least the resolution (1 user); the
    # interval is the boundary's, named as such, and holds the answer
    low, high = entry["boundary_ci95"]
    assert 5 <= low <= entry["boundary_users"] <= high <= 6 and "ci95" not in entry
    assert entry["spread_by_metric_pct"]["users"] == pytest.approx(100 * max(1, high - low) / 5)
    assert [p["x"] for p in entry["search"]["probes"]] == [5, 6]   # a good start: two probes
    assert entry["cost"]["probes"] == 2 and entry["cost"]["requests"] == entry["requests"] == 2 * 5 + 2 * 6


def test_a_capacity_under_its_bound_fails_with_the_table_and_the_evidence(pytester, truth, unfold):
    result = run_suite(pytester, truth.url, "      users: {min: 8}\n")
    result.assert_outcomes(failed=1, skipped=2)
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([
        "*capacity of lane 'truth': 1 threshold(s) missed",
        "metric * | measured | expected | note",
        "*-+-*",
        "users @ the prompt file's prompt + 40 output tokens | 5 * | >= 8 * | note 1",    # the note under the table
        "note 1: -37.5 %; at 6 users: per-user tok/s: "
        "0 % of users >= 17.9 (p5 16.*), needs 95 %; (thresholds.yaml: lanes.truth.capacity)",
    ], consecutive=True)


def test_the_seats_stop_the_search_and_the_failure_names_the_flag(pytester, truth, unfold):
    result = run_suite(pytester, truth.url, "      users: {min: 4}\n", seats=3)
    result.assert_outcomes(failed=1, skipped=2)
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([
        "*; at most 3 users (3 seats (max_running_requests)); first probe 3",    # not the 5 asked for
        "users @ * | 3 * | >= 4 * | note 1",
        "note 1: -25.0 %; stopped by the seats: 3 seats (max_running_requests): "
        "max_running_requests capped to 3 by the mamba state cache (max_mamba_cache_size=15, 5 state slots per "
        "request): increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
        "--mamba-ssm-dtype bfloat16; (thresholds.yaml: lanes.truth.capacity)",
    ])


def test_a_lower_capacity_than_the_baseline_is_a_regression(pytester, truth):
    base = pytester.path / "base.json"
    base.write_text(json.dumps({"schema": 1, "gates": {"capacity": {"users@file+40": {
        "users": 8, "spread_by_metric_pct": {"users": 12.5}}}}}))
    result = run_suite(pytester, truth.url, "      users: {min: 4}\n", "--glmf-baseline", str(base))
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines(["*1 regression(s) against the baseline*",
                                 "capacity.users ?users@file+40? | 8 * | 5 * | -3 (-37.5 %) | drop <= 1.6 (20.0 %)"])


def test_no_service_level_skips_with_the_reason(pytester, truth):
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{truth.url}'}}\n")
    thresholds = pytester.makefile(".yaml", thresholds="schema: 1\nlanes:\n  truth:\n    capacity: {users: {min: 1}}\n")
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "truth", "--glmf-thresholds",
                                str(thresholds), "-rs", SUITE)
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*no capacity service level (slo) for lane 'truth' in thresholds.yaml: "
                                 "lanes.truth.capacity*"])


STARVED = """
import pytest

import pytest_glmf.gates.capacity.measure as measure

real = measure.run_row


async def starved(target, users, workload, settings, *args, **kwargs):
    # a client that cannot keep up with fewer than KEEPS_UP processes: its self-check marks every run
    row = await real(target, users, workload, settings, *args, **kwargs)
    if (settings.workers or 1) < KEEPS_UP:
        row["client_bound"], row["valid"] = True, False
    return row


@pytest.fixture(autouse=True, scope="session")
def _starve():
    mp = pytest.MonkeyPatch()
    mp.setattr(measure, "run_row", starved)
    yield
    mp.undo()
"""


def starve(pytester, keeps_up: int) -> None:
    """A plugin (the suite's file lies outside the test directory, out of a conftest's reach)."""
    pytester.makepyfile(starved_client=STARVED.replace("KEEPS_UP", str(keeps_up)))
    pytester.syspathinsert()


def test_a_client_bound_probe_is_measured_again_with_more_client_processes(pytester, truth):
    """Issue 31: a probe the client could not measure is not a miss. With two client processes the
    client keeps up here: the answer is the truth's, each probe measured again once, and the
    processes it took are kept for the next probe."""
    from pytest_glmf.load import available_cores

    if available_cores() < 2:
        pytest.skip("needs 2 cores for a second client process")
    starve(pytester, keeps_up=2)
    result = run_suite(pytester, truth.url, "      users: {min: 4}\n", "-p", "starved_client")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*capacity users=5: client-bound with 1 client process(es): measured again with 2",
                                 "*capacity users=5: meets the service level*",
                                 "*capacity users=6: misses per-user tok/s*"])
    assert "users=6: client-bound" not in result.stdout.str()      # 6 started with 2 processes
    entry = result_doc(pytester)["gates"]["capacity"]["users@file+40"]
    assert entry["users"] == 5 and entry["undecided"] == ""
    assert [p["workers"] for p in entry["search"]["probes"]] == [2, 2]


def test_a_capacity_the_client_cannot_measure_is_undecided_and_fails_naming_why(pytester, truth, unfold):
    """Issue 31: "none: even 1 users missed the service level" from probes the client could not
    measure, and a suite that passed without an answer. Now: measured again with as many client
    processes as the cores allow, then undecided, and the test fails saying why, bounds or not."""
    from pytest_glmf.load import available_cores

    starve(pytester, keeps_up=10_000)
    result = run_suite(pytester, truth.url, "", "-p", "starved_client")   # no users bound: no pass without an answer
    result.assert_outcomes(failed=1, skipped=2)
    most = available_cores()
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([
        "*capacity at >= 17.9 tok/s for 95 % of users, TTFT p95 <= 1 s, no queueing past the seats and KV pool (the "
        "prompt file's prompt + 40 output tokens): undecided: at 5 the numbers are not the server's with "
        f"{most} client process(es) (client self-check: client-bound run(s): the numbers are the client's, not the "
        "server's, needs a client that keeps up (fewer users per client process, a quieter machine)); "
        f"{most} client process(es) is as many as this machine's {most} core(s) allow: measure from a machine with "
        "more cores or less other load (capacity settings.workers, glmf capacity --workers); 1 probe(s), *",
        "*5 * | UNMEASURED *",
        "*capacity of lane 'truth': no capacity: undecided: at 5 the numbers are not the server's with "
        f"{most} client process(es) (client self-check: *) (thresholds.yaml: lanes.truth.capacity)",
    ])
    entry = result_doc(pytester)["gates"]["capacity"]["users@file+40"]
    assert entry["users"] is None and entry["stopped_by"] == "undecided"
    assert entry["undecided"].startswith(f"at 5 the numbers are not the server's with {most} client process(es)")


def test_a_users_own_capacity_test_imports_the_public_api_runs_alone_and_is_recorded(pytester, truth):
    """Issue 34: `from pytest_glmf.gates.capacity import ...` as documented; a test using
    glmf_capacity is serial (no other worker's traffic beside it); its result is in the result file."""
    log = pytester.makefile(".log", boot=boot_log(64))
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{truth.url}', "
                                             f"boot_log: {log.name}}}\n")
    mine = pytester.makepyfile(test_mine="""
        from pytest_glmf.gates.capacity import SLO, CapacityResult, assert_capacity, measure_capacity

        def test_chat_capacity(glmf_capacity, request):
            assert request.node.get_closest_marker("glmf_serial") is not None
            result = glmf_capacity.measure(SLO(per_user_tok_s=17.9), key="mine", prompt_tokens=None, max_tokens=40,
                                           runs=1, resolution_users=1, start_users=5)
            assert isinstance(result, CapacityResult) and callable(measure_capacity)
            assert_capacity(result, users={"min": 4})
    """)
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "truth",
                                "--glmf-results", str(pytester.path / "results"), "-p", "no:randomly", str(mine))
    result.assert_outcomes(passed=1)
    entry = result_doc(pytester)["gates"]["capacity"]["mine"]
    assert entry["users"] == 5 and entry["stopped_by"] == "slo" and 5 <= entry["boundary_ci95"][0] <= 6
