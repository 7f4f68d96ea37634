"""Template gate (issue 23): the served chat template and tokenizer, token for token.

Teacher-forced drift scoring sends token ids through /generate and never meets the chat template,
the tokenizer or BOS handling, so an image whose template drops the system prompt or the tools
block, doubles BOS or flips the reasoning default passes it and breaks every user. This gate
renders the conversations of pytest_glmf/data/template_conversations.yaml (system prompt,
multi-turn, tools offered, a tool call and its result, reasoning on and off) through the server's
serving path (`/tokenize` with messages, or a chat completion's prompt ids:
pytest_glmf/gates/template/served.py cites both engines) and compares the prompt ids with the
lane's reference: `template.settings.reference` (a stored run of the known-good image, from
`glmf template reference --url`), else the simulator's own template for a simulator lane, else
the model directory's own template applied with transformers. Without bounds in the lane's
section every conversation must render exactly as the reference (`mismatched <= 0`,
`failed_requests <= 0`). A failure shows both sides' decoded text around the first differing token.
"""
from __future__ import annotations

import pytest

from pytest_glmf.gates.template import assert_template

pytestmark = pytest.mark.glmf_gate("template")


def test_chat_template_matches_reference(glmf_template, glmf_lane, glmf_thresholds, record_property):
    result = glmf_template()
    for key in ("conversations", "matched", "mismatched", "failed_requests"):
        record_property(f"template.{key}", getattr(result, key))
    print(result.table())
    bounds = glmf_thresholds.bounds(glmf_lane.name, "template")
    assert_template(result, source=glmf_thresholds.source(glmf_lane.name, "template") if bounds else None, **bounds)
