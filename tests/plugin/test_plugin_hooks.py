"""pytest-glmf's hooks (plugin/hookspecs.py, issue 41 item 6): a conftest.py adds its own facts to
the provenance (`pytest_glmf_update_provenance`) and to the result document
(`pytest_glmf_update_result`); they land in the result file and in `glmf report`. An implementation
that raises is named in one line, with its plugin and where it is. The conftest is the shipped
example (pytest_glmf/examples/my_conftest.py, shown in docs/guide/results.md); a fake nvidia-smi on
PATH stands in for the GPUs."""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

import pytest_glmf
from pytest_glmf.testing.truth_server import TruthServer

GLMF = str(Path(sys.executable).parent / "glmf")
EXAMPLE = Path(pytest_glmf.__file__).parent / "examples" / "my_conftest.py"
TEST = """
from pytest_glmf.gates.verdict import Check, assert_checks

def test_row(glmf_server, glmf_results):
    glmf_results.record("curve", "users=1", {"users": 1, "per_user_tok_s": 50.0})
    assert_checks([Check("per_user_tok_s", 50.0, {"min": 1})])
"""
NVIDIA_SMI = """#!/bin/sh
case "$*" in
  *serial*) echo 1650924012345; echo 1650924012346 ;;
  *) echo "NVIDIA H100 80GB HBM3, 570.86.15"; echo "NVIDIA H100 80GB HBM3, 570.86.15" ;;
esac
"""


@pytest.fixture(scope="module")
def truth():
    with TruthServer(ttft_ms=5, itl_ms=2) as ts:
        yield ts


@pytest.fixture
def gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two GPUs as nvidia-smi tells them (serials, name, driver)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(NVIDIA_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("GITHUB_RUN_ID", raising=False)


def session(pytester: pytest.Pytester, url: str, conftest: str, *args: str) -> pytest.RunResult:
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_mine=TEST)
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  mine: {{launcher: attach, url: '{url}'}}\n")
    thresholds = pytester.makefile(".yaml", th="lanes:\n  mine: {}\n")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-lane", "mine",
                                         "--glmf-thresholds", str(thresholds), "--glmf-results",
                                         str(pytester.path / "r"), *args, "test_mine.py")


def latest(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "r" / "mine-latest.json").read_text())


def test_the_example_conftest_adds_the_gpu_serials_and_the_ci_run(pytester, truth, gpus):
    result = session(pytester, truth.url, EXAMPLE.read_text())
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    doc = latest(pytester)
    assert doc["provenance"]["gpu_serial"] == "1650924012345, 1650924012346"
    assert doc["provenance"]["gpu_name"] == "NVIDIA H100 80GB HBM3"   # what the plugin knew was there first
    assert doc["ci_run"] == {"id": "local", "lane": "mine"}
    report = pytester.run(GLMF, "report", str(pytester.path / "r" / "mine-latest.json"), "--markdown", "r.md")
    assert report.ret == 0, report.stderr.str()
    assert "| gpu_serial | 1650924012345, 1650924012346 |" in (pytester.path / "r.md").read_text()


def test_a_provenance_hook_that_raises_fails_the_lanes_tests_naming_it(pytester, truth):
    result = session(pytester, truth.url, """
        def pytest_glmf_update_provenance(config, lane, provenance):
            raise RuntimeError("no GPU serial on this host")
    """)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "the lane's provenance is not complete: pytest_glmf_update_provenance (plugin 'conftest.py', "
        "pytest_glmf_update_provenance at conftest.py:1) raised RuntimeError: no GPU serial on this host"])
    assert "Traceback" not in result.stdout.str()


def test_a_result_hook_that_raises_fails_the_session_naming_it_and_the_file_is_written(pytester, truth):
    result = session(pytester, truth.url, """
        def pytest_glmf_update_result(config, lane, result):
            result["team"] = result["provenance"]["no_such_key"]
    """, "--glmf-update-baseline")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    said = ("pytest_glmf_update_result (plugin 'conftest.py', pytest_glmf_update_result at conftest.py:1) "
            "raised KeyError: 'no_such_key'")
    result.stdout.fnmatch_lines([f"glmf: {said} (the result file was written, this line in its incomplete)"])
    doc = latest(pytester)
    assert said in doc["incomplete"] and doc["gates"]["curve"]["users=1"]["per_user_tok_s"] == 50.0
    result.stdout.fnmatch_lines(["glmf: baseline NOT updated: the session did not pass (exit 1); *"])
    assert not (pytester.path / "r" / "mine-baseline.json").exists()
