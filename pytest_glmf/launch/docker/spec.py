"""The docker launcher's container spec: a lane -> the kwargs of `containers.create`.

Pure functions (no engine needed), so a lanes file's docker arguments can be checked anywhere:
image, command line, GPU device requests, read-only volumes, shm/ipc, env, the loopback-only port
publish and the labels that let a later session find what a killed one left.
"""
from __future__ import annotations

import dataclasses
import os
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docker.types import DeviceRequest

from pytest_glmf.config.lanes import build_server_argv
from pytest_glmf.launch.base import BootError

if TYPE_CHECKING:
    from pytest_glmf.config.lanes import LaneConfig

OWNER = "pytest-glmf"
LABEL_OWNER = "glmf.owner"
LABEL_SESSION = "glmf.session"
LABEL_LANE = "glmf.lane"
LABEL_HOST = "glmf.host"            # with the two below: is the session that made it still alive?
LABEL_PID = "glmf.pid"
LABEL_PID_START = "glmf.pid_start"  # guards against a reused pid keeping a leftover "alive"
DEFAULT_CONTAINER_PORT = 30000      # SGLang's default port


def device_requests(gpus: str | int | list[str] | None) -> list[dict[str, Any]]:
    """`gpus` as docker's --gpus: "all", a count (int or digits), or device ids (list, "0,2",
    "device=0,2"). None/0/"" requests nothing."""

    if gpus is None or gpus == "" or gpus == 0:
        return []
    if isinstance(gpus, bool):
        raise ValueError(f"gpus: {gpus!r} is not 'all', a count or device ids")
    if isinstance(gpus, int):
        return [DeviceRequest(count=gpus, capabilities=[["gpu"]])]
    if isinstance(gpus, str):
        text = gpus.strip().strip('"')
        if text == "all":
            return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        if text.isdigit():
            return device_requests(int(text))
        text = text.removeprefix("device=")
        gpus = [g.strip() for g in text.split(",") if g.strip()]
    ids = [str(g) for g in gpus]
    return [DeviceRequest(device_ids=ids, capabilities=[["gpu"]])] if ids else []


def flag_value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _set_flag(argv: list[str], flag: str, value: str) -> list[str]:
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == flag and i + 1 < len(out):
            out[i + 1] = value
            return out
        if arg.startswith(flag + "="):
            out[i] = f"{flag}={value}"
            return out
    return out


def server_argv(lane: "LaneConfig") -> tuple[list[str], int]:
    """(argv inside the container, container port), through `config.build_server_argv` (which
    also expands `{port}` in a lane's explicit `command`)."""

    port = lane.port
    if port is None and lane.command and not any("{port}" in arg for arg in lane.command):
        written = flag_value(list(lane.command), "--port")   # a command with its port spelled out
        port = int(written) if written and written.isdigit() else None
    port = port or DEFAULT_CONTAINER_PORT
    argv = list(build_server_argv(dataclasses.replace(lane, port=port)))
    # Loopback inside the container is unreachable through a published port; the container's
    # own network namespace is private, and the publish itself is bound to the host's 127.0.0.1.
    if flag_value(argv, "--host") in ("127.0.0.1", "localhost"):
        argv = _set_flag(argv, "--host", "0.0.0.0")
    return argv, port


def container_name(lane_name: str, session_id: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", f"glmf-{lane_name}-{session_id}")[:120]


def pid_start(pid: int) -> str:
    # Field 22 of /proc/<pid>/stat: start time in clock ticks since boot (Linux only).
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def session_labels(lane_name: str, session_id: str) -> dict[str, str]:
    pid = os.getpid()
    return {LABEL_OWNER: OWNER, LABEL_SESSION: session_id, LABEL_LANE: lane_name,
            LABEL_HOST: socket.gethostname(), LABEL_PID: str(pid), LABEL_PID_START: pid_start(pid)}


def container_spec(lane: "LaneConfig", session_id: str = "spec") -> dict[str, Any]:
    """The keyword arguments of `client.containers.create(**spec)` (or `run`) for this lane."""
    if not lane.image:
        raise BootError(f"lane {lane.name!r} ({lane.source}): launcher docker needs an image "
                        "(lanes file `image:` or --glmf-image)")
    argv, port = server_argv(lane)
    spec: dict[str, Any] = {
        "image": lane.image,
        "command": argv,
        "name": container_name(lane.name, session_id),
        "labels": session_labels(lane.name, session_id),
        "environment": dict(lane.env),
        "ports": {f"{port}/tcp": ("127.0.0.1", None)},   # None: the engine picks a free host port
        "volumes": {host: {"bind": bind, "mode": "ro"} for host, bind in lane.volumes.items()},
        "init": True,       # tini as PID 1 forwards SIGTERM: stop takes 0.1 s, not the 10 s kill
        "detach": True,
    }
    requests = device_requests(lane.gpus)
    if requests:
        spec["device_requests"] = requests
    if lane.shm_size:
        spec["shm_size"] = lane.shm_size
    if lane.ipc_mode:
        spec["ipc_mode"] = lane.ipc_mode
    return spec
