"""The thresholds form `curve.beats` through the plugin: two lanes attached to truth servers with known
curves in one session; the entry below the crossover passes, the one above fails with the table;
a bad entry is refused when the file is read, naming file, lane and key."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from pytest_glmf.cli import main
from pytest_glmf.testing.truth_server import TruthServer

SUITES = resources.files("pytest_glmf.suites")
# fast: 1000 / (20 + 2 (u - 1)) tok/s; flat: 1000 / (40 + 0.4 (u - 1)); equal at 13.5 users
SETTINGS = "settings: {max_tokens: 40, runs: 2, prompt_tokens: null}"
ROWS = "rows: [{users: 4, per_user_tok_s: {min: 1}}, {users: 16, per_user_tok_s: {min: 1}}]"


@pytest.fixture(scope="module")
def servers():
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=2.0) as fast, \
            TruthServer(ttft_ms=20, itl_ms=40, itl_per_running_ms=0.4) as flat:
        yield fast.url, flat.url


def test_beats_below_the_crossover_passes_above_it_fails(pytester: pytest.Pytester, servers, inline_notes) -> None:
    fast, flat = servers
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  fast: {{launcher: attach, url: '{fast}'}}\n"
                                             f"  flat: {{launcher: attach, url: '{flat}'}}\n")
    thresholds = pytester.makefile(".yaml", thresholds=(
        "schema: 1\nlanes:\n"
        f"  fast:\n    curve: {{{SETTINGS}, {ROWS}, beats: [{{lane: flat, users: [4]}}, {{lane: flat, users: [16]}}]}}\n"
        f"  flat:\n    curve: {{{SETTINGS}, {ROWS}}}\n"))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-thresholds", str(thresholds),
        "--glmf-lane", "fast", "--glmf-lane", "flat", "-rs", str(SUITES / "test_curve.py"), str(SUITES / "test_versus.py"))
    # four rows; beats on fast (flat not measured yet: skipped), then on flat: judged, the 16-user entry fails
    result.assert_outcomes(passed=4, skipped=1, failed=1)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "*fast does not beat flat on per_user_tok_s: 1 threshold(s) missed",
        "*per_user_tok_s: lead of fast over flat @ 16 users | -* | >= * | *flat wins*(thresholds.yaml: "
        "lanes.fast.curve.beats)",
        "*fast beats flat per user up to 4 users; from 16 flat wins*",
    ])
    result.stdout.fnmatch_lines(["SKIPPED * curve.beats of lane 'fast': the other lane has no curve rows yet *"])


@pytest.mark.parametrize("entry, message", [
    ("{lane: flat, metric: tok_s}", "lanes.fast.curve.beats[0].metric: 'tok_s' is not a curve metric; allowed: "),
    ("{lane: flat, users: [0]}", "lanes.fast.curve.beats[0].users: expected a non-empty list of positive integers"),
    ("{lanes: flat}", "lanes.fast.curve.beats[0]: unknown key 'lanes'; allowed: lane, metric, users"),
])
def test_a_bad_beats_entry_is_refused_when_the_file_is_read(tmp_path: Path, capsys, entry, message) -> None:
    path = tmp_path / "thresholds.yaml"
    path.write_text(f"schema: 1\nlanes:\n  fast:\n    curve: {{beats: [{entry}]}}\n")
    assert main(["thresholds", str(path)]) == 2
    assert message in capsys.readouterr().err


USER_TEST = """\
import pytest

from pytest_glmf.compare import assert_lane_beats


def test_measure(glmf_curve):
    glmf_curve(4, max_tokens=40, runs=2, prompt_tokens=None)


@pytest.mark.glmf_lanes("fast")
def test_fast_beats_flat(glmf_lane_curve):
    c = assert_lane_beats(glmf_lane_curve(), glmf_lane_curve("flat"), users=[4])
    print("SENTENCE", c.sentence())


@pytest.mark.glmf_lanes("fast")
def test_a_lane_never_measured_skips(glmf_lane_curve):
    glmf_lane_curve("nope")
"""


def test_glmf_lane_curve_reads_another_sessions_lane(pytester: pytest.Pytester, servers) -> None:
    fast, flat = servers
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  fast: {{launcher: attach, url: '{fast}'}}\n"
                                             f"  flat: {{launcher: attach, url: '{flat}'}}\n"
                                             "  nope: {launcher: attach, url: 'http://127.0.0.1:9'}\n")
    thresholds = pytester.makefile(".yaml", thresholds="schema: 1\nlanes:\n  fast: {curve: {}}\n  flat: {curve: {}}\n")
    pytester.makepyfile(test_user=USER_TEST)
    common = ["-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-thresholds", str(thresholds), "-rs", "-s"]
    first = pytester.runpytest_subprocess(*common, "--glmf-lane", "flat", "--glmf-allow-unverified", "test_user.py")
    first.assert_outcomes(passed=1, skipped=2)
    second = pytester.runpytest_subprocess(*common, "--glmf-lane", "fast", "test_user.py")
    second.assert_outcomes(passed=2, skipped=1)
    second.stdout.fnmatch_lines(["*SENTENCE fast beats flat per user at every valid users value (4)",
                                 "SKIPPED * glmf_lane_curve('nope'): no curve rows of lane 'nope' yet (this session or "
                                 "*/glmf-results/nope-latest.json)"])
