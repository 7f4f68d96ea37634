"""The drift gate's declaration: its metrics and its settings (the only home of their defaults).

    drift:
      mean_abs_dlogp: {max: 0.15}
      argmax_mismatch: {max: 0.17}
      settings: {prompts: 40, max_tokens: 128, k: 20, self_check: exact}

A noisy engine (the same ids scored twice differ) is judged on the drift above its noise floor:

    drift:
      excess_abs_dlogp: {max: 0.15}
      floor_abs_dlogp: {max: 0.2}
      output_length_ratio: {max: 1.25}
      runaway_share: {max: 0.05}
      settings: {self_check: floor, score_concurrency: 8, answer_max_tokens: 4096}

The suite, `glmf drift reference|score` and `reference.make_reference` take their defaults from
`DEFAULTS` below.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pytest_glmf.gates.spec import GateCommand, GateSpec, Metric, setting

METRICS = [
    Metric("mean_abs_dlogp", "lower", "nats", doc="mean over generated tokens of |logp(candidate) - logp(oracle)|",
           column="mean |dlogp|"),
    Metric("median_abs_dlogp", "lower", "nats", column="median"),
    Metric("p90_abs_dlogp", "lower", "nats"),
    Metric("p95_abs_dlogp", "lower", "nats", column="p95"),
    Metric("p99_abs_dlogp", "lower", "nats"),
    Metric("max_abs_dlogp", "lower", "nats"),
    Metric("argmax_mismatch", "lower", "fraction", hi=1.0, doc="share of positions whose greedy token differs",
           column="argmax != ref"),
    Metric("kl_topk", "lower", "nats", doc="KL divergence over the oracle's top-k", column="kl top-k"),
    Metric("self_abs_dlogp", "lower", "nats", doc="the same tokens scored twice on one server: the worst position"),
    Metric("floor_abs_dlogp", "lower", "nats", doc="the noise floor: per prompt sqrt((f_oracle^2 + f_candidate^2)/2), "
                                                  "f = mean |dlogp| of two scorings on one server (stats.floor_stats)",
           column="floor"),
    Metric("excess_abs_dlogp", "lower", "nats", lo=None,
           doc="mean |dlogp| minus the floor, per prompt: a lower bound of the noise-free drift", column="excess"),
    Metric("excess_rms_dlogp", "lower", "nats", doc="sqrt(mean dlogp^2 - floor's mean square): the RMS shift, "
                                                   "unbiased in the square"),
    Metric("output_length_ratio", "lower", "ratio", doc="candidate / oracle completion tokens of greedy chat answers",
           column="length ratio"),
    Metric("reasoning_length_ratio", "lower", "ratio", doc="the same over the reasoning the server's parser splits off",
           column="reasoning"),
    Metric("content_length_ratio", "lower", "ratio", doc="the same over the content", column="content"),
    Metric("runaway_share", "lower", "fraction", hi=1.0, doc="share of candidate answers that reach max_tokens",
           column="runaway (max_tokens)"),
    Metric("greedy_agreement", "higher", "fraction", hi=1.0,
           doc="share of prompts whose first agreement_tokens answer tokens equal the oracle's",
           column="agree"),
    Metric("finish_reason_changed", "lower", "fraction", hi=1.0, doc="share of prompts whose finish reason changed",
           column="finish changed"),
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
    self_check: Literal["auto", "exact", "report", "floor"] = setting(
        "auto", doc="exact: fail on any self-difference; report: show the noise floor only; floor: judge the "
                    "drift above the floor (excess_*) and the floor itself; auto: exact when both servers "
                    "score exactly, else floor")
    score_concurrency: int = setting(1, min=1, doc="prompts scored at once, on the candidate and (a reference made "
                                                   "now) the oracle: the batch shape the floor is measured at")
    answer_max_tokens: int | None = setting(None, min=1, doc="greedy chat answers of this many tokens at most on "
                                                             "both servers: length ratios, runaway share, greedy "
                                                             "agreement (None: not measured)")
    answer_prompts: int | None = setting(None, min=1, doc="answer the first N prompts only (None: all)")
    agreement_tokens: int = setting(16, min=1, doc="greedy_agreement compares the first N answer tokens")
    check_tokenizer: bool = setting(True, doc="re-template the prompts on the candidate and compare token ids")
    not_worse_than: NotWorseThan | None = setting(None, doc="{candidate: PATH, margin: 0.0}")


DEFAULTS = DriftSettings()

TITLE = "Log-prob drift vs the oracle"
# What the gate's numbers mean, one sentence each, printed under its tables by every report
DEFINITIONS = (
    "|dlogp|: |candidate logprob - oracle logprob| of the oracle's greedy token, teacher-forced on exact token ids.",
    "argmax mismatch: share of positions where the candidate's top-1 token differs from the oracle's token.",
    "ci95: bootstrap over prompts (not tokens) for the mean |dlogp|.",
    "floor: per prompt sqrt((f_oracle^2 + f_candidate^2) / 2), f = mean |dlogp| between two scorings of "
    "the same ids on one server; excess = mean |dlogp| - floor (self_check_mode says which judged).",
    "output_length_ratio: candidate / oracle completion tokens of greedy chat answers; runaway_share: "
    "answers that reached max_tokens.",
)


SPEC = GateSpec.declare("drift", METRICS, DriftSettings,
                        doc="teacher-forced log-prob drift against an oracle reference",
                        title=TITLE, definitions=DEFINITIONS,
                        command=GateCommand("drift", "log-prob drift: oracle reference, scoring, comparison", rank=30),
                        report_columns=("candidate", "mean_abs_dlogp", "median_abs_dlogp", "p95_abs_dlogp",
                                        "argmax_mismatch", "ci95", "kl_topk", "self_abs_dlogp", "self_check_mode",
                                        "floor_abs_dlogp", "excess_abs_dlogp", "output_length_ratio",
                                        "runaway_share", "prompts", "tokens"),
                        report_rank=40, report="pytest_glmf.gates.drift.report")
