"""Markers: registered with help, validated, and lanes restriction skips with a reason."""
from __future__ import annotations

import pytest

LANE_TESTS = """
import pytest

@pytest.mark.glmf_lanes("batch")
def test_batch_only(glmf_lane):
    assert glmf_lane.name == "batch"

@pytest.mark.glmf_lanes("daily", "batch")
def test_both(glmf_lane):
    pass

@pytest.mark.glmf_lanes("daily")
class TestDaily:
    def test_daily_only(self, glmf_lane):
        assert glmf_lane.name == "daily"
"""


def test_markers_are_registered_with_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines([
        "@pytest.mark.glmf_lanes(*names): run this test only on the named lanes; skipped with a reason on other lanes",
        "@pytest.mark.glmf_gate(name): the gate a test belongs to (boot, curve, drift, acceptance, tools, capacity, template, agents)",
        "@pytest.mark.glmf_serial: the test measures speed; it runs alone against the server, never beside "
        "other tests (also under xdist)",
    ])


def test_lane_restriction_skips_other_lanes_with_a_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(LANE_TESTS)
    name = "test_lane_restriction_skips_other_lanes_with_a_reason.py"
    result = pytester.runpytest("--glmf-lane", "batch", "-rs", name)
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED ?1? {name}*glmf_lanes(daily): not applicable to lane 'batch'"])
    result = pytester.runpytest("--glmf-lane", "daily", "-rs", name)
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED ?1? {name}*glmf_lanes(batch): not applicable to lane 'daily'"])


def test_lane_restriction_without_a_lane_skips(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(LANE_TESTS)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*glmf_lanes(daily, batch): no lane selected (--glmf-lane NAME)"])


def test_nested_lane_markers_intersect(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        pytestmark = pytest.mark.glmf_lanes("daily", "batch")

        @pytest.mark.glmf_lanes("batch")
        def test_x(glmf_lane):
            pass
    """)
    name = "test_nested_lane_markers_intersect.py"
    pytester.runpytest("--glmf-lane", "daily", name).assert_outcomes(skipped=1)
    pytester.runpytest("--glmf-lane", "batch", name).assert_outcomes(passed=1)


@pytest.mark.parametrize("mark, message", [
    ("glmf_lanes()", 'glmf_lanes takes lane names as strings, e.g. @pytest.mark.glmf_lanes("batch", "daily"); got *'),
    ("glmf_lanes(lane='batch')", "glmf_lanes takes lane names as strings*"),
    ("glmf_lanes(3)", "glmf_lanes takes lane names as strings*"),
    ("glmf_gate('latency')", "glmf_gate takes one gate name, one of boot, curve, drift, acceptance, tools, capacity, template, agents; got *"),
    ("glmf_gate()", "glmf_gate takes one gate name*"),
    ("glmf_serial(users=8)", "glmf_serial takes no arguments; got *"),
])
def test_marker_misuse_is_a_usage_error(pytester: pytest.Pytester, mark: str, message: str) -> None:
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.{mark}
        def test_x():
            pass
    """)
    result = pytester.runpytest("--glmf-lane", "batch", "test_marker_misuse_is_a_usage_error.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: test_marker_misuse_is_a_usage_error.py::test_x: {message}"])


def test_serial_tests_join_one_xdist_group(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.glmf_serial
        def test_speed(request):
            assert request.node.get_closest_marker("xdist_group").args == ("glmf_serial",)
    """)
    pytester.runpytest("--glmf-lane", "batch", "test_serial_tests_join_one_xdist_group.py").assert_outcomes(passed=1)


def test_serial_marker_without_xdist_loaded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.glmf_serial
        def test_speed():
            pass
    """)
    result = pytester.runpytest("-p", "no:xdist", "--strict-markers", "--glmf-lane", "batch",
                                "test_serial_marker_without_xdist_loaded.py")
    result.assert_outcomes(passed=1)
