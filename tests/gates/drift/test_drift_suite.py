"""The drift suite through pytester: an attached candidate, an oracle by URL or a stored reference,
thresholds from a file; the outcomes and the failure tables a user sees."""
from __future__ import annotations

import json
from importlib import resources

import pytest
from test_drift_engines import ToyServer  # the toy engine servers (same directory)

from pytest_glmf.gates.drift.adapters import make_adapter
from pytest_glmf.gates.drift.prompts import load_chat_prompts
from pytest_glmf.gates.drift.reference import make_reference, score_candidate
from pytest_glmf.gates.drift.table import render_table as drift_table

SUITE = resources.files("pytest_glmf.suites").joinpath("test_drift.py").read_text()


@pytest.fixture
def toys():
    servers: list[ToyServer] = []

    def start(*a, **kw) -> ToyServer:
        servers.append(ToyServer(*a, **kw))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def _run(pytester, url: str, thresholds: str):
    pytester.makepyfile(test_drift=SUITE)
    t = pytester.makefile(".yaml", thresholds=thresholds)
    return pytester.runpytest("--glmf-url", url, "--glmf-thresholds", str(t),
                              "--glmf-results", str(pytester.path / "results"), "test_drift.py", "-rs")


def test_suite_passes_with_an_oracle_url_and_records_the_table(pytester, toys):
    oracle, cand = toys("sglang"), toys("sglang", noise=0.3)
    result = _run(pytester, cand.url, f"""schema: 1
lanes:
  attach:
    drift:
      settings: {{oracle_url: '{oracle.url}', prompts: 6, max_tokens: 8, k: 5}}
      mean_abs_dlogp: {{max: 5.0}}
      argmax_mismatch: {{max: 1.0}}
      self_abs_dlogp: {{max: 0}}
""")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*no drift.settings.not_worse_than*"])
    doc = json.loads((pytester.path / "results" / "attach-latest.json").read_text())
    row = doc["gates"]["drift"]["attach"]
    assert row["candidate"] == "attach" and row["prompts"] == 6 and row["tokens"] == 48
    assert row["ci95"][0] <= row["mean_abs_dlogp"] <= row["ci95"][1] and row["self_abs_dlogp"] == 0.0
    assert (pytester.path / "results" / "drift" / "attach-reference.json").exists()


def test_threshold_failure_is_a_table_with_the_ci_and_the_noise_floor(pytester, toys, inline_notes):
    oracle, cand = toys("vllm"), toys("vllm", noise=1.0)
    result = _run(pytester, cand.url, f"""schema: 1
lanes:
  attach:
    drift:
      settings: {{oracle_url: '{oracle.url}', prompts: 6, max_tokens: 8, k: 5}}
      mean_abs_dlogp: {{max: 0.01}}
      argmax_mismatch: {{max: 0.01}}
      p95_abs_dlogp: {{max: 100}}
""")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "*drift of attach against the oracle*",
        "*quant (vs toy)*mean |dlogp|*ci95 (prompts)*median*p95*argmax != ref*self-check*",
        "*attach*0 (exact)*",
        "*2 threshold(s) missed*",
        "*mean_abs_dlogp attach vs oracle (95% CI *..*)*<= 0.01*thresholds.yaml: lanes.attach.drift*",
        "*argmax_mismatch attach vs oracle (95% CI*",
    ])
    assert "p95_abs_dlogp attach" not in inline_notes(result.stdout.str())


def test_not_worse_than_fails_when_the_paired_ci_is_above_zero(pytester, toys, tmp_path):
    oracle, good, bad = toys("sglang"), toys("sglang", noise=0.2), toys("sglang", noise=1.5)
    adapter = make_adapter(oracle.url)
    ref = make_reference(adapter, load_chat_prompts(None, 8), max_tokens=8, k=5)
    adapter.close()
    (tmp_path / "ref.json").write_text(json.dumps(ref))
    adapter = make_adapter(good.url)
    (tmp_path / "good.json").write_text(json.dumps(score_candidate(adapter, ref, label="good")))
    adapter.close()
    result = _run(pytester, bad.url, f"""schema: 1
lanes:
  attach:
    drift:
      settings: {{reference: '{tmp_path / "ref.json"}', prompts: 8, not_worse_than: {{candidate: '{tmp_path / "good.json"}'}}}}
      mean_abs_dlogp: {{max: 10}}
""")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*attach not worse than good*",
        "*good closer on 8 of 8 prompts*",
        "*mean_abs_dlogp gap attach - good, lower end of the paired 95% CI*wins 8:0*<= 0*",
    ])
    section = json.loads((pytester.path / "results" / "attach-latest.json").read_text())["gates"]["drift"]
    assert "good closer on 8 of 8 prompts" in drift_table(section)


def test_a_stored_reference_from_another_prompt_set_is_refused(pytester, toys, tmp_path):
    oracle = toys("sglang")
    adapter = make_adapter(oracle.url)
    ref = make_reference(adapter, load_chat_prompts(None, 3), max_tokens=4, k=3, run_self_check=False)
    adapter.close()
    (tmp_path / "ref.json").write_text(json.dumps(ref))
    result = _run(pytester, oracle.url, f"""schema: 1
lanes:
  attach:
    drift:
      settings: {{reference: '{tmp_path / "ref.json"}', prompts: 5}}
      mean_abs_dlogp: {{max: 1}}
""")
    result.assert_outcomes(errors=2, skipped=1)
    assert "During handling" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*drift reference unusable:*made from another prompt set*regenerate the reference*"])


