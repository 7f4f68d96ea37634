"""`glmf capacity` against the ground-truth server: the same search and tables as the suite, JSON
out, and bad arguments as one line with exit 2."""
from __future__ import annotations

import json

import pytest

from pytest_glmf.cli import main
from pytest_glmf.testing.truth_server import TruthServer


@pytest.fixture(scope="module")
def truth():
    # per-user speed 1000 / (20 + 0.8 (running - 1)) tok/s: 27.17 at 22 users, 26.60 at 23
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=0.8) as ts:
        yield ts


def test_capacity_from_a_shell(truth, tmp_path, capsys):
    out = tmp_path / "cap.json"
    code = main(["capacity", "--url", truth.url, "--slo", "per_user_tok_s=26.88,ttft_s=1.0", "--prompt-tokens", "0",
                 "--max-tokens", "60", "--runs", "2", "--resolution-users", "1", "--start", "22", "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0
    assert printed.out.splitlines()[0] == (
        "capacity at >= 26.88 tok/s for 95 % of users, TTFT p95 <= 1 s, no queueing past the seats and KV pool "
        "(the prompt file's prompt + 60 output tokens): 22 users, 95 % CI 22-22 (the service level held at 22, 23 "
        f"missed per-user tok/s: 0 % of users >= 26.88 (p5 {printed.out.split('(p5 ')[1].split(')')[0]}), needs 95 %; "
        "resolution 1); 2 probe(s) (1 chosen by the model), 90 requests, "
        f"{printed.out.split('90 requests, ')[1].split(' s')[0]} s")
    assert "capacity users=22: warm pass (discarded)" in printed.err        # progress on stderr
    doc = json.loads(out.read_text())
    assert doc["capacity"]["users"] == 22 and doc["capacity"]["search"]["first_fail"]["x"] == 23
    # the interval and the cost beside the answer (the existing keys stay)
    assert doc["capacity"]["ci95"] == [22, 22] and doc["capacity"]["search"]["ci95"] == [22, 22]
    assert doc["capacity"]["cost"] == {"probes": 2, "model_probes": 1, "requests": 2 * 22 + 2 * 23,
                                       "wall_s": doc["capacity"]["search"]["wall_s"]}
    assert doc["capacity"]["search"]["boundary"] == "smooth"


@pytest.mark.parametrize("args, message", [
    (["--slo", "fast"], "glmf capacity: error: --slo: 'fast' is not KEY=VALUE"),
    (["--slo", "per_user_tok_s=x"], "glmf capacity: error: --slo per_user_tok_s: expected a number, got 'x'"),
    (["--slo", "users_pct=90"], "glmf capacity: error: --slo: a service level needs per_user_tok_s and/or ttft_s"),
    (["--slo", "ttft_s=1", "--plot", "f.png"], "glmf capacity: error: --plot draws the frontier: give --context too"),
    (["--slo", "ttft_s=1", "--context", "2048,8k"], "glmf capacity: error: --context takes comma-separated integers"),
])
def test_bad_arguments_are_one_line_and_exit_2(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["capacity", "--url", "http://127.0.0.1:9", *args])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


def test_a_frontier_needs_the_servers_tokenizer(truth, capsys):
    code = main(["capacity", "--url", truth.url, "--slo", "ttft_s=1", "--context", "2048", "--runs", "1"])
    assert code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"glmf capacity: capacity settings.prompt_tokens: {truth.url} has no /tokenize endpoint to fit prompts to a "
        "token count (prompt_tokens: null, or glmf capacity --prompt-tokens 0, sends the prompt file as it is)")


def test_bisect_turns_the_model_off(truth, tmp_path, capsys):
    out = tmp_path / "cap.json"
    code = main(["capacity", "--url", truth.url, "--slo", "per_user_tok_s=26.88", "--prompt-tokens", "0",
                 "--max-tokens", "60", "--runs", "1", "--resolution-users", "1", "--start", "21", "--bisect",
                 "--json", str(out)])
    assert code == 0
    search = json.loads(out.read_text())["capacity"]["search"]
    # bracket 21, 22, 24 (the step doubles), bisect 23: no probe chosen by the model
    assert [p["x"] for p in search["probes"]] == [21, 22, 24, 23] and search["cost"]["model_probes"] == 0
    assert "(1 chosen by the model)" not in capsys.readouterr().out
