"""The agents gate's declaration: its metrics and its settings (the only home of their defaults).

    agents:
      settings: {sessions: 8, turns: 4, system_tokens: 600, user_tokens: 120, max_tokens: 64,
                 think_time_s: 1.0}                        # or sessions_file: my_agent.yaml
      ttft_p95_s: {max: 1.5}                               # every turn's TTFT, 95th percentile
      returning_cache_hit_pct: {min: 50}                   # what the prefix cache served on turns 2+
      sessions_completed_pct: {min: 100}
      slo: {ttft_s: 1.0, ttft_pct: 95, per_user_tok_s: 50, users_pct: 95}   # per turn
      capacity_sessions: {min: 8}                          # the most sessions at once under that slo
      replay: {trace: azure_llm_conv_2023_5min.csv, start_s: 0, seconds: 60, speedup: 1.0,
               ttft_p95_s: {max: 2.0}, send_lateness_p99_s: {max: 0.05}, failed_requests: {max: 0}}

N agents' sessions run at once; each turn resends the conversation so far (sessions.py), so the
prefix cache decides the returning turns' TTFT. Definitions: records.py. `replay:` is a trace
replayed open loop (traces.py): its own settings and its own metrics (REPLAY_METRICS) in one block.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.capacity.spec import build_slo
from pytest_glmf.gates.spec import GateCommand, GateSpec, Metric, build_settings, setting, settings_keys

METRICS = [
    Metric("ttft_p95_s", "lower", "s", doc="time to first token of every turn, 95th percentile",
           column="TTFT p95 s"),
    Metric("ttft_p50_s", "lower", "s", doc="time to first token of every turn, median", column="TTFT p50 s"),
    Metric("returning_ttft_p95_s", "lower", "s", doc="TTFT p95 of the turns after a session's first"),
    Metric("per_user_tok_s", "higher", "tok/s", doc="median over turns of each answer's decode rate",
           column="per-user tok/s"),
    Metric("per_user_tok_s_p5", "higher", "tok/s", doc="the slowest answers (5th percentile)"),
    Metric("returning_cache_hit_pct", "higher", "%", hi=100.0,
           doc="cached / prompt tokens over the turns after a session's first (the server's report)"),
    Metric("sessions_completed_pct", "higher", "%", hi=100.0, doc="sessions whose every turn was answered"),
    Metric("session_time_p50_s", "lower", "s", doc="first send to last token of a session, median"),
    Metric("send_lateness_p99_s", "lower", "s", doc="client self-check: how late turns were sent, p99"),
    Metric("capacity_sessions", "higher", "count", doc="the most concurrent sessions whose turns met the "
                                                       "service level (`slo:`; gates/agents/capacity.py)"),
]


@dataclass(frozen=True)
class AgentsSettings:
    """What the sessions are and how they are sent (`agents.settings`)."""

    sessions_file: str | None = setting(None, doc="a sessions YAML (sessions: or template:); None: the "
                                                  "template below")
    sessions: int = setting(8, min=1, doc="concurrent sessions (a file's sessions are cycled to this count)")
    turns: int = setting(4, min=1, doc="turns per generated session")
    system_tokens: int = setting(600, min=0, doc="~tokens of the system prompt every generated session shares")
    user_tokens: int = setting(120, min=1, doc="~tokens of each generated user message or tool result")
    max_tokens: int = setting(64, min=1, doc="output tokens per answer (ignore_eos: each produces them all)")
    think_time_s: float = setting(1.0, min=0, doc="between an answer and the next turn (recipe seconds)")
    tool_every: int = setting(0, min=0, doc="every k-th turn of a generated session is a tool result (0: none)")
    start_spread_s: float = setting(0.0, min=0, doc="generated sessions start evenly over this window")
    seed: int = setting(0, min=0, doc="of the generated text")
    warmup: bool = setting(True, doc="every session's first turn once, discarded, before the measured run "
                                     "(the first hit of a batch shape is autotune)")
    path: str = setting("/v1/chat/completions", doc="the streamed chat endpoint")
    model: str | None = setting(None, doc="model name sent with each turn (None: the served model)")
    first_token_timeout_s: float | None = setting(None, above=0, doc="None: the lane's timeouts.first_token_s")
    between_tokens_timeout_s: float | None = setting(None, above=0, doc="None: the lane's timeouts.between_tokens_s")
    send_lateness_max_s: float = setting(0.05, above=0, doc="client self-check: turns sent later than this "
                                                            "(p99) mark the measurement client-bound")
    start_sessions: int | None = setting(None, min=1, doc="capacity: the first sessions value tried (None: "
                                                          "capacity_sessions' min, else sessions)")
    max_sessions: int = setting(64, min=1, doc="capacity: the search never goes above this")
    resolution_sessions: int = setting(1, min=1, doc="capacity: stop when the first failing value is at most "
                                                     "this far above the last passing one")
    frontier_turns: list[int] = field(default_factory=list, metadata={
        "doc": "capacity frontier: turns per session, one search each, e.g. [2, 4, 8] (empty: no frontier)"})


DEFAULTS = AgentsSettings()

REPLAY_METRICS = [
    Metric("ttft_p50_s", "lower", "s", doc="time to first token of the trace's requests, median"),
    Metric("ttft_p95_s", "lower", "s", doc="time to first token of the trace's requests, 95th percentile"),
    Metric("per_user_tok_s", "higher", "tok/s", doc="median over requests of each answer's decode rate"),
    Metric("send_lateness_p99_s", "lower", "s", doc="client self-check: how late requests were sent after "
                                                    "their trace time, p99 (wall seconds)"),
    Metric("failed_requests", "lower", "count", doc="requests without a complete answer"),
    Metric("output_tokens_exact_pct", "higher", "%", hi=100.0,
           doc="answers whose usage.completion_tokens is the trace's output tokens"),
    Metric("prompt_tokens_error_p95_pct", "lower", "%",
           doc="|usage.prompt_tokens - the trace's input tokens| / input tokens, p95 (the prompt is fitted "
               "to the served tokenizer, so close, not exact)"),
]


@dataclass(frozen=True)
class ReplaySettings:
    """Which trace, which window of it and how fast (`agents.replay`, beside the bounds)."""

    trace: str = setting("azure_llm_conv_2023_5min.csv", doc="a trace file (Azure CSV, Mooncake JSONL, our "
                                                             "JSONL; relative: beside the thresholds file) or "
                                                             "the packaged slice's name")
    start_s: float = setting(0.0, min=0, doc="the window's start, seconds into the trace")
    seconds: float | None = setting(60.0, above=0, doc="the window's length in trace seconds (None: to the end)")
    speedup: float = setting(1.0, above=0, doc="arrivals this many times faster than the trace's")
    block_tokens: int = setting(512, min=1, doc="tokens per hash_ids block (Mooncake's 512)")
    session_prefix_tokens: int = setting(0, min=0, doc="our JSONL: tokens a session's requests share")
    model: str | None = setting(None, doc="model name sent (None: the served model)")
    path: str = setting("/v1/completions", doc="the streamed completions endpoint")
    warmup: bool = setting(True, doc="the window once, discarded, before the measured replay (the first hit of "
                                     "a batch shape is autotune; the prefix cache is flushed before each)")
    first_token_timeout_s: float | None = setting(None, above=0, doc="None: the lane's timeouts.first_token_s")
    between_tokens_timeout_s: float | None = setting(None, above=0, doc="None: the lane's timeouts.between_tokens_s")
    send_lateness_max_s: float = setting(0.05, above=0, doc="client self-check without a send_lateness_p99_s "
                                                            "bound: requests sent later (p99) mark the replay "
                                                            "client-bound")


REPLAY_DEFAULTS = ReplaySettings()
REPLAY_KEYS = settings_keys(ReplaySettings)


def _check_replay(spec: GateSpec, where: str, value: Any) -> None:
    replay_parts(value, where)


def replay_parts(value: Any, where: str) -> tuple[ReplaySettings, dict[str, dict[str, float]]]:
    """An `agents.replay` block as (settings, bounds): every key a replay setting or a bound on a
    replay metric, else a ConfigError naming `where` and the key."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a mapping like {{trace: azure_llm_conv_2023_5min.csv, seconds: 60, "
                          "ttft_p95_s: {{max: 2.0}}}}")
    REPLAY.check_metrics(where, value, REPLAY_KEYS)
    settings = build_settings(ReplaySettings, {k: v for k, v in value.items() if k in REPLAY_KEYS}, where)
    return settings, REPLAY.bounds(value)


