"""`glmf_tools(scenarios=None, concurrency=1, ...) -> ToolsResult`: tool calls asked of the
session's server. The shared part of every gate's fixture: plugin/measuring.py."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_glmf.plugin.measuring import LaneGates

if TYPE_CHECKING:
    from pytest_glmf.gates.tools.api import ToolsResult

SERIAL: tuple[str, ...] = ()


@pytest.fixture
def glmf_tools(request: pytest.FixtureRequest, _glmf_gates: LaneGates) -> Callable[..., "ToolsResult"]:
    """`glmf_tools(scenarios=None, *, concurrency=1, tool_choice=None, strict=None, key=None)` asks
    every turn of `scenarios` (your YAML file, a list of Scenario, or None: the packaged set) on
    the session's server (`pytest_glmf.gates.tools.measure_tools`) and returns the counts.
    `tool_choice`, `strict` and `max_tokens` default to the lane's `tools.settings`. Recorded under `key`
    (default: the test's name and the concurrency)."""
    from pytest_glmf.gates.tools.api import measure_tools

    gate = _glmf_gates.gate("tools", "glmf_tools")

    def measure(scenarios: Any = None, *, concurrency: int = 1, tool_choice: str | None = None,
                strict: bool | None = None, key: str | None = None, source: str | None = None,
                **kw: Any) -> "ToolsResult":
        __tracebackhide__ = True
        lane_settings = gate.settings()
        result = gate.measure(lambda: measure_tools(
            gate.url, scenarios, concurrency=concurrency,
            tool_choice=tool_choice if tool_choice is not None else lane_settings.tool_choice,
            strict=strict if strict is not None else lane_settings.strict, timeouts=gate.timeouts,
            **{"max_tokens": lane_settings.max_tokens, **kw}), source)
        gate.record(key or f"{request.node.name} users={concurrency}", result.summary())
        return result

    return measure
