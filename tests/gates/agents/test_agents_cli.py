"""`glmf agents` and `glmf agents replay` through the dispatcher, against the simulator's daily lane
(time scale 0.1): the tables, the JSON, exit 1 naming a missed bound, and bad input refused by
argparse naming the flag and what it allows (exit 2, no traceback)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_glmf.cli import SUBCOMMANDS, main
from pytest_glmf.sim.process import SimProcess

sys.path.insert(0, str(Path(__file__).parent))
from test_agents_sim import DAILY, SCALE  # noqa: E402

SESSIONS = ["--sessions", "3", "--turns", "2", "--system-tokens", "200", "--user-tokens", "40", "--max-tokens", "16",
            "--think-time", "0.5", "--time-scale", str(SCALE)]
# the simulator shares 2 cores with the client: lateness is the truth tests' concern, not these
CALM = ["--send-lateness-max", "1"]


@pytest.fixture(scope="module")
def sim():
    with SimProcess(DAILY, time_scale=SCALE) as s:
        yield s


def test_agents_is_a_subcommand_of_its_gate():
    assert SUBCOMMANDS["agents"][0] == "pytest_glmf.gates.agents.cli"


def test_sessions_print_the_per_turn_table_and_write_the_verdict(sim, tmp_path, capsys):
    out = tmp_path / "agents.json"
    code = main(["agents", "--url", sim.url, *SESSIONS, *CALM, "--max", "ttft_p95_s=60",
                 "--min", "sessions_completed_pct=100,returning_cache_hit_pct=10", "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err.startswith(f"glmf agents: 3 sessions x 2 turns against {sim.url}")
    assert "turn | turns | TTFT p50 s | TTFT p95 s" in captured.out
    assert "sessions: 3/3 completed (100.0 %), 6 turns answered" in captured.out
    doc = json.loads(out.read_text())
    assert doc["gates"]["agents"]["agents"]["turns_completed"] == 6 and doc["exitstatus"] == 0
    assert doc["command_output"]["missed"] == []
    assert doc["command_output"]["bounds"] == {"ttft_p95_s": {"max": 60.0}, "sessions_completed_pct": {"min": 100.0},
                             "returning_cache_hit_pct": {"min": 10.0}}


def test_a_missed_bound_exits_1_naming_it(sim, capsys):
    code = main(["agents", "--url", sim.url, *SESSIONS, *CALM, "--max", "ttft_p50_s=0.000001"])
    err = capsys.readouterr().err
    assert code == 1
    assert "agents: 1 threshold(s) missed" in err
    assert [line for line in err.splitlines() if line.startswith("ttft_p50_s ")][0].endswith("(--min/--max)")


def test_replay_prints_its_table_and_progress(sim, tmp_path, capsys):
    out = tmp_path / "replay.json"
    code = main(["agents", "replay", "--url", sim.url, "--seconds", "20", "--time-scale", str(SCALE),
                 "--max", "send_lateness_p99_s=1,failed_requests=0", "--min", "output_tokens_exact_pct=100",
                 "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc = json.loads(out.read_text())
    replay = doc["gates"]["agents"]["replay"]
    n = replay["requests"]
    assert n > 20 and replay["failed_requests"] == 0 and doc["command_output"]["missed"] == []
    err = captured.err.splitlines()
    assert err[0] == (f"glmf agents replay: {n} requests of azure_llm_conv_2023_5min.csv [0, 20) s at x1 "
                      f"against {sim.url}")
    assert err[-1].startswith("replay: trace [0, 20) s: ") and err[-1].endswith(f"{n}/{n} done")
    assert captured.out.startswith("trace replay: azure_llm_conv_2023_5min.csv [0, 20) s at x1, simulator time "
                                   "scale 0.1: recipe units")
    assert f"requests                    | {n}" in captured.out


def test_a_replay_bound_missed_exits_1(sim, capsys):
    code = main(["agents", "replay", "--url", sim.url, "--seconds", "5", "--time-scale", str(SCALE),
                 "--max", "send_lateness_p99_s=1,ttft_p50_s=0.000001"])
    err = capsys.readouterr().err
    assert code == 1
    assert "trace replay: 1 threshold(s) missed" in err and "\nttft_p50_s " in err


@pytest.mark.parametrize("argv, message", [
    (["--sessions", "0"], "--sessions: expected an integer >= 1, got 0"),
    (["--think-time", "-1"], "--think-time: expected a number >= 0, got -1.0"),
    (["--max", "ttft_p95"], "--max: 'ttft_p95' is not METRIC=X (metrics: ttft_p95_s, ttft_p50_s"),
    (["--max", "ttft_p95_s=soon"], "--max ttft_p95_s: expected a number, got 'soon'"),
    (["--max", "ttft_p99_s=1"], "--min/--max: unknown key 'ttft_p99_s'; allowed metrics: capacity_sessions"),
    (["--min", "capacity_sessions=8"], "--min: capacity_sessions is measured by a capacity search"),
    (["--min", "returning_cache_hit_pct=120"], "returning_cache_hit_pct: min 120 can never be met"),
    (["--time-scale", "0"], "--time-scale takes a number > 0, got 0"),
    (["--sessions-file", "nowhere.yaml"], "--sessions-file: nowhere.yaml: sessions file not found"),
    (["replay", "--trace", "nowhere.csv"], "--trace: nowhere.csv: trace file not found (packaged: "
                                           "azure_llm_conv_2023_5min.csv)"),
    (["replay", "--start", "1000"], "--start/--seconds: no request of azure_llm_conv_2023_5min.csv arrives in that "
                                    "window (the trace is 29"),
    (["replay", "--speedup", "0"], "--speedup: expected a number > 0, got 0.0"),
    (["replay", "--seconds", "soon"], "--seconds: expected a number of trace seconds or all, got 'soon'"),
    (["replay", "--seconds", "0"], "--seconds: expected a number > 0, got 0.0"),
    (["replay", "--max", "errors=0"], "unknown key 'errors'; allowed metrics: failed_requests"),
])
def test_bad_input_names_the_flag_and_what_it_allows(argv, message, capsys):
    sub = argv[:1] if argv[0] == "replay" else []
    with pytest.raises(SystemExit) as exc:
        main(["agents", *sub, "--url", "http://127.0.0.1:9", *argv[len(sub):]])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert f"glmf agents{' replay' if sub else ''}: error: " in err and message in err, err
    assert "Traceback" not in err


def test_a_bad_sessions_file_names_its_key(tmp_path, capsys):
    bad = tmp_path / "s.yaml"
    bad.write_text("template: {session: 3}\n")
    with pytest.raises(SystemExit):
        main(["agents", "--url", "http://127.0.0.1:9", "--sessions-file", str(bad)])
    assert f"--sessions-file: {bad}: template: unknown key 'session'" in capsys.readouterr().err


def test_a_server_that_is_not_there_is_one_line(capsys):
    code = main(["agents", "replay", "--url", "http://127.0.0.1:9", "--seconds", "5"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.splitlines()[-1].startswith("glmf agents replay: ")
