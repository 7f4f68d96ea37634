"""An attached server's image: `image:` in an attach lane, or `--glmf-image` with an attach lane or
`--glmf-url`, is recorded as the image the server runs, and shown where images are told apart: the
header, the result file's provenance, the history store and `glmf report` (issue 33, item 7: an
upgrade gate's history read `image: -` for every run)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_glmf.testing.truth_server import TruthServer

GLMF = str(Path(sys.executable).parent / "glmf")
TEST = """
from pytest_glmf.gates.verdict import Check, assert_checks

def test_row(glmf_server, glmf_results):
    glmf_results.record("curve", "users=1", {"users": 1, "per_user_tok_s": 50.0})
    assert_checks([Check("per_user_tok_s", 50.0, {"min": 1})])
"""


@pytest.fixture(scope="module")
def truth():
    with TruthServer(ttft_ms=5, itl_ms=2) as ts:
        yield ts


def session(pytester: pytest.Pytester, lane_yaml: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_mine=TEST)
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  mine: {lane_yaml}\n")
    thresholds = pytester.makefile(".yaml", th="lanes:\n  mine: {}\n")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-lane", "mine",
                                         "--glmf-thresholds", str(thresholds), "--glmf-results",
                                         str(pytester.path / "r"), *args, "test_mine.py")


def latest(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "r" / "mine-latest.json").read_text())


def test_an_attach_lane_records_its_image_in_provenance_history_and_report(pytester, truth, unfold):
    old = session(pytester, f"{{launcher: attach, url: '{truth.url}', image: 'lmsysorg/sglang:v0.5.22'}}")
    old.assert_outcomes(passed=1)
    pytest.LineMatcher(unfold(old.stdout.str()).splitlines()).fnmatch_lines([
        f"glmf: lane=mine launcher=attach url={truth.url} image=lmsysorg/sglang:v0.5.22 *"])
    assert latest(pytester)["provenance"]["image"] == "lmsysorg/sglang:v0.5.22"
    new = session(pytester, f"{{launcher: attach, url: '{truth.url}'}}", "--glmf-image", "lmsysorg/sglang:v0.5.23")
    new.assert_outcomes(passed=1)
    assert latest(pytester)["provenance"]["image"] == "lmsysorg/sglang:v0.5.23"

    store = str(pytester.path / "r" / "history.sqlite")
    listed = pytester.run(GLMF, "history", "--store", store, "list")
    assert listed.ret == 0, listed.stderr.str()
    listed.stdout.fnmatch_lines(["*| lmsysorg/sglang:v0.5.23 *", "*| lmsysorg/sglang:v0.5.22 *"])   # newest first
    report = pytester.run(GLMF, "report", str(pytester.path / "r" / "mine-latest.json"))
    report.stdout.fnmatch_lines(["*lane mine, launcher attach, image lmsysorg/sglang:v0.5.23,*"])


def test_glmf_image_with_glmf_url_records_the_image(pytester, truth):
    result = session(pytester, "{launcher: sim}", "--glmf-url", truth.url, "--glmf-image", "vllm/vllm-openai:v0.33.0")
    result.assert_outcomes(passed=1)
    assert latest(pytester)["provenance"]["image"] == "vllm/vllm-openai:v0.33.0"
