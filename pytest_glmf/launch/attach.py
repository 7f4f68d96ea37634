"""The attach launcher: a server somebody else runs (`--glmf-url`, or `url` + `boot_log` in the
lane). Nothing is started or stopped; the server must answer within the connect timeout (the
readiness rule of `readiness.py`, for a server past its boot), and answer as an LLM server
(`not_an_llm_server`: a plain web server on the port is refused with one line, not failed nine
ways later). A lane whose `boot_log` file is missing still attaches: the server is up, so only the
tests that read the log skip (`missing_boot_log` says why, naming the key and the lanes file).
While the session runs it is alive while its port accepts connections (`answering`),
so a server that stops mid-run is named as such, with its log's last lines when the lane names one.
"""
from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from pytest_glmf.config.lanes import LaneConfig, server_root
from pytest_glmf.launch import readiness
from pytest_glmf.launch.base import BOOT_LOG_MISSING, BootError, Server
from pytest_glmf.launch.replicas import attach_replicas

name = "attach"


def start(lane: LaneConfig, results_dir: Path, session_id: str) -> Server:
    if lane.urls or lane.boot_logs:     # several replicas, or a router with its replicas' boot logs

        return attach_replicas(lane, lambda one: start(one, results_dir, session_id))
    if not lane.url:
        raise BootError(f"lane {lane.name!r} (attach launcher): no url (set url in the lane or pass --glmf-url)")
    base_url = server_root(lane.url)
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
        refused = not_an_llm_server(client, base_url)
    if refused is not None:
        raise BootError(f"lane {lane.name!r} (attach launcher): {refused}", cause="configuration")
    provenance: dict[str, str] = {"launcher": "attach", "url": base_url}
    log_path = Path(lane.boot_log) if lane.boot_log else None
    if log_path is not None and not log_path.is_file():
        # the server is up: a missing log costs only the tests that read it, not the session
        provenance[BOOT_LOG_MISSING] = missing_boot_log_line(lane, log_path)
        log_path = None
    return Server(base_url=base_url, engine=lane.engine, lane=lane, boot_log_path=log_path,
                  provenance=provenance, launcher="attach", _alive=answering(base_url))


def missing_boot_log_line(lane: LaneConfig, log_path: Path) -> str:
    return (f"lane {lane.name!r}: boot_log {log_path} is not a readable file (fix boot_log: in {lane.source}); "
            "the server is up: the tests that read its boot log skip, the others run")


def missing_boot_log(server: Server) -> str | None:
    """Why the lane's `boot_log` was not read (named, but no such file), None when it was or none was named."""
    why = server.provenance.get(BOOT_LOG_MISSING)
    return str(why) if why else None


def not_an_llm_server(client: httpx.Client, base_url: str) -> str | None:
    """Why the server at `base_url` is not an OpenAI-compatible LLM server, None when it may be:
    `GET /v1/models` must answer JSON (401/403: it wants a key, which proves an API behind it)."""
    url = f"{base_url}/v1/models"
    try:
        response = client.get(url)
    except httpx.HTTPError:
        return None      # answered the readiness probe a moment ago: a later request names the fault
    if response.status_code in (401, 403):
        return None
    kind = response.headers.get("content-type", "no content type").split(";")[0]
    if response.status_code < 300:
        try:
            response.json()
            return None
        except ValueError:
            pass
    fix = (" (the URL has a path: give the server's root, e.g. "
           f"{base_url.split('/', 3)[0]}//{base_url.split('/', 3)[2]})" if base_url.count("/") > 2 else "")
    return (f"{base_url} is not an LLM server: GET {url} answered {response.status_code} ({kind}), not an "
            f"OpenAI-compatible model list; give the URL of an SGLang or vLLM server{fix}")


def answering(base_url: str, timeout_s: float = 2.0) -> Callable[[], bool]:
    """Whether the attached server's port still accepts connections: an attached server has no
    process to watch, and one that stopped refuses them."""
    parts = urlsplit(base_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)

    def alive() -> bool:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return True
        except OSError:
            return False

    return alive
