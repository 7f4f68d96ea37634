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
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_glmf.cli import interrupted
from pytest_glmf.config.yamlfile import ConfigError
from pytest_glmf.gates.agents.spec import REPLAY, SPEC, AgentsSettings, ReplaySettings
from pytest_glmf.gates.flags import SettingFlags
from pytest_glmf.gates.spec import GateSpec
from pytest_glmf.results.gatejson import command_document, write_document
from pytest_glmf.text import fold

# The settings (spec.py) as flags of their names (gates/flags.py); the shorter names the CLI
# had first stay as aliases.
TIMEOUT_ALIASES = {"first_token_timeout_s": "--first-token-timeout", "between_tokens_timeout_s": "--between-tokens-timeout",
                   "send_lateness_max_s": "--send-lateness-max"}
CAPACITY_ONLY = "the capacity search's (pytest: test_agents_capacity), not one run's"
SESSION_FLAGS = SettingFlags(AgentsSettings, aliases={**TIMEOUT_ALIASES, "think_time_s": "--think-time",
                                                      "start_spread_s": "--start-spread"},
                             skip={k: CAPACITY_ONLY for k in ("start_sessions", "max_sessions", "resolution_sessions",
                                                              "frontier_turns")},
                             help={"model": "model name to send (default: the server's first model)"})


def seconds_arg(text: str) -> float | None:
    """--seconds S|all (all: the setting's null, to the trace's end)."""
    if text == "all":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of trace seconds or all, got {text!r}") from None


REPLAY_FLAGS = SettingFlags(ReplaySettings, aliases={**TIMEOUT_ALIASES, "start_s": "--start"},
                            types={"seconds": seconds_arg},
                            help={"seconds": "the window's length in trace seconds, or all (to the trace's end)",
                                  "model": "model name to send (default: the server's first model)"})
# measured by test_agents_capacity's search, not by one run of sessions
NOT_MEASURED = ("capacity_sessions",)


def say(line: str) -> None:
    """An error or a one-line note on stderr, whole."""
    print(line, file=sys.stderr, flush=True)


def progress(line: str) -> None:
    """A progress line on stderr, folded at 120 columns (a table row whole: `fold`)."""
    say(fold(line))


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


def common_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="the server is a simulator at this time scale: report the modelled GPU's units")
    p.add_argument("--min", action="append", metavar="METRIC=X", help="a lower bound (repeatable, comma-separated)")
    p.add_argument("--max", action="append", metavar="METRIC=X", help="an upper bound (repeatable, comma-separated)")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the result and the verdict here")


def checked_time_scale(p: argparse.ArgumentParser, a: argparse.Namespace) -> float:
    if a.time_scale <= 0:
        p.error(f"--time-scale takes a number > 0, got {a.time_scale:g}")
    return float(a.time_scale)


def verdict(failed: list[Any], title: str, details: str, key: str, entry: dict[str, Any], bounds: dict[str, Any],
            json_out: Path | None, url: str) -> int:
    """Exit 1 when a check missed (each said on stderr); --json: the result document."""
    from pytest_glmf.gates.verdict import failure_message

    if failed:
        print(failure_message(failed, title, details), file=sys.stderr)
    code = 1 if failed else 0
    if json_out:
        missed = [{"metric": c.metric, "measured": c.value, "expected": c.expected(), "source": c.source}
                  for c in failed]
        write_document(json_out, document(url, key, entry, bounds, code=code, missed=missed))
    return code


def document(url: str, key: str, entry: dict[str, Any] | None, bounds: dict[str, Any], *, code: int | None = None,
             missed: list[dict[str, Any]] | None = None, partial: dict[str, Any] | None = None) -> dict[str, Any]:
    """The result document (results/gatejson.py): the run as the suite records it under `key`
    (`agents` or `replay`: its to_record()); the --min/--max bounds, what missed them, and what a
    Ctrl-C kept of an unfinished run are the command's own."""
    output: dict[str, Any] = {"bounds": bounds}
    if missed is not None:
        output["missed"] = missed
    if partial is not None:
        output[key] = partial
    return command_document("agents replay" if key == "replay" else "agents",
                            {"agents": {key: entry} if entry is not None else {}}, url=url, exitstatus=code,
                            output=output)


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
    p = argparse.ArgumentParser(prog="glmf agents", description="Agents' sessions at once against a running "
                                "server: per-turn TTFT, prompt and cached tokens, sessions. `glmf agents replay "
                                "--help`: a trace replayed open loop.")
    common_flags(p)
    SESSION_FLAGS.add(p, "the sessions' settings (gates/agents/spec.py; sessions-file: written out, or template:)")
    a = p.parse_args(argv)
    settings = SESSION_FLAGS.settings(p, a)
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
    finished: list[Any] = []
    try:
        result = measured(lambda: measure_agents(a.url, settings=settings, time_scale=time_scale,
                                                 on_turn=finished.append), "glmf agents")
    except KeyboardInterrupt:
        return interrupted("agents", a.json, document(a.url, "agents", None, bounds, partial={
            "turn_records": [t.to_dict() for t in finished]}), f"{len(finished)} turn(s)")
    if result is None:
        return 2
    print(result.table())
    failed = failed_checks(agents_checks(result, bounds, "--min/--max"))
    return verdict(failed, "agents", "", "agents", result.to_record(), bounds, a.json, a.url)


# ---------------------------------------------------------------------------- replay


def replay_cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="glmf agents replay", description="Replay a trace open loop against a running "
                                "server: each request sent at its arrival time / speedup, its prompt fitted to "
                                "its input tokens, its output tokens forced.")
    common_flags(p)
    REPLAY_FLAGS.add(p, "the replay's settings (gates/agents/spec.py, agents.replay)")
    a = p.parse_args(argv)
    settings = REPLAY_FLAGS.settings(p, a)
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

    said: list[str] = []

    def progress(line: str) -> None:
        said.append(line)
        say(fold(line))

    progress(f"glmf agents replay: {len(trace.requests)} requests of {trace.source} at x{settings.speedup:g} "
             f"against {a.url}")
    try:
        result = measured(lambda: measure_replay(a.url, trace, settings=settings, time_scale=time_scale,
                                                 progress=progress), "glmf agents replay")
    except KeyboardInterrupt:   # what finished: the connection windows' lines (each once its requests ended)
        windows = sum(1 for line in said if line.startswith("replay: trace ["))
        return interrupted("agents replay", a.json, document(a.url, "replay", None, bounds, partial={"progress": said}),
                           f"{windows} window(s)")
    if result is None:
        return 2
    print(result.table())
    failed = failed_checks(replay_checks(result, bounds, "--min/--max"))
    return verdict(failed, "trace replay", "", "replay", result.to_record(), bounds, a.json, a.url)
