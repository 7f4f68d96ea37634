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

METRICS = [
    Metric("accept_rate", "higher", "fraction", hi=1.0, doc="accepted draft tokens / drafted tokens",
           column="accept rate"),
    Metric("accept_length", "higher", "tokens/step", doc="tokens produced per verify step", column="accept length"),
    Metric("tok_s", "higher", "tok/s", doc="single-stream decode rate", column="tok/s"),
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
    "accept rate: accepted draft tokens / drafted tokens; accept length: tokens per verify step.",
)


SPEC = GateSpec.declare("acceptance", METRICS, AcceptanceSettings, keys={"classes": _check_classes},
                        doc="speculative acceptance per prompt class, single stream",
                        title=TITLE, definitions=DEFINITIONS,
                        command=GateCommand("accept", "speculative acceptance per prompt class", rank=40),
                        report_columns=("class", "tok_s", "accept_rate", "accept_length", "requests", "source"),
                        report_rank=50)
