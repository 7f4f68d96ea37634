"""Each gate's declaration (gates/<gate>/spec.py) checks its section of a thresholds file when the file
is read: unknown settings keys (also a curve row's own), wrong types, values out of range, min > max
and bounds no measurement can meet. The same line comes from the loader, from `glmf thresholds
FILE` and from pytest before any server boots."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_glmf.cli import main
from pytest_glmf.config.thresholds import load_thresholds
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.curve.measure import load_settings
from pytest_glmf.gates.curve.spec import DEFAULTS as CURVE_DEFAULTS
from pytest_glmf.gates.curve.spec import CurveRowSettings
from pytest_glmf.gates.registry import GATES
from pytest_glmf.gates.spec import settings_keys
from pytest_glmf.load import LoadSettings, Workload

CURVE_KEYS = ("arrival, between_tokens_timeout_s, client_error_max_pct, client_retries, continuous_usage, cpu_max_frac, "
              "first_token_timeout_s, lag_p99_max_s, max_tokens, model, path, prompt_file, prompt_tokens, "
              "rate_per_s, runs, shared_prefix, spread_max_pct, warmup, workers")
DRIFT_KEYS = ("agreement_tokens, answer_max_tokens, answer_prompts, check_tokenizer, k, max_tokens, not_worse_than, "
              "oracle_engine, oracle_url, prompt_file, prompts, reference, regenerate, score_concurrency, self_check")

# (id, the lane's gate section in YAML flow style, what follows "<file>: ")
TYPOS = [
    ("boot", "boot: {settings: {seats: 8}}", "lanes.batch.boot.settings: unknown key 'seats'; allowed: (none)"),
    ("curve", "curve: {settings: {max_tokenz: 8}}",
     f"lanes.batch.curve.settings: unknown key 'max_tokenz'; allowed: {CURVE_KEYS}"),
    ("curve-row", "curve: {rows: [{users: 1}, {users: 8, settings: {runz: 2}}]}",
     f"lanes.batch.curve.rows[1] (users=8).settings: unknown key 'runz'; allowed: {CURVE_KEYS}"),
    ("drift", "drift: {settings: {promts: 2}}", f"lanes.batch.drift.settings: unknown key 'promts'; allowed: {DRIFT_KEYS}"),
    ("drift-nested", "drift: {settings: {not_worse_than: {candidate: c.json, marign: 0.1}}}",
     "lanes.batch.drift.settings.not_worse_than: unknown key 'marign'; allowed: candidate, margin"),
    ("acceptance", "acceptance: {settings: {prompts_per_clas: 2}}",
     "lanes.batch.acceptance.settings: unknown key 'prompts_per_clas'; allowed: max_tokens_scale, prompts_per_class, "
     "template, users"),
    ("acceptance-class", "acceptance: {classes: {prose: {settings: {prompts_per_class: 1}}}}",
     "lanes.batch.acceptance.classes.prose: unknown key 'settings'; allowed metrics: accept_length, accept_pos1, "
     "accept_pos2, accept_pos3, accept_pos4, accept_pos5, accept_pos6, accept_pos7, accept_pos8, accept_rate, tok_s"),
    ("tools", "tools: {settings: {concurency: 4}}",
     "lanes.batch.tools.settings: unknown key 'concurency'; allowed: concurrency, max_tokens, strict, tool_choice"),
]

WRONG_VALUES = [
    ("int-as-text", "curve: {settings: {runs: three}}",
     "lanes.batch.curve.settings.runs: expected an integer >= 1, got 'three'"),
    ("int-zero", "drift: {settings: {prompts: 0}}", "lanes.batch.drift.settings.prompts: expected an integer >= 1, got 0"),
    ("float-not-int", "curve: {settings: {max_tokens: 38.4}}",
     "lanes.batch.curve.settings.max_tokens: expected an integer >= 1, got 38.4"),
    ("fraction-above-1", "curve: {settings: {cpu_max_frac: 1.5}}",
     "lanes.batch.curve.settings.cpu_max_frac: expected a number > 0 and <= 1, got 1.5"),
    ("bool-as-text", "tools: {settings: {strict: 'yes'}}", "lanes.batch.tools.settings.strict: expected true or false, got 'yes'"),
    ("choice", "tools: {settings: {tool_choice: always}}",
     "lanes.batch.tools.settings.tool_choice: expected one of auto, required, named, got 'always'"),
    ("choice-template", "acceptance: {settings: {template: llama}}",
     "lanes.batch.acceptance.settings.template: expected one of glm, glm-nothink, chatml, raw, got 'llama'"),
    ("choice-self-check", "drift: {settings: {self_check: exactly}}",
     "lanes.batch.drift.settings.self_check: expected one of auto, exact, report, floor, got 'exactly'"),
    ("required-nested", "drift: {settings: {not_worse_than: {margin: 0.1}}}",
     "lanes.batch.drift.settings.not_worse_than: candidate is required (a non-empty string)"),
    ("negative-margin", "drift: {settings: {not_worse_than: {candidate: c.json, margin: -1}}}",
     "lanes.batch.drift.settings.not_worse_than.margin: expected a number >= 0, got -1"),
    ("row-flag", "curve: {rows: [{users: 96, allow_queueing: 'yes'}]}",
     "lanes.batch.curve.rows[0] (users=96).allow_queueing: expected true or false, got 'yes'"),
    ("settings-not-mapping", "tools: {settings: [concurrency, 4]}",
     "lanes.batch.tools.settings: must be a mapping of setting -> value"),
    ("baseline-key", "curve: {baseline: {rel: 5}}", "lanes.batch.curve.baseline: unknown key 'rel'; allowed: abs, metrics, rel_pct"),
    ("baseline-metric", "curve: {baseline: {metrics: {ttft_p99_s: {rel_pct: 10}}}}",
     "lanes.batch.curve.baseline.metrics: unknown metric 'ttft_p99_s'; allowed: aggregate_tok_s, itl_p95_s, "
     "per_user_tok_s, per_user_tok_s_p5, spread_pct, ttft_p50_s, ttft_p95_s"),
    ("baseline-negative", "drift: {baseline: {metrics: {mean_abs_dlogp: {abs: -0.01}}}}",
     "lanes.batch.drift.baseline.metrics.mean_abs_dlogp.abs: expected a number >= 0, got -0.01"),
]

BOUNDS = [
    ("min-above-max", "curve: {rows: [{users: 8, per_user_tok_s: {min: 5, max: 1}}]}",
     "lanes.batch.curve.rows[0] (users=8): per_user_tok_s: min 5 > max 1: no measurement can meet both"),
    ("fraction-above-1", "tools: {parsed_fraction: {min: 1.5}}",
     "lanes.batch.tools: parsed_fraction: min 1.5 can never be met: parsed_fraction is a fraction in [0, 1]"),
    ("negative-latency", "curve: {rows: [{users: 1, ttft_p95_s: {max: -0.1}}]}",
     "lanes.batch.curve.rows[0] (users=1): ttft_p95_s: max -0.1 can never be met: ttft_p95_s is a time in "
     "seconds, >= 0"),
    ("negative-count", "tools: {leaks: {max: -1}}",
     "lanes.batch.tools: leaks: max -1 can never be met: leaks is a count, >= 0"),
    ("negative-min-gates-nothing", "boot: {max_running_requests: {min: -8}}",
     "lanes.batch.boot: max_running_requests: min -8 gates nothing: max_running_requests is a count, >= 0"),
    ("class-rate", "acceptance: {classes: {prose: {accept_rate: {min: 29}}}}",
     "lanes.batch.acceptance.classes.prose: accept_rate: min 29 can never be met: accept_rate is a fraction in [0, 1]"),
    ("drift-fraction", "drift: {argmax_mismatch: {max: 15.6}}",
     "lanes.batch.drift: argmax_mismatch: max 15.6 gates nothing: argmax_mismatch is a fraction in [0, 1]"),
    ("nan", "drift: {mean_abs_dlogp: {max: .nan}}", "lanes.batch.drift: mean_abs_dlogp: max must be a number, got nan"),
]

CASES = TYPOS + WRONG_VALUES + BOUNDS


def write(tmp_path: Path, section: str) -> Path:
    path = tmp_path / "th.yaml"
    path.write_text(f"lanes:\n  batch:\n    {section}\n")
    return path


@pytest.mark.parametrize("section, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_loader_refuses_with_file_lane_gate_and_key(tmp_path, section, message) -> None:
    path = write(tmp_path, section)
    with pytest.raises(ConfigError) as info:
        load_thresholds(path)
    assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize("section, message", [c[1:] for c in TYPOS + BOUNDS[:2]], ids=[c[0] for c in TYPOS + BOUNDS[:2]])
def test_glmf_thresholds_prints_the_same_line(tmp_path, capsys, section, message) -> None:
    path = write(tmp_path, section)
    assert main(["thresholds", str(path)]) == 2
    assert capsys.readouterr().err == f"glmf thresholds: {path}: {message}\n"


@pytest.mark.parametrize("section, message", [c[1:] for c in TYPOS], ids=[c[0] for c in TYPOS])
def test_a_typo_in_any_gates_settings_stops_pytest_before_a_server_boots(pytester, section, message) -> None:
    """Per gate: the session stops with the loader's line (file, lane, gate, key) before a server
    starts, even when the run selects only another gate's tests."""
    pytester.makepyfile("def test_x(glmf_server): pass\n")
    th = pytester.makefile(".yaml", th=f"lanes:\n  batch:\n    {section}\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--glmf-lane", "batch", "--glmf-thresholds", str(th),
                                "--glmf-results", str(pytester.path / "results"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {th}: {message}" in result.stderr.lines
    assert not (pytester.path / "results").exists()   # no server log, no result file: nothing started


def test_every_gate_declares_settings_with_defaults_and_metrics_with_a_unit() -> None:
    from pytest_glmf.gates.spec import UNIT_TEXT

    assert list(GATES) == ["boot", "curve", "drift", "acceptance", "tools", "capacity", "template", "agents"]
    for name, spec in GATES.items():
        spec.defaults()                              # every setting has a default (or the gate has none)
        assert spec.metrics, name
        for metric in spec.metrics.values():
            assert metric.unit in UNIT_TEXT, (name, metric.name)
            assert metric.direction in ("higher", "lower")
    assert settings_keys(GATES["boot"].settings) == ()


def test_the_shipped_thresholds_become_typed_settings() -> None:
    t = load_thresholds()
    curve = t.settings("batch", "curve")
    assert (curve.max_tokens, curve.runs, curve.prompt_tokens, curve.warmup) == (384, 3, 2400, True)
    row = t.settings("batch", "curve", overrides={"runs": 5})
    assert (row.runs, row.max_tokens) == (5, 384)
    drift = t.settings("daily", "drift")
    assert (drift.prompts, drift.max_tokens, drift.k, drift.self_check, drift.not_worse_than) == (40, 128, 20, "exact",
                                                                                                  None)
    assert t.settings("batch", "tools").concurrency == 48
    assert t.settings("daily", "acceptance").prompts_per_class == 3
    assert t.settings("nolane", "tools") == GATES["tools"].defaults()    # a lane without a section: defaults
    assert t.bounds("batch", "tools") == {"parsed_fraction": {"min": 1.0}, "leaks": {"max": 0},
                                          "wrong_calls": {"max": 0}}


def test_a_curve_row_is_one_load_run_with_the_load_engines_defaults() -> None:
    """One home for defaults: the load run built from the curve's default settings is the load
    engine's default run, and what every user sends its default workload; a lane's timeouts fill
    what the settings leave unset, the client's (None) what neither sets."""
    assert load_settings(CURVE_DEFAULTS, [4]) == LoadSettings(users=[4])
    assert load_settings(CURVE_DEFAULTS, [4]).workload(["p"]) == Workload(prompts=["p"])
    from_lane = load_settings(CURVE_DEFAULTS, [4], {"first_token_s": 5.0, "between_tokens_s": 2.0})
    assert (from_lane.first_token_timeout_s, from_lane.between_tokens_timeout_s) == (5.0, 2.0)
    own = load_settings(CurveRowSettings(first_token_timeout_s=9.0, runs=1, max_tokens=8, shared_prefix=True), [4],
                        {"first_token_s": 5.0})
    assert (own.first_token_timeout_s, own.between_tokens_timeout_s, own.runs) == (9.0, None, 1)
    assert (own.workload(["p"]).max_tokens, own.workload(["p"]).shared_prefix) == (8, True)


@pytest.mark.parametrize("gate", ["curve", "capacity"])
def test_a_gates_settings_named_like_the_load_engines_share_its_defaults(gate: str) -> None:
    load = {f.name: f.default for f in dataclasses.fields(LoadSettings)}
    defaults = GATES[gate].defaults()
    shared = {f.name for f in dataclasses.fields(defaults)} & set(load)
    assert {"max_tokens", "runs", "path", "spread_max_pct", "lag_p99_max_s", "client_retries"} <= shared
    assert {name: getattr(defaults, name) for name in shared} == {name: load[name] for name in shared}
