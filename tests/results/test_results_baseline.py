"""Result files, baselines and the failure ledger through the plugin (issue: results, provenance,
baselines and reports). The server is the known-truth SSE server, so "slower" is exact."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib import resources

import pytest

from pytest_glmf.results import ledger
from pytest_glmf.testing.truth_server import TruthServer

BOOT_LOG = """\
[2026-09-11 10:00:02 TP0] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=8, context_len=131072, available_gpu_mem=10.00 GB
[2026-09-11 10:00:03] The server is fired up and ready to roll!
"""
SUITE = str(resources.files("pytest_glmf.suites").joinpath("test_curve.py"))
THRESHOLDS = ("schema: 1\nlanes:\n  truth:\n    curve:\n      settings: {max_tokens: 40, runs: 2, lag_p99_max_s: 1.0, client_error_max_pct: 50}\n"
              "      baseline: {rel_pct: 10}\n      rows:\n        - {users: 1}\n        - {users: 2}\n")


def files(pytester: pytest.Pytester, url: str) -> list[str]:
    log = pytester.makefile(".log", boot=BOOT_LOG)
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{url}', boot_log: {log.name}}}\n")
    thresholds = pytester.makefile(".yaml", thresholds=THRESHOLDS)
    return ["--glmf-lanes", str(lanes), "--glmf-lane", "truth", "--glmf-thresholds", str(thresholds),
            "--glmf-results", str(pytester.path / "results"), "-p", "no:cacheprovider"]


def session(pytester: pytest.Pytester, itl_ms: float, *extra: str) -> pytest.RunResult:
    # TTFT 50 ms: a 10 ms stall of a loaded CI box in one of two runs stays inside the spread-aware
    # tolerance (with 5 ms it doubled the TTFT and the same config was called a regression)
    with TruthServer(ttft_ms=50, itl_ms=itl_ms, seats=8) as ts:
        return pytester.runpytest_subprocess(*files(pytester, ts.url), *extra, SUITE)


def test_bless_then_same_config_passes_and_slower_config_fails_with_the_regression_table(pytester):
    base = pytester.path / "batch-baseline.json"
    first = session(pytester, 4.0, "--glmf-baseline", str(base), "--glmf-update-baseline")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["*glmf: first baseline blessed: *batch-baseline.json*"])
    doc = json.loads(base.read_text())
    assert doc["schema"] == 1 and doc["incomplete"] == [] and set(doc["gates"]["curve"]) == {"users=1", "users=2"}
    assert doc["provenance"]["plugin_version"] and doc["provenance"]["lane"] == "truth"

    same = session(pytester, 4.0, "--glmf-baseline", str(base))
    same.assert_outcomes(passed=2)                       # run-to-run noise is inside the tolerance/spread

    slower = session(pytester, 8.0, "--glmf-baseline", str(base))   # half the decode speed
    slower.assert_outcomes(failed=2)
    slower.stdout.fnmatch_lines([
        "*regression(s) against the baseline (baseline: *batch-baseline.json)*",
        "*metric * | baseline | now * | change * | allowed*",
        "*curve.per_user_tok_s [[]users=1[]] * | 2* | 12* | -* (-??.? %)* | drop <= * (10.0 %)*",
    ])
    # JUnit carries the numbers, and the failure ledger names the test and its cause
    lines = ledger.read(pytester.path / "results")
    assert len(lines) == 2 and "test_curve_row[users=1]" in lines[0] and "regression" in lines[0]


def test_update_baseline_refuses_a_failing_session(pytester):
    base = pytester.path / "b.json"
    thresholds = THRESHOLDS.replace("{users: 1}", "{users: 1, per_user_tok_s: {min: 1000000}}")
    with TruthServer(ttft_ms=5, itl_ms=4, seats=8) as ts:
        args = files(pytester, ts.url)
        pytester.makefile(".yaml", thresholds=thresholds)
        result = pytester.runpytest_subprocess(*args, "--glmf-baseline", str(base), "--glmf-update-baseline", SUITE)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*glmf: baseline NOT updated: the session did not pass (exit 1)*"])
    assert not base.exists()


def test_end_of_session_tables_and_junit_properties(pytester):
    junit = pytester.path / "junit.xml"
    result = session(pytester, 4.0, f"--junitxml={junit}", "-o", "junit_family=xunit1")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*= glmf results =*", "pytest-glmf results: lane truth*", "Concurrency curve",
                                 "users | seats | aggregate | per_user | per_user | ttft  | ttft *",
                                 "      |       | tok_s     | tok_s    | tok_s_p5 | p50_s | p95_s *",
                                 "glmf: results written to *"])
    xml = junit.read_text()
    assert 'name="glmf.curve.users=2.per_user_tok_s"' in xml and 'name="glmf.curve.users=1.ttft_p95_s"' in xml


def test_a_killed_session_leaves_an_incomplete_result_file_and_a_ledger_line(pytester):
    with TruthServer(ttft_ms=5, itl_ms=4, seats=8) as ts:
        args = files(pytester, ts.url)
        thresholds = THRESHOLDS.replace("- {users: 2}", "- {users: 2}\n        - {users: 3}\n        - {users: 4}")
        pytester.makefile(".yaml", thresholds=thresholds)
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *args, SUITE], cwd=pytester.path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        results = pytester.path / "results"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(results.glob("truth-2*.json")):
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)   # no handler runs: only the checkpoint is left
        proc.wait()
        (path,) = list(results.glob("truth-2*.json"))
        killed = json.loads(path.read_text())
        assert killed["incomplete"][0].startswith("the session had not finished")
        assert "users=1" in killed["gates"]["curve"]
        # the next session finishes the killed one's file and writes the ledger line
        again = pytester.runpytest_subprocess(*args, "-k", "users=1", SUITE)
    again.stdout.fnmatch_lines(["*glmf: an earlier session was killed; its partial results: *truth-2*.json"])
    recovered = json.loads(path.read_text())
    assert recovered["incomplete"] == [f"the session's process (pid {proc.pid}) died without a clean stop (killed)"]
    assert recovered["gates"]["curve"]["users=1"]["users"] == 1
    (line,) = [ln for ln in ledger.read(results) if "| killed |" in ln]
    assert "lane truth" in line and "| killed | interrupted |" in line and "was killed before it ended" in line


def test_a_clean_session_that_recorded_nothing_is_not_taken_for_a_killed_one(pytester):
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  tiny: {launcher: attach, url: 'http://127.0.0.1:9'}\n")
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    args = ["--glmf-lanes", str(lanes), "--glmf-lane", "tiny", "--glmf-results", str(pytester.path / "r"),
            "-p", "no:cacheprovider", "test_nothing.py"]
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    again = pytester.runpytest_subprocess(*args)
    again.assert_outcomes(passed=1)
    assert "was killed" not in again.stdout.str()
    assert ledger.read(pytester.path / "r") == [] and not list((pytester.path / "r").glob("*.json"))


def test_update_baseline_makes_the_folders_of_a_baseline_path_that_does_not_exist(pytester):
    base = pytester.path / "baselines" / "nightly" / "truth.json"
    result = session(pytester, 4.0, "--glmf-baseline", str(base), "--glmf-update-baseline")
    result.assert_outcomes(passed=2)
    assert result.ret == 0 and "Traceback" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*= glmf results =*", "Concurrency curve", f"glmf: first baseline blessed: {base} (from *"])
    assert set(json.loads(base.read_text())["gates"]["curve"]) == {"users=1", "users=2"}


def test_a_first_baseline_says_it_was_compared_with_nothing(pytester):
    """Issue 40: no baseline file yet: the run is blessed, not compared with itself ("0 regression(s)
    in 4 compared metrics" and `compared_with` naming the new file were a comparison that never happened)."""
    base = pytester.path / "nodir" / "sub" / "base.json"
    result = session(pytester, 4.0, "--glmf-baseline", str(base), "--glmf-update-baseline")
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    assert "Against the baseline" not in result.stdout.str()
    result.stdout.fnmatch_lines([f"glmf: first baseline blessed: {base} (from *truth-*.json); this run was "
                                 "compared with nothing (no baseline existed)"])
    doc = json.loads(base.read_text())
    assert "compared_with" not in doc and set(doc["gates"]["curve"]) == {"users=1", "users=2"}

    again = session(pytester, 4.0, "--glmf-baseline", str(base), "--glmf-update-baseline")   # now a comparison
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["Against the baseline: 0 regression(s) in * compared metrics",
                                f"glmf: baseline updated: {base} (from *"])
    assert json.loads(base.read_text())["compared_with"] == {"label": str(base)}


