"""Acceptance gate: speculative decoding per prompt class, single stream.

The recipe (DFlash2 block 7): "0.39 mean across seven prompt classes, 0.29 on plain prose", 0.61
on step-by-step math, with single-stream tok/s per class, and "the largest lever left on
single-stream speed". Every class of pytest_glmf/data/prompt_classes.yaml is measured once per session,
one request at a time, and each class is gated on the lane's `acceptance.classes` bounds
(accept_rate, accept_length, accept_pos1.., tok_s); the pseudo-class `mean` gates the unweighted
mean over classes, the recipe's headline number. A class the server proposed no draft for says so
("no drafts proposed for this class"); a speculative server that drafted nothing in any class fails
`test_acceptance_is_measured`, naming the engine's and the method's own knobs. Settings (`acceptance.settings`: `prompts_per_class`,
`max_tokens_scale`, `template`) are declared with their defaults in
pytest_glmf/gates/acceptance/spec.py (`AcceptanceSettings`).

A lane without speculative decoding skips with the reason, in the server's own words when it says
(SGLang's /server_info `speculative_algorithm: null`), before anything is measured; a lane whose
spec field says it speculates but whose server reports no speculation fails.
"""
from __future__ import annotations

from typing import Any

import pytest

from pytest_glmf.gates.acceptance import assert_acceptance, assert_speculating, load_prompt_classes

pytestmark = pytest.mark.glmf_gate("acceptance")

CLASSES = load_prompt_classes()


@pytest.fixture(scope="module")
def acceptance_section(glmf_thresholds, glmf_lane) -> dict[str, Any]:
    return glmf_thresholds.for_gate(glmf_lane.name, "acceptance")


@pytest.fixture(scope="module")
def acceptance_result(glmf_acceptance, glmf_server, glmf_lane, glmf_thresholds):
    """Measured once: an attached server of unknown config is judged by its first answer."""
    said = glmf_server.config.why_no_speculation()     # the server's own words, when it says
    if not glmf_lane.speculative and (said or glmf_lane.launcher != "attach"):
        pytest.skip(f"lane {glmf_lane.name!r} runs without speculative decoding ({said or 'spec: none'}): "
                    "no acceptance to measure")
    settings = glmf_thresholds.settings(glmf_lane.name, "acceptance")
    result = glmf_acceptance(CLASSES, prompts_per_class=settings.prompts_per_class,
                             max_tokens_scale=settings.max_tokens_scale, template=settings.template,
                             users=settings.users)
    if result.speculative is False and not glmf_lane.speculative:
        pytest.skip(f"the server of lane {glmf_lane.name!r} reports no speculative decoding "
                    f"({result.source}: no spec fields / zero drafts in the first answer)")
    return result


@pytest.mark.glmf_serial
def test_acceptance_is_measured(acceptance_result, acceptance_section, glmf_lane, glmf_thresholds, record_property):
    """The server speculates as the lane says, every request answered, and every class named in
    the thresholds exists in the prompt set (a typo must not silently disable a class's gate)."""
    record_property("acceptance.source", acceptance_result.source)
    print(acceptance_result.table())
    known = {c.name for c in CLASSES} | {"mean"}
    unknown = sorted(set(acceptance_section.get("classes") or {}) - known)
    if unknown:
        pytest.fail(f"{glmf_thresholds.source(glmf_lane.name, 'acceptance')}.classes names unknown prompt "
                    f"class(es) {unknown}; known: {sorted(known)}", pytrace=False)
    assert_speculating(acceptance_result, spec=glmf_lane.spec)


@pytest.mark.glmf_serial
@pytest.mark.parametrize("class_name", [c.name for c in CLASSES])
def test_acceptance_per_class(class_name, acceptance_result, acceptance_section, glmf_lane, glmf_thresholds,
                              record_property):
    if class_name not in acceptance_result.names():
        pytest.skip(f"class {class_name!r} not measured (the probe stopped: no speculative decoding)")
    row = acceptance_result[class_name]
    for key in ("tok_s", "accept_rate", "accept_length"):
        record_property(f"acceptance.{class_name}.{key}", getattr(row, key))
    # a class with zero drafts (an n-gram proposer with nothing to propose) has no rate: a bound on
    # it fails naming the proposer's knobs; without a bound the test says so and skips
    bounds = (acceptance_section.get("classes") or {}).get(class_name) or {}
    if row.no_drafts and not bounds:
        pytest.skip(f"class {class_name!r}: no drafts proposed for this class ({acceptance_result.source})")
    assert_acceptance(acceptance_result, class_name,
                      source=f"{glmf_thresholds.source(glmf_lane.name, 'acceptance')}.classes.{class_name}", **bounds)


@pytest.mark.glmf_serial
def test_acceptance_mean_over_classes(acceptance_result, acceptance_section, glmf_lane, glmf_thresholds, record_property):
    """The recipe's headline: "0.39 mean across seven prompt classes" (`classes.mean` bounds)."""
    mean = acceptance_result.mean
    for key in ("tok_s", "accept_rate", "accept_length"):
        record_property(f"acceptance.mean.{key}", getattr(mean, key))
    bounds = (acceptance_section.get("classes") or {}).get("mean") or {}
    if not bounds:
        pytest.skip(f"no bounds for classes.mean in {glmf_thresholds.source(glmf_lane.name, 'acceptance')}")
    assert_acceptance(acceptance_result, "mean",
                      source=f"{glmf_thresholds.source(glmf_lane.name, 'acceptance')}.classes.mean", **bounds)
