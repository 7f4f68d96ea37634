"""Speculative decoding on our traffic: how often the draft model's tokens are accepted on our two
kinds of requests (my_prompt_classes.yaml), and the mean over them.

    pytest examples/test_my_acceptance.py --glmf-lanes examples/sim-lanes.yaml --glmf-lane daily

`glmf_acceptance` measures every class, one request at a time (alone on the server: it is a speed
measurement), once per session; `assert_acceptance` takes a class's bounds as a thresholds file's
`acceptance.classes` entry does ("mean": the unweighted mean over the classes).
"""
from pathlib import Path

import pytest

from pytest_glmf.gates.acceptance import assert_acceptance, assert_speculating

CLASSES = Path(__file__).with_name("my_prompt_classes.yaml")


@pytest.mark.glmf_lanes("daily")           # the lane that runs a draft model
def test_the_draft_model_is_used(glmf_acceptance):
    acceptance = glmf_acceptance(CLASSES, prompts_per_class=2)
    print(acceptance.table())
    assert_speculating(acceptance)


@pytest.mark.glmf_lanes("daily")
@pytest.mark.parametrize("prompt_class", ["order_json", "customer_reply"])
def test_acceptance_per_class(glmf_acceptance, prompt_class):
    acceptance = glmf_acceptance(CLASSES, prompts_per_class=2)
    assert_acceptance(acceptance, prompt_class, accept_rate={"min": 0.2}, tok_s={"min": 100})


@pytest.mark.glmf_lanes("daily")
def test_mean_acceptance(glmf_acceptance):
    acceptance = glmf_acceptance(CLASSES, prompts_per_class=2)
    assert_acceptance(acceptance, "mean", accept_rate={"min": 0.25}, accept_length={"min": 2.0})
