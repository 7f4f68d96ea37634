"""The agents gate's public API: run N agents' sessions at once against a server and judge per-turn
TTFT, prefix-cache hits and session numbers against bounds written like the thresholds file's.

    from pytest_glmf.gates.agents import assert_agents, measure_agents

    result = measure_agents("http://127.0.0.1:30000", "my_agent_sessions.yaml", sessions=8)
    print(result.table())
    assert_agents(result, ttft_p95_s={"max": 1.5}, returning_cache_hit_pct={"min": 50})   # in a test

`measure_agents` needs no pytest. Definitions: records.py; what a session is: sessions.py.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.gates.agents.records import SummaryNumber, TurnRecord, summarize
from pytest_glmf.gates.agents.runner import SendOptions, run_conversations_sync
from pytest_glmf.gates.agents.sessions import Conversations, Session, as_conversations, from_template, tokens_per_word
from pytest_glmf.gates.agents.spec import DEFAULTS, SPEC, AgentsSettings
from pytest_glmf.gates.agents.table import agents_table
from pytest_glmf.gates.bounds import caller_source, checked_bounds, lane_phrase
from pytest_glmf.gates.spec import GateSpec
from pytest_glmf.gates.verdict import Check, checks_from_bounds, failed_checks, failure_message
from pytest_glmf.load import count_tokens

SCHEMA = 1
# recipe units on a simulator at a time scale: seconds / scale, tok/s x scale (lateness is the client's own)
_SECONDS = ("ttft_p50_s", "ttft_p95_s", "returning_ttft_p95_s", "session_time_p50_s", "session_time_max_s")
_SPEEDS = ("per_user_tok_s", "per_user_tok_s_p5")


@dataclass
class AgentsResult:
    """One measurement: every session at once. `summary` holds the gate's metrics (recipe units
    when the simulator ran at a time scale; `measured` keeps the raw ones), `per_turn` one entry
    per turn index, `turns` the per-turn records. `valid` is False when turns failed or the client
    sent turns late: then the numbers are not the server's, and `assert_agents` fails."""

    summary: dict[str, Any]
    turns: list[TurnRecord]
    flags: list[str]
    url: str = ""
    settings: AgentsSettings = DEFAULTS
    time_scale: float = 1.0
    measured: dict[str, Any] = field(default_factory=dict)
    lane: str | None = None

    @property
    def valid(self) -> bool:
        return not self.flags

    @property
    def per_turn(self) -> list[dict[str, Any]]:
        return self.summary["per_turn"]

    # the summary's numbers (result.ttft_p95_s ...): the gate's metrics and the counts beside them
    ttft_p50_s = SummaryNumber()
    ttft_p95_s = SummaryNumber()
    returning_ttft_p95_s = SummaryNumber()
    per_user_tok_s = SummaryNumber()
    per_user_tok_s_p5 = SummaryNumber()
    returning_cache_hit_pct = SummaryNumber()
    cache_hit_pct = SummaryNumber()
    sessions = SummaryNumber()
    sessions_completed = SummaryNumber()
    sessions_completed_pct = SummaryNumber()
    session_time_p50_s = SummaryNumber()
    session_time_max_s = SummaryNumber()
    turns_planned = SummaryNumber()
    turns_completed = SummaryNumber()
    errors = SummaryNumber()
    send_lateness_p50_s = SummaryNumber()
    send_lateness_p99_s = SummaryNumber()
    send_lateness_max_s = SummaryNumber()
    capacity_sessions = SummaryNumber()

    def table(self) -> str:
        unit = f" (simulator time scale {self.time_scale:g}: recipe units)" if self.time_scale != 1.0 else ""
        flags = f"\nflags: {'; '.join(self.flags)}" if self.flags else ""
        return f"agents{lane_phrase(self.lane)}{unit}\n{agents_table(self.summary)}{flags}"

    def to_record(self) -> dict[str, Any]:
        """What a result file keeps (the per-turn records included: a few per session)."""
        # the gate's metrics first: the end-of-session table shows a record's leading numbers
        metrics = {m: self.summary.get(m) for m in SPEC.metrics if m in self.summary}
        return {**metrics, "valid": self.valid, "flags": "; ".join(self.flags) or "ok", "schema": SCHEMA,
                "url": self.url, "time_scale": self.time_scale, "settings": dataclasses.asdict(self.settings),
                **{k: v for k, v in self.summary.items() if k not in metrics}, "measured": dict(self.measured),
                "definitions": SPEC.glossary(), "turn_records": [t.to_dict() for t in self.turns]}


def checked_settings(settings: Any, overrides: Mapping[str, Any], spec: GateSpec = SPEC) -> Any:
    """`settings` (None: `spec`'s defaults) with `overrides` on top, checked like a thresholds file's."""
    base = dataclasses.asdict(settings or spec.defaults())
    given = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in overrides.items()}
    return spec.build(base, "settings", given or None)


def conversations_for(opts: AgentsSettings, tokens_per_word: float = 1.0) -> Conversations:
    """The sessions the settings describe: the file's (cycled to `sessions`), or the template's
    (`tokens_per_word`: the served tokenizer's, sessions.tokens_per_word)."""
    if opts.sessions_file:
        return as_conversations(opts.sessions_file, opts.sessions)
    return from_template(source="settings", tokens_per_word=tokens_per_word, sessions=opts.sessions, turns=opts.turns,
                         system_tokens=opts.system_tokens, user_tokens=opts.user_tokens, max_tokens=opts.max_tokens,
                         think_time_s=opts.think_time_s, tool_every=opts.tool_every,
                         start_spread_s=opts.start_spread_s, seed=opts.seed)


