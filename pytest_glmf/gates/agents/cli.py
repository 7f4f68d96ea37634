"""`glmf agents`: agents' sessions, or a trace replayed, from a shell; the same code as the suite.

    glmf agents --url URL [--sessions-file my_agent.yaml | --sessions 8 --turns 4 --system-tokens 600 ...]
                [--max ttft_p95_s=1.5] [--min returning_cache_hit_pct=50] [--json OUT]
    glmf agents replay --url URL [--trace azure_llm_conv_2023_5min.csv | PATH] [--start 0] [--seconds 60]
                [--speedup 1] [--max ttft_p95_s=2.0,send_lateness_p99_s=0.05] [--json OUT]

The sessions print the per-turn table (agents_table), the replay its table with one progress line
per connection window on stderr. `--min`/`--max` take METRIC=X[,METRIC=X] (repeatable): the
metrics of the thresholds file's `agents` section, or of its `replay:` block. Every run is also
held to the gate's own rules (no failed turn or request, the client sent on time). Exit 0 when
every check passed, 1 when one missed, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.agents.spec import DEFAULTS, REPLAY, REPLAY_DEFAULTS, SPEC
from pytest_glmf.gates.spec import GateSpec
from pytest_glmf.gates.verdict import fold

# flag -> the setting it sets (None: not given, the setting's default)
SESSION_FLAGS = {"--sessions-file": "sessions_file", "--sessions": "sessions", "--turns": "turns",
                 "--system-tokens": "system_tokens", "--user-tokens": "user_tokens", "--max-tokens": "max_tokens",
                 "--think-time": "think_time_s", "--tool-every": "tool_every", "--start-spread": "start_spread_s",
                 "--seed": "seed", "--path": "path", "--model": "model",
                 "--first-token-timeout": "first_token_timeout_s", "--between-tokens-timeout": "between_tokens_timeout_s",
                 "--send-lateness-max": "send_lateness_max_s"}
REPLAY_FLAGS = {"--trace": "trace", "--start": "start_s", "--seconds": "seconds", "--speedup": "speedup",
                "--block-tokens": "block_tokens", "--session-prefix-tokens": "session_prefix_tokens",
                "--path": "path", "--model": "model", "--first-token-timeout": "first_token_timeout_s",
                "--between-tokens-timeout": "between_tokens_timeout_s", "--send-lateness-max": "send_lateness_max_s"}
# measured by test_agents_capacity's search, not by one run of sessions
NOT_MEASURED = ("capacity_sessions",)


def say(line: str) -> None:
    """An error or a one-line note on stderr, whole."""
    print(line, file=sys.stderr, flush=True)


def progress(line: str) -> None:
    """A progress line on stderr, folded at 120 columns (a table row whole: `fold`)."""
    say(fold(line))


def settings_from_flags(p: argparse.ArgumentParser, a: argparse.Namespace, flags: dict[str, str],
                        spec: GateSpec) -> Any:
    """The gate's settings from the flags given (the rest: defaults), each checked by the spec;
    a bad value is `p.error` naming the flag and what it allows."""
    from pytest_glmf.gates.agents.api import checked_settings

    given: dict[str, Any] = {}
    for flag, key in flags.items():
        value = getattr(a, key)
        if value is None:
            continue
        try:
            checked_settings(None, {key: value}, spec)
        except ConfigError as exc:
            p.error(str(exc).replace(f"settings.{key}", flag, 1))
        given[key] = value
    return checked_settings(None, given, spec)


def parse_bounds(p: argparse.ArgumentParser, a: argparse.Namespace, spec: GateSpec,
                 not_measured: Sequence[str] = ()) -> dict[str, dict[str, float]]:
    """--min/--max METRIC=X[,...] as the thresholds file's bounds, checked by the spec."""
    bounds: dict[str, dict[str, float]] = {}
    for side in ("min", "max"):
        for text in getattr(a, side) or []:
            for part in (x.strip() for x in text.split(",") if x.strip()):
                metric, eq, value = part.partition("=")
                metric = metric.strip()
                if not eq:
                    p.error(f"--{side}: {part!r} is not METRIC=X (metrics: {', '.join(measurable(spec, not_measured))})")
                if metric in not_measured:
                    p.error(f"--{side}: {metric} is measured by a capacity search (pytest: test_agents_capacity), "
                            f"not by one run; metrics here: {', '.join(measurable(spec, not_measured))}")
                try:
                    bounds.setdefault(metric, {})[side] = float(value)
                except ValueError:
                    p.error(f"--{side} {metric}: expected a number, got {value!r}")
    try:
        spec.check_metrics("--min/--max", bounds, ())
    except ConfigError as exc:
        p.error(str(exc))
    return bounds


