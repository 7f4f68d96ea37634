"""An attach lane whose `boot_log` file is missing (issue 40, item 7): the server is up, so the
session is not "INCOMPLETE: the server did not boot" with every test an error. The tests that need
no boot log run; the boot log's tests skip, naming the key, the file and the lanes file (or fail
under --glmf-require boot); the summary says it in one line."""
from __future__ import annotations

import pytest

from pytest_glmf.testing.truth_server import TruthServer

MINE = """\
def test_the_server_answers(glmf_client):
    assert glmf_client.get_json("/v1/models")["data"]
"""
THRESHOLDS = ("schema: 1\nlanes:\n  truth:\n    boot:\n      max_running_requests: {min: 1}\n"
              "      kv_pool_dtypes: [bfloat16]\n")


def run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    suite = pytester.path / "test_boot.py"
    from importlib import resources

    suite.write_text(resources.files("pytest_glmf.suites").joinpath("test_boot.py").read_text())
    pytester.makepyfile(test_mine=MINE)
    thresholds = pytester.makefile(".yaml", thresholds=THRESHOLDS)
    with TruthServer(ttft_ms=5, itl_ms=2, seats=8) as ts:
        lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{ts.url}', "
                                                 "boot_log: logs/gone.log}\n")
        return pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "truth", "--glmf-thresholds",
                                             str(thresholds), "--glmf-results", str(pytester.path / "r"),
                                             "-p", "no:cacheprovider", "-rs", *extra, "test_mine.py", "test_boot.py")


def test_a_missing_boot_log_skips_the_boot_tests_and_the_rest_runs(pytester, unfold) -> None:
    result = run(pytester, "--glmf-allow-unverified")
    out = unfold(result.stdout.str())
    assert "did not boot" not in out and "INCOMPLETE" not in out
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 1 and "error" not in outcomes and "errors" not in outcomes, out
    gone = pytester.path / "logs" / "gone.log"
    line = (f"lane 'truth': boot_log {gone} is not a readable file (fix boot_log: in {pytester.path / 'lanes.yaml'}); "
            "the server is up: the tests that read its boot log skip, the others run")
    lines = out.splitlines()
    pytest.LineMatcher(lines).fnmatch_lines([f"SKIPPED * {line}"])
    pytest.LineMatcher(lines).fnmatch_lines([f"glmf: {line}"])
    assert result.ret == 0


def test_under_glmf_require_boot_the_boot_tests_fail_naming_the_file(pytester, unfold) -> None:
    result = run(pytester, "--glmf-require", "boot")
    out = unfold(result.stdout.str())
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "did not boot" not in out
    pytest.LineMatcher(out.splitlines()).fnmatch_lines([
        "*lane 'truth': boot_log *gone.log is not a readable file (fix boot_log: in *lanes.yaml)*(--glmf-require boot)"])
    assert "test_mine.py::test_the_server_answers PASSED" in out or result.parseoutcomes().get("passed", 0) >= 1


def test_a_replicas_missing_boot_log_is_named_with_its_url(pytester, unfold) -> None:
    log = pytester.makefile(".log", one="[2026-09-11 10:00:03] The server is fired up and ready to roll!\n")
    pytester.makepyfile(test_mine="""
        from pytest_glmf.launch.attach import missing_boot_log

        def test_both_replicas_attached(glmf_server):
            assert len(glmf_server.replicas) == 2
            print("MISSING", missing_boot_log(glmf_server))
    """)
    with TruthServer(ttft_ms=5, itl_ms=2) as a, TruthServer(ttft_ms=5, itl_ms=2) as b:
        lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  two: {{launcher: attach, urls: ['{a.url}', '{b.url}'], "
                                                 f"boot_logs: [{log.name}, gone.log]}}\n")
        result = pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "two", "-s",
                                               "--glmf-allow-unverified", "-p", "no:cacheprovider", "test_mine.py")
    result.assert_outcomes(passed=1)
    pytest.LineMatcher(unfold(result.stdout.str()).splitlines()).fnmatch_lines([
        f"*MISSING lane 'two': boot_logs {pytester.path / 'gone.log'} ({b.url}) not a readable file (fix boot_logs: "
        f"in {lanes}); the servers are up: the tests that read their boot logs skip, the others run"])


@pytest.fixture(scope="module")
def router(tmp_path_factory):
    """A simulator standing in for the router: one URL; the replicas behind it known by their boot logs."""
    import dataclasses

    from pytest_glmf.config.lanes import builtin_lanes
    from pytest_glmf.launch import launch_lane

    lane = dataclasses.replace(builtin_lanes()["batch"], name="router", time_scale=0.1)
    server = launch_lane(lane, tmp_path_factory.mktemp("router"), "router")
    yield server
    server.stop()


def run_routed(pytester: pytest.Pytester, router, *extra: str) -> pytest.RunResult:
    from importlib import resources

    suite = pytester.path / "test_boot.py"
    suite.write_text(resources.files("pytest_glmf.suites").joinpath("test_boot.py").read_text())
    pytester.makepyfile(test_mine="""
        def test_the_router_answers_and_both_replicas_are_known(glmf_client, glmf_server):
            assert glmf_client.get_json("/v1/models")["data"]
            assert len(glmf_server.replicas) == 2
    """)
    thresholds = pytester.makefile(".yaml", thresholds=THRESHOLDS.replace("truth", "routed"))
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  routed: {{launcher: attach, url: '{router.base_url}', "
                                             f"boot_logs: ['{router.boot_log_path}', logs/gone.log]}}\n")
    return pytester.runpytest_subprocess("--glmf-lanes", str(lanes), "--glmf-lane", "routed", "--glmf-thresholds",
                                         str(thresholds), "--glmf-results", str(pytester.path / "r"),
                                         "-p", "no:cacheprovider", "-rs", *extra, "test_mine.py", "test_boot.py")


def test_a_router_lane_with_a_replicas_boot_log_missing_attaches_and_skips_the_boot_tests(
        pytester, unfold, router) -> None:
    result = run_routed(pytester, router, "--glmf-allow-unverified")
    out = unfold(result.stdout.str())
    assert "did not boot" not in out and "INCOMPLETE" not in out, out
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 1 and "error" not in outcomes and "errors" not in outcomes, out
    line = (f"lane 'routed': boot_logs {pytester.path / 'logs' / 'gone.log'} (replica 2 behind {router.base_url}) "
            f"not a readable file (fix boot_logs: in {pytester.path / 'lanes.yaml'}); the servers are up: the tests "
            "that read their boot logs skip, the others run")
    lines = out.splitlines()
    pytest.LineMatcher(lines).fnmatch_lines([f"SKIPPED * {line}"])
    pytest.LineMatcher(lines).fnmatch_lines([f"glmf: {line}"])
    assert "test_mine.py::test_the_router_answers_and_both_replicas_are_known PASSED" in out or \
        outcomes.get("passed", 0) >= 1
    assert result.ret == 0


def test_a_router_lane_with_a_replicas_boot_log_missing_fails_under_glmf_require_boot(
        pytester, unfold, router) -> None:
    result = run_routed(pytester, router, "--glmf-require", "boot")
    out = unfold(result.stdout.str())
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "did not boot" not in out
    pytest.LineMatcher(out.splitlines()).fnmatch_lines([
        "*lane 'routed': boot_logs *gone.log (replica 2 behind *) not a readable file (fix boot_logs: in *lanes.yaml)*"
        "(--glmf-require boot)"])
    assert result.parseoutcomes().get("passed", 0) >= 1
