"""The client's self-check as a curve user meets it (issue 40): inside pytest the advice names the
client's settings by their thresholds names, in a shell by `glmf curve`'s flags, and the flags the
advice names are the command's. The self-check's own arithmetic: tests/load/test_selfcheck.py."""
from __future__ import annotations

import re

OWN_TEST = '''
from pytest_glmf.gates.curve import assert_curve


def test_speed(glmf_curve):
    curve = glmf_curve(2, max_tokens=12, runs=1, warmup=False)
    row = curve[2]
    # a bound inside the interval of a number the client did not measure: it cannot be told
    name = next(m for m in ("itl_p95_s", "per_user_tok_s", "ttft_p95_s") if m in row.unmeasured)
    b = row.detail["client_error"][name]
    assert getattr(row, name) is None and b["lo"] < b["hi"]
    assert_curve(curve, **{name: {"max": (b["lo"] + min(b["hi"], 2 * b["value"] + 1)) / 2}})
'''


def test_inside_pytest_the_advice_names_the_settings_by_their_thresholds_names(pytester):
    """A user's own curve test, its client allowed 0.001 % (thresholds.yaml), a server that writes
    every other event with the next: the failure says the number was not measured and why, and
    names the client's settings as the thresholds file spells them, under the lane; no CLI flag."""
    from pytest_glmf.testing.truth_server import TruthServer

    th = pytester.makefile(".yaml", th="schema: 1\nlanes:\n  truth:\n    curve:\n      settings: "
                                       "{client_error_max_pct: 0.001, client_retries: 0}\n")
    pytester.makepyfile(test_own=OWN_TEST)
    with TruthServer(ttft_ms=5, itl_ms=2, pair_every=2) as ts:
        lanes = pytester.makefile(".yaml", lanes=f"lanes:\n  truth: {{launcher: attach, url: '{ts.url}'}}\n")
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--glmf-lanes", str(lanes), "--glmf-lane",
                                               "truth", "--glmf-thresholds", str(th), "test_own.py")
    result.assert_outcomes(failed=1)
    out = " ".join(line.strip() for line in result.stdout.lines)      # the notes fold at 120 columns
    assert "note 1: not measured; client timestamps can be off by up to" in out
    assert re.search(r"client_error_max_pct: [0-9.]+ \(thresholds.yaml: lanes.truth.curve.settings\) would have passed",
                     out)
    assert "(curve setting)" not in out          # the results table's flags too name the lane
    assert "--client-error-max" not in out and "--workers" not in out


def test_glmf_curve_names_its_flags_and_fails_a_row_without_speed_or_ttft(tmp_path, capsys, unfold):
    """In a shell the advice names the flags (the CLI keeps them); the exit status is 1 when a
    row's per-user tok/s or TTFT was not measured (what a shell's curve is for), 0 when only ITL was."""
    import json

    from pytest_glmf.gates.curve.cli import cli as curve_cli
    from pytest_glmf.testing.truth_server import TruthServer

    out = tmp_path / "curve.json"
    with TruthServer(ttft_ms=5, itl_ms=2, pair_every=2) as ts:
        rc = curve_cli(["--url", ts.url, "--users", "2", "--max-tokens", "12", "--runs", "1", "--no-warmup",
                        "--client-error-max", "0.001", "--client-retries", "0", "--json", str(out)])
    row = json.loads(out.read_text())["command_output"]["rows"][0]   # what only the command has
    printed = unfold(capsys.readouterr().out)
    assert row["unmeasured"] and "not measured (" in printed
    assert re.search(r"--client-error-max [0-9.]+ would have passed", printed) and "thresholds.yaml" not in printed
    assert rc == (1 if row["client_bound"] else 0)
    assert row["client_bound"] == any(m in row["unmeasured"] for m in ("per_user_tok_s", "per_user_tok_s_p5",
                                                                       "ttft_p50_s", "ttft_p95_s"))


def test_the_flags_the_advice_names_are_glmf_curves():
    import argparse

    from pytest_glmf.gates.curve.cli import FLAGS
    from pytest_glmf.load import ADVICE_FLAGS

    parser = argparse.ArgumentParser()
    FLAGS.add(parser, "settings")
    for setting, flag in ADVICE_FLAGS.items():
        action = parser._option_string_actions[flag]
        assert action.dest.endswith(f"_settings_{setting}"), (flag, action.dest)   # the flag sets that setting


def test_the_numbers_the_load_engine_measures_again_are_the_curves_bounded_ones():
    """The load engine sits below the gates, so it names the self-checked numbers a gate can bound
    itself (selfcheck.GATED_ERROR_METRICS); they are the curve's metrics among them."""
    from pytest_glmf.gates.curve.spec import SPEC
    from pytest_glmf.load.records import ERROR_METRICS
    from pytest_glmf.load.selfcheck import GATED_ERROR_METRICS

    assert GATED_ERROR_METRICS == tuple(m for m in ERROR_METRICS if m in SPEC.metrics)
