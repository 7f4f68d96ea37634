"""The agents gate's declaration: its metrics and its settings (the only home of their defaults).

    agents:
      settings: {sessions: 8, turns: 4, system_tokens: 600, user_tokens: 120, max_tokens: 64,
                 think_time_s: 1.0}                        # or sessions_file: my_agent.yaml
      ttft_p95_s: {max: 1.5}                               # every turn's TTFT, 95th percentile
      returning_cache_hit_pct: {min: 50}                   # what the prefix cache served on turns 2+
      sessions_completed_pct: {min: 100}
      slo: {ttft_s: 1.0, ttft_pct: 95, per_user_tok_s: 50, users_pct: 95}   # per turn
      capacity_sessions: {min: 8}                          # the most sessions at once under that slo

N agents' sessions run at once; each turn resends the conversation so far (sessions.py), so the
prefix cache decides the returning turns' TTFT. Definitions: records.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_glmf.gates.spec import GateSpec, Metric, setting

METRICS = [
    Metric("ttft_p95_s", "lower", "s", doc="time to first token of every turn, 95th percentile"),
    Metric("ttft_p50_s", "lower", "s", doc="time to first token of every turn, median"),
    Metric("returning_ttft_p95_s", "lower", "s", doc="TTFT p95 of the turns after a session's first"),
    Metric("per_user_tok_s", "higher", "tok/s", doc="median over turns of each answer's decode rate"),
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

def _check_slo(spec: GateSpec, where: str, value: Any) -> None:
    from pytest_glmf.gates.capacity.spec import build_slo

    build_slo(value, where)


SPEC = GateSpec.declare("agents", METRICS, AgentsSettings, keys={"slo": _check_slo},
                        doc="agents' sessions: per-turn TTFT, prefix-cache hits, session numbers")
