"""Acceptance gate: speculative decoding per prompt class, single stream.

The recipe (DFlash2 block 7): "0.39 mean across seven prompt classes, 0.29 on plain prose", 0.61
on step-by-step math, with single-stream tok/s per class, and "the largest lever left on
single-stream speed". Every class of pytest_glmf/data/prompt_classes.yaml is measured once per session,
one request at a time, and each class is gated on the lane's `acceptance.classes` bounds
(accept_rate, accept_length, tok_s); the pseudo-class `mean` gates the unweighted mean over
classes, the recipe's headline number. Settings (`acceptance.settings`: `prompts_per_class`,
`max_tokens_scale`, `template`) are declared with their defaults in
pytest_glmf/gates/acceptance/spec.py (`AcceptanceSettings`).

A lane without speculative decoding skips with the reason; a lane whose spec field says it
speculates but whose server reports no speculation fails.
"""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.gates.acceptance.probe import load_prompt_classes, probe
from pytest_glmf.gates.acceptance.table import render_result
from pytest_glmf.gates.verdict import assert_checks, checks_from_bounds, note_evaluated, render_table

pytestmark = pytest.mark.glmf_gate("acceptance")

CLASSES = load_prompt_classes()
HINTS = {
    "accept_rate": "drafts rejected more often: check the draft model (--speculative-draft-model-path), "
                   "--speculative-dflash-block-size and the draft attention backend",
    "accept_length": "fewer tokens per verify step: same knobs as accept_rate",
    "tok_s": "single-stream speed: check the spec flags, the decode backend, and that nothing else loads the server",
}


@pytest.fixture(scope="module")
def acceptance_section(glmf_thresholds, glmf_lane) -> dict[str, Any]:
    return glmf_thresholds.for_gate(glmf_lane.name, "acceptance")


@pytest.fixture(scope="module")
def acceptance_result(glmf_server, glmf_lane, glmf_client, glmf_thresholds, glmf_results) -> dict[str, Any]:
    """Measured once: an attached server of unknown config is judged by its first answer."""
    if not glmf_lane.speculative and glmf_lane.launcher != "attach":
        pytest.skip(f"lane {glmf_lane.name!r} runs without speculative decoding (spec: none): "
                    "no acceptance to measure")
    settings = glmf_thresholds.settings(glmf_lane.name, "acceptance")
    result = probe(glmf_client, glmf_server.engine, CLASSES, prompts_per_class=settings.prompts_per_class,
                   max_tokens_scale=settings.max_tokens_scale, template=settings.template)
    # one row per class (and the mean), as the report renders them; the raw requests beside them
    for row in result["classes"] + [result["mean"]]:
        glmf_results.record("acceptance", row["class"], {
            **{k: row.get(k) for k in ("class", "tok_s", "accept_rate", "accept_length", "requests", "errors")},
            "recipe_accept_rate": (row.get("recipe") or {}).get("accept_rate"),
            "source": f"{result['source']}; {result['prompt_format']}"})
    glmf_results.record("acceptance", "requests", result["records"])
    if result["speculative"] is False and not glmf_lane.speculative:
        pytest.skip(f"the server of lane {glmf_lane.name!r} reports no speculative decoding "
                    f"({result['source']}: no spec fields / zero drafts in the first answer)")
    return result


@pytest.mark.glmf_serial
def test_acceptance_is_measured(acceptance_result, acceptance_section, glmf_lane, glmf_thresholds, record_property):
    """The server speculates as the lane says, every request answered, and every class named in
    the thresholds exists in the prompt set (a typo must not silently disable a class's gate)."""
    record_property("acceptance.source", acceptance_result["source"])
    print(render_result(acceptance_result))
    note_evaluated()
    if acceptance_result["speculative"] is not True:
        pytest.fail(f"lane {glmf_lane.name!r} sets spec={glmf_lane.spec!r} but the server reports no "
                    f"speculative decoding ({acceptance_result['source']}): check --speculative-algorithm "
                    "and the draft model in the boot log", pytrace=False)
    known = {c.name for c in CLASSES} | {"mean"}
    unknown = sorted(set(acceptance_section.get("classes") or {}) - known)
    if unknown:
        pytest.fail(f"{glmf_thresholds.source(glmf_lane.name, 'acceptance')}.classes names unknown prompt "
                    f"class(es) {unknown}; known: {sorted(known)}", pytrace=False)
    errors = [[r["class_name"], str(r["prompt_index"]), r["error"]] for r in acceptance_result["records"] if r["error"]]
    if errors:
        pytest.fail(f"{len(errors)} acceptance request(s) failed\n" + render_table(errors, ["class", "prompt", "error"]),
                    pytrace=False)


@pytest.mark.glmf_serial
@pytest.mark.parametrize("class_name", [c.name for c in CLASSES])
def test_acceptance_per_class(class_name, acceptance_result, acceptance_section, glmf_lane, glmf_thresholds,
                              record_property):
    row = next((r for r in acceptance_result["classes"] if r["class"] == class_name), None)
    if row is None:
        pytest.skip(f"class {class_name!r} not measured (the probe stopped: no speculative decoding)")
    for key in ("tok_s", "accept_rate", "accept_length"):
        record_property(f"acceptance.{class_name}.{key}", row[key])
    source = f"{glmf_thresholds.source(glmf_lane.name, 'acceptance')}.classes.{class_name}"
    bounds = (acceptance_section.get("classes") or {}).get(class_name) or {}
    checks = checks_from_bounds("acceptance", row, bounds, where=f"class={class_name}", source=source, hints=HINTS)
    if row["errors"] or not row["speculative"]:
        pytest.fail(f"class {class_name!r}: no acceptance measured ({row['errors']} error(s) in "
                    f"{row['requests']} request(s); source {acceptance_result['source']})", pytrace=False)
    # a class with zero drafts (an n-gram proposer with nothing to propose) has no rate: a bound on
    # it fails below as "not measured"; without a bound the row is only recorded
    assert_checks(checks, f"speculative acceptance of lane {glmf_lane.name!r}, class {class_name!r}")


@pytest.mark.glmf_serial
def test_acceptance_mean_over_classes(acceptance_result, acceptance_section, glmf_lane, glmf_thresholds, record_property):
    """The recipe's headline: "0.39 mean across seven prompt classes" (`classes.mean` bounds)."""
    mean = acceptance_result["mean"]
    for key in ("tok_s", "accept_rate", "accept_length"):
        record_property(f"acceptance.mean.{key}", mean[key])
    bounds = (acceptance_section.get("classes") or {}).get("mean") or {}
    if not bounds:
        pytest.skip(f"no bounds for classes.mean in {glmf_thresholds.source(glmf_lane.name, 'acceptance')}")
    source = f"{glmf_thresholds.source(glmf_lane.name, 'acceptance')}.classes.mean"
    checks = checks_from_bounds("acceptance", mean, bounds, where="mean over classes", source=source, hints=HINTS)
    assert_checks(checks, f"speculative acceptance of lane {glmf_lane.name!r}, mean over {mean['classes']} classes")