def to_recipe_units(summary: Mapping[str, Any], time_scale: float) -> dict[str, Any]:
    out = dict(summary)
    if time_scale == 1.0:
        return out

    def scaled(d: Mapping[str, Any]) -> dict[str, Any]:
        d = dict(d)
        for k in _SECONDS:
            if d.get(k) is not None:
                d[k] = d[k] / time_scale
        for k in _SPEEDS:
            if d.get(k) is not None:
                d[k] = d[k] * time_scale
        return d

    out = scaled(out)
    out["per_turn"] = [scaled(t) for t in summary.get("per_turn", [])]
    out["per_session"] = [{**p, "session_time_s": None if p["session_time_s"] is None
                           else p["session_time_s"] / time_scale} for p in summary.get("per_session", [])]
    return out


def result_flags(summary: Mapping[str, Any], opts: Any, failed_key: str = "errors", what: str = "turns") -> list[str]:
    """Why the numbers are not the server's: `what` failed (`summary[failed_key]`), or the client
    sent them late (p99 above `opts.send_lateness_max_s`)."""
    flags = []
    if summary.get(failed_key):
        flags.append(f"{summary[failed_key]} {what[:-1]}(s) failed")
    late = summary.get("send_lateness_p99_s")
    if late is not None and late > opts.send_lateness_max_s:
        flags.append(f"client-bound: {what} sent {late:.3f} s late (p99) > {opts.send_lateness_max_s:g} s")
    return flags


def measure_agents(url: str, conversations: Conversations | Sequence[Session] | str | Path | None = None, *,
                   settings: AgentsSettings | None = None, timeouts: Mapping[str, float] | None = None,
                   time_scale: float = 1.0, api_key: str | None = None, tag: str = "agents",
                   on_turn: Callable[[TurnRecord], None] | None = None, **overrides: Any) -> AgentsResult:
    """Run the sessions at once against `url` (after one prefix-cache flush) and summarize them.

    `conversations`: Conversations, a list of Session, or a sessions YAML path (sessions.py); None: the
    settings' `sessions_file`, else their template. Keyword arguments are the gate's settings
    (`gates/agents/spec.py`: `sessions`, `turns`, `max_tokens`, `think_time_s`, ...) on top of
    `settings`, checked like a thresholds file's (ConfigError naming the key). `time_scale`: the
    simulator's (think times are scaled by it, numbers reported in recipe units); `timeouts`: a
    lane's (first_token_s, between_tokens_s) for what the settings leave unset; `on_turn`: gets each
    measured turn as it ends (what a Ctrl-C keeps)."""
    opts = checked_settings(settings, overrides)
    if conversations is None:
        ratio = 1.0 if opts.sessions_file else tokens_per_word(lambda text: count_tokens(url, text, opts.model))
        conv = conversations_for(opts, ratio)
    else:   # the given sessions, cycled to `sessions` when that setting is given
        conv = as_conversations(conversations, opts.sessions if "sessions" in overrides else None)
    send = SendOptions(path=opts.path, model=opts.model, api_key=api_key, time_scale=float(time_scale),
                       warmup=opts.warmup)
    for key, lane_key in (("first_token_timeout_s", "first_token_s"), ("between_tokens_timeout_s", "between_tokens_s")):
        value = getattr(opts, key)
        value = value if value is not None else (timeouts or {}).get(lane_key)
        if value is not None:
            setattr(send, key, float(value))
    turns = run_conversations_sync(url, conv, send, tag, on_turn)
    raw = summarize(turns, [len(s.turns) for s in conv.sessions])
    raw["sessions_completed_pct"] = 100.0 * raw["sessions_completed"] / raw["sessions"] if raw["sessions"] else None
    flags = result_flags(raw, opts)
    if raw.get("cache_reported") == 0 and raw.get("turns"):
        raw["cache_note"] = ("the server reports no cached tokens (SGLang: --enable-cache-report; vLLM: "
                             "--enable-prompt-tokens-details)")
    return AgentsResult(summary=to_recipe_units(raw, float(time_scale)), turns=turns, flags=flags, url=url,
                        settings=opts, time_scale=float(time_scale),
                        measured={m: raw.get(m) for m in SPEC.metrics})


def agents_checks(result: AgentsResult, bounds: Mapping[str, Any], source: str) -> list[Check]:
    """One Check per bound (validated already), and the two rules of every measurement: no turn
    failed, the client sent turns on time (settings.send_lateness_max_s)."""
    checks = checks_from_bounds("agents", result.summary, bounds, source=source)
    if result.summary.get("errors"):
        checks.append(Check("failed turns", result.summary["errors"], {"max": 0}, source=source, cause="server",
                            hint="; ".join(sorted({t.request.error or "" for t in result.turns if not t.ok}))[:200]))
    late = result.summary.get("send_lateness_p99_s")
    checks.append(Check("send_lateness_p99_s", late, {"max": result.settings.send_lateness_max_s},
                        source="settings.send_lateness_max_s", cause="client-bound",
                        hint="the client, not the server, set the pace: run on a quieter machine"))
    return checks


def assert_agents(result: AgentsResult, *, source: str | None = None, lane: Any = None, **bounds: Any) -> None:
    """Fail the test unless the measurement meets `bounds` (metric={"min": x} and/or {"max": y}, the
    thresholds file's keys) and is valid (no failed turn, the client sent turns on time). The
    failure is one table row per missed bound, then the per-turn table."""
    __tracebackhide__ = True
    lane = lane if lane is not None else result.lane
    if source is None:
        source = caller_source()
    bounds = checked_bounds("agents", bounds, "assert_agents", (), source)
    failed = failed_checks(agents_checks(result, bounds, source))
    if failed:
        pytest.fail(failure_message(failed, f"agents{lane_phrase(lane)}", result.table()), pytrace=False)
