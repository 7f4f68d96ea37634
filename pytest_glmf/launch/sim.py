"""The sim launcher: the process launcher running the built-in simulator with the lane's flags."""
from __future__ import annotations

import sys
from pathlib import Path

from pytest_glmf.config import LaneConfig, build_server_argv
from pytest_glmf.launch import process
from pytest_glmf.launch.base import Server

name = "sim"


# The simulator stands in for a GPU server, whose work never runs on the load generator's CPU. On a
# small machine the two share cores, and at equal priority the kernel lets the simulator finish its
# time slice before it wakes the client (2-4 ms of event-loop lag at p99 on 2 cores, against 0.4 ms
# alone), which the client's self-check rightly calls client-bound. At nice 10 the client runs
# first; the simulator's virtual clock absorbs the small delays it takes instead. A lane's
# `sim_args: [--nice, "0"]` undoes it (the last flag wins).
SIM_NICE = 10


def sim_argv(lane: LaneConfig) -> list[str]:
    """`python -m pytest_glmf.sim` + the engine flags the lane would give SGLang + sim-only flags."""
    engine_argv = build_server_argv(lane)
    flags = engine_argv[3:] if engine_argv[1:3] == ["-m", "sglang.launch_server"] else engine_argv[1:]
    return [sys.executable, "-m", "pytest_glmf.sim", *flags, "--time-scale", f"{lane.time_scale:g}",
            "--nice", str(SIM_NICE), *lane.sim_args]


def start(lane: LaneConfig, results_dir: Path, session_id: str) -> Server:
    lane = process.with_port(lane)
    return process.run(lane, sim_argv(lane), results_dir, session_id, name)
