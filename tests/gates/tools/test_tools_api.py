"""`measure_tools` (the tools gate's public measurement) on the built-in simulator with a user's own
scenarios: typed results, and errors that name the input."""
from __future__ import annotations

import pytest

from pytest_glmf.gates.tools import Scenario, ToolsResult, load_scenarios, measure_tools

TOOLS = """\
schema: 1
tools:
  track_parcel:
    description: Look up a parcel.
    parameters: {type: object, properties: {tracking_number: {type: string}}, required: [tracking_number]}
scenarios:
  - {id: track, tools: [track_parcel], messages: [{role: user, content: "Track parcel NW-1 please"}], expect: [track_parcel]}
  - {id: chat, tools: [track_parcel], messages: [{role: user, content: "Good morning!"}], expect: []}
"""


def test_tools_from_a_users_file_and_from_scenario_objects(daily_sim, tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text(TOOLS)
    result = measure_tools(daily_sim.base_url, path, concurrency=3)
    assert isinstance(result, ToolsResult)
    assert (result.turns, result.parsed, result.parsed_fraction, result.leaks) == (4, 4, 1.0, 0)
    assert result.concurrency == 3 and result.tool_choice == "auto" and len(result.results) == 4
    assert ToolsResult.from_summary(result.summary()) == result
    scenarios = load_scenarios(path)
    assert all(isinstance(s, Scenario) for s in scenarios)
    required = measure_tools(daily_sim.base_url, scenarios, tool_choice="required")
    assert required.turns == 1 and required.skipped == {"chat": "wants no call, but tool_choice=required forces one"}
    assert required.table().startswith("tool turns parsed 1/1 at concurrency 1 (tool_choice=required)")


def test_tools_inputs_are_checked(tmp_path):
    with pytest.raises(ValueError, match="concurrency must be a positive integer, got 0"):
        measure_tools("http://127.0.0.1:9", None, concurrency=0)
    with pytest.raises(FileNotFoundError, match="nope.yaml: not a file, nor a packaged fixture"):
        measure_tools("http://127.0.0.1:9", tmp_path / "nope.yaml")
