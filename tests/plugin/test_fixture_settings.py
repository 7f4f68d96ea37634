"""One merge point (issue 41): every gate's fixture builds its settings in one call, the lane's
settings with the call's keyword arguments on top through the gate's declaration
(`GateSpec.build`, plugin/measuring.py `call_settings`), so a value out of range and a misspelled
key are refused the same way in every gate: one line naming the fixture, the test line, the key
and what is allowed, before anything is measured. Through pytester, on an attached ground-truth
server (nothing is measured: the call fails first)."""
from __future__ import annotations

import re

import pytest

from pytest_glmf.gates.registry import GATES
from pytest_glmf.testing.truth_server import TruthServer

BOOT_LOG = """\
[2026-09-11 10:00:02 TP0] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4, context_len=131072, available_gpu_mem=10.00 GB
[2026-09-11 10:00:03] The server is fired up and ready to roll!
"""

# gate -> (the call with a value out of range, the key and what is allowed, the call with a misspelled key)
CALLS = {
    "curve": ("glmf_curve(2, runs=0)", "glmf_curve", "settings.runs: expected an integer >= 1, got 0",
              "glmf_curve(2, rnus=2)"),
    "capacity": ("glmf_capacity.measure(runs=0)", "glmf_capacity.measure",
                 "settings.runs: expected an integer >= 1, got 0", "glmf_capacity.measure(rnus=2)"),
    "drift": ("glmf_drift(oracle_url='http://127.0.0.1:9', k=0)", "glmf_drift",
              "settings.k: expected an integer >= 1, got 0", "glmf_drift(oracle_url='http://127.0.0.1:9', kk=8)"),
    "acceptance": ("glmf_acceptance(prompts_per_class=0)", "glmf_acceptance",
                   "settings.prompts_per_class: expected an integer >= 1, got 0",
                   "glmf_acceptance(prompts_per_klass=2)"),
    "tools": ("glmf_tools(max_tokens=0)", "glmf_tools", "settings.max_tokens: expected an integer >= 1, got 0",
              "glmf_tools(max_tokenz=64)"),
    "template": ("glmf_template({}, context_tokens=0)", "glmf_template",
                 "settings.context_tokens: expected an integer >= 1, got 0", "glmf_template({}, served_idz='chat')"),
    "agents": ("glmf_agents(sessions=0)", "glmf_agents", "settings.sessions: expected an integer >= 1, got 0",
               "glmf_agents(sesions=2)"),
    "agents.replay": ("glmf_replay(speedup=0)", "glmf_replay", "settings.speedup: expected a number > 0, got 0",
                      "glmf_replay(speedup_x=2)"),
}


@pytest.fixture(scope="module")
def truth():
    with TruthServer(ttft_ms=10, itl_ms=2) as ts:
        yield ts


def attach(pytester: pytest.Pytester, url: str) -> list[str]:
    pytester.makefile(".log", boot=BOOT_LOG)
    lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  mine: {{launcher: attach, url: '{url}', boot_log: boot.log}}\n")
    thresholds = pytester.makefile(".yaml", thresholds="schema: 1\nlanes:\n  mine: {}\n")
    return ["--glmf-lanes", str(lanes), "--glmf-lane", "mine", "--glmf-thresholds", str(thresholds),
            "--glmf-results", str(pytester.path / "results"), "-p", "no:cacheprovider"]


def test_every_gate_with_a_measuring_fixture_is_covered():
    assert {name.split(".")[0] for name in CALLS} == set(GATES) - {"boot"}   # boot measures nothing


@pytest.mark.parametrize("gate", CALLS)
def test_a_bad_value_and_a_misspelled_key_are_refused_alike_naming_the_test_line(pytester, truth, gate):
    bad_value, fixture, value_error, misspelled = CALLS[gate]
    name = fixture.split(".")[0]
    pytester.makepyfile(test_user=f"""
        def test_bad_value({name}):
            {bad_value}

        def test_misspelled_key({name}):
            {misspelled}
    """)
    result = pytester.runpytest("test_user.py", *attach(pytester, truth.url))
    result.assert_outcomes(failed=2)
    typo = re.search(r"\((?:.*, )?(\w+)=[^=]*\)$", misspelled).group(1)   # the key the call misspelled
    result.stdout.fnmatch_lines([
        f"{fixture}() at test_user.py:2: {value_error}",
        "_*_ test_misspelled_key _*_",
        f"{fixture}() at test_user.py:5: settings: unknown key {typo!r}; allowed: *",
    ], consecutive=True)
    out = result.stdout.str()
    assert "Traceback" not in out and "TypeError" not in out
