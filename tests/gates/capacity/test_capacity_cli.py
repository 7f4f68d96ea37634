"""`glmf capacity` against the ground-truth server: the same search and tables as the suite, JSON
out, and bad arguments as one line with exit 2."""
from __future__ import annotations

import json

import pytest

from pytest_glmf.cli import main
from pytest_glmf.testing.truth_server import TruthServer


@pytest.fixture(scope="module")
def truth():
    # per-user speed 1000 / (20 + 8 (running - 1)) tok/s: 19.23 at 5 users, 16.67 at 6 (7 % either side of
    # 17.9: a busy machine's late sends do not move the answer; test_capacity_truth.py)
    with TruthServer(ttft_ms=20, itl_ms=20, itl_per_running_ms=8) as ts:
        yield ts


SLO_ARGS = ["--slo", "per_user_tok_s=17.9,ttft_s=1.0", "--prompt-tokens", "0", "--max-tokens", "40", "--runs", "2",
            "--resolution-users", "1", "--start", "5", "--lag-p99-max-ms", "20"]   # sized to 20 tok/s streams


def test_capacity_from_a_shell(truth, tmp_path, capsys, unfold):
    out = tmp_path / "cap.json"
    code = main(["capacity", "--url", truth.url, *SLO_ARGS, "--json", str(out)])
    printed = capsys.readouterr()
    err = unfold(printed.err)        # progress folds at 120 columns
    assert code == 0
    doc = json.loads(out.read_text())
    cap = doc["command_output"]["capacity"]
    low, high = cap["boundary_ci95"]
    # one quantity per name: the answer (the last pass), then the boundary and ITS interval, which
    # holds the answer (issue 33: "44 users, 95 % CI 46-48" is gone) and the boundary itself, on
    # its scale (issue 40: "at 5.61, 95 % CI 5-5")
    assert printed.out.splitlines()[0] == (
        "capacity at >= 17.9 tok/s for 95 % of users, TTFT p95 <= 1 s, no queueing past the seats and KV pool "
        "(the prompt file's prompt + 40 output tokens): 5 users (the last probe that passed: the service level held "
        "at 5, 6 missed per-user tok/s: 0 % of users >= 17.9 (p5 "
        f"{printed.out.split('(p5 ')[1].split(')')[0]}), needs 95 %; resolution 1); the boundary (a fit of the "
        f"probes' margins) at {cap['boundary_users']:.3g}, 95 % CI {low:.3g}-{high:.3g}; 2 probe(s) (1 chosen by "
        "the model), "
        f"22 requests, {printed.out.split('22 requests, ')[1].split(' s')[0]} s")
    assert "capacity users=5: warm pass (discarded)" in err        # progress on stderr
    # the header names the workload as the verdict does, and the first value it really probes
    assert ("capacity: the prompt file's prompt + 40 output tokens per user, >= 17.9 tok/s for 95 % of users, "
            "TTFT p95 <= 1 s, no queueing past the seats and KV pool; at most 1024 users") in err
    assert "; first probe 5" in err
    assert max(map(len, printed.err.splitlines())) <= 120
    assert cap["users"] == 5 and cap["search"]["first_fail"]["x"] == 6 and cap["undecided"] == ""
    assert cap["boundary_ci95"] == cap["search"]["boundary_ci95"] and 5 <= low <= cap["boundary_users"] <= high <= 6
    # the result file's entry, as the suite records it, says the same
    entry = doc["gates"]["capacity"]["users@file+40"]
    assert (entry["users"], entry["boundary_users"], entry["boundary_ci95"]) == (5, cap["boundary_users"], [low, high])
    assert "ci95" not in cap      # no unnamed interval left to misread as the answer's
    assert cap["cost"] == {"probes": 2, "model_probes": 1, "requests": 2 * 5 + 2 * 6,
                           "wall_s": cap["search"]["wall_s"]}
    assert cap["search"]["boundary"] == "smooth"


def test_the_header_names_the_first_value_really_probed(truth, tmp_path, capsys):
    """A start above the seats is clamped by the search: the header says so (issue 33: "first probe
    44" was printed before probing 23)."""
    boot = tmp_path / "boot.log"
    boot.write_text("[2026-09-11 10:00:02 TP0] max_total_num_tokens=10000000, chunked_prefill_size=8192, "
                    "max_prefill_tokens=16384, max_running_requests=3, context_len=131072, available_gpu_mem=10.00 GB\n"
                    "[2026-09-11 10:00:03] The server is fired up and ready to roll!\n")
    code = main(["capacity", "--url", truth.url, "--slo", "ttft_s=1", "--prompt-tokens", "0", "--max-tokens", "8",
                 "--runs", "1", "--start", "44", "--boot-log", str(boot)])
    err = capsys.readouterr().err
    assert code == 0
    assert "at most 3 users (3 seats (max_running_requests)); first probe 3" in err, err
    assert "first probe 44" not in err


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
    code = main(["capacity", "--url", truth.url, "--slo", "per_user_tok_s=17.9", "--prompt-tokens", "0",
                 "--max-tokens", "40", "--runs", "1", "--resolution-users", "1", "--start", "2", "--bisect",
                 "--json", str(out)])
    assert code == 0
    search = json.loads(out.read_text())["gates"]["capacity"]["users@file+40"]["search"]
    # bracket 2, 3, 5, 9 (the step doubles), bisect 7, 6: no probe chosen by the model
    assert [p["x"] for p in search["probes"]] == [2, 3, 5, 9, 7, 6] and search["cost"]["model_probes"] == 0
    assert "(1 chosen by the model)" not in capsys.readouterr().out
