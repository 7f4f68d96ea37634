"""The tool-call gate's public API: run tool-call turns (yours or the packaged ones) against a
server and judge the parse rate against bounds written like the thresholds file's.

    from pytest_glmf.gates.tools import assert_tools, load_scenarios, measure_tools

    tools = measure_tools("http://127.0.0.1:30000", "my_tools.yaml", concurrency=8)
    print(tools.parsed, "/", tools.turns)
    assert_tools(tools, parsed_fraction={"min": 1.0}, leaks={"max": 0})     # inside a test

A scenarios file (the format of `pytest_glmf/data/tool_scenarios.yaml`) offers tools under
`tools:` (name -> description and JSON-schema `parameters`) and lists turns under `scenarios:`
(`id`, the `tools` offered, the chat `messages`, and `expect`: the tool names the answer must call,
[] when no call is wanted). What each turn checks: `harness.py`. In a test the `glmf_tools`
fixture calls `measure_tools` on the session's server.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.engine.client import Client, Timeouts
from pytest_glmf.gates.bounds import bounds_or_default, lane_phrase
from pytest_glmf.gates.tools.harness import (
    DEFAULT_MAX_TOKENS,
    Scenario,
    TurnResult,
    failure_hint,
    harness_summary,
    load_scenarios,
    request_error_cause,
    run_harness,
)
from pytest_glmf.gates.tools.spec import DEFAULT_BOUNDS, DEFAULTS
from pytest_glmf.gates.tools.table import failure_table, render_summary
from pytest_glmf.gates.verdict import Check, checks_from_bounds, failed_checks, failure_message

HINTS = {
    "parsed_fraction": "check --tool-call-parser matches the model's format (GLM-4.7/5: glm47; Hermes/Qwen: hermes)",
    "parsed": "check --tool-call-parser matches the model's format",
    "leaks": "tool markup left in content: no parser, the wrong parser, or a model drifting from its format",
    "wrong_calls": "calls with wrong names, `{}` or schema-breaking arguments, or calls nobody asked for",
}
DEFAULT_SOURCE = "default: the recipe's 10/10 parsed, no leaks"


@dataclass
class ToolsResult:
    """Every turn asked, non-streamed and streamed, at `concurrency` turns in flight."""

    turns: int                        # turns asked (repeated until `concurrency` were in flight)
    parsed: int                       # turns whose calls came back parsed, valid and leak-free
    parsed_fraction: float | None
    leaks: int                        # turns with tool markup in content or reasoning
    wrong_calls: int                  # wrong names, schema-breaking arguments, unwanted calls
    empty_args: int                   # `{}` where the schema requires keys
    bad_turns: list[str]              # "scenario#repeat" of every failed turn
    skipped: dict[str, str]           # scenario -> why it does not apply under this tool_choice
    concurrency: int
    tool_choice: str
    strict: bool
    failed_requests: int = 0          # requests that got no answer (HTTP errors, timeouts, refused)
    request_errors: dict[str, int] = field(default_factory=dict)   # each distinct error, how often
    text_answers: int = 0             # turns the model answered with text where a call was wanted
    cut_calls: int = 0                # turns whose call max_tokens cut (finish_reason=length)
    results: list[dict[str, Any]] = field(default_factory=list, repr=False)   # per turn: answers, problems
    lane: str | None = None           # set by the glmf_tools fixture (named in failures)

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> "ToolsResult":
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in summary.items() if k in names and k != "lane"})

    def summary(self) -> dict[str, Any]:
        """The JSON the result file keeps (and `glmf tools --json` writes)."""
        return {"turns": self.turns, "parsed": self.parsed, "parsed_fraction": self.parsed_fraction,
                "leaks": self.leaks, "wrong_calls": self.wrong_calls, "empty_args": self.empty_args,
                "failed_requests": self.failed_requests, "request_errors": dict(self.request_errors),
                "text_answers": self.text_answers, "cut_calls": self.cut_calls, "bad_turns": list(self.bad_turns), "skipped": dict(self.skipped), "concurrency": self.concurrency,
                "tool_choice": self.tool_choice, "strict": self.strict, "results": list(self.results)}

    def table(self) -> str:
        """One line of counts, then a row per bad turn (what was expected, what came back)."""
        return render_summary(self.summary())


def measure_tools(url: str, scenarios: str | Path | Sequence[Scenario] | None = None, *, concurrency: int = 1,
                  tool_choice: str = DEFAULTS.tool_choice, strict: bool = DEFAULTS.strict, model: str | None = None,
                  check_stream: bool = True, timeouts: Mapping[str, float] | None = None,
                  max_tokens: int = DEFAULT_MAX_TOKENS,
                  on_turn: Callable[[ToolsResult], None] | None = None) -> ToolsResult:
    """Ask every applicable turn of `scenarios` (a YAML file, a list of `Scenario`, or None: the
    packaged set) at `concurrency` turns in flight, non-streamed and streamed, and count what
    parsed. `tool_choice`: auto | required | named; `strict` adds "strict": true to every
    function. `timeouts`: a lane's `timeouts` mapping; `max_tokens` per answer (a call it cuts is
    reported as CUT_BY_MAX_TOKENS, not as a leak). `on_turn` gets the result so far after each
    turn (what a Ctrl-C keeps)."""

    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive integer, got {concurrency!r}")
    turns = list(scenarios) if isinstance(scenarios, Sequence) and not isinstance(scenarios, str) \
        else load_scenarios(scenarios)
    known = {k: v for k, v in (timeouts or {}).items() if k in Timeouts.__dataclass_fields__}
    done: list[TurnResult] = []

    def each(turn: TurnResult) -> None:
        done.append(turn)
        if on_turn is not None:
            on_turn(ToolsResult.from_summary(harness_summary(done, turns, concurrency=concurrency,
                                                             tool_choice=tool_choice, strict=strict)))
    with Client(url, Timeouts(**known)) as client:
        summary = run_harness(client, turns, concurrency=concurrency, tool_choice=tool_choice, strict=strict,
                              model=model, check_stream=check_stream, max_tokens=max_tokens, on_turn=each)
    return ToolsResult.from_summary(summary)


def assert_tools(result: ToolsResult, *, source: str | None = None, lane: Any = None, **bounds: Any) -> None:
    """Fail the test unless the turns meet `bounds` (parsed_fraction, parsed, leaks, wrong_calls:
    {"min": x} and/or {"max": y}); without bounds, the recipe's bar: every turn parsed, no leak.
    The failure is the suites' table, then a row per bad turn with what came back."""
    __tracebackhide__ = True
    lane = lane if lane is not None else result.lane
    bounds, source = bounds_or_default("tools", bounds, "assert_tools", DEFAULT_BOUNDS, DEFAULT_SOURCE, source)
    users = result.concurrency
    summary = result.summary()
    # the parser hint only when the parser is the likely cause (not failed requests, not text answers)
    hints = {**HINTS, "parsed_fraction": failure_hint(summary) or HINTS["parsed_fraction"]}
    checks = checks_from_bounds("tools", summary, bounds, where=f"@ {users} user(s)", source=source, hints=hints)
    if result.failed_requests:
        checks.append(Check("failed requests", result.failed_requests, {"max": 0}, where=f"@ {users} user(s)",
                            hint=next(iter(result.request_errors)), cause=request_error_cause(summary) or "server"))

    if not result.turns:
        pytest.fail(f"no tool turn applies under tool_choice={result.tool_choice}", pytrace=False)
    failed_requests = f", failed requests {result.failed_requests}" if result.failed_requests else ""
    title = (f"tool gate{lane_phrase(lane)} @ {users} user(s): parsed {result.parsed}/{result.turns}, "
             f"leaks {result.leaks}, wrong calls {result.wrong_calls}{failed_requests}")
    failed = failed_checks(checks)
    if failed:
        # one failure, the bad turns under the table (never raised while handling another: no chained traceback)
        pytest.fail(failure_message(failed, title, f"bad turns:\n{failure_table(summary)}"), pytrace=False)