def test_simulator_lane_starts_its_own_fp8_oracle(pytester):
    """No reference, no oracle URL: the suite derives the oracle lane (--checkpoint fp8) and boots it
    through the public launcher, then scores the lane's own NVFP4 checkpoint."""
    pytester.makepyfile(test_drift=SUITE)
    lanes = pytester.makefile(".yaml", lanes="""lanes:
  simdrift:
    engine: sglang
    launcher: sim
    model: /models/GLM-5.3-Flash-NVFP4
    time_scale: 0.002
""")
    t = pytester.makefile(".yaml", thresholds="""schema: 1
lanes:
  simdrift:
    drift:
      settings: {prompts: 8, max_tokens: 32, k: 8}
      mean_abs_dlogp: {max: 0.5}
      self_abs_dlogp: {max: 0}
""")
    result = pytester.runpytest("--glmf-lanes", str(lanes), "--glmf-lane", "simdrift", "--glmf-thresholds", str(t),
                                "--glmf-results", str(pytester.path / "results"), "test_drift.py")
    result.assert_outcomes(passed=2, skipped=1)
    ref = json.loads((pytester.path / "results" / "drift" / "simdrift-reference.json").read_text())
    assert ref["provenance"]["checkpoint"] == "fp8" and ref["provenance"]["oracle_lane"] == "simdrift-oracle"
    assert "--checkpoint" in ref["provenance"]["argv"] and ref["self_check"]["exact"] is True
    row = json.loads((pytester.path / "results" / "simdrift-latest.json").read_text())["gates"]["drift"]["simdrift"]
    assert row["provenance"]["checkpoint"] == "nvidia" and 0 < row["mean_abs_dlogp"] < 0.5
    # the report module renders the recorded section with the same recipe table
    table = drift_table(json.loads((pytester.path / "results" / "simdrift-latest.json").read_text())
                               ["gates"]["drift"])
    assert "quant (vs simdrift-oracle)" in table and "simdrift" in table and "top-8" in table
    assert "oracle self-check: 0 (exact)" in table


@pytest.mark.parametrize("mode", ["exact", "report"])
def test_a_non_reproducible_engine_shows_its_noise_floor(pytester, toys, mode):
    oracle, cand = toys("sglang"), toys("sglang", noise=0.3, jitter=1e-4)
    result = _run(pytester, cand.url, f"""schema: 1
lanes:
  attach:
    drift:
      settings: {{oracle_url: '{oracle.url}', prompts: 4, max_tokens: 6, k: 4, self_check: {mode}}}
      mean_abs_dlogp: {{max: 0.001}}
""")
    if mode == "exact":
        result.assert_outcomes(failed=2, skipped=1)
        result.stdout.fnmatch_lines(["*instrument self-check: the same tokens scored twice differ*",
                                     "*candidate*|*|*|*0*|*24*", "*self_check: report*"])
    else:   # the threshold still fails; the self-check only reports, so its test says so and skips
        result.assert_outcomes(failed=1, skipped=2)
        result.stdout.fnmatch_lines(["*drift.settings.self_check: report -> report mode (noise floor *"])
    # every drift row carries the noise floor; nothing is subtracted
    result.stdout.fnmatch_lines(["*attach*| 0.000* max, 0 flips*", "*nothing is subtracted*",
                                 "*mean_abs_dlogp attach vs oracle (95% CI *; noise floor 0.000*)*"])


@pytest.mark.parametrize("mode", ["auto", "floor"])
def test_floor_mode_judges_the_excess_and_the_floor_itself(pytester, toys, mode, inline_notes):
    oracle, cand = toys("sglang"), toys("sglang", noise=0.3, jitter=1e-4)
    result = _run(pytester, cand.url, f"""schema: 1
lanes:
  attach:
    drift:
      settings: {{oracle_url: '{oracle.url}', prompts: 4, max_tokens: 6, k: 4, self_check: {mode}}}
      excess_abs_dlogp: {{max: 5.0}}
      floor_abs_dlogp: {{max: 0.00001}}
""")
    # auto: the candidate is not exact, so floor mode judges; the floor (~1e-4) is above its bound
    result.assert_outcomes(failed=1, skipped=2)
    pytest.LineMatcher(inline_notes(result.stdout.str()).splitlines()).fnmatch_lines([
        "*floor mode: judged on the drift above the floor (excess = mean |dlogp| - floor)*",
        "floor_abs_dlogp attach vs oracle (95% CI *)*| <= 1e-05 *the engine's own noise floor rose*",
        f"*drift.settings.self_check: {mode} -> floor mode (noise floor *nats mean |dlogp|; bounded by floor_abs_dlogp)"])
    row = json.loads((pytester.path / "results" / "attach-latest.json").read_text())["gates"]["drift"]["attach"]
    assert row["self_check_mode"] == "floor" and 0 < row["floor_abs_dlogp"] < 1e-3
    assert row["excess_abs_dlogp"] == pytest.approx(row["mean_abs_dlogp"] - row["floor_abs_dlogp"], abs=1e-9)
    assert row["excess_ci95"][0] <= row["excess_abs_dlogp"] <= row["excess_ci95"][1]
