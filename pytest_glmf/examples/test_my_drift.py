"""How far our quantized checkpoint drifts from the original, on our own prompts
(my_drift_prompts.json): teacher-forced log-prob drift against an oracle reference.

    pytest examples/test_my_drift.py --glmf-lanes examples/sim-lanes.yaml --glmf-lane batch
    ORACLE_URL=http://127.0.0.1:30001 pytest examples/test_my_drift.py --glmf-url http://127.0.0.1:30000

The oracle: ORACLE_URL (a running server with the original weights), or a stored reference
(glmf_drift("reference.json"), made once with `glmf drift reference`), or a lane of the lanes file
to launch for it (glmf_drift(oracle_lane="fp8-original")); a simulator lane starts its own (the
same flags with the original checkpoint). Measured once per session per distinct arguments.

An engine that is not bit-reproducible (batching, speculative decoding: the same ids scored twice
differ) fails test_scoring_is_exact; judge it in floor mode instead (test_drift_above_the_floor):
both servers score every prompt twice at the same concurrency, the per-prompt noise floor is
subtracted from the drift (excess_abs_dlogp, with a paired bootstrap CI over prompts) and the floor
is bounded itself (a new image whose floor rose is a regression). Delete test_scoring_is_exact then.
"""
import os
from pathlib import Path

from pytest_glmf.gates.drift import assert_drift, assert_drift_self_check
from pytest_glmf.gates.template import assert_template

PROMPTS = Path(__file__).with_name("my_drift_prompts.json")


def measure(glmf_drift):
    return glmf_drift(oracle_url=os.environ.get("ORACLE_URL"), prompt_file=PROMPTS, max_tokens=32, k=8)


def test_scoring_is_exact(glmf_drift):
    """The same tokens scored twice give the same numbers, else every drift number carries noise."""
    assert_drift_self_check(measure(glmf_drift))


def test_quantization_drift(glmf_drift):
    drift = measure(glmf_drift)
    print(drift.table())
    assert_drift(drift, mean_abs_dlogp={"max": 0.2}, argmax_mismatch={"max": 0.2})


def test_prompts_render_as_the_known_good_image(glmf_template):
    """Drift scores token ids; the template gate checks the chat template that makes them (system
    prompt, tools, reasoning switch): a changed template passes drift and breaks every user."""
    assert_template(glmf_template(os.environ.get("TEMPLATE_REF")))


def test_drift_above_the_floor(glmf_drift):
    drift = glmf_drift(oracle_url=os.environ.get("ORACLE_URL"), prompt_file=PROMPTS, max_tokens=32, k=8,
                       self_check="floor", score_concurrency=4)
    print(drift.table())   # "floor mode: judged on the drift above the floor (excess = mean |dlogp| - floor)"
    assert_drift(drift, excess_abs_dlogp={"max": 0.2}, floor_abs_dlogp={"max": 0.05})
