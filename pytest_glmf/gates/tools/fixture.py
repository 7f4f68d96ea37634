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
    """`glmf_tools(scenarios=None, *, concurrency=1, key=None, **settings)` asks every turn of
    `scenarios` (your YAML file, a list of Scenario, or None: the packaged set) on the session's
    server (`pytest_glmf.gates.tools.measure_tools`) and returns the counts. Settings
    (`tool_choice`, `strict`, `max_tokens`): the lane's `tools.settings` with the call's on top.
    Recorded under `key` (default: the test's name and the concurrency)."""
    from pytest_glmf.gates.tools.api import measure_tools

    gate = _glmf_gates.gate("tools", "glmf_tools")

    def measure(scenarios: Any = None, *, concurrency: int = 1, key: str | None = None, source: str | None = None,
                model: str | None = None, check_stream: bool = True, on_turn: Any = None,
                **settings_kw: Any) -> "ToolsResult":
        __tracebackhide__ = True
        # None: the lane's value; `concurrency` is this call's, the setting is the suite's concurrent test
        s = gate.call_settings({k: v for k, v in settings_kw.items() if v is not None}, source=source,
                               only=("tool_choice", "strict", "max_tokens"))
        result = gate.measure(lambda: measure_tools(
            gate.url, scenarios, concurrency=concurrency, tool_choice=s.tool_choice, strict=s.strict,
            max_tokens=s.max_tokens, model=model, check_stream=check_stream, on_turn=on_turn,
            timeouts=gate.timeouts), source)
        gate.record(key or f"{request.node.name} users={concurrency}", result.summary())
        return result

    return measure