def measurable(spec: GateSpec, not_measured: Sequence[str]) -> list[str]:
    return [m for m in spec.metrics if m not in not_measured]


def common_flags(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    p.add_argument("--model", help="model name to send (default: the server's first model)")
    p.add_argument("--first-token-timeout", type=float, dest="first_token_timeout_s", metavar="S")
    p.add_argument("--between-tokens-timeout", type=float, dest="between_tokens_timeout_s", metavar="S")
    p.add_argument("--send-lateness-max", type=float, dest="send_lateness_max_s", metavar="S",
                   help=f"client self-check: {what} sent later than this (p99) fail the run (default "
                        f"{DEFAULTS.send_lateness_max_s:g})")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="the server is a simulator at this time scale: report the modelled GPU's units")
    p.add_argument("--min", action="append", metavar="METRIC=X", help="a lower bound (repeatable, comma-separated)")
    p.add_argument("--max", action="append", metavar="METRIC=X", help="an upper bound (repeatable, comma-separated)")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the result and the verdict here")


def checked_time_scale(p: argparse.ArgumentParser, a: argparse.Namespace) -> float:
    if a.time_scale <= 0:
        p.error(f"--time-scale takes a number > 0, got {a.time_scale:g}")
    return float(a.time_scale)


def verdict(failed: list[Any], title: str, details: str, record: dict[str, Any], json_out: Path | None) -> int:
    from pytest_glmf.gates.verdict import failure_message

    if failed:
        print(failure_message(failed, title, details), file=sys.stderr)
    if json_out:
        record = {**record, "missed": [{"metric": c.metric, "measured": c.value, "expected": c.expected(),
                                        "source": c.source} for c in failed]}
        json_out.write_text(json.dumps(record, indent=1, default=str))
    return 1 if failed else 0


def measured(call: Callable[[], Any], prog: str) -> Any:
    """The measurement, or None after one line on stderr: a server that cannot be measured is not a traceback."""
    try:
        return call()
    except (ConfigError, OSError, ValueError) as exc:
        say(f"{prog}: {exc}")
        return None


# ---------------------------------------------------------------------------- sessions


