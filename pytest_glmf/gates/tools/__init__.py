"""The tools gate: tool calls parsed, none leaked as text.

Public API (import it from here; the modules behind it may move):
    measure_tools(url, scenarios=None, concurrency=1, ...) -> ToolsResult
    assert_tools(result, **bounds)                 parsed_fraction, parsed, leaks, wrong_calls
    load_scenarios(path) -> [Scenario]             your own tools and turns (YAML)
In a test, the `glmf_tools` fixture measures on the session's server.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_glmf.gates import lazy_exports

if TYPE_CHECKING:
    from pytest_glmf.gates.tools.api import ToolsResult, assert_tools, measure_tools
    from pytest_glmf.gates.tools.harness import Scenario, load_scenarios

__all__ = ["Scenario", "ToolsResult", "assert_tools", "load_scenarios", "measure_tools"]
__getattr__, __dir__ = lazy_exports(__name__)   # the names imported above, each from its module
