"""Several engine servers behind one attach lane: replicas (or DP ranks without a router) that the
client reaches each at its own URL (`urls:`), or one router (`url:`) with the boot logs of the
replicas behind it (`boot_logs:`). Each replica is attached like a single server (the attach
launcher's readiness wait, its own boot log); the lane's Server carries them in `replicas`, and
base_url / boot_log are the first replica's (or the router's) for the gates that talk to one
server. The curve reads their boot facts one by one and sums the seats (load/endpoints.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pytest_glmf.config.lanes import LaneConfig
from pytest_glmf.launch.base import BOOT_LOG_MISSING, Server


def attach_replicas(lane: LaneConfig, attach_one: Callable[[LaneConfig], Server]) -> Server:
    """Attach every replica of the lane (each must be serving) and return the lane's Server. A
    replica whose boot log is missing is still attached (the server is up): the lane's provenance
    names each missing file (BOOT_LOG_MISSING), so only the tests that read boot logs skip."""
    logs: list[str | None] = list(lane.boot_logs) or [None] * len(lane.urls)
    single = replace(lane, urls=[], boot_logs=[])
    if lane.urls:
        replicas = [attach_one(replace(single, url=url, boot_log=log)) for url, log in zip(lane.urls, logs)]
        first = replicas[0]
        provenance = {"launcher": "attach", "urls": list(lane.urls)}
        missing = [f"{log} ({url})" for url, log, r in zip(lane.urls, logs, replicas) if BOOT_LOG_MISSING in r.provenance]
        if missing:
            provenance[BOOT_LOG_MISSING] = missing_boot_logs_line(lane, missing)
        return Server(base_url=first.base_url, engine=lane.engine, lane=lane, boot_log_path=first.boot_log_path,
                      provenance=provenance, launcher="attach", replicas=replicas)
    router = attach_one(single)                 # the router must answer; its replicas' logs are files
    replicas = [attach_one_log(single, router, Path(log)) for log in lane.boot_logs]
    provenance = {**router.provenance, "replica_boot_logs": list(lane.boot_logs)}
    missing = [f"{log} (replica {i} behind {router.base_url})" for i, (log, r) in enumerate(zip(lane.boot_logs, replicas), 1)
               if BOOT_LOG_MISSING in r.provenance]
    if missing:
        provenance[BOOT_LOG_MISSING] = missing_boot_logs_line(lane, missing)
    return replace(router, lane=lane, boot_log_path=replicas[0].boot_log_path, provenance=provenance,
                   replicas=replicas)


def missing_boot_logs_line(lane: LaneConfig, missing: list[str]) -> str:
    return (f"lane {lane.name!r}: boot_logs {', '.join(missing)} not a readable file (fix boot_logs: in "
            f"{lane.source}); the servers are up: the tests that read their boot logs skip, the others run")


def attach_one_log(lane: LaneConfig, router: Server, log: Path) -> Server:
    """A replica behind the router: reached only through it, known by its boot log (none when the
    file is missing: BOOT_LOG_MISSING in its provenance)."""
    provenance = {"launcher": "attach", "behind_router": router.base_url}
    if not log.is_file():
        provenance[BOOT_LOG_MISSING] = f"boot_logs entry {log} is not a readable file"
    return Server(base_url=router.base_url, engine=lane.engine, lane=lane,
                  boot_log_path=log if log.is_file() else None, provenance=provenance, launcher="attach")
