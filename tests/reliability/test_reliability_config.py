"""Reliability matrix, configuration that used to pass silently: a key written twice (at any depth)
and an unset `${VAR}`, in a lanes file and in a thresholds file. pytest refuses each before any
server starts, and the shell checkers `glmf lanes --lanes FILE` / `glmf thresholds FILE` refuse the
same file with the same line (pytest prints it after `ERROR: `, the checker after `glmf <cmd>: `)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_glmf.cli import main

USES_LANE = "def test_x(glmf_server): pass\n"
DUP_TAIL = "YAML would keep only the last one and silently drop the first: remove or merge one of them"
UNSET_TAIL = ("is not set in the environment; set UNSET_VAR_XYZ, or write ${UNSET_VAR_XYZ:-default} for an "
              "intended default")

# (id, lanes file, line after "{lanes}")
LANES_CASES = [
    ("copied-lane-block", "lanes:\n  batch: {launcher: sim, maxbs: 128}\n  daily: {launcher: sim}\n"
                          "  batch: {launcher: sim, maxbs: 8}\n",
     ":4: duplicate key 'batch' in lanes (first at {lanes}:2); " + DUP_TAIL),
    ("key-twice-in-a-lane", "lanes:\n  batch:\n    launcher: sim\n    extra: --max-mamba-cache-size 640\n"
                            "    extra: --max-mamba-cache-size 38\n",
     ":5: duplicate key 'extra' in lanes.batch (first at {lanes}:4); " + DUP_TAIL),
    ("unset-variable", "lanes:\n  batch:\n    launcher: sim\n    model: ${UNSET_VAR_XYZ}/GLM\n",
     ":4: ${UNSET_VAR_XYZ} " + UNSET_TAIL),
    ("malformed-reference", "lanes:\n  batch: {launcher: sim, model: '${MODEL_DIR/GLM'}\n",
     ":2: '${MODEL_DIR/GLM' is not a variable reference; write ${NAME}, or ${NAME:-default} for an intended "
     "default ($${ is a literal ${)"),
]

# (id, thresholds file, line after "{th}")
THRESHOLD_CASES = [
    ("second-boot-section", "lanes:\n  batch:\n    boot: {max_running_requests: {min: 8}}\n    tools: {}\n"
                            "    boot: {max_running_requests: {min: 1}}\n",
     ":5: duplicate key 'boot' in lanes.batch (first at {th}:3); " + DUP_TAIL),
    ("bound-twice", "lanes:\n  batch:\n    boot:\n      max_running_requests:\n        min: 8\n        min: 1\n",
     ":6: duplicate key 'min' in lanes.batch.boot.max_running_requests (first at {th}:5); " + DUP_TAIL),
    ("curve-row-key-twice", "lanes:\n  batch:\n    curve:\n      rows:\n        - users: 8\n"
                            "          per_user_tok_s: {min: 45}\n          per_user_tok_s: {min: 1}\n",
     ":7: duplicate key 'per_user_tok_s' in lanes.batch.curve.rows[0] (first at {th}:6); " + DUP_TAIL),
    ("unset-variable", "lanes:\n  batch:\n    drift:\n      settings: {reference: '${UNSET_VAR_XYZ}/ref.json'}\n",
     ":4: ${UNSET_VAR_XYZ} " + UNSET_TAIL),
]


@pytest.fixture(autouse=True)
def _unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UNSET_VAR_XYZ", raising=False)
    monkeypatch.delenv("MODEL_DIR", raising=False)


def checker(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """(exit code, stderr) of `glmf ARGV` (what an in-process pytester run wrote is dropped first)."""
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize("text, tail", [c[1:] for c in LANES_CASES], ids=[c[0] for c in LANES_CASES])
def test_a_bad_lanes_file_is_refused_by_pytest_and_glmf_lanes_alike(pytester, capsys, text, tail) -> None:
    pytester.makepyfile(USES_LANE)
    lanes = pytester.path / "lanes.yaml"
    lanes.write_text(text)
    line = f"{lanes}{tail.replace('{lanes}', str(lanes))}"
    result = pytester.runpytest("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-lane", "batch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {line}".replace("[", "[[]")])
    assert not list(pytester.path.rglob("*-server.log")), "a server was started before the error"
    assert checker(capsys, "lanes", "--lanes", str(lanes)) == (2, f"glmf lanes: {line}\n")
    assert checker(capsys, "lanes", "--lanes", str(lanes), "--lane", "batch") == (2, f"glmf lanes: {line}\n")


@pytest.mark.parametrize("text, tail", [c[1:] for c in THRESHOLD_CASES], ids=[c[0] for c in THRESHOLD_CASES])
def test_a_bad_thresholds_file_is_refused_by_pytest_and_glmf_thresholds_alike(pytester, capsys, text, tail) -> None:
    pytester.makepyfile(USES_LANE)
    th = pytester.path / "th.yaml"
    th.write_text(text)
    line = f"{th}{tail.replace('{th}', str(th))}"
    result = pytester.runpytest("-p", "no:cacheprovider", "--glmf-thresholds", str(th), "--glmf-lane", "batch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {line}".replace("[", "[[]")])
    assert not list(pytester.path.rglob("*-server.log")), "a server was started before the error"
    assert checker(capsys, "thresholds", str(th)) == (2, f"glmf thresholds: {line}\n")


def test_an_intended_default_and_a_set_variable_pass_both(pytester, capsys, monkeypatch) -> None:
    monkeypatch.setenv("GLMF_T_MODELS", "/srv/models")
    lanes = pytester.path / "lanes.yaml"
    lanes.write_text("lanes:\n  batch:\n    launcher: process\n    model: ${GLMF_T_MODELS}/GLM\n"
                     "    port: ${GLMF_T_PORT:-31000}\n    executable: ${GLMF_T_PY:-/usr/bin/python3}\n")
    capsys.readouterr()
    code = main(["lanes", "--lanes", str(lanes)])
    out = capsys.readouterr().out
    assert code == 0
    assert "/usr/bin/python3 -m sglang.launch_server --model-path /srv/models/GLM" in out and "--port 31000" in out


def test_the_console_script_prints_the_same_line(tmp_path: Path) -> None:
    """The installed `glmf` entry point, not only `main()`: one line on stderr, exit 2."""
    th = tmp_path / "th.yaml"
    th.write_text(THRESHOLD_CASES[0][1])
    proc = subprocess.run([sys.executable, "-m", "pytest_glmf.cli", "thresholds", str(th)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == f"glmf thresholds: {th}{THRESHOLD_CASES[0][2].replace('{th}', str(th))}\n"
    assert proc.stdout == ""


def test_glmf_lanes_checks_a_lane_against_the_thresholds_file(pytester, capsys) -> None:
    lanes = pytester.makefile(".yaml", lanes="lanes:\n  batch-gb300: {launcher: sim}\n")
    th = pytester.makefile(".yaml", th="lanes:\n  batch_gb300: {}\n")
    assert main(["lanes", "--lanes", str(lanes), "--lane", "batch-gb300", "--thresholds", str(th)]) == 2
    assert capsys.readouterr().err == (
        f"glmf lanes: {th} has no section for lane 'batch-gb300' (sections: batch_gb300): its gates have no bounds; "
        "add lanes.batch-gb300 to the thresholds file (--glmf-thresholds FILE), or pass --glmf-allow-unverified "
        "(ini: glmf_allow_unverified = true) if that is intended\n")
    assert main(["lanes", "--lanes", str(lanes), "--lane", "nightly"]) == 2
    assert capsys.readouterr().err == f"glmf lanes: unknown lane 'nightly' in {lanes}; known lanes: batch-gb300\n"
