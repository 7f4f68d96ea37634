"""The capacity gate's declaration: its metrics, its service level, its settings (the only home of
their defaults).

    capacity:
      slo: {per_user_tok_s: 50, users_pct: 95, ttft_s: 1.0, ttft_pct: 95}
      users: {min: 48}                       # the capacity under that service level
      settings: {prompt_tokens: 2400, max_tokens: 384, runs: 3, resolution_pct: 10,
                 frontier: {contexts: [2400, 8192, 32768, 57344], max_tokens: 128}}

"Capacity" is the largest number of concurrent users (all sending at once, each one request of
`prompt_tokens` in and `max_tokens` out) for which the service level holds: at least `users_pct`
% of the users decode at `per_user_tok_s` or faster, and the `ttft_pct` percentile of their time
to first token is at most `ttft_s`. Unless `allow_queueing`, the search never asks for more users
than the server's seats and KV pool hold (boot log facts), since beyond them requests wait in a
queue. `rate_per_s` is the open-loop twin: the largest Poisson arrival rate at which the same
service level holds (settings.rate).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.spec import GateCommand, GateSpec, Metric, build_settings, setting
from pytest_glmf.load import LOAD_DEFAULTS as LOAD  # a probe is a load run: its defaults are the load engine's


@dataclass(frozen=True)
class SLO:
    """The service level every probe is judged against (`capacity.slo`)."""

    per_user_tok_s: float | None = setting(None, above=0, doc="decode speed each counted user must reach")
    users_pct: float = setting(95.0, above=0, max=100, doc="share of users (%) that must reach per_user_tok_s")
    ttft_s: float | None = setting(None, above=0, doc="bound on time to first token (queueing included)")
    ttft_pct: float = setting(95.0, above=0, max=100, doc="percentile of the users' TTFT held to ttft_s")
    allow_queueing: bool = setting(False, doc="probe beyond the seats and the KV pool (requests then queue and "
                                              "the bounds above decide); default: the search stops there")

    def describe(self) -> str:
        parts = []
        if self.per_user_tok_s is not None:
            parts.append(f">= {self.per_user_tok_s:g} tok/s for {self.users_pct:g} % of users")
        if self.ttft_s is not None:
            parts.append(f"TTFT p{self.ttft_pct:g} <= {self.ttft_s:g} s")
        parts.append("queueing allowed" if self.allow_queueing else "no queueing past the seats and KV pool")
        return ", ".join(parts)

    def scaled(self, time_scale: float) -> "SLO":
        """The same service level on a simulator `1 / time_scale` times faster than the GPU it models."""
        if time_scale == 1.0:
            return self
        return replace(self, per_user_tok_s=None if self.per_user_tok_s is None else self.per_user_tok_s / time_scale,
                       ttft_s=None if self.ttft_s is None else self.ttft_s * time_scale)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class FrontierSettings:
    """The same search at several context lengths per user (`capacity.settings.frontier`)."""

    contexts: list[int] = field(default_factory=list, metadata={
        "doc": "prompt tokens per user, one search each, e.g. [2400, 8192, 32768, 57344] (empty: no frontier)"})
    max_tokens: int | None = setting(None, min=1, doc="output tokens per request (None: settings.max_tokens)")
    runs: int | None = setting(None, min=1, doc="measured runs per probe (None: settings.runs)")

    def __post_init__(self) -> None:
        bad = [c for c in self.contexts if c < 1]
        if bad:
            raise ConfigError(f"capacity settings.frontier.contexts: prompt tokens per user must be >= 1, got {bad[0]}")


@dataclass(frozen=True)
class RateSettings:
    """Open-loop rate capacity (`capacity.settings.rate`): Poisson arrivals at a rate, searched."""

    requests: int = setting(64, min=2, doc="requests per measured run (the run lasts about requests / rate)")
    start_per_s: float | None = setting(None, above=0, doc="first rate tried (None: from the users capacity, "
                                                           "or 1 request/s)")
    max_per_s: float = setting(1000.0, above=0, doc="never try a higher rate")
    seed: int = setting(0, min=0, doc="arrival times are a seeded Poisson process: every run the same pattern")


@dataclass(frozen=True)
class CapacitySettings:
    """What each user sends and how the search measures (`capacity.settings`)."""

    prompt_tokens: int | None = setting(2400, min=1, doc="prompt tokens per user, of the server's own tokenizer "
                                                         "(/tokenize; the recipe's briefing, repeated for long "
                                                         "contexts); null: the prompt file as it is")
    max_tokens: int = setting(LOAD.max_tokens, min=1, doc="output tokens per request (ignore_eos: each produces them all)")
    shared_prefix: bool = setting(False, doc="every user sends the same prompt, a unique line last (a prefix "
                                             "cache stores it once); default: distinct prompts per user")
    prompt_file: str | None = setting(None, doc="the text prompts are made of (None: the recipe's briefing.md)")
    runs: int = setting(LOAD.runs, min=1, doc="measured runs per probe, after one short discarded warm pass")
    warm_tokens: int = setting(16, min=1, doc="output tokens of the warm pass (it only has to hit the shape)")
    start_users: int | None = setting(None, min=1, doc="first users value tried (None: the users bound's min, "
                                                       "else 8, never above the seat/KV bound)")
    min_users: int = setting(1, min=1, doc="the search never goes below this")
    max_users: int = setting(1024, min=1, doc="the search never goes above this (the bound when the server's "
                                              "seats and KV pool are unknown)")
    resolution_users: int | None = setting(None, min=1, doc="stop when the first failing users value is at most "
                                                            "this far above the last passing one")
    resolution_pct: float = setting(10.0, above=0, max=100, doc="...else this percent of the last passing value "
                                                                "(at least one user)")
    guided: bool = setting(True, doc="model-guided search (each probe where a monotone fit of the probes' margins "
                                     "puts the boundary); false: bracket and bisect only")
    spread_max_pct: float = setting(LOAD.spread_max_pct, min=0, doc="a probe whose runs spread more than this is flagged")
    client_retries: int = setting(LOAD.client_retries, min=0, doc="extra runs per probe (at most) to replace runs the client's "
                                                "self-check marks: their numbers are the client's, not the server's")
    workers: int | None = setting(None, min=1, doc="client worker processes reading a probe's streams (None: as "
                                                   "many as the measured CPU per token event needs); a probe still "
                                                   "client-bound is measured again with twice as many, up to the "
                                                   "cores, and the search is undecided when that does not help")
    client_error_max_pct: float | None = setting(LOAD.client_error_max_pct, above=0,
                                                 doc="client self-check: a probe's run is client-bound when its "
                                                     "timestamps can move TTFT, per-user tok/s or ITL by more than "
                                                     "this % (None: spread_max_pct; the curve's setting of the "
                                                     "same name)")
    lag_p99_max_s: float = setting(LOAD.lag_p99_max_s, above=0,
                                   doc="client self-check, information only: event-loop lag p99 above this is named "
                                       "beside the error bound it explains (the curve's setting of the same name)")
    continuous_usage: bool = setting(False, doc="ask for usage on every chunk (vLLM): exact chunk token counts")
    path: str = setting(LOAD.path, doc="the streamed endpoint (chat or plain completions)")
    model: str | None = setting(None, doc="model name sent with each request (None: the server's first model)")
    frontier: FrontierSettings = setting(FrontierSettings(), doc="the search at several context lengths")
    rate: RateSettings = setting(RateSettings(), doc="open-loop rate capacity")


DEFAULTS = CapacitySettings()

METRICS = [
    Metric("users", "higher", "count", doc="capacity: the most concurrent users that met the service level"),
    Metric("rate_per_s", "higher", "req/s", doc="open-loop capacity: the highest Poisson request rate (per s) "
                                                "that met the service level"),
]


def build_slo(data: Any, where: str) -> SLO:
    """The `slo:` mapping as an SLO; at least one of per_user_tok_s and ttft_s is required."""

    slo = build_settings(SLO, data, where)
    if slo.per_user_tok_s is None and slo.ttft_s is None:
        raise ConfigError(f"{where}: a service level needs per_user_tok_s and/or ttft_s, e.g. "
                          "{per_user_tok_s: 50, ttft_s: 1.0}")
    return slo


def _check_slo(spec: GateSpec, where: str, value: Any) -> None:
    build_slo(value, where)


TITLE = "Capacity under the service level"
# What the gate's numbers mean, one sentence each, printed under its tables by every report
DEFINITIONS = (
    "users: the most concurrent users (all sending at once) that met the service level, the last probe that "
    "passed; keys users@PROMPT+OUTPUT and frontier@CONTEXT; stopped_by: slo (a failing probe above it), the "
    "seats / KV pool bound the search may not pass, or undecided (a probe the client could not measure: no "
    "answer, `undecided` says why).",
    "boundary_ci95: the 95 % interval of the boundary (where a fit of the probes' margins crosses the service "
    "level, boundary_users, between the answer and the first failure), a bootstrap over the probes' records "
    "(users within a run, runs within a probe); the baseline's spread is its width or the resolution, the larger.",
    "kv_bound_users: how many users of that size the KV pool holds; probes, requests (measured), wall_s: "
    "the search's cost.",
)


SPEC = GateSpec.declare("capacity", METRICS, CapacitySettings, keys={"slo": _check_slo},
                        doc="capacity under a service level: concurrent users (and request rate) at N tok/s",
                        title=TITLE, definitions=DEFINITIONS,
                        command=GateCommand("capacity", "capacity under a service level: users (and rate) at N tok/s", rank=20),
                        report_columns=("users", "rate_per_s", "boundary_users", "boundary_per_s", "boundary_ci95",
                                        "stopped_by", "undecided", "kv_bound_users", "seats", "kv_tokens_per_user",
                                        "probes", "requests", "wall_s"),
                        report_rank=30, report="pytest_glmf.gates.capacity.report")
