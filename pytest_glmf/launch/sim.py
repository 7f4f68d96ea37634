"""The sim launcher: the process launcher running the built-in simulator with the lane's flags."""
from __future__ import annotations

import sys
from pathlib import Path

from pytest_glmf.config.lanes import LaneConfig, build_server_argv
from pytest_glmf.launch import process
from pytest_glmf.launch.base import Server

name = "sim"


def sim_argv(lane: LaneConfig) -> list[str]:
    """`python -m pytest_glmf.sim` + the engine flags the lane would give SGLang + sim-only flags."""
    engine_argv = build_server_argv(lane)
    flags = engine_argv[3:] if engine_argv[1:3] == ["-m", "sglang.launch_server"] else engine_argv[1:]
    return [sys.executable, "-m", "pytest_glmf.sim", *flags, "--time-scale", f"{lane.time_scale:g}", *lane.sim_args]


def start(lane: LaneConfig, results_dir: Path, session_id: str) -> Server:
    return process.run_on_free_port(lane, sim_argv, results_dir, session_id, name)
