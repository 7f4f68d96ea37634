"""The gates' CLI flags come from their specs' settings (gates/flags.py): one flag per setting,
named after it, with the declaration's default and range; a value out of range is one argparse
error naming the flag as typed and what it allows; the names users knew stay as aliases."""
from __future__ import annotations

import argparse
import dataclasses

import pytest

from pytest_glmf.cli import main
from pytest_glmf.gates.acceptance import cli as accept_cli
from pytest_glmf.gates.agents import cli as agents_cli
from pytest_glmf.gates.capacity import cli as capacity_cli
from pytest_glmf.gates.curve import cli as curve_cli
from pytest_glmf.gates.drift import cli as drift_cli
from pytest_glmf.gates.flags import SettingFlags, settings_of
from pytest_glmf.gates.registry import GATES
from pytest_glmf.gates.spec import describe_type
from pytest_glmf.gates.template import cli as template_cli
from pytest_glmf.gates.tools import cli as tools_cli

# every gate CLI's flag sets, and the settings it leaves to the suite (with the reason)
CLIS: dict[str, tuple[list[SettingFlags], dict[str, str]]] = {
    "curve": ([curve_cli.FLAGS], {}),
    "capacity": ([capacity_cli.FLAGS], {}),
    "drift": ([drift_cli.REFERENCE_FLAGS, drift_cli.SCORE_FLAGS, drift_cli.COMPARE_FLAGS], drift_cli.NOT_FLAGS),
    "agents": ([agents_cli.SESSION_FLAGS], dict(agents_cli.SESSION_FLAGS.skip)),
    "agents.replay": ([agents_cli.REPLAY_FLAGS], {}),
    "tools": ([tools_cli.FLAGS], {}),
    "acceptance": ([accept_cli.FLAGS], {}),
    "template": ([template_cli.REFERENCE_FLAGS, template_cli.CHECK_FLAGS], template_cli.NOT_FLAGS),
}
ALL_FLAGS = [(gate, flags) for gate, (sets, _) in CLIS.items() for flags in sets]


def parser_of(flags: SettingFlags) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="glmf x")
    flags.add(p)
    return p


def refused(flags: SettingFlags, argv: list[str], capsys) -> str:
    p = parser_of(flags)
    with pytest.raises(SystemExit) as exit_:
        flags.settings(p, p.parse_args(argv))
    assert exit_.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


def test_every_gate_with_settings_has_a_cli_here():
    with_settings = {name for name, spec in GATES.items() if dataclasses.fields(spec.settings)}
    assert with_settings <= set(CLIS), sorted(with_settings - set(CLIS))


@pytest.mark.parametrize("gate", CLIS)
def test_every_spec_setting_has_a_flag_or_a_reason(gate):
    sets, reasons = CLIS[gate]
    cls = sets[0].cls
    flagged = {s.path for flags in sets for s in flags.settings_list()}
    declared = {s.path for s in settings_of(cls)}
    assert all(flags.cls is cls for flags in sets)
    missing = declared - flagged - set(reasons)
    assert not missing, f"{gate}: settings with no flag and no reason: {sorted(missing)}"
    assert not set(reasons) & flagged and set(reasons) <= declared
    assert all(reason.strip() for reason in reasons.values())


@pytest.mark.parametrize("gate, flags", ALL_FLAGS, ids=[f"{g}-{i}" for i, (g, _) in enumerate(ALL_FLAGS)])
def test_flags_are_the_settings_names_and_nothing_given_is_the_defaults(gate, flags):
    names = flags.flags()
    for s in flags.settings_list():
        assert names["--" + s.path.replace(".", "-").replace("_", "-")] == s.path
    p = parser_of(flags)
    assert flags.settings(p, p.parse_args([])) == flags.cls()


RANGED = [(gate, flags, s) for gate, flags in ALL_FLAGS for s in flags.settings_list()
          if s.tp in (int, float) and any(s.meta.get(k) is not None for k in ("min", "max", "above"))
          and s.path not in flags.types]


@pytest.mark.parametrize("gate, flags, setting", RANGED, ids=[f"{g}-{s.path}" for g, _, s in RANGED])
def test_out_of_range_is_refused_naming_the_flag_and_the_range(gate, flags, setting, capsys):
    meta = setting.meta
    if meta.get("min") is not None:
        bad = meta["min"] - 1
    elif meta.get("above") is not None:
        bad = meta["above"]
    else:
        bad = meta["max"] + 1
    bad = setting.tp(bad)
    line = refused(flags, [setting.flag, str(bad)], capsys)
    assert line == f"glmf x: error: {setting.flag}: expected {describe_type(setting.tp, meta)}, got {bad!r}"
    if meta.get("max") is not None:
        line = refused(flags, [setting.flag, str(setting.tp(meta["max"] + 1))], capsys)
        assert line.startswith(f"glmf x: error: {setting.flag}: expected ")


def test_an_alias_is_refused_under_its_own_name_in_its_own_units(capsys):
    assert refused(curve_cli.FLAGS, ["--spread-max", "-1"], capsys) == (
        "glmf x: error: --spread-max: expected a number >= 0, got -1.0")
    assert refused(curve_cli.FLAGS, ["--lag-p99-max-ms", "0"], capsys) == (
        "glmf x: error: --lag-p99-max-ms: expected a number > 0, got 0.0")
    assert refused(curve_cli.FLAGS, ["--path", ""], capsys) == "glmf x: error: --path: expected a non-empty string, got ''"
    assert refused(capacity_cli.FLAGS, ["--context", "2048,8k"], capsys) == (
        "glmf x: error: --context takes comma-separated integers, got '2048,8k'")


