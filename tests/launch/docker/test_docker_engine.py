"""The docker launcher against a real Docker engine: boot, failures, teardown, stale cleanup."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_glmf.config.lanes import LaneConfig
from pytest_glmf.launch import launch_lane
from pytest_glmf.launch.base import BootError
from pytest_glmf.launch.docker import (
    LABEL_LANE,
    LABEL_OWNER,
    OWNER,
    DockerLauncher,
    cleanup_stale,
)

pytestmark = pytest.mark.docker_engine
BUSYBOX_IMAGE = "glmf-test/busybox:1"
PYTHON_IMAGE = "glmf-test/python:1"

BUSY_MACHINE_S = 120      # a deadline, not a wait: an owner process starts and cleans up in ~2 s idle
LaneFactory = Callable[..., LaneConfig]
Leftovers = Callable[[], list[Any]]


def test_sglang_format_server_boots_in_a_container_and_is_removed(
        docker_client: Any, session_id: str, leftovers: Leftovers,
        python_lane: LaneFactory, tmp_path: Path) -> None:
    model = tmp_path / "weights"                           # a model dir, mounted read-only
    (model / ".git").mkdir(parents=True)
    (model / ".git" / "HEAD").write_text("c0ffee" * 6 + "abcd\n")
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"w" * 4096)
    lane = python_lane("tiny", env={"GLMF_PROBE": "yes"}, model="/models/tiny")
    lane.volumes[str(model)] = "/models/tiny"
    t0 = time.monotonic()
    server = launch_lane(lane, tmp_path, session_id)       # the registry path a lanes file takes
    boot_s = time.monotonic() - t0
    try:
        assert server.launcher == "docker" and server.engine == "sglang"
        assert server.base_url.startswith("http://127.0.0.1:")
        assert httpx.get(server.base_url + "/health", timeout=5).status_code == 200
        facts = server.boot_facts
        assert (facts.ready, facts.max_running_requests, facts.requested_max_running_requests) == (True, 8, 48)
        assert facts.max_mamba_cache_size == 40 and facts.problems == []
        assert server.boot_log_path is not None and server.boot_log_path.parent == tmp_path
        assert "The server is fired up and ready to roll!" in server.boot_log
        (container,) = leftovers()
        assert container.labels[LABEL_LANE] == "tiny" and container.labels[LABEL_OWNER] == OWNER
        # published on loopback only, on a host port the engine chose
        (binding,) = container.attrs["NetworkSettings"]["Ports"]["30000/tcp"]
        assert binding["HostIp"] == "127.0.0.1" and server.base_url.endswith(":" + binding["HostPort"])
        assert container.attrs["HostConfig"]["Init"] is True
        assert "GLMF_PROBE=yes" in container.attrs["Config"]["Env"]
        assert all(m["RW"] is False for m in container.attrs["Mounts"])
        prov = server.provenance
        image = docker_client.images.get(PYTHON_IMAGE)
        assert prov["image_id"] == image.id and prov["repo_digests"] == image.attrs["RepoDigests"]
        assert prov["container_id"] == container.id and "--host 0.0.0.0" in prov["command_line"]
        assert prov["model"]["revision"] == "c0ffee" * 6 + "abcd"
        assert prov["model"]["weight_bytes"] == 4096 and prov["model"]["config_sha256"] is not None
        json.dumps(prov)                                    # result files must be able to hold it
        assert server.is_alive()
    finally:
        t1 = time.monotonic()
        server.stop()
        stop_s = time.monotonic() - t1
    server.stop()                                           # idempotent
    assert not server.is_alive()
    assert leftovers() == []
    print(f"container boot {boot_s:.2f} s, stop+remove {stop_s:.2f} s")
    # without init the server ignores SIGTERM as PID 1 and stop waits the full 10 s timeout
    assert stop_s < 8, "init=True should make stop quick (tini forwards SIGTERM)"


def test_gpu_request_on_a_gpu_less_engine_fails_clearly_without_leftover(
        docker_client: Any, session_id: str, leftovers: Leftovers,
        busybox_lane: LaneFactory, tmp_path: Path) -> None:
    lane = busybox_lane("gpu", ["sleep", "60"], gpus="all")
    with pytest.raises(BootError) as err:
        DockerLauncher().start(lane, tmp_path, session_id)
    message = str(err.value)
    assert "has no GPU runtime" in message and "gpus='all'" in message
    assert 'could not select device driver "" with capabilities: [[gpu]]' in message
    assert leftovers() == []     # the `created` one is gone too


def test_container_exiting_during_boot_reports_exit_code_log_tail_and_problems(
        docker_client: Any, session_id: str, leftovers: Leftovers,
        busybox_lane: LaneFactory, tmp_path: Path) -> None:
    script = ("for i in $(seq 1 60); do echo \"[2026-09-11 10:00:02 TP0] capture step $i\"; done; "
              "echo 'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.'; exit 3")
    lane = busybox_lane("oom", ["sh", "-c", script])
    with pytest.raises(BootError) as err:
        DockerLauncher().start(lane, tmp_path, session_id)
    message = str(err.value)
    assert "exited with code 3 during boot" in message and BUSYBOX_IMAGE in message
    assert "last 40 log lines:" in message
    # 60 capture lines + the error line: the tail starts at step 22
    assert "| [2026-09-11 10:00:02 TP0] capture step 22\n" in message and "capture step 21\n" not in message
    assert "problems found in the boot log:" in message and "Not enough memory" in message
    assert leftovers() == []


def test_boot_timeout_stops_and_removes_the_container(
        docker_client: Any, session_id: str, leftovers: Leftovers,
        busybox_lane: LaneFactory, tmp_path: Path) -> None:
    lane = busybox_lane("hang", ["sh", "-c", "echo loading weights; exec sleep 600"], boot_timeout_s=1.5)
    t0 = time.monotonic()
    with pytest.raises(BootError) as err:
        DockerLauncher().start(lane, tmp_path, session_id)
    assert time.monotonic() - t0 < 30          # bounded by the timeout, not by the 600 s sleep
    message = str(err.value)
    assert "was not ready within boot_timeout_s=1.5 s" in message and "stopped and removed" in message
    assert "| loading weights" in message
    assert leftovers() == []


def test_missing_image_names_the_image_and_the_failed_pull(
        docker_client: Any, session_id: str, leftovers: Leftovers,
        busybox_lane: LaneFactory, tmp_path: Path) -> None:
    lane = busybox_lane("nope", ["true"])
    lane.image = "glmf-test/no-such-image:404"
    with pytest.raises(BootError) as err:
        DockerLauncher().start(lane, tmp_path, session_id)
    message = str(err.value)
    assert "image glmf-test/no-such-image:404 is not on the engine" in message
    assert "pulling it failed" in message
    assert leftovers() == []


OWNER_SCRIPT = """
import signal, sys, time
from pathlib import Path
# Ctrl-C as a terminal delivers it, wherever this test runs: a CI job (or `cmd &` in a script)
# may start pytest with SIGINT ignored, every child inherits that, and Python then installs no
# KeyboardInterrupt handler: the test's SIGINT would do nothing and the test time out
signal.signal(signal.SIGINT, signal.default_int_handler)
from pytest_glmf.config.lanes import LaneConfig
from pytest_glmf.launch.docker import DockerLauncher
lane = LaneConfig(**__LANE__)
server = DockerLauncher().start(lane, Path(sys.argv[1]), sys.argv[2])
print("READY", server.provenance["container_name"], flush=True)
time.sleep(600)
"""


def _owner_process(lane: LaneConfig, tmp_path: Path, session_id: str) -> subprocess.Popen[str]:
    """A separate process that launches `lane` and then just sits there, like a pytest session."""
    fields = {k: v for k, v in lane.to_dict().items() if k not in ("source",)}
    code = textwrap.dedent(OWNER_SCRIPT).replace("__LANE__", repr(fields))
    return subprocess.Popen([sys.executable, "-c", code, str(tmp_path), session_id],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_killed_sessions_leftovers_are_cleaned_at_the_next_start(
        docker_client: Any, session_id: str, leftovers: Leftovers,
        busybox_lane: LaneFactory, tmp_path: Path) -> None:
    # engine vllm: ready when /health and /v1/models answer, which busybox httpd can serve
    serve = ("mkdir -p /tmp/w/v1 && cp /www/health /tmp/w/ && echo '{}' > /tmp/w/v1/models"
             " && exec httpd -f -p {port} -h /tmp/w")
    lane = busybox_lane("left", ["sh", "-c", serve], engine="vllm")
    proc = _owner_process(lane, tmp_path, session_id)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("READY"), line + (proc.stdout.read() if proc.stdout else "")
        # a live session's container is never touched
        assert cleanup_stale(docker_client, current_session="other") == []
        proc.send_signal(signal.SIGKILL)                  # no teardown, no atexit: a real kill
        proc.wait(10)
        (left,) = leftovers()
        assert left.status == "running"
        # the next session's launch on this engine removes it first and says so in provenance
        nxt = busybox_lane("next", ["sh", "-c", serve], engine="vllm")
        server = DockerLauncher().start(nxt, tmp_path, session_id + "-next")
        try:
            removed = server.provenance["stale_containers_removed"]
            if os.environ.get("PYTEST_XDIST_WORKER"):
                # another worker's launch may have cleaned it first: then it is simply gone
                assert removed in ([left.name], [])
            else:
                assert removed == [left.name]
            assert leftovers() == []
        finally:
            server.stop()
        assert cleanup_stale(docker_client, current_session="later") == []
    finally:
        proc.kill()
        proc.communicate(timeout=10)                      # also closes the pipe


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_during_boot_removes_the_container(
        docker_client: Any, session_id: str, leftovers: Leftovers,
        busybox_lane: LaneFactory, tmp_path: Path, sig: signal.Signals) -> None:
    lane = busybox_lane("intr", ["sleep", "600"], boot_timeout_s=120)
    proc = _owner_process(lane, tmp_path, session_id)
    try:
        # the boot log file exists once the container runs and the readiness loop has begun
        boot_log = tmp_path / f"intr-{session_id}-server.log"
        deadline = time.monotonic() + BUSY_MACHINE_S
        while not (boot_log.exists() and leftovers()):
            assert time.monotonic() < deadline and proc.poll() is None, "the container never started"
            time.sleep(0.1)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=BUSY_MACHINE_S)
        if sig == signal.SIGINT:
            assert "KeyboardInterrupt" in out
        else:                                             # removed, then died of SIGTERM as asked
            assert proc.returncode == -signal.SIGTERM, out
        assert leftovers() == [], out
    finally:
        proc.kill()
        proc.communicate(timeout=10)                      # also closes the pipe


def test_no_engine_is_a_boot_error_naming_docker_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                      busybox_lane: LaneFactory) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    with pytest.raises(BootError, match=r"no Docker engine answers at DOCKER_HOST=unix://.*absent\.sock"):
        DockerLauncher().start(busybox_lane("x", ["true"]), tmp_path, "s")


def test_recipe_batch_lane_served_by_the_simulator_inside_a_container(
        docker_client: Any, session_id: str, leftovers: Leftovers, python_lane: LaneFactory,
        tmp_path: Path) -> None:
    """The example's batch lane with its real SGLang flags, the image swapped for the host-Python
    test image and the engine for `python -m pytest_glmf.sim`: boot facts and a chat reply come
    through the published port."""
    import dataclasses

    from pytest_glmf.config.lanes import build_server_argv, load_lanes

    batch = load_lanes(Path(__file__).parents[3] / "examples" / "gb300-lanes.yaml")["batch"]
    argv = build_server_argv(batch)
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    flags = argv[3:]
    host_at = flags.index("--host")
    del flags[host_at:host_at + 2]                     # the simulator binds 127.0.0.1 by default
    flags[flags.index("--port") + 1] = "30001"         # behind the relay
    relay = str(Path(__file__).with_name("loopback_relay.py"))
    command = [sys.executable, "-u", relay, "{port}", "30001", "--",
               sys.executable, "-m", "pytest_glmf.sim", *flags, "--time-scale", "0.02"]
    template = python_lane("batch")
    lane = dataclasses.replace(batch, image=template.image, volumes=template.volumes, command=command,
                               gpus=None, ipc_mode=None, shm_size=None, boot_timeout_s=90)
    server = DockerLauncher().start(lane, tmp_path, session_id)
    try:
        facts = server.boot_facts
        assert facts.engine == "sglang" and facts.ready and facts.problems == []
        assert facts.max_running_requests is not None and facts.max_running_requests >= 128
        assert {pool["dtype"] for pool in facts.kv_pools} >= {"bfloat16"}
        reply = httpx.post(server.base_url + "/v1/chat/completions", timeout=30,
                           json={"model": "glm", "max_tokens": 8,
                                 "messages": [{"role": "user", "content": "Say hi."}]})
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] > 0
        assert server.provenance["env"] == {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    finally:
        server.stop()
    assert leftovers() == []
