"""Our support bot's speed: per-user tok/s and time to first token at 1 and 8 concurrent users,
with our own prompt (my_prompt.md) and our answer length, not the recipe's briefing.

    pytest examples/test_my_curve.py --glmf-lanes examples/sim-lanes.yaml --glmf-lane batch
    pytest examples/test_my_curve.py --glmf-url http://127.0.0.1:30000 --glmf-lane batch

`glmf_curve` measures on the session's server (one discarded warm pass per users value, then
`runs` measured runs) and returns the rows; `assert_curve` takes bounds written exactly like a
thresholds file's curve row and fails with its table when one is missed. A curve test runs alone
on the server (also under `pytest -n N`).
"""
from pathlib import Path

import pytest

from pytest_glmf.gates.curve import assert_curve

PROMPT = Path(__file__).with_name("my_prompt.md")


@pytest.mark.glmf_users(1, 8)             # one test per users value: test_support_bot_speed[users=8]
def test_support_bot_speed(glmf_curve):
    curve = glmf_curve(prompt_file=PROMPT, max_tokens=128, runs=2)
    assert_curve(curve, per_user_tok_s={"min": 40}, ttft_p95_s={"max": 1.0})


def test_eight_users_share_the_box_fairly(glmf_curve):
    row = glmf_curve(8, prompt_file=PROMPT, max_tokens=128, runs=2)[8]
    # per-user tok/s (and the slowest users'), aggregate, TTFT; a number the client could not tell
    # within its error bound is None, "-" in the table, and row.unmeasured says why
    print(row.table())
    assert_curve(row, per_user_tok_s_p5={"min": 35}, aggregate_tok_s={"min": 300})
