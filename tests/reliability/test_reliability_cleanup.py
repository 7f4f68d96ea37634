"""Reliability matrix, cleanup: SIGINT and SIGTERM to a real pytest process, mid-test and mid-boot,
alone and under xdist. Afterwards no server process (by pid, by process group, by cwd+cmdline) and
no listening port of the session is left, and what was recorded before the signal is in the result
file, marked incomplete with the reason. (Containers: the docker engineer's tests, by label.)"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

LANES = """\
schema: 1
lanes:
  ok: {launcher: sim, time_scale: 0.01, boot_timeout_s: 30}
  slowboot: {launcher: sim, time_scale: 1.0, boot_timeout_s: 60, sim_args: [--boot-s, "60"]}
"""
WAITING_TEST = """
import json, os, time

def test_0_measure(glmf_results, glmf_client):
    glmf_results.record("user", "before-signal", glmf_client.get_json("/v1/models"))

def test_1_wait(glmf_server, worker_id):
    info = {"pid": glmf_server.provenance["pid"], "port": glmf_server.provenance["port"]}
    with open("ready.json.tmp", "w") as f:
        json.dump(info, f)
    os.replace("ready.json.tmp", "ready.json")
    time.sleep(120)
"""


def sims_started_in(directory: Path) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline", "cwd", "status"]):
        if "pytest_glmf.sim" in (p.info["cmdline"] or []) and p.info["cwd"] == str(directory) \
                and p.info["status"] != psutil.STATUS_ZOMBIE:
            out.append(p)
    return out


def group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return bool([p for p in psutil.process_iter(["status"]) if _pgid(p) == pgid
                 and p.info["status"] != psutil.STATUS_ZOMBIE])


def _pgid(p: psutil.Process) -> int | None:
    try:
        return os.getpgid(p.pid)
    except (ProcessLookupError, psutil.Error):
        return None


def port_listens(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def start_pytest(directory: Path, *args: str) -> subprocess.Popen:
    (directory / "lanes.yaml").write_text(LANES)
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--glmf-lanes", "lanes.yaml",
                             *args], cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)   # our own group: a signal to it reaches only pytest


@pytest.fixture
def run_dir(tmp_path: Path):
    yield tmp_path
    for p in sims_started_in(tmp_path):      # never leave anything behind, even when a test failed
        p.kill()


@pytest.mark.parametrize("signum, xdist", [(signal.SIGINT, False), (signal.SIGTERM, False),
                                           (signal.SIGTERM, True)],
                         ids=["SIGINT", "SIGTERM", "SIGTERM-xdist"])
def test_signal_mid_test_leaves_nothing_and_keeps_the_results(run_dir: Path, signum: int, xdist: bool) -> None:
    (run_dir / "test_wait.py").write_text(WAITING_TEST)
    proc = start_pytest(run_dir, "--glmf-lane", "ok", "test_wait.py", *(["-n", "2"] if xdist else []))
    try:
        wait_for(lambda: (run_dir / "ready.json").exists(), 60, "the server and the waiting test")
        info = json.loads((run_dir / "ready.json").read_text())
        assert port_listens(info["port"])
        if xdist:   # the worker ran test_0 on its own: let its record land before the signal
            time.sleep(0.5)
        proc.send_signal(signum)
        out = proc.communicate(timeout=30)[0].decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not psutil.pid_exists(info["pid"]) or psutil.Process(info["pid"]).status() == psutil.STATUS_ZOMBIE, out
    assert not group_exists(info["pid"]), out          # the server was its group's leader
    wait_for(lambda: not sims_started_in(run_dir), 5, "no simulator left")
    assert not port_listens(info["port"])
    wait_for(lambda: not group_exists(proc.pid), 10, f"pytest's own group (xdist workers) to be gone\n{out}")
    for child in psutil.Process().children(recursive=True):
        assert "pytest_glmf.sim" not in " ".join(child.cmdline())
    docs = sorted((run_dir / "glmf-results").glob("ok-2*.json"))
    assert len(docs) == 1, out
    doc = json.loads(docs[0].read_text())
    assert doc["gates"]["user"]["before-signal"]["data"], out
    expected = "terminated by SIGTERM" if signum == signal.SIGTERM else "the session was interrupted"
    assert any(r.startswith(expected) for r in doc["incomplete"]), doc["incomplete"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_boot_leaves_no_server(run_dir: Path, signum: int) -> None:
    (run_dir / "test_boot.py").write_text("def test_x(glmf_server): pass\n")
    proc = start_pytest(run_dir, "--glmf-lane", "slowboot", "test_boot.py")
    try:
        wait_for(lambda: bool(sims_started_in(run_dir)), 30, "the booting simulator")
        (server,) = sims_started_in(run_dir)
        time.sleep(1.0)                                  # inside the launcher's readiness wait
        proc.send_signal(signum)
        out = proc.communicate(timeout=30)[0].decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_for(lambda: not sims_started_in(run_dir), 10, f"the booting server to be stopped\n{out}")
    assert not group_exists(server.pid)
