"""A lane's bad engine flag on sim and process lanes is one line (issue 33, item 10): the simulator's
own parser checks sim lanes (and process lanes that run it) before the start, as preflight does for
docker and engine process lanes; any other process whose argument parser refuses its command line
is reported with the parser's own error line, not the 40-line usage dump before it."""
from __future__ import annotations

import sys

import pytest

TEST = "def test_a(glmf_server):\n    pass\n\ndef test_b(glmf_server):\n    pass\n"
SIM_LINE = ("preflight: lane 'bad' ({lanes}): glmf sim * (the built-in simulator) rejects the command line: "
            "--max-runing-requests (lane key {key}) is not a flag; closest: --max-running-requests")


def run(pytester: pytest.Pytester, lane_yaml: str) -> tuple[pytest.RunResult, str]:
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  bad: {lane_yaml}\n")
    test = pytester.makepyfile(test_x=TEST)
    return pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "bad", "--glmf-allow-unverified",
                              "-p", "no:cacheprovider", str(test)), str(lanes)


def test_a_sim_lanes_typo_is_one_line_before_anything_starts(pytester) -> None:
    result, lanes = run(pytester, "{launcher: sim, extra: [--max-runing-requests, '8']}")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["PreflightError: " + SIM_LINE.format(lanes=lanes, key="extra")] * 2)
    assert "usage:" not in result.stdout.str() and not list((pytester.path / "glmf-results").glob("*server.log"))


def test_a_process_lane_running_the_simulator_gets_the_same_line(pytester) -> None:
    command = f"[{sys.executable}, -m, pytest_glmf.sim, --port, '{{port}}', --max-runing-requests, '8']"
    result, lanes = run(pytester, f"{{launcher: process, command: {command}}}")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["PreflightError: " + SIM_LINE.format(lanes=lanes, key="command")])
    assert "usage:" not in result.stdout.str()


def test_any_other_process_refused_by_its_parser_says_the_parsers_line(pytester) -> None:
    pytester.makepyfile(engine="""
        import argparse
        p = argparse.ArgumentParser(prog="my-engine")
        for i in range(60):
            p.add_argument(f"--option-number-{i}", help="an option")
        p.add_argument("--port")
        p.parse_args()
    """)
    result, _ = run(pytester, f"{{launcher: process, command: [{sys.executable}, engine.py, --port, '{{port}}', "
                              "--max-runing-requests, '8']}")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["BootError: lane 'bad' (process launcher): the server exited with code 2 during boot: "
                                 "its argument parser refused the command line (my-engine: error: unrecognized "
                                 "arguments: --max-runing-requests 8)"])
    assert "--option-number-30" not in result.stdout.str()     # no usage dump
