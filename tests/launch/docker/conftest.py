"""Fixtures for the docker launcher's tests against a REAL Docker engine (`.ci/docker-engine up`).

No engine: outside CI the tests skip with the reason; in CI (`CI=true`) they fail with it, so a
broken engine setup can never turn the docker stage silently green.
"""
from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_glmf.config.lanes import LaneConfig
from pytest_glmf.launch.docker import LABEL_OWNER, LABEL_SESSION, OWNER, local_socket_problem

REPO = Path(__file__).resolve().parents[3]
ENGINE_DIR = Path(os.environ.get("GLMF_DOCKER_DIR", "/tmp/glmf-docker"))
BUSYBOX_IMAGE = "glmf-test/busybox:1"
PYTHON_IMAGE = "glmf-test/python:1"
SERVER_SCRIPT = Path(__file__).with_name("sglang_format_server.py")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def _connect() -> tuple[Any, str | None]:
    """(client, DOCKER_HOST to export or None); raises with the reason the engine is unusable."""
    import docker

    host = os.environ.get("DOCKER_HOST")
    export = None
    if not host and (ENGINE_DIR / "docker.sock").exists():
        export = host = f"unix://{ENGINE_DIR / 'docker.sock'}"   # `.ci/docker-engine up` without eval
    problem = local_socket_problem(host)
    if problem:
        raise RuntimeError(f"no Docker engine reachable (DOCKER_HOST={host or 'unset'}): {problem}")
    try:
        client = docker.DockerClient(base_url=host) if host else docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise RuntimeError(f"no Docker engine reachable (DOCKER_HOST={host or 'unset'}): {exc}") from exc
    missing = [image for image in (BUSYBOX_IMAGE, PYTHON_IMAGE) if not client.images.list(name=image)]
    if missing:
        raise RuntimeError(f"test images {', '.join(missing)} are not on the engine at {host or 'default'}")
    return client, export


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    try:
        client, export = _connect()
    except (RuntimeError, ImportError) as exc:
        reason = f"{exc}; start it with: eval \"$(.ci/docker-engine up)\""
        if in_ci():
            pytest.fail(f"CI=true and the docker tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    with pytest.MonkeyPatch.context() as mp:
        if export:
            mp.setenv("DOCKER_HOST", export)   # docker.from_env() in the launcher and subprocesses
        yield client
    client.close()


def _session_containers(client: Any, session_id: str) -> list[Any]:
    return client.containers.list(all=True, filters={"label": [f"{LABEL_OWNER}={OWNER}",
                                                               f"{LABEL_SESSION}={session_id}"]})


@pytest.fixture
def leftovers(docker_client: Any, session_id: str) -> Callable[[], list[Any]]:
    """Containers of this test's session still on the engine (any state, `created` included)."""
    return lambda: _session_containers(docker_client, session_id)


@pytest.fixture
def session_id(docker_client: Any) -> Iterator[str]:
    """A fresh session id per test; whatever a failing test left under it is removed afterwards
    (each test asserts on leftovers itself: teardown must not be where verdicts happen)."""
    sid = "t" + uuid.uuid4().hex[:12]
    yield sid
    import docker.errors

    for container in _session_containers(docker_client, sid):
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass                          # removed meanwhile by the code under test


def python_mounts() -> dict[str, str]:
    """The host's Python (interpreter prefix, venv, editable checkout) mounted read-only at the same
    paths, so `sys.executable` runs unchanged inside glmf-test/python:1."""
    paths = sorted({"/usr", sys.base_prefix, sys.prefix, str(REPO)})
    kept: list[str] = []
    for p in paths:
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return {p: p for p in kept}


@pytest.fixture
def python_lane() -> Callable[..., LaneConfig]:
    def make(name: str, argv: list[str] | None = None, **fields: Any) -> LaneConfig:
        command = argv or [sys.executable, "-u", str(SERVER_SCRIPT), "--host", "127.0.0.1", "--port", "{port}"]
        fields.setdefault("engine", "sglang")
        fields.setdefault("boot_timeout_s", 60.0)
        return LaneConfig(name=name, launcher="docker", image=PYTHON_IMAGE, command=command,
                          volumes=python_mounts(), **fields)
    return make


@pytest.fixture
def busybox_lane() -> Callable[..., LaneConfig]:
    def make(name: str, argv: list[str], **fields: Any) -> LaneConfig:
        fields.setdefault("engine", "sglang")
        fields.setdefault("boot_timeout_s", 30.0)
        return LaneConfig(name=name, launcher="docker", image=BUSYBOX_IMAGE, command=argv, **fields)
    return make
