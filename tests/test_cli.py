"""The `glmf` dispatcher and the core's own subcommands (lanes, thresholds)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from pytest_glmf.cli import SUBCOMMANDS, main


def test_usage_lists_every_subcommand_once_by_group(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: glmf <command> [args...]\n\nmeasure a server (--url URL, or a lane):\n  curve ")
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert sorted(listed) == sorted(SUBCOMMANDS)      # each command in exactly one group
    titles = [line for line in out.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert titles == ["measure a server (--url URL, or a lane):", "results:", "lanes and configuration:", "engines:"]
    assert "one HTML page (--html)" in out


def test_glmf_without_a_command_is_a_usage_error_on_stderr() -> None:
    """Issue 40: `glmf` alone printed the help to stdout (what a script would parse as output)."""
    glmf = Path(sys.executable).with_name("glmf")
    proc = subprocess.run([str(glmf)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("glmf: a command is required\n\nusage: glmf <command> [args...]")


def test_glmf_sim_help_shows_its_own_flags_first_with_their_defaults() -> None:
    """Issue 40: 148 lines, ~45 SGLang flags without help above the simulator's own, no default
    port or time scale."""
    glmf = Path(sys.executable).with_name("glmf")
    proc = subprocess.run([str(glmf), "sim", "--help"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "100"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "usage: glmf sim [--port N] [--time-scale X] [simulator flags] [SGLang flags]"
    assert "127.0.0.1:30000 (--port N)" in proc.stdout and "(--time-scale 1.0)" in proc.stdout
    sim, sglang = lines.index("simulator flags:"), lines.index("SGLang flags:")
    assert sim < sglang
    assert lines[sim + 1].strip() == "the simulator's own knobs (a real SGLang refuses them)"
    assert lines[sglang + 1].strip().startswith("accepted as SGLang accepts them, so a real lane's command line")
    own = "\n".join(lines[sim:sglang])
    assert "--time-scale X" in own and "(default: 1.0)" in own and "--fault VALUE" in own
    theirs = "\n".join(lines[sglang:])
    assert "--port N              where it listens (default: 30000)" in theirs
    assert "--speculative-num-steps N\n" in theirs      # short placeholders: one line per flag
    assert len(lines) < 120


def test_unknown_command(capsys) -> None:
    assert main(["bench"]) == 2
    assert capsys.readouterr().err.startswith("glmf: unknown command 'bench'\n\nusage: glmf <command>")


def test_console_script_dispatches_to_the_owning_module(tmp_path: Path) -> None:
    """`glmf bootlog FILE --json` runs pytest_glmf.gates.boot.parse.cli through the installed entry point."""
    log = tmp_path / "boot.log"
    log.write_text("[2026-09-11 10:00:03] The server is fired up and ready to roll!\n")
    glmf = Path(sys.executable).with_name("glmf")
    proc = subprocess.run([str(glmf), "bootlog", str(log), "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["gates"]["boot"]["facts"]["ready"] is True


def test_every_subcommand_module_is_named_like_the_contract() -> None:
    assert SUBCOMMANDS["sim"][0] == "pytest_glmf.sim.__main__"
    assert SUBCOMMANDS["bootlog"][0] == "pytest_glmf.gates.boot.cli"
    assert SUBCOMMANDS["curve"][0] == "pytest_glmf.gates.curve.cli"
    assert SUBCOMMANDS["drift"][0] == "pytest_glmf.gates.drift.cli"
    assert SUBCOMMANDS["accept"][0] == "pytest_glmf.gates.acceptance.cli"
    assert SUBCOMMANDS["tools"][0] == "pytest_glmf.gates.tools.cli"
    assert SUBCOMMANDS["report"][0] == "pytest_glmf.results.report"


def test_lanes_prints_each_lanes_command_line(capsys) -> None:
    assert main(["lanes"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "daily (sglang, launcher sim, from <built-in>):"
    assert out[1].startswith(f"  {sys.executable} -m pytest_glmf.sim --model-path /models/GLM-5.3-Flash-NVFP4 "
                             "--speculative-algorithm DFLASH")
    assert out[1].endswith("--time-scale 1")
    # the sim and process launchers pick a free port at launch: no "--port 30000" that never happens
    assert " --port PORT " in out[1] and "30000" not in out[1]
    assert out[2] == "  (PORT: a free port, chosen at launch; set port: in the lane to fix one)"


def test_lanes_shows_a_fixed_port_as_it_is(tmp_path: Path, capsys) -> None:
    lanes = tmp_path / "lanes.yaml"
    lanes.write_text("lanes:\n  mine: {launcher: process, engine: sglang, model: /m, port: 31000}\n")
    assert main(["lanes", "--lanes", str(lanes)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].endswith("--host 127.0.0.1 --port 31000") and len(out) == 2


def test_lanes_json_and_errors(tmp_path: Path, capsys) -> None:
    assert main(["lanes", "--json"]) == 0
    lanes = json.loads(capsys.readouterr().out)
    assert lanes["batch"]["argv"][:3] == ["python3", "-m", "sglang.launch_server"]
    bad = tmp_path / "lanes.yaml"
    bad.write_text("lanes:\n  x: {launcher: ssh}\n")
    assert main(["lanes", "--lanes", str(bad)]) == 2
    assert capsys.readouterr().err == (f"glmf lanes: {bad}: lane 'x': launcher: expected one of docker, process, "
                                       "sim, attach, got 'ssh'\n")


def test_thresholds_checks_a_file(tmp_path: Path, capsys) -> None:
    assert main(["thresholds"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("thresholds.yaml: ok")
    bad = tmp_path / "t.yaml"
    bad.write_text("lanes:\n  batch:\n    boot: {seats: {min: 1}}\n")
    assert main(["thresholds", str(bad)]) == 2
    assert "lanes.batch.boot: unknown key 'seats'" in capsys.readouterr().err


def test_every_subcommand_answers_help(capsys) -> None:
    for sub in SUBCOMMANDS:
        try:
            code = main([sub, "--help"])
        except SystemExit as exc:
            code = exc.code
        assert code == 0, sub
        assert "usage:" in capsys.readouterr().out, sub


# ---------------------------------------------------------------------------- Ctrl-C (issue 33, item 6)


@pytest.fixture(scope="module")
def sim_url(glmf_sim: Callable[..., AbstractContextManager[str]], tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[str]:
    """The simulator, as a user's own server, at 1/20 of the recipe's time."""
    with glmf_sim(tmp_path_factory.mktemp("sim"), "--time-scale", "0.05") as url:
        yield url


def ctrl_c_after(args: list[str], line_starts: str, cwd: Path) -> tuple[int, str, str]:
    """Run `glmf ARGS`, send SIGINT (what Ctrl-C sends) once stderr has a line starting with
    `line_starts`; its exit status, stdout and stderr."""
    err: list[str] = []
    with subprocess.Popen([str(Path(sys.executable).parent / "glmf"), *args], cwd=cwd, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)
            if line.startswith(line_starts):
                proc.send_signal(signal.SIGINT)
                break
        else:
            proc.kill()
            pytest.fail(f"glmf {args[0]} ended before printing {line_starts!r}:\n{''.join(err)}")
        out, rest = proc.communicate(timeout=60)
    return proc.returncode, out, "".join(err) + rest


def test_ctrl_c_on_glmf_curve_is_one_line_and_keeps_the_finished_rows(sim_url: str, tmp_path: Path) -> None:
    out = tmp_path / "curve.json"
    code, printed, err = ctrl_c_after(["curve", "--url", sim_url, "--users", "1,2,48", "--runs", "2", "--no-warmup",
                                       "--client-retries", "0", "--max-tokens", "32", "--json", str(out)],
                                      "curve users=2 run 1/2", tmp_path)
    assert code == 130 and "Traceback" not in err, err
    assert err.splitlines()[-1] == (f"glmf curve: interrupted (Ctrl-C / SIGINT) before the end; 1 of 3 rows written "
                                    f"to {out}, marked incomplete")
    assert printed.splitlines()[0].startswith("users | aggregate tok/s")    # the finished rows' table
    doc = json.loads(out.read_text())
    assert doc["incomplete"] == ["interrupted (Ctrl-C / SIGINT) before the end"]
    assert list(doc["gates"]["curve"]) == ["users=1"]                # the row as the result file keeps it
    rows = doc["command_output"]["rows"]
    assert [row["users"] for row in rows] == [1] and rows[0]["per_run"][0]["records"]
    # issue 40: the partial file reads as partial wherever it goes, first of all in glmf report
    report = subprocess.run([str(Path(sys.executable).parent / "glmf"), "report", str(out)], text=True,
                            capture_output=True)
    assert report.returncode == 1, report.stderr
    assert report.stdout.splitlines()[0] == "INCOMPLETE: interrupted (Ctrl-C / SIGINT) before the end"
    assert "\n1     | " in report.stdout                                 # its finished row, still shown


def test_ctrl_c_on_glmf_capacity_is_one_line_and_keeps_the_probes(sim_url: str, tmp_path: Path) -> None:
    out = tmp_path / "cap.json"
    code, _, err = ctrl_c_after(["capacity", "--url", sim_url, "--slo", "per_user_tok_s=50,ttft_s=1", "--runs", "1",
                                 "--max-tokens", "32", "--start", "2", "--time-scale", "0.05", "--json", str(out),
                                 # about Ctrl-C, not the client: a loaded box's late stamps must not leave the
                                 # probe unmeasured (it then ends "undecided" before the line waited for)
                                 "--client-error-max", "100"],
                                "capacity users=2: meets the service level", tmp_path)
    assert code == 130 and "Traceback" not in err, err
    assert err.splitlines()[-1] == (f"glmf capacity: interrupted (Ctrl-C / SIGINT) before the end; no finished "
                                    f"search; 1 probe(s) written to {out}, marked incomplete")
    doc = json.loads(out.read_text())
    assert doc["incomplete"] == ["interrupted (Ctrl-C / SIGINT) before the end"] and doc["command_output"]["slo"]
    assert any(line.startswith("capacity users=2: meets the service level") for line in doc["command_output"]["progress"])


# -- Ctrl-C on the other measuring commands: what finished goes to --json, marked as curve/capacity mark it

DAILY_SIM = ["--model-path", "/models/GLM-5.3-Flash-NVFP4", "--speculative-algorithm", "DFLASH",
             "--speculative-draft-model-path", "/models/GLM-5.3-Flash-DFlash2", "--speculative-dflash-block-size", "7",
             "--max-mamba-cache-size", "48", "--tool-call-parser", "glm47", "--enable-cache-report", "--autotune-s", "0"]


@pytest.fixture(scope="module")
def daily_sim() -> Iterator[str]:
    """The daily lane's simulator (a tool parser, speculation, the cache report): every gate has its server."""
    from pytest_glmf.sim.process import SimProcess

    with SimProcess(DAILY_SIM, time_scale=0.1) as sim:
        yield sim.url


