"""A workload the server's context cannot hold is refused before a request is sent, in one line that
names the settings to lower (thresholds keys in a test, flags in a shell) and the engine flag that
serves a longer context: the simulator served with a 2,048-token context against the curve's
~2,400-token briefing + 384 output tokens (a real vLLM answered every request HTTP 400)."""
from __future__ import annotations

import re
import subprocess
import sys
from importlib import resources

import httpx
import pytest

SUITE = str(resources.files("pytest_glmf.suites").joinpath("test_curve.py"))


def test_the_suite_refuses_a_row_whose_requests_exceed_the_context(pytester, unfold):
    lanes = pytester.makefile(".yaml", lanes=(
        "lanes:\n  short:\n    launcher: sim\n    model: /models/GLM-5.3-Flash-NVFP4\n    spec: none\n"
        "    ctx: 2048\n    time_scale: 0.05\n    boot_timeout_s: 60\n"))
    thresholds = pytester.makefile(".yaml", thresholds=(
        "schema: 1\nlanes:\n  short:\n    curve:\n"
        "      settings: {max_tokens: 384, runs: 1, prompt_tokens: 2400}\n"
        "      rows:\n        - {users: 1, per_user_tok_s: {min: 1}}\n"))
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "short", "--glmf-thresholds",
                                str(thresholds), "--glmf-results", str(pytester.path / "results"), SUITE)
    result.assert_outcomes(failed=1)
    out = unfold(result.stdout.str())
    # counted with the simulator's /tokenize: refused although under the 10 % an estimate gets
    assert re.search(r"thresholds.yaml: lanes.short.curve.settings: curve: a request needs ~2,7\d\d tokens "
                     r"\(prompt ~2,[34]\d\d, counted with /tokenize, \+ max_tokens 384\) but the server's context is "
                     r"2,048: lower curve.settings.prompt_tokens / max_tokens \(thresholds.yaml\), or serve a longer "
                     r"context \(vLLM --max-model-len, SGLang --context-length\)", out), out
    assert "warm pass" not in out and "failed requests" not in out     # nothing was sent


@pytest.fixture(scope="module")
def short_sim(glmf_sim, tmp_path_factory):
    """The simulator serving a 2,048-token context (tests/conftest.py's `glmf_sim`)."""
    with glmf_sim(tmp_path_factory.mktemp("short"), "--context-length", "2048", "--time-scale", "0.05") as url:
        yield url


def test_glmf_curve_refuses_in_one_line_naming_the_flags(short_sim):
    cmd = [sys.executable, "-m", "pytest_glmf.cli", "curve", "--url", short_sim, "--users", "1", "--runs", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("glmf curve: a request needs ~2,9"), last
    assert "estimated at ~4 characters a token" in last
    assert "the server's context is 2,048: lower --prompt-tokens/--max-tokens, or serve a longer context" in last
    assert "warm pass" not in done.stderr and not done.stdout


def test_the_simulator_answers_an_over_context_request_as_sglang_does(short_sim):
    body = {"model": "default", "messages": [{"role": "user", "content": "word " * 1500}], "max_tokens": 800}
    r = httpx.post(short_sim + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 400
    # SGLang 0.5.23 tokenizer_manager._validate_one_request, word for word
    assert r.json()["message"].startswith("Requested token count exceeds the model's maximum context length of 2048 "
                                          "tokens. You requested a total of ")
    assert r.json()["message"].endswith("tokens for the completion. Please reduce the number of tokens in the input "
                                        "messages or the completion to fit within the limit.")


def test_an_estimate_is_refused_only_when_clearly_over_a_count_as_soon_as_over():
    from pytest_glmf.load import context_check

    assert context_check(None, 1900, 300, 2048) is None           # 2,200: within 10 % of an estimate
    assert context_check(None, 1950, 384, 2048) is not None       # 2,334: over by 14 %
    assert context_check(1700, 1900, 384, 2048) is not None       # counted: 2,084 > 2,048
    assert context_check(1600, 9999, 384, 2048) is None
    assert context_check(2400, 2554, 384, None) is None           # the context unknown: nothing refused


def test_glmf_capacity_refuses_alike_naming_its_flags(short_sim):
    cmd = [sys.executable, "-m", "pytest_glmf.cli", "capacity", "--url", short_sim, "--slo", "per_user_tok_s=1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("glmf capacity: a request needs ~2,"), last
    assert "counted with /tokenize" in last and "lower --prompt-tokens/--max-tokens" in last
    assert "capacity users=8: misses" not in done.stderr      # no probe was judged


def test_measure_capacity_refuses_before_its_warm_pass_naming_capacity_settings(short_sim):
    """As a test's fixture measures it (the API, not the CLI): the refusal names the capacity gate's
    thresholds settings, and comes before the probe's warm pass (it named curve's, after 400s)."""
    from pytest_glmf.gates.capacity.measure import measure_capacity
    from pytest_glmf.gates.capacity.spec import SLO
    from pytest_glmf.load import ContextTooShort

    said: list[str] = []
    with pytest.raises(ContextTooShort) as refused:
        measure_capacity(short_sim, SLO(per_user_tok_s=1.0), facts={"context_len": 2048}, time_scale=0.05,
                         progress=said.append)
    assert str(refused.value).startswith("capacity: a request needs ~2,"), str(refused.value)
    assert "lower capacity.settings.prompt_tokens / max_tokens (thresholds.yaml)" in str(refused.value)
    assert not any("warm pass" in line for line in said), said
