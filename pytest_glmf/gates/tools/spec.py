"""The tool-call gate's declaration: metrics, default bounds, settings (the only home of their defaults).

    tools:
      parsed_fraction: {min: 1.0}
      leaks: {max: 0}
      settings: {concurrency: 48, tool_choice: auto}

Without any bound in the lane's section the gate holds the recipe's bar, `DEFAULT_BOUNDS`.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Literal

from pytest_glmf.gates.spec import GateCommand, GateSpec, Metric, setting

METRICS = [
    Metric("parsed", "higher", "count", doc="turns whose calls came back parsed and valid"),
    Metric("parsed_fraction", "higher", "fraction", hi=1.0, doc="parsed turns / applicable turns"),
    Metric("leaks", "lower", "count", doc="turns with tool markup left in content or reasoning"),
    Metric("wrong_calls", "lower", "count", doc="calls made where none was wanted, or schema violations"),
]

# The recipe's "Hermes harness 10/10 tool turns, tool calls parsed", and no markup leaked.
DEFAULT_BOUNDS = {"parsed_fraction": {"min": 1.0}, "leaks": {"max": 0}}

ToolChoice = Literal["auto", "required", "named"]
TOOL_CHOICES: tuple[str, ...] = typing.get_args(ToolChoice)


@dataclass(frozen=True)
class ToolsSettings:
    """How the scenarios are asked (`tools.settings`)."""

    concurrency: int | None = setting(None, min=1, doc="turns in flight in the concurrent test (None: the "
                                                       "largest curve row's users, else 8)")
    tool_choice: ToolChoice = setting("auto", doc="auto | required | named (small models need required/named)")
    strict: bool = setting(False, doc='add "strict": true to every function')
    max_tokens: int = setting(512, min=1, doc="output tokens per answer (a call they cut is reported as "
                                              "CUT_BY_MAX_TOKENS, not as a leak)")


DEFAULTS = ToolsSettings()
FALLBACK_CONCURRENCY = 8   # no concurrency setting and no curve rows

TITLE = "Tool-call gate"
# What the gate's numbers mean, one sentence each, printed under its tables by every report
DEFINITIONS = (
    "parsed: turns whose tool calls came back in tool_calls, valid against the tool's schema, with no "
    "markup leaked into content.",
)


SPEC = GateSpec.declare("tools", METRICS, ToolsSettings, doc="tool-call parsing, leaks and schema validity",
                        title=TITLE, definitions=DEFINITIONS,
                        command=GateCommand("tools", "tool-call gate against a server", rank=50),
                        report_columns=("concurrency", "turns", "parsed", "parsed_fraction", "leaks", "wrong_calls",
                                        "bad_turns"),
                        report_rank=60)