OWN_BOOT_TEST = """\
from pytest_glmf.gates.boot import assert_boot


def test_my_seats(glmf_boot_facts, glmf_lane):
    assert_boot(glmf_boot_facts, lane=glmf_lane, max_running_requests={"min": 4})
"""


def test_a_users_own_gate_test_has_results_to_bless(pytester):
    """Issue 40: a user's own test that calls a gate helper verified something: its session is
    blessed, not refused with "the session recorded no results"."""
    pytester.makepyfile(test_mine=OWN_BOOT_TEST)
    base = pytester.path / "b.json"
    with TruthServer(ttft_ms=5, itl_ms=4, seats=8) as ts:
        result = pytester.runpytest_subprocess(*files(pytester, ts.url), "--glmf-baseline", str(base),
                                               "--glmf-update-baseline", "test_mine.py")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"glmf: first baseline blessed: {base} (from *",
                                 "glmf: verified: own tests (1 check in 1 test)"])
    doc = json.loads(base.read_text())
    assert doc["gates"] == {} and doc["verified"]["own tests"]["checks"] == 1


def test_update_baseline_of_a_session_that_recorded_nothing_says_so_and_fails(pytester):
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  tiny: {launcher: attach, url: 'http://127.0.0.1:9'}\n")
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    base = pytester.path / "new" / "b.json"
    result = pytester.runpytest_subprocess(
        "--glmf-lanes", str(lanes), "--glmf-lane", "tiny", "--glmf-results", str(pytester.path / "r"),
        "--glmf-allow-unverified", "--glmf-baseline", str(base), "--glmf-update-baseline",
        "-p", "no:cacheprovider", "test_nothing.py")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"glmf: baseline NOT updated: the session recorded no results (no gate measured or "
                                 f"checked anything), so there is nothing to bless; {base} unchanged"])
    assert not base.exists()