def cli(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["replay"]:
        return replay_cli(argv[1:])
    d = DEFAULTS
    p = argparse.ArgumentParser(prog="glmf agents", description="Agents' sessions at once against a running "
                                "server: per-turn TTFT, prompt and cached tokens, sessions. `glmf agents replay "
                                "--help`: a trace replayed open loop.")
    p.add_argument("--sessions-file", dest="sessions_file", metavar="FILE",
                   help="a sessions YAML (sessions: written out, or template:); default: the template of the flags below")
    p.add_argument("--sessions", type=int, help=f"concurrent sessions; a file's are cycled to this (default {d.sessions})")
    p.add_argument("--turns", type=int, help=f"turns per generated session (default {d.turns})")
    p.add_argument("--system-tokens", type=int, dest="system_tokens", help=f"default {d.system_tokens}")
    p.add_argument("--user-tokens", type=int, dest="user_tokens", help=f"default {d.user_tokens}")
    p.add_argument("--max-tokens", type=int, dest="max_tokens", help=f"output tokens per answer (default {d.max_tokens})")
    p.add_argument("--think-time", type=float, dest="think_time_s", metavar="S",
                   help=f"between an answer and the next turn, recipe seconds (default {d.think_time_s:g})")
    p.add_argument("--tool-every", type=int, dest="tool_every", help="every k-th turn is a tool result (default 0: none)")
    p.add_argument("--start-spread", type=float, dest="start_spread_s", metavar="S",
                   help="sessions start evenly over this window (default 0)")
    p.add_argument("--seed", type=int)
    p.add_argument("--no-warmup", action="store_true", help="skip the discarded first turn of every session")
    p.add_argument("--path", help=f"the streamed chat endpoint (default {d.path})")
    common_flags(p, "turns")
    a = p.parse_args(argv)
    settings = settings_from_flags(p, a, SESSION_FLAGS, SPEC)
    if a.no_warmup:
        from dataclasses import replace

        settings = replace(settings, warmup=False)
    bounds = parse_bounds(p, a, SPEC, NOT_MEASURED)
    time_scale = checked_time_scale(p, a)
    if settings.sessions_file:
        from pytest_glmf.gates.agents.sessions import load_sessions

        try:
            load_sessions(settings.sessions_file)
        except (ConfigError, OSError) as exc:
            p.error(f"--sessions-file: {exc}")
    return run_sessions(a, settings, bounds, time_scale)


def run_sessions(a: argparse.Namespace, settings: Any, bounds: dict[str, Any], time_scale: float) -> int:
    from pytest_glmf.gates.agents.api import agents_checks, measure_agents
    from pytest_glmf.gates.verdict import failed_checks

    what = settings.sessions_file or f"{settings.sessions} sessions x {settings.turns} turns"
    progress(f"glmf agents: {what} against {a.url}")
    result = measured(lambda: measure_agents(a.url, settings=settings, time_scale=time_scale), "glmf agents")
    if result is None:
        return 2
    print(result.table())
    failed = failed_checks(agents_checks(result, bounds, "--min/--max"))
    return verdict(failed, "agents", "", {"agents": result.to_record(), "bounds": bounds}, a.json)


# ---------------------------------------------------------------------------- replay


def seconds_arg(text: str) -> float | str:
    if text == "all":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of trace seconds or all, got {text!r}") from None


def replay_cli(argv: list[str]) -> int:
    d = REPLAY_DEFAULTS
    p = argparse.ArgumentParser(prog="glmf agents replay", description="Replay a trace open loop against a running "
                                "server: each request sent at its arrival time / speedup, its prompt fitted to "
                                "its input tokens, its output tokens forced.")
    p.add_argument("--trace", help=f"a trace file (Azure CSV, Mooncake JSONL, our JSONL) or the packaged slice's "
                                   f"name (default {d.trace})")
    p.add_argument("--start", type=float, dest="start_s", metavar="S", help="the window's start in trace seconds (default 0)")
    p.add_argument("--seconds", type=seconds_arg, metavar="S|all",
                   help=f"the window's length in trace seconds, or all (default {d.seconds:g})")
    p.add_argument("--speedup", type=float, help="arrivals this many times faster than the trace's (default 1)")
    p.add_argument("--block-tokens", type=int, dest="block_tokens", help="tokens per hash_ids block (default 512)")
    p.add_argument("--session-prefix-tokens", type=int, dest="session_prefix_tokens",
                   help="our JSONL: tokens a session's requests share (default 0)")
    p.add_argument("--path", help=f"the streamed completions endpoint (default {d.path})")
    p.add_argument("--no-warmup", action="store_true", help="skip the discarded first pass over the window")
    common_flags(p, "requests")
    a = p.parse_args(argv)
    whole = a.seconds == "all"
    if whole:
        a.seconds = None
    settings = settings_from_flags(p, a, REPLAY_FLAGS, REPLAY)
    if whole or a.no_warmup:
        from dataclasses import replace

        settings = replace(settings, seconds=None if whole else settings.seconds,
                           warmup=settings.warmup and not a.no_warmup)
    bounds = parse_bounds(p, a, REPLAY)
    time_scale = checked_time_scale(p, a)
    from pytest_glmf.gates.agents.replay import windowed
    from pytest_glmf.gates.agents.traces import load_trace

    try:
        trace = load_trace(settings.trace, block_tokens=settings.block_tokens,
                           session_prefix_tokens=settings.session_prefix_tokens)
    except ConfigError as exc:
        p.error(f"--trace: {exc}")
    window = windowed(trace, settings)
    if not window.requests:
        p.error(f"--start/--seconds: no request of {settings.trace} arrives in that window "
                f"(the trace is {trace.duration_s:.1f} s long)")
    return run_replay(a, window, settings, bounds, time_scale)


def run_replay(a: argparse.Namespace, trace: Any, settings: Any, bounds: dict[str, Any], time_scale: float) -> int:
    from pytest_glmf.gates.agents.replay import measure_replay, replay_checks
    from pytest_glmf.gates.verdict import failed_checks

    progress(f"glmf agents replay: {len(trace.requests)} requests of {trace.source} at x{settings.speedup:g} "
             f"against {a.url}")
    result = measured(lambda: measure_replay(a.url, trace, settings=settings, time_scale=time_scale,
                                             progress=progress),
                      "glmf agents replay")
    if result is None:
        return 2
    print(result.table())
    failed = failed_checks(replay_checks(result, bounds, "--min/--max"))
    return verdict(failed, "trace replay", "", {"replay": result.to_record(), "bounds": bounds}, a.json)
