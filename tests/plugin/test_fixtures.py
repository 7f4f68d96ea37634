"""The measuring fixtures (gates/<gate>/fixture.py, plugin/measuring.py) as a user's test file meets
them, through pytester: the glmf_users marker, glmf_curve on an attached ground-truth server (the lane's settings under
the call's, rows recorded per test), the
serial marking of measuring tests, and the errors for misuse (glmf_drift's fixture: in
tests/gates/drift/test_drift_api.py, beside the toy engines)."""
from __future__ import annotations

import json

import pytest

from pytest_glmf.testing.truth_server import TruthServer

BOOT_LOG = """\
[2026-09-11 10:00:02 TP0] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4, context_len=131072, available_gpu_mem=10.00 GB
[2026-09-11 10:00:03] The server is fired up and ready to roll!
"""


@pytest.fixture(scope="module")
def truth():
    with TruthServer(ttft_ms=10, itl_ms=2) as ts:
        yield ts


def attach(pytester: pytest.Pytester, url: str) -> list[str]:
    """Options for a session attached to `url` as lane `mine`, with a boot log and a thresholds file
    whose curve settings the fixture starts from (the client self-check relaxed: a shared box)."""
    pytester.makefile(".log", boot=BOOT_LOG)
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  mine: {{launcher: attach, url: '{url}', boot_log: boot.log}}\n")
    thresholds = pytester.makefile(".yaml", thresholds=(
        "schema: 1\nlanes:\n  mine:\n    curve:\n      settings: {client_error_max_pct: 50, "
        "warmup: false, runs: 1, max_tokens: 12}\n"))
    return ["--glmf-lanes", str(lanes), "--glmf-lane", "mine", "--glmf-thresholds", str(thresholds),
            "--glmf-results", str(pytester.path / "results"), "-p", "no:cacheprovider"]


def recorded(pytester: pytest.Pytester, gate: str) -> dict:
    return json.loads((pytester.path / "results" / "mine-latest.json").read_text())["gates"][gate]


def test_glmf_curve_with_the_users_marker_records_a_row_per_test(pytester, truth):
    pytester.makepyfile(test_user="""
        import pytest
        from pytest_glmf.gates.curve import assert_curve

        @pytest.mark.glmf_users(1, 3)
        def test_marked(glmf_curve, glmf_users):
            curve = glmf_curve(max_tokens=8)
            assert [r.users for r in curve.rows] == [glmf_users]
            assert curve.settings.runs == 1 and curve.settings.max_tokens == 8   # the lane's, then the call's
            assert curve.lane == "mine" and curve[glmf_users].seats == 4
            assert_curve(curve, per_user_tok_s={"min": 50})

        def test_explicit(glmf_curve):
            curve = glmf_curve([2, 4], runs=2, key="two-and-four")
            assert [r.runs for r in curve.rows] == [2, 2]
    """)
    result = pytester.runpytest("test_user.py", "-v", *attach(pytester, truth.url))
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_marked?users=1? PASSED*", "*test_marked?users=3? PASSED*"])
    rows = recorded(pytester, "curve")
    assert sorted(rows) == ["test_marked[users=1]", "test_marked[users=3]", "two-and-four users=2",
                            "two-and-four users=4"]
    assert rows["test_marked[users=3]"]["users"] == 3 and rows["test_marked[users=3]"]["valid"] is True


def test_a_curve_bound_missed_fails_with_the_row(pytester, truth):
    pytester.makepyfile(test_user="""
        from pytest_glmf.gates.curve import assert_curve

        def test_slow(glmf_curve):
            assert_curve(glmf_curve(2), per_user_tok_s={"min": 100000}, allow_queueing=True)
    """)
    result = pytester.runpytest("test_user.py", *attach(pytester, truth.url))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "curve of lane 'mine' @ 2 users: 1 threshold(s) missed",
        "metric * | measured | expected * | note",
        "*",
        "per_user_tok_s @ 2 users | * | >= 100,000 | -*; (test_user.py:4)",
        "",
        "the row:",
        "users | aggregate tok/s *",
        "*",
        "2 * | * | 4 *",
    ], consecutive=True)


def test_misuse_is_named(pytester, truth):
    pytester.makepyfile(test_user="""
        import pytest

        def test_no_users(glmf_curve):
            glmf_curve(max_tokens=8)

        def test_setting_typo(glmf_curve):
            glmf_curve(2, max_tokenz=8)

        def test_missing_prompt(glmf_curve):
            glmf_curve(2, prompt_file="nope.md")
    """)
    result = pytester.runpytest("test_user.py", *attach(pytester, truth.url))
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines([
        "glmf_curve() needs users: glmf_curve(8), or mark the test @pytest.mark.glmf_users(8)",
        "glmf_curve() at test_user.py:7: settings: unknown key 'max_tokenz'; allowed: *",
        "glmf_curve() at test_user.py:10: prompt_file: nope.md: not a file, nor a packaged fixture",
    ])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize("marker, error", [
    ('@pytest.mark.glmf_users("8")', "glmf_users takes positive integers, e.g. @pytest.mark.glmf_users(1, 8, 48)"),
    ("@pytest.mark.glmf_users(8)", "glmf_users marks a test that measures no curve: use the glmf_curve fixture"),
])
def test_a_wrong_users_marker_stops_the_collection(pytester, marker, error):
    fixture = "glmf_curve" if '"8"' in marker else "tmp_path"
    pytester.makepyfile(test_user=f"import pytest\n\n{marker}\ndef test_x({fixture}):\n    pass\n")
    result = pytester.runpytest("test_user.py")
    assert result.ret == pytest.ExitCode.INTERRUPTED    # nothing runs, no server boots
    result.stdout.fnmatch_lines(["*ERROR collecting test_user.py*", f"test_user.py::test_x: {error}*"])


def test_measuring_tests_are_serial(pytester):
    pytester.makepyfile(test_user="""
        def test_curve(glmf_curve): pass
        def test_drift(glmf_drift): pass
        def test_acceptance(glmf_acceptance): pass
        def test_tools(glmf_tools): pass
        def test_boot(glmf_boot_facts): pass
    """)
    items, _ = pytester.inline_genitems("test_user.py")
    serial = {item.name: item.get_closest_marker("glmf_serial") is not None for item in items}
    assert serial == {"test_curve": True, "test_drift": True, "test_acceptance": True, "test_tools": False,
                      "test_boot": False}
