"""Drift gate: the lane's server scored teacher-forced on the oracle's exact tokens.

The recipe's claim: "NVFP4 vs FP8: mean |dlogp| 0.136, 15.6 % argmax differ; scoring the same
text twice gives 0.00000". Settings (thresholds.yaml, `lanes.<lane>.drift.settings`), declared
with their defaults in pytest_glmf/gates/drift/spec.py (`DriftSettings`):

    reference: PATH        a stored reference (`glmf drift reference`); relative to the thresholds file
    oracle_url: URL        or: make the reference against this running oracle
    regenerate: true       make it even when a stored one exists (also: env GLMF_DRIFT_REGENERATE=1)
    prompts: 40, max_tokens: 128, k: 20
    self_check: exact      exact (fail on any self-difference) | report (show the noise floor only)
    not_worse_than: {candidate: PATH, margin: 0.0}   paired comparison with a stored candidate file

Simulator lanes need none of it: the oracle is the same simulator started with `--checkpoint fp8`
through the public launcher. Nothing is subtracted: a non-zero noise floor is printed next to
every number.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.gates.drift.adapters import make_adapter
from pytest_glmf.gates.drift.prompts import load_chat_prompts
from pytest_glmf.gates.drift.reference import (
    DriftFileError,
    check_reference,
    compare,
    make_reference,
    pick_template,
    score_candidate,
    sim_template,
)
from pytest_glmf.gates.drift.spec import DriftSettings
from pytest_glmf.gates.drift.table import render_table as drift_table
from pytest_glmf.gates.verdict import Check, assert_checks, checks_from_bounds, fmt, note_evaluated, render_table

# glmf_serial: no other gate's traffic while scoring (batching changes numerics on real engines and
# would break the exact self-check); it also keeps the module on one xdist worker, so the oracle
# reference is made once per session.
pytestmark = [pytest.mark.glmf_gate("drift"), pytest.mark.glmf_serial]

HINTS = {
    "mean_abs_dlogp": "the checkpoint/quantization moved the model: compare candidates with `glmf drift compare`",
    "argmax_mismatch": "greedy tokens flip: check the quantized modules (attention, lm_head) and kv dtype",
    "self_abs_dlogp": "the engine is not bit-reproducible: disable batching effects or use float32 for the check",
}


@pytest.fixture(scope="module")
def drift_section(glmf_thresholds, glmf_lane) -> dict[str, Any]:
    section = glmf_thresholds.for_gate(glmf_lane.name, "drift")
    if not section:
        pytest.skip(f"no drift thresholds for lane {glmf_lane.name!r} in {glmf_thresholds.path}")
    return section


@pytest.fixture(scope="module")
def drift_settings(drift_section, glmf_thresholds, glmf_lane) -> DriftSettings:
    return glmf_thresholds.settings(glmf_lane.name, "drift")


def oracle_lane_for(lane):
    """The simulator lane's oracle: the same flags, the original checkpoint."""
    args, skip = [], False
    for a in lane.sim_args:
        if skip:
            skip = False
        elif a == "--checkpoint":
            skip = True
        elif not a.startswith("--checkpoint="):
            args.append(a)
    return dataclasses.replace(lane, name=f"{lane.name}-oracle", port=None, sim_args=[*args, "--checkpoint", "fp8"])


