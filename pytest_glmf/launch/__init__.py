"""Launchers: docker, process, sim, attach. Each returns a `Server`.

A launcher is a module `pytest_glmf.launch.<name>` with `name` and
`start(lane, results_dir, session_id) -> Server` (the `Launcher` protocol); `launch_lane` picks it
by `lane.launcher`, importing lazily so the docker SDK is only loaded for docker lanes.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pytest_glmf.launch.base import BootError, Launcher, Server

if TYPE_CHECKING:
    from pytest_glmf.config import LaneConfig

__all__ = ["BootError", "Launcher", "Server", "get_launcher", "launch_lane"]


def get_launcher(name: str) -> Launcher:
    from pytest_glmf.config import LAUNCHERS

    if name not in LAUNCHERS:
        raise ValueError(f"unknown launcher {name!r}; known: {', '.join(LAUNCHERS)}")
    return cast(Launcher, importlib.import_module(f"pytest_glmf.launch.{name}"))


def launch_lane(lane: "LaneConfig", results_dir: Path, session_id: str) -> Server:
    """Start (or attach to) the lane's server; blocks until ready or raises BootError."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    return get_launcher(lane.launcher).start(lane, results_dir, session_id)
