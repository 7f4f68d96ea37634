"""The curve gate's declaration: its metrics, its settings (the only home of their defaults) and its rows.

    curve:
      settings: {max_tokens: 384, runs: 3, prompt_tokens: 2400}    # every row
      rows:
        - {users: 48, per_user_tok_s: {min: 45}, ttft_p95_s: {max: 0.9}}
        - {users: 96, aggregate_tok_s: {min: 3065}, allow_queueing: true, settings: {runs: 5}}
      beats: [{lane: batch, users: [1, 8]}]      # this lane beats batch per user there (compare/thresholds.py)

A row's own `settings:` override the lane's for that row. A row is a load run (pytest_glmf/load): the
settings named like the load engine's (`LoadSettings`) are its, with its defaults (`LOAD_DEFAULTS`,
written once there); measure.py turns them into the run's `LoadSettings`. The checks and `glmf curve`
take their defaults from `DEFAULTS` below.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pytest_glmf.compare.thresholds import check_beats  # `beats:` another lane (compare/thresholds.py)
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.spec import GateCommand, GateSpec, Metric, setting
from pytest_glmf.load import LOAD_DEFAULTS as LOAD  # the load engine's defaults, the curve's own

METRICS = [
    Metric("per_user_tok_s", "higher", "tok/s", doc="median over the row's users of each user's decode rate",
           label="per-user decode rate", column="per-user tok/s"),
    Metric("per_user_tok_s_p5", "higher", "tok/s", doc="the slowest users (5th percentile)",
           label="slowest users' decode rate (p5)", column="p5 tok/s"),
    Metric("aggregate_tok_s", "higher", "tok/s", doc="output tokens of all users / wall time",
           label="aggregate output", column="aggregate tok/s"),
    Metric("ttft_p50_s", "lower", "s", doc="time to first token, median",
           label="TTFT p50", column="TTFT p50 s"),
    Metric("ttft_p95_s", "lower", "s", doc="time to first token, 95th percentile",
           label="TTFT p95", column="TTFT p95 s"),
    Metric("itl_p95_s", "lower", "s", doc="time between tokens, 95th percentile",
           label="inter-token latency p95"),
    Metric("spread_pct", "lower", "%", doc="run-to-run spread of the row's numbers",
           label="run-to-run spread", column="spread"),
]


@dataclass(frozen=True)
class CurveRowSettings:
    """What each row sends and how it is measured (`curve.settings`, a row's `settings:` on top)."""

    max_tokens: int = setting(LOAD.max_tokens, min=1, doc="output tokens per request (ignore_eos: each produces them all)")
    runs: int = setting(LOAD.runs, min=1, doc="measured runs per row, after the warm pass")
    warmup: bool = setting(LOAD.warmup, doc="one discarded pass per batch shape first (the first hit is autotune)")
    rate_per_s: float | None = setting(None, above=0, doc="open loop: requests arrive at this rate, not all at once")
    spread_max_pct: float = setting(LOAD.spread_max_pct, min=0, doc="a row whose runs spread more than this is flagged")
    path: str = setting(LOAD.path, doc="the streamed endpoint (chat or plain completions)")
    model: str | None = setting(None, doc="model name sent with each request (None: the server's first model, /v1/models)")
    continuous_usage: bool = setting(False, doc="ask for usage on every chunk (vLLM): exact chunk token counts")
    prompt_file: str | None = setting(None, doc="a briefing with '## ' sections: a path or a packaged fixture "
                                                 "name (None: the recipe's briefing.md)")
    prompt_tokens: int | None = setting(None, min=1, doc="trim each prompt's body to this many tokens of the "
                                                         "server's own tokenizer (/tokenize); the task is kept")
    shared_prefix: bool = setting(False, doc="every user sends the same prompt, a unique line last (a prefix "
                                             "cache stores it once); default: distinct prompts per user")
    first_token_timeout_s: float | None = setting(None, above=0, doc="None: the lane's timeouts.first_token_s")
    between_tokens_timeout_s: float | None = setting(None, above=0,
                                                     doc="None: the lane's timeouts.between_tokens_s")
    lag_p99_max_s: float = setting(LOAD.lag_p99_max_s, above=0, doc="client self-check, information only: event-loop lag p99 "
                                                       "above this is named beside the error bound it explains "
                                                       "(and open-loop sends later than this mark a run)")
    cpu_max_frac: float = setting(LOAD.cpu_max_frac, above=0, max=1, doc="client self-check, information only: the client's "
                                                            "CPU share of its cores above this is named")
    client_error_max_pct: float | None = setting(None, above=0, doc="client self-check: a number (TTFT, per-user "
                                                 "tok/s, ITL) whose timestamps can move it by more than this % is "
                                                 "not measured (None, with the reason; it fails only a bound set on "
                                                 "it), the row's others stand (None: spread_max_pct, the precision "
                                                 "the row claims)")
    workers: int | None = setting(None, min=1, doc="client worker processes reading the row's streams (None: as "
                                                   "many as the measured CPU per token event needs, capped by the "
                                                   "cores; each worker is self-checked)")
    client_retries: int = setting(LOAD.client_retries, min=0, doc="runs per row (at most) measured again where the client did not "
                                                "measure a number a gate can bound (its error bound over "
                                                "client_error_max_pct) or sent open-loop requests late: the worst "
                                                "run is replaced, its numbers being the client's or the machine's "
                                                "other load's, not the server's")
    arrival: Literal["uniform", "poisson"] = setting(LOAD.arrival, doc="open loop (rate_per_s): requests every 1/rate "
                                                                    "s, or a seeded Poisson process at that rate")


DEFAULTS = CurveRowSettings()


def _check_rows(spec: GateSpec, where: str, rows: Any) -> None:
    if not isinstance(rows, list):
        raise ConfigError(f"{where}: must be a list of rows like {{users: 48, per_user_tok_s: {{min: 45}}}}")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ConfigError(f"{where}[{i}]: must be a mapping with users and metric bounds")
        users = row.get("users")
        if isinstance(users, bool) or not isinstance(users, int) or users < 1:
            raise ConfigError(f"{where}[{i}]: users must be a positive integer, got {users!r}")
        at = f"{where}[{i}] (users={users})"
        spec.check_metrics(at, row, ("users", "allow_queueing", "settings"))
        if not isinstance(row.get("allow_queueing", False), bool):
            raise ConfigError(f"{at}.allow_queueing: expected true or false, got {row['allow_queueing']!r}")
        if "settings" in row:
            spec.build(row["settings"], f"{at}.settings")


TITLE = "Concurrency curve"
# What the gate's numbers mean, one sentence each, printed under its tables by every report
DEFINITIONS = (
    "TTFT: request sent -> first chunk carrying content, reasoning or a tool call (role-only chunk "
    "excluded), queueing included.",
    "per-user tok/s: (completion tokens - 1) / (last token - first token) per request; median (p5) over users.",
    "aggregate tok/s: all completion tokens / (last token anywhere - first send).",
    "spread: (max - min) / median of the measured runs, in %; a warm pass per users value is discarded.",
    "seats: the server's effective max_running_requests from its boot log, else its own word "
    "(/server_info); users > seats means queueing.",
    "times: the kernel's receive time of each chunk (SO_TIMESTAMPNS) on plain HTTP, else the client's; "
    "client error: how far late or shared socket reads can move each of a row's TTFT, per-user tok/s and ITL; "
    "a number whose bound exceeds client_error_max_pct % (default spread_max_pct) of it, or that is a zero "
    "with a bound, is not measured (-, with the reason) and fails only a bound set on it; the others stand.",
)


SPEC = GateSpec.declare("curve", METRICS, CurveRowSettings, keys={"rows": _check_rows, "beats": check_beats},
                        doc="concurrency curve: per-user and aggregate tok/s, TTFT per users row",
                        title=TITLE, definitions=DEFINITIONS,
                        command=GateCommand("curve", "run a concurrency curve against a server", rank=10),
                        report_columns=("users", "seats", "aggregate_tok_s", "per_user_tok_s", "per_user_tok_s_p5",
                                        "ttft_p50_s", "ttft_p95_s", "itl_p95_s", "spread_pct", "runs",
                                        "tokens_per_user", "flags"),
                        report_rank=20, report="pytest_glmf.gates.curve.report")