def _resolve(path: str, thresholds_path: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_absolute():
        beside = Path(thresholds_path).parent / p
        p = beside if beside.exists() or not p.exists() else p
    return p


@pytest.fixture(scope="module")
def drift_reference(drift_settings, glmf_lane, glmf_thresholds, glmf_results) -> dict[str, Any]:
    """The oracle reference: stored, or made now against oracle_url / a simulator oracle."""
    n_prompts = drift_settings.prompts
    stored = drift_settings.reference
    regenerate = drift_settings.regenerate or os.environ.get("GLMF_DRIFT_REGENERATE") == "1"
    if stored and not regenerate:
        path = _resolve(stored, glmf_thresholds.path)
        problem = ""
        try:
            ref = json.loads(path.read_text())
            # without a `prompts` setting, a reference made from the first N prompts of the set is fine
            n = n_prompts or (ref.get("prompt_set") or {}).get("n")
            check_reference(ref, load_chat_prompts(drift_settings.prompt_file, n), source=str(path))
        except (OSError, ValueError) as exc:
            problem = str(exc)
        if problem:
            pytest.fail(f"drift reference unusable: {problem}", pytrace=False)
        return ref
    prompts = load_chat_prompts(drift_settings.prompt_file, n_prompts)
    kw = dict(max_tokens=drift_settings.max_tokens, k=drift_settings.k)
    out = glmf_results.results_dir / "drift" / f"{glmf_lane.name}-reference.json"
    if drift_settings.oracle_url:
        adapter = make_adapter(drift_settings.oracle_url, drift_settings.oracle_engine)
        try:
            ref = make_reference(adapter, prompts, provenance={"oracle_url": drift_settings.oracle_url}, **kw)
        finally:
            adapter.close()
    elif glmf_lane.launcher == "sim":
        from pytest_glmf.launch import launch_lane

        oracle = oracle_lane_for(glmf_lane)
        server = launch_lane(oracle, glmf_results.results_dir, f"{glmf_results.session_id}-drift-oracle")
        try:
            adapter = make_adapter(server.base_url, hint=server.engine)
            try:
                ref = make_reference(adapter, prompts, provenance={
                    "oracle_lane": oracle.name, **server.provenance},
                    template=pick_template(adapter, sim_template()), **kw)
            finally:
                adapter.close()
        finally:
            server.stop()
    else:
        pytest.skip(f"lane {glmf_lane.name!r}: no oracle reference; set lanes.{glmf_lane.name}.drift.settings."
                    f"reference (a file from `glmf drift reference`) or .oracle_url in {glmf_thresholds.path}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(ref) + "\n")
    return ref


@pytest.fixture(scope="module")
def drift_candidate(drift_reference, drift_settings, glmf_server, glmf_lane, glmf_results) -> dict[str, Any]:
    adapter = make_adapter(glmf_server.base_url, hint=glmf_server.engine)
    try:
        cand = score_candidate(adapter, drift_reference, label=glmf_lane.name,
                                     check_tokenizer=drift_settings.check_tokenizer,
                                     provenance={"lane": glmf_lane.name, **glmf_server.provenance},
                                     template=pick_template(
                                         adapter, sim_template() if glmf_lane.launcher == "sim" else None))
    except DriftFileError as exc:
        cand, problem = None, str(exc)
    finally:
        adapter.close()
    if cand is None:
        pytest.fail(problem, pytrace=False)
    out = glmf_results.results_dir / "drift" / f"{glmf_lane.name}-{glmf_results.session_id}-candidate.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(cand) + "\n")
    return cand


@pytest.fixture(scope="module")
def drift_result(drift_reference, drift_candidate, glmf_results, glmf_lane) -> dict[str, Any]:
    res = compare(drift_reference, [drift_candidate])
    stats = res["candidates"][drift_candidate["label"]]
    sc_oracle, sc_cand = drift_reference.get("self_check") or {}, drift_candidate.get("self_check") or {}
    stats["self_abs_dlogp"] = max(sc_oracle.get("self_abs_dlogp", 0.0), sc_cand.get("self_abs_dlogp", 0.0))
    glmf_results.record("drift", drift_candidate["label"], {
        "candidate": drift_candidate["label"], **stats,
        "prompts": stats["n_prompts"], "tokens": stats["n_tokens"], "oracle_self_check": sc_oracle,
        "reference": {"sha256": drift_reference.get("sha256"), "provenance": drift_reference.get("provenance"),
                      "k": drift_reference.get("k")}})
    return res


def _headline(res: dict[str, Any], label: str) -> str:
    return f"drift of {label} against the oracle\n{drift_table(res)}\n"


def test_drift_self_check(drift_reference, drift_candidate, drift_settings):
    """Scoring the same tokens twice on one server must give exactly the same numbers."""
    mode = drift_settings.self_check
    if mode == "exact":
        note_evaluated()   # "report" shows the noise floor and judges nothing
    rows = []
    for who, sc in (("oracle", drift_reference.get("self_check")), ("candidate", drift_candidate.get("self_check"))):
        if sc and not sc["exact"]:
            rows.append([who, fmt(sc["self_abs_dlogp"]), fmt(sc["self_mean_abs_dlogp"]),
                         str(sc["self_argmax_changes"]), str(sc["n_tokens"])])
    if rows and mode == "exact":
        pytest.fail("instrument self-check: the same tokens scored twice differ (noise floor, shown next to every "
                    "drift number; nothing subtracted)\n"
                    + render_table(rows, ["server", "max |dlogp|", "mean |dlogp|", "top-1 changes", "tokens"])
                    + "\n(set drift.settings.self_check: report to accept a non-reproducible engine)", pytrace=False)


def test_drift_thresholds(drift_section, drift_result, drift_candidate, glmf_thresholds, glmf_lane, record_property):
    label = drift_candidate["label"]
    stats = drift_result["candidates"][label]
    for key in ("mean_abs_dlogp", "median_abs_dlogp", "p95_abs_dlogp", "argmax_mismatch", "self_abs_dlogp"):
        record_property(f"drift.{key}", stats[key])
    checks = checks_from_bounds("drift", stats, drift_section, where=f"{label} vs oracle",
                                source=glmf_thresholds.source(glmf_lane.name, "drift"), hints=HINTS)
    # the CI over prompts belongs next to the number it qualifies, and so does a non-zero noise floor
    noise = f"; noise floor {fmt(stats['self_abs_dlogp'])}" if stats["self_abs_dlogp"] else ""
    for c in checks:
        if c.metric == "mean_abs_dlogp":
            c.where += f" (95% CI {fmt(stats['ci95'][0])}..{fmt(stats['ci95'][1])}{noise})"
        elif c.metric == "argmax_mismatch":
            c.where += f" (95% CI {fmt(stats['argmax_mismatch_ci95'][0])}..{fmt(stats['argmax_mismatch_ci95'][1])}{noise})"
        elif noise and c.metric != "self_abs_dlogp":
            c.where += f" ({noise[2:]})"
    assert_checks(checks, title=_headline(drift_result, label))


def test_drift_not_worse_than(drift_settings, glmf_thresholds, glmf_results, request):
    """Optional: this candidate (B) is not significantly worse than a stored one (A)."""
    spec = drift_settings.not_worse_than
    if spec is None:
        pytest.skip("no drift.settings.not_worse_than (a stored candidate file to compare with)")
    drift_reference = request.getfixturevalue("drift_reference")
    drift_candidate = request.getfixturevalue("drift_candidate")
    path = _resolve(spec.candidate, glmf_thresholds.path)
    try:
        other = json.loads(path.read_text())
        res = compare(drift_reference, [other, drift_candidate], sources=[str(path), "this session"])
    except (OSError, ValueError) as exc:
        res, problem = None, str(exc)
    if res is None:
        pytest.fail(f"drift.settings.not_worse_than: {problem}", pytrace=False)
    pair = res["pair"]
    glmf_results.record("drift", f"{pair['b']} vs {pair['a']}", {k: v for k, v in pair.items()})
    margin = spec.margin
    # gap = mean|dlogp|(B) - mean|dlogp|(A): B is worse only if the whole CI lies above the margin.
    check = Check("mean_abs_dlogp", pair["gap_ci95"][0], {"max": margin},
                  where=f"gap {pair['b']} - {pair['a']}, lower end of the paired 95% CI "
                        f"[{fmt(pair['gap_ci95'][0])}, {fmt(pair['gap_ci95'][1])}]; wins {pair['wins'][0]}:{pair['wins'][1]}",
                  source=f"{glmf_thresholds.path}: drift.settings.not_worse_than",
                  hint=f"{pair['b']} is significantly further from the oracle than {pair['a']}")
    assert_checks([check], title=f"{pair['b']} not worse than {pair['a']}\n{drift_table(res)}\n")
