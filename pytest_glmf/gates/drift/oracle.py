"""An oracle started for the occasion: launch a lane (any launcher), make the reference, stop it.

A simulator lane's oracle is the same simulator with the original checkpoint (`--checkpoint fp8`),
so `pytest --glmf-lane batch -k drift` needs no oracle from the user; a GPU lane's oracle is a
lane of its own in the lanes file (the FP8 original, on another port or box).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pytest_glmf.config.lanes import LaneConfig, load_lanes, select_lane
from pytest_glmf.gates.drift.api import make_drift_reference
from pytest_glmf.gates.drift.reference import sim_template
from pytest_glmf.launch import launch_lane


def _engine_fault(spec: str) -> bool:
    """logprob-noise is the engine's (both servers run it); every other fault is the candidate's."""
    return spec.strip().startswith("logprob-noise=")


def oracle_lane_for(lane: "LaneConfig") -> "LaneConfig":
    """The simulator lane's oracle: the same flags, the original checkpoint, and of the lane's
    `--fault`s only the engine's own noise (a runaway or a shift is the candidate's defect)."""
    args, skip, fault = [], False, False
    for a in lane.sim_args:
        if skip:
            skip = False
        elif fault:
            fault = False
            if _engine_fault(a):
                args += ["--fault", a]
        elif a == "--checkpoint":
            skip = True
        elif a == "--fault":
            fault = True
        elif a.startswith("--fault="):
            if _engine_fault(a.partition("=")[2]):
                args.append(a)
        elif not a.startswith("--checkpoint="):
            args.append(a)
    return dataclasses.replace(lane, name=f"{lane.name}-oracle", port=None, sim_args=[*args, "--checkpoint", "fp8"])


def reference_from_lane(lane: "LaneConfig", results_dir: str | Path, session_id: str = "oracle",
                        **reference_kw: Any) -> dict[str, Any]:
    """Launch `lane`, make a drift reference on it (`make_drift_reference`'s keyword arguments:
    prompts, prompt_file, max_tokens, k), stop it whatever happens. Its boot log and server log go
    to `results_dir`."""

    server = launch_lane(lane, Path(results_dir), f"{session_id}-drift-oracle")
    try:
        return make_drift_reference(server.base_url, engine=server.engine, timeouts=lane.timeouts,
                                    template=sim_template() if lane.launcher == "sim" else None,
                                    provenance={"oracle_lane": lane.name, **server.provenance}, **reference_kw)
    finally:
        server.stop()


def resolve_oracle_lane(oracle_lane: "str | LaneConfig | None", lane: "LaneConfig",
                        lanes_file: str | Path | None = None) -> "LaneConfig":
    """The lane to launch as `lane`'s oracle: a LaneConfig, a lane name of `lanes_file` (None: the
    built-in lanes), or, nothing given, a simulator lane's own oracle. ValueError when there is none."""

    if isinstance(oracle_lane, LaneConfig):
        return oracle_lane
    if oracle_lane is not None:
        return select_lane(load_lanes(lanes_file), str(oracle_lane), str(lanes_file or "the built-in lanes"))
    if lane.launcher == "sim":
        return oracle_lane_for(lane)
    raise ValueError(f"no oracle for lane {lane.name!r}: pass a reference (a file from `glmf drift reference`), "
                     "oracle_url=URL or oracle_lane=NAME (a lane of the lanes file to launch)")