@pytest.mark.parametrize("flags, argv, expected", [
    (curve_cli.FLAGS, ["--rate", "2", "--spread-max", "7", "--client-error-max", "inf", "--lag-p99-max-ms", "5",
                       "--no-warmup", "--shared-prefix"],
     {"rate_per_s": 2.0, "spread_max_pct": 7.0, "client_error_max_pct": float("inf"), "lag_p99_max_s": 0.005,
      "warmup": False, "shared_prefix": True}),
    (curve_cli.FLAGS, ["--rate-per-s", "3", "--lag-p99-max-s", "0.01", "--prompt-tokens", "900"],
     {"rate_per_s": 3.0, "lag_p99_max_s": 0.01, "prompt_tokens": 900}),
    (capacity_cli.FLAGS, ["--prompt-tokens", "0", "--start", "5", "--resolution", "20", "--bisect", "--context",
                          "2048,8192", "--rate-requests", "8"],
     {"prompt_tokens": None, "start_users": 5, "resolution_pct": 20.0, "guided": False,
      "frontier": {"contexts": [2048, 8192], "max_tokens": None, "runs": None},
      "rate": {"requests": 8, "start_per_s": None, "max_per_s": 1000.0, "seed": 0}}),
    (drift_cli.SCORE_FLAGS, ["--no-tokenizer-check", "--score-concurrency", "4"],
     {"check_tokenizer": False, "score_concurrency": 4}),
    (agents_cli.REPLAY_FLAGS, ["--seconds", "all", "--start", "3", "--first-token-timeout", "9"],
     {"seconds": None, "start_s": 3.0, "first_token_timeout_s": 9.0}),
    (agents_cli.SESSION_FLAGS, ["--think-time", "0.5", "--start-spread", "2", "--sessions", "3"],
     {"think_time_s": 0.5, "start_spread_s": 2.0, "sessions": 3}),
])
def test_the_names_users_knew_still_set_their_settings(flags, argv, expected):
    p = parser_of(flags)
    settings = dataclasses.asdict(flags.settings(p, p.parse_args(argv)))
    assert {k: settings[k] for k in expected} == expected


@pytest.mark.parametrize("argv, message", [
    (["curve", "--runs", "0"], "glmf curve: error: --runs: expected an integer >= 1, got 0"),
    (["curve", "--cpu-max-frac", "1.5"], "glmf curve: error: --cpu-max-frac: expected a number > 0 and <= 1, got 1.5"),
    (["capacity", "--slo", "ttft_s=1", "--resolution", "0"],
     "glmf capacity: error: --resolution: expected a number > 0 and <= 100, got 0.0"),
    (["drift", "reference", "--out", "o", "--k", "0"], "glmf drift reference: error: --k: expected an integer >= 1, got 0"),
    (["tools", "--max-tokens", "0"], "glmf tools: error: --max-tokens: expected an integer >= 1, got 0"),
    (["accept", "--max-tokens-scale", "0"], "glmf accept: error: --max-tokens-scale: expected a number > 0, got 0.0"),
    (["template", "check", "--reference", "r", "--context-tokens", "0"],
     "glmf template check: error: --context-tokens: expected an integer >= 1, got 0"),
])
def test_the_commands_refuse_before_any_request(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*argv[:2 if argv[0] in ("drift", "template") else 1], "--url", "http://127.0.0.1:9",
              *argv[2 if argv[0] in ("drift", "template") else 1:]])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == message


def test_a_setting_named_in_a_table_must_exist():
    with pytest.raises(ValueError, match="CurveRowSettings has no setting 'rate'"):
        SettingFlags(curve_cli.FLAGS.cls, aliases={"rate": "--rate"})


def test_glmf_curve_measures_through_measure_curve_with_the_flags_settings(monkeypatch, capsys):
    """One entry point: `glmf curve` calls `measure_curve` (run_curve is gone) with the settings its
    flags built, so a setting the CLI never had (prompt_tokens) reaches the measurement, and the
    measurement's refusal is one line and exit 2."""
    from pytest_glmf.gates.curve import measure

    seen = {}

    def fake_measure_curve(url, users, *, settings, **kw):
        seen.update(url=url, users=users, settings=settings)
        raise ValueError("prompt_tokens: http://x has no /tokenize endpoint")

    monkeypatch.setattr(curve_cli, "measure_curve", fake_measure_curve)
    monkeypatch.setattr(curve_cli, "shell_facts", lambda url, facts: (facts, "nothing"))
    code = curve_cli.cli(["--url", "http://x", "--users", "2,4", "--prompt-tokens", "900", "--rate", "3"])
    assert code == 2 and capsys.readouterr().err.splitlines()[-1] == (
        "glmf curve: prompt_tokens: http://x has no /tokenize endpoint")
    assert seen["users"] == [2, 4] and seen["settings"].prompt_tokens == 900 and seen["settings"].rate_per_s == 3.0
    assert not hasattr(measure, "run_curve")
