"""A thin plugin: the entry module adds options, markers and fixtures; every hook that needs a lane is
a method of the session object, registered only when a lane is selected (docs/style.md, after
pytest-benchmark's BenchmarkSession)."""
from __future__ import annotations

import inspect

import pytest

import pytest_glmf.plugin as entry
from pytest_glmf.plugin.session import GlmfSession

CONFTEST = """
def pytest_sessionstart(session):
    from pytest_glmf.plugin.session import session_of
    plugin = session.config.pluginmanager.get_plugin("glmf_session")
    print(f"registered={plugin is not None} same={plugin is session_of(session.config)}")
"""


def test_the_entry_module_holds_only_the_hooks_that_run_without_a_lane() -> None:
    hooks = sorted(name for name, obj in vars(entry).items() if name.startswith("pytest_") and inspect.isfunction(obj))
    assert hooks == ["pytest_addhooks", "pytest_addoption", "pytest_collection_modifyitems", "pytest_configure",
                     "pytest_report_header"]
    session_hooks = sorted(name for name in vars(GlmfSession) if name.startswith("pytest_"))
    assert session_hooks == ["pytest_collection_finish", "pytest_configure_node", "pytest_generate_tests",
                             "pytest_report_header", "pytest_runtest_call", "pytest_runtest_logreport",
                             "pytest_runtest_protocol", "pytest_runtest_setup", "pytest_sessionfinish",
                             "pytest_sessionstart", "pytest_terminal_summary", "pytest_unconfigure",
                             "pytest_xdist_make_scheduler"]


@pytest.mark.parametrize("args, line", [
    ((), "registered=False same=True"),
    (("--glmf-lane", "batch", "--glmf-url", "http://127.0.0.1:9"), "registered=True same=True"),
])
def test_the_session_object_is_registered_only_with_a_lane(pytester: pytest.Pytester, args, line) -> None:
    pytester.makeconftest(CONFTEST)
    test_file = pytester.makepyfile("def test_nothing(): pass\n")
    result = pytester.runpytest("-s", "-p", "no:cacheprovider", *args, "--glmf-results", str(pytester.path / "r"),
                                str(test_file))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([line])


def test_the_session_leaves_the_plugin_manager_at_unconfigure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing(): pass\n")
    config = pytester.parseconfigure("--glmf-lane", "batch", "--glmf-url", "http://127.0.0.1:9")
    assert config.pluginmanager.get_plugin("glmf_session") is not None
    config._ensure_unconfigure()
    assert config.pluginmanager.get_plugin("glmf_session") is None
