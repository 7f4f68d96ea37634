"""The tool-call harness and suite against the built-in simulator (pytest_glmf/sim/tools.py: the call
rule, GLM-4.7 / Hermes markup and parsers, `--tool-leak-rate`, the `tool-empty-args` fault).

With a parser every turn of the fixture set parses, at 1 user and under concurrency; without a
parser every call turn leaks its markup into `content`; a leak rate leaks a share of the turns;
the empty-args fault gives `{}` for every call whose tool has required parameters; and arguments
the simulated model copies from the prompt (`tool {json}`) are checked against the schema.
"""
from __future__ import annotations

import dataclasses
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.config.lanes import load_lanes
from pytest_glmf.engine.client import Client
from pytest_glmf.gates.tools.harness import Scenario, load_scenarios, run_harness
from pytest_glmf.launch import launch_lane

SCENARIOS = load_scenarios()
CALL_TURNS = sum(bool(s.expect) for s in SCENARIOS)
SUITE = str(Path(str(resources.files("pytest_glmf.suites"))) / "test_tools.py")


def daily_without_parser() -> list[str]:
    extra = list(load_lanes(None)["daily"].extra)
    i = extra.index("--tool-call-parser")
    return extra[:i] + extra[i + 2:]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """sim(parser, *sim_args) -> base URL; one simulator per configuration, stopped at the end."""
    servers: dict[tuple[str | None, tuple[str, ...]], Any] = {}

    def start(parser: str | None, *sim_args: str) -> str:
        key = (parser, sim_args)
        if key not in servers:
            extra = daily_without_parser() + (["--tool-call-parser", parser] if parser else [])
            lane = dataclasses.replace(load_lanes(None)["daily"], time_scale=0.02, extra=extra, sim_args=list(sim_args))
            servers[key] = launch_lane(lane, tmp_path_factory.mktemp("sim-tools"), "tools")
        return servers[key].base_url
    yield start
    for server in servers.values():
        server.stop()


def harness(url: str, **kw: Any) -> dict[str, Any]:
    with Client(url) as client:
        return run_harness(client, SCENARIOS, **kw)


def bad(summary: dict[str, Any]) -> dict[str, list[str]]:
    return {r["scenario"]: r["problems"] for r in summary["results"] if not r["ok"]}


@pytest.mark.parametrize("parser", ["glm47", "hermes"])
@pytest.mark.parametrize("users", [1, 8])
def test_every_turn_parses_with_a_parser(sim, parser, users):
    summary = harness(sim(parser), concurrency=users)
    assert bad(summary) == {}
    assert (summary["parsed"], summary["turns"], summary["leaks"]) == (len(SCENARIOS), len(SCENARIOS), 0)


def test_without_a_parser_every_call_turn_leaks(sim):
    summary = harness(sim(None), concurrency=4)
    assert summary["leaks"] == CALL_TURNS and summary["parsed"] == len(SCENARIOS) - CALL_TURNS
    assert "LEAK tool markup ['<tool_call>'" in " ".join(bad(summary)["weather_single"])


def test_a_leak_rate_leaks_a_share_of_the_turns(sim):
    summary = harness(sim("glm47", "--tool-leak-rate", "0.5"))
    assert 0 < summary["leaks"] < CALL_TURNS, summary["leaks"]
    assert all(any("LEAK" in p for p in problems) for problems in bad(summary).values())


def test_the_empty_args_fault_is_caught(sim):
    summary = harness(sim("glm47", "--fault", "tool-empty-args"))
    problems = bad(summary)
    needs_args = {s.id for s in SCENARIOS if any((s.schema_of(n) or {}).get("required") for n in s.expect)}
    assert set(problems) == needs_args
    assert summary["empty_args"] == len(needs_args) and summary["leaks"] == 0
    assert "EMPTY_ARGS get_weather: arguments '{}' but the schema requires ['city']" in " ".join(problems["weather_single"])


def test_schema_violations_copied_by_the_model_are_caught(sim):
    """The simulated model copies a `tool {json}` object from the prompt verbatim (tools.py)."""
    tools = {t["function"]["name"]: t for s in SCENARIOS for t in s.tools}
    turns = [Scenario("bad_enum", [tools["set_thermostat"]],
                                [{"role": "user", "content": 'Please run set_thermostat {"mode": "freeze"} now.'}],
                                ["set_thermostat"]),
             Scenario("bad_type", [tools["get_weather"]],
                                [{"role": "user", "content": 'Call get_weather {"city": 42, "unit": "kelvin"} for me.'}],
                                ["get_weather"])]
    # Hermes carries JSON types through; GLM markup carries strings, which its parser converts by the
    # schema's types, so a number for a string parameter arrives as "42" there (valid).
    with Client(sim("hermes")) as client:
        summary = run_harness(client, turns)
    problems = bad(summary)
    assert "mode: 'freeze' is not one of ['heat', 'cool', 'off']" in " ".join(problems["bad_enum"])
    assert "city: 42 is not of type 'string'" in " ".join(problems["bad_type"])
    assert "unit: 'kelvin' is not one of ['celsius', 'fahrenheit']" in " ".join(problems["bad_type"])
    assert summary["wrong_calls"] == 2
    with Client(sim("glm47")) as client:
        glm = bad(run_harness(client, turns))
    assert "mode: 'freeze' is not one of" in " ".join(glm["bad_enum"])
    assert "city" not in " ".join(glm["bad_type"]) and "unit: 'kelvin'" in " ".join(glm["bad_type"])


@pytest.mark.parametrize("choice", ["required", "named"])
def test_forced_tool_choice_parses(sim, choice):
    summary = harness(sim("glm47"), tool_choice=choice)
    assert bad(summary) == {} and summary["turns"] == len(SCENARIOS) - len(summary["skipped"]) > 0


def test_suite_passes_with_a_parser_and_fails_without(sim, pytester):
    ok = pytester.runpytest(SUITE, "--glmf-lane", "daily", "--glmf-url", sim("glm47"), "-p", "no:cacheprovider",
                            "--glmf-results", str(pytester.path / "ok"))
    ok.assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "ok" / "daily-latest.json").read_text())["gates"]["tools"]
    assert doc["users=8"]["parsed"] == doc["users=8"]["turns"] == len(SCENARIOS)
    leak = pytester.runpytest(SUITE, "--glmf-lane", "daily", "--glmf-url", sim(None), "-p", "no:cacheprovider",
                              "--glmf-results", str(pytester.path / "leak"), "-k", "one_user")
    leak.assert_outcomes(failed=1)
    leak.stdout.re_match_lines([
        rf"tool gate of lane 'daily' @ 1 user\(s\): parsed 3/12, leaks {CALL_TURNS}, wrong calls 0: 2 threshold\(s\) missed",
        r"bad turns:",
        r"weather_single#0 +\| get_weather +\| finish=stop; no tool_calls; content '<tool_call>get_weather<arg_key>city.*",
    ])
