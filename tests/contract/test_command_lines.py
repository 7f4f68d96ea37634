"""Every SGLang command line the project builds, parsed by SGLang 0.5.23's own parser.

The parser is the one `sglang.launch_server` builds (sglang/srt/server_args.py
`prepare_server_args`: `ServerArgs.add_cli_args` on an `argparse.ArgumentParser`), run in the
contract oracle. Lanes: the built-in ones, every SGLang lane of examples/*-lanes.yaml, and every SGLang
lane written as YAML inside the project's tests. Simulator-only flags (the simulator parser's own
group) are stripped first: they never reach a real server.
"""
from __future__ import annotations

import ast
import os
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

from pytest_glmf.config.lanes import LaneConfig, build_server_argv, builtin_lanes, lane_from_mapping, load_lanes
from pytest_glmf.config.yamlfile import ConfigError

pytestmark = pytest.mark.contract
REPO = Path(__file__).resolve().parents[2]
PREFIX = ["python3", "-m", "sglang.launch_server"]


def sim_only_flags() -> set[str]:
    from pytest_glmf.sim.args import build_parser

    group = next(g for g in build_parser()._action_groups if g.title == "simulator flags")
    return {s for a in group._group_actions for s in a.option_strings}


def engine_flags(lane: LaneConfig) -> list[str]:
    """The flags after `python -m sglang.launch_server`, sim-only flags (and their values) removed."""
    argv = build_server_argv(replace(lane, executable="python3"))
    assert argv[:3] == PREFIX, argv
    drop, out, skip = sim_only_flags(), [], False
    for tok in argv[3:]:
        if skip:
            skip = False
            if not tok.startswith("--"):
                continue
        if tok.split("=", 1)[0] in drop:
            skip = "=" not in tok
            continue
        out.append(tok)
    return out


def _yaml_lanes_in_tests() -> list[tuple[str, LaneConfig]]:
    """SGLang lanes written as YAML string literals in tests/**/*.py (the lanes tests run)."""
    found = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if "contract" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and "lanes:" in node.value):
                continue
            try:
                doc = yaml.safe_load(node.value[node.value.index("lanes:"):])
            except yaml.YAMLError:
                continue
            lanes = (doc or {}).get("lanes") if isinstance(doc, dict) else None
            for name, raw in (lanes or {}).items() if isinstance(lanes, dict) else []:
                where = f"{path.relative_to(REPO)}:{node.lineno}"
                try:
                    lane = lane_from_mapping(str(name), raw, where)
                except (ConfigError, TypeError):
                    continue              # a test of a bad lanes file
                found.append((where, lane))
    return found


def sglang_lanes() -> list[tuple[str, LaneConfig]]:
    lanes: list[tuple[str, LaneConfig]] = [("<built-in>", lane) for lane in builtin_lanes().values()]
    # examples/real-engine-lanes.yaml needs ${GLMF_REAL_ENGINE_DIR}, real-sglang-lanes.yaml
    # ${GLMF_REAL_SGLANG_DIR} (an unset variable is refused)
    dirs = {var: os.environ.get(var, default) for var, default in (("GLMF_REAL_ENGINE_DIR", "/real-engine"),
                                                                   ("GLMF_REAL_SGLANG_DIR", "/real-sglang"))}
    with mock.patch.dict(os.environ, dirs):
        for path in sorted((REPO / "examples").glob("*-lanes.yaml")):   # the other YAML files are test data
            lanes += [(str(path.relative_to(REPO)), lane) for lane in load_lanes(path).values()]
    lanes += _yaml_lanes_in_tests()
    # lanes the engine builds a command line for: SGLang, not attached, no hand-written command
    return [(src, lane) for src, lane in lanes
            if lane.engine == "sglang" and lane.launcher != "attach" and not lane.command]


LANES = sglang_lanes()


def test_the_lane_scan_finds_the_lanes_it_should() -> None:
    """The scan itself: built-ins, every example file and test lanes (a scan that finds nothing
    would pass every parse below)."""
    sources = {src.split(":")[0] for src, _ in LANES}
    assert {"<built-in>", "examples/sim-lanes.yaml", "examples/gb300-lanes.yaml"} <= sources
    assert sum(1 for src in sources if src.startswith("tests/")) >= 3, sorted(sources)


@pytest.mark.parametrize(("source", "lane"), LANES, ids=[f"{s}:{ln.name}" for s, ln in LANES])
def test_sglang_parses_the_lane(sglang_oracle: Any, source: str, lane: LaneConfig) -> None:
    flags = engine_flags(lane)
    verdict = sglang_oracle.call("argv", argv=flags)
    problems = [f"{p['flag']}: {p['message']}" for p in verdict["problems"]]
    assert not problems, f"SGLang {verdict['version']} rejects lane {lane.name!r} ({source}): {problems}\n{flags}"
    # a prefix that is unique today breaks when SGLang adds a flag with the same prefix
    assert not verdict["abbreviations"], f"lane {lane.name!r} ({source}) abbreviates: {verdict['abbreviations']}"


def test_the_old_cuda_graph_spelling_is_what_0_5_23_rejects(sglang_oracle: Any) -> None:
    """Why the default changed (sglang/srt/arg_groups/fields/exec_.py has only the -decode and
    -prefill fields): the recipe's `--cuda-graph-max-bs` is an ambiguous prefix there, exit 2."""
    old = replace(builtin_lanes()["batch"], cuda_graph_max_bs_flag="--cuda-graph-max-bs")
    verdict = sglang_oracle.call("argv", argv=engine_flags(old))
    assert [(p["flag"], p["kind"], p["candidates"]) for p in verdict["problems"]] == [
        ("--cuda-graph-max-bs", "ambiguous", ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"])]


def test_every_flag_the_simulator_accepts_as_sglang_exists_in_0_5_23(sglang_oracle: Any) -> None:
    """The simulator's "SGLang flags" group must not accept a spelling SGLang does not (that is
    how the old --cuda-graph-max-bs went unnoticed)."""
    from pytest_glmf.sim.args import build_parser

    group = next(g for g in build_parser()._action_groups if g.title == "SGLang flags")
    real = sglang_oracle.call("argv", argv=["--model-path", "m"])
    unknown, bad_choices = [], []
    for action in group._group_actions:
        for flag in action.option_strings:
            if flag not in real["options"]:
                unknown.append(flag)
            elif action.choices is not None:
                theirs = set(real["choices"].get(flag) or real["choices"].get(action.option_strings[0]) or [])
                bad_choices += [f"{flag} {c}" for c in action.choices if str(c) not in theirs]
    assert (unknown, bad_choices) == ([], [])
