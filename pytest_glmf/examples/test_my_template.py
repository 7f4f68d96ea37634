"""The image we are about to ship renders our users' chats into the same prompt tokens as the image
we trust: system prompt, earlier turns, the tools block, a tool call and its result, reasoning on
and off. Drift scoring sends token ids and never sees the chat template, so this is the check
that catches a changed template, tokenizer or BOS.

    pytest examples/test_my_template.py --glmf-lanes examples/sim-lanes.yaml --glmf-lane batch
    glmf template reference --url http://known-good:30000 --out template-ref.json     # once
    TEMPLATE_REF=template-ref.json pytest examples/test_my_template.py --glmf-url http://candidate:30000

The reference: TEMPLATE_REF (a stored run of the known-good image), else the lane's
`template.settings.reference`, else the model directory's own chat template applied with
transformers (`glmf template reference --model-dir DIR --python VENV/bin/python`; the simulator:
its own template).
"""
import os

from pytest_glmf.gates.template import assert_template


def test_chat_template_unchanged(glmf_template):
    template = glmf_template(os.environ.get("TEMPLATE_REF"))
    print(template.table())
    assert_template(template, mismatched={"max": 0}, failed_requests={"max": 0})
