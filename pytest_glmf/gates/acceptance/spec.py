"""The acceptance gate's declaration: metrics, settings (the only home of their defaults), classes.

    acceptance:
      settings: {prompts_per_class: 3, template: glm}
      classes:
        prose: {accept_rate: {min: 0.26}, tok_s: {min: 157}}
        mean: {accept_rate: {min: 0.35}}          # the unweighted mean over classes
"""
from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Literal

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.spec import GateCommand, GateSpec, Metric, setting

# Draft positions gated one by one (`accept_pos1` .. `accept_pos8`): vLLM's per-position counters
# and response histogram cover num_speculative_tokens positions; 8 covers DFlash's block 7 (6 drafts)
# and EAGLE's usual 3-7 steps. A position the server does not draft is not measured.
POSITIONS = 8

METRICS = [
    Metric("accept_rate", "higher", "fraction", hi=1.0, doc="accepted draft tokens / drafted tokens",
           column="accept rate"),
    Metric("accept_length", "higher", "tokens/step", lo=1.0,
           doc="mean accepted draft tokens per draft step + 1 (the bonus token)", column="accept length"),
    Metric("tok_s", "higher", "tok/s", doc="single-stream decode rate", column="tok/s"),
    *(Metric(f"accept_pos{k}", "higher", "fraction", hi=1.0,
             doc=f"draft steps whose draft token {k} was accepted / draft steps", label=f"acceptance at position {k}",
             column=f"pos {k}") for k in range(1, POSITIONS + 1)),
]

# The chat templates SGLang's native /generate text is rendered with (probe.render_chat).
Template = Literal["glm", "glm-nothink", "chatml", "raw"]
TEMPLATES: tuple[str, ...] = typing.get_args(Template)


@dataclass(frozen=True)
class AcceptanceSettings:
    """How each prompt class is asked (`acceptance.settings`)."""

    prompts_per_class: int | None = setting(None, min=1, doc="the first N prompts of each class (None: all)")
    max_tokens_scale: float = setting(1.0, above=0, doc="scales each class's target answer length")
    template: Template = setting("glm", doc="chat template for SGLang's /generate text")
    users: int = setting(1, min=1, doc="requests in flight at once (> 1 needs per-request statistics: SGLang's "
                                     "meta_info, vLLM's --per-request-spec-decode-metrics)")


DEFAULTS = AcceptanceSettings()


def _check_classes(spec: GateSpec, where: str, classes: Any) -> None:
    if not isinstance(classes, dict):
        raise ConfigError(f"{where}: must be a mapping of prompt class -> metric bounds")
    for cls, bounds in classes.items():
        if not isinstance(bounds, dict):
            raise ConfigError(f"{where}.{cls}: must be a mapping of metric bounds")
        spec.check_metrics(f"{where}.{cls}", bounds, ())


TITLE = "Speculative acceptance per prompt class"
# What the gate's numbers mean, one sentence each, printed under its tables by every report
DEFINITIONS = (
    "accept rate: accepted draft tokens / drafted tokens; accept length: mean accepted draft tokens per draft "
    "step + 1 (the bonus token the target adds), 1.0 when every draft is rejected.",
    "pos k: the fraction of draft steps whose k-th draft token was accepted (a token counts only when every "
    "token before it was); \"no drafts\": the server proposed no draft token for the class, so it has no rate.",
)


SPEC = GateSpec.declare("acceptance", METRICS, AcceptanceSettings, keys={"classes": _check_classes},
                        doc="speculative acceptance per prompt class, single stream",
                        title=TITLE, definitions=DEFINITIONS,
                        command=GateCommand("accept", "speculative acceptance per prompt class", rank=40),
                        report_columns=("class", "tok_s", "accept_rate", "accept_length", "accept_pos1", "accept_pos2",
                                        "accept_pos3", "requests", "source"),
                        report_rank=50, report="pytest_glmf.gates.acceptance.report")
