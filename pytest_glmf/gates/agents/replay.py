"""Replay as a gate: a window of a trace replayed open loop against a server (traces.py), judged
against bounds written like the thresholds file's `agents.replay` block.

    from pytest_glmf.gates.agents.replay import assert_replay, measure_replay

    result = measure_replay("http://127.0.0.1:30000", "azure_llm_conv_2023_5min.csv", seconds=60)
    print(result.table())
    assert_replay(result, ttft_p95_s={"max": 2.0}, output_tokens_exact_pct={"min": 100})   # in a test

`measure_replay` needs no pytest; with `warmup` (the default) it replays the window twice and
keeps the second (the first hit of a batch shape is autotune, not the server's steady state). Every replay is also held to two rules unless a bound of the
same metric replaces them: no request failed (`failed_requests` <= 0: a failed request is the
server's) and the client sent on time (`send_lateness_p99_s` <= settings.send_lateness_max_s:
else the arrivals were the client's, not the trace's).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.engine.timeouts import BETWEEN_TOKENS_S, FIRST_TOKEN_S
from pytest_glmf.gates.agents.api import checked_settings, result_flags
from pytest_glmf.gates.agents.spec import REPLAY, ReplaySettings
from pytest_glmf.gates.agents.traces import PACKAGED, ReplayResult, Trace, load_trace, replay_trace
from pytest_glmf.gates.bounds import caller_source, checked_bounds, lane_phrase
from pytest_glmf.gates.verdict import Check, failed_checks, failure_message
from pytest_glmf.load import Progress

LATE_HINT = "the client, not the server, set the pace: run on a quieter machine or lower the speedup"


def trace_path(name: str, beside: str | Path | None = None) -> str:
    """A trace named in a thresholds file: the packaged slice by its name, an absolute path, or a
    relative one beside the file (`beside`) when it is there, else from the working directory."""
    if name in PACKAGED:
        return name
    p = Path(name).expanduser()
    if p.is_absolute() or beside is None:
        return str(p)
    there = Path(beside).parent / p
    return str(there if there.exists() or not p.exists() else p)


def windowed(trace: Trace, opts: ReplaySettings) -> Trace:
    """The settings' window of a trace: [start_s, start_s + seconds), or to its end."""
    end = trace.duration_s + 1.0 if opts.seconds is None else opts.start_s + opts.seconds
    return trace.window(opts.start_s, end)


def measure_replay(url: str, trace: Trace | str | Path | None = None, *, settings: ReplaySettings | None = None,
                   timeouts: Mapping[str, float] | None = None, time_scale: float = 1.0,
                   progress: Progress | None = None, **overrides: Any) -> ReplayResult:
    """Replay the settings' window of `trace` (a path or the packaged slice's name; None: the
    settings' `trace`; a Trace: replayed as it is, no window taken) against `url` at `speedup`.
    Keyword arguments are the replay settings (gates/agents/spec.py ReplaySettings: `start_s`,
    `seconds`, `speedup`, ...), checked like a thresholds file's (ConfigError naming the key).
    `time_scale`: the simulator's (numbers in recipe units); `timeouts`: a lane's, for what the
    settings leave unset."""
    opts = checked_settings(settings, overrides, REPLAY)
    if isinstance(trace, Trace):
        picked = trace
    else:
        name = os.fspath(trace) if trace is not None else opts.trace
        picked = windowed(load_trace(name, block_tokens=opts.block_tokens,
                                     session_prefix_tokens=opts.session_prefix_tokens), opts)
    if not picked.requests:
        raise ValueError(f"{picked.source}: no request arrives in this window")
    lane_timeouts = timeouts or {}
    first = opts.first_token_timeout_s or lane_timeouts.get("first_token_s") or FIRST_TOKEN_S
    between = opts.between_tokens_timeout_s or lane_timeouts.get("between_tokens_s") or BETWEEN_TOKENS_S
    kw = {"time_scale": time_scale, "speedup": opts.speedup, "model": opts.model, "path": opts.path,
          "first_token_timeout_s": float(first), "between_tokens_timeout_s": float(between)}
    if opts.warmup:
        if progress is not None:
            progress(f"replay: warmup pass over the window ({len(picked.requests)} requests, discarded)")
        replay_trace(url, picked, **kw)
    result = replay_trace(url, picked, progress=progress, **kw)
    result.settings = opts
    result.flags = result_flags(result.summary, opts, "failed_requests", "requests")
    return result


def replay_checks(result: ReplayResult, bounds: Mapping[str, Mapping[str, float]], source: str) -> list[Check]:
    """One Check per bound, and the two rules of every replay (module docstring) where no bound
    of the same metric replaces them."""
    s = result.summary
    examples = "; ".join(s.get("error_examples") or [])[:200]
    causes = {"failed_requests": ("server", examples), "send_lateness_p99_s": ("client-bound", LATE_HINT)}
    checks = [Check(m, s.get(m), b, source=source, cause=causes.get(m, ("configuration", ""))[0],
                    hint=causes.get(m, ("", ""))[1]) for m, b in bounds.items()]
    if "failed_requests" not in bounds:
        checks.append(Check("failed_requests", s.get("failed_requests"), {"max": 0}, source="every request answered",
                            cause="server", hint=examples))
    if "send_lateness_p99_s" not in bounds:
        checks.append(Check("send_lateness_p99_s", s.get("send_lateness_p99_s"),
                            {"max": result.settings.send_lateness_max_s}, source="settings.send_lateness_max_s",
                            cause="client-bound", hint=LATE_HINT))
    return checks


def replay_failure(failed: list[Check], result: ReplayResult, lane: Any = None) -> str:
    return failure_message(failed, f"trace replay{lane_phrase(lane or result.lane)}", result.table())


def assert_replay(result: ReplayResult, *, source: str | None = None, lane: Any = None, **bounds: Any) -> None:
    """Fail the test unless the replay meets `bounds` (metric={"min": x} and/or {"max": y}, the
    `agents.replay` block's metrics), no request failed and the client sent on time (unless a
    bound of that metric is given). The failure is one row per missed bound, then the replay table."""
    __tracebackhide__ = True
    source = source or caller_source()
    bounds = checked_bounds(REPLAY, bounds, "assert_replay", (), source)
    failed = failed_checks(replay_checks(result, bounds, source))
    if failed:
        pytest.fail(replay_failure(failed, result, lane), pytrace=False)
