"""`measure_curve` (the curve's public measurement) against the ground-truth server: typed rows with
the truth's numbers, recipe units at a simulator time scale, settings checked like a thresholds
file's, and `assert_curve` judging the row's validity as well as its bounds."""
from __future__ import annotations

import json
import math

import pytest

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.boot import parse_boot_log
from pytest_glmf.gates.curve import CurveResult, CurveRow, CurveRowSettings, measure_curve
from pytest_glmf.testing.truth_server import TruthServer

BOOT_LOG = """\
[2026-09-11 10:00:02 TP0] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=2, context_len=131072, available_gpu_mem=10.00 GB
"""
# the box shares its cores with the truth server: the client self-check is not what is tested here
RELAXED = {"lag_p99_max_s": 1.0, "cpu_max_frac": 1.0, "client_error_max_pct": math.inf}


@pytest.fixture(scope="module")
def truth():
    with TruthServer(ttft_ms=20, itl_ms=4, seats=2) as ts:
        yield ts


@pytest.fixture(scope="module")
def measured(truth) -> CurveResult:
    return measure_curve(truth.url, [1, 2], boot_facts=parse_boot_log(BOOT_LOG), max_tokens=24, runs=2, **RELAXED)


def test_rows_are_typed_and_carry_the_truths_numbers(measured):
    assert [r.users for r in measured.rows] == [1, 2] and isinstance(measured[2], CurveRow)
    row = measured[2]
    assert row.seats == 2 and row.runs == 2 and row.errors == 0 and row.valid
    assert not [f for f in row.flags if "sharing" in f or "client-bound" in f or "failed" in f], row.flags
    assert row.per_user_tok_s == pytest.approx(250, rel=0.1)      # 1 / 4 ms between tokens
    assert row.ttft_p50_s == pytest.approx(0.020, abs=0.01)
    assert row.tokens_per_user == 50_000 and row.time_scale == 1.0
    assert row.measured["per_user_tok_s"] == row.per_user_tok_s
    assert measured.settings.max_tokens == 24 and measured.settings.runs == 2
    with pytest.raises(KeyError, match=r"no row at 8 users; measured: \[1, 2\]"):
        measured[8]


def test_the_record_is_the_rows_json_without_per_request_records(measured):
    record = measured[2].to_record()
    json.dumps(record)
    assert record["users"] == 2 and record["flags"] == ("; ".join(measured[2].flags) or "ok")
    assert "records" not in record["per_run"][0] and record["valid"] is True
    assert measured.table().splitlines()[0].startswith("users | aggregate tok/s | per-user tok/s")
    assert measured.knee_sentence().startswith("aggregate ")


def test_a_time_scale_reports_recipe_units(truth):
    row = measure_curve(truth.url, 1, max_tokens=16, runs=1, warmup=False, time_scale=0.5, **RELAXED)[1]
    assert row.per_user_tok_s == pytest.approx(row.measured["per_user_tok_s"] * 0.5)
    assert row.ttft_p50_s == pytest.approx(row.measured["ttft_p50_s"] / 0.5)
    assert row.detail["units"] == "recipe units"


@pytest.mark.parametrize("kwargs, message", [
    ({"max_tokenz": 8}, "settings: unknown key 'max_tokenz'; allowed: "),
    ({"runs": 0}, "settings.runs: expected an integer >= 1, got 0"),
    ({"rate_per_s": 0}, "settings.rate_per_s: expected a number > 0, got 0"),
])
def test_settings_are_checked_like_a_thresholds_file(kwargs, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        measure_curve("http://127.0.0.1:9", 1, **kwargs)


def test_users_and_prompt_file_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(ConfigError, match=r"users must be a positive integer or a list of them, got \[0\]"):
        measure_curve("http://127.0.0.1:9", [0])
    with pytest.raises(ValueError, match=r"^prompt_file: .*nope\.md: not a file, nor a packaged fixture"):
        measure_curve("http://127.0.0.1:9", 1, prompt_file=tmp_path / "nope.md")


def test_settings_object_and_keywords_combine(truth, tmp_path):
    prompt = tmp_path / "mine.md"
    prompt.write_text("Say hello to the support team.")
    base = CurveRowSettings(max_tokens=12, runs=1, warmup=False, **RELAXED)
    result = measure_curve(truth.url, 1, settings=base, prompt_file=prompt, max_tokens=8)
    assert result.settings.max_tokens == 8 and result.settings.prompt_file == str(prompt)
    assert result[1].detail["max_tokens"] == 8
