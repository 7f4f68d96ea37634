"""Drift gate: the lane's server scored teacher-forced on the oracle's exact tokens.

The recipe's claim: "NVFP4 vs FP8: mean |dlogp| 0.136, 15.6 % argmax differ; scoring the same
text twice gives 0.00000". Settings (thresholds.yaml, `lanes.<lane>.drift.settings`), declared
with their defaults in pytest_glmf/gates/drift/spec.py (`DriftSettings`):

    reference: PATH        a stored reference (`glmf drift reference`); relative to the thresholds file
    oracle_url: URL        or: make the reference against this running oracle
    regenerate: true       make it even when a stored one exists (also: env GLMF_DRIFT_REGENERATE=1)
    prompts: 40, max_tokens: 128, k: 20
    self_check: auto       exact (fail on any self-difference) | floor (judge the drift above the
                           engine's noise floor: excess_abs_dlogp, and the floor: floor_abs_dlogp) |
                           report (show the noise floor only) | auto (exact if both score exactly, else floor)
    score_concurrency: 1   prompts scored at once: the batch shape both floors are measured at
    answer_max_tokens: N   greedy chat answers on both servers: output_length_ratio, runaway_share,
                           greedy_agreement, finish_reason_changed (answer_prompts: the first N only)
    not_worse_than: {candidate: PATH, margin: 0.0}   paired comparison with a stored candidate file

Simulator lanes need none of it: the oracle is the same simulator started with `--checkpoint fp8`
through the public launcher. In exact and report modes nothing is subtracted: a non-zero noise
floor is printed next to every number; in floor mode the excess over it is judged.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.gates.drift import (
    assert_drift,
    assert_drift_not_worse_than,
    assert_drift_self_check,
    compare_drift,
    load_drift_reference,
)
from pytest_glmf.gates.drift.spec import DriftSettings
from pytest_glmf.text import fmt

# glmf_serial: no other gate's traffic while scoring (batching changes numerics on real engines and
# would break the exact self-check); it also keeps the module on one xdist worker, so the oracle
# reference is made once per session.
pytestmark = [pytest.mark.glmf_gate("drift"), pytest.mark.glmf_serial]


@pytest.fixture(scope="module")
def drift_section(glmf_thresholds, glmf_lane) -> dict[str, Any]:
    section = glmf_thresholds.for_gate(glmf_lane.name, "drift")
    if not section:
        pytest.skip(f"no drift thresholds for lane {glmf_lane.name!r} in {glmf_thresholds.path}")
    return section


@pytest.fixture(scope="module")
def drift_settings(drift_section, glmf_thresholds, glmf_lane) -> DriftSettings:
    return glmf_thresholds.settings(glmf_lane.name, "drift")


def _resolve(path: str, thresholds_path: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_absolute():
        beside = Path(thresholds_path).parent / p
        p = beside if beside.exists() or not p.exists() else p
    return p


@pytest.fixture(scope="module")
def drift_result(drift_settings, glmf_drift, glmf_lane, glmf_thresholds):
    """This lane's server against the oracle: a stored reference, or one made now against
    oracle_url or (simulator lanes) the lane's own FP8 oracle."""
    s = drift_settings
    source = f"{glmf_thresholds.source(glmf_lane.name, 'drift')}.settings"
    regenerate = s.regenerate or os.environ.get("GLMF_DRIFT_REGENERATE") == "1"
    if s.reference and not regenerate:
        problem = ""
        try:
            # without a `prompts` setting, a reference made from the first N prompts of the set is fine
            ref = load_drift_reference(_resolve(s.reference, glmf_thresholds.path), prompt_file=s.prompt_file,
                                       prompts=s.prompts, check_prompt_set=True)
        except ValueError as exc:
            problem = str(exc)
        if problem:
            pytest.fail(f"drift reference unusable: {problem}", pytrace=False)
        return glmf_drift(ref, check_tokenizer=s.check_tokenizer, key=glmf_lane.name, source=source, record=False)
    if not s.oracle_url and glmf_lane.launcher != "sim":
        pytest.skip(f"lane {glmf_lane.name!r}: no oracle reference; set lanes.{glmf_lane.name}.drift.settings."
                    f"reference (a file from `glmf drift reference`) or .oracle_url in {glmf_thresholds.path}")
    return glmf_drift(oracle_url=s.oracle_url, prompts=s.prompts, prompt_file=s.prompt_file, max_tokens=s.max_tokens,
                      k=s.k, oracle_engine=s.oracle_engine, check_tokenizer=s.check_tokenizer, key=glmf_lane.name,
                      source=source, record=False)


def test_drift_self_check(drift_result, drift_settings):
    """Scoring the same tokens twice on one server must give exactly the same numbers (exact mode);
    in floor mode their difference is the floor, judged by the floor_abs_dlogp bound."""
    if drift_result.self_check_mode == "exact":
        assert_drift_self_check(drift_result)
    else:
        pytest.skip(f"drift.settings.self_check: {drift_settings.self_check} -> {drift_result.self_check_mode} mode "
                    f"(noise floor {fmt(drift_result.floor_abs_dlogp)} nats mean |dlogp|; bounded by floor_abs_dlogp)")


def test_drift_thresholds(drift_section, drift_result, glmf_thresholds, glmf_lane, glmf_results, record_property):
    glmf_results.record("drift", drift_result.label, drift_result.to_record())  # judged against a baseline here
    for key in ("mean_abs_dlogp", "median_abs_dlogp", "p95_abs_dlogp", "argmax_mismatch", "self_abs_dlogp"):
        record_property(f"drift.{key}", getattr(drift_result, key))
    for key in ("floor_abs_dlogp", "excess_abs_dlogp", "output_length_ratio", "runaway_share", "greedy_agreement"):
        if drift_result.stats.get(key) is not None:
            record_property(f"drift.{key}", drift_result.stats[key])
    record_property("drift.self_check_mode", drift_result.self_check_mode)
    assert_drift(drift_result, source=glmf_thresholds.source(glmf_lane.name, "drift"),
                 **glmf_thresholds.bounds(glmf_lane.name, "drift"))


def test_drift_not_worse_than(drift_settings, glmf_thresholds, glmf_results, request):
    """Optional: this candidate (B) is not significantly worse than a stored one (A)."""
    spec = drift_settings.not_worse_than
    if spec is None:
        pytest.skip("no drift.settings.not_worse_than (a stored candidate file to compare with)")
    drift_result = request.getfixturevalue("drift_result")
    problem = ""
    try:
        comparison = compare_drift(drift_result, _resolve(spec.candidate, glmf_thresholds.path))
    except ValueError as exc:
        problem = str(exc)
    if problem:
        pytest.fail(f"drift.settings.not_worse_than: {problem}", pytrace=False)
    pair = comparison["pair"]
    glmf_results.record("drift", f"{pair['b']} vs {pair['a']}", dict(pair))
    assert_drift_not_worse_than(comparison, margin=spec.margin,
                                source=f"{glmf_thresholds.path}: drift.settings.not_worse_than")
