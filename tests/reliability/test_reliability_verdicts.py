"""Reliability matrix, quiet greens: a session that verified nothing does not pass, a lane with no
thresholds is refused before anything starts, and a misspelt lane in `glmf_lanes` is an error; each
with its one line pinned, and the opt-out (`--glmf-allow-unverified`, ini `glmf_allow_unverified`)
that lets such a session pass when the user means it. "A check ran" is the assertion helpers'
count, carried with each test's report (also from xdist workers), not a guess from outcomes."""
from __future__ import annotations

import pytest

from pytest_glmf.config.thresholds import load_thresholds
from pytest_glmf.testing.truth_server import TruthServer

NO_CHECK = ("glmf: nothing was verified on lane {lane!r}: no gate check ran ({why}); pass --glmf-allow-unverified "
            "(ini: glmf_allow_unverified = true) if that is intended")
ATTACH_LANES = "lanes:\n  batch: {launcher: attach, url: 'http://127.0.0.1:9'}\n"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly",
                                         "--glmf-results", str(pytester.path / "r"), *args)


@pytest.fixture(scope="module")
def truth():
    with TruthServer(ttft_ms=5, itl_ms=2) as ts:
        yield ts


def test_an_attach_run_whose_gates_all_skip_fails_with_the_reason(pytester, truth) -> None:
    """The issue's case: `--glmf-url` with `-k boot` and no boot log used to exit 0 with 4 skips."""
    result = run(pytester, "--glmf-url", truth.url, "--glmf-lane", "batch", "-k", "boot")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(skipped=4)
    why = (f"4 test(s): 4 skipped; first skip: no boot log for lane 'batch' (attached to {truth.url}); "
           "give it with --glmf-boot-log FILE or boot_log: FILE in the lane")
    result.stdout.fnmatch_lines([NO_CHECK.format(lane="batch", why=why),
                                 "*= 4 skipped, * deselected, 1 unverified session in *"])


@pytest.mark.parametrize("how", ["option", "ini"])
def test_the_opt_out_lets_an_unverified_session_pass(pytester, truth, how) -> None:
    if how == "ini":
        pytester.makeini("[pytest]\nglmf_allow_unverified = true\n")
    args = ["--glmf-allow-unverified"] if how == "option" else []
    result = run(pytester, "--glmf-url", truth.url, "--glmf-lane", "batch", "-k", "boot", *args)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(skipped=4)
    assert "nothing was verified" not in result.stdout.str()


TESTS = """
import pytest
from pytest_glmf.gates.verdict import Check, assert_checks

def test_plain_assert(glmf_server):
    assert glmf_server.base_url

def test_skips(glmf_server):
    pytest.skip("not today")

@pytest.mark.skipif("not config.getoption('--check')")
def test_a_check(glmf_server):
    assert_checks([Check("answers", 1, {"min": 1})])
"""
CONFTEST = "def pytest_addoption(parser):\n    parser.addoption('--check', action='store_true')\n"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_plain_asserts_are_not_checks_and_one_check_is_enough(pytester, workers) -> None:
    """Passed tests that judged nothing through the verdict helpers do not make a session green;
    one evaluated check does, also when it ran on an xdist worker (the count travels with the report)."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_mine=TESTS)
    lanes = pytester.makefile(".yaml", lanes=ATTACH_LANES)
    thresholds = pytester.makefile(".yaml", th="lanes:\n  batch: {}\n")
    with TruthServer(ttft_ms=5, itl_ms=2) as ts:
        common = ["--glmf-lanes", str(lanes), "--glmf-lane", "batch", "--glmf-url", ts.url,
                  "--glmf-thresholds", str(thresholds), *workers, "test_mine.py"]
        unverified = run(pytester, *common)
        verified = run(pytester, *common, "--check")
    assert unverified.ret == pytest.ExitCode.TESTS_FAILED
    unverified.assert_outcomes(passed=1, skipped=2)
    why = "3 test(s): 1 passed, 2 skipped; first skip: *"
    unverified.stdout.fnmatch_lines([NO_CHECK.format(lane="batch", why=why)])
    assert verified.ret == pytest.ExitCode.OK, verified.stdout.str()
    verified.assert_outcomes(passed=2, skipped=1)


def test_passed_tests_without_checks_name_the_helper_to_use(pytester, truth) -> None:
    pytester.makepyfile(test_mine="def test_plain(glmf_server):\n    assert glmf_server.base_url\n")
    thresholds = pytester.makefile(".yaml", th="lanes:\n  batch: {}\n")
    result = run(pytester, "--glmf-url", truth.url, "--glmf-lane", "batch", "--glmf-thresholds", str(thresholds),
                 "test_mine.py")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    why = "1 test(s): 1 passed; a check counts when made with pytest_glmf.gates.verdict (assert_checks)"
    result.stdout.fnmatch_lines([NO_CHECK.format(lane="batch", why=why)])


def test_an_unverified_session_is_not_blessed_as_a_baseline(pytester, truth) -> None:
    """It recorded numbers (so there is a result file to bless) but judged none of them."""
    pytester.makepyfile(test_rec="def test_rec(glmf_results, glmf_server):\n"
                                 "    glmf_results.record('curve', 'users=1', {'users': 1, 'per_user_tok_s': 50.0})\n")
    th = pytester.makefile(".yaml", th="lanes:\n  batch: {}\n")
    base = pytester.path / "base.json"
    result = run(pytester, "--glmf-url", truth.url, "--glmf-lane", "batch", "--glmf-thresholds", str(th),
                 "--glmf-baseline", str(base), "--glmf-update-baseline", "test_rec.py")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["glmf: baseline NOT updated: the session did not pass (exit 1); * unchanged",
                                 "glmf: nothing was verified on lane 'batch': *"])
    assert not base.exists()


NO_SECTION = ("glmf: {where} has no section for lane {lane!r} (sections: {sections}): its gates have no bounds; "
              "add lanes.{lane} to the thresholds file (--glmf-thresholds FILE), or pass --glmf-allow-unverified "
              "(ini: glmf_allow_unverified = true) if that is intended")


@pytest.mark.parametrize("own_file", [False, True], ids=["built-in", "own-file"])
def test_a_lane_without_thresholds_fails_even_when_default_checks_pass(pytester, truth, own_file, unfold) -> None:
    """The tool gate's default bar passes and the boot log has no problems, but none of the
    user's bounds applied (here: the thresholds file spells the lane `batch_gb300`)."""
    log = pytester.makefile(".log", boot="[2026-09-11 10:00:03] The server is fired up and ready to roll!\n")
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  batch-gb300: {{launcher: attach, url: '{truth.url}', "
                                             f"boot_log: {log.name}}}\n")
    pytester.makepyfile(test_mine="""
from pytest_glmf.gates.verdict import Check, assert_checks

def test_check(glmf_server):
    assert_checks([Check("answers", 1, {"min": 1})])
""")
    args = ["--glmf-lanes", str(lanes), "--glmf-lane", "batch-gb300", "test_mine.py"]
    th = None
    if own_file:
        th = pytester.makefile(".yaml", th="lanes:\n  batch_gb300: {boot: {max_running_requests: {min: 8}}}\n")
        args += ["--glmf-thresholds", str(th)]
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1)
    where = str(th) if own_file else "the built-in thresholds.yaml"
    # the built-in file's lanes as it stands (the message lists them all, sorted)
    sections = "batch_gb300" if own_file else ", ".join(sorted(load_thresholds().lanes))
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([
        "glmf: lane=batch-gb300 * (NO SECTION for lane 'batch-gb300': nothing is gated; "
        "the session fails unless --glmf-allow-unverified) *",
        NO_SECTION.format(where=where, lane="batch-gb300", sections=sections)])
    allowed = run(pytester, *args, "--glmf-allow-unverified")
    assert allowed.ret == pytest.ExitCode.OK


