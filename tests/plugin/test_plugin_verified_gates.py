"""The session's last lines say which gates verified something and which did not, and why; the
result file says the same; `--glmf-require GATE[,GATE]` (ini `glmf_require`) fails a session in
which a named gate verified nothing (issue 33, item 3: "drop -k" passed with 23 of 27 skipped)."""
from __future__ import annotations

import json

import pytest

from pytest_glmf.testing.truth_server import TruthServer

TESTS = """
import pytest
from pytest_glmf.gates.verdict import Check, assert_checks

@pytest.mark.glmf_gate("curve")
def test_curve_row(glmf_server, glmf_results):
    glmf_results.record("curve", "users=1", {"users": 1, "per_user_tok_s": 50.0})
    assert_checks([Check("per_user_tok_s", 50, {"min": 45}), Check("ttft_p95_s", 0.5, {"max": 1})])

@pytest.mark.glmf_gate("curve")
def test_curve_unbounded(glmf_server):
    pytest.skip("no curve row at 96 users")

@pytest.mark.glmf_gate("drift")
@pytest.mark.parametrize("prompt", [1, 2])
def test_drift(glmf_server, prompt):
    pytest.skip("no oracle lane for lane 'batch'")

@pytest.mark.glmf_gate("boot")
def test_boot_plain(glmf_server):
    assert glmf_server.base_url
"""


@pytest.fixture(scope="module")
def truth():
    with TruthServer(ttft_ms=5, itl_ms=2) as ts:
        yield ts


def run(pytester: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_mine=TESTS)
    thresholds = pytester.makefile(".yaml", th="lanes:\n  batch: {}\n")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--glmf-url", url,
                                         "--glmf-lane", "batch", "--glmf-thresholds", str(thresholds),
                                         "--glmf-results", str(pytester.path / "r"), *args, "test_mine.py")


def test_the_last_lines_and_the_result_file_say_which_gates_verified_something_and_why_not(pytester, truth):
    result = run(pytester, truth.url)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=2, skipped=3)
    result.stdout.fnmatch_lines([
        "glmf: verified: curve (2 checks in 1 of 2 tests)",   # a skipped test verified nothing
        "glmf: NOT verified: boot: 1 passed, no check evaluated",
        "glmf: NOT verified: drift: 2 skipped: no oracle lane for lane 'batch'",
        "*= 2 passed, 3 skipped in *",
    ])
    (path,) = (pytester.path / "r").glob("batch-2*.json")
    verified = json.loads(path.read_text())["verified"]
    assert verified == {
        "boot": {"checks": 0, "tests": {"passed": 1}, "why_not": "1 passed, no check evaluated"},
        "curve": {"checks": 2, "tests": {"passed": 1, "skipped": 1}, "why_not": None},
        "drift": {"checks": 0, "tests": {"skipped": 2}, "why_not": "2 skipped: no oracle lane for lane 'batch'"},
    }


@pytest.mark.parametrize("how", ["option", "ini"])
def test_require_fails_a_session_in_which_a_named_gate_verified_nothing(pytester, truth, how):
    if how == "ini":
        pytester.makeini("[pytest]\nglmf_require = curve, drift\n")
    args = ["--glmf-require", "curve,drift"] if how == "option" else []
    result = run(pytester, truth.url, *args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2, skipped=3)
    result.stdout.fnmatch_lines(["glmf: --glmf-require curve,drift: a required gate verified nothing: lane 'batch': "
                                 "drift (2 skipped: no oracle lane for lane 'batch')"])


def test_require_of_gates_that_verified_something_passes_and_a_deselected_one_fails(pytester, truth):
    assert run(pytester, truth.url, "--glmf-require", "curve").ret == pytest.ExitCode.OK
    result = run(pytester, truth.url, "--glmf-require", "curve,tools")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*a required gate verified nothing: lane 'batch': tools (no test of it ran: "
                                 "deselected or not collected)"])


@pytest.mark.parametrize(("args", "ini", "line"), [
    (["--glmf-require", "curve,speed"], None, "ERROR: --glmf-require: unknown gate 'speed'; allowed: boot, curve, "
                                              "drift, acceptance, tools, capacity, template, agents (comma-separated, "
                                              "e.g. --glmf-require boot,curve)"),
    (["--glmf-require", ""], None, "ERROR: --glmf-require: unknown gate nothing; allowed: *"),
    ([], "glmf_require = cruve", "ERROR: ini glmf_require: unknown gate 'cruve'; allowed: boot, *"
                                 "(comma-separated, e.g. glmf_require = boot,curve)"),
])
def test_require_names_only_known_gates(pytester, truth, args, ini, line):
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    result = run(pytester, truth.url, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line])


def test_require_names_only_known_gates_also_without_a_lane(pytester):
    result = pytester.runpytest("-p", "no:cacheprovider", "--glmf-require", "boot,spede")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --glmf-require: unknown gate 'spede'; allowed: boot, curve, *"])
