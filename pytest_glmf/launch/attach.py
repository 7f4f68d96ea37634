"""The attach launcher: a server somebody else runs (`--glmf-url`, or `url` + `boot_log` in the
lane). Nothing is started or stopped; the server must answer within the connect timeout (the
readiness rule of `readiness.py`, for a server past its boot)."""
from __future__ import annotations

import time
from pathlib import Path

import httpx

from pytest_glmf.config.lanes import LaneConfig
from pytest_glmf.launch import readiness
from pytest_glmf.launch.base import BootError, Server
from pytest_glmf.launch.replicas import attach_replicas

name = "attach"


def start(lane: LaneConfig, results_dir: Path, session_id: str) -> Server:
    if lane.urls or lane.boot_logs:     # several replicas, or a router with its replicas' boot logs

        return attach_replicas(lane, lambda one: start(one, results_dir, session_id))
    if not lane.url:
        raise BootError(f"lane {lane.name!r} (attach launcher): no url (set url in the lane or pass --glmf-url)")
    base_url = lane.url.rstrip("/")
    wait_s = lane.timeouts.get("connect_s", 10.0)
    deadline = time.monotonic() + wait_s
    # one probe never outlasts the whole wait: a port that accepts and never answers must not
    # stall the session beyond connect_s
    with httpx.Client(timeout=httpx.Timeout(min(readiness.PROBE_TIMEOUT_S, wait_s))) as client:
        while True:
            # booted by someone else: past its ready line, so its port must answer (readiness.py)
            ready, last = readiness.probe(client, base_url, ready_line_seen=True)
            if ready:
                break
            if time.monotonic() > deadline:
                # `last` names the endpoint's answer ("GET /v1/models -> 503") or, when none came, the error
                raise BootError(f"lane {lane.name!r} (attach launcher): {base_url} is not serving "
                                f"(waited {wait_s:g} s; {last})",
                                cause="server" if last.startswith("GET ") else "network")
            time.sleep(0.3)
    log_path = Path(lane.boot_log) if lane.boot_log else None
    if log_path is not None and not log_path.is_file():
        raise BootError(f"lane {lane.name!r} (attach launcher): boot_log {log_path} is not a readable file")
    return Server(base_url=base_url, engine=lane.engine, lane=lane, boot_log_path=log_path,
                  provenance={"launcher": "attach", "url": base_url}, launcher="attach")
