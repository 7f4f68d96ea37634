"""Launchers: docker, process, sim, attach. Each returns a `Server`.

A launcher is a module `pytest_glmf.launch.<name>` with `name` and
`start(lane, results_dir, session_id) -> Server` (the `Launcher` protocol); `launch_lane` picks it
by `lane.launcher`, importing lazily so the docker SDK is only loaded for docker lanes.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import cast

from pytest_glmf.config.lanes import LAUNCHERS, LaneConfig
from pytest_glmf.launch.base import BootError, Launcher, Server

__all__ = ["BootError", "Launcher", "Server", "get_launcher", "launch_lane", "server_from_dict", "server_to_dict"]


def get_launcher(name: str) -> Launcher:
    if name not in LAUNCHERS:
        raise ValueError(f"unknown launcher {name!r}; known: {', '.join(LAUNCHERS)}")
    return cast(Launcher, importlib.import_module(f"pytest_glmf.launch.{name}"))


def launch_lane(lane: "LaneConfig", results_dir: Path, session_id: str) -> Server:
    """Start (or attach to) the lane's server; blocks until ready or raises BootError.

    Before the start, preflight checks the lane's command line with the engine's own parser
    (launch/preflight); after it, the engine is a checked fact (launch/identity.py): a server
    that is not the engine the lane declares is stopped and reported, never measured."""
    from pytest_glmf.engine.surface import record_at_launch
    from pytest_glmf.launch.identity import check_identity

    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    checked, not_run = None, None
    if lane.launcher in ("docker", "process", "sim"):   # an attach lane needs no parser (nor the docker SDK)
        from pytest_glmf.launch import preflight

        checked = preflight.check(lane, preflight.argv_for(lane))
        not_run = preflight.not_run_line(lane, checked) if checked.status == "not run" else None
    server = get_launcher(lane.launcher).start(lane, results_dir, session_id)
    if checked is not None:
        server.provenance["preflight"] = checked.to_dict()
        if not_run:   # loud in the result file too, not only a status
            server.provenance["preflight"]["line"] = not_run
    check_identity(server)
    record_server_config(server)
    engine_flags = checked.options if checked is not None and checked.engine != "sim" else None
    record_at_launch(server, engine_flags or sim_flags(lane))
    return server


def record_server_config(server: Server) -> None:
    """What the server says it runs (engine/serverconfig.py), kept in its provenance: the result
    file records it and xdist workers get it with the server handle."""
    from pytest_glmf.engine.client import Client, Timeouts
    from pytest_glmf.engine.serverconfig import read_server_config

    with Client(server.base_url, Timeouts(connect_s=3.0, first_token_s=30.0, between_tokens_s=30.0)) as client:
        server.provenance["server_config"] = read_server_config(client, server.engine).to_dict()


def sim_flags(lane: "LaneConfig") -> list[str] | None:
    """The simulator's own SGLang flags (sim lanes get no preflight: the simulator is the parser)."""
    if lane.launcher != "sim":
        return None
    from pytest_glmf.sim.args import build_parser

    group = next(g for g in build_parser()._action_groups if g.title == "SGLang flags")
    return sorted(s for a in group._group_actions for s in a.option_strings)


def server_to_dict(server: Server) -> dict:
    """What an xdist worker needs to use a server another process owns (JSON-able)."""
    return {"base_url": server.base_url, "engine": server.engine, "lane": server.lane.to_dict(),
            "boot_log_path": str(server.boot_log_path) if server.boot_log_path else None,
            "provenance": server.provenance, "launcher": server.launcher,
            "replicas": [server_to_dict(r) for r in server.replicas]}


def server_from_dict(data: dict) -> Server:
    """A handle on a server owned by another process: stop() does nothing here."""

    provenance = dict(data["provenance"])
    pid = provenance.get("pid")
    # A worker cannot poll the controller's child, but a process on this host it can see: a
    # crashed server is then "gone" for the worker too (a zombie until the controller reaps it).
    alive = (lambda: _pid_running(int(pid))) if pid and data["launcher"] in ("process", "sim") else None
    if data["launcher"] == "attach" and not data.get("replicas"):   # its port, as the owner watches it
        from pytest_glmf.launch.attach import answering

        alive = answering(data["base_url"])
    return Server(base_url=data["base_url"], engine=data["engine"], lane=LaneConfig(**data["lane"]),
                  boot_log_path=Path(data["boot_log_path"]) if data["boot_log_path"] else None,
                  provenance=provenance, launcher=data["launcher"], _alive=alive,
                  replicas=[server_from_dict(r) for r in data.get("replicas", [])])


def _pid_running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] not in "ZX"
    except (OSError, IndexError):
        return False