def ctrl_c_after_calls(monkeypatch: pytest.MonkeyPatch, module: object, name: str, calls: int) -> None:
    """Ctrl-C while the measurement makes its call number `calls + 1` of `module.name`: the calls
    before it are the real ones (the work that finished), that one is interrupted."""
    real, made = getattr(module, name), []

    def wrapped(*args, **kwargs):
        if len(made) >= calls:
            raise KeyboardInterrupt
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)


def interrupted_doc(code: int, err: str, out: Path, finished: str, command: str) -> dict:
    assert code == 130 and "Traceback" not in err, err
    assert err.splitlines()[-1] == (f"glmf {command}: interrupted (Ctrl-C / SIGINT) before the end; {finished} "
                                    f"written to {out}, marked incomplete")
    doc = json.loads(out.read_text())
    assert doc["incomplete"] == ["interrupted (Ctrl-C / SIGINT) before the end"]
    # glmf report says so first, and exits 1 (issue 40)
    with contextlib.redirect_stdout(io.StringIO()) as report:
        assert main(["report", str(out)]) == 1
    assert report.getvalue().startswith("INCOMPLETE: interrupted (Ctrl-C / SIGINT) before the end\n")
    return doc


def test_ctrl_c_on_glmf_tools_keeps_the_finished_turns(daily_sim: str, tmp_path: Path, monkeypatch, capsys) -> None:
    import pytest_glmf.gates.tools.harness as harness

    ctrl_c_after_calls(monkeypatch, harness, "run_turn", 2)
    out = tmp_path / "tools.json"
    code = main(["tools", "--url", daily_sim, "--no-stream-check", "--json", str(out)])
    printed, err = capsys.readouterr()
    doc = interrupted_doc(code, err, out, "2 turn(s)", "tools")
    (entry,) = doc["gates"]["tools"].values()
    assert entry["turns"] == 2 and len(entry["results"]) == 2 and entry["parsed"] == 2, doc
    assert printed.startswith("tool turns parsed 2/2 at concurrency 1")      # the finished turns' summary
    # without --json the line says how to keep them
    monkeypatch.undo()
    ctrl_c_after_calls(monkeypatch, harness, "run_turn", 1)
    assert main(["tools", "--url", daily_sim, "--no-stream-check"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == ("glmf tools: interrupted (Ctrl-C / SIGINT) before the end; "
                                                        "1 turn(s) finished (--json FILE keeps them)")


def test_ctrl_c_on_glmf_accept_keeps_the_finished_requests(daily_sim: str, tmp_path: Path, monkeypatch, capsys) -> None:
    import pytest_glmf.gates.acceptance.probe as probe

    ctrl_c_after_calls(monkeypatch, probe, "measure_sglang", 2)
    out = tmp_path / "accept.json"
    code = main(["accept", "--url", daily_sim, "--prompts-per-class", "1", "--max-tokens-scale", "0.1",
                 "--json", str(out)])
    doc = interrupted_doc(code, capsys.readouterr().err, out, "2 request(s)", "accept")
    output = doc["command_output"]
    assert len(output["records"]) == 2 and not any(r["error"] for r in output["records"])
    assert [c["class"] for c in output["classes"]] == [r["class_name"] for r in output["records"]]
    assert len(doc["gates"]["acceptance"]["requests"]) == 2


def test_ctrl_c_on_glmf_template_check_keeps_the_finished_conversations(daily_sim: str, tmp_path: Path, monkeypatch,
                                                                        capsys) -> None:
    import pytest_glmf.gates.template.api as template_api

    ref = tmp_path / "ref.json"
    assert main(["template", "reference", "--url", daily_sim, "--out", str(ref)]) == 0
    ctrl_c_after_calls(monkeypatch, template_api, "served_prompt_ids", 1)
    out = tmp_path / "template.json"
    code = main(["template", "check", "--url", daily_sim, "--reference", str(ref), "--json", str(out)])
    doc = interrupted_doc(code, capsys.readouterr().err, out, "1 conversation(s)", "template check")
    assert doc["gates"]["template"]["check"]["conversations"] == 1 and doc["gates"]["template"]["check"]["matched"] == 1


def test_ctrl_c_on_glmf_agents_keeps_the_finished_turns(daily_sim: str, tmp_path: Path, monkeypatch, capsys) -> None:
    import pytest_glmf.gates.agents.runner as runner

    real, done = runner._one_turn, []

    async def one_turn(*args, **kwargs):      # Ctrl-C as the first turn after one that finished is sent
        if done:
            raise KeyboardInterrupt
        answered = await real(*args, **kwargs)
        done.append(answered)
        return answered

    monkeypatch.setattr(runner, "_one_turn", one_turn)
    out = tmp_path / "agents.json"
    code = main(["agents", "--url", daily_sim, "--sessions", "2", "--turns", "3", "--max-tokens", "8",
                 "--think-time", "0.5", "--no-warmup", "--time-scale", "0.1", "--json", str(out)])
    err = capsys.readouterr().err
    turns = json.loads(out.read_text())["command_output"]["agents"]["turn_records"] if out.exists() else []
    assert 1 <= len(turns) <= 2, err
    doc = interrupted_doc(code, err, out, f"{len(turns)} turn(s)", "agents")
    assert all(t["turn"] == 0 for t in turns) and doc["command_output"]["bounds"] == {}


def test_ctrl_c_on_glmf_agents_replay_keeps_the_finished_windows(daily_sim: str, tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    code, _, err = ctrl_c_after(["agents", "replay", "--url", daily_sim, "--seconds", "60", "--time-scale", "0.1",
                                 "--no-warmup", "--json", str(out)], "replay: trace [", tmp_path)
    doc = interrupted_doc(code, err, out, "1 window(s)", "agents replay")
    assert [line for line in doc["command_output"]["replay"]["progress"] if line.startswith("replay: trace [")] == \
        [line for line in err.splitlines() if line.startswith("replay: trace [")]


def test_ctrl_c_on_any_other_glmf_command_is_one_line(monkeypatch, capsys) -> None:
    import pytest_glmf.gates.tools.cli as tools_cli

    def interrupted_cli(argv: list[str]) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(tools_cli, "cli", interrupted_cli)
    assert main(["tools", "--url", "http://127.0.0.1:9"]) == 130
    assert capsys.readouterr().err == "glmf tools: interrupted (Ctrl-C / SIGINT) before the end\n"
def test_curve_sends_the_servers_first_model_as_capacity_does(tmp_path: Path, capsys) -> None:
    """`glmf curve --model` defaulted to 'default' (vLLM refuses any name but its own), `glmf
    capacity --model` to the server's first model: both send the first id of /v1/models."""
    from pytest_glmf.testing.truth_server import TruthServer

    for sub in ("curve", "capacity"):
        with pytest.raises(SystemExit):
            main([sub, "--help"])
        assert "--model MODEL" in (text := " ".join(capsys.readouterr().out.split()))
        assert "(default: the server's first model" in text, sub
    out = tmp_path / "curve.json"
    with TruthServer(ttft_ms=5, itl_ms=2) as truth:
        main(["curve", "--url", truth.url, "--users", "1", "--runs", "1", "--no-warmup", "--max-tokens", "8",
              "--json", str(out)])
    assert json.loads(out.read_text())["command_output"]["workload"]["model"] == "truth"
