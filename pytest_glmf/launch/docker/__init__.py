"""The docker launcher: a lane's server in a container, through the docker SDK.

`docker.from_env()` honours DOCKER_HOST, so a lane can run on a remote GPU engine. The server's
port is published on 127.0.0.1 only, on a host port the engine picks (read back after start).
`start` blocks until the server answers or raises BootError with a sentence, the log tail and the
parsed problems; it never leaves a container behind (a failed *start* leaves a `created`
container: it is removed too). From its creation the container is in the cleanup registry
(launch/cleanup.py: SIGTERM and exit); containers carry labels so that `cleanup_stale` can remove
what a SIGKILLed session left. Readiness is the one rule of launch/readiness.py.
"""
from __future__ import annotations

import os
import shlex
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker
import docker.errors
import httpx
from docker.utils import parse_repository_tag

from pytest_glmf.launch import cleanup, readiness
from pytest_glmf.launch.base import BootError, Server
from pytest_glmf.launch.docker.logs import LogStreamer
from pytest_glmf.launch.docker.spec import (  # noqa: F401 - re-exported: one import for callers
    DEFAULT_CONTAINER_PORT,
    LABEL_HOST,
    LABEL_LANE,
    LABEL_OWNER,
    LABEL_PID,
    LABEL_PID_START,
    LABEL_SESSION,
    OWNER,
    container_name,
    container_spec,
    device_requests,
    flag_value,
    pid_start,
    server_argv,
    session_labels,
)
from pytest_glmf.launch.modeldir import host_path_for, model_dir_provenance
from pytest_glmf.launch.process import boot_error, log_path_for
from pytest_glmf.redact import Redactor

if TYPE_CHECKING:
    from docker.models.containers import Container

    from pytest_glmf.config.lanes import LaneConfig

GPU_DRIVER_REFUSAL = "could not select device driver"


# --- stale containers ------------------------------------------------------------------------------

def _owner_alive(labels: dict[str, str]) -> bool:
    if labels.get(LABEL_HOST) != socket.gethostname():
        return True          # another machine's session: we cannot tell, so never touch it
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass                 # exists, owned by someone else
    start = labels.get(LABEL_PID_START)
    return not start or pid_start(pid) == start


def cleanup_stale(client: "docker.DockerClient", current_session: str | None = None) -> list[str]:
    """Remove containers an earlier session of this plugin on this host left on the engine after
    it died without teardown (SIGKILL, OOM killer, a lost terminal). Returns their names, for the
    session to say so. Containers of live sessions, of this session and of other hosts (whose
    processes we cannot see) are left alone."""

    removed = []
    for container in client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={OWNER}"}):
        labels = container.labels or {}
        if labels.get(LABEL_SESSION) == current_session or _owner_alive(labels):
            continue
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            continue         # a concurrent cleanup got it first
        removed.append(container.name)
    return removed


# --- the launcher ----------------------------------------------------------------------------------

def _host_port(container: "Container", port: int) -> int | None:
    bindings = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
    for binding in bindings.get(f"{port}/tcp") or []:
        if binding.get("HostPort"):
            return int(binding["HostPort"])
    return None


def _remove(container: "Container", stop_timeout_s: float) -> None:
    try:
        container.stop(timeout=int(stop_timeout_s))
    except docker.errors.APIError:
        pass                 # already stopped, or gone: removal below settles it
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass


def _created_by(client: "docker.DockerClient", spec: dict[str, Any]) -> "Container | None":
    """The container `spec` created, if the engine made it before we got its answer."""

    try:
        container = client.containers.get(spec["name"])
    except docker.errors.DockerException:
        return None
    same = (container.labels or {}).get(LABEL_SESSION) == spec["labels"][LABEL_SESSION]
    return container if same else None


def engine_address(client: "docker.DockerClient") -> str:
    return os.environ.get("DOCKER_HOST") or str(client.api.base_url)


def local_socket_problem(host: str | None = None) -> str | None:
    """Why the local engine socket cannot answer, checked with a socket we close ourselves: the
    SDK leaks its socket when the first connect fails (a ResourceWarning, an error under
    `filterwarnings = error`). None: it accepts connections, or the engine is not a unix socket."""
    host = host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        return None                      # tcp:// or ssh://: the SDK reports it
    path = host[len("unix://"):]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        try:
            sock.connect(path)
        except OSError as exc:
            return f"cannot connect to {path}: {exc.strerror or exc}"
    return None


