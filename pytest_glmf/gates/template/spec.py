"""The template gate's declaration: metrics, default bounds, settings (the only home of their defaults).

    template:
      mismatched: {max: 0}
      settings: {reference: template-ref.json, served_ids: tokenize}

Without any bound in the lane's section the gate holds its bar, `DEFAULT_BOUNDS`: every
conversation renders to exactly the reference's token ids.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Literal

from pytest_glmf.gates.spec import GateCommand, GateSpec, Metric, setting

METRICS = [
    Metric("mismatched", "lower", "count", doc="conversations whose served prompt ids differ from the reference"),
    Metric("matched_fraction", "higher", "fraction", hi=1.0, doc="conversations rendered exactly as the reference"),
    Metric("failed_requests", "lower", "count", doc="conversations the server would not render (HTTP errors)"),
    Metric("changed_defaults", "lower", "count",
           doc="output defaults that differ from the reference's: skip_special_tokens, which vLLM >= 0.33 takes "
               "from generation_config.json (both known only)"),
]

# A served prompt that differs by one token is a different prompt for every user.
DEFAULT_BOUNDS = {"mismatched": {"max": 0}, "failed_requests": {"max": 0}, "changed_defaults": {"max": 0}}

ServedIds = Literal["tokenize", "chat"]
SERVED_IDS: tuple[str, ...] = typing.get_args(ServedIds)


@dataclass(frozen=True)
class TemplateSettings:
    """Where the reference comes from and how the served prompt ids are read (`template.settings`)."""

    reference: str | None = setting(None, doc="a stored reference (`glmf template reference`); relative paths are "
                                              "looked up beside the thresholds file. None: rendered locally from "
                                              "the lane's model directory (the simulator: its own template)")
    python: str | None = setting(None, doc="the interpreter with transformers that renders a local reference "
                                           "(None: the lane's executable, for a process lane)")
    served_ids: ServedIds = setting("tokenize", doc="tokenize: POST /tokenize with messages; chat: the prompt ids "
                                                    "a chat completion returns (SGLang return_prompt_token_ids, "
                                                    "vLLM return_token_ids)")
    conversations: str | None = setting(None, doc="a conversations YAML (None: the packaged "
                                                  "template_conversations.yaml)")
    context_tokens: int = setting(8, min=1, doc="tokens of decoded text shown on each side of the first difference")


DEFAULTS = TemplateSettings()

TITLE = "Chat template and tokenizer"
# What the gate's numbers mean, one sentence each, printed under its tables by every report
DEFINITIONS = (
    "mismatched: conversations whose prompt ids, as the server renders them (its /tokenize with messages, or "
    "a chat completion's prompt ids), differ from the reference's.",
    "failed_requests: conversations the server would not render (an HTTP error), counted apart.",
)


SPEC = GateSpec.declare("template", METRICS, TemplateSettings,
                        doc="served chat template and tokenizer: prompt ids against a reference",
                        title=TITLE, definitions=DEFINITIONS,
                        command=GateCommand("template", "served chat template: make a reference, check a server against it", rank=70),
                        report_rank=70)
