"""Our agent's tools parse: every turn of my_tools.yaml (our tools, our users' phrasings) comes back
as a parsed call with arguments valid against the tool's schema, with no tool markup leaked into
the text, alone and with 8 conversations in flight.

    pytest examples/test_my_tools.py --glmf-lanes examples/sim-lanes.yaml --glmf-lane batch

`glmf_tools` asks each turn non-streamed and streamed and counts what parsed; `assert_tools` takes
the tools gate's bounds (without any: the recipe's bar, every turn parsed and no leak).
"""
from pathlib import Path

from pytest_glmf.gates.tools import assert_tools

SCENARIOS = Path(__file__).with_name("my_tools.yaml")


def test_our_tools_parse(glmf_tools):
    tools = glmf_tools(SCENARIOS)
    assert_tools(tools, parsed_fraction={"min": 1.0}, leaks={"max": 0}, wrong_calls={"max": 0})


def test_our_tools_parse_under_load(glmf_tools):
    tools = glmf_tools(SCENARIOS, concurrency=8, tool_choice="auto")
    print(tools.table())
    assert_tools(tools)
