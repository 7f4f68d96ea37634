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

from pytest_glmf.gates.tools import assert_tools
from pytest_glmf.gates.tools.spec import FALLBACK_CONCURRENCY

pytestmark = pytest.mark.glmf_gate("tools")


def concurrency_of(glmf_thresholds, glmf_lane) -> int:
    concurrency = glmf_thresholds.settings(glmf_lane.name, "tools").concurrency
    if concurrency is not None:
        return concurrency
    rows = glmf_thresholds.for_gate(glmf_lane.name, "curve").get("rows") or []
    return max((int(r["users"]) for r in rows), default=FALLBACK_CONCURRENCY)


def run_gate(users: int, glmf_tools, glmf_lane, glmf_thresholds, record_property) -> None:
    __tracebackhide__ = True
    settings = glmf_thresholds.settings(glmf_lane.name, "tools")
    result = glmf_tools(concurrency=users, tool_choice=settings.tool_choice, strict=settings.strict,
                        key=f"users={users}")
    for key in ("parsed", "turns", "leaks", "wrong_calls", "empty_args"):
        record_property(f"tools.users{users}.{key}", getattr(result, key))
    print(result.table())
    # without bounds in the lane's section, assert_tools holds the recipe's bar
    bounds = glmf_thresholds.bounds(glmf_lane.name, "tools")
    assert_tools(result, source=glmf_thresholds.source(glmf_lane.name, "tools") if bounds else None, **bounds)


def test_tool_calls_one_user(glmf_tools, glmf_lane, glmf_thresholds, record_property):
    run_gate(1, glmf_tools, glmf_lane, glmf_thresholds, record_property)


def test_tool_calls_under_concurrency(glmf_tools, glmf_lane, glmf_thresholds, record_property):
    users = concurrency_of(glmf_thresholds, glmf_lane)
    if users <= 1:
        pytest.skip("tools.settings.concurrency is 1: the one-user test covers it")
    run_gate(users, glmf_tools, glmf_lane, glmf_thresholds, record_property)
