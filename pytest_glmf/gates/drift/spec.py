"""The drift gate's declaration: its metrics and its settings (the only home of their defaults).

    drift:
      mean_abs_dlogp: {max: 0.15}
      argmax_mismatch: {max: 0.17}
      settings: {prompts: 40, max_tokens: 128, k: 20, self_check: exact}

The suite, `glmf drift reference|score` and `reference.make_reference` take their defaults from
`DEFAULTS` below.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pytest_glmf.gates.spec import GateSpec, Metric, setting

METRICS = [
    Metric("mean_abs_dlogp", "lower", "nats", doc="mean over generated tokens of |logp(candidate) - logp(oracle)|"),
    Metric("median_abs_dlogp", "lower", "nats"),
    Metric("p90_abs_dlogp", "lower", "nats"),
    Metric("p95_abs_dlogp", "lower", "nats"),
    Metric("p99_abs_dlogp", "lower", "nats"),
    Metric("max_abs_dlogp", "lower", "nats"),
    Metric("argmax_mismatch", "lower", "fraction", hi=1.0, doc="share of positions whose greedy token differs"),
    Metric("kl_topk", "lower", "nats", doc="KL divergence over the oracle's top-k"),
    Metric("self_abs_dlogp", "lower", "nats", doc="the same tokens scored twice on one server (noise floor)"),
]


@dataclass(frozen=True)
class NotWorseThan:
    """A paired comparison with a stored candidate file: this server must not be significantly worse."""

    candidate: str = setting(doc="a candidate file from `glmf drift score` (relative: beside the thresholds file)")
    margin: float = setting(0.0, min=0, doc="mean |dlogp| this candidate may be worse by")


@dataclass(frozen=True)
class DriftSettings:
    """Where the oracle reference comes from and how the candidate is scored (`drift.settings`)."""

    reference: str | None = setting(None, doc="a stored reference (`glmf drift reference`); relative paths "
                                              "are looked up beside the thresholds file")
    oracle_url: str | None = setting(None, doc="or: make the reference against this running oracle")
    oracle_engine: Literal["sglang", "vllm"] | None = setting(None, doc="the oracle's engine (None: detected)")
    regenerate: bool = setting(False, doc="make the reference even when a stored one exists "
                                          "(also: env GLMF_DRIFT_REGENERATE=1)")
    prompt_file: str | None = setting(None, doc="a prompt set JSON (None: the packaged drift_prompts.json)")
    prompts: int | None = setting(None, min=1, doc="the first N prompts of the set (None: all, or as many as the "
                                                   "stored reference holds)")
    max_tokens: int = setting(128, min=1, doc="greedy tokens per prompt in a new reference (the recipe: 128)")
    k: int = setting(20, min=1, doc="top-k logprobs kept per position (vLLM's default --max-logprobs cap)")
    self_check: Literal["exact", "report"] = setting("exact", doc="exact: fail on any self-difference; "
                                                                  "report: show the noise floor only")
    check_tokenizer: bool = setting(True, doc="re-template the prompts on the candidate and compare token ids")
    not_worse_than: NotWorseThan | None = setting(None, doc="{candidate: PATH, margin: 0.0}")


DEFAULTS = DriftSettings()

SPEC = GateSpec.declare("drift", METRICS, DriftSettings,
                        doc="teacher-forced log-prob drift against an oracle reference")
