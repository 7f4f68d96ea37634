"""Tool-call gate: the recipe's "Hermes harness 10/10 tool turns, tool calls parsed".

Every turn of pytest_glmf/data/tool_scenarios.yaml is asked non-streamed and streamed (pytest_glmf/gates/tools/harness.py
says what each turn checks), at 1 user and under concurrency, because parsers break under load and
with speculative decoding. The gate (`tools` in thresholds.yaml) defaults to the recipe's bar:
every turn parsed (`parsed_fraction >= 1.0`) and no markup leaked (`leaks <= 0`). Settings
(`tools.settings`: `concurrency`, `tool_choice`, `strict`) are declared with their defaults in
pytest_glmf/gates/tools/spec.py (`ToolsSettings`).
A failure lists each bad turn with what came back.
"""
from __future__ import annotations

import pytest

from pytest_glmf.gates.tools.harness import failure_hint, load_scenarios, request_error_cause, run_harness
from pytest_glmf.gates.tools.spec import DEFAULT_BOUNDS, FALLBACK_CONCURRENCY
from pytest_glmf.gates.tools.table import failure_table as tools_failure_table
from pytest_glmf.gates.tools.table import render_summary
from pytest_glmf.gates.verdict import Check, assert_checks, checks_from_bounds

pytestmark = pytest.mark.glmf_gate("tools")

SCENARIOS = load_scenarios()
HINTS = {
    "parsed_fraction": "check --tool-call-parser matches the model's format (GLM-4.7/5: glm47; Hermes/Qwen: hermes)",
    "parsed": "check --tool-call-parser matches the model's format",
    "leaks": "tool markup left in content: no parser, the wrong parser, or a model drifting from its format",
    "wrong_calls": "calls with wrong names, `{}` or schema-breaking arguments, or calls nobody asked for",
}


def concurrency_of(glmf_thresholds, glmf_lane) -> int:
    concurrency = glmf_thresholds.settings(glmf_lane.name, "tools").concurrency
    if concurrency is not None:
        return concurrency
    rows = glmf_thresholds.for_gate(glmf_lane.name, "curve").get("rows") or []
    return max((int(r["users"]) for r in rows), default=FALLBACK_CONCURRENCY)


def run_gate(users: int, glmf_client, glmf_lane, glmf_thresholds, glmf_results, record_property) -> None:
    __tracebackhide__ = True
    settings = glmf_thresholds.settings(glmf_lane.name, "tools")
    summary = run_harness(glmf_client, SCENARIOS, concurrency=users, tool_choice=settings.tool_choice,
                          strict=settings.strict)
    glmf_results.record("tools", f"users={users}", summary)
    for key in ("parsed", "turns", "leaks", "wrong_calls", "empty_args"):
        record_property(f"tools.users{users}.{key}", summary[key])
    print(render_summary(summary))
    bounds = glmf_thresholds.bounds(glmf_lane.name, "tools") or DEFAULT_BOUNDS
    source = (glmf_thresholds.source(glmf_lane.name, "tools") if bounds is not DEFAULT_BOUNDS
              else "default: the recipe's 10/10 parsed, no leaks")
    # the parser hint only when the parser is the likely cause (not failed requests, not text answers)
    hints = {**HINTS, "parsed_fraction": failure_hint(summary) or HINTS["parsed_fraction"]}
    checks = checks_from_bounds("tools", summary, bounds, where=f"@ {users} user(s)", source=source, hints=hints)
    if summary["failed_requests"]:
        checks.append(Check("failed requests", summary["failed_requests"], {"max": 0}, where=f"@ {users} user(s)",
                            hint=next(iter(summary["request_errors"])), cause=request_error_cause(summary)))
    if not summary["turns"]:
        pytest.fail(f"no tool turn applies under tool_choice={summary['tool_choice']}", pytrace=False)
    failed_requests = f", failed requests {summary['failed_requests']}" if summary["failed_requests"] else ""
    title = (f"tool gate of lane {glmf_lane.name!r} @ {users} user(s): parsed {summary['parsed']}/{summary['turns']}, "
             f"leaks {summary['leaks']}, wrong calls {summary['wrong_calls']}{failed_requests}")
    # one failure, the bad turns under the table (never raised while handling another: no chained traceback)
    assert_checks(checks, title, details=f"bad turns:\n{tools_failure_table(summary)}")


def test_tool_calls_one_user(glmf_client, glmf_lane, glmf_thresholds, glmf_results, record_property):
    run_gate(1, glmf_client, glmf_lane, glmf_thresholds, glmf_results, record_property)


def test_tool_calls_under_concurrency(glmf_client, glmf_lane, glmf_thresholds, glmf_results, record_property):
    users = concurrency_of(glmf_thresholds, glmf_lane)
    if users <= 1:
        pytest.skip("tools.settings.concurrency is 1: the one-user test covers it")
    run_gate(users, glmf_client, glmf_lane, glmf_thresholds, glmf_results, record_property)