def test_an_empty_section_is_the_users_word_and_the_check_count_decides(pytester, truth) -> None:
    pytester.makepyfile(test_x="def test_x(glmf_server):\n    pass\n")
    th = pytester.makefile(".yaml", th="lanes:\n  attach: {}\n")
    result = run(pytester, "--glmf-url", truth.url, "--glmf-thresholds", str(th), "test_x.py")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([NO_CHECK.format(lane="attach", why="1 test(s): 1 passed; a check counts when "
                                                 "made with pytest_glmf.gates.verdict (assert_checks)")])


def test_collecting_only_is_not_a_session_that_verified_nothing(pytester, truth) -> None:
    result = run(pytester, "--glmf-url", truth.url, "--glmf-lane", "batch", "-k", "boot", "--co")
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize("lane_args", [["--glmf-lane", "batch"], []], ids=["lane-selected", "no-lane"])
def test_a_misspelt_lane_in_glmf_lanes_is_an_error(pytester, lane_args) -> None:
    pytester.makepyfile(test_m="import pytest\n\n@pytest.mark.glmf_lanes('batch', 'bacth')\ndef test_x():\n    pass\n")
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  batch: {launcher: sim}\n  nightly: {launcher: sim}\n")
    result = run(pytester, "--glmf-lanes", str(lanes), *lane_args, "test_m.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: test_m.py::test_x: glmf_lanes names unknown lane 'bacth'; "
                                 "known lanes: batch, daily, nightly"])


def test_a_correct_glmf_lanes_marker_still_skips_other_lanes(pytester, truth) -> None:
    pytester.makepyfile(test_m="import pytest\n\n@pytest.mark.glmf_lanes('daily')\ndef test_x():\n    pass\n")
    result = run(pytester, "--glmf-url", truth.url, "--glmf-lane", "batch", "--glmf-allow-unverified", "-rs", "test_m.py")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*glmf_lanes(daily): not applicable to lane 'batch'*"])


def test_the_check_count_is_a_real_signal_not_the_outcome(pytester, truth) -> None:
    """Checks evaluated in a fixture count for the test that used it (once, with its teardown
    report), and the count reaches JUnit as the property glmf_checks."""
    pytester.makepyfile(test_m="""
import pytest
from pytest_glmf.gates.verdict import Check, failed_checks

@pytest.fixture
def judged(glmf_server):
    return failed_checks([Check("x", 1, {"min": 0}), Check("y", 1, {"max": 2})])

def test_uses_fixture(judged):
    assert judged == []
""")
    result = run(pytester, "--glmf-url", truth.url, "--glmf-lane", "batch", "test_m.py",
                 "--junitxml", str(pytester.path / "j.xml"), "-o", "junit_family=xunit1")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert 'name="glmf_checks" value="2"' in (pytester.path / "j.xml").read_text()