class DockerLauncher:
    name = "docker"

    def __init__(self, client: "docker.DockerClient | None" = None, poll_interval_s: float = 0.25,
                 stop_timeout_s: float = 10.0) -> None:
        self._client = client
        self._owns_client = client is None   # a client made here is closed with its server
        self.poll_interval_s = poll_interval_s
        self.stop_timeout_s = stop_timeout_s

    def client(self) -> "docker.DockerClient":
        if self._client is None:
            where = os.environ.get("DOCKER_HOST", "(unset: default socket)")
            hint = "Start one (CI: .ci/docker-engine up) or point DOCKER_HOST at it."
            problem = local_socket_problem()
            if problem:
                raise BootError(f"no Docker engine answers at DOCKER_HOST={where}: {problem}. {hint}", cause="network")
            client = None
            try:
                client = docker.from_env()
                client.ping()
            except docker.errors.DockerException as exc:
                if client is not None:
                    client.close()
                raise BootError(f"no Docker engine answers at DOCKER_HOST={where}: {exc}. {hint}",
                                cause="network") from exc
            self._client = client
        return self._client

    def close(self) -> None:
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    def start(self, lane: "LaneConfig", results_dir: Path, session_id: str) -> Server:
        spec = container_spec(lane, session_id)
        client = self.client()
        created: list["Container"] = []

        def remove_created() -> None:
            container = created[0] if created else _created_by(client, spec)
            if container is not None:
                _remove(container, 2)

        # While booting, SIGTERM (how CI cancels a job) or an exit removes the container: it is not
        # the session's server yet, so nothing else could reach it.
        forget = cleanup.register(f"docker container {spec['name']} (booting)", lambda urgent: remove_created())
        try:
            # The session's start on this engine: first clear what killed sessions left (a GPU
            # held by a forgotten server makes the next boot fail for reasons nobody can see).
            stale = cleanup_stale(client, current_session=session_id)
            created.append(self._create(client, spec, lane))
            server = self._boot(client, created[0], spec, lane, Path(results_dir), session_id)
            server.provenance["stale_containers_removed"] = stale
            return server
        except BaseException as exc:
            # Boot failure, Ctrl-C, or a bug here: the container must not outlive this call
            # (interrupted inside the create call, it exists without us holding it: by name).
            if created or not isinstance(exc, BootError):
                remove_created()
            self.close()
            raise
        finally:
            forget()

    def _create(self, client: "docker.DockerClient", spec: dict[str, Any], lane: "LaneConfig") -> "Container":
        try:
            return client.containers.create(**spec)
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as exc:
            raise boot_error(lane, self.name, f"the engine at {engine_address(client)} refused to create "
                             f"the container: {exc.explanation or exc}", spec["command"], None) from exc
        repo, tag = parse_repository_tag(spec["image"])
        try:
            client.images.pull(repo, tag=tag or "latest")
        except docker.errors.APIError as exc:
            raise boot_error(lane, self.name, f"image {spec['image']} is not on the engine at "
                             f"{engine_address(client)} and pulling it failed (no registry reachable, "
                             f"or no such image): {exc.explanation or exc}", None, None) from exc
        return client.containers.create(**spec)

    def _boot(self, client: "docker.DockerClient", container: "Container", spec: dict[str, Any],
              lane: "LaneConfig", results_dir: Path, session_id: str) -> Server:
        argv = spec["command"]
        log_path = log_path_for(results_dir, session_id, lane)
        try:
            container.start()
        except docker.errors.APIError as exc:
            text = str(exc.explanation or exc)
            if GPU_DRIVER_REFUSAL in text:
                raise boot_error(lane, self.name,
                                 f"the engine at {engine_address(client)} has no GPU runtime: it refused the "
                                 f"GPU request (gpus={lane.gpus!r}) with {text!r}. Install the NVIDIA container "
                                 "toolkit on that host, or point DOCKER_HOST at the GPU host's engine.",
                                 argv, None) from exc
            raise boot_error(lane, self.name, f"the engine refused to start container {container.name}: "
                             f"{text}", argv, None) from exc

        streamer = LogStreamer(container, log_path, watch=readiness.ready_line(lane.engine),
                               redactor=Redactor.from_environment(lane.env, argv))
        streamer.start()
        (container_port,) = [int(p.split("/")[0]) for p in spec["ports"]]
        t0 = time.monotonic()
        base_url = None
        with httpx.Client(timeout=httpx.Timeout(readiness.PROBE_TIMEOUT_S, connect=2.0)) as http:
            while True:
                container.reload()
                elapsed_s = time.monotonic() - t0
                if container.status in ("exited", "dead"):
                    streamer.join(5)
                    code = container.attrs.get("State", {}).get("ExitCode")
                    raise boot_error(lane, self.name, f"container {container.name} (image {lane.image}) "
                                     f"exited with code {code} during boot, after {elapsed_s:.1f} s",
                                     argv, log_path)
                if base_url is None:
                    host_port = _host_port(container, container_port)
                    if host_port is not None:
                        base_url = f"http://127.0.0.1:{host_port}"
                if base_url and readiness.is_ready(http, base_url, streamer.seen):
                    if streamer.watch and not streamer.seen:
                        readiness.catch_up(lambda: streamer.seen)
                    break
                if elapsed_s > lane.boot_timeout_s:
                    said = "its log says ready, but " if streamer.seen else ""
                    raise boot_error(
                        lane, self.name, f"container {container.name} (image {lane.image}) was not ready "
                        f"within boot_timeout_s={lane.boot_timeout_s:g} s: {said}{base_url or 'no published port'} "
                        f"(container port {container_port}) did not answer its health endpoints; "
                        "the container was stopped and removed", argv, log_path)
                time.sleep(self.poll_interval_s)
        boot_s = time.monotonic() - t0

        def stop() -> None:
            forget()
            try:
                _remove(container, self.stop_timeout_s)
            finally:
                streamer.join(5)
                self.close()

        def alive() -> bool:
            try:
                container.reload()
            except docker.errors.NotFound:
                return False
            return container.status == "running"

        # an interrupted session (SIGTERM, exit) must not leave a container running
        forget = cleanup.register(f"docker container {container.name}", lambda urgent: stop())
        provenance = self._provenance(client, container, spec, lane, base_url=base_url,
                                      container_port=container_port, boot_s=round(boot_s, 3))
        return Server(base_url=base_url, engine=lane.engine, lane=lane, boot_log_path=log_path,
                      provenance=provenance, launcher=self.name, _stop=stop, _alive=alive)

    def _provenance(self, client: "docker.DockerClient", container: "Container", spec: dict[str, Any],
                    lane: "LaneConfig", **extra: Any) -> dict[str, Any]:
        image = container.image
        # A revision the lane pins (SGLang's --revision) beats whatever the directory says.
        lane_revision = (getattr(lane, "model_revision", None) or getattr(lane, "revision", None)
                         or flag_value(spec["command"], "--revision"))

        def model(path: str | None, revision: str | None) -> dict[str, Any] | None:
            if not path:
                return None
            return model_dir_provenance(host_path_for(path, lane.volumes), declared=path,
                                        lane_revision=revision)

        try:
            engine_version = client.version().get("Version")
        except Exception:  # noqa: BLE001 - provenance must never fail a boot that succeeded
            engine_version = None
        return {
            "launcher": self.name,
            "docker_host": engine_address(client),
            "docker_engine_version": engine_version,
            "image": lane.image,
            "image_id": image.id if image else None,
            "repo_digests": image.attrs.get("RepoDigests", []) if image else [],
            "container_id": container.id,
            "container_name": container.name,
            "argv": spec["command"],
            "command_line": shlex.join(spec["command"]),
            "gpus": lane.gpus,
            "env": dict(lane.env),
            "model": model(lane.model, lane_revision),
            "draft": model(lane.draft, None),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **extra,
        }


# The launcher protocol as `launch_lane` uses it: a module with `name` and `start`.
name = DockerLauncher.name


def start(lane: "LaneConfig", results_dir: Path, session_id: str) -> Server:
    return DockerLauncher().start(lane, results_dir, session_id)