def _check_slo(spec: GateSpec, where: str, value: Any) -> None:
    build_slo(value, where)


TITLE = "Agents' sessions"
# What the gate's numbers mean, one sentence each, printed under its tables by every report
DEFINITIONS = (
    "a session: one agent's conversation, every turn resending the whole history after a think time; TTFT "
    "and tok/s are per turn, returning turns are those after a session's first.",
    "returning cache hit: cached / prompt tokens of the returning turns, as the server reports them "
    "(meta_info.cached_tokens or usage.prompt_tokens_details).",
    "capacity_sessions: the most concurrent sessions whose turns met the service level.",
)


SPEC = GateSpec.declare("agents", METRICS, AgentsSettings, keys={"slo": _check_slo, "replay": _check_replay},
                        doc="agents' sessions: per-turn TTFT, prefix-cache hits, session numbers",
                        title=TITLE, definitions=DEFINITIONS,
                        command=GateCommand("agents", "agents' multi-turn sessions against a server; `glmf agents replay`: "
                                                      "a trace replayed open loop", rank=60),
                        report_rank=80)
# the replay block's own declaration (not a gate of the registry: it lives inside agents' section)
REPLAY = GateSpec.declare("agents.replay", REPLAY_METRICS, ReplaySettings,
                          doc="a trace replayed open loop: TTFT, send lateness, tokens as the trace says")
# blocks of the section with a declaration of their own (the docs generate a table for each)
BLOCKS = {"replay": REPLAY}
